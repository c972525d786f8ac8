/* test_check.c — the checker: NaN/inf never pass, mismatches are reported at the right
 * (b,h,i,d) in both layouts, FlashAttention's rule for fp16/bf16, the LSE rule, the gradients'
 * rule and its floor (each bound pinned by planted answers just inside and just over it), the
 * report text;
 * a reference computed on a sample of rows (NaN elsewhere): only the sampled rows are checked. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "attn/check.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "unit_test.h"

typedef struct fixture {
    attn_problem p;
    attn_host_inputs in;
    float *ref, *out, *lowp, *lse;
} fixture;

static void fixture_make(fixture *f, const attn_problem *p) {
    f->p = *p;
    attn_host_inputs_make(&f->in, p, 17u, 1.0f);
    size_t n = f->in.q_elems;
    f->ref = malloc(n * 4);
    f->out = malloc(n * 4);
    f->lowp = malloc(n * 4);
    f->lse = malloc(attn_problem_lse_elems(p) * 4);
    attn_reference(p, NULL, f->in.q, f->in.k, f->in.v, f->ref, f->lse);
    attn_reference_lowp(p, NULL, f->in.q, f->in.k, f->in.v, f->lowp);
    memcpy(f->out, f->ref, n * 4);
}

static void fixture_free(fixture *f) {
    free(f->ref);
    free(f->out);
    free(f->lowp);
    free(f->lse);
    attn_host_inputs_free(&f->in);
}

static bool mismatch_at(const attn_mismatch *m, int b, int h, int i, int d) {
    return m->b == b && m->h == h && m->i == i && m->d == d;
}

static void test_dense_f32(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 9, 11, 8);
    fixture f;
    fixture_make(&f, &p);
    size_t n = f.in.q_elems;

    attn_check_result r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    CHECK(r.pass && r.bad == 0 && r.checked == n && r.max_abs_err == 0.0);
    CHECK(r.bound == attn_tolerance_f32(&p, 1.0).atol);

    /* one element off by 10x the tolerance at (b=1,h=2,i=3,d=4) */
    int64_t at = attn_problem_row_offset(&p, true, 1, 2, 3) + 4;
    f.out[at] += (float)(10 * r.bound + 1e-3 * fabs(f.ref[at]));
    r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    CHECK(!r.pass && r.bad == 1 && r.nonfinite == 0 && r.num_reported == 1);
    CHECK(mismatch_at(&r.first[0], 1, 2, 3, 4));
    CHECK(r.first[0].got == f.out[at] && r.first[0].want == f.ref[at]);
    CHECK(r.max_abs_err > 9 * r.bound);

    /* within tolerance: passes */
    f.out[at] = f.ref[at] + (float)(0.5 * r.bound);
    CHECK(attn_check_output(&p, f.out, f.ref, NULL, 1.0).pass);

    /* NaN and inf fail, are counted non-finite, and do not pollute max_abs_err */
    f.out[at] = NAN;
    f.out[5] = INFINITY;
    r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    CHECK(!r.pass && r.bad == 2 && r.nonfinite == 2 && r.max_abs_err < r.bound);
    CHECK(mismatch_at(&r.first[0], 0, 0, 0, 5)); /* memory order: element 5 comes first */
    CHECK(mismatch_at(&r.first[1], 1, 2, 3, 4) && isnan(r.first[1].got));

    /* an output never written (still NaN) fails everywhere; the first 8 are reported in order */
    attn_fill_nan_host(f.out, n * 4);
    r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    CHECK(!r.pass && r.bad == n && r.nonfinite == n);
    CHECK_EQ(r.num_reported, ATTN_CHECK_MAX_REPORTED);
    CHECK(mismatch_at(&r.first[0], 0, 0, 0, 0) && mismatch_at(&r.first[7], 0, 0, 0, 7));
    fixture_free(&f);
}

