/* deepseek_sparse.h — Example 05's interface between the kernels (deepseek_sparse.cu), the CPU
 * references (deepseek_reference.c) and the program (main.c).
 *
 * Layouts (packed rows: a dense batch's sequence b owns rows b*L .. b*L+L-1, a varlen batch's
 * rows cu[b] .. cu[b+1]-1, as in common/README.md, "Conventions"; row of position i of sequence
 * b: attn_problem_token_index, attn/problem.h):
 *   q_I     [rows_q, H_I, D_I]  indexer queries, H_I heads per token (fp16/bf16)
 *   k_I     [rows_k, D_I]       ONE indexer key per token, shared by the indexer heads
 *   w       [rows_q, H_I]       per-token head weights (fp32)
 *   logits  [B, chunk, Lk]      index scores of the query positions [i0, i0 + chunk) of every
 *                               sequence (one chunk at a time: O(B * chunk * Lk) floats)
 *   sel     [rows_q, topk]      selected key positions of each query, ascending, then -1
 *   q, o    the attention problem's layout: [B,H,Lq,D] or varlen [total_q,H,D]
 *   k, v    ONE key/value head shared by the H query heads (MQA, as DeepSeek's MLA in its
 *           absorbed form): [rows_k, D]
 * The stages on the one driver (what each is checked against): deepseek_stages.c; the flags and
 * the inputs: deepseek_run.c.
 */
#ifndef DEEPSEEK_SPARSE_H
#define DEEPSEEK_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/example.h"
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
    /* The dense baseline's buffers: MHA, K and V copied into every head (example 03's fa2_mma
     * runs on them). */
    const attn_buffers *dense;
    /* sparse_gather only: k and v are MHA tensors in q's layout, each head its own (the
     * benchmark's adapter, benchmarks/deepseek_k512.cu, runs DSA on the harness's Q, K, V). */
    bool mha;
    /* indexer_fp8 (version 8): q_I and k_I as e4m3 codes, one fp32 scale per row of D_I */
    uint8_t *q_index8, *k_index8; /* [rows_q, H_I, D_I], [rows_k, D_I] */
    float *q_scale, *k_scale;     /* [rows_q, H_I], [rows_k] */
    float corrupt_scale;          /* --corrupt-scale (0: none) */
} ds_args;

#define DS_KERNEL_INDEXER_FP8 8 /* its --kernel number */

/* Stage launchers (asynchronous on stream). The first two work on the query positions
 * [i0, i0 + chunk) of every sequence. */
void ds_launch_indexer(const ds_args *a, int i0, cudaStream_t stream);
void ds_launch_indexer_fp8(const ds_args *a, int i0, cudaStream_t stream);
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

/* The indexer's scores of query i of sequence b, got[0 .. n), against ds_index_scores_ref's want
 * and bound: fp32 sums of D_I products per head are within a few ulps of their magnitudes,
 * |got - want| <= 1e-5 * bound + 1e-30. Counts the query in out->rows, raises out->max_err to the
 * largest error; the first key out of tolerance fails out (its detail), unless it failed before.
 * (Examples 05's and 09's indexer checks.) */
void ds_check_index_scores(const float *got, const double *want, const double *bound, int n, int b,
                           int i, attn_stage_check *out);

/* The top-k tie rule: sel[0 .. topk) is a right selection from scores[0 .. n) iff it holds
 * min(topk, n) distinct indices in [0, n), ascending, every chosen score >= the true topk-th
 * largest score, and -1 in the remaining slots. 0 if right, else 1 with a reason in why. */
int ds_check_selection(const float *scores, int n, int topk, const int32_t *sel, char *why,
                       size_t why_len);
/* A selection row as the attention kernels take it (deepseek_stages.c; examples 05 and 09 validate
 * a selection before their sparse attention reads it): 0 when each of its k slots holds -1 or a
 * key in [0, n) above the previous slot's, else 1 with "slot X holds V, not -1 nor an ascending
 * position in [0, n)" in why. */
int ds_check_selection_row(const int32_t *row, int k, int n, char *why, size_t why_len);

/* ---- the FP8 indexer's oracles (deepseek_fp8.c) -------------------------------------------- */

/* The value of an e4m3 code (NaN for 0x7f, 0xff). */
double ds_fp8_value(uint8_t code);
/* The scale of a row whose largest |x| is amax: 2^ceil(log2(fl32(max(amax, 1e-4) / 448))). */
float ds_fp8_row_scale(float amax);
/* rows x d values x quantized by the kernel into codes and one scale per row: 0 when every scale
 * is ds_fp8_row_scale's and every code a nearest e4m3 value of x / scale, else 1 with why. */
int ds_fp8_check_rows(const float *x, const uint8_t *codes, const float *scales, int64_t rows,
                      int d, const char *what, char *why, size_t len);
/* Codes to their values (exact in fp32). */
void ds_fp8_decode(const uint8_t *codes, int64_t n, float *values);
/* What version 8 computes, exactly: ds_index_scores_ref on the decoded codes with the head
 * weights w_scaled = fl32(w * q_scale), each key's score (and bound) times its k_scale. */
int ds_fp8_scores_ref(const attn_problem *p, int index_heads, int index_dim, const float *q_values,
                      const float *w_scaled, const float *k_values, const float *k_scale, int b,
                      int i, double *scores, double *bound);
/* Per visible key of query i of sequence b: the largest |FP8 score - exact score| that e4m3
 * quantization with amax/448 row scales and an fp32 evaluation allow (derivation: deepseek_fp8.c),
 * from the unquantized q, k, w and mag = ds_index_scores_ref's bound for that query. */
void ds_fp8_error_bound(const attn_problem *p, int index_heads, int index_dim, const float *q,
                        const float *k, const float *w, int b, int i, const double *mag,
                        double *bound);
