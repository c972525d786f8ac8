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
 */
#ifndef ATTN_EXAMPLE_H
#define ATTN_EXAMPLE_H

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

int attn_example_main(int argc, char **argv, const attn_example *ex);

/* An example whose kernels serve sparse patterns (--pattern, attn/patterns.h): what each kernel
 * serves is its attn_kernel.serves (attn/problem.h). The driver checks the kernels against the
 * reference under the pattern, builds the block mask (ATTN_SPARSE_TILE tiles) and the CSR form
 * for them (attn_buffers.block_mask, .pattern, .csr), prints the pattern's density and metadata
 * size, and the measured speedup of each sparse kernel over the baseline beside the theoretical
 * one (dense entries / computed entries). */
typedef struct attn_sparse_example {
    const attn_example *base;
    const char *default_pattern; /* when --pattern is not given */
} attn_sparse_example;

int attn_sparse_example_main(int argc, char **argv, const attn_sparse_example *ex);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_EXAMPLE_H */