static void test_varlen_indices(void) {
    static const int cu_q[3] = {0, 2, 7}, cu_k[3] = {0, 3, 9};
    attn_problem p = unit_varlen_problem(2, 2, 5, 6, 4, cu_q, cu_k);
    fixture f;
    fixture_make(&f, &p);
    int64_t at = attn_problem_row_offset(&p, true, 1, 1, 3) + 2; /* packed ((2+3)*2+1)*4+2 */
    CHECK_EQ(at, 46);
    f.out[at] = -f.out[at] + 1.0f;
    attn_check_result r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    CHECK(!r.pass && r.bad == 1 && r.checked == f.in.q_elems);
    CHECK(mismatch_at(&r.first[0], 1, 1, 3, 2));

    float *lse = malloc(attn_problem_lse_elems(&p) * 4);
    memcpy(lse, f.lse, attn_problem_lse_elems(&p) * 4);
    lse[attn_problem_lse_index(&p, 1, 0, 4)] += 1.0f;
    r = attn_check_lse_at(&p, lse, f.lse, 1.0);
    CHECK(!r.pass && r.bad == 1 && mismatch_at(&r.first[0], 1, 0, 4, -1));
    free(lse);
    fixture_free(&f);
}

/* FlashAttention's rule: a kernel within 2x the same-precision error (+ 1 ulp) passes. */
static void test_lowp_rule(attn_dtype t, double ulp) {
    attn_problem p;
    attn_problem_init(&p, 1, 2, 40, 40, 32);
    p.dtype = t;
    p.causal = true;
    fixture f;
    fixture_make(&f, &p);
    attn_check_result r = attn_check_output(&p, f.lowp, f.ref, f.lowp, 1.0);
    CHECK(r.pass && r.lowp_err > 0);
    CHECK_NEAR(r.bound, 2 * r.lowp_err + ulp, 1e-12);
    CHECK(r.rtol == 0.0);
    CHECK(r.max_abs_err == r.lowp_err);
    int64_t at = attn_problem_row_offset(&p, true, 0, 1, 20) + 7;
    f.out[at] = f.ref[at] + (float)(0.9 * r.bound);
    CHECK(attn_check_output(&p, f.out, f.ref, f.lowp, 1.0).pass);
    f.out[at] = f.ref[at] + (float)(1.1 * r.bound);
    r = attn_check_output(&p, f.out, f.ref, f.lowp, 1.0);
    CHECK(!r.pass && r.bad == 1 && mismatch_at(&r.first[0], 0, 1, 20, 7));
    /* without a same-precision output the bound is the one-ulp floor */
    CHECK_NEAR(attn_check_output(&p, f.ref, f.ref, NULL, 1.0).bound, ulp, 0);
    fixture_free(&f);
}

/* The rule keeps its meaning at every amplitude the tests use: the same-precision output passes,
 * while an all-zero output and the mean of the visible V rows (what a kernel that ignores the
 * scores returns) fail. At amplitude 100 an fp16 S would overflow (q.k reaches 640000). */
static void test_lowp_rule_amplitudes(attn_dtype t) {
    const double amplitudes[] = {1.0, 12.0, 100.0};
    for (int causal = 0; causal <= 1; ++causal)
        for (size_t n = 0; n < sizeof amplitudes / sizeof amplitudes[0]; ++n) {
            attn_problem p;
            attn_problem_init(&p, 1, 2, 100, 100, 64);
            p.dtype = t;
            p.causal = causal;
            attn_host_inputs in;
            attn_host_inputs_make(&in, &p, 29u, (float)amplitudes[n]);
            size_t e = in.q_elems;
            float *ref = malloc(e * 4), *lowp = malloc(e * 4), *zero = calloc(e, 4),
                  *mean = malloc(e * 4);
            attn_reference(&p, NULL, in.q, in.k, in.v, ref, NULL);
            attn_reference_lowp(&p, NULL, in.q, in.k, in.v, lowp);
            for (attn_row r = attn_row_first(&p); r.valid; attn_row_next(&p, &r)) {
                int keys = attn_problem_row_keys(&p, r.b, r.i);
                for (int d = 0; d < p.D; ++d) {
                    double sum = 0.0;
                    for (int j = 0; j < keys; ++j)
                        sum += in.v[attn_problem_row_offset(&p, false, r.b, r.h, j) + d];
                    mean[r.offset + d] = (float)(sum / keys);
                }
            }
            attn_check_result r = attn_check_output(&p, lowp, ref, lowp, amplitudes[n]);
            CHECK(r.pass && isfinite(r.bound) && r.bound < 0.05 * amplitudes[n]);
            CHECK(!attn_check_output(&p, zero, ref, lowp, amplitudes[n]).pass);
            CHECK(!attn_check_output(&p, mean, ref, lowp, amplitudes[n]).pass);
            free(ref);
            free(lowp);
            free(zero);
            free(mean);
            attn_host_inputs_free(&in);
        }
}

