/* test_reference.c — the CPU oracle against a brute-force implementation written independently
 * here, and against closed-form cases: equal scores, one dominant key, fully masked rows, scores
 * of +-1000; masks (predicate and CSR agree), a score modification (a bias, a cap, dropped
 * entries), variable length, the same-precision variant; the
 * row sample and the reference on selected rows; parallel runs equal to a one-thread run. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn/half.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "unit_test.h"

/* ---- brute force: dense layout only, full score matrix, no shared code with reference.c ------ */

static void brute_force(const attn_problem *p, const float *q, const float *k, const float *v,
                        double *out, double *lse) {
    int Lq = p->Lq, Lk = p->Lk, D = p->D;
    double *w = malloc((size_t)Lk * sizeof(double));
    for (int bh = 0; bh < p->B * p->H; ++bh) {
        for (int i = 0; i < Lq; ++i) {
            const float *qi = q + ((size_t)bh * Lq + i) * D;
            double mx = -HUGE_VAL, sum = 0.0;
            for (int j = 0; j < Lk; ++j) {
                double s = 0.0;
                for (int d = 0; d < D; ++d)
                    s += (double)qi[d] * k[((size_t)bh * Lk + j) * D + d];
                w[j] = (p->causal && j - i > Lk - Lq) ? -HUGE_VAL : s * p->scale;
                mx = fmax(mx, w[j]);
            }
            for (int j = 0; j < Lk; ++j)
                sum += w[j] == -HUGE_VAL ? 0.0 : exp(w[j] - mx);
            for (int d = 0; d < D; ++d) {
                double acc = 0.0;
                for (int j = 0; j < Lk; ++j)
                    acc += sum > 0 && w[j] != -HUGE_VAL
                               ? exp(w[j] - mx) / sum * v[((size_t)bh * Lk + j) * D + d]
                               : 0.0;
                out[((size_t)bh * Lq + i) * D + d] = acc;
            }
            lse[(size_t)bh * Lq + i] = sum > 0 ? mx + log(sum) : -HUGE_VAL;
        }
    }
    free(w);
}

/* Reference vs brute force on random inputs; returns the number of elements that disagree. */
static int compare_with_brute_force(int B, int H, int Lq, int Lk, int D, bool causal, float amp) {
    attn_problem p;
    attn_problem_init(&p, B, H, Lq, Lk, D);
    p.causal = causal;
    attn_host_inputs in;
    attn_host_inputs_make(&in, &p, 99u + (uint64_t)(Lq * 31 + Lk), amp);
    size_t n = in.q_elems, nl = attn_problem_lse_elems(&p);
    float *out = malloc(n * sizeof(float)), *lse = malloc(nl * sizeof(float));
    double *want = malloc(n * sizeof(double)), *want_lse = malloc(nl * sizeof(double));
    int bad = attn_reference(&p, NULL, in.q, in.k, in.v, out, lse) != 0;
    brute_force(&p, in.q, in.k, in.v, want, want_lse);
    for (size_t e = 0; e < n; ++e)
        bad += !(fabs(out[e] - want[e]) <= 1e-6 * (1 + fabs(want[e])));
    for (size_t e = 0; e < nl; ++e)
        bad += isinf(want_lse[e]) ? lse[e] != -INFINITY
                                  : !(fabs(lse[e] - want_lse[e]) <= 1e-6 * (1 + fabs(want_lse[e])));
    free(out);
    free(lse);
    free(want);
    free(want_lse);
    attn_host_inputs_free(&in);
    return bad;
}

static void test_brute_force(void) {
    CHECK_EQ(compare_with_brute_force(2, 3, 5, 7, 4, false, 1.0f), 0);
    CHECK_EQ(compare_with_brute_force(2, 3, 5, 7, 4, true, 1.0f), 0);
    CHECK_EQ(compare_with_brute_force(1, 2, 7, 5, 33, true, 1.0f), 0); /* Lq > Lk: masked rows */
    CHECK_EQ(compare_with_brute_force(1, 1, 1, 1, 1, false, 1.0f), 0);
    CHECK_EQ(compare_with_brute_force(1, 1, 1, 9, 16, true, 3.0f), 0);
    CHECK_EQ(compare_with_brute_force(2, 1, 19, 19, 8, true, 4.0f), 0);
}

