/* main.c — Example 04's program: the shared harness drives the kernels of sparse_patterns.cu
 * with a sparse pattern (--pattern SPEC; flags: --help; checking, timing and reporting:
 * common/src/example.c and sparse_run.c). */
#include "attn/sparse/sparse_example.h"

extern const attn_sparse_example sparse_patterns_example; /* sparse_patterns.cu */

int main(int argc, char **argv) {
    return attn_sparse_example_main(argc, argv, &sparse_patterns_example);
}
