/* deepseek_v4_reference.c — Example 12's CPU reference, double precision, one query or one
 * sequence at a time, written from the definitions (README.md, "What is computed"; the Python
 * reference deepseek_v4.py is the same algorithm in PyTorch). Nothing here is shared with the
 * kernels of deepseek_v4.cu. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "deepseek_v4.h"

/* Interleaved RoPE of the last rope_dim channels of x[0 .. d) at position pos (sign -1: back). */
static void rotate(const v4_config *c, double *x, int d, int pos, double sign) {
    const int base = d - c->rope_dim;
    for (int i = 0; i < c->rope_dim / 2; ++i) {
        const double freq = pow(c->rope_theta, -(2.0 * i) / c->rope_dim);
        const double a = sign * pos * freq, cs = cos(a), sn = sin(a);
        const double e = x[base + 2 * i], o = x[base + 2 * i + 1];
        x[base + 2 * i] = e * cs - o * sn;
        x[base + 2 * i + 1] = o * cs + e * sn;
    }
}

int v4_ref_visible(const v4_config *c, int t, int n) {
    const int v = (t + 1) / c->m;
    return v < n ? v : n;
}

void v4_ref_compress(const v4_config *c, bool overlap, int d, const float *x, const float *g,
                     const float *bias, const float *norm, int L, double *out) {
    const int m = c->m, n = L / m, width = overlap ? 2 * d : d;
    double logit[2 * V4_MAX_SLOTS], val[2 * V4_MAX_SLOTS];
    for (int w = 0; w < n; ++w) {
        double *e = out + (size_t)w * d;
        for (int ch = 0; ch < d; ++ch) {
            int slots = 0;
            /* CSA: window w-1's first half of the channels, then window w's second half */
            if (overlap && w > 0)
                for (int j = 0; j < m; ++j) {
                    const size_t r = (size_t)((w - 1) * m + j) * width + ch;
                    val[slots] = x[r];
                    logit[slots++] = (double)g[r] + bias[(size_t)j * width + ch];
                }
            for (int j = 0; j < m; ++j) {
                const int col = overlap ? d + ch : ch;
                const size_t r = (size_t)(w * m + j) * width + col;
                val[slots] = x[r];
                logit[slots++] = (double)g[r] + bias[(size_t)j * width + col];
            }
            double mx = -INFINITY, sum = 0.0, acc = 0.0;
            for (int s = 0; s < slots; ++s)
                mx = logit[s] > mx ? logit[s] : mx;
            for (int s = 0; s < slots; ++s) {
                const double p = exp(logit[s] - mx);
                sum += p;
                acc += p * val[s];
            }
            e[ch] = acc / sum;
        }
        double ss = 0.0;
        for (int ch = 0; ch < d; ++ch)
            ss += e[ch] * e[ch];
        const double r = 1.0 / sqrt(ss / d + c->eps);
        for (int ch = 0; ch < d; ++ch)
            e[ch] = e[ch] * r * norm[ch];
        rotate(c, e, d, w * m, 1.0);
    }
}

void v4_ref_index_scores(const v4_config *c, const float *qI_t, const float *wI_t,
                         const double *icomp, int n, double *out) {
    for (int w = 0; w < n; ++w) {
        double s = 0.0;
        for (int h = 0; h < c->HI; ++h) {
            double dot = 0.0;
            for (int i = 0; i < c->DI; ++i)
                dot += (double)qI_t[(size_t)h * c->DI + i] * icomp[(size_t)w * c->DI + i];
            s += wI_t[h] * (dot > 0.0 ? dot : 0.0);
        }
        out[w] = s;
    }
}

void v4_ref_attention_row(const v4_config *c, const float *q_t, const float *kv_b,
                          const float *comp_b, const int32_t *chosen, int n_chosen,
                          const float *sinks, int t, double *out) {
    const int D = c->D, lo = t - c->window + 1 > 0 ? t - c->window + 1 : 0;
    const int nk = t - lo + 1 + n_chosen;
    const float **keys = malloc((size_t)nk * sizeof *keys);
    double *logit = malloc((size_t)nk * sizeof *logit);
    int k = 0;
    for (int s = lo; s <= t; ++s)
        keys[k++] = kv_b + (size_t)s * D;
    for (int j = 0; j < n_chosen; ++j)
        keys[k++] = comp_b + (size_t)chosen[j] * D;
    for (int h = 0; h < c->H; ++h) {
        const float *q = q_t + (size_t)h * D;
        double mx = sinks[h];
        for (int j = 0; j < nk; ++j) {
            double dot = 0.0;
            for (int i = 0; i < D; ++i)
                dot += (double)q[i] * keys[j][i];
            logit[j] = dot / sqrt((double)D);
            mx = logit[j] > mx ? logit[j] : mx;
        }
        double denom = exp(sinks[h] - mx);
        double *o = out + (size_t)h * D;
        memset(o, 0, (size_t)D * sizeof *o);
        for (int j = 0; j < nk; ++j) {
            const double p = exp(logit[j] - mx);
            denom += p;
            for (int i = 0; i < D; ++i)
                o[i] += p * keys[j][i];
        }
        for (int i = 0; i < D; ++i)
            o[i] /= denom;
        rotate(c, o, D, t, -1.0);
    }
    free(keys);
    free(logit);
}

const char *v4_config_problem(const v4_config *c) {
    if (c->m < 1 || (c->kind == V4_CSA ? 2 * c->m : c->m) > V4_MAX_SLOTS)
        return "the compression rate m must be 1 .. 256 (CSA) or 1 .. 512 (HCA)";
    if (c->window % c->m != 0)
        return "the compression rate m must divide the sliding window";
    if (c->window > c->L)
        return "the sliding window is longer than the context (-L)";
    if (c->kind == V4_CSA && c->topk < 1)
        return "--topk must be at least 1 for CSA";
    if (c->D % 32 != 0 || c->D > V4_MAX_D)
        return "the head dimension -D must be a multiple of 32, at most 512";
    if (c->rope_dim < 2 || c->rope_dim % 2 != 0 || c->rope_dim > c->D ||
        (c->kind == V4_CSA && c->rope_dim > c->DI))
        return "--rope-dim must be even, at most -D (and at most --index-dim for CSA)";
    return NULL;
}