/* ---- closed forms ---------------------------------------------------------------------------- */

/* Q = 0: every visible score is 0, so each row outputs the mean of the V rows it sees and
 * lse = log(number of keys seen). Causal, Lq = 3 < Lk = 5: row i sees i + 3 keys. */
static void test_equal_scores(void) {
    enum { Lq = 3, Lk = 5, D = 2 };
    float q[Lq * D] = {0}, k[Lk * D], v[Lk * D], out[Lq * D], lse[Lq];
    for (int j = 0; j < Lk; ++j) {
        k[j * D] = (float)j;
        k[j * D + 1] = -1.0f;
        v[j * D] = (float)(j + 1); /* 1 2 3 4 5 */
        v[j * D + 1] = (float)(10 * j);
    }
    attn_problem p;
    attn_problem_init(&p, 1, 1, Lq, Lk, D);
    p.causal = true;
    CHECK_EQ(attn_reference(&p, NULL, q, k, v, out, lse), 0);
    for (int i = 0; i < Lq; ++i) {
        int n = i + 3;
        CHECK_NEAR(out[i * D], (n + 1) / 2.0, 1e-6);            /* mean of 1..n */
        CHECK_NEAR(out[i * D + 1], 10.0 * (n - 1) / 2.0, 1e-5); /* mean of 0, 10, .. */
        CHECK_NEAR(lse[i], log((double)n), 1e-6);
    }
}

/* One key with a score 100 above the rest: the output is that key's V row (the others weigh
 * e^-100 together). */
static void test_dominant_key(void) {
    enum { Lk = 6, D = 4 };
    float q[D] = {10.0f, 0, 0, 0}, k[Lk * D] = {0}, v[Lk * D], out[D], lse[1];
    k[3 * D] = 20.0f; /* score of key 3: 10 * 20 * scale(=1/2) = 100 */
    for (int e = 0; e < Lk * D; ++e)
        v[e] = (float)(e % 7) - 3.0f;
    attn_problem p;
    attn_problem_init(&p, 1, 1, 1, Lk, D);
    CHECK_EQ(attn_reference(&p, NULL, q, k, v, out, lse), 0);
    for (int d = 0; d < D; ++d)
        CHECK(out[d] == v[3 * D + d]);
    CHECK_NEAR(lse[0], 100.0, 1e-5);
}

/* Causal with Lq = 4 > Lk = 2: rows 0 and 1 see no key (0 output, lse -inf), row 2 sees key 0. */
static void test_fully_masked_rows(void) {
    enum { Lq = 4, Lk = 2, D = 3 };
    float q[Lq * D], k[Lk * D], v[Lk * D], out[Lq * D], lse[Lq], low[Lq * D];
    for (int e = 0; e < Lq * D; ++e)
        q[e] = 0.1f * (float)e;
    for (int e = 0; e < Lk * D; ++e) {
        k[e] = 0.2f * (float)e - 0.3f;
        v[e] = (float)e + 1.0f;
    }
    attn_problem p;
    attn_problem_init(&p, 1, 1, Lq, Lk, D);
    p.causal = true;
    attn_fill_nan_host(out, sizeof out);
    CHECK_EQ(attn_reference(&p, NULL, q, k, v, out, lse), 0);
    for (int d = 0; d < D; ++d) {
        CHECK(out[0 * D + d] == 0.0f && out[1 * D + d] == 0.0f);
        CHECK(out[2 * D + d] == v[d]); /* one key: its V row */
    }
    CHECK(lse[0] == -INFINITY && lse[1] == -INFINITY && isfinite(lse[2]));
    CHECK(!attn_entry_visible(&p, NULL, 0, 0, 1, 0));
    CHECK(attn_entry_visible(&p, NULL, 0, 0, 2, 0) && !attn_entry_visible(&p, NULL, 0, 0, 2, 1));
    attn_fill_nan_host(low, sizeof low);
    CHECK_EQ(attn_reference_lowp(&p, NULL, q, k, v, low), 0);
    CHECK(low[0] == 0.0f && low[D] == 0.0f && low[2 * D] == v[0]);
}

