/* attn/sparse/sparse_run.h — what running a sparse example's kernels under a pattern adds to a
 * run (attn/runner.h): the pattern, its reference mask, the block mask and CSR on the host and the
 * device, which kernels serve it, their FLOPs and the speedup lines. Shared by the example driver
 * (sparse_example.c, attn_sparse_module) and the benchmark (bench_attention --pattern).
 *
 *   attn_sparse_run st;
 *   attn_sparse_prepare(&st, ex, "window:w=64", why, len);    the pattern
 *   attn_sparse_build(&st, &p, need_csr, quiet);              its masks for problem p
 *   attn_problem_data_make(&d, &p, &st.mask, ...);            the reference under the pattern
 *   attn_sparse_buffers(&st, &d.dev);                         the kernels' sparse inputs
 *   per kernel k: attn_sparse_verdict, attn_sparse_needs, attn_sparse_kernel_options
 *   attn_sparse_free(&st);
 */
#ifndef ATTN_SPARSE_RUN_H
#define ATTN_SPARSE_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/report.h"
#include "attn/runner.h"
#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_example.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_sparse_run {
    const attn_sparse_config *cfg; /* NULL: a dense example, --pattern refused */
    bool has_pattern;              /* a pattern other than "none" */
    attn_pattern pattern;
    attn_pattern_ctx ctx;
    attn_mask mask; /* the reference's mask (a predicate over the pattern) */
    attn_block_mask blocks, blocks_dev;
    attn_csr csr, csr_dev;
    attn_pattern_stats stats;
    attn_sparse_inputs inputs; /* what attn_sparse_buffers points attn_buffers.sparse at */
} attn_sparse_run;

/* Step 1: the pattern from --pattern or the example's default. Returns 0, or ATTN_EXIT_USAGE
 * with the reason in why (a pattern given to a dense example). */
int attn_sparse_prepare(attn_sparse_run *st, const attn_sparse_config *cfg, const char *spec,
                        char *why, size_t len);
/* attn_kernel_verdict for kernel k of the example, after the pattern: a kernel that does not
 * serve the pattern (or its absence; attn_kernel.serves) cannot run; the reason goes to why. */
attn_verdict attn_sparse_verdict(const attn_sparse_run *st, const attn_kernel *k,
                                 const attn_problem *p, char *why, size_t len);
/* What kernel k needs besides the block mask: ORs into *csr (it reads the CSR) and *dense (a
 * baseline beside the pattern: a dense reference). */
void attn_sparse_needs(const attn_sparse_run *st, const attn_kernel *k, bool *csr, bool *dense);
/* Builds the block mask and (need_csr) the CSR for p on the host and the device, and prints the
 * pattern's line unless quiet. 0, or 1 after reporting an error. */
int attn_sparse_build(attn_sparse_run *st, const attn_problem *p, bool need_csr, bool quiet);
/* Points b->sparse at the run's inputs (the block mask, the pattern, the CSR on the device); st
 * must not move while b is used. */
void attn_sparse_buffers(attn_sparse_run *st, attn_buffers *b);
/* The per-kernel run options of kernel k on p: refusal (a pattern it does not
 * serve; the reason is written to why), the reference it is checked against (a baseline's: the
 * dense one) and its FLOPs (a sparse kernel counts only the entries it computes: common/README.md,
 * "Conventions"). */
void attn_sparse_kernel_options(const attn_sparse_run *st, const attn_kernel *k,
                                const attn_problem *p, attn_run_opts *opts, char *why, size_t len);
/* After the table: measured speedup of each timed sparse kernel over the first timed baseline,
 * beside the theoretical one. */
void attn_sparse_print_speedups(const attn_sparse_run *st, const attn_example *ex,
                                const attn_run_record *recs, int n);
void attn_sparse_free(attn_sparse_run *st);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_SPARSE_RUN_H */
