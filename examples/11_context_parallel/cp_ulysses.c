/* cp_ulysses.c — lesson code: the Ulysses all-to-all (cp_ring.h): each rank trades its positions
 * of every head for every position of its share of the heads, attends there with example 03's
 * kernel (07's for the backward), and trades the result back. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../07_flash_attention_backward/flash_bwd.h"
#include "attn/device.h"
#include "cp_ring.h"

/* Copies between a [B, Ht, Lt, w] device tensor's rows of heads [h0, h0 + nh) at positions
 * [p0, p0 + np) and a contiguous device buffer [B, nh, np, w] (pack: tensor -> buf). */
static int cp_blocks(float *tensor, int B, int Ht, int Lt, int w, int h0, int nh, int p0, int np,
                     float *buf, bool pack) {
    const size_t blk = (size_t)np * w;
    for (int b = 0; b < B && blk; ++b)
        for (int h = 0; h < nh; ++h) {
            float *at = tensor + (((size_t)b * Ht + h0 + h) * Lt + p0) * w;
            float *in = buf + ((size_t)b * nh + h) * blk;
            CP_TRY(attn_cuda_report(cudaMemcpy(pack ? in : at, pack ? at : in, blk * sizeof(float),
                                               cudaMemcpyDeviceToDevice),
                                    "cudaMemcpy", __FILE__, __LINE__));
        }
    return 0;
}

/* Ulysses' exchange of nf fields (field f: w[f] floats per row). to_heads: from this rank's
 * positions of every head (src[f]: [B, H, len, w]) to every position of its heads (dst[f]:
 * [B, Hm, L, w]); else the way back. Message to or from rank g: field after field, each
 * [B, heads, positions, w] (g's heads at my positions, or my heads at g's positions). */
static int cp_ulysses_exchange(cp_transport *t, const cp_setup *s, bool to_heads, int nf,
                               const int *w, float *const *src, float *const *dst, int step,
                               const char *what) {
    const int P = t->size, me = t->rank, B = s->p.B, H = s->p.H, L = s->p.Lq;
    cp_chunk mine[CP_MAX_CHUNKS];
    cp_rank_chunks(CP_RING, L, P, me, mine);
    int h0, h1;
    cp_rank_heads(H, P, me, &h0, &h1);
    size_t *sz = calloc(4 * (size_t)P, sizeof *sz);
    CP_TRY(!sz);
    size_t *sb = sz, *so = sz + P, *rb = sz + 2 * P, *ro = sz + 3 * P, st = 0, rt = 0;
    for (int g = 0; g < P; ++g) {
        int g0, g1;
        cp_rank_heads(H, P, g, &g0, &g1);
        cp_chunk cg[CP_MAX_CHUNKS];
        cp_rank_chunks(CP_RING, L, P, g, cg);
        size_t theirs = 0, ours = 0; /* g's heads at my positions; my heads at g's positions */
        for (int f = 0; f < nf; ++f) {
            theirs += (size_t)B * (g1 - g0) * mine[0].len * w[f] * sizeof(float);
            ours += (size_t)B * (h1 - h0) * cg[0].len * w[f] * sizeof(float);
        }
        sb[g] = to_heads ? theirs : ours, rb[g] = to_heads ? ours : theirs;
        so[g] = st, ro[g] = rt;
        st += sb[g], rt += rb[g];
    }
    float *dsend = attn_device_alloc(st + 16), *drecv = attn_device_alloc(rt + 16);
    CP_TRY(!dsend || !drecv);
    for (int pass = 0; pass < 2; ++pass) { /* 0: pack what goes to each rank; 1: unpack */
        if (pass == 1) {
            cp_fault_point(t, &s->fault, step);
            const int rc = t->alltoall(t, dsend, sb, so, drecv, rb, ro);
            if (rc != CP_OK)
                cp_transfer_failed(t, rc, step, -1, what, false);
        }
        for (int g = 0; g < P; ++g) {
            int g0, g1;
            cp_rank_heads(H, P, g, &g0, &g1);
            cp_chunk cg[CP_MAX_CHUNKS];
            cp_rank_chunks(CP_RING, L, P, g, cg);
            float *buf = pass ? drecv + ro[g] / sizeof(float) : dsend + so[g] / sizeof(float);
            /* the per-rank side (all heads, my positions) or the per-head side (my heads, all
             * positions): which one this pass reads or writes */
            const bool per_rank = to_heads == (pass == 0);
            for (int f = 0; f < nf; ++f) {
                float *x = pass ? dst[f] : src[f];
                CP_TRY(per_rank ? cp_blocks(x, B, H, mine[0].len, w[f], g0, g1 - g0, 0, mine[0].len,
                                            buf, pass == 0)
                                : cp_blocks(x, B, h1 - h0, L, w[f], 0, h1 - h0, cg[0].start,
                                            cg[0].len, buf, pass == 0));
                buf +=
                    (size_t)B *
                    (per_rank ? (size_t)(g1 - g0) * mine[0].len : (size_t)(h1 - h0) * cg[0].len) *
                    w[f];
            }
        }
    }
    attn_device_free(dsend);
    attn_device_free(drecv);
    free(sz);
    return 0;
}

