/* main.c — Example 02's program: the shared harness drives the kernel of flash_fwd.cu
 * (flags: --help; checking, timing and reporting: common/src/example.c). */
#include "attn/example.h"

extern const attn_example flash_fwd_example; /* flash_fwd.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &flash_fwd_example); }
