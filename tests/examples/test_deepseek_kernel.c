/* test_deepseek_kernel.c — example 05's end-to-end pipeline as a harness kernel
 * (deepseek_sparse_example, kernel "deepseek_k512"), driven by the shared example driver: with
 * every query seeing at most 512 keys the selection is every key, so the kernel must equal dense
 * attention (checked against the harness's reference, FlashAttention's 2x rule). */
#include "attn/example.h"

extern const attn_example deepseek_sparse_example; /* examples/05_deepseek_sparse */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &deepseek_sparse_example); }