/* The LSE's bound as check.c states it, restated here so that a bound loosened there is caught:
 * atol = 2 u ((sqrt(D) + 3) S + sqrt(Lk) + 2), rtol = 8 u, S = |scale| D a^2. */
static double lse_bound(const attn_problem *p, double a, double want) {
    const double u = 0x1p-24, S = fabs((double)p->scale) * p->D * a * a;
    return 2 * u * ((sqrt((double)p->D) + 3) * S + sqrt((double)p->Lk) + 2) + 8 * u * fabs(want);
}

static void test_lse(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 1, 4, 2, 4);
    p.causal = true; /* rows 0, 1 fully masked: lse -inf */
    fixture f;
    fixture_make(&f, &p);
    float lse[4];
    memcpy(lse, f.lse, sizeof lse);
    CHECK(f.lse[0] == -INFINITY && isfinite(f.lse[3]));
    CHECK(attn_check_lse_at(&p, lse, f.lse, 1.0).pass); /* equal infinities match */
    const double b3 = lse_bound(&p, 1.0, f.lse[3]);
    lse[3] = (float)(f.lse[3] + 0.9 * b3); /* just inside the bound, just over it */
    CHECK(attn_check_lse_at(&p, lse, f.lse, 1.0).pass);
    lse[3] = (float)(f.lse[3] - 1.1 * b3);
    CHECK(!attn_check_lse_at(&p, lse, f.lse, 1.0).pass);
    lse[3] = f.lse[3];
    lse[0] = 0.0f; /* a masked row must say -inf */
    CHECK(!attn_check_lse_at(&p, lse, f.lse, 1.0).pass);
    lse[0] = NAN;
    attn_check_result r = attn_check_lse_at(&p, lse, f.lse, 1.0);
    CHECK(!r.pass && r.nonfinite == 1 && mismatch_at(&r.first[0], 0, 0, 0, -1));
    lse[0] = INFINITY;
    CHECK(!attn_check_lse_at(&p, lse, f.lse, 1.0).pass);
    lse[0] = -INFINITY;
    p.dtype = ATTN_F16; /* the LSE is fp32 in every kernel: the same bound for every dtype */
    lse[3] = (float)(f.lse[3] + 1.1 * b3);
    CHECK(!attn_check_lse_at(&p, lse, f.lse, 1.0).pass);
    fixture_free(&f);
}

/* The bound's size, pinned against its statement: at the amplitudes and sizes the examples use,
 * an answer at 0.95 of the stated bound passes and one at 1.05 fails, for every dtype; and an LSE
 * off by 0.01 (near LSE = 3.6, where the old rule 2e-2 (1 + |LSE|) let 0.09 through) fails even
 * at the largest amplitude an exercise uses. */
static void test_lse_bound_pinned(void) {
    static const int dims[] = {16, 64, 128, 576};
    static const double amps[] = {1.0, 4.0, 12.0, 16.0};
    static const attn_dtype types[] = {ATTN_F32, ATTN_F16, ATTN_BF16};
    for (int x = 0; x < 4; ++x)
        for (int y = 0; y < 4; ++y)
            for (int t = 0; t < 3; ++t) {
                attn_problem p;
                attn_problem_init(&p, 1, 1, 1, 1000, dims[x]);
                p.dtype = types[t];
                const float want = 3.6f;
                const double b = lse_bound(&p, amps[y], want);
                const attn_tolerance tol = attn_tolerance_lse(&p, amps[y]);
                CHECK_NEAR(tol.atol + tol.rtol * want, b, 1e-12 * b);
                float got = (float)(want + 0.95 * b);
                CHECK(attn_check_lse_at(&p, &got, &want, amps[y]).pass);
                got = (float)(want + 1.05 * b);
                CHECK(!attn_check_lse_at(&p, &got, &want, amps[y]).pass);
                got = want - 0.01f;
                CHECK(dims[x] > 128 || !attn_check_lse_at(&p, &got, &want, amps[y]).pass);
            }
    /* the grader's largest amplitude (16): the 0.01 error at LSE 3.6 still fails */
    attn_problem p;
    attn_problem_init(&p, 1, 1, 1, 80, 64);
    const float want = 3.6f;
    float got = want + 0.01f;
    CHECK(!attn_check_lse_at(&p, &got, &want, 16.0).pass);
    got = (float)(want + 0.95 * lse_bound(&p, 16.0, want));
    CHECK(attn_check_lse_at(&p, &got, &want, 16.0).pass);
}

