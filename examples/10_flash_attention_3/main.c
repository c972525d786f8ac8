/* main.c — Example 10's program: the shared harness drives the kernels of flash3_fwd.cu
 * (flags: --help; checking, timing and reporting: common/src/example.c). */
#include "attn/example.h"

extern const attn_example flash3_fwd_example; /* flash3_fwd.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &flash3_fwd_example); }
