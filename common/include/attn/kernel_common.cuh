/* attn/kernel_common.cuh — the few device and launch helpers that every example's kernels share,
 * kept in one place so that the causal rule and the reductions are written once.
 * Include after <cuda_runtime.h>; valid CUDA C++ for nvcc and for the simulator. */
#ifndef ATTN_KERNEL_COMMON_CUH
#define ATTN_KERNEL_COMMON_CUH

#include <cuda_runtime.h>

/* Number of keys query i sees: all Lk, or under bottom-right causal alignment (attn/problem.h)
 * the keys j <= i + Lk - Lq, clamped to [0, Lk]. Keys are visible as a prefix, so "key j is
 * visible" is j < attn_visible_keys(i, ...), and a tile of queries [q0, q1) needs the keys below
 * attn_visible_keys(q1 - 1, ...) (its last row sees the most). */
__device__ __forceinline__ int attn_visible_keys(int i, int Lq, int Lk, bool causal) {
    if (!causal)
        return Lk;
    int n = i + Lk - Lq + 1;
    return n < 0 ? 0 : (n > Lk ? Lk : n);
}

/* Max and sum over the 32 lanes of a full warp: a butterfly of __shfl_xor_sync, 5 steps, after
 * which every lane holds the result. All 32 lanes must call it. */
__device__ __forceinline__ float attn_warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}

__device__ __forceinline__ float attn_warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

/* Grid extent for the B*H heads: gridDim.y and gridDim.z are limited to 65535, so kernels put
 * min(B*H, 65535) blocks there and stride over the remaining heads. */
static inline unsigned attn_head_blocks(int BH) { return (unsigned)(BH < 65535 ? BH : 65535); }

#endif /* ATTN_KERNEL_COMMON_CUH */
