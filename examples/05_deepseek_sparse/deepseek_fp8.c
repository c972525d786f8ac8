/* deepseek_fp8.c — the CPU oracles of example 05's FP8 indexer (version 8, indexer_fp8), in double
 * precision, written from the e4m3 format's definition (not from the conversion the kernel calls):
 *
 *   ds_fp8_row_scale      a row's scale: the power of two DeepSeek's act_quant picks (ue8m0)
 *   ds_fp8_check_rows     the kernel's quantization: each row's scale is that one, and each code
 *                         is a nearest e4m3 value of x / scale
 *   ds_fp8_decode         codes to their values (exact in fp32)
 *   ds_fp8_scores_ref     the index scores from the kernel's own codes and scales, exactly
 *   ds_fp8_error_bound    how far FP8 may move a score from the fp16/bf16 inputs' exact score
 *   ds_fp8_set_recall     how many of the exact top-k keys a selection on the FP8 scores keeps
 *
 * and, at the end, version 8's check on the driver (ds_fp8_read_back, ds_fp8_check_exact), which
 * ds_check_indexer (deepseek_stages.c) calls on the kernel's output with these oracles.
 *
 * The check of version 8 (deepseek_stages.c) has three parts. (1) The quantization, element by
 * element. (2) The scores against ds_fp8_scores_ref within fp32 rounding (the same 1e-5 of the
 * magnitudes as version 1: ds_check_index_scores); this isolates the kernel's arithmetic. (3) The
 * scores against the exact scores of the unquantized inputs (ds_index_scores_ref) within
 * ds_fp8_error_bound, derived below from e4m3's precision; (1) and (3) fail on a wrong scale.
 *
 * The bound of (3). e4m3 keeps 3 mantissa bits: a value y in e4m3's normal range rounds to
 * nearest with |e4m3(y) - y| <= 2^-4 |y|, and below 2^-6 (the subnormals, steps of 2^-9) with an
 * error of at most 2^-10. In the row's units (x = s y) the quantized x~ satisfies
 * |x~ - x| <= u |x| + delta, u = 2^-4 (plus 2^-22, a margin for the fp32 rounding of a / 448), and
 * delta = 2^-10 s <= 2^-10 * 2 max(amax, 1e-4) / 448 (s is the power of two at or above a / 448).
 * For one product, |q~ k~ - q k| <= |q~ - q| |k~| + |q| |k~ - k|, with |k~| <= (1 + u) |k| +
 * delta_k, and ReLU moves nothing by more than its argument moves (it is 1-Lipschitz), so
 *
 *   |I8(t, s) - I(t, s)| <= sum_j |w_j| sum_d [(u|q| + dq)((1 + u)|k| + dk) + |q|(u|k| + dk)]
 *                           + 1e-5 * sum_j |w_j| sum_d |q k|     (fp32 evaluation, as version 1)
 *
 * a worst case (every rounding at its largest, all the same sign); the measured error is printed
 * beside it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h"

#define E4M3_LARGEST 448.0

/* The e4m3 code's value: s eeee mmm, bias 7, e = 0 subnormal (m 2^-9), 0x7f/0xff NaN. */
double ds_fp8_value(uint8_t code) {
    const int e = (code >> 3) & 15, m = code & 7;
    if ((code & 0x7f) == 0x7f)
        return NAN;
    const double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return code & 0x80 ? -v : v;
}

/* The spacing of e4m3 values around |y| (the subnormals' 2^-9 below 2^-6). */
static double e4m3_spacing(double y) {
    int e;
    frexp(fabs(y), &e); /* |y| in [2^(e-1), 2^e) */
    return e - 1 < -6 ? ldexp(1.0, -9) : ldexp(1.0, e - 1 - 3);
}

float ds_fp8_row_scale(float amax) {
    const float a = amax > 1e-4f ? amax : 1e-4f;
    const float r = a * (1.0f / (float)E4M3_LARGEST); /* fl32, as DeepSeek's kernel rounds it */
    int e;
    const double m = frexp((double)r, &e); /* r = m 2^e, m in [0.5, 1) */
    return (float)ldexp(1.0, m == 0.5 ? e - 1 : e);
}

int ds_fp8_check_rows(const float *x, const uint8_t *codes, const float *scales, int64_t rows,
                      int d, const char *what, char *why, size_t len) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d;
        float amax = 0.0f;
        for (int c = 0; c < d; ++c)
            amax = fabsf(xr[c]) > amax ? fabsf(xr[c]) : amax;
        const float want_scale = ds_fp8_row_scale(amax);
        if (scales[r] != want_scale) {
            snprintf(why, len, "%s row %lld: scale %.9g, want 2^ceil(log2(amax/448)) = %.9g", what,
                     (long long)r, (double)scales[r], (double)want_scale);
            return 1;
        }
        for (int c = 0; c < d; ++c) {
            const double y = (double)xr[c] / scales[r]; /* exact: a power-of-two scale */
            const double v = ds_fp8_value(codes[r * d + c]);
            /* a nearest value: within half a spacing (at a tie either neighbour is as near) */
            if (!(fabs(v - y) <= 0.5 * e4m3_spacing(y)) || fabs(v) > E4M3_LARGEST) {
                snprintf(why, len,
                         "%s row %lld col %d: code 0x%02x = %.9g, not a nearest e4m3 of %.9g", what,
                         (long long)r, c, codes[r * d + c], v, y);
                return 1;
            }
        }
    }
    return 0;
}

