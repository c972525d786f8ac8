/* decode.h — Example 09's interface between the kernels (decode.cu), the host side shared by the
 * program and the model's library (decode_host.c: the page pool, the block table, the split
 * rules), the CPU reference (decode_reference.c), the program's stages (decode_stages.c) and the
 * library the model calls (decode_api.c).
 *
 * One decoding step: every sequence b of the batch has cache_seqlens[b] tokens of keys/values
 * (its new tokens included: they are appended before attention), and Lq new query tokens (1 when
 * decoding; 2 to 8 when a speculative step verifies several drafted tokens at once). H query heads
 * share H_kv key/value heads (grouped-query attention, g = H / H_kv query heads per KV head: query
 * head h reads KV head h / g, PyTorch's enable_gqa convention; H_kv = 1 is multi-query attention).
 *
 * Layouts (row-major; T = the dtype: fp32, fp16 or bf16):
 *   q, o         [B, Lq, H, D]          = the chapter's packed varlen layout [total_q, H, D] with
 *                                         cu_seqlens_q[b] = b * Lq (common/README.md)
 *   lse          [H, B * Lq]            natural-log LSE, the chapter's varlen LSE layout (fp32)
 *   contiguous   k_cache, v_cache [B, H_kv, L_cap, D]: the chapter's dense layout with L_cap the
 *   cache                               longest cache; token t of sequence b valid iff
 *                                       t < cache_seqlens[b]
 *   paged cache  k_pages, v_pages [num_pages, P, H_kv, D]   (FlashAttention's and FlashMLA's
 *                block_table [B, W] int32                    kvcache layout; P tokens per page)
 *                cache_seqlens [B] int32
 *                token t of sequence b lives in page block_table[b][t / P], slot t % P; the
 *                pages of a sequence may lie anywhere in the pool, in any order
 *   new tokens   k_new, v_new [B, Lq, H_kv, D]; ki_new [B, Lq, D_I]: what the append kernel writes
 *                at positions cache_seqlens[b] - Lq .. cache_seqlens[b] - 1
 *   DSA          ki_pages [num_pages, P, D_I]   one index key per token (the lightning indexer's,
 *                                               example 05), paged like K and V
 *                q_index [B, Lq, H_I, D_I] (T), w [B, Lq, H_I] (fp32)
 *                logits [B, Lq, L_cap] fp32: index scores (example 05's [B, chunk, Lk], chunk = Lq)
 *                sel [B * Lq, k] int32: selected token positions, ascending, then -1 (example 05's)
 *   latent       (version 10, --latent: DeepSeek's MLA decode in FlashMLA's layout) H_kv = 1,
 *                D = D_K = 576 (512 latent + 64 RoPE): q [B, Lq, H, 576], k_pages
 *                [num_pages, P, 1, 576] (one latent row per token; V is its first D_V = 512
 *                columns, there is no v_pages), o [B, Lq, H, 512]; lse and the table as above
 *   FP8 cache    (versions 11-13: --fp8, decode_fp8.c) values in e4m3 with power-of-two scales
 *                s = 2^ceil(log2(max(amax / 448, 1e-4))) over a group, value = code * s:
 *                K/V   k8_pages, v8_pages [num_pages, P, H_kv, D] uint8 e4m3 codes,
 *                      k8_scales, v8_scales [num_pages, P, H_kv] fp32: one scale per token and
 *                      K/V head (its D values)
 *                latent k8_pages [num_pages, P, 656] bytes per token, FlashMLA's "FP8 with scale"
 *                      layout (deepseek-ai/FlashMLA, README "FP8 KV Cache", tests/quant.py):
 *                      bytes 0..511 e4m3 codes of c_t, 512..527 four fp32 scales (one per 128
 *                      codes), 528..655 the 64 RoPE values in the dtype (bf16 there), unquantised
 * Causal alignment among the Lq new tokens is the chapter's bottom-right rule: new token i of
 * sequence b sees the tokens t < cache_seqlens[b] - Lq + i + 1. An empty sequence
 * (cache_seqlens[b] = 0: an unused batch slot) has no new token; its rows output 0, LSE -inf.
 */
