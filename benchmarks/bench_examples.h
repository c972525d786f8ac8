/* bench_examples.h — the examples whose kernels bench_attention runs: every example folder that
 * declares a benchmark registry (examples/README.md, "Adding an example"), collected by
 * benchmarks/CMakeLists.txt into the generated bench_examples.c in the build folder. */
#ifndef ATTN_BENCH_EXAMPLES_H
#define ATTN_BENCH_EXAMPLES_H

#include "attn/problem.h"
#include "attn/sparse/sparse_example.h"

/* Terminated by NULL. A sparse example's kernels (attn_sparse_config_of) run the problems that
 * have a pattern (--pattern, --grid sparse); a dense example's, the problems without one. */
extern const attn_example *const attn_bench_examples[];

#endif /* ATTN_BENCH_EXAMPLES_H */
