/* main.c — Example 06's program: the one driver (common/src/example.c) runs the kernels of
 * custom_pattern.cu with a sparse pattern (--pattern SPEC; flags: --help). */
#include "attn/example.h"

extern const attn_example custom_pattern_example; /* custom_pattern.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &custom_pattern_example); }