#ifndef DECODE_H
#define DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/device.h"
#include "attn/example.h"
#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEC_MAX_QUERIES 8      /* new query tokens per sequence (speculative steps: 2-8) */
#define DEC_MAX_SPLITS 256     /* split-KV: splits per sequence */
#define DEC_ROWS 16            /* query rows (new tokens x heads of a group) per tiled block */
#define DEC_MAX_INDEX_HEADS 64 /* H_I */
#define DEC_MAX_INDEX_DIM 128  /* D_I, a multiple of 8 */
#define DEC_MAX_PAGE_SIZE 4096
#define DEC_MIN_KEYS_PER_SPLIT 256 /* our split rule never makes splits shorter than this */
#define DEC_LATENT_DK 576          /* version 10: the latent row, 512 + 64 of RoPE (q and K) */
#define DEC_LATENT_DV 512          /* version 10: V and O, the row's first 512 columns */
#define DEC_FP8_LATENT_BYTES 656   /* FlashMLA's FP8 latent row: 512 e4m3, 4 fp32, 64 x 16 bits */
#define DEC_FP8_MAX 448.0          /* e4m3's largest finite value */

/* What one decoding step's kernels read and write (device pointers; see the layouts above). */
typedef struct dec_args {
    int B, H, H_kv, Lq, D, L_cap;
    bool latent; /* version 10's layout (above): D = D_K = 576, V the first D_V = 512 of K */
    attn_dtype dtype;
    float scale;
    const int *seqlens; /* [B] cache_seqlens (after this step's append) */
    const void *q;
    void *o;
    float *lse;
    /* contiguous cache */
    const void *k_cache, *v_cache;
    /* paged cache */
    void *k_pages, *v_pages, *ki_pages;
    const int *block_table; /* [B, table_width] */
    int table_width, page_size, num_pages;
    /* the append kernel's input */
    const void *k_new, *v_new, *ki_new;
    /* DeepSeek sparse attention */
    const void *q_index;
    const float *w;
    int index_heads, index_dim;
    float *logits;
    int32_t *sel;
    int topk;        /* the selection's width k (sel's row length) */
    const int *cu_q; /* [B+1] b * Lq (example 05's top-k reads the batch as varlen) */
    const int *cu_k; /* [B+1] prefix sums of cache_seqlens */
    /* FP8 cache (versions 11-13; "FP8 cache" above): e4m3 pools and their scales */
    uint8_t *k8_pages, *v8_pages; /* [num_pages, P, H_kv, D]; latent: k8 [num_pages, P, 656] */
    float *k8_scales, *v8_scales; /* [num_pages, P, H_kv]; latent: in the rows */
    /* split-KV */
    int splits;  /* 1: one block per row group writes O and LSE itself, no combine */
    float *part; /* the partials: dec_workspace_bytes(a, splits) bytes (unused with 1 split) */
} dec_args;

/* Launchers (asynchronous on stream). */
void dec_launch_append(const dec_args *a, cudaStream_t stream);
void dec_launch_naive(const dec_args *a, cudaStream_t stream);
void dec_launch_split_kv(const dec_args *a, cudaStream_t stream);
void dec_launch_gqa(const dec_args *a, cudaStream_t stream);
void dec_launch_paged(const dec_args *a, cudaStream_t stream);
void dec_launch_indexer(const dec_args *a, cudaStream_t stream);
void dec_launch_topk(const dec_args *a, bool bitonic, cudaStream_t stream); /* example 05's */
void dec_launch_sparse(const dec_args *a, cudaStream_t stream);
void dec_launch_latent(const dec_args *a, cudaStream_t stream); /* a->latent; bf16, fp16 */
/* The FP8 cache ("FP8 cache" above): the append quantising (K/V, or latent with v_new = NULL),
 * version 5 and version 10 reading it. */
