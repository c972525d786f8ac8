/* cp_ring.c — the strategies of cp_ring.h: pass-KV over the ring (contiguous or zigzag) and the
 * Ulysses all-to-all, on top of example 03's kernel and the transport. */
#include "cp_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../07_flash_attention_backward/flash_bwd.h"
#include "attn/device.h"

#define CP_TRY(expr)                                                                               \
    do {                                                                                           \
        if (expr)                                                                                  \
            return 1;                                                                              \
    } while (0)

float *cp_slice(const float *full, int BH, int L, int width, cp_chunk c) {
    float *part = malloc(((size_t)BH * c.len * width + 1) * sizeof *part);
    if (!part)
        return NULL;
    for (int bh = 0; bh < BH; ++bh)
        memcpy(part + (size_t)bh * c.len * width, full + ((size_t)bh * L + c.start) * width,
               (size_t)c.len * width * sizeof *part);
    return part;
}

void cp_unslice(float *full, const float *part, int BH, int L, int width, cp_chunk c) {
    for (int bh = 0; bh < BH; ++bh)
        memcpy(full + ((size_t)bh * L + c.start) * width, part + (size_t)bh * c.len * width,
               (size_t)c.len * width * sizeof *part);
}

void cp_result_free(cp_result *r) {
    for (int c = 0; c < CP_MAX_CHUNKS; ++c)
        attn_device_free(r->mem[c]);
    memset(r, 0, sizeof *r);
}

/* Uploads a host slice to new device memory. */
static float *cp_upload(const float *host, size_t elems) {
    float *dev = attn_device_alloc(elems * sizeof *dev + 1);
    if (dev && elems && attn_to_device(dev, host, elems * sizeof *dev)) {
        attn_device_free(dev);
        return NULL;
    }
    return dev;
}

/* Each query chunk's result lives in a part buffer of two splits, O [2][rows][D] then LSE
 * [2][rows] (rows = B*H*len): split 0 the running result (cp_result's o and lse), split 1 the
 * step's, merged into split 0 (cp_merge). */
static int cp_alloc_result(cp_result *r, int BH, int D) {
    for (int c = 0; c < r->nchunks; ++c) {
        const size_t rows = (size_t)BH * r->chunk[c].len;
        r->mem[c] = attn_device_alloc((2 * rows * D + 2 * rows + 1) * sizeof(float));
        CP_TRY(!r->mem[c]);
        r->o[c] = (float *)r->mem[c];
        r->lse[c] = r->o[c] + 2 * rows * D;
        CP_TRY(attn_device_fill_nan(r->mem[c], (2 * rows * D + 2 * rows) * sizeof(float)));
    }
    return 0;
}

/* The problem of query chunk q against key chunk k: false when the pair is skipped (cp_pair);
 * causal on the diagonal only, where Lq = Lk and bottom-right alignment is the plain diagonal. */
static bool cp_pair_problem(const cp_setup *s, cp_chunk q, cp_chunk k, attn_problem *p,
                            cp_pair_kind *kind_out) {
    cp_pair_kind kind = cp_pair(q, k, s->p.causal);
    if (s->plant == CP_PLANT_NO_SKIP && kind == CP_PAIR_SKIP && k.len && q.len)
        kind = CP_PAIR_FULL;
    if (s->plant == CP_PLANT_NO_WINDOW && kind == CP_PAIR_WINDOW) /* the window's edge ignored */
        kind = k.start == q.start ? CP_PAIR_DIAGONAL : CP_PAIR_FULL;
    *p = s->p;
    p->Lq = q.len;
    p->Lk = k.len;
    p->causal = kind == CP_PAIR_DIAGONAL;
    if (kind_out)
        *kind_out = kind;
    return kind != CP_PAIR_SKIP;
}

/* Attention of query chunk c (its device rows q) against one key chunk (k, v device rows), into
 * split 0 of its part buffer the first time (*have false), else split 1 then merged. */
static int cp_attend(const cp_setup *s, cp_result *r, int c, const float *q, cp_chunk kc,
                     const float *k, const float *v, bool *have) {
    attn_problem p;
    cp_pair_kind kind;
    if (!cp_pair_problem(s, r->chunk[c], kc, &p, &kind))
        return 0;
    const int64_t rows = (int64_t)p.B * p.H * p.Lq;
    const bool merge = *have && s->plant != CP_PLANT_NO_MERGE;
    float *o = merge ? r->o[c] + rows * p.D : r->o[c], *lse = merge ? r->lse[c] + rows : r->lse[c];
    if (kind == CP_PAIR_WINDOW) { /* the window's edge inside the pair: masked per entry */
        const cp_chunk qc = r->chunk[c];
        CP_TRY(cp_window_attend(q, k, v, o, lse, p.B * p.H, qc.start, qc.len, kc.start, kc.len,
                                cp_window(), p.D, p.scale, 0));
        if (merge)
            CP_TRY(cp_merge(r->o[c], r->lse[c], rows, p.D, 0));
        *have = true;
        r->entries += p.B * p.H * cp_pair_entries(qc, kc, true);
        r->launches++;
        return 0;
    }
    attn_buffers b;
    memset(&b, 0, sizeof b);
    b.q = q;
    b.k = k;
    b.v = v;
    b.o = o;
    b.lse = lse;
    s->fwd->launch(&p, &b, 0);
    CP_TRY(attn_cuda_report(cudaGetLastError(), s->fwd->name, __FILE__, __LINE__));
    if (merge)
        CP_TRY(cp_merge(r->o[c], r->lse[c], rows, p.D, 0));
    *have = true;
    r->entries += attn_problem_entries(&p);
    r->launches++;
    return 0;
}

