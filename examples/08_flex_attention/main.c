/* main.c — Example 08's program: the one driver (common/src/example.c) runs the kernels of
 * flex_attention.cu under a modification (--mod SPEC; flags: --help). */
#include "attn/example.h"

extern const attn_example flex_attention_example; /* flex_attention.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &flex_attention_example); }
