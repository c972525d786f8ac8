/* test_fp8_oracles.c — the FP8 indexer's oracles (deepseek_fp8.c) on hand-made inputs: each must
 * accept the right answer and reject a planted wrong one.
 *   ds_fp8_value        known codes (1, 448, the smallest subnormal, -0, NaN, -2.5)
 *   ds_fp8_check_rows   a row quantized here by brute force (the nearest of all 256 codes) passes;
 *                       one code moved to its neighbour, or a scale twice too large, fails
 *   ds_fp8_error_bound  scores of inputs quantized here stay within it (it is a bound), and it is
 *                       not vacuous: it is below 1/4 of sum |w| sum |q k| at these sizes
 *   ds_fp8_set_recall   agreeing and disagreeing selections
 * ./build/sim/examples/05_deepseek_sparse/tests/test_fp8_oracles_sim */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../deepseek_sparse.h"
#include "attn/problem.h"

static int failures = 0;
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

/* The nearest code to y (ties: the even code), by trying all 255 non-NaN codes. */
static uint8_t nearest_code(double y) {
    uint8_t best = 0;
    double best_err = INFINITY;
    for (int c = 0; c < 256; ++c) {
        const double v = ds_fp8_value((uint8_t)c);
        if (isnan(v))
            continue;
        const double err = fabs(v - y);
        if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
            best = (uint8_t)c;
            best_err = err;
        }
    }
    return best;
}

static float uniform(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Rows of d values quantized by the rule the kernel follows, with the brute-force rounding. */
static void quantize(const float *x, int64_t rows, int d, uint8_t *codes, float *scales) {
    for (int64_t r = 0; r < rows; ++r) {
        float amax = 0.0f;
        for (int c = 0; c < d; ++c)
            amax = fabsf(x[r * d + c]) > amax ? fabsf(x[r * d + c]) : amax;
        /* DeepSeek's ue8m0 scale, computed here with a loop, not with ds_fp8_row_scale */
        const float a = amax > 1e-4f ? amax : 1e-4f, ratio = a * (1.0f / 448.0f);
        float s = 1.0f;
        while (s < ratio)
            s *= 2.0f;
        while (s / 2.0f >= ratio)
            s /= 2.0f;
        scales[r] = s;
        for (int c = 0; c < d; ++c)
            codes[r * d + c] = nearest_code((double)(x[r * d + c] / scales[r]));
    }
}

int main(void) {
    EXPECT(ds_fp8_value(0x38) == 1.0);
    EXPECT(ds_fp8_value(0x7e) == 448.0);
    EXPECT(ds_fp8_value(0x01) == ldexp(1.0, -9));
    EXPECT(ds_fp8_value(0x80) == 0.0 && signbit(ds_fp8_value(0x80)));
    EXPECT(isnan(ds_fp8_value(0x7f)) && isnan(ds_fp8_value(0xff)));
    EXPECT(ds_fp8_value(0xc2) == -2.5);

    enum { HI = 2, DI = 32, L = 24 };
    attn_problem p;
    memset(&p, 0, sizeof p);
    p.B = 1, p.H = 1, p.Lq = L, p.Lk = L, p.D = 64, p.causal = true;
    static float q[L * HI * DI], k[L * DI], w[L * HI];
    static uint8_t q8[L * HI * DI], k8[L * DI];
    static float qs[L * HI], ks[L];
    unsigned state = 7;
    for (int x = 0; x < L * HI * DI; ++x)
        q[x] = uniform(&state) * (x % 7 == 0 ? 5.0f : 1.0f); /* a few large entries */
    for (int x = 0; x < L * DI; ++x)
        k[x] = uniform(&state) * 0.01f;
    for (int x = 0; x < L * HI; ++x)
        w[x] = uniform(&state);
    quantize(q, L * HI, DI, q8, qs);
    quantize(k, L, DI, k8, ks);

    char why[256] = "";
    EXPECT(ds_fp8_check_rows(q, q8, qs, L * HI, DI, "q", why, sizeof why) == 0);
    EXPECT(ds_fp8_check_rows(k, k8, ks, L, DI, "k", why, sizeof why) == 0);
    uint8_t saved = k8[5];
    k8[5] = (uint8_t)(k8[5] ^ 1); /* the neighbouring code */
    EXPECT(ds_fp8_check_rows(k, k8, ks, L, DI, "k", why, sizeof why) == 1);
    k8[5] = saved;
    float saved_scale = qs[3];
    qs[3] = qs[3] * 2.0f; /* the next power of two */
    EXPECT(ds_fp8_check_rows(q, q8, qs, L * HI, DI, "q", why, sizeof why) == 1);
    qs[3] = saved_scale;

    /* The bound holds for exact FP8 scores and is far from vacuous. */
    double exact[L], fp8[L], bound[L], mag[L];
    float fp8f[L];
    static float qv[L * HI * DI], kv[L * DI], ws[L * HI];
    ds_fp8_decode(q8, L * HI * DI, qv);
    ds_fp8_decode(k8, L * DI, kv);
    for (int x = 0; x < L * HI; ++x)
        ws[x] = w[x] * qs[x];
    double worst = 0.0, loosest = 0.0;
    for (int i = 0; i < L; ++i) {
        const int n = ds_index_scores_ref(&p, HI, DI, q, k, w, 0, i, exact, mag);
        ds_fp8_scores_ref(&p, HI, DI, qv, ws, kv, ks, 0, i, fp8, NULL);
        ds_fp8_error_bound(&p, HI, DI, q, k, w, 0, i, mag, bound);
        for (int s = 0; s < n; ++s) {
            const double ratio = fabs(fp8[s] - exact[s]) / bound[s];
            worst = ratio > worst ? ratio : worst;
            /* mag (ds_index_scores_ref's bound) = sum |w| sum |q k| */
            loosest = bound[s] / mag[s] > loosest ? bound[s] / mag[s] : loosest;
            fp8f[s] = (float)fp8[s];
        }
        if (i == L - 1) { /* the top-k agreement of the last row with itself and reversed */
            EXPECT(ds_fp8_set_recall(exact, fp8f, n, n) == 1.0);
            float reversed[L];
            for (int s = 0; s < n; ++s)
                reversed[s] = (float)-exact[s];
            EXPECT(ds_fp8_set_recall(exact, reversed, n, 4) == 0.0);
        }
    }
    printf("FP8 scores vs exact: at most %.3g of the bound; the bound at most %.3g of "
           "sum |w| sum |q k|\n",
           worst, loosest);
    EXPECT(worst <= 1.0);
    EXPECT(worst > 0.0); /* quantization did move the scores */
    EXPECT(loosest < 0.25);
    if (failures) {
        fprintf(stderr, "test_fp8_oracles: %d check(s) failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