/* A rank's shard as one message: K of each chunk, then V of each chunk, [B, H, len, D] each;
 * in the backward also dK and dV of each chunk, summed over the ranks it has visited. Its size in
 * floats, and where field f (0 K, 1 V, 2 dK, 3 dV) of chunk j starts in it (off[f][j]). */
static size_t cp_msg_layout(const cp_chunk *ch, int n, int BH, int D, int fields,
                            size_t off[4][CP_MAX_CHUNKS]) {
    size_t total = 0;
    for (int f = 0; f < fields; ++f)
        for (int j = 0; j < n; ++j) {
            off[f][j] = total;
            total += (size_t)BH * ch[j].len * D;
        }
    return total;
}

/* The backward's pair: example 07's fa2_fp32 backward with the forward's final O and LSE (so
 * that its P = exp(s - LSE) is already the global softmax and D = rowsum(dO O) the global one):
 * its dQ, dK, dV are this pair's exact contributions, added to the running dQ of query chunk c
 * and to the travelling dK, dV of the key chunk. */
static int cp_attend_bwd(const cp_setup *s, cp_result *r, cp_grads *g, int c, const float *q,
                         cp_chunk kc, const float *k, const float *v, float *dk, float *dv) {
    attn_problem p;
    cp_pair_kind kind;
    if (!cp_pair_problem(s, r->chunk[c], kc, &p, &kind))
        return 0;
    if (kind == CP_PAIR_WINDOW) { /* the window's edge inside the pair */
        const cp_chunk qc = r->chunk[c];
        const cp_window_bwd_args w = {.q = q,
                                      .k = k,
                                      .v = v,
                                      .o = g->o[c],
                                      .dout = g->dout[c],
                                      .lse = g->lse[c],
                                      .dq = g->dq[c],
                                      .dk = dk,
                                      .dv = dv,
                                      .BH = p.B * p.H,
                                      .qs = qc.start,
                                      .qlen = qc.len,
                                      .ks = kc.start,
                                      .klen = kc.len,
                                      .W = cp_window(),
                                      .D = p.D,
                                      .scale = p.scale};
        CP_TRY(cp_window_attend_bwd(&w, 0));
        r->entries += p.B * p.H * cp_pair_entries(qc, kc, true);
        r->launches++;
        return 0;
    }
    bwd_args a;
    memset(&a, 0, sizeof a);
    a.p = &p;
    a.mode = BWD_DENSE;
    a.q = q, a.k = k, a.v = v, a.o = g->o[c], a.dout = g->dout[c], a.lse = g->lse[c];
    float *dq_pair = g->scratch, *dk_pair = dq_pair + attn_problem_q_elems(&p);
    float *dv_pair = dk_pair + attn_problem_k_elems(&p);
    a.dq = dq_pair, a.dk = dk_pair, a.dv = dv_pair;
    attn_buffers b;
    memset(&b, 0, sizeof b);
    b.args = &a;
    b.workspace = g->workspace;
    b.workspace_bytes = g->workspace_bytes;
    s->bwd->launch(&p, &b, 0);
    CP_TRY(attn_cuda_report(cudaGetLastError(), s->bwd->name, __FILE__, __LINE__));
    CP_TRY(cp_add(g->dq[c], dq_pair, attn_problem_q_elems(&p), 0) ||
           cp_add(dk, dk_pair, attn_problem_k_elems(&p), 0) ||
           cp_add(dv, dv_pair, attn_problem_k_elems(&p), 0));
    r->entries += attn_problem_entries(&p);
    r->launches++;
    return 0;
}

/* pass-KV: P steps; at step s this rank holds the shard of rank (r - s) mod P in `cur`, sends it
 * on to r + 1 and receives the next one from r - 1 into `nxt` while it attends to `cur`. The
 * backward (g non-NULL) does the same with dK and dV travelling with their shard: each step adds
 * its part before the shard moves on, so the transfer follows the step, and one more hop at the
 * end takes every shard's summed dK, dV home. */
