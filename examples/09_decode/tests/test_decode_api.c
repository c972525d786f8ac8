/* test_decode_api.c — the model's library path (decode_api.h, libdecode_attn_<backend>.so) checked
 * in C, without PyTorch: a session of two layers and two sequences is filled with a prompt, then
 * decodes three steps (one new token, two, one); every step's output and LSE,
 * in the dense mode and over a caller's selection, must match a direct double-precision softmax
 * written here (its own loops: nothing shared with the library), at the bound of an fp32 check,
 * and a planted wrong answer must fail that bound. A softmax scale of 1/D instead of 1/sqrt(D), a
 * key dropped or a page read from the wrong layer moves an output by more than 1e-2; the bound is
 * 1e-4 (fp32 sums of at most 12 terms of size 1: about 1e-6, with a wide margin).
 * Exit 0 when every check passes, 1 otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_api.h"

enum { LAYERS = 2, B = 2, H = 4, HKV = 2, D = 64, PAGE = 16, MAX_TOKENS = 64 };
#define BOUND 1e-4

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        printf("FAIL: %s\n", what);
        failures++;
    }
}

/* Deterministic values in [-1, 1): a 64-bit LCG's top bits. */
static uint64_t state = 12345u;
static float draw(void) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(state >> 11) * 0x1p-53 * 2.0 - 1.0);
}
static void fill(float *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        x[e] = draw();
}

/* The caches as the test keeps them: [layer][b][t][h_kv][d]. */
static float kc[LAYERS][B][MAX_TOKENS][HKV][D], vc[LAYERS][B][MAX_TOKENS][HKV][D];

/* Output and LSE of query row (b, i of n new tokens, head h) over the keys listed in keys[0..m)
 * (positions), softmax scale 1/sqrt(D), in double. */
static void direct(int layer, int b, int h, const float *q, const int *keys, int m, double *o,
                   double *lse) {
    const int g = h / (H / HKV); /* the K/V head of query head h */
    double s[MAX_TOKENS], mx = -INFINITY, l = 0.0;
    for (int x = 0; x < m; ++x) {
        double dot = 0.0;
        for (int d = 0; d < D; ++d)
            dot += (double)q[d] * kc[layer][b][keys[x]][g][d];
        s[x] = dot / sqrt((double)D);
        mx = s[x] > mx ? s[x] : mx;
    }
    for (int d = 0; d < D; ++d)
        o[d] = 0.0;
    for (int x = 0; x < m; ++x) {
        const double p = exp(s[x] - mx);
        l += p;
        for (int d = 0; d < D; ++d)
            o[d] += p * vc[layer][b][keys[x]][g][d];
    }
    for (int d = 0; d < D; ++d)
        o[d] /= l;
    *lse = mx + log(l);
}

/* Largest |got - want| over a step's outputs and LSEs (mode: dense, or sel: [B * n, topk]). */
static double step_error(int layer, int n, const int *len, const float *q, const float *out,
                         const float *lse, const int32_t *sel, int topk) {
    double worst = 0.0;
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < n; ++i) {
            int keys[MAX_TOKENS], m = 0;
            const int sees = len[b] - n + i + 1; /* causal: up to itself */
            if (sel == NULL)
                for (int t = 0; t < sees; ++t)
                    keys[m++] = t;
            else
                for (int x = 0; x < topk; ++x)
                    if (sel[(b * n + i) * topk + x] >= 0)
                        keys[m++] = sel[(b * n + i) * topk + x];
            for (int h = 0; h < H; ++h) {
                const size_t row = ((size_t)(b * n + i) * H + h) * D;
                double o[D], l;
                direct(layer, b, h, q + row, keys, m, o, &l);
                for (int d = 0; d < D; ++d) {
                    const double e = fabs(out[row + d] - o[d]);
                    worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
                }
                const double e = fabs(lse[(size_t)h * B * n + b * n + i] - l);
                worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
            }
        }
    return worst;
}

