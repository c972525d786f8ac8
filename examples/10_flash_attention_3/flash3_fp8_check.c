/* flash3_fp8_check.c — version 4's checks against fp64 (flash3_fp8.h, fa3_fp8_check), from the
 * CPU side of flash3_fp8_reference.c and the harness's fp64 attention (attn/reference.h):
 *
 *   quantise     every scale is the reference's (fa3_fp8_scale_ref of the block's largest
 *                magnitude after the fp64 Hadamard step), and every code's value times its scale
 *                is within half an e4m3 step of the fp64 value (plus the fp32 transform's
 *                rounding, 2^-18 of the block's largest magnitude)
 *   dequantised  O against the fp64 attention of the dequantised inputs (the read-back codes
 *                times the REFERENCE's scales, so a wrong scale on the device shows): all that is
 *                left is P's rounding to e4m3, bounded below
 *   fp64         O against the fp64 attention of the unquantised inputs, within the bound below
 *   lse          the LSE against the dequantised inputs' (the scores' accumulation, fp32's
 *                sums)
 *
 * The bounds, per output row and column d, from e4m3's precision (3 mantissa bits: rounding to
 * nearest moves a value by at most 2^-4 of it, or 2^-10 below the smallest normal 2^-6, in units
 * of the scale). A score is q.k with q, k the rotated rows (H_D / sqrt(D) is orthogonal: the
 * rotation changes no score); the quantised ones are q + dq, k + dk with |dq_c| <= the half step
 * of q_c at its block's scale, so a score moves by at most
 *     E = scale * max over the row's keys t of sum_c (|q_c| |dk_tc| + |dq_c| |k_tc| + |dq_c|
 * |dk_tc|) and every softmax weight w_t by a factor within e^(+-2E). The kernel stores 256 P as
 * e4m3: P(1 + eta) + zeta with |eta| <= 2^-4 and |zeta| <= 2^-18 (the subnormal step 2^-9 / 2 /
 * 256; the rescaling by alpha <= 1 only shrinks it), and divides by l = the sum of the unrounded P
 * (l >= 1). With V's values v + dv, n the keys the row sees:
 *     |o_d - o64_d| <= (e^(2E) - 1) max_t |v_td| + max_t |dv_td|
 *                      + 2^-4 e^(2E) sum_t w_t (|v_td| + |dv_td|) + 2^-18 n max_t (|v_td| +
 * |dv_td|) (fp64), and on the dequantised inputs (E = 0, dv = 0) the last two terms alone. Both add
 * the output's rounding to the dtype (half a unit: 2^-11 |o| f16, 2^-8 bf16) and 2^-16 max_t |v_td|
 * for fp32's sums and exp2. Worst cases: the program prints the largest error over its bound.
 *
 * The tensor cores' FP8 sums are not fp32's: on Hopper a k32 step of wgmma keeps about 14 bits
 * (DeepSeek-V3's technical report, arXiv:2412.19437, section 3.3.2; the simulator's model,
 * common/cudasim/README.md "wgmma": the accumulator and the 32 products aligned to the largest
 * exponent and truncated 13 bits below it, the sum truncated to 14 significant bits). With M the
 * largest magnitude the step's accumulator and products can have and q = 2^-13 of M's power of
 * two (the quantum: no smaller than the hardware's), the step errs by at most
 *     sum over its 33 addends x of min(q, |x|) + 2^-13 (the sum's largest magnitude)
 * (step_error below), and the errors add up step by step, each step's accumulator being the
 * exact partial sum give or take the errors so far. For a score (D / 32 steps along the head
 * dimension, the codes' products, exact in fp64) that gives Ea, the row's largest over its keys,
 * added to E (so w_t moves within e^(+-2(E + Ea))); Ea also bounds the LSE's error with fp32's
 * 2^-16 (1 + |LSE|): the LSE moves no more than the largest score does. For O += P V (four steps
 * per block of 128 keys, in an order of keys within the block that the bound does not need), the
 * same in the normalised weights' units (the rescaling by alpha <= 1 scales an earlier error as
 * it scales the accumulator), with P at most w_t (1 + 2^-4) e^(2 Ea) + 2^-18: both O bounds add
 * it. A bound from the inputs, not the outputs; it grows with the number of steps, slowly.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/fp8.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "flash3_fp8.h"

/* What the checks compute from the inputs and the read-back codes, for the rows checked. */
typedef struct fp8_check {
    const attn_problem *p;
    const attn_host_inputs *in;
    const fa3_fp8_result *got;
    int64_t rows;                         /* the first `rows` rows in memory order */
    double *xq, *xk, *xv;                 /* the fp64 inputs (Q and K rotated when hadamard) */
    float *qd, *kd, *vd;                  /* the codes times the reference's scales */
    double *hq, *hk, *hv;                 /* each value's quantisation error bound */
    float *ref64, *lse64, *refdq, *lsedq; /* fp64 attention: unquantised, dequantised inputs */
    uint8_t *sel;                         /* the rows the references compute */
    double *w, *wd;                       /* one row's softmax weights (unquantised, dequantised) */
    double sum2;                          /* the squares of the fp64 errors, for the RMS */
    int64_t n_el;
} fp8_check;

