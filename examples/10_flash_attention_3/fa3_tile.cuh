// fa3_tile.cuh — what every version of example 10 (flash3_fwd.cu: v1-v3, flash3_fp8.cu: v4)
// shares: the tile sizes, the element type of Q, K, V and O, a consumer warpgroup's rows (O, the
// running max and sum), the online softmax of one S tile in wgmma's accumulator layout, the
// rescale of O, the store of O / l and the log-sum-exp, and the K/V tiles a block of rows needs.
#ifndef ATTN_FA3_TILE_CUH
#define ATTN_FA3_TILE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>

#include <type_traits>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "device/dispatch.cuh"
#include "device/sm90.cuh"

namespace {

constexpr int BM = 64;  // query rows per consumer warpgroup (wgmma's M)
constexpr int BN = 128; // keys per K/V tile (the N of S = Q K^T)

// The element type of Q, K, V and O: storage, and packing two floats into a register (example
// 03's traits). v1-v3's wgmma calls on it are in flash3_fwd.cu (wgmma16).
template <bool BF16> struct elem {
    using T = std::conditional_t<BF16, __nv_bfloat16, __half>;
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        return attn_mma_traits<T>::pack(lo, hi);
    }
};

// f(bf16, d) for dtype t and head dimension D: bf16 a std::bool_constant (not bf16: f16), d
// device/dispatch.cuh's tag of D (64 or 128). The {f16, bf16} x {64, 128} grid of this example's
// launchers, templated on <bool BF16, int D>, written once (decltype(bf16)::value and
// decltype(d)::value are the template arguments; flash3_fwd.cu's launch_version).
template <typename F> static inline void fa3_dispatch(attn_dtype t, int D, F &&f) {
    attn_dispatch_head_dim(D, [&](auto d) {
        if (t == ATTN_BF16)
            f(std::true_type{}, d);
        else
            f(std::false_type{}, d);
    });
}

// One consumer warpgroup's state: O (64 x D, D / 2 floats per thread), and the running max
// (log2 units of the scaled scores) and sum of its thread's two rows.
template <int D> struct rows_state {
    float o[D / 2];
    float m[2], l[2];
};

// The online softmax of one S tile (keys n0..n0+BN-1) for this thread's rows r0 and r0 + 8, in
// place: scale and mask, the new running max, P = exp2(S - max) (in s), the sum, and the factor
// alpha that rescales what O holds. Thread t holds S[i] at row 16 (t / 32) + g + 8 ((i / 2) % 2),
// column 8 (i / 4) + 2 q + i % 2 (g = lane / 4, q = lane % 4); a row's values are spread over
// the four threads of a quad. v1-v3 pack P into 16-bit A fragments (softmax_tile,
// flash3_fwd.cu), v4 into 8-bit ones (flash3_fp8.cu).
template <int D>
__device__ __forceinline__ void online_softmax(float (&s)[BN / 2], rows_state<D> &st,
                                               float (&alpha)[2], int r0, int n0, int Lk, int shift,
                                               bool causal, float scale_log2) {
    int lane = threadIdx.x % 32, q = lane % 4;
    float mx[2] = {-INFINITY, -INFINITY};
    for (int i = 0; i < BN / 2; ++i) {
        int h = (i / 2) % 2, col = n0 + 8 * (i / 4) + 2 * q + i % 2, row = r0 + 8 * h;
        bool ok = col < Lk && (!causal || col <= row + shift);
        s[i] = ok ? s[i] * scale_log2 : -INFINITY;
        mx[h] = fmaxf(mx[h], s[i]);
    }
    float base[2], sum[2] = {0.0f, 0.0f};
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        float m_new = fmaxf(st.m[h], mx[h]);
        // A row with no key so far keeps max -inf: subtract 0 instead (its P is 0).
        base[h] = m_new == -INFINITY ? 0.0f : m_new;
        alpha[h] = exp2f(st.m[h] - base[h]);
        st.m[h] = m_new;
    }
    for (int i = 0; i < BN / 2; ++i) {
        int h = (i / 2) % 2;
        s[i] = exp2f(s[i] - base[h]);
        sum[h] += s[i];
    }
    for (int h = 0; h < 2; ++h)
        st.l[h] = st.l[h] * alpha[h] + sum[h];
}

template <int D> __device__ __forceinline__ void rescale_o(rows_state<D> &st, const float (&a)[2]) {
    for (int i = 0; i < D / 2; ++i)
        st.o[i] *= a[(i / 2) % 2];
}

// O / l to the output (rows below Lq) and the log-sum-exp (natural log) of the scaled scores.
template <bool BF16, int D>
__device__ __forceinline__ void store_rows(rows_state<D> &st, typename elem<BF16>::T *o, float *lse,
                                           int bh, int r0, int Lq) {
    int lane = threadIdx.x % 32, q = lane % 4;
    for (int h = 0; h < 2; ++h) {
        st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
        st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
    }
    for (int h = 0; h < 2; ++h) {
        int row = r0 + 8 * h;
        if (row >= Lq)
            continue;
        float inv = st.l[h] > 0.0f ? 1.0f / st.l[h] : 0.0f;
        uint32_t *dst = reinterpret_cast<uint32_t *>(o + ((int64_t)bh * Lq + row) * D);
        for (int i = 2 * h; i < D / 2; i += 4) // registers i, i + 1: columns 8 (i / 4) + 2q, +1
            dst[(8 * (i / 4) + 2 * q) / 2] = elem<BF16>::pack(st.o[i] * inv, st.o[i + 1] * inv);
        if (q == 0 && lse)
            lse[(int64_t)bh * Lq + row] =
                st.l[h] > 0.0f ? (st.m[h] + log2f(st.l[h])) * CUDART_LN2_F : -INFINITY;
    }
}

// The K/V tiles a block of query rows m0.. (rows of them) needs: all of them, or under the
// causal mask (bottom-right aligned: query i sees keys j <= i + Lk - Lq) those up to its last
// row's last key.
__device__ __forceinline__ int tiles_for(int m0, int rows, int Lq, int Lk, bool causal) {
    int end = Lk;
    if (causal) {
        int last = min(m0 + rows, Lq) - 1 + (Lk - Lq) + 1;
        end = max(0, min(Lk, last));
    }
    return (end + BN - 1) / BN;
}

} // namespace

#endif // ATTN_FA3_TILE_CUH
