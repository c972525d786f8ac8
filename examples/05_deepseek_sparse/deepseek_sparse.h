/* deepseek_sparse.h — Example 05's interface between the kernels (deepseek_sparse.cu), the CPU
 * references (deepseek_reference.c) and the program (main.c).
 *
 * Layouts (packed rows: a dense batch's sequence b owns rows b*L .. b*L+L-1, a varlen batch's
 * rows cu[b] .. cu[b+1]-1, as in common/README.md, "Conventions"):
 *   q_I     [rows_q, H_I, D_I]  indexer queries, H_I heads per token (fp16/bf16)
 *   k_I     [rows_k, D_I]       ONE indexer key per token, shared by the indexer heads
 *   w       [rows_q, H_I]       per-token head weights (fp32)
 *   logits  [B, chunk, Lk]      index scores of the query positions [i0, i0 + chunk) of every
 *                               sequence (one chunk at a time: O(B * chunk * Lk) floats)
 *   sel     [rows_q, topk]      selected key positions of each query, ascending, then -1
 *   q, o    the attention problem's layout: [B,H,Lq,D] or varlen [total_q,H,D]
 *   k, v    ONE key/value head shared by the H query heads (MQA, as DeepSeek's MLA in its
 *           absorbed form): [rows_k, D]
 */
#ifndef DEEPSEEK_SPARSE_H
#define DEEPSEEK_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DS_MAX_INDEX_HEADS 64    /* H_I: a multiple of 16 (the mma's M), at most 64 */
#define DS_BITONIC_MAX_KEYS 4096 /* the bitonic baseline sorts a whole row in shared memory */

typedef struct ds_args {
    const attn_problem *p; /* the attention problem: B, H, Lq, Lk, D, dtype, causal, varlen */
    int index_heads, index_dim, topk, chunk;
    /* device pointers */
    const void *q_index, *k_index; /* q_I, k_I (dtype of p) */
    const float *w;                /* head weights */
    float *logits;                 /* [B, chunk, Lk] */
    int32_t *sel;                  /* [rows_q, topk] */
    const void *q, *k, *v;         /* attention inputs (k, v: one shared head) */
    void *o;
    float *lse;
    const int *cu_q, *cu_k; /* device cu_seqlens, NULL when dense */
} ds_args;

/* Stage launchers (asynchronous on stream). The first two work on the query positions
 * [i0, i0 + chunk) of every sequence. */
void ds_launch_indexer(const ds_args *a, int i0, cudaStream_t stream);
void ds_launch_topk_radix(const ds_args *a, int i0, cudaStream_t stream);
void ds_launch_topk_bitonic(const ds_args *a, int i0, cudaStream_t stream);
void ds_launch_sparse_mma(const ds_args *a, cudaStream_t stream);
void ds_launch_sparse_gather(const ds_args *a, cudaStream_t stream);
/* The whole pipeline: for each chunk, indexer then radix top-k; then sparse_mma. */
void ds_launch_pipeline(const ds_args *a, cudaStream_t stream);

/* One line naming what the kernels cannot do with these sizes, or NULL when they can. */
const char *ds_unsupported(const attn_problem *p, int index_heads, int index_dim, int topk);

/* ---- CPU references (deepseek_reference.c), double accumulation ---------------------------- */

/* Index scores of query i of sequence b against its visible keys s < n (n returned):
 * I(i, s) = sum_j w(i, j) * ReLU(q_I(i, j) . k_I(s)). bound[s] (may be NULL) gets
 * sum_j |w(i,j)| * sum_d |q_I(i,j,d) k_I(s,d)|, the scale of the rounding error of an fp32
 * evaluation. Inputs as fp32 values in the layouts above. */
int ds_index_scores_ref(const attn_problem *p, int index_heads, int index_dim, const float *q_index,
                        const float *k_index, const float *w, int b, int i, double *scores,
                        double *bound);

/* The top-k tie rule: sel[0 .. topk) is a right selection from scores[0 .. n) iff it holds
 * min(topk, n) distinct indices in [0, n), ascending, every chosen score >= the true topk-th
 * largest score, and -1 in the remaining slots. 0 if right, else 1 with a reason in why. */
int ds_check_selection(const float *scores, int n, int topk, const int32_t *sel, char *why,
                       size_t why_len);

/* The attention reference's mask: per (b, i) row (row r = b*Lq + i, Lq the longest sequence), the
 * selected keys of that query (sel's non-negative entries). row_ptr [B*Lq + 1], col_idx
 * [B*Lq*topk]. */
void ds_selection_csr(const attn_problem *p, int topk, const int32_t *sel, int64_t *row_ptr,
                      int32_t *col_idx);

/* Packed row of query i of sequence b (see the layouts above). */
int64_t ds_row_q(const attn_problem *p, int b, int i);
int64_t ds_row_k(const attn_problem *p, int b, int s);

#ifdef __cplusplus
}
#endif
#endif /* DEEPSEEK_SPARSE_H */
