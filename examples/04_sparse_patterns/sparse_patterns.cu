/* sparse_patterns.cu — Example 04: sparse attention patterns, and three ways for a kernel to skip
 * the entries a pattern drops.
 *
 *     O = softmax(scale * Q K^T + M) V     M = 0 where the pattern keeps (i, j), -inf elsewhere
 *
 * The patterns (sliding window, causal window, dilated, strided, fixed, global tokens, BigBird and
 * their unions) are defined once, in device/patterns.cuh, and given with --pattern SPEC. The
 * harness builds the pattern's block mask (64 x 64 tiles, FlexAttention's BlockMask) and its
 * token-level CSR form, and checks every kernel against the CPU reference under the same pattern.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 dense_fa2     example 03's fa2_mma unchanged: the dense (or dense causal) baseline that
 *                   every speedup is measured against; it ignores the pattern.
 *                   ./build/sim/examples/04_sparse_patterns/sparse_patterns_sim --kernel 1
 *   2 block_sparse  fa2_mma driven by the block mask: a query tile visits only its listed key
 *                   tiles; full tiles run with no per-element mask, partial tiles apply the
 *                   pattern's predicate. Serves every pattern and any block mask.
 *                   ./build/sim/examples/04_sparse_patterns/sparse_patterns_sim --kernel 2
 *                   --pattern bigbird:b=64,r=2,seed=1
 *   3 window        the same loop for window / causal_window patterns, its key tiles computed
 *                   from the band (no metadata read): Longformer's and Mistral's case.
 *                   ./build/sim/examples/04_sparse_patterns/sparse_patterns_sim --kernel 3
 *                   --pattern causal_window:w=256
 *   4 gather        token gather over the CSR form: one warp per query row visits exactly its
 *                   keys (CUDA cores), for patterns whose kept entries are scattered in tiles.
 *                   ./build/sim/examples/04_sparse_patterns/sparse_patterns_sim --kernel 4
 *                   --pattern dilated:w=16,d=8
 * (On a GPU build use build/gpu/.../sparse_patterns_gpu.) Versions 2-4: fp16/bf16 inputs, fp32
 * accumulation, any L, Lq != Lk, causal (bottom-right aligned), variable-length batches
 * (--seqlens), log-sum-exp written, fully masked rows output 0 (LSE -inf).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>
#include <stdio.h>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "attn/problem.h"
#include "attn/sparse/block_mask.h"
#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_example.h"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"
#include "sparse_fa2.cuh"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c) with the pattern's
 * predicate as its mask (attn_pattern_mask), in double precision; fp16/bf16 are judged by
 * FlashAttention's 2x rule against attn_reference_lowp under the same mask (attn/check.h). The
 * dense baseline is checked against the reference without the pattern. */

/* ================================== kernels =============================================== */

/* Versions 2 and 3 are one kernel on two tile sources: sparse_fa2.cuh (example 06 specialises
 * it on its own pattern). Version 4 follows. */

/* --- version 4: gather -----------------------------------------------------------------------
 *
 *   grid  = (ceil(Lq/4), min(B*H, 65535)); block = 128 threads = 4 warps, warp w <-> query row
 *   i = 4*blockIdx.x + w. No tiles, no tensor cores: the warp walks the row's CSR key list in
 *   chunks of 32, one key per lane.
 *
 *   keys of row i (CSR): col_idx[row_ptr[r] ..]     q_s[w][0..D) the query row (fp32, x scale)
 *   chunk c:  lane l <-> key col[32c + l]
 *     s_l   = q . K[key_l]            (lane l reads the whole K row of its key)
 *     m, l  online softmax over the 32 lanes (5 shuffles each for max and sum)
 *     acc[d] += sum over lanes e of p_e * V[key_e][d]   lane l owns d = l, l + 32, l + 64, ...
 *             (p_e and key_e broadcast by shuffle; the 32 lanes read one V row together)
 *
 * It does 4 * nnz * D flops with no waste, against the block kernel's 4 * 64 * 64 * D per listed
 * tile; it wins when the listed tiles are mostly empty (README: when token gather beats the
 * block kernel). */
#define GATHER_WARPS 4
#define GATHER_MAX_D 128

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

