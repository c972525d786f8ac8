/* decode_api.c — example 09's kernels as a library for a model's decoding loop (decode_api.h):
 * the session's paged caches, its page allocator and the calls that launch decode.cu's versions
 * 1 (append), 5 (paged), 6 (indexer), example 05's radix top-k, and 9 (sparse); with the FP8
 * cache (dec_session_use_fp8) 11 (append_fp8) and 12 (paged_fp8).
 */
#include "decode_api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "attn/tensor.h"
#include "decode.h"

struct dec_session {
    int layers, B, H, H_kv, D, P, max_tokens, HI, DI, W, num_pages, n_new, sm_count;
    attn_dtype dtype;
    size_t dsize;
    /* one array (host, then device): the block table [B, W], the lengths [B], cu_k and cu_q
     * [B + 1] each (decode.h), copied to the device once a step */
    int *table, *lens, *cu, *cu_q, *free_pages, n_free;
    /* the pools of every layer, one after another (layer l's at l x one layer's bytes) */
    unsigned char *k_pages, *v_pages, *ki_pages; /* ki_pages: NULL without index keys */
    /* dec_session_use_fp8: the FP8 pools instead (k8 non-NULL), e4m3 codes [pages, P, H_kv, D]
     * and fp32 scales [pages, P, H_kv] */
    unsigned char *k8, *v8, *k8s, *v8s;
    size_t pool, pool_ki, codes, scales; /* one layer's bytes of each */
    attn_allocs mem; /* the host arrays, the block table's and the index-key and FP8 pools */
    int *d_table, *d_lens, *d_cu_k, *d_cu_q;
    void *scratch; /* the step's device buffers, in one grown as needed */
    size_t cap_scratch;
    void *staging;
    size_t cap_staging;
    void *last_sel; /* the last DSA step's selection */
    size_t cap_last_sel, last_sel_bytes;
    double seconds;
    char err[512], device[256];
};

/* The session's last error (dec_session_error): fail(s, rc, fmt, ...) returns rc. */
#define fail(s, rc, ...) attn_reason((s)->err, sizeof(s)->err, (rc), __VA_ARGS__)

static double now(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC); /* C11's clock */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The step's device buffers: n (at most 8) of the given sizes (0: NULL) into at[], 256-byte aligned
 * in the session's scratch (grown, its contents dropped, when smaller). 0, or 1 after the reason.
 */
static int buffers(dec_session *s, int n, const size_t *bytes, void **at) {
    size_t off[8], total = 0;
    for (int x = 0; x < n; ++x)
        off[x] = total, total += (bytes[x] + 255) / 256 * 256;
    if (attn_device_grow(&s->scratch, &s->cap_scratch, total))
        return fail(s, 1, "cannot allocate %zu bytes of device memory", total);
    for (int x = 0; x < n; ++x)
        at[x] = bytes[x] > 0 ? (char *)s->scratch + off[x] : NULL;
    return 0;
}

/* count fp32 values packed to type t into dst on the device. 0, or 1 after the reason. */
static int put(dec_session *s, void *dst, const float *src, size_t count, attn_dtype t) {
    if (attn_device_put(dst, src, count, t, &s->staging, &s->cap_staging))
        return fail(s, 1, "cannot copy %zu bytes to the device", count * attn_dtype_size(t));
    return 0;
}

static int sync(dec_session *s) { return attn_device_sync(s->err, sizeof s->err); }

const char *dec_session_backend(void) { return attn_backend_name(); }
const char *dec_session_device(const dec_session *s) { return s->device; }
const char *dec_session_error(const dec_session *s) { return s->err; }
double dec_session_seconds(const dec_session *s) { return s->seconds; }
int dec_session_length(const dec_session *s, int b) { return b >= 0 && b < s->B ? s->lens[b] : -1; }

void dec_session_close(dec_session *s) {
    if (s == NULL)
        return;
    attn_device_free(s->scratch), attn_device_free(s->k_pages), attn_device_free(s->v_pages);
    attn_allocs_free(&s->mem);
    free(s->staging), free(s->last_sel), free(s);
}

