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
 * The rule is defined once, in ladder.h (ladder_keep, ladder_block_keep), and this example
 * registers it as a pattern kind of its own (ladder_kind_def below): the harness's parser, CPU
 * reference and block mask builder take "ladder:..." from then on, and the block mask is built
 * block pair by block pair (ladder_block_keep: one test per (query block, key block) pair a tile
 * touches, never one per entry). ladder.py is the same rule in Python (quality/ runs it on a real
 * model). With b a multiple of 64 and Lq = Lk, every listed tile is full except the diagonal one
 * under causality: the kernel does no per-element mask work anywhere else.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 dense_fa2     example 03's fa2_mma unchanged: the dense (or dense causal) baseline.
 *                   ./build/sim/examples/06_custom_pattern/custom_pattern_sim --kernel 1
 *   2 block_sparse  example 04's block-sparse FA2 (tensor cores, mma.sync m16n8k16;
 *                   ../04_sparse_patterns/sparse_fa2.cuh) specialised on the ladder: a query tile
 *                   loads only its listed key tiles, full ones with no mask, partial ones with
 *                   ladder_keep inlined. Also runs any pattern of example 04 (the baselines at
 *                   equal density).
 *                   ./build/sim/examples/06_custom_pattern/custom_pattern_sim --kernel 2
 *                   --pattern ladder:b=64,s=1,w=4 --causal
 * (On a GPU build use build/gpu/.../custom_pattern_gpu.) Version 2: fp16/bf16 inputs, fp32
 * accumulation, D = 64 or 128, any L, Lq != Lk, causal (bottom-right aligned), variable-length
 * batches (--seqlens, one block-mask slice per sequence), log-sum-exp written, rows with no key
 * output 0 (LSE -inf).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "../04_sparse_patterns/sparse_fa2.cuh"
#include "attn/problem.h"
#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_example.h"
#include "ladder.h"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c) with the ladder's
 * predicate as its mask (attn_pattern_mask, through ladder_kind_def.keep), in double precision;
 * fp16/bf16 are judged by FlashAttention's 2x rule against attn_reference_lowp under the same
 * mask (attn/check.h). tests/test_ladder_rule.c checks the registered rule against the README's
 * definition, enumerated independently. */

/* ================================== kernels =============================================== */
/* Version 1 is example 03's fa2_mma, version 2 example 04's block-sparse kernel
 * (../04_sparse_patterns/sparse_fa2.cuh) with the ladder as the Own kinds of its predicate; the
 * walkthrough of the loop is in example 04:
 *
 *   query tile qb (64 rows)      ladder:b=64,s=1,w=2, causal, qb = 9:
 *   +------------------+         key tiles  0 1 2 3 4 5 6 7 8 9
 *   | 4 warps x 16 rows|                    F F . . . F . F F P    F full: no mask work
 *   +------------------+                    | |       |   | | |    P partial: the diagonal
 *                                       sink 8       4   2 1 0    distance 9 - J: rungs 8, 4, 2,
 *                                                                 local 0, 1 (w = 2)
 *   work = (listed tiles) x 64 x 64 x D x 4 flops instead of (qb + 1) x 64 x 64 x D x 4 */

/* ================================= launchers ============================================== */

extern "C" const attn_kernel flash2_fa2_mma; /* example 03 */

static void launch_ladder_sparse(const attn_problem *p, const attn_buffers *b,
                                 cudaStream_t stream) {
    attn_launch_block_sparse<ladder_kind>(p, b, stream);
}

/* ================================= registry =============================================== */

extern "C" const attn_pattern_kind_def ladder_kind_def = {
    .name = "ladder",
    .usage = "ladder:b=B,w=W[,s=S]     blocks of b: J < s (s = 1), |I - J| < w, |I - J| a power of "
             "2 (example 06)",
    .params = {{.name = "b", .required = true, .min = 1, .max = 1 << 28},
               {.name = "s", .def = 1, .max = 1 << 28}, /* one sink block unless given */
               {.name = "w", .required = true, .min = 1, .max = 1 << 28}},
    .keep = ladder_keep,
    .block_param = LADDER_B, /* defined on blocks of b tokens */
    .block_keep = ladder_block_keep,
};

static const attn_pattern_kind_def *const custom_kinds[] = {&ladder_kind_def, NULL};

/* ATTN_SERVES_OWN_PATTERN(0): the ladder, this example's first (only) own kind */
static const attn_kernel custom_kernels[] = {
    {ATTN_VERSION(1, "dense_fa2",
                  "baseline: example 03's fa2_mma, dense (causal with --causal), no pattern"),
     .launch = flash2_fa2_mma.launch, .req = flash2_fa2_mma.req, .serves = ATTN_SERVES_BASELINE,
     .launch_shape = flash2_fa2_mma.launch_shape},
    {ATTN_VERSION(2, "block_sparse",
                  "example 04's block-sparse FA2 specialised on the ladder: full tiles unmasked, "
                  "partial tiles predicated"),
     .launch = launch_ladder_sparse, .req = flash2_fa2_mma.req,
     .serves = ATTN_SERVES_ALL_PATTERNS | ATTN_SERVES_OWN_PATTERN(0) | ATTN_SERVES_DENSE,
     .launch_shape = sparse_fa2_shape},
};

/* 16 tiles at L = 1024: 0.53 of the causal entries */
static const attn_sparse_config custom_config = {"ladder:b=64,s=1,w=2", custom_kinds};

extern "C" const attn_example custom_pattern_example = {
    .name = "06_custom_pattern",
    .summary =
        "a pattern of our own: sink + local + power-of-two-distance blocks (the ladder) vs dense",
    ATTN_KERNELS(custom_kernels),
    /* B, H, L, D; on the simulator: a few seconds for both kernels */
    .defaults = {.gpu = {1, 16, 16384, 128}, .sim = {1, 1, 1024, 64}},
    .module = &attn_sparse_module,
    .module_config = &custom_config,
};