/* Scores of +-1000 overflow exp() unless the row max is subtracted first. */
static void test_large_scores(void) {
    float q[1] = {1000.0f}, k[3] = {1.0f, 1.0f, -1.0f}, v[3] = {2.0f, 4.0f, 8.0f};
    float out[1], lse[1], low[1];
    attn_problem p;
    attn_problem_init(&p, 1, 1, 1, 3, 1); /* D = 1: scale 1, scores 1000, 1000, -1000 */
    CHECK_EQ(attn_reference(&p, NULL, q, k, v, out, lse), 0);
    CHECK(out[0] == 3.0f);
    CHECK_NEAR(lse[0], 1000.0 + log(2.0), 1e-4);
    CHECK_EQ(attn_reference_lowp(&p, NULL, q, k, v, low), 0);
    CHECK(low[0] == 3.0f);

    attn_problem big;
    attn_problem_init(&big, 1, 2, 40, 40, 64);
    attn_host_inputs in;
    attn_host_inputs_make(&in, &big, 5u, 30.0f); /* scores up to ~ +-7000 */
    float *o = malloc(in.q_elems * sizeof(float)), *l = malloc(80 * sizeof(float));
    CHECK_EQ(attn_reference(&big, NULL, in.q, in.k, in.v, o, l), 0);
    int nonfinite = 0;
    for (size_t e = 0; e < in.q_elems; ++e)
        nonfinite += !isfinite(o[e]) || !(fabsf(o[e]) <= 30.0f);
    for (int e = 0; e < 80; ++e)
        nonfinite += !isfinite(l[e]);
    CHECK_EQ(nonfinite, 0);
    free(o);
    free(l);
    attn_host_inputs_free(&in);
}

/* ---- masks ----------------------------------------------------------------------------------- */

typedef struct window {
    int w;
} window;

static int keep_window(const void *ctx, int b, int h, int i, int j) {
    (void)b;
    (void)h;
    int w = ((const window *)ctx)->w;
    return j >= i - w && j <= i + w;
}

static void test_masks_agree(void) {
    enum { B = 2, H = 2, L = 12, D = 8 };
    attn_problem p;
    attn_problem_init(&p, B, H, L, L, D);
    attn_host_inputs in;
    attn_host_inputs_make(&in, &p, 11u, 1.0f);
    window win = {2};
    attn_mask pred = {ATTN_MASK_PREDICATE, keep_window, &win, NULL, NULL};
    /* the same window as CSR rows r = b*L + i */
    int64_t row_ptr[B * L + 1];
    int32_t col_idx[B * L * 5];
    int64_t nnz = 0;
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < L; ++i) {
            row_ptr[b * L + i] = nnz;
            for (int j = 0; j < L; ++j)
                if (keep_window(&win, b, 0, i, j))
                    col_idx[nnz++] = j;
        }
    row_ptr[B * L] = nnz;
    attn_mask csr = {ATTN_MASK_CSR, NULL, NULL, row_ptr, col_idx};
    size_t n = in.q_elems;
    float *a = malloc(n * 4), *c = malloc(n * 4), *dense = malloc(n * 4);
    float la[B * H * L], lc[B * H * L];
    CHECK_EQ(attn_reference(&p, &pred, in.q, in.k, in.v, a, la), 0);
    CHECK_EQ(attn_reference(&p, &csr, in.q, in.k, in.v, c, lc), 0);
    CHECK_EQ(attn_reference(&p, NULL, in.q, in.k, in.v, dense, NULL), 0);
    CHECK(memcmp(a, c, n * 4) == 0);
    CHECK(memcmp(la, lc, sizeof la) == 0);
    CHECK(memcmp(a, dense, n * 4) != 0);
    /* causal and the mask combine: key i+1 is in the window but not causal */
    p.causal = true;
    CHECK(attn_entry_visible(&p, &csr, 1, 0, 5, 3) && !attn_entry_visible(&p, &csr, 1, 0, 5, 6));
    CHECK(!attn_entry_visible(&p, &pred, 1, 0, 5, 2));
    attn_mask none = {ATTN_MASK_NONE, NULL, NULL, NULL, NULL};
    CHECK(attn_entry_visible(&p, &none, 0, 0, 5, 0));
    free(a);
    free(c);
    free(dense);
    attn_host_inputs_free(&in);
}