dec_session *dec_session_open(int layers, int batch, int heads, int kv_heads, int head_dim,
                              int dtype, int page_size, int max_tokens, int index_heads,
                              int index_dim, unsigned long long seed, char *err, int err_len) {
    const char *bad = layers < 1 || batch < 1 || heads < 1 || page_size < 1 || max_tokens < 1
                          ? "layers, batch, heads, page size and max_tokens must be positive"
                      : dtype < 0 || dtype > 2 ? "dtype must be 0 (f32), 1 (f16) or 2 (bf16)"
                      : index_dim == 0
                          ? dec_unsupported(heads, kv_heads, head_dim, 1, 1, 8)
                          : dec_unsupported(heads, kv_heads, head_dim, 1, index_heads, index_dim);
    attn_device_info info;
    char why[256];
    if (bad == NULL && attn_device_init(&info, why, sizeof why) != 0)
        bad = why;
    dec_session *s = bad == NULL ? (dec_session *)calloc(1, sizeof *s) : NULL;
    if (s == NULL) {
        snprintf(err, (size_t)err_len, "%s", bad != NULL ? bad : "out of host memory");
        return NULL;
    }
    s->layers = layers, s->B = batch, s->H = heads, s->H_kv = kv_heads, s->D = head_dim;
    s->P = page_size, s->max_tokens = max_tokens, s->HI = index_heads, s->DI = index_dim;
    s->dtype = (attn_dtype)dtype;
    s->dsize = attn_dtype_size(s->dtype);
    s->sm_count = info.sm_count;
    snprintf(s->device, sizeof s->device, "%s", info.name);
    s->W = dec_pages_for(max_tokens, page_size);
    s->num_pages = s->W * batch;
    attn_allocs *m = &s->mem;
    const size_t ints = (size_t)batch * (s->W + 3) + 2; /* the table, lens, cu_k, cu_q */
    s->table = attn_allocs_host(m, ints, sizeof(int));
    s->d_table = attn_allocs_device(m, ints * sizeof(int));
    s->free_pages = attn_allocs_host(m, (size_t)s->num_pages, sizeof(int));
    s->pool = (size_t)s->num_pages * page_size * kv_heads * head_dim * s->dsize;
    s->pool_ki = (size_t)s->num_pages * page_size * index_dim * s->dsize;
    s->k_pages = attn_device_alloc((size_t)layers * s->pool);
    s->v_pages = attn_device_alloc((size_t)layers * s->pool);
    s->ki_pages = index_dim > 0 ? attn_allocs_device(m, (size_t)layers * s->pool_ki) : NULL;
    if (m->failed || !s->k_pages || !s->v_pages) {
        snprintf(err, (size_t)err_len, "out of memory for %d layers of %d pages of %d tokens",
                 layers, s->num_pages, page_size);
        dec_session_close(s);
        return NULL;
    }
    s->lens = s->table + (size_t)batch * s->W, s->cu = s->lens + batch, s->cu_q = s->cu + batch + 1;
    s->d_lens = s->d_table + (size_t)batch * s->W, s->d_cu_k = s->d_lens + batch;
    s->d_cu_q = s->d_cu_k + batch + 1;
    for (int x = 0; x < batch * s->W; ++x)
        s->table[x] = -1;
    /* the free list, in a shuffled order: consecutive pages of a sequence lie anywhere */
    dec_shuffle(s->free_pages, s->num_pages, seed);
    s->n_free = s->num_pages;
    return s;
}

int dec_session_use_fp8(dec_session *s) {
    if (s->k8 != NULL) /* already */
        return 0;
    if (s->n_free < s->num_pages) /* a step has begun: pages handed out */
        return fail(s, 2, "the FP8 cache is chosen before the first token is appended");
    if (s->DI != 0)
        return fail(s, 2,
                    "the FP8 cache serves dense attention: open the session with no "
                    "index-key cache (index_dim 0)");
    const size_t slots = (size_t)s->num_pages * s->P, L = (size_t)s->layers;
    s->codes = slots * s->H_kv * s->D, s->scales = slots * s->H_kv * sizeof(float);
    attn_device_free(s->k_pages), attn_device_free(s->v_pages); /* not read */
    s->k_pages = s->v_pages = NULL;
    s->k8 = attn_allocs_device(&s->mem, L * s->codes);
    s->v8 = attn_allocs_device(&s->mem, L * s->codes);
    s->k8s = attn_allocs_device(&s->mem, L * s->scales);
    s->v8s = attn_allocs_device(&s->mem, L * s->scales);
    return s->mem.failed
               ? fail(s, 1, "out of device memory for the FP8 pools of %d layers", s->layers)
               : 0;
}