/* The rows (fp64, rotated when hadamard) of one tensor: x [BH, L, D] from the 16-bit values. */
static double *rotated(const float *x, int64_t rows, int D, bool hadamard) {
    double *y = attn_host_alloc((size_t)(rows * D) * sizeof(double), "the fp64 inputs");
    for (int64_t i = 0; y != NULL && i < rows * D; ++i)
        y[i] = x[i];
    if (y != NULL && hadamard)
        fa3_fp8_hadamard_ref(y, rows, D, y);
    return y;
}

/* The scale fa3_fp8_scale_ref gives a block of largest magnitude amax, as the kernel may have
 * seen it: where amax is within the fp32 transform's rounding of 448 times a power of two, the
 * kernel's maximum may land on either side of it, and either scale is right. */
static double block_scale(double amax, double got) {
    const double s = fa3_fp8_scale_ref(amax);
    if (got != s && (got == fa3_fp8_scale_ref(amax * (1 + 1e-6)) ||
                     got == fa3_fp8_scale_ref(amax * (1 - 1e-6))))
        return got;
    return s;
}

/* One tensor's quantisation checked: each block's scale against fa3_fp8_scale_ref of its largest
 * magnitude in x (fp64), each code against x; its dequantised values with the reference's scales
 * (deq) and each value's error bound (half a step at that scale, plus the fp32 transform's
 * rounding: hs). Returns the number of bad values and scales. */
static int64_t check_tensor(const double *x, int BH, int L, int D, int rows_per_block,
                            const uint8_t *codes, const float *scales, float *deq, double *hs) {
    const int blocks = (L + rows_per_block - 1) / rows_per_block;
    int64_t bad = 0;
    for (int bh = 0; bh < BH; ++bh)
        for (int blk = 0; blk < blocks; ++blk) {
            const int r0 = blk * rows_per_block,
                      r1 = r0 + rows_per_block < L ? r0 + rows_per_block : L;
            const int64_t i0 = ((int64_t)bh * L + r0) * D, i1 = ((int64_t)bh * L + r1) * D;
            double amax = 0.0;
            for (int64_t i = i0; i < i1; ++i)
                amax = fmax(amax, fabs(x[i]));
            const double slack = ldexp(amax, -18), got = scales[(int64_t)bh * blocks + blk];
            const double s = block_scale(amax, got);
            bad += got != s;
            for (int64_t i = i0; i < i1; ++i) {
                const double v = attn_fp8_value(codes[i], ATTN_FP8_E4M3) * s;
                hs[i] = fa3_fp8_half_spacing_ref(x[i] / s) * s + slack;
                bad += !(fabs(v - x[i]) <= hs[i]);
                deq[i] = (float)v;
            }
        }
    return bad;
}

/* The error of `steps` k32 steps of FP8 wgmma (the header's model) whose accumulator is at most
 * acc in magnitude and whose products' magnitudes are x[0..n) (32 a step, fewer when the rest are
 * zero), the exact sum of both being at most sum: each step truncates its accumulator and its
 * products, then its sum. */
static double step_error(double acc, const double *x, int n, double sum, int steps) {
    double big = acc;
    for (int i = 0; i < n; ++i)
        big = fmax(big, x[i]);
    if (big == 0.0)
        return 0.0;
    const double q = ldexp(1.0, ilogb(big) - 13);
    double err = steps * fmin(q, acc);
    for (int i = 0; i < n; ++i)
        err += fmin(q, x[i]);
    return err + steps * ldexp(sum + err, -13);
}