/* One ulp of a 16-bit dtype at x > 0, as the formats have it: 10 (fp16) or 7 (bf16) mantissa
 * bits, and below the normal range (2^-14, 2^-126) the subnormal step (2^-24, 2^-133). */
static double ulp16(attn_dtype t, double x) {
    const int mant = t == ATTN_BF16 ? 7 : 10, emin = t == ATTN_BF16 ? -126 : -14;
    int e;
    frexp(x, &e);
    return x < ldexp(1.0, emin) ? ldexp(1.0, emin - mant) : ldexp(1.0, e - 1 - mant);
}

/* The gradient check's fp16/bf16 rule, pinned: max|got - ref| <= 2 max|lowp - ref| + 1 ulp at
 * max|ref|. Planted answers at 0.98 and 1.02 of the stated bound, one element at a time; a NaN
 * output and an element that is off by one index fail; a NaN reference is a slice left out. */
static void test_gradient_rule(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 1, 4, 4, 8);
    p.dtype = ATTN_F16;
    enum { N = 32 };
    float ref[N], lowp[N], got[N];
    for (int e = 0; e < N; ++e) {
        ref[e] = attn_round_dtype((float)(0.5 * sin(e + 1.0)), ATTN_F16);
        lowp[e] = ref[e];
        got[e] = ref[e];
    }
    lowp[5] = ref[5] + 0x1p-9f; /* the same-precision error: 2^-9 */
    double ref_max = 0.0;
    for (int e = 0; e < N; ++e)
        ref_max = fabs(ref[e]) > ref_max ? fabs(ref[e]) : ref_max;
    const double bound = 2 * 0x1p-9 + ulp16(ATTN_F16, ref_max);
    attn_grad_check c = attn_check_gradient(&p, true, got, ref, NULL, lowp, N);
    CHECK(c.bad == 0 && c.checked == N && c.lowp_err == 0x1p-9);
    for (int e = 0; e < N; e += 7) {
        got[e] = (float)(ref[e] + 0.98 * bound);
        CHECK_EQ(attn_check_gradient(&p, true, got, ref, NULL, lowp, N).bad, 0);
        got[e] = (float)(ref[e] - 1.02 * bound);
        c = attn_check_gradient(&p, true, got, ref, NULL, lowp, N);
        CHECK(c.bad == 1 && c.first == e && c.i == e / 8 && c.d == e % 8);
        CHECK_NEAR(c.first_bound, bound, 1e-12);
        got[e] = NAN; /* an unwritten element */
        c = attn_check_gradient(&p, true, got, ref, NULL, lowp, N);
        CHECK(c.bad == 1 && c.first == e && c.checked == N);
        got[e] = ref[e];
    }
    /* an off-by-one: every element holds its neighbour's value */
    for (int e = 0; e < N; ++e)
        got[e] = ref[(e + 1) % N];
    CHECK(attn_check_gradient(&p, true, got, ref, NULL, lowp, N).bad > N / 2);
    /* a slice left out (NaN reference) is skipped whatever is there */
    for (int e = 0; e < N; ++e)
        got[e] = ref[e];
    ref[3] = NAN;
    got[3] = 100.0f;
    c = attn_check_gradient(&p, true, got, ref, NULL, lowp, N);
    CHECK(c.bad == 0 && c.checked == N - 1);
}

/* The floor of the fp16/bf16 gradient check: every row sees one key (Lk = 1), so P = 1, dS = 0
 * and dQ = dK = 0 exactly, in the reference and in the same-precision one: the rule's bound is 0
 * and a kernel's fp32 rounding residue would fail it. The floor, tol_e + ulp(tol_e) (check.c),
 * lets 0.98 of it pass and 1.02 of it fail; in every element of dQ and dK. */
