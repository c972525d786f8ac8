/* flash_bwd.h — Example 07's interface between the kernels (flash_bwd.cu), the CPU references
 * (the harness's attn_reference_backward; bwd_selection.c) and the stages on the one driver
 * (bwd_run.c: flags, inputs; bwd_stages.c: the two stages; bwd_files.c: --tensors, --dump).
 *
 * Tensors (the chapter's layouts, README.md "Conventions" at the top of the repository):
 *   q, o, dO, dQ   [B,H,Lq,D] row-major, or varlen [total_q,H,D]      (dtype of the problem)
 *   k, v, dK, dV   [B,H,Lk,D] row-major, or varlen [total_k,H,D]
 *   lse            [B,H,Lq] (varlen [H,total_q]), natural log, fp32: the forward's statistics
 *   D              [B,H,Lq] like lse, fp32: D_i = rowsum(dO_i * O_i) (the backward's own)
 *   sel            [rows_q, K] per query (packed row, as example 05), shared by the heads: the
 *                  selected key positions in ascending order, then -1 (example 05's format)
 * Three kinds of problem (bwd_mode): dense (causal with --causal), a block-sparse --pattern
 * (example 04's block mask of 64 x 64 tiles, and its transposed view), or a --topk selection.
 */
#ifndef FLASH_BWD_H
#define FLASH_BWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/example.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/sparse/block_mask.h"
#include "attn/sparse/sparse_run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bwd_mode { BWD_DENSE = 0, BWD_PATTERN = 1, BWD_TOPK = 2 } bwd_mode;

/* What the kernels read (attn_buffers.args): the launchers' arguments. Device pointers. */
typedef struct bwd_args {
    const attn_problem *p;
    bwd_mode mode;
    const void *q, *k, *v, *o, *dout; /* the forward's inputs and output, the loss gradient */
    const float *lse;                 /* the forward's log-sum-exp */
    void *dq, *dk, *dv;               /* the gradients (dtype of the problem) */
    const int *cu_q, *cu_k;           /* [B+1] or NULL (dense layout) */
    /* BWD_PATTERN: the block mask (rows: query blocks) and its transposed view (rows: key
     * blocks; attn_block_mask_transpose), arrays in device memory, 64 x 64 tiles, and the
     * pattern whose predicate the partial tiles apply. */
    attn_block_mask rows, cols;
    const struct attn_pattern *pattern; /* host copy; passed to kernels by value */
    /* BWD_TOPK: the selection and its width K (min(--topk, Lk)). */
    const int32_t *sel;
    int topk;
    /* The forward stage's kernels (examples 03, 04, 05) read and write these: q, k, v, o, lse,
     * cu_seqlens and, for a pattern, the sparse inputs (example 04's block_sparse). */
    attn_buffers fwd;
} bwd_args;

/* Workspace of the backward versions (attn_kernel.workspace_bytes): D, then what each needs
 * beyond it (the naive version's P and dS, an fp32 dQ accumulator, top-k's dK/dV
 * accumulators). The layout: bwd_workspace_at. */
typedef struct bwd_workspace {
    float *D;               /* [lse_elems] */
    float *dq_acc;          /* [q_elems] or NULL */
    float *dk_acc, *dv_acc; /* [k_elems] or NULL */
    float *P, *dS;          /* [B*H, Lq, Lk] or NULL (version 1) */
} bwd_workspace;

/* ---- the selection (bwd_selection.c); the gradients' reference is the harness's
 * attn_reference_backward (attn/reference.h) ------------------------------------------------ */

/* A seeded selection in example 05's format: for each query (packed row r of sequence b,
 * position i), min(K, n) distinct keys drawn uniformly from the n keys it sees (causality),
 * ascending, then -1. sel: [rows_q, K], rows as attn_problem_token_index. */
void bwd_random_selection(const attn_problem *p, int K, uint64_t seed, int32_t *sel);

/* ---- the run on the one driver (bwd_run.c, bwd_stages.c, bwd_files.c; attn/example.h) ------- */

typedef struct bwd_options {
    int topk;           /* 0: no selection */
    const char *inputs; /* --tensors DIR, or NULL */
} bwd_options;

/* The stages, in order (attn_kernel.stage). */
enum { BWD_STAGE_FORWARD, BWD_STAGE_BACKWARD };

/* One run's data. Host arrays are fp32 values already rounded to the dtype. */
typedef struct bwd_state {
    bwd_options opt;
    attn_problem p;
    bwd_mode mode;
    bool quiet, from_files;
    const char *dump_dir;
    float amplitude;
    attn_inputs inputs; /* --inputs: the signs of Q, K, V */
    uint64_t seed;
    uint8_t *slices;      /* [B*H] the (sequence, head) slices checked */
    uint8_t *rows;        /* [row count] their query rows (the forward's reference) */
    int64_t checked_rows; /* query rows in the checked slices */
    /* the reference's mask: a pattern's predicate, or the selection as CSR */
    const attn_mask *mask;
    attn_mask sel_mask;
    attn_sparse_run sparse; /* --pattern: the pattern, its block mask on host and device */
    bool sparse_on;
    attn_block_mask cols, cols_dev; /* the transposed view of the block mask */
    int k_eff;                      /* --topk: min(topk, Lk) */
    int32_t *sel;
    int64_t *row_ptr;
    int32_t *col_idx;
    float *q, *k, *v, *dout, *o, *lse; /* inputs; o, lse: the forward's, read back */
    attn_stage_reference fwd_ref;      /* the forward's reference (checked rows) */
    attn_grads ref, tol, lowp, got;    /* the gradients' references and a kernel's */
    bool ref_done;
    void *staging;
    void *d_q, *d_k, *d_v, *d_o, *d_dout, *d_dq, *d_dk, *d_dv;
    float *d_lse;
    int32_t *d_sel;
    int *d_cu_q, *d_cu_k;
    bwd_args args;
} bwd_state;

/* The module's and the stages' hooks (their types: attn/example.h). */
attn_module_prepare_fn bwd_prepare;
attn_module_verdict_fn bwd_verdict;
attn_module_banner_fn bwd_banner;
attn_module_setup_fn bwd_setup;
attn_stage_prepare_fn bwd_prepare_forward, bwd_prepare_backward;
attn_stage_clear_fn bwd_clear_forward, bwd_clear_backward;
attn_stage_check_fn bwd_check_forward, bwd_check_backward;
attn_module_flops_fn bwd_flops;
attn_module_record_json_fn bwd_record_json;
attn_module_dump_fn bwd_dump;
attn_module_after_table_fn bwd_after_table;
attn_module_release_fn bwd_release;
const char *bwd_inputs_read_from(void *state);
/* bwd_files.c: --tensors DIR read into s (0, or ATTN_EXIT_USAGE with why); the gradients g
 * written to s->dump_dir as <name>_<suffix>.bin (0, or 1 after a message). */
int bwd_load_inputs(bwd_state *s, char *why, size_t len);
int bwd_dump_grads(const bwd_state *s, const char *suffix, const attn_grads *g);
/* bwd_stages.c: frees the three gradients of g. */
void bwd_free_grads(attn_grads *g);

/* Which mode a kernel serves (flash_bwd.cu's registry), for the verdict. */
bwd_mode bwd_kernel_mode(const attn_kernel *k);

#ifdef __cplusplus
}
#endif
#endif /* FLASH_BWD_H */
