/* example_sparse.h — private to the example driver (example.c): what a run with a sparse pattern
 * adds to it (attn_sparse_example_main, attn/example.h). Kept apart so that example.c only calls
 * these hooks. */
#ifndef ATTN_EXAMPLE_SPARSE_H
#define ATTN_EXAMPLE_SPARSE_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/example.h"
#include "attn/patterns.h"
#include "attn/report.h"

typedef struct sparse_state {
    const attn_sparse_example *ex; /* NULL: a dense example, --pattern refused */
    bool has_pattern;              /* a pattern other than "none" */
    attn_pattern pattern;
    attn_pattern_ctx ctx;
    attn_mask mask; /* the reference's mask (a predicate over the pattern) */
    attn_block_mask blocks, blocks_dev;
    attn_csr csr, csr_dev;
    attn_pattern_stats stats;
} sparse_state;

/* Step 1: the pattern from --pattern or the example's default. Returns 0, or ATTN_EXIT_USAGE
 * with the reason in why (a pattern given to a dense example). */
int sparse_prepare(sparse_state *st, const attn_sparse_example *ex, const char *spec, char *why,
                   size_t len);
/* The kernel's pattern flags (0 for a dense example). */
unsigned sparse_flags(const sparse_state *st, int kernel_index);
/* 0 if kernel kernel_index serves the pattern (or its absence); else the reason in why. */
int sparse_refuses(const sparse_state *st, const attn_kernel *k, int kernel_index, char *why,
                   size_t len);
/* The reference's mask for kernel kernel_index: NULL (dense) without a pattern or for a
 * baseline kernel. */
const attn_mask *sparse_mask_for(const sparse_state *st, int kernel_index);
/* Builds the block mask and (need_csr) the CSR for p on the host and the device, and prints the
 * pattern's line unless quiet. 0, or 1 after reporting an error. */
int sparse_build(sparse_state *st, const attn_problem *p, bool need_csr, bool quiet);
/* Fills the sparse fields of the buffers. */
void sparse_buffers(const sparse_state *st, attn_buffers *b);
/* FLOPs of kernel kernel_index on p: only the computed entries for a sparse kernel (DESIGN §4). */
double sparse_flops(const sparse_state *st, int kernel_index, const attn_problem *p);
/* After the table: measured speedup of each timed sparse kernel over the first timed baseline,
 * beside the theoretical one. */
void sparse_print_speedups(const sparse_state *st, const attn_example *ex,
                           const attn_run_record *recs, int n);
void sparse_free(sparse_state *st);

#endif /* ATTN_EXAMPLE_SPARSE_H */