void dec_launch_append_fp8(const dec_args *a, cudaStream_t stream);
void dec_launch_paged_fp8(const dec_args *a, cudaStream_t stream);
void dec_launch_latent_fp8(const dec_args *a, cudaStream_t stream); /* bf16, fp16 */
/* The split-KV partials: splits x (B * Lq * H) rows of D_V + 1 floats (O, then LSE). */
size_t dec_workspace_bytes(const dec_args *a, int splits);
/* One line naming what the kernels cannot do with these sizes, or NULL. */
const char *dec_unsupported(int H, int H_kv, int D, int Lq, int index_heads, int index_dim);
/* The same for version 10's layout (--latent): H_kv = 1, D = 576, bf16 or fp16. */
const char *dec_latent_unsupported(int H_kv, int D, attn_dtype dtype);

/* ---- host side (decode_host.c), shared by the program and the model's library ---------------- */

/* Pages a sequence of n tokens needs: ceil(n / P). */
int dec_pages_for(int n, int page_size);
/* The block table's consistency with the pool and the lengths: every page a sequence's tokens
 * need is listed, inside [0, num_pages), and no page belongs to two sequences (nor twice to one).
 * 0, or 1 with a one-line reason in why. */
int dec_check_block_table(const int *table, int B, int width, const int *seqlens, int page_size,
                          int num_pages, char *why, size_t len);
/* A seeded permutation of 0 .. n-1 (the pool's free list: pages handed out in this order, so that
 * a sequence's pages lie out of order in memory). */
void dec_shuffle(int *perm, int n, uint64_t seed);
/* The block table [B, width] of a pool of num_pages handed out in dec_shuffle(seed)'s order: each
 * sequence's pages in turn, -1 past the pages its tokens need. 0, or 1 when out of memory. */
int dec_fill_table(int *table, int B, int width, const int *seqlens, int page_size, int num_pages,
                   uint64_t seed);
/* Split-KV: how many splits for `blocks` blocks per split (B x H_kv x row tiles) and the longest
 * cache (or selection) of `keys` tokens on a GPU with sm_count SMs.
 *   ours: fill one wave: floor(2 * sm_count / blocks) splits (two resident blocks per SM), at
 *         least 1, at most DEC_MAX_SPLITS / 2 and never splits shorter than
 *         DEC_MIN_KEYS_PER_SPLIT keys.
 *   FlashAttention-2's (flash_api.cpp, num_splits_heuristic), as a formula: 1 split once the
 *         blocks fill 80 % of 2 * sm_count; else, among 1 .. min(128, 2 * sm_count, key blocks)
 *         splits (key blocks of 256 keys for D <= 64, 128 for D <= 128, else 64), the fewest
 *         whose wave efficiency n/ceil(n), n = blocks * splits / (2 * sm_count), is at least 85 %
 *         of the best, skipping split counts that give the same keys per split as one fewer.
 * README.md, "How many splits", compares them. */
int dec_splits_ours(int sm_count, int blocks, int keys);
int dec_splits_flash(int sm_count, int blocks, int keys, int D);
/* Blocks per split of the tiled kernels: B x H_kv x ceil(Lq x g / DEC_ROWS). */
int dec_blocks_per_split(int B, int H, int H_kv, int Lq);

/* ---- CPU reference (decode_reference.c), double precision ----------------------------------- */

/* The inputs the reference reads, as fp32 values (already rounded to the dtype): q [B, Lq, H, D],
 * k, v [total_k, H_kv, D] packed by cu_k (the sequences' tokens in order, unpaged), and per new
 * token an optional key list (sel [B * Lq, k], -1 = no key; NULL: every key the token sees).
 * Latent (v = NULL): V is the first D_v columns of each K row, and O rows are D_v wide. */