/* |top-k of exact[0..n) and of fp8[0..n)| / k (1 when n <= k). */
double ds_fp8_set_recall(const double *exact, const float *fp8, int n, int k);

/* indexer_fp8's extra data for its check: its codes and scales read back, decoded. */
typedef struct ds_fp8_view {
    uint8_t *q8, *k8;
    float *qs, *ks, *qv, *kv, *ws; /* scales; decoded values; w * q_scale in fp32 */
    double *exact, *mag, *bound;   /* per key: the unquantized inputs' score, its magnitudes,
                                    * ds_fp8_error_bound */
} ds_fp8_view;

/* The attention reference's mask: per (b, i) row (row r = b*Lq + i, Lq the longest sequence), the
 * selected keys of that query (sel's non-negative entries). row_ptr [B*Lq + 1], col_idx
 * [B*Lq*topk]. */
void ds_selection_csr(const attn_problem *p, int topk, const int32_t *sel, int64_t *row_ptr,
                      int32_t *col_idx);

/* ---- the run and the stages on the one driver (deepseek_run.c, deepseek_stages.c) ---------- */

/* The stages, in order (attn_kernel.stage). */
enum { DS_STAGE_INDEXER, DS_STAGE_TOPK, DS_STAGE_ATTENTION };

/* --scores: the top-k stage's input: the indexer's scores, or a synthetic row kind */
enum { DS_SCORES_INDEXER, DS_SCORES_EQUAL, DS_SCORES_NEGINF, DS_SCORES_LARGE, DS_SCORES_TIES };
extern const char *const ds_score_kinds[]; /* their names, in that order */

/* The example's flags (the option table: deepseek_run.c). */
typedef struct ds_options {
    int topk, index_heads, index_dim, chunk; /* chunk 0: as many rows as fit 1 GiB of logits */
    int scores;                              /* DS_SCORES_* */
    const char *corrupt_text;                /* --corrupt-index V, or NULL */
    const char *corrupt_scale_text;          /* --corrupt-scale F, or NULL */
} ds_options;

/* One run's data. Host arrays hold fp32 values already rounded to the dtype. */
typedef struct ds_state {
    ds_options opt;
    attn_problem p;            /* H query heads; K and V: one shared head */
    int k_eff;                 /* min(topk, Lk): the selection's width (no query sees more keys) */
    int corrupt_value, stride; /* checked positions: i % stride == 0 and each sequence's last */
    float amplitude, corrupt_scale; /* corrupt_scale: --corrupt-scale, 0 when not given */
    double fp8_worst, fp8_recall;   /* indexer_fp8 against the unquantized scores (measured) */
    bool fp8_checked;               /* indexer_fp8 ran and was checked (what --dump writes) */
    attn_inputs inputs;             /* --inputs: the attention inputs' signs (attn/tensor.h) */
    uint64_t seed;
    int64_t rows_q, rows_k;
    float *q, *k1, *v1, *kx, *vx, *qi, *ki, *w; /* kx, vx: K, V copied into every head */
    float *logits;                              /* [B, chunk, Lk] host copy of one chunk */
    float *fp8_scores; /* --dump only: indexer_fp8's scores of every row [rows_q, Lk] (NaN
                        * where not written; ds_dump writes them with its codes and scales) */
    int32_t *sel;      /* [rows_q, k_eff] the selection the top-k checks accepted */
    int32_t *seen;     /* [rows_q, k_eff] the device's selection as read back */
    int64_t *row_ptr;  /* sel as the attention reference's CSR mask */
    int32_t *col_idx;
    float *out, *lse;
    attn_stage_reference ref, dense_ref; /* attention's (made by its prepare), the baseline's */
    void *staging;
    void *d_q, *d_k1, *d_v1, *d_kx, *d_vx, *d_qi, *d_ki, *d_o;
    float *d_w, *d_logits, *d_lse;
    int32_t *d_sel;
    int *d_cu_q, *d_cu_k;
    uint8_t *d_qi8, *d_ki8; /* indexer_fp8's codes and scales */
    float *d_qscale, *d_kscale;
    ds_args args;       /* what the kernels read (attn_buffers.args) */
    attn_buffers dense; /* the dense baseline's buffers (K, V in every head) */
} ds_state;

/* Version 8's check (deepseek_fp8.c): its codes and scales read back into v (and on chunk 0,
 * (1) the quantization of every row checked into out); 0, or 1 (out of host memory, a failed
 * copy). Then per checked query, (3) its scores got against the unquantized inputs' exact ones
 * within ds_fp8_error_bound, the worst ratio and the recall kept in s. */
int ds_fp8_read_back(ds_state *s, ds_fp8_view *v, int chunk, attn_stage_check *out);
void ds_fp8_check_exact(ds_state *s, ds_fp8_view *v, int b, int i, const float *got,
                        attn_stage_check *out);
void ds_fp8_release(ds_fp8_view *v);

/* The module's and the stages' hooks (their types: attn/example.h). */
attn_module_prepare_fn ds_prepare;
attn_module_verdict_fn ds_verdict;
attn_module_banner_fn ds_banner;
attn_module_setup_fn ds_setup;
attn_stage_prepare_fn ds_prepare_attention;
attn_stage_clear_fn ds_clear_logits, ds_clear_selection, ds_clear_output;
attn_stage_check_fn ds_check_indexer, ds_check_topk, ds_check_attention;
attn_module_flops_fn ds_flops;
attn_module_record_json_fn ds_record_json;
attn_module_dump_fn ds_dump;
attn_module_after_table_fn ds_after_table;
attn_module_release_fn ds_release;

#ifdef __cplusplus
}
#endif
#endif /* DEEPSEEK_SPARSE_H */
