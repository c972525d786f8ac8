/* main.c — Example 04's program: the one driver (common/src/example.c) runs the kernels of
 * sparse_patterns.cu with a sparse pattern (--pattern SPEC; flags: --help). */
#include "attn/example.h"

extern const attn_example sparse_patterns_example; /* sparse_patterns.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &sparse_patterns_example); }