/* A row whose mask keeps nothing is a fully masked row: 0 and -inf, even without causality. */
static int keep_none_for_row_1(const void *ctx, int b, int h, int i, int j) {
    (void)ctx;
    (void)b;
    (void)h;
    (void)j;
    return i != 1;
}

static void test_mask_empty_row(void) {
    float q[3 * 2] = {1, 2, 3, 4, 5, 6}, k[2 * 2] = {1, 0, 0, 1}, v[2 * 2] = {1, 2, 3, 4};
    float out[3 * 2], lse[3];
    attn_problem p;
    attn_problem_init(&p, 1, 1, 3, 2, 2);
    attn_mask m = {ATTN_MASK_PREDICATE, keep_none_for_row_1, NULL, NULL, NULL};
    CHECK_EQ(attn_reference(&p, &m, q, k, v, out, lse), 0);
    CHECK(out[2] == 0.0f && out[3] == 0.0f && lse[1] == -INFINITY);
    CHECK(isfinite(lse[0]) && isfinite(lse[2]) && out[0] != 0.0f);
}

/* ---- a score modification (FlexAttention's score_mod) ---------------------------------------- */

/* bias[h] * (j - i), capped at +-2 (2 tanh(s / 2)), and key 0 dropped (-inf) for head 1 */
static double biased_capped(const void *ctx, int b, int h, int i, int j, double s) {
    (void)b;
    const double *bias = (const double *)ctx;
    if (h == 1 && j == 0)
        return -INFINITY;
    return 2.0 * tanh((s + bias[h] * (j - i)) / 2.0);
}

/* The reference with a score modification against the brute force of this file on scores
 * modified by hand (the brute force takes no modification: each row is one problem of its own,
 * its keys' scores set through K), with and without a mask; lowp applies it too. */
static void test_score_modification(void) {
    enum { H = 2, Lq = 5, Lk = 7, D = 1 };
    const double bias[H] = {0.5, -0.25};
    float q[H * Lq * D], k[H * Lk * D], v[H * Lk * D], out[H * Lq], lse[H * Lq], low[H * Lq];
    for (int e = 0; e < H * Lq; ++e)
        q[e] = 0.3f * (float)(e % 4) - 0.5f;
    for (int e = 0; e < H * Lk; ++e) {
        k[e] = 0.7f * (float)(e % 5) - 1.0f;
        v[e] = (float)(e % 3) + 0.25f * (float)e;
    }
    attn_problem p;
    attn_problem_init(&p, 1, H, Lq, Lk, D);
    attn_mask m = {ATTN_MASK_NONE, NULL, NULL, NULL, NULL, biased_capped, bias};
    CHECK_EQ(attn_reference(&p, &m, q, k, v, out, lse), 0);
    CHECK_EQ(attn_reference_lowp(&p, &m, q, k, v, low), 0);
    int bad = 0;
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < Lq; ++i) {
            /* one query (q = 1, scale 1), keys whose plain score is the modified one */
            float q1[1] = {1.0f}, kk[Lk], vv[Lk], kept[Lk], vk[Lk];
            int n = 0;
            for (int j = 0; j < Lk; ++j) {
                double s = biased_capped(bias, 0, h, i, j, p.scale * q[h * Lq + i] * k[h * Lk + j]);
                kk[j] = (float)s;
                vv[j] = v[h * Lk + j];
                if (s != -INFINITY) {
                    kept[n] = kk[j];
                    vk[n++] = vv[j];
                }
            }
            attn_problem one;
            attn_problem_init(&one, 1, 1, 1, n, 1);
            one.scale = 1.0f;
            double want[1], want_lse[1];
            brute_force(&one, q1, kept, vk, want, want_lse);
            /* kept[] holds fp32-rounded scores: agreement to fp32 precision */
            bad += !(fabs(out[h * Lq + i] - want[0]) <= 1e-6 * (1 + fabs(want[0])));
            bad += !(fabs(lse[h * Lq + i] - want_lse[0]) <= 1e-6 * (1 + fabs(want_lse[0])));
            bad += !(fabs(low[h * Lq + i] - want[0]) <= 1e-5 * (1 + fabs(want[0])));
        }
    CHECK_EQ(bad, 0);
    /* with a mask that drops row 1 entirely: the row is 0 and -inf, the others unchanged */
    attn_mask both = {
        ATTN_MASK_PREDICATE, keep_none_for_row_1, NULL, NULL, NULL, biased_capped, bias};
    float out2[H * Lq], lse2[H * Lq];
    CHECK_EQ(attn_reference(&p, &both, q, k, v, out2, lse2), 0);
    CHECK(out2[1] == 0.0f && lse2[1] == -INFINITY && out2[Lq + 1] == 0.0f);
    CHECK(out2[0] == out[0] && lse2[2] == lse[2] && out2[Lq + 4] == out[Lq + 4]);
}

