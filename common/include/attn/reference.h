/* attn/reference.h — the CPU oracle: attention in double precision on the host.
 *
 * Every test compares against this. It covers dense, causal (bottom-right aligned), any mask
 * (predicate or CSR), a score modification (FlexAttention's score_mod: a bias, a soft-cap), and
 * variable length through the problem's cu_seqlens. It is itself checked
 * against PyTorch/NumPy by the Python tests (tests/python). For problems too big to compute whole,
 * the *_rows variants compute a selection of rows (attn_reference_sample_rows picks one).
 */
#ifndef ATTN_REFERENCE_H
#define ATTN_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which keys a query sees, on top of causality (both must allow an entry). */
typedef enum attn_mask_kind {
    ATTN_MASK_NONE = 0,      /* every key (subject to causal) */
    ATTN_MASK_PREDICATE = 1, /* keep(ctx, b, h, i, j) != 0 */
    ATTN_MASK_CSR = 2        /* per (b, i) row, the sorted key list, shared by all heads */
} attn_mask_kind;

typedef struct attn_mask {
    attn_mask_kind kind;
    /* PREDICATE: i, j are positions inside sequence b (0-based, not packed offsets). */
    int (*keep)(const void *ctx, int b, int h, int i, int j);
    const void *ctx;
    /* CSR: row r = b*Lq + i; keys col_idx[row_ptr[r] .. row_ptr[r+1]-1], sorted ascending,
     * positions inside sequence b. row_ptr has B*Lq + 1 entries. */
    const int64_t *row_ptr;
    const int32_t *col_idx;
    /* Optional, with any kind: a score modification (FlexAttention's score_mod), applied to the
     * scaled score of every entry that the row sees: s' = score(score_ctx, b, h, i, j, s) with
     * s = scale * q_i . k_j, i, j as for keep. NULL: none. The softmax is taken over s', and the
     * log-sum-exp is log(sum_j exp(s'_j)). A result of -inf drops the entry like the mask does;
     * it must never be NaN. Called from several threads at once, like keep. The block mask
     * builders (attn/sparse/block_mask.h) read only the mask part. */
    double (*score)(const void *score_ctx, int b, int h, int i, int j, double s);
    const void *score_ctx;
} attn_mask;

/* True if query i of sequence b, head h, sees key j under p (causal) and mask (may be NULL). */
bool attn_entry_visible(const attn_problem *p, const attn_mask *mask, int b, int h, int i, int j);

/* out = softmax(scale * Q K^T  (masked)) V with double accumulation; lse (may be NULL) gets
 * log(sum_j exp(scale * q.k_j)) per row, -inf for rows that see no key (whose output is 0). With
 * a score modification (mask->score) the scores are the modified ones, here and in
 * attn_reference_lowp.
 * q, k, v, out in the problem's layout as fp32. Returns 0, or -1 on an invalid problem (or when
 * scratch memory runs out).
 *
 * Rows are computed in parallel where the harness is built with OpenMP (omp_set_num_threads and
 * OMP_NUM_THREADS apply). Each row is summed in the same order whatever the number of threads, so
 * the results are bit-identical to a one-thread run. A predicate mask's keep() is therefore
 * called from several threads at once and must not modify shared state. */
int attn_reference(const attn_problem *p, const attn_mask *mask, const float *q, const float *k,
                   const float *v, float *out, float *lse);

/* attn_reference on selected rows only: row n (attn_row_at numbering) is computed iff
 * row_selected[n] != 0 (row_selected: [attn_problem_row_count(p)], NULL = every row). The output
 * and lse of an unselected row are NaN, which the checkers read as "not computed" (check.h); a
 * selected row is bit-identical to the same row of attn_reference. */
int attn_reference_rows(const attn_problem *p, const attn_mask *mask, const float *q,
                        const float *k, const float *v, float *out, float *lse,
                        const uint8_t *row_selected);

