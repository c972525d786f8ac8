/* check.c — compares a kernel's output with the reference; the rules are stated in check.h.
 *
 * Every comparison is written `!(err <= bound)`: a NaN makes it true, so NaN cannot pass (the
 * form `err > bound` is false for NaN and would let it through). Outputs are also counted as bad
 * when non-finite, whatever the bound. Mismatches are recorded in the memory order of O. */
#include "attn/check.h"

#include <math.h>
#include <string.h>

/* ---- fp32 tolerance --------------------------------------------------------------------------
 * Derivation. Inputs are uniform in [-a, a), so |q_d k_d| <= a^2 and |v| <= a; u = 2^-24.
 *  1. Scores: an fp32 dot product of D terms has error ~ sqrt(D) * u * sum_d |q_d k_d| (the usual
 *     probabilistic bound; the worst case is D*u): ds <= sqrt(D) * u * D * a^2 * |scale|.
 *  2. Softmax turns an absolute score error ds into a relative error of the same size in each
 *     p_j, and o = sum_j p_j v_j then moves by at most ~2 * ds * max|v| = 2 * ds * a.
 *  3. The P.V sum of Lk terms adds ~ sqrt(Lk) * u * sum_j p_j |v_j| <= sqrt(Lk) * u * a; exp,
 *     the division by l and the final rounding add a few u relative to |o| (rtol covers them,
 *     and the error of l = sum_j exp(...), up to Lk*u relative: rtol = 1e-4 allows Lk <= ~1600
 *     in the worst case and any realistic length in the probabilistic one).
 *  Adding 1-3, with a safety factor of 2 on the P.V term and a floor of 16 u a for tiny problems:
 *     atol = 2 * a * u * (sqrt(D) * D * a^2 * |scale| + sqrt(Lk)) + 16 * u * a,  rtol = 1e-4.
 *  atol is clamped to at most 0.1 * a (a tenth of the output range): beyond that, as for
 *  a >= 100 with large D, fp32 softmax itself is ill-conditioned and the check would no longer
 *  separate right from wrong.
 * Measured (unit_tolerance_<backend> --full, tests/unit/test_tolerance.c): plain fp32 attention
 * (attn_reference_lowp) against the double reference, Lq = Lk = L, seeded inputs. "margin" is the
 * smallest tolerance / error over all elements (required: >= 4); "scale" and "drop" are the
 * largest error / tolerance of a kernel using scale 1/D instead of 1/sqrt(D), and of one that
 * drops the last key (required: > 1, i.e. the check fails them). Non-causal rows at L = 2048:
 *      D     L   a |  max err     atol  margin |   scale     drop
 *     16  2048   1 |  8.6e-08  8.3e-06     129 | 1.3e+03  1.4e+02
 *     64  2048   1 |  1.5e-07  1.4e-05     114 | 1.1e+03  8.8e+01
 *    128  2048   1 |  1.6e-07  2.2e-05     156 | 8.3e+02  7.0e+01
 *    256  2048   1 |  2.0e-07  3.7e-05     217 | 4.9e+02  4.1e+01
 *     16  2048  10 |  9.6e-05  2.0e-03      21 | 3.5e+03        -
 *     64  2048  10 |  2.1e-04  7.7e-03      37 | 1.2e+03        -
 *    128  2048  10 |  3.0e-04  1.5e-02      50 | 6.8e+02        -
 *    256  2048  10 |  4.3e-04  3.1e-02      71 | 3.5e+02        -
 * Over the whole grid (L = 1, 100, 512, 2048; causal and not) the smallest margin is 21 (the row
 * above: near-ties between a row's two largest scores); the smallest "drop" at a = 1 is 19
 * (D = 256, L = 2048, causal). At a = 10 the last key often weighs ~e^-30 and dropping it is
 * invisible to any check ("-"); the wrong scale is invisible only with a single key. */
attn_tolerance attn_tolerance_f32(const attn_problem *p, double amplitude) {
    const double u = 0x1p-24;
    double a = amplitude > 0.0 ? amplitude : 1.0;
    double scores = sqrt((double)p->D) * p->D * a * a * fabs((double)p->scale);
    double atol = 2.0 * a * u * (scores + sqrt((double)p->Lk)) + 16.0 * u * a;
    attn_tolerance t = {atol < 0.1 * a ? atol : 0.1 * a, 1e-4};
    return t;
}

/* One unit in the last place at 1.0 for a 16-bit dtype: 2^-10 (fp16), 2^-7 (bf16). */
static double ulp_at_one(attn_dtype t) { return t == ATTN_BF16 ? 0x1p-7 : 0x1p-10; }

/* ---- shared comparison loop ------------------------------------------------------------------ */

