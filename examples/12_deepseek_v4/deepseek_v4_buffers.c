/* deepseek_v4_buffers.c — one V4 layer's device buffers (v4_args, deepseek_v4.h) and example 05's
 * arguments over them: what the stages (deepseek_v4_stages.c) fill with seeded inputs and the
 * library (v4_api.c) fills a session's tokens into, allocated in one place.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn/device.h"
#include "deepseek_v4.h"

/* A zeroed device buffer of `bytes` (at least 16), appended to owned[*n]; NULL and *bad set when
 * it could not be had (attn_device_alloc reported it, or there is no room in owned). */
static void *zeroed(void **owned, int *n, int *bad, size_t bytes) {
    void *d = *n < V4_MAX_BUFFERS ? attn_device_alloc(bytes + 16) : NULL;
    if (d != NULL && cudaMemset(d, 0, bytes + 16) == cudaSuccess)
        return owned[(*n)++] = d;
    attn_device_free(d);
    *bad = 1;
    return NULL;
}

int v4_args_alloc(v4_args *g, attn_dtype t, int K, void **owned, int *n_owned,
                  int32_t **host_table) {
    const v4_config *c = &g->c;
    const bool csa = c->kind == V4_CSA;
    int bad = 0;
    const size_t B = (size_t)c->B, L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D;
    const size_t cw = (csa ? 2 : 1) * D, DI = (size_t)c->DI, HI = (size_t)c->HI;
    const size_t n = (size_t)(c->L / c->m), es = attn_dtype_size(t), f4 = sizeof(float);
    const size_t ring = (csa ? 2 : 1) * (size_t)c->m, k = (size_t)(K > 0 ? K : 1);
    const size_t pps = (n + (size_t)c->page - 1) / (size_t)c->page + 1;
    g->q = zeroed(owned, n_owned, &bad, B * L * H * D * es);
    g->kv = zeroed(owned, n_owned, &bad, B * L * D * es);
    g->ckv = zeroed(owned, n_owned, &bad, B * L * cw * es);
    g->cgate = zeroed(owned, n_owned, &bad, B * L * cw * es);
    g->cbias = zeroed(owned, n_owned, &bad, (size_t)c->m * cw * f4);
    g->cnorm = zeroed(owned, n_owned, &bad, D * f4);
    g->sinks = zeroed(owned, n_owned, &bad, H * f4);
    g->comp = zeroed(owned, n_owned, &bad, B * n * D * es);
    g->o = zeroed(owned, n_owned, &bad, B * L * H * D * es);
    g->pool = zeroed(owned, n_owned, &bad, B * pps * (size_t)c->page * D * es);
    g->ring_kv = zeroed(owned, n_owned, &bad, B * ring * cw * es);
    g->ring_gate = zeroed(owned, n_owned, &bad, B * ring * cw * es);
    if (csa) {
        g->ikv = zeroed(owned, n_owned, &bad, B * L * 2 * DI * es);
        g->igate = zeroed(owned, n_owned, &bad, B * L * 2 * DI * es);
        g->ibias = zeroed(owned, n_owned, &bad, (size_t)c->m * 2 * DI * f4);
        g->inorm = zeroed(owned, n_owned, &bad, DI * f4);
        g->qI = zeroed(owned, n_owned, &bad, B * L * HI * DI * es);
        g->wI = zeroed(owned, n_owned, &bad, B * L * HI * f4);
        g->icomp = zeroed(owned, n_owned, &bad, B * n * DI * es);
        g->logits = zeroed(owned, n_owned, &bad, B * L * n * f4);
        g->sel = zeroed(owned, n_owned, &bad, B * L * k * sizeof(int32_t));
        g->ring_ikv = zeroed(owned, n_owned, &bad, B * ring * 2 * DI * es);
        g->ring_igate = zeroed(owned, n_owned, &bad, B * ring * 2 * DI * es);
    }
    /* the page table [B, pps]: pages handed out in reverse, not the identity */
    int32_t *table = malloc(B * pps * sizeof(int32_t)),
            *d_table = zeroed(owned, n_owned, &bad, B * pps * 4);
    for (size_t i = 0; table != NULL && i < B * pps; ++i)
        table[i] = (int32_t)(B * pps - 1 - i);
    g->page_table = d_table, g->pages_per_seq = (int)pps;
    bad = bad || table == NULL || attn_to_device(d_table, table, B * pps * sizeof(int32_t));
    if (host_table != NULL)
        *host_table = table;
    else
        free(table);
    return bad;
}

void v4_index_args(void *ds_pair, const attn_problem *dsp, v4_args *g, int K) {
    ds_args *ds = (ds_args *)ds_pair;
    for (int i = 0; i < 2; ++i) {
        ds_args *d = &ds[i];
        memset(d, 0, sizeof *d);
        d->p = dsp;
        d->index_heads = g->c.HI;
        d->index_dim = g->c.DI;
        d->topk = K;
        d->chunk = i == 0 ? g->c.L : 1;
        d->q_index = g->qI;
        d->k_index = g->icomp;
        d->w = g->wI;
        d->logits = g->logits;
        d->sel = g->sel;
    }
    g->ds = ds;
}
