/* deepseek_v4.h — Example 12's kernels (deepseek_v4.cu), their C reference
 * (deepseek_v4_reference.c), their device buffers (deepseek_v4_buffers.c) and the stages on the
 * one driver (deepseek_v4_stages.c, deepseek_v4_checks.c).
 *
 * One V4 attention layer after its projections (README.md, "What is computed"). Layouts, row-major,
 * T = the problem's dtype (f16 or bf16), c = 2*D for CSA's overlapping compressor, D for HCA's:
 *   q      [B, L, H, D]  T   the queries, RMS-normed and rotated at their positions
 *   kv     [B, L, D]     T   one key = value vector per token (shared-KV MQA), rotated
 *   ckv    [B, L, c]     T   the compressor's value projection of every token
 *   cgate  [B, L, c]     T   its gate projection
 *   cbias  [m, c]        f32 the gate's position bias (slot j of a window)
 *   cnorm  [D]           f32 the RMSNorm weight of a compressed entry
 *   sinks  [H]           f32 each head's attention sink logit
 * CSA only, the indexer (DI = index head dim, HI = index heads):
 *   ikv, igate [B, L, 2*DI] T, ibias [m, 2*DI] f32, inorm [DI] f32: its own compressor;
 *   qI [B, L, HI, DI] T rotated; wI [B, L, HI] f32 head weights (times HI^-1/2 * DI^-1/2).
 * Outputs:
 *   comp   [B, n, D] T   compressed entries, n = L / m (prefill; decode: pages of a pool)
 *   icomp  [B, n, DI] T  the indexer's compressed keys
 *   logits [B, L, n] f32 index scores (-inf where the entry is not visible yet)
 *   sel    [B*L, k] i32  selected entries, ascending, -1 in unused slots
 *   o      [B, L, H, D] T the attention output, its rotary part rotated back by -position.
 * Entry w covers tokens w*m .. w*m+m-1 and is visible to the query at t iff (w+1)*m <= t+1.
 */
#ifndef DEEPSEEK_V4_H
#define DEEPSEEK_V4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/example.h"
#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define V4_MAX_D 512     /* head dimension (V4: 512) */
#define V4_MAX_SLOTS 512 /* 2m for CSA, m for HCA */

typedef enum { V4_CSA = 0, V4_HCA = 1 } v4_kind;

/* The layer's sizes and rotary settings. */
typedef struct v4_config {
    v4_kind kind;
    int B, L, H, D;    /* batch, tokens, heads, head dim */
    int m;             /* compression rate: tokens per entry */
    int window;        /* sliding window n_win (the query itself included) */
    int topk;          /* CSA: entries selected per query */
    int HI, DI;        /* CSA: index heads and index head dim */
    int rope_dim;      /* rotated channels: the last rope_dim of every vector */
    double rope_theta; /* base of the compressed layers' RoPE */
    double eps;        /* RMSNorm epsilon */
    int page;          /* decode: entries per page of the compressed cache */
} v4_config;

/* Device pointers (decode's cache and scratch included). */
typedef struct v4_args {
    v4_config c;
    const attn_problem *p;
    const void *q, *kv, *ckv, *cgate, *ikv, *igate, *qI;
    const float *cbias, *cnorm, *ibias, *inorm, *wI, *sinks;
    void *comp, *icomp, *o;
    float *logits;
    int32_t *sel;
    /* decode: the paged pool of compressed entries (page_table [B, pages_per_seq] -> page of
     * `page` entries of D), the ring buffers of the last 2m tokens' projections (the streaming
     * compressor's state) and one query row's scores and selection */
    void *pool;
    const int32_t *page_table;
    int pages_per_seq;
    void *ring_kv, *ring_gate, *ring_ikv, *ring_igate;
    void *o_decode;
    /* example 05's arguments for its indexer and top-k (deepseek_sparse.h), set up by the stages */
    void *ds;
} v4_args;

/* ---- launchers (deepseek_v4.cu), asynchronous on stream ------------------------------------ */
/* Every complete window -> one entry (the main compressor, and for CSA the indexer's). */
void v4_launch_compress(const v4_args *a, cudaStream_t stream);
/* Index scores (example 05's indexer kernel), the entries not yet visible set to -inf, and the
 * top-k (example 05's radix select). */
void v4_launch_index_topk(const v4_args *a, cudaStream_t stream);
/* Attention over the window and the compressed set (CSA: sel, HCA: every visible entry), one
 * softmax with the sink. */
void v4_launch_attention(const v4_args *a, cudaStream_t stream);
/* Decode token by token: the streaming compressor (ring buffer of 2m tokens, one entry into the
 * paged pool every m tokens), the indexer and top-k of the one new query (CSA), attention of
 * that query reading entries through the page table. Writes o_decode [B, L, H, D]. */
void v4_launch_decode(const v4_args *a, cudaStream_t stream);
/* The same for the rows [t0, t1) only: a session's decoding steps (v4_api.h), continuing from the
 * ring and the pool that earlier rows left. */
