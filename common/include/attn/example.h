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

#ifdef __cplusplus
}
#endif
#endif /* ATTN_EXAMPLE_H */