/* Selects `count` rows (all when count >= attn_problem_row_count(p)) for attn_reference_rows:
 * sets row_selected[n] to 1 for the chosen rows and 0 for the others, and returns the number
 * chosen. Deterministic. The count is shared among the (b, h) slices in proportion to their
 * lengths; each slice's share goes first to its last row (under causality the one that sees every
 * key), its first row and the tile boundaries 63, 64, 127, 128 where they exist, and the rest to
 * rows spaced evenly over the slice. */
int64_t attn_reference_sample_rows(const attn_problem *p, int count, uint8_t *row_selected);

/* Threads the reference runs on: omp_get_max_threads(), 1 without OpenMP. */
int attn_reference_threads(void);

/* The straightforward same-precision implementation FlashAttention's tolerance rule compares
 * against: S = scale*QK^T accumulated and kept in fp32 (as a tensor-core kernel keeps it), softmax
 * in fp32 with P rounded to the dtype, O = PV with fp32 accumulation rounded to the dtype. S is
 * not rounded: an fp16 S overflows beyond 65504 and its error at large amplitude would bound
 * nothing (an all-zero output would pass). For fp32 it is plain
 * single-precision attention. Same arguments as attn_reference (lse not produced), parallel in
 * the same way. */
int attn_reference_lowp(const attn_problem *p, const attn_mask *mask, const float *q,
                        const float *k, const float *v, float *out);

/* attn_reference_lowp on selected rows only, as attn_reference_rows (unselected rows are NaN). */
int attn_reference_lowp_rows(const attn_problem *p, const attn_mask *mask, const float *q,
                             const float *k, const float *v, float *out,
                             const uint8_t *row_selected);

/* ---- the backward pass ------------------------------------------------------------------------
 * The gradients of the loss sum(dO * O), O = softmax(scale * Q K^T, masked) V, by their formulas
 * (derived in examples/07_flash_attention_backward/README.md), in double precision:
 *     P_ij  = exp(scale q_i.k_j - LSE_i)           LSE_i = log sum_j exp(scale q_i.k_j)
 *     dP_ij = dO_i . v_j        D_i = sum_j P_ij dP_ij        dS_ij = P_ij (dP_ij - D_i)
 *     dV_j  = sum_i P_ij dO_i   dQ_i = scale sum_j dS_ij k_j   dK_j = scale sum_i dS_ij q_i
 * over the visible entries (attn_entry_visible). dout (dO) has the layout of Q; dq that of Q,
 * dk and dv that of K. A row that sees no key, and a key no row sees, get zero gradients. Slice
 * s = b*H + h is computed iff slices[s] (NULL: all; [B*H]); the elements of the others are NaN,
 * which the checkers read as "not computed". No Lq x Lk matrix is stored: a row pass (LSE_i, D_i,
 * dQ_i) then a column pass (dK_j, dV_j), on OpenMP threads, each element summed serially in a
 * fixed order. */
typedef struct attn_grads {
    float *dq, *dk, *dv;
} attn_grads;

/* ref gets the gradients; lse (may be NULL) the LSE the reference used (-inf for a row that sees
 * no key); tol (may be NULL) each element's fp32 tolerance, derived in reference_backward.c from
 * the rounding errors of an fp32 backward that follows the same formulas. 0, or -1 (no memory,
 * or a mask with a score modification, mask->score: its backward is not derived here; both
 * functions refuse it rather than return the gradients of the unmodified scores). */
int attn_reference_backward(const attn_problem *p, const attn_mask *mask, const float *q,
                            const float *k, const float *v, const float *dout,
                            const uint8_t *slices, attn_grads *ref, float *lse, attn_grads *tol);

/* The straightforward backward in the problem's own precision, what FlashAttention's 2x rule
 * measures a kernel against (attn_check_gradient): S = scale Q K^T in fp32, softmax in fp32 with
 * P rounded to the dtype, dP = dO V^T rounded, dS = P (dP - rowsum(P dP)) rounded, dV = P^T dO,
 * dQ = scale dS K, dK = scale dS^T Q with fp32 accumulation, rounded to the dtype. fp32: plain
 * single precision. */
int attn_reference_backward_lowp(const attn_problem *p, const attn_mask *mask, const float *q,
                                 const float *k, const float *v, const float *dout,
                                 const uint8_t *slices, attn_grads *out);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_REFERENCE_H */
