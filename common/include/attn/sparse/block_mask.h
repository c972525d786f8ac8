/* attn/sparse/block_mask.h — which key blocks each query block visits: the metadata of every
 * block-sparse kernel (examples 04 and 06, exercise 02).
 *
 * It mirrors FlexAttention's BlockMask (PyTorch, torch.nn.attention.flex_attention): the score
 * matrix of one sequence is cut into tiles of block_q queries x block_k keys; for each query block
 * the mask lists, in ascending order,
 *   - the *full* key blocks, whose every in-range entry is visible: a kernel computes them with no
 *     per-element mask work, and
 *   - the *partial* key blocks, where some entries are visible and some are not: a kernel applies
 *     the token-level predicate inside them.
 * Blocks in neither list are skipped whole. "Visible" is attn_entry_visible (attn/reference.h):
 * causality (bottom-right aligned) and the token-level mask together, so a block mask built from a
 * problem and a mask describes exactly the entries the reference computes.
 *
 *         key blocks  0   1   2   3   4            query block 2, say:
 *                   +---+---+---+---+---+           full_kv_num_blocks[2] = 2
 *   query block 0   | F | P |   |   |   |           full_kv_indices[2][.] = {1, 2}
 *   query block 1   | P | F | P |   |   |           kv_num_blocks[2]      = 2
 *   query block 2   |   | F | F | P | P |           kv_indices[2][.]      = {3, 4}
 *                   +---+---+---+---+---+
 *
 * One mask slice per sequence of the batch (per cu_seqlens sequence when the problem is varlen, as
 * sequences differ in length); all heads share it. Lq/Lk are the problem's (maxima when varlen);
 * a sequence shorter than Lq has empty lists for the query blocks past its end.
 *
 * The struct is the same on the host and on the device: attn_block_mask_to_device makes a copy
 * whose arrays live in device memory (the struct itself stays on the host and is what a launcher
 * finds in attn_buffers.sparse->block_mask).
 */
#ifndef ATTN_BLOCK_MASK_H
#define ATTN_BLOCK_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/problem.h"
#include "attn/reference.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_block_mask {
    int batches;          /* mask slices: the problem's B */
    int Lq, Lk;           /* tokens the mask covers (problem maxima) */
    int block_q, block_k; /* tile sizes (Br, Bc of the kernel that reads it) */
    int num_q_blocks;     /* ceil(Lq / block_q) */
    int num_k_blocks;     /* ceil(Lk / block_k) */
    /* Partial blocks: the mask applies inside them. */
    int32_t *kv_num_blocks; /* [batches][num_q_blocks] */
    int32_t *kv_indices;    /* [batches][num_q_blocks][num_k_blocks]; the first kv_num_blocks
                               entries of each row are used, strictly ascending */
    /* Full blocks: every in-range entry visible, no per-element work. */
    int32_t *full_kv_num_blocks; /* [batches][num_q_blocks] */
    int32_t *full_kv_indices;    /* [batches][num_q_blocks][num_k_blocks], as kv_indices */
} attn_block_mask;

/* What a sparse kernel finds in attn_buffers.sparse (attn/problem.h): host structs whose arrays
 * are in device memory. Filled by attn_sparse_buffers (attn/sparse/sparse_run.h), or by a caller
 * that builds its own block layout. */
typedef struct attn_sparse_inputs {
    const attn_block_mask *block_mask; /* the block mask, 64 x 64 tiles (ATTN_SPARSE_TILE) */
    /* The pattern (attn/sparse/patterns.h; passed to kernels by value; NULL: none, e.g. a
     * user's own block layout) and its token-level CSR form (NULL unless a kernel reads it). */
    const struct attn_pattern *pattern;
    const struct attn_csr *csr;
} attn_sparse_inputs;

/* Counts over a mask (attn_block_mask_stats_of), summed over the slices, once per head (all heads
 * share the mask). */
typedef struct attn_block_mask_stats {
    int64_t tiles;          /* batches x num_q_blocks x num_k_blocks */
    int64_t full_blocks;    /* listed full tiles */
    int64_t partial_blocks; /* listed partial tiles */
    double block_density;   /* (full + partial) / tiles: the fraction of tiles a kernel visits */
    size_t metadata_bytes;  /* bytes of the four arrays */
} attn_block_mask_stats;

