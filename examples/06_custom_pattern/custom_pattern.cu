/* custom_pattern.cu — Example 06: a sparse pattern of our own, the *ladder*, for long-context
 * causal language-model prefill (16K-32K tokens), and the kernels that run it.
 *
 *     O = softmax(scale * Q K^T + M) V     M = 0 where the ladder keeps (i, j), -inf elsewhere
 *
 * The ladder (README.md: definition, density, complexity, heatmaps) works on blocks of b tokens:
 * query block I = floor(a/b) (a = i + Lk - Lq, the bottom-right alignment) keeps key block J iff
 *
 *     J < s                 s sink blocks (attention sinks)
 *     |I - J| < w           w local blocks (the diagonal block and w - 1 before it)
 *     |I - J| = 2^m         the ladder: the blocks 1, 2, 4, 8, ... blocks away
 *
 * Its predicate is attn_ladder_block_keep (common/device/patterns.cuh, kind "ladder", shared by
 * the CPU reference, the kernels and quality/'s PyTorch model); its block mask builder is the
 * per-tile arithmetic of attn_pattern_block_mask (common/src/sparse/patterns.c, classify_blocks:
 * one test per (query block, key block) pair a tile touches, never one per entry). With b a
 * multiple of 64 and Lq = Lk, every listed tile is full except the diagonal one under causality:
 * the kernel does no per-element mask work anywhere else.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 dense_fa2     example 03's fa2_mma unchanged: the dense (or dense causal) baseline.
 *                   ./build/sim/examples/06_custom_pattern/custom_pattern_sim --kernel 1
 *   2 block_sparse  example 04's block-sparse FA2 (tensor cores, mma.sync m16n8k16) over the
 *                   ladder's block mask: a query tile loads only its listed key tiles, full ones
 *                   with no mask, partial ones with the ladder's predicate. Also runs any
 *                   pattern of example 04 (the baselines at equal density).
 *                   ./build/sim/examples/06_custom_pattern/custom_pattern_sim --kernel 2
 *                   --pattern ladder:b=64,s=1,w=4 --causal
 * (On a GPU build use build/gpu/.../custom_pattern_gpu.) Version 2: fp16/bf16 inputs, fp32
 * accumulation, D = 64 or 128, any L, Lq != Lk, causal (bottom-right aligned), variable-length
 * batches (--seqlens, one block-mask slice per sequence), log-sum-exp written, rows with no key
 * output 0 (LSE -inf).
 *
 * Sections: CPU reference | kernels | registry. main() is in main.c.
 */
#include "attn/problem.h"
#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_example.h"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c) with the ladder's
 * predicate as its mask (attn_pattern_mask), in double precision; fp16/bf16 are judged by
 * FlashAttention's 2x rule against attn_reference_lowp under the same mask (attn/check.h). */

/* ================================== kernels =============================================== */
/* Both kernels are example 04's versions 1 and 2, reused by symbol (its registry; 04 takes
 * version 1 from example 03); the walkthrough of the loop is in 04's sparse_patterns.cu:
 *
 *   query tile qb (64 rows)      ladder:b=64,s=1,w=2, causal, qb = 9:
 *   +------------------+         key tiles  0 1 2 3 4 5 6 7 8 9
 *   | 4 warps x 16 rows|                    F F . . . F . F F P    F full: no mask work
 *   +------------------+                    | |       |   | | |    P partial: the diagonal
 *                                       sink 8       4   2 1 0    distance 9 - J: rungs 8, 4, 2,
 *                                                                 local 0, 1 (w = 2)
 *   work = (listed tiles) x 64 x 64 x D x 4 flops instead of (qb + 1) x 64 x 64 x D x 4 */
extern "C" const attn_kernel *const sparse_patterns_kernels; /* example 04's registry */

/* ================================= registry =============================================== */

/* 16 tiles at L = 1024: 0.53 of the causal entries */
static const attn_sparse_config custom_config = {"ladder:b=64,s=1,w=2", NULL};

extern "C" const attn_example custom_pattern_example = {
    "06_custom_pattern",
    "a pattern of our own: sink + local + power-of-two-distance blocks (the ladder) vs dense",
    sparse_patterns_kernels, /* its versions 1 and 2 (the pointer is constant-initialised; */
    2,                       /* the entries are read at run time, after every initialiser) */
    {1, 16, 16384, 128},     /* GPU default: B, H, L, D */
    {1, 1, 1024, 64},        /* simulator default: a few seconds for both kernels */
    &attn_sparse_module,
    &custom_config,
};
