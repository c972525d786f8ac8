/* test_problem.c — dtypes, validation messages, offsets of both layouts, the row cursor, exact
 * entry/FLOP counts (causal with Lq != Lk, varlen) and the kernel-requirements check. */
#include <math.h>
#include <stdint.h>

#include "attn/problem.h"
#include "unit_test.h"

static void test_dtypes(void) {
    attn_dtype t = ATTN_F32;
    CHECK(attn_dtype_parse("half", &t) == 0 && t == ATTN_F16);
    CHECK(attn_dtype_parse("bfloat16", &t) == 0 && t == ATTN_BF16);
    CHECK(attn_dtype_parse("fp32", &t) == 0 && t == ATTN_F32);
    CHECK(attn_dtype_parse("fp8", &t) != 0);
    CHECK(attn_dtype_parse("F16", &t) != 0);
    CHECK_EQ(attn_dtype_size(ATTN_F32), 4);
    CHECK_EQ(attn_dtype_size(ATTN_BF16), 2);
    CHECK(strcmp(attn_dtype_name(ATTN_BF16), "bf16") == 0);
}

/* validate() of p must fail with a message containing `want`. */
static void expect_invalid(const attn_problem *p, const char *want) {
    char why[200] = "";
    CHECK(attn_problem_validate(p, why, sizeof why) != 0);
    CHECK_CONTAINS(why, want);
}

static void test_validate(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 5, 7, 64);
    CHECK(p.scale == 0.125f && p.dtype == ATTN_F32 && !p.causal);
    CHECK_EQ(attn_problem_validate(&p, NULL, 0), 0);
    p.Lq = 0;
    expect_invalid(&p, "Lq must be >= 1 (got 0)");
    p.Lq = 5;
    p.D = -3;
    expect_invalid(&p, "D must be >= 1 (got -3)");
    p.D = 64;
    p.B = 0;
    expect_invalid(&p, "B must be >= 1 (got 0)");
    p.B = 2;
    p.scale = NAN;
    expect_invalid(&p, "scale must be finite");
    p.scale = 1.0f;
    p.dtype = (attn_dtype)7;
    expect_invalid(&p, "dtype");
    p.dtype = ATTN_F16;
    attn_problem big;
    attn_problem_init(&big, 1 << 20, 1 << 10, 1 << 20, 1 << 20, 256);
    expect_invalid(&big, "too large");

    static const int cu_ok[3] = {0, 4, 9}, cu_k[3] = {0, 2, 3};
    static const int cu_start[3] = {1, 4, 9}, cu_down[3] = {0, 4, 3}, cu_long[3] = {0, 1, 7};
    p.Lq = 5;
    p.cu_seqlens_q = cu_ok;
    p.cu_seqlens_k = cu_k;
    CHECK_EQ(attn_problem_validate(&p, NULL, 0), 0);
    p.cu_seqlens_q = cu_start;
    expect_invalid(&p, "cu_seqlens_q must start at 0 and be non-decreasing");
    p.cu_seqlens_q = cu_down;
    expect_invalid(&p, "cu_seqlens_q must start at 0 and be non-decreasing");
    p.cu_seqlens_q = cu_long;
    expect_invalid(&p, "sequence 1 of cu_seqlens_q has length 6, more than Lq = 5");
    p.cu_seqlens_q = cu_ok;
    p.cu_seqlens_k = NULL;
    expect_invalid(&p, "given together");
}

/* Two descriptions of the same row agree in every field. */
static bool same_row(attn_row x, attn_row y) {
    return x.valid == y.valid && x.b == y.b && x.h == y.h && x.i == y.i && x.index == y.index &&
           x.offset == y.offset && x.lse_index == y.lse_index;
}

static void test_dense_layout(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 5, 7, 4);
    CHECK(!attn_problem_is_varlen(&p));
    CHECK_EQ(attn_problem_q_rows(&p), 10);
    CHECK_EQ(attn_problem_k_rows(&p), 14);
    CHECK_EQ(attn_problem_q_elems(&p), 2 * 3 * 5 * 4);
    CHECK_EQ(attn_problem_k_elems(&p), 2 * 3 * 7 * 4);
    CHECK_EQ(attn_problem_lse_elems(&p), 2 * 3 * 5);
    CHECK_EQ(attn_problem_seq_q(&p, 1), 5);
    CHECK_EQ(attn_problem_seq_k(&p, 1), 7);
    CHECK_EQ(attn_problem_row_offset(&p, true, 1, 2, 3), ((1 * 3 + 2) * 5 + 3) * 4);
    CHECK_EQ(attn_problem_row_offset(&p, false, 1, 2, 6), ((1 * 3 + 2) * 7 + 6) * 4);
    CHECK_EQ(attn_problem_lse_index(&p, 1, 2, 3), (1 * 3 + 2) * 5 + 3);

    /* the cursor visits every row once, in memory order: offsets step by D */
    int rows = 0, bad = 0;
    for (attn_row r = attn_row_first(&p); r.valid; attn_row_next(&p, &r)) {
        bad += r.offset != (int64_t)rows * p.D;
        bad += r.lse_index != rows;
        bad += r.offset != attn_problem_row_offset(&p, true, r.b, r.h, r.i);
        bad += !same_row(r, attn_row_at(&p, rows));
        rows++;
    }
    CHECK_EQ(rows, 30);
    CHECK_EQ(attn_problem_row_count(&p), 30);
    CHECK_EQ(bad, 0);
    attn_row r = attn_row_at(&p, 29); /* the last row */
    CHECK(r.valid && r.b == 1 && r.h == 2 && r.i == 4 && r.index == 29);
    CHECK(!attn_row_at(&p, 30).valid && !attn_row_at(&p, -1).valid);
}

