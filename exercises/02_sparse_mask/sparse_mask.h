/* sparse_mask.h — exercise 02's interface: what your sparse_mask.cu exports.
 * DO NOT EDIT: the public tests and the grader are compiled against this header.
 *
 * Your sparse_mask.cu defines, with exactly these names and signatures:
 *   sparse_mask_keep               your pattern, token by token (README step 1)
 *   sparse_mask_build_block_mask   its block mask: full / partial tiles (README step 2)
 *   sparse_mask_example            the registry entry of your block-sparse kernel (README step 3)
 * Everything else in your file stays `static`.
 */
#ifndef SPARSE_MASK_H
#define SPARSE_MASK_H

#include "attn/problem.h"
#include "attn/sparse/block_mask.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel's tiles: Br query rows and Bc keys (the block mask it reads uses these). */
#define SPARSE_MASK_BLOCK_Q 32
#define SPARSE_MASK_BLOCK_K 32
/* Largest head dimension the kernel supports. */
#define SPARSE_MASK_MAX_D 128

/* What the skeleton's functions return until you write them. */
#define SPARSE_MASK_NOT_IMPLEMENTED (-2)

/* The pattern: 1 if query i may see key j, else 0, for a sequence of Lq queries and Lk keys
 * (0 <= i < Lq, 0 <= j < Lk). Causality is applied on top of it by the problem (bottom-right
 * aligned: j <= i + Lk - Lq), so the pattern need not repeat it. Pure: the same answer for the
 * same arguments, callable from several threads at once. */
int sparse_mask_keep(int Lq, int Lk, int i, int j);

/* Allocates *m (attn_block_mask_alloc) for problem p in block_q x block_k tiles and lists, for
 * every query block of every slice b < p->B, the key blocks where p's entries are all visible
 * (full) or some are (partial), under the pattern above and p->causal. Returns 0, or -1 (with
 * *m freed) on failure. The caller frees *m with attn_block_mask_free. */
int sparse_mask_build_block_mask(attn_block_mask *m, const attn_problem *p, int block_q,
                                 int block_k);

/* The kernel (one, id 1): its launcher reads the device copy of a
 * SPARSE_MASK_BLOCK_Q x SPARSE_MASK_BLOCK_K block mask from attn_buffers.sparse->block_mask. */
extern const attn_example sparse_mask_example;

#ifdef __cplusplus
}
#endif
#endif /* SPARSE_MASK_H */