/* This rank's positions of Q, K, V (every head) uploaded: [B, H, len, D] each, in one block. */
static float *cp_ulysses_qkv(const cp_setup *s, const attn_host_inputs *in, cp_chunk mine) {
    const int BH = s->p.B * s->p.H, D = s->p.D, L = s->p.Lq;
    const size_t e = (size_t)BH * mine.len * D;
    float *dev = attn_device_alloc(3 * e * sizeof(float) + 16);
    const float *src[3] = {in->q, in->k, in->v};
    for (int x = 0; dev && x < 3; ++x) {
        float *h = cp_slice(src[x], BH, L, D, mine);
        const int bad = !h || (e && attn_to_device(dev + x * e, h, e * sizeof(float)));
        free(h);
        if (bad) {
            attn_device_free(dev);
            return NULL;
        }
    }
    return dev;
}

/* Ulysses: all-to-all of Q, K, V (this rank's positions of every head -> every position of its
 * heads), one attention launch, all-to-all of O and the LSE back. With g (the backward): Q, K,
 * V, O, dO and the LSE over, example 07's backward on this rank's heads, dQ, dK, dV back. */
int cp_ulysses(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *r,
               cp_grads *g) {
    const int P = t->size, me = t->rank, B = s->p.B, D = s->p.D, L = s->p.Lq;
    const cp_chunk mine = r->chunk[0];
    int h0, h1;
    cp_rank_heads(s->p.H, P, me, &h0, &h1);
    const int Hm = h1 - h0;
    const size_t mine_e = (size_t)B * s->p.H * mine.len * D, full = (size_t)B * Hm * L * D;
    const size_t full_l = (size_t)B * Hm * L;
    float *qkv = cp_ulysses_qkv(s, in, mine);
    /* every position of my heads: Q, K, V (then O, dO, LSE and dQ, dK, dV for the backward) */
    float *heads = attn_device_alloc((g ? 8 * full + full_l : 3 * full) * sizeof(float) + 16);
    float *o = attn_device_alloc((full + full_l) * sizeof(float) + 16);
    CP_TRY(!qkv || !heads || !o);
    float *lse = o + full;
    float *src[6] = {qkv, qkv + mine_e, qkv + 2 * mine_e, NULL, NULL, NULL};
    float *dst[6] = {heads, heads + full, heads + 2 * full, NULL, NULL, NULL};
    const int w[6] = {D, D, D, D, D, 1};
    if (g) { /* the forward's O, the loss gradient, the forward's LSE */
        src[3] = (float *)g->o[0], src[4] = (float *)g->dout[0], src[5] = (float *)g->lse[0];
        dst[3] = heads + 3 * full, dst[4] = heads + 4 * full, dst[5] = heads + 8 * full;
    }
    CP_TRY(cp_ulysses_exchange(t, s, true, g ? 6 : 3, w, src, dst, 0,
                               g ? "Q/K/V/O/dO/LSE all-to-all" : "Q/K/V all-to-all"));
    attn_problem p = s->p;
    p.H = Hm;
    if (Hm > 0) {
        attn_buffers b;
        memset(&b, 0, sizeof b);
        bwd_args a;
        memset(&a, 0, sizeof a);
        void *workspace = NULL;
        if (g) { /* example 07's backward on my heads, the whole sequence */
            const size_t ws = s->bwd->workspace_bytes ? s->bwd->workspace_bytes(&p) : 0;
            CP_TRY(!(workspace = attn_device_alloc(ws + 16)));
            a.p = &p;
            a.mode = BWD_DENSE;
            a.q = dst[0], a.k = dst[1], a.v = dst[2], a.o = dst[3], a.dout = dst[4];
            a.lse = dst[5];
            a.dq = heads + 5 * full, a.dk = heads + 6 * full, a.dv = heads + 7 * full;
            b.args = &a;
            b.workspace = workspace;
            b.workspace_bytes = ws;
        } else {
            b.q = dst[0], b.k = dst[1], b.v = dst[2], b.o = o, b.lse = lse;
        }
        const attn_kernel *k = g ? s->bwd : s->fwd;
        k->launch(&p, &b, 0);
        CP_TRY(attn_cuda_report(cudaGetLastError(), k->name, __FILE__, __LINE__));
        CP_TRY(attn_cuda_report(cudaDeviceSynchronize(), k->name, __FILE__, __LINE__));
        attn_device_free(workspace);
        r->entries += attn_problem_entries(&p);
        r->launches++;
        r->steps_computed++;
    } else {
        r->steps_skipped++;
    }
    /* back: this rank's positions of every head */
    float *back_src[3] = {o, lse, NULL}, *back_dst[3] = {r->o[0], r->lse[0], NULL};
    const int back_w[3] = {D, 1, D};
    if (g) {
        back_src[0] = heads + 5 * full, back_src[1] = heads + 6 * full;
        back_src[2] = heads + 7 * full;
        back_dst[0] = g->dq[0], back_dst[1] = g->dk[0], back_dst[2] = g->dv[0];
    }
    const int gw[3] = {D, D, D};
    CP_TRY(cp_ulysses_exchange(t, s, false, g ? 3 : 2, g ? gw : back_w, back_src, back_dst, 1,
                               g ? "dQ/dK/dV all-to-all" : "O/LSE all-to-all"));
    attn_device_free(qkv);
    attn_device_free(heads);
    attn_device_free(o);
    return 0;
}