/* ---- variable length: each packed sequence equals a dense B=1 problem of its own lengths ----- */

static void test_varlen(void) {
    enum { H = 2, D = 4 };
    static const int cu_q[3] = {0, 3, 8}, cu_k[3] = {0, 6, 10};
    attn_problem p = unit_varlen_problem(2, H, 5, 6, D, cu_q, cu_k);
    p.causal = true;
    attn_host_inputs in;
    CHECK_EQ(attn_host_inputs_make(&in, &p, 3u, 1.0f), 0);
    float out[8 * H * D], lse[H * 8];
    CHECK_EQ(attn_reference(&p, NULL, in.q, in.k, in.v, out, lse), 0);
    int bad = 0;
    for (int b = 0; b < 2; ++b) {
        int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
        attn_problem one;
        attn_problem_init(&one, 1, H, lq, lk, D);
        one.causal = true;
        float q1[5 * H * D], k1[6 * H * D], v1[6 * H * D], o1[5 * H * D], l1[H * 5];
        /* repack [tokens, H, D] -> [H, L, D] */
        for (int h = 0; h < H; ++h)
            for (int d = 0; d < D; ++d) {
                for (int i = 0; i < lq; ++i)
                    q1[(h * lq + i) * D + d] = in.q[((cu_q[b] + i) * H + h) * D + d];
                for (int j = 0; j < lk; ++j) {
                    k1[(h * lk + j) * D + d] = in.k[((cu_k[b] + j) * H + h) * D + d];
                    v1[(h * lk + j) * D + d] = in.v[((cu_k[b] + j) * H + h) * D + d];
                }
            }
        attn_reference(&one, NULL, q1, k1, v1, o1, l1);
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < lq; ++i) {
                bad += l1[h * lq + i] != lse[h * 8 + cu_q[b] + i];
                for (int d = 0; d < D; ++d)
                    bad += o1[(h * lq + i) * D + d] != out[((cu_q[b] + i) * H + h) * D + d];
            }
    }
    CHECK_EQ(bad, 0);
    attn_host_inputs_free(&in);
}

/* ---- same precision -------------------------------------------------------------------------- */

