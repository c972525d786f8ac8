/* main.c — Example 01's program: the shared harness drives the kernels of naive_attention.cu
 * (flags: --help; checking, timing and reporting: common/src/example.c). */
#include "attn/example.h"

extern const attn_example naive_attention_example; /* naive_attention.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &naive_attention_example); }
