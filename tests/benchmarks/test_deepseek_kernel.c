/* test_deepseek_kernel.c — the benchmark's adapter of example 05 (benchmarks/deepseek_k512.cu:
 * the whole DeepSeek pipeline as one harness kernel, "deepseek_k512"), driven by the one example
 * driver: with every query seeing at most 512 keys the selection is every key, so the kernel must
 * equal dense attention (checked against the harness's reference, FlashAttention's 2x rule). */
#include "attn/example.h"

extern const attn_example deepseek_k512_example; /* benchmarks/deepseek_k512.cu */

int main(int argc, char **argv) { return attn_example_main(argc, argv, &deepseek_k512_example); }
