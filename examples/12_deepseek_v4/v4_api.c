/* v4_api.c — example 12's kernels as a library for a model's generation loop (v4_api.h): one
 * session per CSA or HCA layer, its device buffers, and the calls that launch deepseek_v4.cu's
 * prefill chunk (kernels 1-4) and decode step (kernel 5's streaming body).
 */
#include "v4_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/tensor.h"
#include "deepseek_v4.h"

struct v4_session {
    v4_config c;
    attn_problem p, dsp;
    ds_args ds[2];
    v4_args a;
    int len, n_cap, K, ring;
    size_t es;
    void *d[V4_MAX_BUFFERS];
    int nd;
    void *staging;
    size_t cap_staging;
    char err[512];
};

/* The session's last error (v4_session_error): fail(s, rc, fmt, ...) returns rc. */
#define fail(s, rc, ...) attn_reason((s)->err, sizeof(s)->err, (rc), __VA_ARGS__)

/* Rows [len, len + n) of every sequence of a [B, cap, row] device tensor from src [B, n, row]
 * (fp32, stored as t). */
static int put_rows(v4_session *s, void *dst, const float *src, int n, size_t row, attn_dtype t) {
    const size_t es = attn_dtype_size(t), count = (size_t)n * row;
    for (int b = 0; b < s->c.B; ++b) {
        char *at = (char *)dst + ((size_t)b * s->c.L + (size_t)s->len) * row * es;
        if (attn_device_put(at, src + (size_t)b * count, count, t, &s->staging, &s->cap_staging))
            return fail(s, 1, "cannot copy %zu bytes to the device", count * es);
    }
    return 0;
}

const char *v4_session_backend(void) { return attn_backend_name(); }
const char *v4_session_error(const v4_session *s) { return s->err; }
int v4_session_length(const v4_session *s) { return s->len; }

void v4_session_close(v4_session *s) {
    if (s == NULL)
        return;
    for (int i = 0; i < s->nd; ++i)
        attn_device_free(s->d[i]);
    free(s->staging);
    free(s);
}

v4_session *v4_session_open(int kind, int batch, int heads, int head_dim, int m, int window,
                            int topk, int index_heads, int index_dim, int rope_dim,
                            double rope_theta, double eps, int page, int max_tokens, int dtype,
                            const float *cbias, const float *cnorm, const float *ibias,
                            const float *inorm, const float *sinks, char *err, int err_len) {
    v4_session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return NULL;
    }
    v4_config *c = &s->c;
    *c = (v4_config){.kind = kind == 1 ? V4_HCA : V4_CSA, .rope_theta = rope_theta, .eps = eps};
    c->B = batch, c->L = max_tokens, c->H = heads, c->D = head_dim, c->m = m, c->window = window;
    c->topk = topk, c->HI = index_heads, c->DI = index_dim, c->rope_dim = rope_dim, c->page = page;
    const int csa = c->kind == V4_CSA;
    const char *bad =
        kind < 0 || kind > 1                      ? "kind must be 0 (CSA) or 1 (HCA)"
        : batch < 1 || heads < 1 || page < 1      ? "batch, heads and page must be positive"
        : dtype != ATTN_F16 && dtype != ATTN_BF16 ? "dtype must be 1 (f16) or 2 (bf16)"
        : cbias == NULL || cnorm == NULL || sinks == NULL ||
                (csa && (ibias == NULL || inorm == NULL))
            ? "the layer's weights (cbias, cnorm, sinks; CSA: ibias, inorm) are missing"
            : v4_config_problem(c);
    s->n_cap = max_tokens / m;
    s->K = csa ? (topk < s->n_cap ? topk : s->n_cap) : 0;
    attn_problem_init(&s->p, batch, heads, max_tokens, max_tokens, head_dim);
    s->p.dtype = (attn_dtype)dtype;
    attn_problem_init(&s->dsp, batch, 1, max_tokens, s->n_cap > 0 ? s->n_cap : 1, 64);
    s->dsp.dtype = (attn_dtype)dtype;
    if (bad == NULL && csa)
        bad = ds_unsupported(&s->dsp, index_heads, index_dim, s->K > 0 ? s->K : 1);
    attn_device_info info;
    char why[256];
    if (bad == NULL && attn_device_init(&info, why, sizeof why) != 0)
        bad = why;
    if (bad != NULL) {
        snprintf(err, (size_t)err_len, "%s", bad);
        free(s);
        return NULL;
    }
    const size_t D = (size_t)head_dim, cw = (csa ? 2 : 1) * D;
    s->es = attn_dtype_size(s->p.dtype);
    s->ring = csa ? 2 * m : m;
    const int K = s->K > 0 ? s->K : 1;
    v4_args *g = &s->a;
    *g = (v4_args){.c = *c, .p = &s->p};
    const size_t f4 = sizeof(float), DI = (size_t)index_dim; /* the layer's weights, fp32 */
    const int ok = v4_args_alloc(g, s->p.dtype, K, s->d, &s->nd, NULL) == 0 &&
                   !attn_to_device((void *)g->cbias, cbias, (size_t)m * cw * f4) &&
                   !attn_to_device((void *)g->cnorm, cnorm, D * f4) &&
                   !attn_to_device((void *)g->sinks, sinks, (size_t)heads * f4) &&
                   (!csa || (!attn_to_device((void *)g->ibias, ibias, (size_t)m * 2 * DI * f4) &&
                             !attn_to_device((void *)g->inorm, inorm, DI * f4)));
    if (!ok) {
        snprintf(err, (size_t)err_len, "cannot allocate example 12's device buffers");
        v4_session_close(s);
        return NULL;
    }
    v4_index_args(s->ds, &s->dsp, g, K);
    return s;
}

