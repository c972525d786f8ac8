/* cp_dsa.c — lesson code: DeepSeek sparse attention across ranks (cp_dsa.h) on example 05's
 * kernels, in the four steps cp_dsa_forward reads as; the inputs and the one-device run that
 * checks it: cp_dsa_inputs.c. */
#include "cp_dsa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/device.h"
#include "attn/tensor.h"

/* Rows [start, start + len) of every sequence of a [B, L, width] tensor of dtype t, packed into
 * dst as [B, len, width] (host). */
static void cp_rows_pack(void *dst, const float *src, int B, int L, int width, int start, int len,
                         attn_dtype t) {
    const size_t es = attn_dtype_size(t), n = (size_t)len * width;
    for (int b = 0; b < B; ++b)
        attn_pack((char *)dst + (size_t)b * n * es, src + ((size_t)b * L + start) * width, n, t);
}

/* One all-to-all of host buffers (the transport moves device buffers: staged through them). */
static int cp_alltoall_host(cp_transport *t, const void *hsend, const size_t *sb, const size_t *so,
                            size_t send_total, void *hrecv, const size_t *rb, const size_t *ro,
                            size_t recv_total, const char *what) {
    void *dsend = attn_device_alloc(send_total + 16), *drecv = attn_device_alloc(recv_total + 16);
    CP_TRY(!dsend || !drecv || (send_total && attn_to_device(dsend, hsend, send_total)));
    const int rc = t->alltoall(t, dsend, sb, so, drecv, rb, ro);
    if (rc != CP_OK)
        cp_transfer_failed(t, rc, 0, -1, what, false);
    CP_TRY(recv_total && attn_to_host(hrecv, drecv, recv_total));
    attn_device_free(dsend);
    attn_device_free(drecv);
    return 0;
}

/* Every rank's rows of a [B, L, width] tensor to every rank, by one all-to-all whose message to
 * each peer is the same: this rank's chunks, [chunk][B][len][width] in dtype t. full: host
 * [B, L, width] of t, filled from what arrived. *received: the bytes from the other ranks. */
static int cp_allgather_rows(cp_transport *t, cp_strategy s, const float *src, int B, int L,
                             int width, attn_dtype dt, void *full, double *received,
                             const char *what) {
    const int P = t->size, me = t->rank;
    const size_t row = (size_t)width * attn_dtype_size(dt);
    size_t *sz = calloc(4 * (size_t)P, sizeof *sz);
    CP_TRY(!sz);
    size_t *sb = sz, *so = sz + P, *rb = sz + 2 * P, *ro = sz + 3 * P, total = 0;
    for (int g = 0; g < P; ++g) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s, L, P, g, ch);
        rb[g] = 0;
        for (int j = 0; j < n; ++j)
            rb[g] += (size_t)B * ch[j].len * row;
        ro[g] = total;
        total += rb[g];
    }
    for (int g = 0; g < P; ++g)
        sb[g] = rb[me], so[g] = 0;
    char *hsend = malloc(rb[me] + 1), *hrecv = malloc(total + 1);
    CP_TRY(!hsend || !hrecv);
    cp_chunk mine[CP_MAX_CHUNKS];
    const int nm = cp_rank_chunks(s, L, P, me, mine);
    size_t at = 0;
    for (int j = 0; j < nm; ++j) {
        cp_rows_pack(hsend + at, src, B, L, width, mine[j].start, mine[j].len, dt);
        at += (size_t)B * mine[j].len * row;
    }
    CP_TRY(cp_alltoall_host(t, hsend, sb, so, rb[me], hrecv, rb, ro, total, what));
    for (int g = 0; g < P; ++g) { /* [chunk][B][len] of rank g into [B, L] */
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s, L, P, g, ch);
        const char *from = hrecv + ro[g];
        for (int j = 0; j < n; ++j)
            for (int b = 0; b < B; ++b) {
                memcpy((char *)full + ((size_t)b * L + ch[j].start) * row, from,
                       (size_t)ch[j].len * row);
                from += (size_t)ch[j].len * row;
            }
    }
    *received = (double)(total - rb[me]);
    free(hsend), free(hrecv), free(sz);
    return 0;
}

/* The rows of a [B, L, width] tensor that this rank needs (need[b * L + pos], never its own),
 * fetched from their owners in three all-to-alls: how many rows each asks of each, which
 * (b * L + pos, int32), and the rows themselves in dtype t, into full (host [B, L, width] of t;
 * rows not needed are left as they are; NULL: dropped, the planted bug no-fetch). *received: the
 * rows' bytes. */
