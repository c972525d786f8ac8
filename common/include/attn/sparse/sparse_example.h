/* attn/sparse/sparse_example.h — the sparse module: what an example whose kernels serve sparse
 * patterns (example 04 on) adds to the one driver (attn/example.h):
 *
 *   static const attn_sparse_config my_sparse = {"window:w=64", NULL};
 *   const attn_example my_example = {..., &attn_sparse_module, &my_sparse};
 *   int main(int argc, char **argv) { return attn_example_main(argc, argv, &my_example); }
 *
 * What each kernel serves is its attn_kernel.serves (attn/problem.h; the pattern kinds:
 * ATTN_SERVES_PATTERN, attn/sparse/patterns.h). The module's steps are attn/sparse/sparse_run.h's:
 * the pattern from --pattern (or the example's default), the kernels that serve it, the reference
 * under it, the block mask (ATTN_SPARSE_TILE tiles) and the CSR form in attn_buffers.sparse, the
 * pattern's density and metadata size, and after the table the measured speedup of each sparse
 * kernel over the baseline beside the theoretical one (dense entries / computed entries).
 * --help lists the pattern syntaxes the example accepts, its own kinds included.
 */
#ifndef ATTN_SPARSE_EXAMPLE_H
#define ATTN_SPARSE_EXAMPLE_H

#include "attn/example.h"
#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

struct attn_pattern_kind_def;

/* A sparse example's settings (attn_example.module_config). */
typedef struct attn_sparse_config {
    const char *default_pattern; /* when --pattern is not given (attn/sparse/patterns.h) */
    /* The pattern kinds the example defines itself (attn/sparse/patterns.h, "An example's own
     * pattern"), NULL-terminated; NULL for none. */
    const struct attn_pattern_kind_def *const *kinds;
} attn_sparse_config;

extern const attn_module attn_sparse_module;

/* The sparse settings of ex, NULL when ex is not a sparse example. */
const attn_sparse_config *attn_sparse_config_of(const attn_example *ex);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_SPARSE_EXAMPLE_H */
