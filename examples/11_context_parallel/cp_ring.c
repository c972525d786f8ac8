/* cp_ring.c — lesson code: pass-KV round the ring (cp_ring.h), contiguous or zigzag, forward and
 * backward, on example 03's and 07's kernels and the transport; the Ulysses all-to-all is
 * cp_ulysses.c. */
#include "cp_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../07_flash_attention_backward/flash_bwd.h"
#include "attn/device.h"

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

/* The ring's two message buffers, each sized for the largest shard, and this rank's queries
 * (q[c], device); its own K/V shard into buf[0] (dK, dV: 0). off: its message layout. */
static int cp_ring_load(const cp_setup *s, const attn_host_inputs *in, const cp_result *r, int P,
                        int fields, float *buf[2], float *q[CP_MAX_CHUNKS]) {
    const int BH = s->p.B * s->p.H, D = s->p.D, L = s->p.Lq;
    size_t off[4][CP_MAX_CHUNKS], max_elems = 0;
    for (int owner = 0; owner < P; ++owner) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s->strategy, L, P, owner, ch);
        const size_t e = cp_msg_layout(ch, n, BH, D, fields, off);
        max_elems = e > max_elems ? e : max_elems;
    }
    buf[0] = attn_device_alloc((max_elems + 1) * sizeof(float));
    buf[1] = attn_device_alloc((max_elems + 1) * sizeof(float));
    CP_TRY(!buf[0] || !buf[1]);
    const size_t own = cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, off);
    CP_TRY(attn_cuda_report(cudaMemset(buf[0], 0, own * sizeof(float)), "cudaMemset", __FILE__,
                            __LINE__));
    for (int c = 0; c < r->nchunks; ++c) {
        float *hq = cp_slice(in->q, BH, L, D, r->chunk[c]);
        float *hk = cp_slice(in->k, BH, L, D, r->chunk[c]);
        float *hv = cp_slice(in->v, BH, L, D, r->chunk[c]);
        const size_t e = (size_t)BH * r->chunk[c].len * D;
        int bad = !hq || !hk || !hv ||
                  attn_device_upload_bytes((void **)&q[c], hq, e * sizeof(float)) ||
                  (e && (attn_to_device(buf[0] + off[0][c], hk, e * sizeof(float)) ||
                         attn_to_device(buf[0] + off[1][c], hv, e * sizeof(float))));
        free(hq), free(hk), free(hv);
        CP_TRY(bad);
    }
    return 0;
}

/* One step's attention: every query chunk of this rank against every key chunk (kc[0 .. nk)) of
 * the shard in msg (its layout off), the forward's pairs merged into have[c]'s running result,
 * the backward's (g) added to dQ and to the shard's travelling dK, dV. Counts the step as
 * computed or skipped, and waits for its kernels (the buffer is the next step's receive). */
static int cp_ring_step(const cp_setup *s, cp_result *r, cp_grads *g, float *const *q,
                        const cp_chunk *kc, int nk, float *msg, size_t off[4][CP_MAX_CHUNKS],
                        bool *have) {
    const int launches = r->launches;
    for (int c = 0; c < r->nchunks; ++c)
        for (int j = 0; j < nk; ++j)
            CP_TRY(g ? cp_attend_bwd(s, r, g, c, q[c], kc[j], msg + off[0][j], msg + off[1][j],
                                     msg + off[2][j], msg + off[3][j])
                     : cp_attend(s, r, c, q[c], kc[j], msg + off[0][j], msg + off[1][j], &have[c]));
    if (r->launches > launches)
        r->steps_computed++;
    else
        r->steps_skipped++;
    /* the buffer the next step receives into must no longer be read by this step's kernels (the
     * receive writes it once the wait returns); the backward's dK, dV must be complete before
     * they are sent */
    CP_TRY(attn_cuda_report(cudaDeviceSynchronize(), "cudaDeviceSynchronize", __FILE__, __LINE__));
    return 0;
}

/* One hop round the ring, started: out_elems floats of out to rank r + 1, in_elems floats from
 * rank r - 1 into in. A transfer that cannot start ends the job. */
static void cp_ring_post(cp_transport *t, int step, const float *out, size_t out_elems, float *in,
                         size_t in_elems, cp_request *send_req, cp_request *recv_req) {
    const int P = t->size, me = t->rank;
    int rc = t->irecv(t, in, in_elems * sizeof(float), (me - 1 + P) % P, recv_req);
    if (rc == CP_OK)
        rc = t->isend(t, out, out_elems * sizeof(float), (me + 1) % P, send_req);
    if (rc == CP_OK)
        rc = t->post(t);
    if (rc != CP_OK)
        cp_transfer_failed(t, rc, step, (me + 1) % P, "K/V", true);
}

