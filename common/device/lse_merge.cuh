/* device/lse_merge.cuh — combining partial attention results by their log-sum-exp: the step that
 * makes attention over a split key set exact. Split s of a query row saw a subset of the keys and
 * left its own normalised output O_s and LSE_s = log sum exp(scores it saw); then
 *       M = max_s LSE_s,   w_s = exp(LSE_s - M),   O = sum_s w_s O_s / sum_s w_s,
 *       LSE = M + log sum_s w_s
 * is the attention over all the keys (a split with no key has LSE_s = -inf: weight 0; a row with
 * no key at all outputs 0, -inf). Example 09 merges its split-KV slices with it (one row per
 * block, S splits); example 11 merges each ring step's result into the running one (S = 2, in
 * place). Include after <cuda_runtime.h> and device/kernel_common.cuh. */
#ifndef ATTN_LSE_MERGE_CUH
#define ATTN_LSE_MERGE_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>

/* One row, by all NT threads of the block (NT a multiple of 32, at most 1024): split s's output is
 * o_part[s * o_stride + d] (d < D) and its LSE lse_part[s * lse_stride]. store_o(d, value) and
 * store_lse(value) receive the result (thread 0 stores the LSE, after every thread has read the
 * partials' LSEs: the result may overwrite split 0 in place). w_s: S floats of shared memory; red:
 * NT / 32. */
template <int NT, typename StoreO, typename StoreLse>
__device__ __forceinline__ void attn_lse_combine_row(const float *o_part, int64_t o_stride,
                                                     const float *lse_part, int64_t lse_stride,
                                                     int S, int D, float *w_s, float *red,
                                                     StoreO store_o, StoreLse store_lse) {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    float mx = -INFINITY;
    for (int s = tid; s < S; s += NT)
        mx = fmaxf(mx, lse_part[(int64_t)s * lse_stride]);
    mx = attn_warp_max(mx);
    if (lane == 0)
        red[warp] = mx;
    __syncthreads(); // every warp's maximum is in red before the threads combine them
    mx = red[0];
    for (int w = 1; w < NT / 32; ++w)
        mx = fmaxf(mx, red[w]);
    for (int s = tid; s < S; s += NT)
        w_s[s] =
            mx == -INFINITY ? 0.0f : exp2f((lse_part[(int64_t)s * lse_stride] - mx) * CUDART_L2E_F);
    __syncthreads(); // every split's weight is in w_s before the threads sum them
    float wsum = 0.0f;
    for (int s = 0; s < S; ++s)
        wsum += w_s[s];
    for (int d = tid; d < D; d += NT) {
        float acc = 0.0f;
        for (int s = 0; s < S; ++s)
            acc += w_s[s] * o_part[(int64_t)s * o_stride + d];
        store_o(d, wsum > 0.0f ? acc / wsum : 0.0f);
    }
    if (tid == 0)
        store_lse(wsum > 0.0f ? mx + logf(wsum) : -INFINITY);
}

#endif /* ATTN_LSE_MERGE_CUH */