/* The accumulation error of a score: q . k over D / 32 steps of 32 channels, in order. */
static double score_accumulation(const float *q, const float *k, int D) {
    double err = 0.0, partial = 0.0, x[32];
    for (int c0 = 0; c0 < D; c0 += 32) {
        const double acc = fabs(partial) + err;
        double step = 0.0, mag = 0.0;
        for (int c = 0; c < 32; ++c) {
            const double prod = (double)q[c0 + c] * k[c0 + c];
            x[c] = fabs(prod), step += prod, mag += x[c];
        }
        partial += step;
        err += step_error(acc, x, 32, fmin(acc + mag, fabs(partial) + err), 1);
    }
    return err;
}

/* The accumulation error of one output element's P V over the row's n keys: blocks of 128 keys,
 * four k32 steps each in an order of keys the bound does not need (every partial sum within a
 * block is at most the block's start plus all its products). w: the normalised weights, v: the
 * values of the element's column (stride D), grow: how far the kernel's P may exceed w. */
static double pv_accumulation(const double *w, const float *v, int64_t D, int n, double grow) {
    double err = 0.0, partial = 0.0, dev = 0.0, x[128];
    for (int t0 = 0; t0 < n; t0 += 128) {
        const int nb = n - t0 < 128 ? n - t0 : 128;
        double mag = 0.0, step = 0.0, moved = 0.0;
        for (int t = t0; t < t0 + nb; ++t) {
            const double av = fabs(v[t * D]), most = (w[t] * grow + ldexp(1.0, -18)) * av;
            x[t - t0] = most, mag += most, step += w[t] * v[t * D], moved += most - w[t] * av;
        }
        const double acc = fabs(partial) + dev + err + mag; /* any partial sum in the block */
        err += step_error(acc, x, nb, acc, 4);
        partial += step, dev += moved;
    }
    return err;
}

/* Row `row` (head bh) against its n keys: the softmax weights of the unquantised (c->w) and the
 * dequantised (c->wd) scores, normalised, and the score bounds E (*E) and the wgmma
 * accumulation's (*Ed). */
static void row_weights(fp8_check *c, int bh, int64_t row, int n, double *E, double *Ed) {
    const attn_problem *p = c->p;
    const int D = p->D;
    const double *qr = c->xq + row * D, *hqr = c->hq + row * D;
    const float *qdr = c->qd + row * D;
    double m = -INFINITY, md = -INFINITY, l = 0.0, ld = 0.0;
    *E = *Ed = 0.0;
    for (int t = 0; t < n; ++t) {
        const int64_t kt = ((int64_t)bh * p->Lk + t) * D;
        const double *kr = c->xk + kt, *hkr = c->hk + kt;
        double s = 0.0, sd = 0.0, et = 0.0;
        for (int ch = 0; ch < D; ++ch) {
            s += qr[ch] * kr[ch];
            sd += (double)qdr[ch] * c->kd[kt + ch];
            et += fabs(qr[ch]) * hkr[ch] + hqr[ch] * fabs(kr[ch]) + hqr[ch] * hkr[ch];
        }
        c->w[t] = s * p->scale, c->wd[t] = sd * p->scale;
        *E = fmax(*E, et * p->scale);
        *Ed = fmax(*Ed, score_accumulation(qdr, c->kd + kt, D) * p->scale);
        m = fmax(m, c->w[t]), md = fmax(md, c->wd[t]);
    }
    for (int t = 0; t < n; ++t) {
        l += (c->w[t] = exp(c->w[t] - m));
        ld += (c->wd[t] = exp(c->wd[t] - md));
    }
    for (int t = 0; t < n; ++t)
        c->w[t] /= l, c->wd[t] /= ld;
}

/* Row `row`'s outputs against both references within the header's bounds (E, Ed: the row's score
 * bounds), into e. */
