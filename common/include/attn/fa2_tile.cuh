/* attn/fa2_tile.cuh — device pieces of the FlashAttention-2 tensor-core kernels that more than
 * one example uses (example 04's sparse kernels are example 03's fa2_mma driven by a list of key
 * tiles): the element type's mma and register packing, the cp.async tile copy, and where one
 * (sequence, head) lives in the dense or packed variable-length layout.
 * Include after <cuda_runtime.h>, <cuda_fp16.h>, <cuda_bf16.h> and attn/mma.cuh. */
#ifndef ATTN_FA2_TILE_CUH
#define ATTN_FA2_TILE_CUH

#include <stdint.h>
#include <string.h>

#include "attn/mma.cuh"

/* Padding of every shared-memory row, in elements: 16 bytes, so that the 8 row addresses of one
 * ldmatrix phase fall in 8 different 16-byte bank groups (no bank conflicts). */
#define ATTN_SMEM_PAD 8

/* The element type's mma and packing of two floats into one .b32 register (low half first). */
template <typename T> struct attn_mma_traits;

template <> struct attn_mma_traits<__half> {
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 16
                                               const uint32_t *b) { // [2] B fragment, 16 x 8
        mma_m16n8k16_f16(d, a, b, d);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        uint32_t u;
        memcpy(&u, &h, sizeof u);
        return u;
    }
};

template <> struct attn_mma_traits<__nv_bfloat16> {
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 16
                                               const uint32_t *b) { // [2] B fragment, 16 x 8
        mma_m16n8k16_bf16(d, a, b, d);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        uint32_t u;
        memcpy(&u, &h, sizeof u);
        return u;
    }
};

/* Issues this thread's share of the cp.async copies of NROWS rows (stride elements apart in
 * global memory) into a shared tile whose rows are D + ATTN_SMEM_PAD elements apart; rows at or
 * past `valid` are zero-filled (their source is not read). Each copy is one 16-byte chunk. */
template <typename T, int D, int NROWS>
__device__ __forceinline__ void attn_load_tile_async(T *dst,           // [NROWS][D + PAD] shared
                                                     const T *src,     // [>= valid][stride] global
                                                     int valid,        // rows of src that exist
                                                     int64_t stride) { // elements between rows
    for (int c = threadIdx.x; c < NROWS * (D / 8); c += blockDim.x) {
        int r = c / (D / 8), col = (c % (D / 8)) * 8;
        bool in = r < valid;
        cp_async_16(dst + r * (D + ATTN_SMEM_PAD) + col, in ? src + r * stride + col : src, in);
    }
}

/* One (sequence b, head h) of a problem: where its rows start and how far apart they are.
 *   dense  [B,H,L,D]:    rows of (b, h) are D apart, LSE rows (b*H + h)*Lq + i
 *   varlen [total,H,D]:  rows are H*D apart from row cu[b], LSE h*total_q + cu[b] + i */
struct attn_head_view {
    int64_t q_off, k_off; /* element offset of row 0 of Q/O and of K/V */
    int64_t stride;       /* elements between consecutive rows (D or H*D) */
    int64_t lse_off;      /* index of row 0 in the LSE buffer */
    int seq_q, seq_k;     /* this sequence's lengths */
};

__device__ __forceinline__ attn_head_view attn_head_at(int bh, int H, int Lq, int Lk, int D,
                                                       const int *cu_q, // [B+1] or NULL (dense)
                                                       const int *cu_k, // [B+1] or NULL
                                                       int B) {
    const int b = bh / H, h = bh % H;
    attn_head_view v;
    if (cu_q == NULL) {
        v.q_off = (int64_t)bh * Lq * D;
        v.k_off = (int64_t)bh * Lk * D;
        v.stride = D;
        v.lse_off = (int64_t)bh * Lq;
        v.seq_q = Lq;
        v.seq_k = Lk;
    } else {
        v.q_off = ((int64_t)cu_q[b] * H + h) * D;
        v.k_off = ((int64_t)cu_k[b] * H + h) * D;
        v.stride = (int64_t)H * D;
        v.lse_off = (int64_t)h * cu_q[B] + cu_q[b];
        v.seq_q = cu_q[b + 1] - cu_q[b];
        v.seq_k = cu_k[b + 1] - cu_k[b];
    }
    return v;
}

#endif /* ATTN_FA2_TILE_CUH */