static void record_mismatch(attn_check_result *r, const attn_row *row, int d, double got,
                            double want) {
    if (r->num_reported == ATTN_CHECK_MAX_REPORTED)
        return;
    attn_mismatch *m = &r->first[r->num_reported++];
    m->b = row->b;
    m->h = row->h;
    m->i = row->i;
    m->d = d;
    m->got = got;
    m->want = want;
}

/* Accounts for one element. A NaN `want` is a row the reference did not compute: skipped, whatever
 * `got` is. An infinite `want` (the -inf LSE of a fully masked row) is matched only by the same
 * infinity; a non-finite `got` never matches anything else. */
static void compare(attn_check_result *r, const attn_row *row, int d, double got, double want,
                    attn_tolerance tol) {
    if (isnan(want)) {
        r->skipped++;
        return;
    }
    r->checked++;
    if (got == want)
        return;
    double err = fabs(got - want);
    bool finite = isfinite(got) && isfinite(want);
    if (!isfinite(got))
        r->nonfinite++;
    if (finite) {
        r->max_abs_err = err > r->max_abs_err ? err : r->max_abs_err;
        if (want != 0.0 && err / fabs(want) > r->max_rel_err)
            r->max_rel_err = err / fabs(want);
    }
    if (!finite || !(err <= tol.atol + tol.rtol * fabs(want))) {
        r->bad++;
        record_mismatch(r, row, d, got, want);
    }
}

static attn_check_result empty_result(void) {
    attn_check_result r = {0};
    return r;
}

/* ---- output and log-sum-exp ------------------------------------------------------------------ */

/* Largest finite |lowp - ref| over all elements (both layouts are dense arrays of q_elems
 * values). Where the same-precision implementation overflowed (fp16 scores beyond 65504) it says
 * nothing about the attainable accuracy, and an infinite bound would let everything pass. Rows
 * left out of a sample are NaN in both and drop out the same way. */
static double max_abs_diff(const float *x, const float *y, size_t n) {
    double m = 0.0;
    for (size_t e = 0; e < n; ++e) {
        double diff = fabs((double)x[e] - (double)y[e]);
        m = isfinite(diff) && diff > m ? diff : m;
    }
    return m;
}

attn_check_result attn_check_output(const attn_problem *p, const float *out, const float *ref,
                                    const float *lowp, double amplitude) {
    attn_check_result r = empty_result();
    attn_tolerance tol;
    if (p->dtype == ATTN_F32) {
        tol = attn_tolerance_f32(p, amplitude);
    } else { /* FlashAttention's rule; without a lowp output the bound is the one-ulp floor */
        r.lowp_err = lowp ? max_abs_diff(lowp, ref, attn_problem_q_elems(p)) : 0.0;
        tol.atol = 2.0 * r.lowp_err + ulp_at_one(p->dtype);
        tol.rtol = 0.0;
    }
    r.bound = tol.atol;
    r.rtol = tol.rtol;
    for (attn_row row = attn_row_first(p); row.valid; attn_row_next(p, &row))
        for (int d = 0; d < p->D; ++d)
            compare(&r, &row, d, out[row.offset + d], ref[row.offset + d], tol);
    r.pass = r.bad == 0;
    return r;
}

/* ---- log-sum-exp ------------------------------------------------------------------------------
 * Derivation. Every kernel computes LSE_i = m_i + log(l_i) in fp32, whatever the dtype of its
 * inputs and output (the online softmax's running max m and sum l; the tensor-core versions in
 * log2 units, converted back at the end), from scores that are fp32 dot products of the inputs
 * as stored (a product of two fp16/bf16 values is exact in fp32). So one bound serves every
 * dtype. Inputs in [-a, a), u = 2^-24, S = |scale| D a^2 (an upper bound of every |s_ij| and of
 * every sigma_ij = |scale| sum_d |q_d k_d|), n <= Lk keys in the row:
 *  1. Scores: e(s_ij) <= sqrt(D) u S, the output's step 1. LSE is 1-Lipschitz in the largest
 *     score error (dLSE_i/ds_ij = P_ij >= 0, summing to 1): at most sqrt(D) u S.
 *  2. Each term exp(s_ij - m_i): scaling to log2 units and subtracting m round the exponent by
 *     u (|s_ij| + |s_ij - m_i|) log2(e) <= 3 u S (natural units), and exp2 adds 2 u (the GPU's
 *     ex2.approx is within 2 ulp): a relative error of u (3 S + 2) per term, kept by the sum l,
 *     which adds sqrt(n) u of its own (the probabilistic bound the output's tolerance uses).
 *     log turns l's relative error into an absolute one: u (3 S + 2 + sqrt(Lk)).
 *  3. m + log(l) and the conversion from log2 units: a few roundings of size u |LSE|.
 *  With the output's safety factor 2:
 *     atol = 2 u ((sqrt(D) + 3) S + sqrt(Lk) + 2),   rtol = 8 u.
 *  At a = 1, D = 64, Lk = 1024 that is 1.5e-5; at a = 16, D = 128 it is 4.9e-3: an LSE off by
 *  0.01 fails at every amplitude the tests use (tests/unit/test_check.c plants it, and answers
 *  at 0.95 and 1.05 of the bound). Measured on the simulator, the closest a kernel came: 4.5e-6
 *  against 2.1e-5 (example 08's flex_rope, which rotates Q and K itself, D = 128, a = 1); example
 *  03's versions at most 6 % of it (f16 at a = 12, bf16 at L = 1000, fp32 at a = 4), every CTest
 *  case of examples 01-09 within it. A fully masked row's -inf is matched only by -inf. */