static void check_row_outputs(fp8_check *c, int bh, int64_t row, int n, double E, double Ed,
                              fa3_fp8_errors *e) {
    const attn_problem *p = c->p;
    const int D = p->D;
    const double u_out = p->dtype == ATTN_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
    const double grow = exp(2.0 * (E + Ed)), grow_d = exp(2.0 * Ed);
    const double p_grow = (1.0 + ldexp(1.0, -4)) * grow_d; /* P's rounding, the scores' error */
    for (int d = 0; d < D; ++d) {
        double vmax = 0.0, dvmax = 0.0, vdmax = 0.0, wv = 0.0, wvd = 0.0;
        for (int t = 0; t < n; ++t) {
            const int64_t at = ((int64_t)bh * p->Lk + t) * D + d;
            const double av = fabs(c->in->v[at]);
            vmax = fmax(vmax, av);
            dvmax = fmax(dvmax, c->hv[at]);
            vdmax = fmax(vdmax, fabs(c->vd[at]));
            wv += c->w[t] * (av + c->hv[at]);
            wvd += c->wd[t] * fabs(c->vd[at]);
        }
        const double pv = pv_accumulation(c->wd, c->vd + (int64_t)bh * p->Lk * D + d, D, n, p_grow);
        const double b64 = (grow - 1.0) * vmax + dvmax + ldexp(grow * wv, -4) +
                           ldexp((double)n * (vmax + dvmax), -18) + ldexp(vmax, -16) + pv,
                     bdq = (grow_d - 1.0) * vdmax + ldexp(grow_d * wvd, -4) +
                           ldexp((double)n * vdmax, -18) + ldexp(vdmax, -16) + pv;
        const int64_t at = row * D + d;
        const double out = c->got->o[at], e64 = fabs(out - c->ref64[at]),
                     edq = fabs(out - c->refdq[at]);
        const double lim64 = b64 + u_out * (fabs(c->ref64[at]) + b64),
                     limdq = bdq + u_out * (fabs(c->refdq[at]) + bdq);
        e->bad64 += !(e64 <= lim64);
        e->baddq += !(edq <= limdq);
        e->max64 = fmax(e->max64, e64);
        e->maxdq = fmax(e->maxdq, edq);
        e->ratio64 = fmax(e->ratio64, e64 / lim64);
        e->ratiodq = fmax(e->ratiodq, edq / limdq);
        c->sum2 += e64 * e64, ++c->n_el;
        if (isnan(e64) || isnan(edq))
            e->max64 = e->maxdq = e->ratio64 = e->ratiodq = NAN;
    }
}

/* Row `row`'s LSE against the dequantised inputs': the scores' accumulation (Ed, the largest
 * score error) and fp32 sums of exp2 (at most 2^-16 of 1 + |LSE|); -inf where the row sees no
 * key. */
static void check_row_lse(const fp8_check *c, int64_t row, int n, double Ed, fa3_fp8_errors *e) {
    const double want = c->lsedq[row], got = c->got->lse[row];
    const double lim = Ed + ldexp(1.0 + fabs(want), -16);
    if (n == 0 ? !(isinf(got) && got < 0) : !(fabs(got - want) <= lim))
        ++e->badlse;
    if (n > 0) {
        e->lse_max = fmax(e->lse_max, fabs(got - want));
        e->ratio_lse = fmax(e->ratio_lse, fabs(got - want) / lim);
    }
}

/* The largest score error the quantised Q, K make: |scale (q' . k' - q . k)| over every key of
 * the rows checked. */
static double score_error(const fp8_check *c) {
    const attn_problem *p = c->p;
    double worst = 0.0;
    for (int bh = 0; bh < p->B * p->H; ++bh)
        for (int i = 0; i < p->Lq && (int64_t)bh * p->Lq + i < c->rows; ++i)
            for (int t = 0; t < p->Lk; ++t) {
                const int64_t a = ((int64_t)bh * p->Lq + i) * p->D,
                              b = ((int64_t)bh * p->Lk + t) * p->D;
                double s = 0.0, sd = 0.0;
                for (int ch = 0; ch < p->D; ++ch) {
                    s += c->xq[a + ch] * c->xk[b + ch];
                    sd += (double)c->qd[a + ch] * c->kd[b + ch];
                }
                worst = fmax(worst, fabs(sd - s) * p->scale);
            }
    return worst;
}