static void test_varlen_layout(void) {
    /* three sequences of 3, 0 and 5 queries; 5, 1 and 4 keys */
    static const int cu_q[4] = {0, 3, 3, 8}, cu_k[4] = {0, 5, 6, 10};
    attn_problem p = unit_varlen_problem(3, 2, 5, 5, 4, cu_q, cu_k);
    CHECK_EQ(attn_problem_validate(&p, NULL, 0), 0);
    CHECK(attn_problem_is_varlen(&p));
    CHECK_EQ(attn_problem_q_rows(&p), 8);
    CHECK_EQ(attn_problem_k_rows(&p), 10);
    CHECK_EQ(attn_problem_q_elems(&p), 8 * 2 * 4);
    CHECK_EQ(attn_problem_lse_elems(&p), 16);
    CHECK_EQ(attn_problem_seq_q(&p, 1), 0);
    CHECK_EQ(attn_problem_seq_k(&p, 2), 4);
    CHECK_EQ(attn_problem_row_offset(&p, true, 2, 1, 4), ((3 + 4) * 2 + 1) * 4);
    CHECK_EQ(attn_problem_row_offset(&p, false, 1, 0, 0), ((5 + 0) * 2 + 0) * 4);
    CHECK_EQ(attn_problem_lse_index(&p, 2, 1, 4), 1 * 8 + 3 + 4);

    int rows = 0, bad = 0, lse_seen[16] = {0};
    for (attn_row r = attn_row_first(&p); r.valid; attn_row_next(&p, &r)) {
        bad += r.offset != (int64_t)rows * p.D; /* [total, H, D]: h fastest */
        bad += r.b == 1;                        /* empty sequence: never visited */
        bad += r.offset != attn_problem_row_offset(&p, true, r.b, r.h, r.i);
        bad += !same_row(r, attn_row_at(&p, rows));
        lse_seen[r.lse_index]++;
        rows++;
    }
    CHECK_EQ(rows, 16);
    CHECK_EQ(attn_problem_row_count(&p), 16);
    CHECK_EQ(bad, 0);
    /* row 6 = token 3, head 0: the first query of sequence 2 (the search passes the empty one) */
    attn_row r = attn_row_at(&p, 6);
    CHECK(r.valid && r.b == 2 && r.i == 0 && r.h == 0);
    CHECK(!attn_row_at(&p, 16).valid);
    for (int n = 0; n < 16; ++n)
        bad += lse_seen[n] != 1;
    CHECK_EQ(bad, 0);
}

/* Visible entries by brute force: query i of a head sees key j iff j <= i + Lk - Lq (causal). */
static double brute_entries(int Lq, int Lk, bool causal) {
    double n = 0;
    for (int i = 0; i < Lq; ++i)
        for (int j = 0; j < Lk; ++j)
            n += !causal || j <= i + Lk - Lq;
    return n;
}

static void test_entries(void) {
    static const int shapes[][2] = {{1, 1}, {5, 5}, {4, 9}, {9, 4}, {1, 300}, {300, 1}, {77, 128}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        for (int causal = 0; causal < 2; ++causal) {
            attn_problem p;
            attn_problem_init(&p, 2, 3, shapes[s][0], shapes[s][1], 16);
            p.causal = causal;
            double want = 6 * brute_entries(shapes[s][0], shapes[s][1], causal);
            bad += attn_problem_entries(&p) != want;
            bad += attn_problem_flops(&p) != 4.0 * want * 16;
        }
    }
    CHECK_EQ(bad, 0);
    attn_problem p;
    attn_problem_init(&p, 1, 1, 4, 2, 8);
    p.causal = true; /* rows 0, 1 see nothing; row 2 sees 1 key, row 3 sees 2 */
    CHECK(attn_problem_entries(&p) == 3.0);
    attn_problem_init(&p, 1, 1, 2, 4, 8);
    p.causal = true; /* row 0 sees 3 keys, row 1 sees 4 */
    CHECK(attn_problem_entries(&p) == 7.0);

    static const int cu_q[4] = {0, 3, 3, 8}, cu_k[4] = {0, 5, 6, 10};
    attn_problem_init(&p, 3, 2, 5, 5, 4);
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    CHECK(attn_problem_entries(&p) == 2 * (3 * 5 + 0 + 5 * 4));
    p.causal = true;
    CHECK(attn_problem_entries(&p) ==
          2 * (brute_entries(3, 5, true) + brute_entries(0, 1, true) + brute_entries(5, 4, true)));
}