typedef struct dec_ref_inputs {
    int B, H, H_kv, Lq, D;
    float scale;
    attn_dtype dtype;
    const int *cu_k; /* [B+1] host */
    const float *q, *k, *v;
    const int32_t *sel;
    int topk;
    int D_v; /* the width of V and O: D, or with v = NULL (latent) fewer, read from K's rows */
} dec_ref_inputs;

/* Row n = (b * Lq + i) * H + h of O (the layout above): out (D_v floats), its LSE; lowp (may be
 * NULL): the same row as the straightforward implementation in the dtype's precision that
 * FlashAttention's tolerance rule compares against (common/README.md, "Tolerance rules": scores
 * and softmax in fp32, P rounded to the dtype, P V accumulated in fp32 and rounded). A row that
 * sees no key outputs 0 and LSE -inf. 0, or 1 when out of memory. */
int dec_reference_row(const dec_ref_inputs *in, int64_t n, float *out, float *lse, float *lowp);

/* ---- the FP8 cache's reference (decode_fp8_reference.c), independent of the kernels ---------- *
 * A code's value: example 05's ds_fp8_value. */

uint8_t dec_fp8_code_ref(double x);  /* nearest e4m3 code, ties to even, satfinite */
float dec_fp8_scale_ref(float amax); /* 2^ceil(log2(max(amax / 448, 1e-4))) */
/* n values into e4m3 codes with one scale (returned): codes[i] = code(x[i] / s). */
float dec_fp8_quantize_ref(const float *x, int n, uint8_t *codes);
/* FlashMLA's latent row: 576 values (already in dtype) <-> 656 bytes (layouts above); unpacked
 * values are code * scale rounded to dtype, as the kernel holds them on chip. */
void dec_fp8_pack_latent_ref(const float *row, attn_dtype dtype, uint8_t *out);
void dec_fp8_unpack_latent_ref(const uint8_t *in, attn_dtype dtype, float *row);

/* ---- the program's stages on the one driver (decode_stages.c; attn/example.h) --------------- */

/* The example's flags (the option table in decode.cu's registry). */
typedef struct dec_options {
    const char *cache_lens; /* --cache-lens L1,L2,... (NULL: B sequences of -L tokens) */
    int queries;            /* --queries: new tokens per sequence */
    int kv_heads;           /* --kv-heads (0: H, no grouping) */
    int page_size;          /* --page-size */
    const char *splits;     /* --splits auto|fa|N */
    int topk, index_heads, index_dim;
    int table_pages; /* --table-pages: the block table's width (0: what the lengths need) */
    int spare_pages; /* --spare-pages: unused pages in the pool */
    const char *corrupt_table; /* --corrupt-table V: block_table[0][0] = V (a test) */
    int latent;                /* --latent: version 10's layout (decode.h, "latent") */
    int fp8;                   /* --fp8: the step over the FP8 cache (versions 11-13) */
    double outliers;           /* --outliers F: channels 7 and 37 of every key row times F */
    double corrupt_scale;      /* --corrupt-scale F: a planted wrong FP8 scale (a test) */
} dec_options;

/* The stages (attn_kernel.stage) and what their kernels read: a dec_run in attn_buffers.args. */
enum {
    DEC_STAGE_APPEND,
    DEC_STAGE_ATTENTION,
    DEC_STAGE_INDEXER,
    DEC_STAGE_TOPK,
    DEC_STAGE_SPARSE,
    DEC_STAGE_APPEND_FP8,
    DEC_STAGE_FP8
};

typedef struct dec_run {
    dec_args args;
    int splits_split_kv, splits_tiled, splits_sparse; /* each version's split count */
} dec_run;

/* A paged pool the append stage writes (the dtype's K, V and index keys: version 1; the FP8
 * cache's codes and scales: version 11), num_pages x P slots of `row` bytes: on the host as it is
 * before the step (the new tokens' slots NaN too) and as a right append leaves it (0xFF = NaN
 * where no token is), and its device copy. */