static void test_gradient_floor(attn_dtype t) {
    attn_problem p;
    attn_problem_init(&p, 1, 2, 9, 1, 16);
    p.dtype = t;
    const size_t qn = attn_problem_q_elems(&p), kn = attn_problem_k_elems(&p);
    attn_host_inputs in;
    attn_host_inputs_make(&in, &p, 5u, 1.0f);
    float *dout = malloc(qn * 4);
    attn_fill_uniform(dout, qn, 5u, 3, 1.0f, t);
    float *buf = malloc((qn + 2 * kn) * 4 * 3);
    attn_grads ref = {buf, buf + qn, buf + qn + kn};
    attn_grads tol = {buf + qn + 2 * kn, buf + 2 * qn + 2 * kn, buf + 2 * qn + 3 * kn};
    attn_grads low = {buf + 2 * (qn + 2 * kn), buf + 3 * qn + 4 * kn, buf + 3 * qn + 5 * kn};
    CHECK_EQ(attn_reference_backward(&p, NULL, in.q, in.k, in.v, dout, NULL, &ref, NULL, &tol), 0);
    CHECK_EQ(attn_reference_backward_lowp(&p, NULL, in.q, in.k, in.v, dout, NULL, &low), 0);
    float *got = malloc(qn * 4);
    const struct {
        bool is_q;
        const float *ref, *tol, *low;
        size_t n;
    } g[2] = {{true, ref.dq, tol.dq, low.dq, qn}, {false, ref.dk, tol.dk, low.dk, kn}};
    for (int x = 0; x < 2; ++x) {
        for (size_t e = 0; e < g[x].n; ++e)
            CHECK(g[x].ref[e] == 0.0f && g[x].low[e] == 0.0f && g[x].tol[e] > 0.0f);
        memcpy(got, g[x].ref, g[x].n * 4);
        /* without the floor (tol NULL) the bound is the dtype's smallest step: a residue fails */
        got[0] = 0x1p-22f;
        CHECK_EQ(attn_check_gradient(&p, g[x].is_q, got, g[x].ref, NULL, g[x].low, g[x].n).bad, 1);
        for (size_t e = 0; e < g[x].n; e += 5) {
            const double fl = g[x].tol[e] + ulp16(t, g[x].tol[e]);
            memcpy(got, g[x].ref, g[x].n * 4);
            got[e] = (float)(0.98 * fl);
            CHECK_EQ(
                attn_check_gradient(&p, g[x].is_q, got, g[x].ref, g[x].tol, g[x].low, g[x].n).bad,
                0);
            got[e] = (float)(-1.02 * fl);
            attn_grad_check c =
                attn_check_gradient(&p, g[x].is_q, got, g[x].ref, g[x].tol, g[x].low, g[x].n);
            CHECK(c.bad == 1 && c.first == (int64_t)e);
        }
        /* the floor is small: below 1e-4 of the inputs' scale at amplitude 1 */
        for (size_t e = 0; e < g[x].n; ++e)
            CHECK(g[x].tol[e] < 1e-4f);
    }
    free(got);
    free(buf);
    free(dout);
    attn_host_inputs_free(&in);
}

/* The printed report, read back from a temporary file. */
static void test_print(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 2, 20, 20, 4);
    fixture f;
    fixture_make(&f, &p);
    int64_t at = attn_problem_row_offset(&p, true, 0, 1, 17) + 3;
    f.out[at] = NAN;
    f.out[attn_problem_row_offset(&p, true, 0, 1, 18)] += 1.0f;
    attn_check_result r = attn_check_output(&p, f.out, f.ref, NULL, 1.0);
    FILE *tmp = tmpfile();
    char text[1024] = "";
    attn_check_print(tmp, "output", &r);
    r = attn_check_output(&p, f.ref, f.ref, NULL, 1.0);
    attn_check_print(tmp, "output", &r);
    unit_read_back(tmp, text, sizeof text);
    CHECK_CONTAINS(text, "output: FAIL 2/160 bad (1 non-finite), max abs err ");
    CHECK_CONTAINS(text, "; first: (b=0,h=1,i=17,d=3) got nan want ");
    CHECK_CONTAINS(text, "\n    then: (b=0,h=1,i=18,d=0) got ");
    CHECK_CONTAINS(text, "output: PASS 160 checked, max abs err 0.0e+00 (tolerance ");
    CHECK_CONTAINS(text, " + 1e-04*|want|)");
    fixture_free(&f);
}

/* The reference on a sample of rows: rows it left out (NaN in the reference) are skipped, whatever
 * the kernel wrote there; in a sampled row a NaN or a wrong value from the kernel still fails. */