void ds_fp8_decode(const uint8_t *codes, int64_t n, float *values) {
    for (int64_t x = 0; x < n; ++x)
        values[x] = (float)ds_fp8_value(codes[x]); /* every e4m3 value is a float */
}

int ds_fp8_scores_ref(const attn_problem *p, int index_heads, int index_dim, const float *q_values,
                      const float *w_scaled, const float *k_values, const float *k_scale, int b,
                      int i, double *scores, double *bound) {
    const int n = ds_index_scores_ref(p, index_heads, index_dim, q_values, k_values, w_scaled, b, i,
                                      scores, bound);
    for (int s = 0; s < n; ++s) { /* the key's scale, after the head sum */
        const double ks = k_scale[attn_problem_token_index(p, false, b, s)];
        scores[s] *= ks;
        if (bound)
            bound[s] *= ks;
    }
    return n;
}

/* The largest |x| of a row, and sum |x|. */
static void row_norms(const float *x, int d, double *amax, double *sum) {
    *amax = 0.0;
    *sum = 0.0;
    for (int c = 0; c < d; ++c) {
        *amax = fabs(x[c]) > *amax ? fabs(x[c]) : *amax;
        *sum += fabs(x[c]);
    }
}

/* The per-product bound summed over d (deepseek_fp8.c's header):
 *   sum_d [(u|q| + dq)((1 + u)|k| + dk) + |q|(u|k| + dk)]
 *     = (2u + u^2) sum|q k| + (1 + u) dk sum|q| + (1 + u) dq sum|k| + D dq dk,
 * so per key only sum_j |w_j| sum_d |q k| (mag, from ds_index_scores_ref) and the key's own
 * sum|k| and delta_k are needed, beside two sums over the query's heads. */
void ds_fp8_error_bound(const attn_problem *p, int index_heads, int index_dim, const float *q,
                        const float *k, const float *w, int b, int i, const double *mag,
                        double *bound) {
    const double u = ldexp(1.0, -4) + ldexp(1.0, -22);
    const int n = attn_problem_row_keys(p, b, i);
    const int64_t r = attn_problem_token_index(p, true, b, i);
    double wq1 = 0.0, wdq = 0.0; /* sum_j |w_j| sum|q_j|, sum_j |w_j| delta_q_j */
    for (int j = 0; j < index_heads; ++j) {
        double qmax, q1;
        row_norms(q + (r * index_heads + j) * index_dim, index_dim, &qmax, &q1);
        const double wj = fabs(w[r * index_heads + j]);
        wq1 += wj * q1;
        wdq += wj * ldexp(2.0 * (qmax > 1e-4 ? qmax : 1e-4) / E4M3_LARGEST, -10);
    }
    for (int s = 0; s < n; ++s) {
        double kmax, k1;
        row_norms(k + attn_problem_token_index(p, false, b, s) * index_dim, index_dim, &kmax, &k1);
        const double dk = ldexp(2.0 * (kmax > 1e-4 ? kmax : 1e-4) / E4M3_LARGEST, -10);
        bound[s] = (2.0 * u + u * u + 1e-5) * mag[s] + (1.0 + u) * dk * wq1 + (1.0 + u) * k1 * wdq +
                   index_dim * dk * wdq;
    }
}

/* A (score, key) pair; sorted by score descending, ties to the lower key. */
typedef struct ranked {
    double score;
    int key;
} ranked;

static int by_score_desc(const void *x, const void *y) {
    const ranked *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->key - b->key;
}

/* The k largest of scores[0 .. n) marked in keep[] (ties to the lower key). */
static int top_k_marks(const double *scores, int n, int k, char *keep) {
    ranked *r = malloc((size_t)n * sizeof(ranked));
    if (r == NULL)
        return 1;
    for (int s = 0; s < n; ++s)
        r[s] = (ranked){scores[s], s};
    qsort(r, (size_t)n, sizeof(ranked), by_score_desc);
    memset(keep, 0, (size_t)n);
    for (int x = 0; x < k && x < n; ++x)
        keep[r[x].key] = 1;
    free(r);
    return 0;
}