template <typename T>
__global__ void gather_kernel(const T *__restrict__ q,             // [B,H,Lq,D] (varlen [tq,H,D])
                              const T *__restrict__ k,             // [B,H,Lk,D] (varlen [tk,H,D])
                              const T *__restrict__ v,             // [B,H,Lk,D] (varlen [tk,H,D])
                              T *__restrict__ o,                   // [B,H,Lq,D] (varlen [tq,H,D])
                              float *__restrict__ lse,             // [B,H,Lq] (varlen [H,tq])
                              const int *cu_q,                     // [B+1] or NULL
                              const int *cu_k,                     // [B+1] or NULL
                              const int64_t *__restrict__ row_ptr, // [B*Lq + 1] CSR
                              const int32_t *__restrict__ col_idx, // [nnz] keys, ascending
                              int B, int H, int Lq, int Lk, int D, float scale) {
    __shared__ float q_s[GATHER_WARPS][GATHER_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int i = blockIdx.x * GATHER_WARPS + warp;
    float *qw = q_s[warp];

    for (int bh = blockIdx.y; bh < B * H; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, B * H, H, D, Lq, Lk, cu_q, cu_k);
        if (i >= sh.Lq) /* the whole warp: past this sequence's end */
            continue;
        const T *kb = k + sh.k, *vb = v + sh.k;
        for (int d = lane; d < D; d += 32)
            qw[d] = to_float(q[sh.q + i * sh.ld + d]) * scale * CUDART_L2E_F;
        __syncwarp(); // the query row is complete before every lane reads all of it

        const int64_t r = (int64_t)(bh / H) * Lq + i, end = row_ptr[r + 1];
        float m = -INFINITY, l = 0.0f, acc[GATHER_MAX_D / 32] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t c0 = row_ptr[r]; c0 < end; c0 += 32) {
            const bool has = c0 + lane < end;
            const int key = has ? col_idx[c0 + lane] : 0;
            float s = -INFINITY;
            if (has) {
                const T *krow = kb + key * sh.ld;
                s = 0.0f;
                for (int d = 0; d < D; ++d)
                    s += qw[d] * to_float(krow[d]);
            }
            const float m_new = fmaxf(m, attn_warp_max(s));
            const float p = exp2f(s - m_new); /* m_new is finite: the chunk has >= 1 key */
            const float alpha = exp2f(m - m_new);
            l = alpha * l + attn_warp_sum(p);
            m = m_new;
            const int n = end - c0 < 32 ? (int)(end - c0) : 32;
            for (int c = 0; c < GATHER_MAX_D / 32; ++c)
                acc[c] *= alpha;
            for (int e = 0; e < n; ++e) {
                const float pe = __shfl_sync(0xffffffffu, p, e);
                const T *vrow = vb + __shfl_sync(0xffffffffu, key, e) * sh.ld;
                for (int c = 0; c < GATHER_MAX_D / 32; ++c)
                    if (lane + 32 * c < D)
                        acc[c] += pe * to_float(vrow[lane + 32 * c]);
            }
        }
        const float inv_l = l > 0.0f ? 1.0f / l : 0.0f; /* no key: output 0, LSE -inf */
        for (int c = 0; c < GATHER_MAX_D / 32; ++c)
            if (lane + 32 * c < D)
                o[sh.q + i * sh.ld + lane + 32 * c] = from_float<T>(acc[c] * inv_l);
        if (lse != NULL && lane == 0)
            lse[sh.lse + i] = l > 0.0f ? m * CUDART_LN2_F + logf(l) : -INFINITY;
        __syncwarp(); // every lane done reading q_s[warp] before the next head overwrites it
    }
}

/* ================================= launchers ============================================== */

/* Version 1 is example 03's version 2, by its symbol (examples/03_flash_attention_v2/flash2_fwd.cu;
 * this example's library links example 03's). */
extern "C" const attn_kernel flash2_fa2_mma;

/* Versions 2 and 3: sparse_fa2_shape and launch_sparse, sparse_fa2.cuh. */

/* Version 4: GATHER_WARPS warps, one query row each; no dynamic shared memory. */
static attn_launch_shape gather_shape(const attn_problem *) {
    return {"gather_kernel", GATHER_WARPS * 32, 0};
}

/* Version 2 reads b->sparse->block_mask, which the harness builds in 64 x 64 tiles
 * (ATTN_SPARSE_TILE); a user-built mask must use the same tiles. With b->sparse->pattern NULL (a
 * user's layout) it computes every in-range entry of every listed tile, full or partial, with
 * causality on top (README: "Your own block layout"; the reference's mask is
 * attn_block_mask_as_mask). */
static void launch_block_sparse(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    attn_launch_block_sparse<attn_no_own_kinds>(p, b, stream);
}

/* Version 3: the band [lo, hi] of delta = j - a is the union of the pattern's window parts
 * (each contains delta = 0, so the union is one interval); an empty causal_window (W = 0) adds
 * nothing. */