int dec_session_begin(dec_session *s, int n_new) {
    if (s->n_new != 0)
        return fail(s, 2, "a step is already open (dec_session_end first)");
    if (n_new < 1)
        return fail(s, 2, "a step adds at least one token (got %d)", n_new);
    for (int b = 0; b < s->B; ++b) {
        if (s->lens[b] + n_new > s->max_tokens)
            return fail(s, 2, "sequence %d would hold %d tokens, more than the session's %d", b,
                        s->lens[b] + n_new, s->max_tokens);
        for (int x = dec_pages_for(s->lens[b], s->P); x < dec_pages_for(s->lens[b] + n_new, s->P);
             ++x)
            s->table[(size_t)b * s->W + x] = s->free_pages[--s->n_free];
        s->lens[b] += n_new;
    }
    s->n_new = n_new;
    if (dec_check_block_table(s->table, s->B, s->W, s->lens, s->P, s->num_pages, s->err,
                              sizeof s->err)) /* its reason: the session's error */
        return 1;
    for (int b = 0; b < s->B; ++b) { /* cu_k[0] = cu_q[0] = 0 from the start */
        s->cu[b + 1] = s->cu[b] + s->lens[b];
        s->cu_q[b + 1] = (b + 1) * n_new;
    }
    if (attn_to_device(s->d_table, s->table, ((size_t)s->B * (s->W + 3) + 2) * sizeof(int)))
        return fail(s, 1, "cannot copy the block table to the device");
    return 0;
}

int dec_session_end(dec_session *s) {
    if (s->n_new == 0)
        return fail(s, 2, "no step is open (dec_session_begin first)");
    s->n_new = 0;
    return 0;
}

/* Layer l's pool in a pool of every layer's (NULL: none). */
static void *at(unsigned char *pools, int l, size_t bytes) {
    return pools != NULL ? pools + (size_t)l * bytes : NULL;
}

/* The step's arguments for layer l (decode.h). */
static dec_args args_of(const dec_session *s, int layer) {
    dec_args a;
    memset(&a, 0, sizeof a);
    a.B = s->B, a.H = s->H, a.H_kv = s->H_kv, a.Lq = s->n_new, a.D = s->D;
    for (int b = 0; b < s->B; ++b)
        a.L_cap = s->lens[b] > a.L_cap ? s->lens[b] : a.L_cap;
    a.dtype = s->dtype;
    a.scale = 1.0f / sqrtf((float)s->D);
    a.seqlens = s->d_lens;
    a.k_pages = at(s->k_pages, layer, s->pool), a.v_pages = at(s->v_pages, layer, s->pool);
    a.ki_pages = at(s->ki_pages, layer, s->pool_ki);
    a.k8_pages = at(s->k8, layer, s->codes), a.v8_pages = at(s->v8, layer, s->codes);
    a.k8_scales = at(s->k8s, layer, s->scales), a.v8_scales = at(s->v8s, layer, s->scales);
    a.block_table = s->d_table;
    a.table_width = s->W, a.page_size = s->P, a.num_pages = s->num_pages;
    a.index_heads = s->HI, a.index_dim = s->DI;
    a.cu_q = s->d_cu_q, a.cu_k = s->d_cu_k;
    a.splits = 1;
    return a;
}

static int check_layer(dec_session *s, int layer) {
    if (s->n_new == 0)
        return fail(s, 2, "no step is open (dec_session_begin first)");
    if (layer < 0 || layer >= s->layers)
        return fail(s, 2, "layer %d is not in 0 .. %d", layer, s->layers - 1);
    return 0;
}

int dec_session_append(dec_session *s, int layer, const float *k, const float *v, const float *ki) {
    if (check_layer(s, layer))
        return 2;
    if (ki != NULL && s->DI == 0)
        return fail(s, 2, "index keys given, but the session has no index-key cache");
    const double t0 = now();
    const size_t kv = (size_t)s->B * s->n_new * s->H_kv * s->D,
                 kin = (size_t)s->B * s->n_new * s->DI;
    const size_t bytes[] = {kv * s->dsize, kv * s->dsize, ki != NULL ? kin * s->dsize : 0};
    void *at[3];
    dec_args a = args_of(s, layer);
    if (buffers(s, 3, bytes, at) || put(s, at[0], k, kv, s->dtype) ||
        put(s, at[1], v, kv, s->dtype) || (ki != NULL && put(s, at[2], ki, kin, s->dtype)))
        return 1;
    a.k_new = at[0], a.v_new = at[1], a.ki_new = at[2];
    if (s->k8 != NULL)
        dec_launch_append_fp8(&a, NULL); /* version 11: quantised into the FP8 pools */
    else
        dec_launch_append(&a, NULL);
    const int rc = sync(s);
    s->seconds += now() - t0;
    return rc;
}

/* A caller's selection: per new token, ascending positions it sees, then -1. */
static int check_selection(dec_session *s, const int32_t *sel, int k) {
    for (int b = 0; b < s->B; ++b)
        for (int i = 0; i < s->n_new; ++i) {
            const int seen = s->lens[b] - s->n_new + i + 1;
            const int32_t *row = sel + ((size_t)b * s->n_new + i) * k;
            char bad[160];
            if (ds_check_selection_row(row, k, seen, bad, sizeof bad))
                return fail(s, 2, "selection of (b=%d, i=%d): %s", b, i, bad);
        }
    return 0;
}