/* attn_problem_row_keys: row by row the brute-force count, over every row attn_problem_entries. */
static void test_row_keys(void) {
    static const int cu_q[4] = {0, 3, 3, 8}, cu_k[4] = {0, 5, 6, 10};
    static const int shapes[][2] = {{1, 1}, {4, 9}, {9, 4}, {77, 128}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] + 1; ++s) {
        for (int causal = 0; causal < 2; ++causal) {
            attn_problem p;
            if (s < sizeof shapes / sizeof shapes[0]) {
                attn_problem_init(&p, 2, 3, shapes[s][0], shapes[s][1], 16);
            } else { /* varlen, with an empty sequence */
                attn_problem_init(&p, 3, 2, 5, 5, 4);
                p.cu_seqlens_q = cu_q;
                p.cu_seqlens_k = cu_k;
            }
            p.causal = causal;
            double sum = 0;
            for (attn_row r = attn_row_first(&p); r.valid; attn_row_next(&p, &r)) {
                int keys = attn_problem_row_keys(&p, r.b, r.i), want = 0;
                int lq = attn_problem_seq_q(&p, r.b), lk = attn_problem_seq_k(&p, r.b);
                for (int j = 0; j < lk; ++j)
                    want += !causal || j <= r.i + lk - lq;
                bad += keys != want;
                sum += keys;
            }
            bad += sum != attn_problem_entries(&p);
        }
    }
    CHECK_EQ(bad, 0);
}

static void noop_launch(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    (void)b;
    (void)s;
}

static void test_supports(void) {
    attn_kernel k = {
        3,
        "naive",
        "uses wgmma",
        noop_launch,
        {ATTN_DTYPE_BIT(ATTN_F32) | ATTN_DTYPE_BIT(ATTN_F16), 256, 8, false, false, false},
        NULL,
        0,
        NULL};
    attn_problem p;
    char why[200] = "";
    attn_problem_init(&p, 1, 1, 16, 16, 64);
    CHECK_EQ(attn_kernel_supports(&k, &p, false, why, sizeof why), 0);
    p.dtype = ATTN_BF16;
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "dtype bf16 not supported by kernel 'naive' (supports f32, f16)");
    p.dtype = ATTN_F32;
    p.D = 300;
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "D=300 exceeds the kernel's maximum 256");
    p.D = 60;
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "D=60 is not a multiple of 8");
    p.D = 64;
    p.causal = true;
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "causal");
    p.causal = false;
    static const int cu[2] = {0, 16};
    p.cu_seqlens_q = p.cu_seqlens_k = cu;
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "variable-length");
    p.cu_seqlens_q = p.cu_seqlens_k = NULL;
    k.req.gpu_only = true;
    CHECK_EQ(attn_kernel_supports(&k, &p, true, why, sizeof why), 0);
    CHECK(attn_kernel_supports(&k, &p, false, why, sizeof why) != 0);
    CHECK_CONTAINS(why, "kernel 'naive' needs a GPU (uses wgmma); this is the simulator build");

    attn_example ex = {.name = "00_test",
                       .summary = "test",
                       .kernels = &k,
                       .num_kernels = 1,
                       .defaults = {.gpu = {1, 1, 1, 1}, .sim = {1, 1, 1, 1}}};
    CHECK(attn_example_find(&ex, 3) == &k);
    CHECK(attn_example_find(&ex, 1) == NULL);
}

/* attn_reason: the formatted reason, the status given back; no buffer, no write. */
static void test_reason(void) {
    char why[16] = "";
    CHECK_EQ(attn_reason(why, sizeof why, 2, "bad %s %d", "value", 12345678), 2);
    CHECK(strcmp(why, "bad value 12345") == 0); /* cut to the buffer */
    CHECK_EQ(attn_reason(NULL, 0, 1, "nothing %d", 1), 1);
}

int main(void) {
    test_reason();
    test_dtypes();
    test_validate();
    test_dense_layout();
    test_varlen_layout();
    test_entries();
    test_row_keys();
    test_supports();
    return unit_finish();
}