static int cp_fetch_rows(cp_transport *t, cp_strategy s, const float *src, int B, int L, int width,
                         attn_dtype dt, const bool *need, void *full, double *received) {
    const int P = t->size;
    const size_t row = (size_t)width * attn_dtype_size(dt);
    int *owner = malloc((size_t)L * sizeof *owner + 1);
    size_t *sz = calloc(4 * (size_t)P, sizeof *sz);
    int64_t *want = calloc((size_t)P, sizeof *want), *asked = calloc((size_t)P, sizeof *asked);
    CP_TRY(!owner || !sz || !want || !asked);
    size_t *sb = sz, *so = sz + P, *rb = sz + 2 * P, *ro = sz + 3 * P;
    for (int g = 0; g < P; ++g) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int n = cp_rank_chunks(s, L, P, g, ch);
        for (int j = 0; j < n; ++j)
            for (int i = ch[j].start; i < ch[j].start + ch[j].len; ++i)
                owner[i] = g;
    }
    int64_t n_need = 0;
    for (int64_t x = 0; x < (int64_t)B * L; ++x)
        if (need[x])
            want[owner[x % L]]++, n_need++;
    /* 1. how many rows this rank asks of each rank, and how many each asks of it */
    for (int g = 0; g < P; ++g)
        sb[g] = rb[g] = sizeof(int64_t), so[g] = ro[g] = g * sizeof(int64_t);
    CP_TRY(cp_alltoall_host(t, want, sb, so, P * sizeof(int64_t), asked, rb, ro,
                            P * sizeof(int64_t), "fetch counts"));
    /* 2. which rows: b * L + pos, grouped by owner */
    int64_t n_asked = 0;
    for (int g = 0; g < P; ++g)
        n_asked += asked[g];
    int32_t *idx = malloc((size_t)n_need * sizeof *idx + 1);
    int32_t *req = malloc((size_t)n_asked * sizeof *req + 1);
    CP_TRY(!idx || !req);
    size_t at = 0, at_in = 0;
    for (int g = 0; g < P; ++g) {
        so[g] = at * sizeof *idx, sb[g] = (size_t)want[g] * sizeof *idx;
        ro[g] = at_in * sizeof *req, rb[g] = (size_t)asked[g] * sizeof *req;
        for (int64_t x = 0; x < (int64_t)B * L; ++x)
            if (need[x] && owner[x % L] == g)
                idx[at++] = (int32_t)x;
        at_in += (size_t)asked[g];
    }
    CP_TRY(cp_alltoall_host(t, idx, sb, so, (size_t)n_need * sizeof *idx, req, rb, ro,
                            (size_t)n_asked * sizeof *req, "fetch requests"));
    /* 3. the rows asked of this rank, in the order asked, back to who asked */
    char *reply = malloc((size_t)n_asked * row + 1), *got = malloc((size_t)n_need * row + 1);
    CP_TRY(!reply || !got);
    for (int64_t x = 0; x < n_asked; ++x)
        attn_pack(reply + x * row, src + (size_t)req[x] * width, (size_t)width, dt);
    for (int g = 0; g < P; ++g) {
        sb[g] = (size_t)asked[g] * row, so[g] = ro[g] / sizeof *req * row;
        rb[g] = (size_t)want[g] * row, ro[g] = 0;
    }
    for (int g = 0, off = 0; g < P; off += (int)want[g], ++g)
        ro[g] = (size_t)off * row;
    CP_TRY(cp_alltoall_host(t, reply, sb, so, (size_t)n_asked * row, got, rb, ro,
                            (size_t)n_need * row, "fetched K/V"));
    for (int64_t x = 0; full && x < n_need; ++x)
        memcpy((char *)full + (size_t)idx[x] * row, got + x * row, row);
    *received = (double)n_need * (double)row;
    free(owner), free(sz), free(want), free(asked), free(idx), free(req), free(reply), free(got);
    return 0;
}

/* The first `end` rows of every sequence of a host [B, L, row bytes] tensor, to new device
 * memory as [B, end, row]: the keys a query chunk ending at `end` can see. */
static void *cp_prefix_upload(const void *full, int B, int L, int end, size_t row) {
    char *h = malloc((size_t)B * end * row + 1);
    if (!h)
        return NULL;
    for (int b = 0; b < B; ++b)
        memcpy(h + (size_t)b * end * row, (const char *)full + (size_t)b * L * row,
               (size_t)end * row);
    void *d = NULL;
    const int bad = attn_device_upload_bytes(&d, h, (size_t)B * end * row + 1);
    free(h);
    if (bad) {
        attn_device_free(d);
        return NULL;
    }
    return d;
}