int v4_session_step(v4_session *s, int n, const float *q, const float *kv, const float *ckv,
                    const float *cgate, const float *ikv, const float *igate, const float *qI,
                    const float *wI, float *out) {
    const v4_config *c = &s->c;
    const int csa = c->kind == V4_CSA;
    if (n < 1 || s->len + n > c->L)
        return fail(s, 2, "%d new tokens after %d: the session holds %d", n, s->len, c->L);
    if (q == NULL || kv == NULL || ckv == NULL || cgate == NULL || out == NULL ||
        (csa && (ikv == NULL || igate == NULL || qI == NULL || wI == NULL)))
        return fail(s, 2, "an input of the step is missing");
    const size_t H = (size_t)c->H, D = (size_t)c->D, cw = (csa ? 2 : 1) * D;
    const v4_args *g = &s->a;
    const attn_dtype t = s->p.dtype;
    if (put_rows(s, (void *)g->q, q, n, H * D, t) || put_rows(s, (void *)g->kv, kv, n, D, t) ||
        put_rows(s, (void *)g->ckv, ckv, n, cw, t) ||
        put_rows(s, (void *)g->cgate, cgate, n, cw, t))
        return 1;
    if (csa) {
        const size_t DI = (size_t)c->DI, HI = (size_t)c->HI;
        if (put_rows(s, (void *)g->ikv, ikv, n, 2 * DI, t) ||
            put_rows(s, (void *)g->igate, igate, n, 2 * DI, t) ||
            put_rows(s, (void *)g->qI, qI, n, HI * DI, t) ||
            put_rows(s, (void *)g->wI, wI, n, HI, ATTN_F32))
            return 1;
    }
    /* V4_PLANT=ring (tests: the generation must fail): the streaming compressor's state is
     * dropped between calls, as a cache that forgot its buffer would */
    const char *plant = getenv("V4_PLANT");
    if (plant != NULL && strcmp(plant, "ring") == 0) {
        const size_t rb = (size_t)c->B * (size_t)s->ring * s->es;
        cudaMemset(g->ring_kv, 0, rb * cw);
        cudaMemset(g->ring_gate, 0, rb * cw);
        if (csa) {
            cudaMemset(g->ring_ikv, 0, rb * 2 * (size_t)c->DI);
            cudaMemset(g->ring_igate, 0, rb * 2 * (size_t)c->DI);
        }
    }
    if (n == 1)
        v4_launch_decode_rows(g, s->len, s->len + 1, 0);
    else
        v4_launch_prefill_rows(g, s->len, s->len + n, 0);
    if (attn_device_sync(s->err, sizeof s->err))
        return 1;
    const size_t count = (size_t)n * H * D;
    for (int b = 0; b < c->B; ++b) {
        const char *at = (const char *)g->o + ((size_t)b * c->L + (size_t)s->len) * H * D * s->es;
        if (attn_device_get(out + (size_t)b * count, at, count, t, &s->staging, &s->cap_staging))
            return fail(s, 1, "cannot copy %zu bytes from the device", count * s->es);
    }
    s->len += n;
    return 0;
}