attn_tolerance attn_tolerance_lse(const attn_problem *p, double amplitude) {
    const double u = 0x1p-24;
    const double a = amplitude > 0.0 ? amplitude : 1.0;
    const double S = fabs((double)p->scale) * p->D * a * a;
    attn_tolerance t = {2.0 * u * ((sqrt((double)p->D) + 3.0) * S + sqrt((double)p->Lk) + 2.0),
                        8.0 * u};
    return t;
}

attn_check_result attn_check_lse_at(const attn_problem *p, const float *lse, const float *ref,
                                    double amplitude) {
    return attn_check_lse_allowing(p, lse, ref, amplitude, 0.0);
}

attn_check_result attn_check_lse_allowing(const attn_problem *p, const float *lse, const float *ref,
                                          double amplitude, double extra_atol) {
    attn_check_result r = empty_result();
    attn_tolerance tol = attn_tolerance_lse(p, amplitude);
    tol.atol += extra_atol > 0.0 ? extra_atol : 0.0;
    r.bound = tol.atol;
    r.rtol = tol.rtol;
    for (attn_row row = attn_row_first(p); row.valid; attn_row_next(p, &row))
        compare(&r, &row, -1, lse[row.lse_index], ref[row.lse_index], tol);
    r.pass = r.bad == 0;
    return r;
}

/* ---- the backward pass's gradients ----------------------------------------------------------- */

/* One unit in the last place of a 16-bit dtype at x (0 for fp32); below the dtype's normal range
 * its subnormal step (fp16 2^-24, bf16 2^-133), also at x = 0. */
static double ulp_at(attn_dtype t, double x) {
    if (t == ATTN_F32)
        return 0.0;
    const int mant = t == ATTN_BF16 ? 7 : 10;
    const double step = ldexp(1.0, (t == ATTN_BF16 ? -126 : -14) - mant);
    int e;
    frexp(x, &e); /* x = f 2^e, f in [0.5, 1): the ulp of x is 2^(e - 1 - mantissa bits) */
    const double ulp = x == 0.0 ? 0.0 : ldexp(1.0, e - 1 - mant);
    return ulp > step ? ulp : step;
}

/* (b, h, i, d) of element e of a tensor with Q's (is_q) or K's rows, in either layout. */
static void locate(const attn_problem *p, bool is_q, int64_t e, int *b, int *h, int *i, int *d) {
    const int64_t row = e / p->D;
    *d = (int)(e % p->D);
    if (p->cu_seqlens_q == NULL) {
        const int L = is_q ? p->Lq : p->Lk;
        *i = (int)(row % L);
        *h = (int)(row / L % p->H);
        *b = (int)(row / L / p->H);
        return;
    }
    const int *cu = is_q ? p->cu_seqlens_q : p->cu_seqlens_k;
    const int64_t packed = row / p->H;
    int bb = 0;
    while (bb + 1 < p->B && cu[bb + 1] <= packed)
        ++bb;
    *h = (int)(row % p->H);
    *b = bb;
    *i = (int)(packed - cu[bb]);
}