/* Whether position i is one of this rank's (in one of its chunks). */
static bool cp_owns(const cp_result *r, int i) {
    for (int c = 0; c < r->nchunks; ++c)
        if (i >= r->chunk[c].start && i < r->chunk[c].start + r->chunk[c].len)
            return true;
    return false;
}

/* Step 1: the indexer key of every position, from its owner: host [B, L, DI] of the dtype (NULL
 * after an error); *received: its bytes. The planted bug local-index keeps this rank's only. */
static void *cp_dsa_index_keys(cp_transport *t, cp_strategy s, const cp_dsa_inputs *in,
                               const cp_result *out, int plant, double *received) {
    const int B = in->p.B, L = in->p.Lq;
    const size_t row = (size_t)in->DI * attn_dtype_size(in->p.dtype);
    void *ki_full = malloc((size_t)B * L * row + 1);
    if (!ki_full || cp_allgather_rows(t, s, in->ki, B, L, in->DI, in->p.dtype, ki_full, received,
                                      "indexer-key")) {
        free(ki_full);
        return NULL;
    }
    if (plant == CP_DSA_PLANT_LOCAL_INDEX)
        for (int b = 0; b < B; ++b)
            for (int i = 0; i < L; ++i)
                if (!cp_owns(out, i))
                    memset((char *)ki_full + ((size_t)b * L + i) * row, 0, row);
    return ki_full;
}

/* A query chunk between the steps: its problem (its queries against the keys [0, end), causal
 * bottom-right: query i of the chunk sits at start + i), example 05's arguments, its selection. */
typedef struct cp_dsa_chunk {
    attn_problem p;
    ds_args a;
    int32_t *dsel; /* device [B, len, K]: global positions, -1 past the visible keys */
} cp_dsa_chunk;

/* This rank's result for chunk c, fp32, one allocation: O [B, H, len, D], LSE [B, H, len] and the
 * selection [B, H, len, K] (*sel). */
static int cp_dsa_alloc_result(cp_result *out, int c, const attn_problem *p, int K, float **sel) {
    const size_t rows = (size_t)p->B * out->chunk[c].len, H = (size_t)p->H;
    const size_t res = rows * H * p->D + rows * H + rows * H * K;
    CP_TRY(!(out->mem[c] = attn_device_alloc(res * sizeof(float) + 16)));
    out->o[c] = (float *)out->mem[c];
    out->lse[c] = out->o[c] + rows * H * p->D;
    *sel = out->lse[c] + rows * H;
    return 0;
}

/* The chunk's selection dsel as the result's floats sel [B, H, len, K] (the same for every head),
 * and need[b * L + j] set for every selected position j (what a fetch must bring). */
static int cp_dsa_record(const cp_dsa_inputs *in, cp_chunk ch, const int32_t *dsel, float *sel,
                         bool *need) {
    const int B = in->p.B, H = in->p.H, L = in->p.Lq, K = in->K;
    const size_t rows = (size_t)B * ch.len;
    int32_t *hs = malloc(rows * K * sizeof *hs + 1);
    float *hf = malloc(rows * H * K * sizeof *hf + 1);
    int bad = !hs || !hf || attn_to_host(hs, dsel, rows * K * sizeof *hs);
    for (int b = 0; !bad && b < B; ++b)
        for (int i = 0; i < ch.len; ++i)
            for (int x = 0; x < K; ++x) {
                const int32_t j = hs[((size_t)b * ch.len + i) * K + x];
                if (j >= 0)
                    need[(size_t)b * L + j] = true;
                for (int h = 0; h < H; ++h)
                    hf[(((size_t)b * H + h) * ch.len + i) * K + x] = (float)j;
            }
    bad = bad || attn_to_device(sel, hf, rows * H * K * sizeof *hf);
    free(hs), free(hf);
    return bad;
}

/* Step 2, for query chunk ch (not empty): example 05's indexer and radix top-k over the causal
 * prefix [0, end) of the gathered indexer keys: x->dsel, recorded in sel and need. */