static void test_lowp(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 2, 33, 47, 64);
    p.causal = true;
    attn_host_inputs in;
    float *ref = NULL, *low = NULL;
    double err[3] = {0};
    for (int t = ATTN_F32; t <= ATTN_BF16; ++t) {
        p.dtype = (attn_dtype)t;
        attn_host_inputs_make(&in, &p, 21u, 1.0f);
        ref = realloc(ref, in.q_elems * 4);
        low = realloc(low, in.q_elems * 4);
        attn_reference(&p, NULL, in.q, in.k, in.v, ref, NULL);
        CHECK_EQ(attn_reference_lowp(&p, NULL, in.q, in.k, in.v, low), 0);
        int unrounded = 0;
        for (size_t e = 0; e < in.q_elems; ++e) {
            err[t] = fmax(err[t], fabs(low[e] - ref[e]));
            unrounded += attn_round_dtype(low[e], p.dtype) != low[e];
        }
        CHECK_EQ(unrounded, 0);
        attn_host_inputs_free(&in);
    }
    /* each precision's error is of the size of its unit roundoff */
    CHECK(err[ATTN_F32] > 0 && err[ATTN_F32] < 1e-6);
    CHECK(err[ATTN_F16] > 1e-5 && err[ATTN_F16] < 2e-3);
    CHECK(err[ATTN_BF16] > 1e-4 && err[ATTN_BF16] < 2e-2);
    free(ref);
    free(low);

    /* P is stored in the dtype before P.V: three equal scores give p = bf16(1/3) = 0.333984375,
     * and with v = (1, 1, 3) O = bf16(5 * 0.333984375) = 1.671875, not bf16(5/3) = 1.6640625 */
    attn_problem eq;
    attn_problem_init(&eq, 1, 1, 1, 3, 1);
    eq.dtype = ATTN_BF16;
    float q0[1] = {0.0f}, k3[3] = {1.0f, 2.0f, 3.0f}, v3[3] = {1.0f, 1.0f, 3.0f}, o1[1];
    CHECK_EQ(attn_reference_lowp(&eq, NULL, q0, k3, v3, o1), 0);
    CHECK(o1[0] == 1.671875f);
    p.D = 0;
    CHECK(attn_reference(&p, NULL, NULL, NULL, NULL, NULL, NULL) != 0);
    CHECK(attn_reference_lowp(&p, NULL, NULL, NULL, NULL, NULL) != 0);
}

/* ---- selected rows and the sample ------------------------------------------------------------ */

/* Row n of out (D floats) and of lse is bit for bit the same in both, or both NaN when nan. */
static bool row_equal(const attn_problem *p, const attn_row *r, const float *x, const float *y,
                      const float *xl, const float *yl) {
    if (memcmp(x + r->offset, y + r->offset, (size_t)p->D * sizeof(float)) != 0)
        return false;
    return xl == NULL || memcmp(xl + r->lse_index, yl + r->lse_index, sizeof(float)) == 0;
}

static bool row_nan(const attn_problem *p, const attn_row *r, const float *x, const float *xl) {
    for (int d = 0; d < p->D; ++d)
        if (!isnan(x[r->offset + d]))
            return false;
    return xl == NULL || isnan(xl[r->lse_index]);
}

/* Selected rows equal the full reference's (double and same precision), the others are NaN. */
static void check_selected_rows(const attn_problem *p, const attn_mask *mask, uint64_t seed,
                                const uint8_t *sel) {
    attn_host_inputs in;
    CHECK_EQ(attn_host_inputs_make(&in, p, seed, 2.0f), 0);
    size_t n = in.q_elems, nl = attn_problem_lse_elems(p);
    float *full = malloc(n * 4), *part = malloc(n * 4), *fl = malloc(nl * 4), *pl = malloc(nl * 4);
    float *low_full = malloc(n * 4), *low_part = malloc(n * 4);
    CHECK_EQ(attn_reference(p, mask, in.q, in.k, in.v, full, fl), 0);
    CHECK_EQ(attn_reference_rows(p, mask, in.q, in.k, in.v, part, pl, sel), 0);
    CHECK_EQ(attn_reference_lowp(p, mask, in.q, in.k, in.v, low_full), 0);
    CHECK_EQ(attn_reference_lowp_rows(p, mask, in.q, in.k, in.v, low_part, sel), 0);
    int wrong = 0, selected = 0;
    for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r)) {
        if (sel[r.index]) {
            selected++;
            wrong += !row_equal(p, &r, full, part, fl, pl);
            wrong += !row_equal(p, &r, low_full, low_part, NULL, NULL);
        } else {
            wrong += !row_nan(p, &r, part, pl) || !row_nan(p, &r, low_part, NULL);
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK(selected > 0);
    /* NULL selects every row: the same bits as attn_reference */
    CHECK_EQ(attn_reference_rows(p, mask, in.q, in.k, in.v, part, pl, NULL), 0);
    CHECK(memcmp(full, part, n * 4) == 0 && memcmp(fl, pl, nl * 4) == 0);
    free(full);
    free(part);
    free(fl);
    free(pl);
    free(low_full);
    free(low_part);
    attn_host_inputs_free(&in);
}

static int keep_stripes(const void *ctx, int b, int h, int i, int j) {
    (void)ctx;
    return (i + j + b + h) % 3 != 0 || j == 0;
}

static void test_reference_rows(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 130, 150, 16); /* tile boundaries 63/64, 127/128 exist */
    p.causal = true;
    int64_t rows = attn_problem_row_count(&p);
    uint8_t *sel = malloc((size_t)rows);
    CHECK_EQ(attn_reference_sample_rows(&p, 50, sel), 50);
    check_selected_rows(&p, NULL, 7u, sel);
    attn_mask stripes = {ATTN_MASK_PREDICATE, keep_stripes, NULL, NULL, NULL};
    check_selected_rows(&p, &stripes, 8u, sel);
    /* any selection, not only a sample: every third row */
    for (int64_t n = 0; n < rows; ++n)
        sel[n] = n % 3 == 0;
    p.causal = false;
    p.dtype = ATTN_BF16;
    check_selected_rows(&p, NULL, 9u, sel);
    free(sel);

    /* varlen with an empty sequence */
    static const int cu_q[4] = {0, 70, 70, 200}, cu_k[4] = {0, 50, 60, 190};
    attn_problem_init(&p, 3, 2, 130, 130, 8);
    p.causal = true;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    sel = malloc((size_t)attn_problem_row_count(&p));
    CHECK_EQ(attn_reference_sample_rows(&p, 30, sel), 30);
    check_selected_rows(&p, NULL, 10u, sel);
    free(sel);
}