static void launch_window(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    band_tiles::params tp = {1, 0};
    const attn_pattern *pattern = b->sparse->pattern;
    for (int n = 0; n < pattern->n_parts; ++n) {
        const attn_pattern_part *pt = &pattern->part[n];
        const bool causal_part = pt->kind == ATTN_PATTERN_CAUSAL_WINDOW;
        const int lo = causal_part ? 1 - pt->w : -pt->w, hi = causal_part ? 0 : pt->w;
        if (lo > hi)
            continue;
        tp.lo = tp.lo > tp.hi ? lo : min(tp.lo, lo);
        tp.hi = max(tp.hi, hi);
    }
    launch_sparse<band_tiles>(p, b, tp, stream);
}

static void launch_gather(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    dim3 grid((p->Lq + GATHER_WARPS - 1) / GATHER_WARPS, attn_head_blocks(p->B * p->H));
    const int threads = gather_shape(p).threads;
    if (p->dtype == ATTN_BF16)
        gather_kernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(
            (const __nv_bfloat16 *)b->q, (const __nv_bfloat16 *)b->k, (const __nv_bfloat16 *)b->v,
            (__nv_bfloat16 *)b->o, b->lse, b->cu_seqlens_q, b->cu_seqlens_k,
            b->sparse->csr->row_ptr, b->sparse->csr->col_idx, p->B, p->H, p->Lq, p->Lk, p->D,
            p->scale);
    else
        gather_kernel<__half><<<grid, threads, 0, stream>>>(
            (const __half *)b->q, (const __half *)b->k, (const __half *)b->v, (__half *)b->o,
            b->lse, b->cu_seqlens_q, b->cu_seqlens_k, b->sparse->csr->row_ptr,
            b->sparse->csr->col_idx, p->B, p->H, p->Lq, p->Lk, p->D, p->scale);
}

/* ================================= registry =============================================== */

static const attn_requirements gather_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = GATHER_MAX_D, .causal = true, .varlen = true};

#define ALL_PATTERNS ATTN_SERVES_ALL_PATTERNS
#define WINDOWS                                                                                    \
    (ATTN_SERVES_PATTERN(ATTN_PATTERN_WINDOW) | ATTN_SERVES_PATTERN(ATTN_PATTERN_CAUSAL_WINDOW))

/* Versions 1-3 run fa2_mma's body, so they take its requirements (fp16/bf16, D = 64 or 128).
 * serves (attn/problem.h): what each runs besides its requirements. */
static const attn_kernel sparse_kernels[] = {
    {ATTN_VERSION(1, "dense_fa2",
                  "baseline: example 03's fa2_mma, dense (causal with --causal), no pattern"),
     .launch = flash2_fa2_mma.launch, .req = flash2_fa2_mma.req, .serves = ATTN_SERVES_BASELINE,
     .launch_shape = flash2_fa2_mma.launch_shape},
    {ATTN_VERSION(
         2, "block_sparse",
         "fa2_mma over the block mask's key tiles: full tiles unmasked, partial tiles predicated"),
     .launch = launch_block_sparse, .req = flash2_fa2_mma.req,
     .serves = ALL_PATTERNS | ATTN_SERVES_DENSE, .launch_shape = sparse_fa2_shape},
    {ATTN_VERSION(3, "window",
                  "fa2_mma over the key tiles of a window band, computed from w (no metadata)"),
     .launch = launch_window, .req = flash2_fa2_mma.req, .serves = WINDOWS,
     .launch_shape = sparse_fa2_shape},
    {ATTN_VERSION(4, "gather",
                  "one warp per query row over its CSR key list (CUDA cores, no tiles)"),
     .launch = launch_gather, .req = gather_requirements,
     .serves = ALL_PATTERNS | ATTN_SERVES_DENSE | ATTN_SERVES_CSR, .launch_shape = gather_shape},
};

/* the default pattern: Longformer's local window, density ~12% at L=1024 */
static const attn_sparse_config sparse_config = {"window:w=64", NULL};

extern "C" const attn_example sparse_patterns_example = {
    .name = "04_sparse_patterns",
    .summary =
        "sparse attention patterns: block-sparse, sliding-window and token-gather kernels vs dense",
    ATTN_KERNELS(sparse_kernels),
    /* B, H, L, D; on the simulator: a few seconds for the four kernels */
    .defaults = {.gpu = {1, 16, 16384, 128}, .sim = {1, 1, 1024, 64}},
    .module = &attn_sparse_module,
    .module_config = &sparse_config,
};