/* Allocates host arrays for `batches` slices of an Lq x Lk score matrix in block_q x block_k
 * tiles, every list empty. Returns 0, or -1 (with *m zeroed) on bad sizes or no memory. */
int attn_block_mask_alloc(attn_block_mask *m, int batches, int Lq, int Lk, int block_q,
                          int block_k);
/* Frees host arrays from attn_block_mask_alloc / _from_mask; zeroes *m. NULL-safe. */
void attn_block_mask_free(attn_block_mask *m);

/* The exact block mask of problem p under mask (NULL: causality only): a tile is full if every
 * in-range entry is visible, partial if some are, absent if none is. Evaluates the predicate on
 * every entry of every slice at head 0 (O(B * Lq * Lk)): the generic builder and the oracle the
 * pattern-specific builders are tested against. Returns 0 or -1 (bad problem, no memory). */
int attn_block_mask_from_mask(attn_block_mask *m, const attn_problem *p, const attn_mask *mask,
                              int block_q, int block_k);

/* Checks a block mask someone built (a pattern's builder, a student's) for problem p under mask:
 * shape (batches = B, Lq, Lk, the block counts), every list in range and strictly ascending, no
 * tile both full and partial, every full tile entirely visible, and every visible entry inside a
 * listed tile. Returns 0 if all hold, else -1 with the first violation (slice, query block, key
 * block, entry) in why. Listing a tile with no visible entry is allowed (it costs time, not
 * correctness); attn_block_mask_count_empty counts those. */
int attn_block_mask_validate(const attn_block_mask *m, const attn_problem *p, const attn_mask *mask,
                             char *why, size_t why_len);

/* Listed tiles (full or partial) that contain no visible entry: work a kernel does for nothing. */
int64_t attn_block_mask_count_empty(const attn_block_mask *m, const attn_problem *p,
                                    const attn_mask *mask);

attn_block_mask_stats attn_block_mask_stats_of(const attn_block_mask *m);

/* True if m lists (full or partial) the tile holding entry (i, j) of slice b: i, j positions
 * inside sequence b. Lists are searched as stored (ascending order is not assumed). */
bool attn_block_mask_lists(const attn_block_mask *m, int b, int i, int j);

/* The entries of the tiles m lists, as a reference mask (a predicate over attn_block_mask_lists;
 * m, in host memory, must outlive it). It is what a block-sparse kernel computes from a
 * user-built layout with no token predicate (attn_buffers.pattern NULL, example 04): every
 * entry of every listed tile, with the problem's causality on top (attn_entry_visible). */
attn_mask attn_block_mask_as_mask(const attn_block_mask *m);

/* The transposed view (FlexAttention's q_num_blocks / q_indices, what a backward pass needs):
 * for each key block, the query blocks whose lists name it, ascending, split the same way (a
 * tile full in m is full in t, a partial one partial). t is a block mask of the transposed score
 * matrix: t->Lq = m->Lk, t->block_q = m->block_k, t->num_q_blocks = m->num_k_blocks (its rows are
 * key blocks) and the other way round, so every function above applies to it with keys and
 * queries exchanged (attn_block_mask_lists(t, b, j, i) == attn_block_mask_lists(m, b, i, j)).
 * A kernel whose block owns key block kb walks t's lists for row kb (example 07's backward).
 * Returns 0, or -1 (no memory; *t zeroed). Free with attn_block_mask_free. */
int attn_block_mask_transpose(const attn_block_mask *m, attn_block_mask *t);

/* Device copy: allocates the four arrays in device memory and copies them; dev's sizes equal
 * host's. Returns 0, or 1 after reporting the error (dev zeroed). */
int attn_block_mask_to_device(const attn_block_mask *host, attn_block_mask *dev);
/* Frees a copy made by attn_block_mask_to_device; zeroes *dev. NULL-safe. */
void attn_block_mask_free_device(attn_block_mask *dev);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BLOCK_MASK_H */