static int cp_dsa_select(const cp_dsa_inputs *in, cp_chunk ch, const void *ki_full, cp_dsa_chunk *x,
                         float *sel, bool *need) {
    const int B = in->p.B, L = in->p.Lq, HI = in->HI, DI = in->DI, K = in->K,
              end = ch.start + ch.len;
    const attn_dtype dt = in->p.dtype;
    const size_t rows = (size_t)B * ch.len;
    attn_problem_init(&x->p, B, in->p.H, ch.len, end, in->p.D);
    x->p.dtype = dt;
    x->p.causal = true;
    memset(&x->a, 0, sizeof x->a);
    x->a.p = &x->p;
    x->a.index_heads = HI, x->a.index_dim = DI, x->a.topk = K, x->a.chunk = ch.len;
    float *qi = cp_slice(in->qi, B, L, HI * DI, ch), *w = cp_slice(in->w, B, L, HI, ch);
    void *dqi = NULL, *dw = NULL, *staging = malloc(rows * HI * DI * 4 + 16);
    const int bad = !qi || !w || !staging ||
                    attn_device_upload(&dqi, qi, rows * HI * DI, dt, staging) ||
                    attn_device_upload(&dw, w, rows * HI, ATTN_F32, staging);
    free(qi), free(w), free(staging);
    CP_TRY(bad);
    void *dki = cp_prefix_upload(ki_full, B, L, end, (size_t)DI * attn_dtype_size(dt));
    float *logits = attn_device_alloc(rows * end * sizeof(float) + 16);
    x->dsel = attn_device_alloc(rows * K * sizeof(int32_t) + 16);
    CP_TRY(!dki || !logits || !x->dsel);
    x->a.q_index = dqi, x->a.k_index = dki, x->a.w = dw, x->a.logits = logits;
    x->a.sel = x->dsel;
    ds_launch_indexer(&x->a, 0, 0);
    ds_launch_topk_radix(&x->a, 0, 0);
    CP_TRY(attn_cuda_report(cudaDeviceSynchronize(), "example 05's indexer and top-k", __FILE__,
                            __LINE__));
    attn_device_free(dqi), attn_device_free(dw), attn_device_free(dki);
    attn_device_free(logits);
    return cp_dsa_record(in, ch, x->dsel, sel, need);
}

/* Step 3: K and V (one row: [K | V]) of the positions this rank needs and does not hold, fetched
 * from their owners, or of every position all-gathered (fetch_kv false): host [B, L, 2D] of the
 * dtype (NULL after an error). bytes[1], bytes[2]: what the all-gather and the fetch received
 * (the one not run: what it would have received). The planted bug no-fetch drops the rows. */
static void *cp_dsa_kv(cp_transport *t, cp_strategy s, const cp_dsa_inputs *in,
                       const cp_result *out, bool *need, bool fetch_kv, int plant,
                       double bytes[3]) {
    const int B = in->p.B, L = in->p.Lq, D = in->p.D;
    const attn_dtype dt = in->p.dtype;
    const size_t es = attn_dtype_size(dt);
    double fetch = 0.0, others = 0.0;
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < L; ++i) {
            const bool own = cp_owns(out, i);
            need[(size_t)b * L + i] = need[(size_t)b * L + i] && !own;
            fetch += need[(size_t)b * L + i];
            others += !own;
        }
    float *kv = malloc((size_t)B * L * 2 * D * sizeof(float) + 1);
    void *kv_full = calloc((size_t)B * L * 2 * D * es + 1, 1);
    int bad = !kv || !kv_full;
    for (size_t r = 0; !bad && r < (size_t)B * L; ++r) {
        memcpy(kv + r * 2 * D, in->k + r * D, D * sizeof(float));
        memcpy(kv + r * 2 * D + D, in->v + r * D, D * sizeof(float));
    }
    if (!bad && fetch_kv) {
        for (int c = 0; c < out->nchunks; ++c) /* this rank's own rows */
            for (int b = 0; b < B; ++b)
                attn_pack((char *)kv_full + ((size_t)b * L + out->chunk[c].start) * 2 * D * es,
                          kv + ((size_t)b * L + out->chunk[c].start) * 2 * D,
                          (size_t)out->chunk[c].len * 2 * D, dt);
        bad = cp_fetch_rows(t, s, kv, B, L, 2 * D, dt, need,
                            plant == CP_DSA_PLANT_NO_FETCH ? NULL : kv_full, &bytes[2]);
        bytes[1] = others * 2.0 * D * (double)es; /* what the all-gather would have received */
    } else if (!bad) {
        bad = cp_allgather_rows(t, s, kv, B, L, 2 * D, dt, kv_full, &bytes[1], "K/V");
        bytes[2] = fetch * 2.0 * D * (double)es; /* what a fetch would have received */
    }
    free(kv);
    if (bad) {
        free(kv_full);
        return NULL;
    }
    return kv_full;
}

