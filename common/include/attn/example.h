/* attn/example.h — the driver every example's main() calls.
 *
 *   int main(int argc, char **argv) { return attn_example_main(argc, argv, &my_example); }
 *
 * It parses the command line (attn/cli.h), finds the device (exit 77 on a gpu build without a
 * GPU), makes seeded inputs, computes the CPU reference (for a big problem on a sample of rows:
 * --check-rows, --check-all), then for each selected kernel: checks
 * its requirements, NaN-fills the output, launches, synchronises, checks (PASS/FAIL with the
 * first mismatches), times it unless --check-only, and reports. Exit status: 0 all selected
 * kernels passed, 1 a failure or runtime error, 2 usage, 77 no GPU.
 *
 * An example whose kernels serve sparse patterns calls attn_sparse_example_main instead
 * (attn/sparse/sparse_example.h), which runs this driver with the hooks below.
 */
#ifndef ATTN_EXAMPLE_H
#define ATTN_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/cli.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/report.h"
#include "attn/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

int attn_example_main(int argc, char **argv, const attn_example *ex);

/* What a module adds to the driver, at the steps named (example.c): the sparse module runs the
 * kernels under a pattern through them. Any hook may be NULL; ctx is passed to each. */
typedef struct attn_example_hooks {
    void *ctx;
    /* Step 1, once the problem is known: the module's flags (e.g. cli->pattern). 0, or
     * ATTN_EXIT_USAGE with the reason in why. */
    int (*prepare)(void *ctx, const attn_cli *cli, char *why, size_t len);
    /* Can kernel k run p here? Replaces attn_kernel_verdict (which it may call). */
    attn_verdict (*verdict)(void *ctx, const attn_kernel *k, const attn_problem *p, char *why,
                            size_t len);
    /* Step 3, before the inputs: what the selected kernels (selected[n]: kernel n of ex) need.
     * Sets *mask (the reference's mask, NULL: none) and *dense_too (a dense reference as well).
     * 0, or 1 after a message on stderr. */
    int (*build)(void *ctx, const attn_example *ex, const bool *selected, const attn_problem *p,
                 bool quiet, const attn_mask **mask, bool *dense_too);
    /* The module's inputs of the kernels, in the device buffers. */
    void (*buffers)(void *ctx, attn_buffers *b);
    /* Step 4, per kernel: its refusal, reference and FLOPs (attn_run_opts). */
    void (*kernel_options)(void *ctx, const attn_kernel *k, const attn_problem *p,
                           attn_run_opts *opts, char *why, size_t len);
    /* After the table of results. */
    void (*after_table)(void *ctx, const attn_example *ex, const attn_run_record *recs, int n);
    void (*release)(void *ctx);
} attn_example_hooks;

/* attn_example_main with a module's hooks (NULL: none, a dense example). */
int attn_example_run(int argc, char **argv, const attn_example *ex,
                     const attn_example_hooks *hooks);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_EXAMPLE_H */