double ds_fp8_set_recall(const double *exact, const float *fp8, int n, int k) {
    if (n <= k)
        return 1.0; /* every key is selected either way */
    char *a = malloc((size_t)n), *c = malloc((size_t)n);
    double *f = malloc((size_t)n * sizeof(double));
    int failed = a == NULL || c == NULL || f == NULL;
    for (int s = 0; !failed && s < n; ++s)
        f[s] = fp8[s];
    failed = failed || top_k_marks(exact, n, k, a) || top_k_marks(f, n, k, c);
    int both = 0;
    for (int s = 0; !failed && s < n; ++s)
        both += a[s] && c[s];
    free(a);
    free(c);
    free(f);
    return failed ? NAN : (double)both / k;
}

/* ---- version 8's check on the driver (ds_check_indexer, deepseek_stages.c) ------------------- */

int ds_fp8_read_back(ds_state *s, ds_fp8_view *v, int chunk, attn_stage_check *out) {
    const int HI = s->opt.index_heads, DI = s->opt.index_dim;
    const size_t nq = (size_t)s->rows_q * HI, nk = (size_t)s->rows_k, nl = (size_t)s->p.Lk + 1;
    v->q8 = attn_host_alloc(nq * DI, "the FP8 check");
    v->k8 = attn_host_alloc(nk * DI, "the FP8 check");
    v->qs = attn_host_alloc(nq * sizeof(float), "the FP8 check");
    v->ks = attn_host_alloc(nk * sizeof(float), "the FP8 check");
    v->qv = attn_host_alloc(nq * DI * sizeof(float), "the FP8 check");
    v->kv = attn_host_alloc(nk * DI * sizeof(float), "the FP8 check");
    v->ws = attn_host_alloc(nq * sizeof(float), "the FP8 check");
    v->exact = attn_host_alloc(nl * sizeof(double), "the FP8 check");
    v->mag = attn_host_alloc(nl * sizeof(double), "the FP8 check");
    v->bound = attn_host_alloc(nl * sizeof(double), "the FP8 check");
    if (!v->q8 || !v->k8 || !v->qs || !v->ks || !v->qv || !v->kv || !v->ws || !v->exact ||
        !v->mag || !v->bound)
        return 1;
    if (attn_to_host(v->q8, s->d_qi8, nq * DI) || attn_to_host(v->k8, s->d_ki8, nk * DI) ||
        attn_to_host(v->qs, s->d_qscale, nq * sizeof(float)) ||
        attn_to_host(v->ks, s->d_kscale, nk * sizeof(float)))
        return 1;
    ds_fp8_decode(v->q8, (int64_t)(nq * DI), v->qv);
    ds_fp8_decode(v->k8, (int64_t)(nk * DI), v->kv);
    for (size_t x = 0; x < nq; ++x)
        v->ws[x] = s->w[x] * v->qs[x]; /* as the kernel folds the q scale in */
    if (chunk == 0) {                  /* the measured agreement, over every chunk */
        s->fp8_worst = 0.0;
        s->fp8_recall = 1.0;
    }
    /* (1) the quantization, every row (once: every chunk quantizes the same rows) */
    if (chunk == 0 && out->pass &&
        (ds_fp8_check_rows(s->qi, v->q8, v->qs, (int64_t)nq, DI, "q_I", out->detail,
                           sizeof out->detail) ||
         ds_fp8_check_rows(s->ki, v->k8, v->ks, (int64_t)nk, DI, "k_I", out->detail,
                           sizeof out->detail)))
        out->pass = false;
    return 0;
}

void ds_fp8_release(ds_fp8_view *v) {
    void *all[] = {v->q8, v->k8, v->qs, v->ks, v->qv, v->kv, v->ws, v->exact, v->mag, v->bound};
    for (size_t x = 0; x < sizeof all / sizeof all[0]; ++x)
        free(all[x]);
}

void ds_fp8_check_exact(ds_state *s, ds_fp8_view *v, int b, int i, const float *got,
                        attn_stage_check *out) {
    const attn_problem *p = &s->p;
    const int HI = s->opt.index_heads, DI = s->opt.index_dim;
    const int n = ds_index_scores_ref(p, HI, DI, s->qi, s->ki, s->w, b, i, v->exact, v->mag);
    ds_fp8_error_bound(p, HI, DI, s->qi, s->ki, s->w, b, i, v->mag, v->bound);
    for (int t = 0; t < n; ++t) {
        const double err = fabs((double)got[t] - v->exact[t]);
        if (v->bound[t] > 0.0 && err / v->bound[t] > s->fp8_worst)
            s->fp8_worst = err / v->bound[t];
        if (!(err <= v->bound[t]) && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "b=%d i=%d key %d: %.9g, the unquantized inputs' score %.9g (FP8 bound %.3g)",
                     b, i, t, (double)got[t], v->exact[t], v->bound[t]);
        }
    }
    const double r = ds_fp8_set_recall(v->exact, got, n, s->k_eff);
    s->fp8_recall = r < s->fp8_recall ? r : s->fp8_recall;
}