/* Step 4, for query chunk ch (not empty): example 05's sparse_mma over its selection, the keys
 * [0, end) of kv_full uploaded; the output into o and lse (fp32, this rank's result). */
static int cp_dsa_attend(const cp_dsa_inputs *in, cp_chunk ch, const void *kv_full, cp_dsa_chunk *x,
                         float *o, float *lse) {
    const int B = in->p.B, H = in->p.H, L = in->p.Lq, D = in->p.D, end = ch.start + ch.len;
    const attn_dtype dt = in->p.dtype;
    const size_t es = attn_dtype_size(dt), rows = (size_t)B * ch.len, nq = rows * H * D;
    char *hk = malloc((size_t)B * end * D * es + 1), *hv = malloc((size_t)B * end * D * es + 1);
    CP_TRY(!hk || !hv);
    for (size_t r = 0; r < (size_t)B * end; ++r) { /* row r of [B, end]: b = r / end */
        const size_t src = (r / end) * L + r % end;
        memcpy(hk + r * D * es, (const char *)kv_full + src * 2 * D * es, D * es);
        memcpy(hv + r * D * es, (const char *)kv_full + (src * 2 + 1) * D * es, D * es);
    }
    void *dk = NULL, *dv = NULL, *dq = NULL, *dout = attn_device_alloc(nq * es + 16);
    float *q = cp_slice(in->q, B * H, L, D, ch);
    void *staging = malloc(nq * 4 + 16);
    int bad = !q || !staging || !dout ||
              attn_device_upload_bytes(&dk, hk, (size_t)B * end * D * es + 1) ||
              attn_device_upload_bytes(&dv, hv, (size_t)B * end * D * es + 1) ||
              attn_device_upload(&dq, q, nq, dt, staging);
    free(hk), free(hv), free(q);
    CP_TRY(bad);
    x->a.q = dq, x->a.k = dk, x->a.v = dv, x->a.o = dout, x->a.lse = lse;
    ds_launch_sparse_mma(&x->a, 0);
    CP_TRY(
        attn_cuda_report(cudaDeviceSynchronize(), "example 05's sparse_mma", __FILE__, __LINE__));
    float *of = malloc(nq * sizeof *of + 1);
    bad = !of || attn_to_host(staging, dout, nq * es);
    if (!bad) {
        attn_unpack(of, staging, nq, dt);
        bad = attn_to_device(o, of, nq * sizeof *of);
    }
    free(of), free(staging);
    attn_device_free(dq), attn_device_free(dk), attn_device_free(dv), attn_device_free(dout);
    return bad;
}

int cp_dsa_forward(cp_transport *t, cp_strategy s, const cp_dsa_inputs *in, bool fetch_kv,
                   int plant, cp_result *out, float *sel[CP_MAX_CHUNKS], double bytes[3]) {
    memset(out, 0, sizeof *out);
    out->nchunks = cp_rank_chunks(s, in->p.Lq, t->size, t->rank, out->chunk);
    cp_dsa_chunk x[CP_MAX_CHUNKS];
    memset(x, 0, sizeof x);
    bool *need = calloc((size_t)in->p.B * in->p.Lq + 1, 1);
    /* 1. the indexer keys of every position, from their owners */
    void *ki_full = need ? cp_dsa_index_keys(t, s, in, out, plant, &bytes[0]) : NULL,
         *kv_full = NULL;
    int bad = !ki_full;
    /* 2. per query chunk: the indexer and the top-k over the causal prefix [0, end) */
    for (int c = 0; !bad && c < out->nchunks; ++c)
        bad = cp_dsa_alloc_result(out, c, &in->p, in->K, &sel[c]) ||
              (out->chunk[c].len && cp_dsa_select(in, out->chunk[c], ki_full, &x[c], sel[c], need));
    /* 3. K and V of the selected positions from their owners (or of every position) */
    if (!bad)
        bad = !(kv_full = cp_dsa_kv(t, s, in, out, need, fetch_kv, plant, bytes));
    /* 4. sparse attention over the selection: example 05's sparse_mma */
    for (int c = 0; !bad && c < out->nchunks; ++c)
        if (out->chunk[c].len) {
            bad = cp_dsa_attend(in, out->chunk[c], kv_full, &x[c], out->o[c], out->lse[c]);
            out->launches += !bad;
        }
    for (int c = 0; c < out->nchunks; ++c)
        attn_device_free(x[c].dsel);
    free(need), free(ki_full), free(kv_full);
    return bad;
}
