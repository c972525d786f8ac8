/* attn/sparse/sparse_example.h — an example whose kernels serve sparse patterns (example 04 on):
 *
 *   extern const attn_sparse_example my_example;
 *   int main(int argc, char **argv) { return attn_sparse_example_main(argc, argv, &my_example); }
 *
 * What each kernel serves is its attn_kernel.serves (attn/problem.h; the pattern kinds:
 * ATTN_SERVES_PATTERN, attn/sparse/patterns.h). The driver is attn/example.h's, with the sparse
 * steps of attn/sparse/sparse_run.h as its hooks: the pattern from --pattern (or the example's
 * default), the kernels that serve it, the reference under it, the block mask (ATTN_SPARSE_TILE
 * tiles) and the CSR form in attn_buffers.sparse, the pattern's density and metadata size, and
 * after the table the measured speedup of each sparse kernel over the baseline beside the
 * theoretical one (dense entries / computed entries).
 */
#ifndef ATTN_SPARSE_EXAMPLE_H
#define ATTN_SPARSE_EXAMPLE_H

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_sparse_example {
    const attn_example *base;    /* its kernels, defaults, ... */
    const char *default_pattern; /* when --pattern is not given (attn/sparse/patterns.h) */
} attn_sparse_example;

int attn_sparse_example_main(int argc, char **argv, const attn_sparse_example *ex);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_SPARSE_EXAMPLE_H */
