/* bench_examples.h — the examples whose kernels bench_attention runs. benchmarks/CMakeLists.txt
 * generates the array from ATTN_BENCH_EXAMPLES (bench_examples.c in the build folder). */
#ifndef ATTN_BENCH_EXAMPLES_H
#define ATTN_BENCH_EXAMPLES_H

#include "attn/problem.h"
#include "attn/sparse/sparse_example.h"

/* One example: exactly one of the two is set. A sparse example's kernels run the problems that
 * have a pattern (--pattern, --grid sparse); a dense example's, the problems without one. */
typedef struct attn_bench_entry {
    const attn_example *dense;
    const attn_sparse_example *sparse;
} attn_bench_entry;

/* Terminated by {NULL, NULL}. */
extern const attn_bench_entry attn_bench_examples[];

#endif /* ATTN_BENCH_EXAMPLES_H */