/* Number of selected rows of slice (b, h), and whether query i of it is selected. */
static int slice_count(const attn_problem *p, const uint8_t *sel, int b, int h) {
    int n = 0;
    for (int i = 0; i < attn_problem_seq_q(p, b); ++i)
        n += sel[attn_problem_row_offset(p, true, b, h, i) / p->D];
    return n;
}

static bool slice_has(const attn_problem *p, const uint8_t *sel, int b, int h, int i) {
    return sel[attn_problem_row_offset(p, true, b, h, i) / p->D] != 0;
}

static void test_sample_rows(void) {
    attn_problem p;
    attn_problem_init(&p, 4, 8, 8192, 8192, 64); /* example 01's big GPU problem */
    int64_t rows = attn_problem_row_count(&p);
    uint8_t *sel = malloc((size_t)rows), *again = malloc((size_t)rows);
    CHECK_EQ(attn_reference_sample_rows(&p, 4096, sel), 4096);
    int64_t total = 0, uneven = 0, missing = 0;
    for (int64_t n = 0; n < rows; ++n)
        total += sel[n];
    CHECK_EQ(total, 4096);
    for (int b = 0; b < 4; ++b)
        for (int h = 0; h < 8; ++h) {
            uneven += slice_count(&p, sel, b, h) != 128; /* 4096 / 32 slices */
            static const int must[] = {0, 63, 64, 127, 128, 8191};
            for (int k = 0; k < 6; ++k)
                missing += !slice_has(&p, sel, b, h, must[k]);
        }
    CHECK_EQ(uneven, 0);
    CHECK_EQ(missing, 0);
    /* spread over the whole slice: some row in each eighth of it */
    int empty_eighths = 0;
    for (int part = 0; part < 8; ++part) {
        int found = 0;
        for (int i = part * 1024; i < (part + 1) * 1024; ++i)
            found += slice_has(&p, sel, 2, 5, i);
        empty_eighths += found == 0;
    }
    CHECK_EQ(empty_eighths, 0);
    /* deterministic */
    attn_reference_sample_rows(&p, 4096, again);
    CHECK(memcmp(sel, again, (size_t)rows) == 0);
    free(sel);
    free(again);

    /* fewer rows than slices: shares of 0 and 1, each slice's one row is its last */
    attn_problem_init(&p, 2, 5, 10, 10, 4);
    sel = malloc(100);
    CHECK_EQ(attn_reference_sample_rows(&p, 4, sel), 4);
    int ones = 0, lasts = 0;
    for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 5; ++h) {
            int c = slice_count(&p, sel, b, h);
            ones += c == 1;
            lasts += c == 1 && slice_has(&p, sel, b, h, 9);
            CHECK(c <= 1);
        }
    CHECK(ones == 4 && lasts == 4);
    /* a short slice: the last and first rows, then evenly spaced ones */
    CHECK_EQ(attn_reference_sample_rows(&p, 40, sel), 40); /* 4 of 10 rows per slice */
    CHECK(slice_has(&p, sel, 1, 3, 9) && slice_has(&p, sel, 1, 3, 0));
    CHECK_EQ(slice_count(&p, sel, 1, 3), 4);
    /* as many rows as there are, or more: all */
    CHECK_EQ(attn_reference_sample_rows(&p, 100, sel), 100);
    CHECK_EQ(slice_count(&p, sel, 0, 0) + slice_count(&p, sel, 1, 4), 20);
    CHECK_EQ(attn_reference_sample_rows(&p, 1000, sel), 100);
    free(sel);

    /* varlen: shares in proportion to the lengths (60 and 20 queries, the empty one gets none) */
    static const int cu_q[4] = {0, 60, 60, 80}, cu_k[4] = {0, 60, 70, 90};
    attn_problem_init(&p, 3, 2, 60, 60, 4);
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    sel = malloc(160);
    CHECK_EQ(attn_reference_sample_rows(&p, 40, sel), 40);
    CHECK(slice_count(&p, sel, 0, 1) == 15 && slice_count(&p, sel, 2, 0) == 5);
    CHECK(slice_has(&p, sel, 2, 1, 19) && slice_has(&p, sel, 2, 1, 0));
    free(sel);
}