/* Appends n new tokens of every layer (begin, append; the caller attends, then ends). */
static int add_tokens(dec_session *s, int n, int *len) {
    if (dec_session_begin(s, n) != 0)
        return 1;
    float k[B * 8 * HKV * D], v[B * 8 * HKV * D];
    for (int layer = 0; layer < LAYERS; ++layer) {
        fill(k, (size_t)B * n * HKV * D);
        fill(v, (size_t)B * n * HKV * D);
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < n; ++t) {
                memcpy(kc[layer][b][len[b] + t], k + (size_t)(b * n + t) * HKV * D,
                       sizeof kc[0][0][0]);
                memcpy(vc[layer][b][len[b] + t], v + (size_t)(b * n + t) * HKV * D,
                       sizeof vc[0][0][0]);
            }
        if (dec_session_append(s, layer, k, v, NULL) != 0)
            return 1;
    }
    for (int b = 0; b < B; ++b)
        len[b] += n;
    return 0;
}

int main(void) {
    char err[256] = "";
    dec_session *s =
        dec_session_open(LAYERS, B, H, HKV, D, 0, PAGE, MAX_TOKENS, 0, 0, 7u, err, sizeof err);
    if (s == NULL) {
        printf("FAIL: dec_session_open: %s\n", err);
        return 1;
    }
    int len[B] = {0, 0};
    /* the prompt: 8 tokens per sequence, appended only (a prefill's attention is not a step's) */
    int rc = add_tokens(s, 8, len) || dec_session_end(s) != 0;
    for (int b = 0; rc == 0 && b < B; ++b)
        expect(dec_session_length(s, b) == 8, "the prompt's length");
    static float q[B * 8 * H * D], out[B * 8 * H * D], lse[H * B * 8];
    for (int step = 0; rc == 0 && step < 3; ++step) {
        const int n = step == 1 ? 2 : 1;
        rc = add_tokens(s, n, len);
        for (int layer = 0; rc == 0 && layer < LAYERS; ++layer) {
            fill(q, (size_t)B * n * H * D);
            memset(out, 0xff, sizeof out); /* NaN: an element not written fails */
            rc = dec_session_attend(s, layer, 0, 0, q, NULL, NULL, NULL, out, lse);
            const double e = rc ? INFINITY : step_error(layer, n, len, q, out, lse, NULL, 0);
            printf("step %d layer %d dense: max error %.2e (bound %.0e)\n", step, layer, e, BOUND);
            expect(e <= BOUND, "dense attention matches the direct softmax");
            /* a planted wrong answer: one output element off by twice the bound fails it */
            out[3] += (float)(2 * BOUND);
            expect(step_error(layer, n, len, q, out, lse, NULL, 0) > BOUND,
                   "a planted wrong element fails the bound");
            /* over a selection: the first token, every third, and itself (ascending, then -1) */
            enum { K = 8 };
            int32_t sel[B * 2 * K];
            for (int r = 0; r < B * n; ++r) {
                const int b = r / n, i = r % n, sees = len[b] - n + i + 1;
                int x = 0;
                for (int t = 0; t < sees && x < K - 1; t += 3)
                    sel[r * K + x++] = t;
                if (sel[r * K + x - 1] != sees - 1)
                    sel[r * K + x++] = sees - 1;
                while (x < K)
                    sel[r * K + x++] = -1;
            }
            memset(out, 0xff, sizeof out);
            rc = rc ? rc : dec_session_attend(s, layer, 2, K, q, NULL, NULL, sel, out, lse);
            const double es = rc ? INFINITY : step_error(layer, n, len, q, out, lse, sel, K);
            printf("step %d layer %d selection: max error %.2e (bound %.0e)\n", step, layer, es,
                   BOUND);
            expect(es <= BOUND, "attention over a selection matches the direct softmax");
        }
        rc = rc ? rc : dec_session_end(s);
    }
    if (rc != 0) {
        printf("FAIL: the library refused a call: %s\n", dec_session_error(s));
        failures++;
    }
    dec_session_close(s);
    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