int dec_session_attend(dec_session *s, int layer, int mode, int topk, const float *q,
                       const float *q_index, const float *w, const int32_t *sel, float *out,
                       float *lse) {
    if (check_layer(s, layer))
        return 2;
    if (s->n_new > DEC_MAX_QUERIES)
        return fail(s, 2, "attention takes at most %d new tokens per step (this step has %d)",
                    DEC_MAX_QUERIES, s->n_new);
    if (mode == DEC_MODE_DSA && (s->DI == 0 || q_index == NULL || w == NULL))
        return fail(s, 2, "DSA needs an index-key cache and the index queries and weights");
    if (mode != DEC_MODE_DENSE && mode != DEC_MODE_DSA && mode != DEC_MODE_SELECTION)
        return fail(s, 2, "mode %d is not dense (0), DSA (1) or a selection (2)", mode);
    if (mode != DEC_MODE_DENSE && s->k8 != NULL)
        return fail(s, 2, "the FP8 cache serves dense attention only (version 12)");
    if (mode != DEC_MODE_DENSE && topk < 1)
        return fail(s, 2, "topk must be at least 1 (got %d)", topk);
    if (mode == DEC_MODE_SELECTION && (sel == NULL || check_selection(s, sel, topk)))
        return sel == NULL ? fail(s, 2, "a selection is needed") : 2;
    const double t0 = now();
    const size_t tokens = (size_t)s->B * s->n_new, rows = tokens * s->H;
    const size_t qi = tokens * s->HI * s->DI, dsa = mode == DEC_MODE_DSA; /* 0: no DSA buffers */
    dec_args a = args_of(s, layer);
    const int g = s->H / s->H_kv;
    int keys = a.L_cap, blocks = dec_blocks_per_split(s->B, s->H, s->H_kv, s->n_new);
    if (mode != DEC_MODE_DENSE) { /* the selection: k tokens per new token, g heads per block */
        a.topk = dsa && topk > a.L_cap ? a.L_cap : topk;
        keys = a.topk;
        blocks = (int)tokens * s->H_kv * ((g + DEC_ROWS - 1) / DEC_ROWS);
    }
    a.splits = dec_splits_ours(s->sm_count, blocks, keys);
    /* q, o, lse, the partials, the selection; DSA: q_index, w, the index scores */
    const size_t bytes[] = {rows * s->D * s->dsize,   rows * s->D * s->dsize,
                            rows * sizeof(float),     dec_workspace_bytes(&a, a.splits) + 16,
                            tokens * a.topk * 4,      dsa * qi * s->dsize,
                            dsa * tokens * s->HI * 4, dsa * tokens * a.L_cap * 4};
    void *at[8];
    if (buffers(s, 8, bytes, at) || put(s, at[0], q, rows * s->D, s->dtype) ||
        (dsa &&
         (put(s, at[5], q_index, qi, s->dtype) || put(s, at[6], w, tokens * s->HI, ATTN_F32))))
        return 1;
    a.q = at[0], a.o = at[1], a.lse = at[2], a.part = at[3], a.sel = at[4];
    a.q_index = at[5], a.w = at[6], a.logits = at[7];
    if (mode == DEC_MODE_DSA) {
        dec_launch_indexer(&a, NULL);
        dec_launch_topk(&a, false, NULL);
    } else if (mode == DEC_MODE_SELECTION &&
               attn_to_device(a.sel, sel, tokens * topk * sizeof(int32_t))) {
        return fail(s, 1, "cannot copy the selection to the device");
    }
    if (mode == DEC_MODE_DENSE && s->k8 != NULL)
        dec_launch_paged_fp8(&a, NULL);
    else if (mode == DEC_MODE_DENSE)
        dec_launch_paged(&a, NULL);
    else
        dec_launch_sparse(&a, NULL);
    if (sync(s))
        return 1;
    if (attn_device_get(out, a.o, rows * s->D, s->dtype, &s->staging, &s->cap_staging) ||
        (lse != NULL && attn_to_host(lse, a.lse, rows * sizeof(float))))
        return fail(s, 1, "cannot copy the output back");
    if (mode == DEC_MODE_DSA) { /* kept for dec_session_selection */
        s->last_sel_bytes = tokens * a.topk * sizeof(int32_t);
        if (attn_host_grow(&s->last_sel, &s->cap_last_sel, s->last_sel_bytes) ||
            attn_to_host(s->last_sel, a.sel, s->last_sel_bytes))
            return fail(s, 1, "cannot copy the selection back");
    }
    s->seconds += now() - t0;
    return 0;
}

int dec_session_selection(const dec_session *s, int32_t *out) {
    if (s->last_sel == NULL)
        return 2;
    memcpy(out, s->last_sel, s->last_sel_bytes);
    return 0;
}