/* ---- threads --------------------------------------------------------------------------------- */

/* The parallel reference gives the bits of a one-thread run. Without OpenMP the reference is
 * serial and there is nothing to compare. */
static void test_threads(void) {
#ifdef _OPENMP
    attn_problem p;
    attn_problem_init(&p, 2, 3, 97, 131, 24);
    p.causal = true; /* rows of unequal cost: the dynamic schedule hands them out unevenly */
    attn_host_inputs in;
    attn_host_inputs_make(&in, &p, 4u, 3.0f);
    size_t n = in.q_elems, nl = attn_problem_lse_elems(&p);
    float *one = malloc(n * 4), *many = malloc(n * 4), *l1 = malloc(nl * 4), *lm = malloc(nl * 4);
    int before = omp_get_max_threads();
    omp_set_num_threads(1);
    CHECK_EQ(attn_reference_threads(), 1);
    attn_reference(&p, NULL, in.q, in.k, in.v, one, l1);
    omp_set_num_threads(4); /* more threads than rows per chunk, whatever the machine */
    CHECK_EQ(attn_reference_threads(), 4);
    attn_reference(&p, NULL, in.q, in.k, in.v, many, lm);
    CHECK(memcmp(one, many, n * 4) == 0 && memcmp(l1, lm, nl * 4) == 0);
    p.dtype = ATTN_F16;
    omp_set_num_threads(1);
    attn_reference_lowp(&p, NULL, in.q, in.k, in.v, one);
    omp_set_num_threads(4);
    attn_reference_lowp(&p, NULL, in.q, in.k, in.v, many);
    CHECK(memcmp(one, many, n * 4) == 0);
    omp_set_num_threads(before);
    free(one);
    free(many);
    free(l1);
    free(lm);
    attn_host_inputs_free(&in);
#else
    CHECK_EQ(attn_reference_threads(), 1);
    printf("built without OpenMP: the reference is serial, no parallel run to compare\n");
#endif
}

int main(void) {
    test_brute_force();
    test_equal_scores();
    test_dominant_key();
    test_fully_masked_rows();
    test_large_scores();
    test_masks_agree();
    test_mask_empty_row();
    test_score_modification();
    test_varlen();
    test_lowp();
    test_reference_rows();
    test_sample_rows();
    test_threads();
    return unit_finish();
}