/* ... and finished: both waits, each naming the neighbour that did not answer. */
static void cp_ring_wait(cp_transport *t, int step, cp_request *send_req, cp_request *recv_req) {
    const int P = t->size, me = t->rank;
    int rc = t->wait(t, recv_req);
    if (rc != CP_OK)
        cp_transfer_failed(t, rc, step, (me - 1 + P) % P, "K/V", false);
    if ((rc = t->wait(t, send_req)) != CP_OK)
        cp_transfer_failed(t, rc, step, (me + 1) % P, "K/V", true);
}

/* The backward's end: msg holds this rank's own shard's dK, dV, summed over every rank. */
static int cp_ring_take_home(const cp_setup *s, const cp_result *r, cp_grads *g, const float *msg,
                             int fields) {
    const int BH = s->p.B * s->p.H, D = s->p.D;
    size_t off[4][CP_MAX_CHUNKS];
    cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, off);
    for (int c = 0; c < r->nchunks; ++c) {
        const size_t bytes = (size_t)BH * r->chunk[c].len * D * sizeof(float);
        CP_TRY(
            attn_cuda_report(cudaMemcpy(g->dk[c], msg + off[2][c], bytes, cudaMemcpyDeviceToDevice),
                             "cudaMemcpy", __FILE__, __LINE__) ||
            attn_cuda_report(cudaMemcpy(g->dv[c], msg + off[3][c], bytes, cudaMemcpyDeviceToDevice),
                             "cudaMemcpy", __FILE__, __LINE__));
    }
    return 0;
}

/* pass-KV: P steps; at step s this rank holds the shard of rank (r - s) mod P in `cur`, sends it
 * on to r + 1 and receives the next one from r - 1 into the other buffer while it attends to
 * `cur`. The backward (g non-NULL) does the same with dK and dV travelling with their shard: each
 * step adds its part before the shard moves on, so the transfer follows the step, and one more
 * hop at the end takes every shard's summed dK, dV home. */
static int cp_ring(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *r,
                   cp_grads *g) {
    const int P = t->size, me = t->rank, BH = s->p.B * s->p.H, D = s->p.D, L = s->p.Lq;
    const int fields = g ? 4 : 2;
    float *q[CP_MAX_CHUNKS] = {NULL}, *buf[2] = {NULL, NULL};
    CP_TRY(cp_ring_load(s, in, r, P, fields, buf, q));
    bool have[CP_MAX_CHUNKS] = {false};
    int cur = 0;
    for (int step = 0; step < P; ++step) {
        cp_chunk kc[CP_MAX_CHUNKS], nc[CP_MAX_CHUNKS];
        size_t off[4][CP_MAX_CHUNKS], next_off[4][CP_MAX_CHUNKS], home[4][CP_MAX_CHUNKS];
        const int owner = ((me - step) % P + P) % P;          /* whose shard this step holds */
        const int next_owner = ((me - step - 1) % P + P) % P; /* whose shard comes in next */
        const int nk = cp_rank_chunks(s->strategy, L, P, owner, kc);
        const int nn = cp_rank_chunks(s->strategy, L, P, next_owner, nc);
        const size_t next_elems = cp_msg_layout(nc, nn, BH, D, fields, next_off);
        const size_t cur_elems = cp_msg_layout(kc, nk, BH, D, fields, off);
        cp_fault_point(t, &s->fault, step);
        /* what moves after this step, and when: the forward sends the shard on before the step
         * (the transfer overlaps it) and keeps the last one; the backward after it (dK, dV must
         * hold this rank's part), and its last hop takes only dK, dV home to their owner */
        const bool hop = g ? P > 1 : step < P - 1, last = g && step == P - 1;
        const size_t home_elems = cp_msg_layout(r->chunk, r->nchunks, BH, D, fields, home);
        const size_t skip_out = last ? off[2][0] : 0, skip_in = last ? home[2][0] : 0;
        const size_t in_elems = (last ? home_elems : next_elems) - skip_in;
        cp_request send_req, recv_req;
        if (hop && !g)
            cp_ring_post(t, step, buf[cur] + skip_out, cur_elems - skip_out, buf[1 - cur] + skip_in,
                         in_elems, &send_req, &recv_req);
        CP_TRY(cp_ring_step(s, r, g, q, kc, nk, buf[cur], off, have));
        if (hop && g)
            cp_ring_post(t, step, buf[cur] + skip_out, cur_elems - skip_out, buf[1 - cur] + skip_in,
                         in_elems, &send_req, &recv_req);
        if (hop) {
            cp_ring_wait(t, step, &send_req, &recv_req);
            cur = 1 - cur;
        }
    }
    if (g)
        CP_TRY(cp_ring_take_home(s, r, g, buf[cur], fields));
    for (int c = 0; c < r->nchunks; ++c)
        attn_device_free(q[c]);
    attn_device_free(buf[0]);
    attn_device_free(buf[1]);
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