/* The fp16/bf16 bound, FlashAttention's rule with a floor for each element:
 *     bound_e = max(2 max|lowp - ref| + ulp(max|ref|), floor_e),   floor_e = tol_e + ulp(tol_e)
 * Why a floor. The rule's two terms vanish where a gradient is exactly 0 by cancellation (every
 * row sees one key: P = 1, dP_ij = D_i, so dS = 0 and dQ = dK = 0, and the same-precision
 * reference, whose D_i is summed from its own P and dP, gets exactly 0 too). A kernel does not:
 * it computes the scores, P before rounding, dP and D_i = rowsum(dO o O) in fp32, from the
 * forward's LSE, so dP_ij - D_i and P - 1 are fp32 rounding residues instead of 0. Those are
 * what an fp32 backward of the same formulas may be off by, which is exactly the fp32 tolerance
 * tol_e derived in reference_backward.c from the inputs (their scale, D, the keys each row sees);
 * the output's rounding to the dtype adds one ulp at that size (below the normal range the
 * dtype's subnormal step: fp16's 2^-24 = 6e-8 is what the residues round to at amplitude 1).
 * A kernel that does all its arithmetic in fp32 but for the roundings of P, dS and its outputs
 * cannot be held to more than fp32 arithmetic of the same formulas, hence the max (not a sum):
 * where the rule's bound is the larger, as in every case with a nonzero gradient at amplitude
 * 1 (the floor is 1e-5 where the rule allows 1e-4), nothing changes; at amplitude 12 the fp32
 * tolerance of a few elements is the larger (its worst-case forward term grows with the scores).
 * An answer just over the floor fails (tests/unit/test_check.c). tol NULL: the rule alone. */
attn_grad_check attn_check_gradient(const attn_problem *p, bool is_q, const float *got,
                                    const float *ref, const float *tol, const float *lowp,
                                    size_t n) {
    attn_grad_check c;
    memset(&c, 0, sizeof c);
    c.ratio = -1.0;
    c.first = -1;
    double bound = 0.0;
    if (p->dtype != ATTN_F32) {
        double ref_max = 0.0;
        for (size_t e = 0; e < n; ++e) {
            if (isnan(ref[e]))
                continue;
            const double diff = fabs((double)lowp[e] - (double)ref[e]);
            c.lowp_err = isfinite(diff) && diff > c.lowp_err ? diff : c.lowp_err;
            ref_max = fabs(ref[e]) > ref_max ? fabs(ref[e]) : ref_max;
        }
        bound = 2.0 * c.lowp_err + ulp_at(p->dtype, ref_max);
    }
    for (size_t e = 0; e < n; ++e) {
        if (isnan(ref[e])) /* a slice left out of the check */
            continue;
        c.checked++;
        const double floor_e = tol != NULL ? tol[e] + ulp_at(p->dtype, tol[e]) : 0.0;
        const double b = p->dtype == ATTN_F32 ? tol[e] : bound > floor_e ? bound : floor_e;
        const double err = fabs((double)got[e] - (double)ref[e]);
        double ratio = b > 0.0 ? err / b : (err == 0.0 ? 0.0 : INFINITY);
        ratio = isnan(ratio) ? INFINITY : ratio;
        if (!(err <= b) && c.bad++ == 0) { /* NaN fails */
            c.first = (int64_t)e;
            c.first_got = got[e], c.first_want = ref[e], c.first_bound = b;
            locate(p, is_q, (int64_t)e, &c.b, &c.h, &c.i, &c.d);
        }
        if (ratio > c.ratio)
            c.ratio = ratio, c.err = isnan(err) ? INFINITY : err, c.bound = b;
    }
    return c;
}

/* ---- printing -------------------------------------------------------------------------------- */

/* glibc prints the all-ones NaN pattern as "-nan"; show every NaN the same way. */
static void print_value(FILE *f, double x) {
    if (isnan(x))
        fputs("nan", f);
    else
        fprintf(f, "%.6g", x);
}

static void print_mismatch(FILE *f, const attn_mismatch *m) {
    if (m->d >= 0)
        fprintf(f, "(b=%d,h=%d,i=%d,d=%d) got ", m->b, m->h, m->i, m->d);
    else
        fprintf(f, "(b=%d,h=%d,i=%d) got ", m->b, m->h, m->i);
    print_value(f, m->got);
    fputs(" want ", f);
    print_value(f, m->want);
}

void attn_check_print(FILE *f, const char *what, const attn_check_result *r) {
    if (r->pass)
        fprintf(f, "%s: PASS %zu checked", what, r->checked);
    else
        fprintf(f, "%s: FAIL %zu/%zu bad (%zu non-finite)", what, r->bad, r->checked, r->nonfinite);
    if (r->skipped > 0)
        fprintf(f, ", %zu not sampled", r->skipped);
    fprintf(f, ", max abs err %.1e (", r->max_abs_err);
    if (r->rtol > 0.0)
        fprintf(f, "tolerance %.1e + %.0e*|want|)", r->bound, r->rtol);
    else
        fprintf(f, "bound %.1e = 2 x same-precision error %.1e + 1 ulp)", r->bound, r->lowp_err);
    for (int n = 0; n < r->num_reported; ++n) {
        fputs(n == 0 ? "; first: " : "\n    then: ", f);
        print_mismatch(f, &r->first[n]);
    }
    fputc('\n', f);
}