/* The host buffers of the checks: 0, or 1 after "error: out of host memory ..." on stderr. */
static int alloc_check(fp8_check *c, bool hadamard) {
    const attn_problem *p = c->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t rows = (size_t)p->B * p->H * p->Lq;
    const int D = p->D;
    c->xq = rotated(c->in->q, (int64_t)(qn / D), D, hadamard);
    c->xk = rotated(c->in->k, (int64_t)(kn / D), D, hadamard);
    c->xv = rotated(c->in->v, (int64_t)(kn / D), D, false);
    float **f[] = {&c->qd, &c->kd, &c->vd, &c->ref64, &c->refdq, &c->lse64, &c->lsedq};
    const size_t fn[] = {qn, kn, kn, qn, qn, rows, rows};
    double **h[] = {&c->hq, &c->hk, &c->hv, &c->w, &c->wd};
    const size_t hn[] = {qn, kn, kn, (size_t)p->Lk, (size_t)p->Lk};
    int bad = !c->xq || !c->xk || !c->xv;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; ++i)
        bad |= (*f[i] = attn_host_alloc(fn[i] * sizeof(float), "the checks")) == NULL;
    for (size_t i = 0; i < sizeof h / sizeof h[0]; ++i)
        bad |= (*h[i] = attn_host_alloc(hn[i] * sizeof(double), "the checks")) == NULL;
    bad |= (c->sel = attn_host_alloc(rows, "the checks")) == NULL;
    if (!bad) /* the first `rows` rows in memory order */
        for (size_t r = 0; r < rows; ++r)
            c->sel[r] = (int64_t)r < c->rows;
    return bad;
}

static void free_check(fp8_check *c) {
    void *all[] = {c->xq, c->xk,    c->xv,    c->qd,    c->kd,    c->vd,  c->hq, c->hk,
                   c->hv, c->ref64, c->lse64, c->refdq, c->lsedq, c->sel, c->w,  c->wd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
}

/* The fp64 attention of the unquantised and of the dequantised inputs on the rows checked. */
static int references(fp8_check *c) {
    attn_problem pf = *c->p;
    pf.dtype = ATTN_F32;
    if (attn_reference_rows(&pf, NULL, c->in->q, c->in->k, c->in->v, c->ref64, c->lse64, c->sel) ||
        attn_reference_rows(&pf, NULL, c->qd, c->kd, c->vd, c->refdq, c->lsedq, c->sel)) {
        fprintf(stderr, "error: out of host memory for the reference\n");
        return 1;
    }
    return 0;
}

static void line(const char *check, bool pass, const char *fmt, double a, double b) {
    printf("fa3_fp8 %-12s %s  ", check, pass ? "PASS" : "FAIL");
    printf(fmt, a, b);
    printf("\n");
}

int fa3_fp8_check(const attn_problem *p, bool hadamard, int64_t rows, const attn_host_inputs *in,
                  const fa3_fp8_result *got, fa3_fp8_errors *e) {
    fp8_check c = {.p = p, .in = in, .got = got, .rows = rows};
    const int BH = p->B * p->H, D = p->D;
    memset(e, 0, sizeof *e);
    if (alloc_check(&c, hadamard)) {
        free_check(&c);
        return -1;
    }
    const int64_t bad =
        check_tensor(c.xq, BH, p->Lq, D, FA3_FP8_BM, got->q8, got->q_scale, c.qd, c.hq) +
        check_tensor(c.xk, BH, p->Lk, D, FA3_FP8_BN, got->k8, got->k_scale, c.kd, c.hk) +
        check_tensor(c.xv, BH, p->Lk, D, FA3_FP8_BN, got->v8, got->v_scale, c.vd, c.hv);
    if (references(&c)) {
        free_check(&c);
        return -1;
    }
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < p->Lq && (int64_t)bh * p->Lq + i < rows; ++i) {
            const int n = attn_causal_keys(p, 0, i); /* dense: every sequence alike */
            const int64_t row = (int64_t)bh * p->Lq + i;
            double E, Ed;
            row_weights(&c, bh, row, n, &E, &Ed);
            check_row_outputs(&c, bh, row, n, E, Ed, e);
            check_row_lse(&c, row, n, Ed, e);
        }
    e->rms64 = c.n_el ? sqrt(c.sum2 / (double)c.n_el) : 0.0;
    e->score_max = score_error(&c);
    free_check(&c);
    line("quantise", bad == 0, "%.0f bad codes or scales of %.0f values", (double)bad,
         (double)(attn_problem_q_elems(p) + 2 * attn_problem_k_elems(p)));
    line("dequantised", e->baddq == 0, "max |O - O64(dequantised)| %.3g, %.3g of its bound",
         e->maxdq, e->ratiodq);
    line("fp64", e->bad64 == 0, "max |O - O64| %.3g, %.3g of its bound", e->max64, e->ratio64);
    line("lse", e->badlse == 0, "max |LSE - LSE64(dequantised)| %.3g, %.3g of its bound",
         e->lse_max, e->ratio_lse);
    return (bad != 0) + (e->baddq != 0) + (e->bad64 != 0) + (e->badlse != 0);
}
