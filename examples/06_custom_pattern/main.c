/* main.c — Example 06's program, custom_pattern: the shared harness drives the kernels of
 * custom_pattern.cu under the ladder pattern (--pattern ladder:b=B,s=S,w=W; any pattern of
 * example 04 for a comparison at equal density; flags: --help). A bad pattern parameter is one
 * line and exit 2 (the pattern parser, common/src/sparse/patterns.c). */
#include "attn/sparse/sparse_example.h"

extern const attn_sparse_example custom_pattern_example; /* custom_pattern.cu */

int main(int argc, char **argv) {
    return attn_sparse_example_main(argc, argv, &custom_pattern_example);
}