static int cp_ring(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *r,
                   cp_grads *g) {
    const int P = t->size, me = t->rank, BH = s->p.B * s->p.H, D = s->p.D, L = s->p.Lq;
    const int fields = g ? 4 : 2;
    float *q[CP_MAX_CHUNKS] = {NULL};
    size_t off[4][CP_MAX_CHUNKS], max_elems = 0;
    for (int owner = 0; owner < P; ++owner) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s->strategy, L, P, owner, ch);
        const size_t e = cp_msg_layout(ch, n, BH, D, fields, off);
        max_elems = e > max_elems ? e : max_elems;
    }
    float *buf[2] = {attn_device_alloc((max_elems + 1) * sizeof(float)),
                     attn_device_alloc((max_elems + 1) * sizeof(float))};
    CP_TRY(!buf[0] || !buf[1]);
    /* this rank's queries, and its K/V shard into the first buffer (dK, dV: 0) */
    const size_t own = cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, off);
    CP_TRY(attn_cuda_report(cudaMemset(buf[0], 0, own * sizeof(float)), "cudaMemset", __FILE__,
                            __LINE__));
    for (int c = 0; c < r->nchunks; ++c) {
        float *hq = cp_slice(in->q, BH, L, D, r->chunk[c]);
        float *hk = cp_slice(in->k, BH, L, D, r->chunk[c]);
        float *hv = cp_slice(in->v, BH, L, D, r->chunk[c]);
        const size_t e = (size_t)BH * r->chunk[c].len * D;
        int bad = !hq || !hk || !hv || !(q[c] = cp_upload(hq, e)) ||
                  (e && (attn_to_device(buf[0] + off[0][c], hk, e * sizeof(float)) ||
                         attn_to_device(buf[0] + off[1][c], hv, e * sizeof(float))));
        free(hq), free(hk), free(hv);
        CP_TRY(bad);
    }
    bool have[CP_MAX_CHUNKS] = {false};
    int cur = 0;
    for (int step = 0; step < P; ++step) {
        const int owner = ((me - step) % P + P) % P;
        const int next_owner = ((me - step - 1) % P + P) % P;
        cp_chunk kc[CP_MAX_CHUNKS], nc[CP_MAX_CHUNKS];
        size_t next_off[4][CP_MAX_CHUNKS], home[4][CP_MAX_CHUNKS];
        const int nk = cp_rank_chunks(s->strategy, L, P, owner, kc);
        const int nn = cp_rank_chunks(s->strategy, L, P, next_owner, nc);
        const size_t next_elems = cp_msg_layout(nc, nn, BH, D, fields, next_off);
        const size_t cur_elems = cp_msg_layout(kc, nk, BH, D, fields, off);
        cp_fault_point(t, &s->fault, step);
        cp_request send_req, recv_req;
        /* what moves after this step, and when: the forward sends the shard on before the step
         * (the transfer overlaps it) and keeps the last one; the backward after it (dK, dV must
         * hold this rank's part), and its last hop takes only dK, dV home to their owner */
        const bool hop = g ? P > 1 : step < P - 1, last = g && step == P - 1;
        const size_t home_elems = cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, home);
        const size_t skip_out = last ? off[2][0] : 0, skip_in = last ? home[2][0] : 0;
        const size_t in_elems = (last ? home_elems : next_elems) - skip_in;
        for (int phase = 0; phase < 2; ++phase) {
            if (phase == (g ? 1 : 0) && hop) {
                int rc = t->irecv(t, buf[1 - cur] + skip_in, in_elems * sizeof(float),
                                  (me - 1 + P) % P, &recv_req);
                if (rc == CP_OK)
                    rc = t->isend(t, buf[cur] + skip_out, (cur_elems - skip_out) * sizeof(float),
                                  (me + 1) % P, &send_req);
                if (rc == CP_OK)
                    rc = t->post(t);
                if (rc != CP_OK)
                    cp_transfer_failed(t, rc, step, (me + 1) % P, "K/V", true);
            }
            if (phase == 1)
                break;
            /* this step's attention (the forward: while the next shard travels) */
            const int launches = r->launches;
            for (int c = 0; c < r->nchunks; ++c)
                for (int j = 0; j < nk; ++j)
                    CP_TRY(g ? cp_attend_bwd(s, r, g, c, q[c], kc[j], buf[cur] + off[0][j],
                                             buf[cur] + off[1][j], buf[cur] + off[2][j],
                                             buf[cur] + off[3][j])
                             : cp_attend(s, r, c, q[c], kc[j], buf[cur] + off[0][j],
                                         buf[cur] + off[1][j], &have[c]));
            if (r->launches > launches)
                r->steps_computed++;
            else
                r->steps_skipped++;
            /* the buffer the next step receives into must no longer be read by this step's
             * kernels (the receive writes it once the wait returns); the backward's dK, dV must
             * be complete before they are sent */
            CP_TRY(attn_cuda_report(cudaDeviceSynchronize(), "cudaDeviceSynchronize", __FILE__,
                                    __LINE__));
        }
        if (hop) {
            int rc = t->wait(t, &recv_req);
            if (rc != CP_OK)
                cp_transfer_failed(t, rc, step, (me - 1 + P) % P, "K/V", false);
            if ((rc = t->wait(t, &send_req)) != CP_OK)
                cp_transfer_failed(t, rc, step, (me + 1) % P, "K/V", true);
            cur = 1 - cur;
        }
    }
    if (g) { /* buf[cur] holds this rank's own shard's dK, dV, summed over every rank */
        cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, off);
        for (int c = 0; c < r->nchunks; ++c) {
            const size_t bytes = (size_t)BH * r->chunk[c].len * D * sizeof(float);
            CP_TRY(attn_cuda_report(
                       cudaMemcpy(g->dk[c], buf[cur] + off[2][c], bytes, cudaMemcpyDeviceToDevice),
                       "cudaMemcpy", __FILE__, __LINE__) ||
                   attn_cuda_report(
                       cudaMemcpy(g->dv[c], buf[cur] + off[3][c], bytes, cudaMemcpyDeviceToDevice),
                       "cudaMemcpy", __FILE__, __LINE__));
        }
    }
    for (int c = 0; c < r->nchunks; ++c)
        attn_device_free(q[c]);
    attn_device_free(buf[0]);
    attn_device_free(buf[1]);
    return 0;
}

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
static int cp_ulysses(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *r,
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

int cp_forward(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *out) {
    memset(out, 0, sizeof *out);
    out->nchunks = cp_rank_chunks(s->strategy, s->p.Lq, t->size, t->rank, out->chunk);
    CP_TRY(cp_alloc_result(out, s->p.B * s->p.H, s->p.D));
    return s->strategy == CP_ULYSSES ? cp_ulysses(t, s, in, out, NULL)
                                     : cp_ring(t, s, in, out, NULL);
}

int cp_backward(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, const float *dout,
                const cp_result *fwd, cp_result *work, cp_grads *g) {
    const int BH = s->p.B * s->p.H, D = s->p.D, P = t->size, L = s->p.Lq;
    memset(work, 0, sizeof *work);
    memset(g, 0, sizeof *g);
    work->nchunks = fwd->nchunks;
    memcpy(work->chunk, fwd->chunk, sizeof work->chunk);
    /* per chunk: dO (uploaded), dQ, dK, dV; then the scratch of one pair (its dQ, dK, dV) and
     * the kernel's workspace, sized for the longest chunk */
    size_t rows[CP_MAX_CHUNKS] = {0}, total = 0;
    for (int c = 0; c < fwd->nchunks; ++c) {
        rows[c] = (size_t)BH * fwd->chunk[c].len;
        total += 4 * rows[c] * D;
    }
    int longest = 0;
    for (int owner = 0; owner < P; ++owner) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s->strategy, L, P, owner, ch);
        for (int j = 0; j < n; ++j)
            longest = ch[j].len > longest ? ch[j].len : longest;
    }
    attn_problem most = s->p;
    most.Lq = most.Lk = longest;
    g->workspace_bytes = s->bwd->workspace_bytes ? s->bwd->workspace_bytes(&most) : 0;
    const size_t scratch = 3 * attn_problem_q_elems(&most);
    g->mem = attn_device_alloc((total + scratch) * sizeof(float) + g->workspace_bytes + 16);
    CP_TRY(!g->mem);
    CP_TRY(attn_cuda_report(cudaMemset(g->mem, 0, (total + scratch) * sizeof(float)), "cudaMemset",
                            __FILE__, __LINE__));
    float *x = (float *)g->mem;
    for (int c = 0; c < fwd->nchunks; ++c) {
        float *dev_dout = x;
        g->dout[c] = x, x += rows[c] * D;
        g->dq[c] = x, x += rows[c] * D;
        g->dk[c] = x, x += rows[c] * D;
        g->dv[c] = x, x += rows[c] * D;
        g->o[c] = fwd->o[c];
        g->lse[c] = fwd->lse[c];
        float *h = cp_slice(dout, BH, L, D, fwd->chunk[c]);
        const int bad = !h || (rows[c] && attn_to_device(dev_dout, h, rows[c] * D * sizeof(float)));
        free(h);
        CP_TRY(bad);
    }
    g->scratch = x;
    g->workspace = x + scratch;
    return s->strategy == CP_ULYSSES ? cp_ulysses(t, s, in, work, g) : cp_ring(t, s, in, work, g);
}

void cp_grads_free(cp_grads *g) {
    attn_device_free(g->mem);
    memset(g, 0, sizeof *g);
}