void v4_launch_decode_rows(const v4_args *a, int t0, int t1, cudaStream_t stream);
/* Rows [t0, t1) at once (a session's prefill chunk): the entries whose window closes in the chunk
 * (kernel 1, from the token buffers into the pool), the rows' index scores and top-k (kernel 2,
 * ds[0] with chunk t1 - t0), their attention (kernel 3 or 4, entries through the page table);
 * then the chunk's last 2m (HCA: m) tokens into the ring for the decode that follows. */
void v4_launch_prefill_rows(const v4_args *a, int t0, int t1, cudaStream_t stream);

/* ---- C reference (deepseek_v4_reference.c), double precision ------------------------------ */
/* Entries of one sequence b: x [L, c] values, g [L, c] gates (floats as the device reads them),
 * out [n, d]. overlap: CSA's two halves. */
void v4_ref_compress(const v4_config *c, bool overlap, int d, const float *x, const float *g,
                     const float *bias, const float *norm, int L, double *out);
/* The index scores of query t (sequence b) against the n entries: out[0 .. n). */
void v4_ref_index_scores(const v4_config *c, const float *qI_t, const float *wI_t,
                         const double *icomp, int n, double *out);
/* Visible entries for the query at t. */
int v4_ref_visible(const v4_config *c, int t, int n);
/* Attention output of query t of sequence b, every head: out [H, D]. comp: the entries (values
 * as the device stored them), chosen[0 .. n_chosen) the entries it attends to. */
void v4_ref_attention_row(const v4_config *c, const float *q_t, const float *kv_b,
                          const float *comp_b, const int32_t *chosen, int n_chosen,
                          const float *sinks, int t, double *out);

/* One line naming what is wrong with the configuration, or NULL. */
const char *v4_config_problem(const v4_config *c);

/* ---- the device buffers (deepseek_v4_buffers.c), for the stages and the library (v4_api.c) -- */
#define V4_MAX_BUFFERS 32
/* Every device buffer of g for g->c (the layouts above: inputs, outputs, decode's pool, rings and
 * page table, CSA's indexer's), the 16-bit ones in dtype t, K selections per row; zeroed, each of
 * at least 16 bytes, each also appended to owned[*n_owned] for the caller to free
 * (V4_MAX_BUFFERS at most). The page table hands the pages out in reverse (not the identity), a
 * copy of it into *host_table (malloc'd, B * pages_per_seq entries) when host_table is not NULL.
 * 0, or 1 when a buffer could not be had (attn_device_alloc reported it). */
int v4_args_alloc(v4_args *g, attn_dtype t, int K, void **owned, int *n_owned,
                  int32_t **host_table);
/* Example 05's arguments (ds_args ds_pair[2], deepseek_sparse.h) for g's indexer and top-k: [0] a
 * prefill over every row, [1] one decoding query; K selections per row; sets g->ds. */
void v4_index_args(void *ds_pair, const attn_problem *dsp, v4_args *g, int K);

/* ---- the stages (deepseek_v4_stages.c, their checks deepseek_v4_checks.c) ------------------ */
typedef struct v4_options {
    int kind; /* --kind csa|hca */
    int m, window, topk, index_heads, index_dim, rope_dim, page;
} v4_options;

/* What the module keeps for one run (attn/example.h's state): its flags, its seeded inputs, the
 * references and what the checks accepted, the device buffers (deepseek_v4_stages.c sets it up,
 * deepseek_v4_checks.c reads it). */
#define V4_MAX_HOST 40

typedef struct v4_state {
    v4_options opt;
    v4_config c;
    attn_problem p, dsp;
    int n, K;   /* entries per sequence, the selection's width min(topk, n) */
    int stride; /* query rows checked: every stride-th position and the last */
    uint64_t rng;
    float amplitude;
    bool ties;
    /* host inputs (values the device reads) */
    float *q, *kv, *ckv, *cgate, *cbias, *cnorm, *ikv, *igate, *ibias, *inorm, *qI, *wI, *sinks;
    int32_t *page_table;
    /* references and what the checks accepted */
    double *ref_comp, *ref_icomp;
    float *comp, *icomp, *logits, *out, *pool;
    int32_t *sel, *seen;
    /* device */
    v4_args args;
    ds_args ds[2];
    /* what release frees: the device buffers and the host ones */
    void *d[V4_MAX_BUFFERS], *h[V4_MAX_HOST];
    int nd, nh;
    void *staging;      /* the 16-bit inputs on their way to the device */
    bool out_of_memory; /* a host buffer could not be had */
    bool failed;        /* an input could not be written to the device (reported) */
} v4_state;

attn_module_prepare_fn v4_prepare;
attn_module_verdict_fn v4_verdict;
attn_module_banner_fn v4_banner;
attn_module_setup_fn v4_setup;
attn_module_flops_fn v4_flops;
attn_module_release_fn v4_release;
attn_stage_clear_fn v4_clear_compress, v4_clear_index, v4_clear_attention;
attn_stage_check_fn v4_check_compress, v4_check_index, v4_check_attention;

enum { V4_STAGE_COMPRESS, V4_STAGE_INDEX, V4_STAGE_ATTENTION };
enum { V4_K_COMPRESS = 1, V4_K_INDEX = 2, V4_K_CSA = 3, V4_K_HCA = 4, V4_K_DECODE = 5 };

#ifdef __cplusplus
}
#endif
#endif /* DEEPSEEK_V4_H */
