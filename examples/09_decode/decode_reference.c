/* decode_reference.c — example 09's CPU oracle: one output row of a decoding step in double
 * precision, read straight from the unpaged cache with the query head's own K/V head (grouped
 * heads are not copied per query head, so a 128K-token cache costs its own size, not H / H_kv
 * times it), and the same row computed the straightforward way in the dtype's precision, which
 * FlashAttention's tolerance rule compares against (common/README.md, "Tolerance rules": scores
 * and softmax in fp32, P = exp(s - m) / l rounded to the dtype, P V accumulated in fp32, rounded).
 *
 * A row is new token i of sequence b for query head h: n = (b * Lq + i) * H + h (decode.h). It
 * sees the keys t < L_b - Lq + i + 1 of its sequence (bottom-right causal), or, with a selection,
 * the selected ones among them.
 *
 * Latent (version 10, in->v == NULL): one K row of D = 576 per token (H_kv = 1) and V its first
 * D_v = 512 columns, read from the same rows: o = sum_t p_t c_t, c_t the row's first 512.
 */
#include <math.h>
#include <stdlib.h>

#include "attn/tensor.h"
#include "decode.h"

int dec_reference_row(const dec_ref_inputs *in, int64_t n, float *out, float *lse, float *lowp) {
    const int H = in->H, D = in->D, Lq = in->Lq, g = H / in->H_kv;
    const int Dv = in->D_v > 0 ? in->D_v : D; /* the width of V and O */
    const int h = (int)(n % H), hk = h / g;
    const int64_t token = n / H; /* b * Lq + i */
    const int b = (int)(token / Lq), i = (int)(token % Lq);
    const int L = in->cu_k[b + 1] - in->cu_k[b];
    int seen = L - Lq + i + 1;
    seen = L == 0 || seen < 0 ? 0 : seen > L ? L : seen;
    /* the row's keys: every one it sees, or its selection (-1: an empty slot) */
    const int slots = in->sel != NULL ? in->topk : seen;
    int *keys = (int *)malloc(((size_t)slots + 1) * sizeof(int));
    double *s = (double *)malloc(((size_t)slots + 1) * sizeof(double));
    float *sf = (float *)malloc(((size_t)slots + 1) * sizeof(float));
    double *acc = (double *)calloc((size_t)Dv, sizeof(double));
    float *accf = (float *)calloc((size_t)Dv, sizeof(float));
    if (keys == NULL || s == NULL || sf == NULL || acc == NULL || accf == NULL) {
        free(keys), free(s), free(sf), free(acc), free(accf);
        return 1;
    }
    int count = 0;
    for (int x = 0; x < slots; ++x) {
        const int t = in->sel != NULL ? in->sel[token * in->topk + x] : x;
        if (t >= 0 && t < seen)
            keys[count++] = t;
    }
    const float *q = in->q + n * D;
    double m = -INFINITY;
    float mf = -INFINITY;
    for (int x = 0; x < count; ++x) {
        const float *kr = in->k + (((int64_t)in->cu_k[b] + keys[x]) * in->H_kv + hk) * D;
        double dot = 0.0;
        float dotf = 0.0f;
        for (int d = 0; d < D; ++d) {
            dot += (double)q[d] * (double)kr[d];
            dotf += q[d] * kr[d];
        }
        s[x] = (double)in->scale * dot;
        sf[x] = in->scale * dotf;
        m = s[x] > m ? s[x] : m;
        mf = sf[x] > mf ? sf[x] : mf;
    }
    double l = 0.0;
    float lf = 0.0f;
    for (int x = 0; x < count; ++x) {
        s[x] = exp(s[x] - m);
        sf[x] = expf(sf[x] - mf);
        l += s[x];
        lf += sf[x];
    }
    for (int x = 0; x < count; ++x) {
        const float *vbase = in->v != NULL ? in->v : in->k; /* latent: V is K's first Dv */
        const float *vr = vbase + (((int64_t)in->cu_k[b] + keys[x]) * in->H_kv + hk) * D;
        const float pf = attn_round_dtype(sf[x] / lf, in->dtype);
        for (int d = 0; d < Dv; ++d) {
            acc[d] += s[x] * (double)vr[d];
            accf[d] += pf * vr[d];
        }
    }
    for (int d = 0; d < Dv; ++d) {
        out[d] = count > 0 ? (float)(acc[d] / l) : 0.0f;
        if (lowp != NULL)
            lowp[d] = attn_round_dtype(accf[d], in->dtype);
    }
    *lse = count > 0 ? (float)(m + log(l)) : -INFINITY;
    free(keys), free(s), free(sf), free(acc), free(accf);
    return 0;
}