static void test_sampled_reference(attn_dtype t) {
    attn_problem p;
    attn_problem_init(&p, 2, 2, 70, 70, 8);
    p.dtype = t;
    fixture f; /* f.ref, f.lse, f.lowp: every row; f.out = f.ref */
    fixture_make(&f, &p);
    size_t n = f.in.q_elems, nl = attn_problem_lse_elems(&p);
    int64_t rows = attn_problem_row_count(&p);
    uint8_t *sel = malloc((size_t)rows);
    float *ref = malloc(n * 4), *ref_lse = malloc(nl * 4), *lowp = malloc(n * 4);
    CHECK_EQ(attn_reference_sample_rows(&p, 20, sel), 20);
    attn_reference_rows(&p, NULL, f.in.q, f.in.k, f.in.v, ref, ref_lse, sel);
    attn_reference_lowp_rows(&p, NULL, f.in.q, f.in.k, f.in.v, lowp, sel);
    const float *low = t == ATTN_F32 ? NULL : lowp;
    attn_row sampled = attn_row_at(&p, 0), unsampled = attn_row_at(&p, 0);
    for (attn_row r = attn_row_first(&p); r.valid; attn_row_next(&p, &r))
        *(sel[r.index] ? &sampled : &unsampled) = r; /* the last of each kind */
    CHECK(sel[sampled.index] && !sel[unsampled.index]);

    attn_check_result r = attn_check_output(&p, f.out, ref, low, 1.0);
    CHECK(r.pass && r.checked == 20 * 8 && r.skipped == n - 20 * 8);
    attn_check_result l = attn_check_lse_at(&p, f.lse, ref_lse, 1.0);
    CHECK(l.pass && l.checked == 20 && l.skipped == nl - 20);
    if (t != ATTN_F32) /* the same-precision error comes from the sampled rows alone */
        CHECK(r.lowp_err > 0 &&
              r.lowp_err <= attn_check_output(&p, f.out, f.ref, f.lowp, 1).lowp_err);

    /* anything in a row the reference left out is not looked at */
    f.out[unsampled.offset] = NAN;
    f.out[unsampled.offset + 1] += 100.0f;
    f.lse[unsampled.lse_index] = NAN;
    CHECK(attn_check_output(&p, f.out, ref, low, 1.0).pass);
    CHECK(attn_check_lse_at(&p, f.lse, ref_lse, 1.0).pass);
    /* ... but against the full reference it fails */
    CHECK(!attn_check_output(&p, f.out, f.ref, f.lowp, 1.0).pass);

    /* a NaN from the kernel in a sampled row fails */
    f.out[sampled.offset + 3] = NAN;
    r = attn_check_output(&p, f.out, ref, low, 1.0);
    CHECK(!r.pass && r.bad == 1 && r.nonfinite == 1);
    CHECK(mismatch_at(&r.first[0], sampled.b, sampled.h, sampled.i, 3));
    f.lse[sampled.lse_index] = NAN;
    l = attn_check_lse_at(&p, f.lse, ref_lse, 1.0);
    CHECK(!l.pass && l.bad == 1 && mismatch_at(&l.first[0], sampled.b, sampled.h, sampled.i, -1));
    /* so does a wrong value */
    f.out[sampled.offset + 3] = ref[sampled.offset + 3] + 1.0f;
    r = attn_check_output(&p, f.out, ref, low, 1.0);
    CHECK(!r.pass && r.bad == 1 && r.nonfinite == 0);
    f.lse[sampled.lse_index] = ref_lse[sampled.lse_index] + 1.0f;
    CHECK(!attn_check_lse_at(&p, f.lse, ref_lse, 1.0).pass);

    /* the report says how many elements were left out */
    FILE *tmp = tmpfile();
    char text[1024] = "";
    attn_check_print(tmp, "output", &r);
    unit_read_back(tmp, text, sizeof text);
    CHECK_CONTAINS(text, "output: FAIL 1/160 bad (0 non-finite), 2080 not sampled, max abs err ");
    free(sel);
    free(ref);
    free(ref_lse);
    free(lowp);
    fixture_free(&f);
}

int main(void) {
    test_dense_f32();
    test_varlen_indices();
    test_lowp_rule(ATTN_F16, 0x1p-10);
    test_lowp_rule(ATTN_BF16, 0x1p-7);
    test_lowp_rule_amplitudes(ATTN_F16);
    test_lowp_rule_amplitudes(ATTN_BF16);
    test_lse();
    test_lse_bound_pinned();
    test_gradient_rule();
    test_gradient_floor(ATTN_F16);
    test_gradient_floor(ATTN_BF16);
    test_print();
    test_sampled_reference(ATTN_F32);
    test_sampled_reference(ATTN_BF16);
    return unit_finish();
}