typedef struct dec_pool {
    const char *name; /* a failure names it: "<name> pool: page x slot y" */
    unsigned char *before, *after;
    size_t row;
    void *dev;
} dec_pool;

/* One run's data. Host arrays hold fp32 values already rounded to the dtype; the pools and the
 * contiguous cache are kept as the device holds them (packed dtype bytes, 0xFF = NaN where no
 * token is), so that a kernel reading past a sequence's tokens reads NaN and fails. */
typedef struct dec_state {
    dec_options opt;
    attn_problem p; /* the check's problem: varlen, cu_q = b * Lq, cu_k = the cache lengths */
    int *lens, *cu_q, *cu_k;                                      /* [B], [B+1], [B+1] host */
    int B, H, H_kv, Lq, D, L_cap, P, W, num_pages, k_eff, tokens; /* tokens: new ones, in all */
    int Dv;      /* the width of V and O: D, or 512 with --latent (D = 576) */
    bool latent; /* --latent: one paged latent pool, no V pool, no contiguous cache */
    int splits_mode, splits_fixed; /* 0 ours, 1 FlashAttention's, 2 fixed */
    float amplitude;
    int64_t stride;                 /* checked rows: (b * Lq + i) * H + h a multiple of it */
    size_t dsize, cache_bytes;      /* latent: no contiguous cache (0) */
    float *q, *k, *v, *qi, *ki, *w; /* q [B,Lq,H,D], k, v [total_k, H_kv, D], qi, ki, w */
    int *table;                     /* [B, W] */
    dec_pool pools[4];      /* K, V, index keys (latent: the latent pool alone), then a NULL name */
    unsigned char *kc, *vc; /* contiguous cache */
    attn_stage_reference ref, sref; /* dense and sparse references (the checked rows) */
    float *out, *lse, *logits;
    int32_t *sel, *seen_sel; /* [B * Lq, k_eff]: accepted, read back */
    unsigned char *gqa_bits; /* version 4's output (packed) and LSE, for the bit-exact compare */
    float *gqa_lse;
    int paged_same; /* -1 not compared, -2 gqa's output kept for it, 0 differs, 1 bit-identical */
    unsigned char *staging; /* what goes up to the device packed, O and the pools coming back */
    dec_run run;            /* what the kernels read (attn_buffers.args) */
    /* --fp8 (decode_fp8.c): the FP8 pools (K codes, or the latent rows; V codes; their scales),
     * K and V as the kernels dequantise them, the reference over those, and what the checks
     * measured (the --json record's) */
    dec_pool pools8[5]; /* K and V codes, their scales (latent: the rows alone); a NULL name */
    float *kd, *vd;
    attn_stage_reference dref;
    double err_fp64, err_over_bound, err_dequant, err16, k_err, k_max;
    attn_allocs mem; /* every buffer, host and device (dec_release frees them) */
} dec_state;

/* The module's and the stages' hooks (their types: attn/example.h). */
attn_module_prepare_fn dec_prepare;
attn_module_verdict_fn dec_verdict;
attn_module_banner_fn dec_banner;
attn_module_setup_fn dec_setup;
/* The stages' (the FP8 cache's, --fp8: decode_fp8.c, the last of each kind) */
attn_stage_prepare_fn dec_prepare_sparse, dec_prepare_fp8;
attn_stage_clear_fn dec_clear; /* every stage's */
attn_stage_check_fn dec_check_append, dec_check_attention, dec_check_indexer, dec_check_topk,
    dec_check_sparse, dec_check_append_fp8, dec_check_fp8;
attn_module_flops_fn dec_flops;
attn_module_record_json_fn dec_record_json;
attn_module_dump_fn dec_dump;
attn_module_after_table_fn dec_after_table;
attn_module_release_fn dec_release;
/* The host memory dec_setup will allocate (the driver checks it before the run). */
double dec_host_bytes(void *state, const attn_problem *p);

#ifdef __cplusplus
}
#endif
#endif /* DECODE_H */
