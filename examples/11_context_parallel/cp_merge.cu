/* cp_merge.cu — example 11's one kernel of its own: the merge of a ring step's partial result
 * into the running one by their log-sum-exp (device/lse_merge.cuh, the combine example 09's
 * split-KV uses too, here with two splits, in place). The attention of each step is example 03's
 * FlashAttention-2 kernel, called through its registry (cp_ring.c); the backward's is example
 * 07's, whose contributions cp_add sums.
 *
 *   grid (rows); block 128 threads; part: O [2][rows][D] fp32, then LSE [2][rows]:
 *   split 0 the running result, split 1 the step's; the merged result replaces split 0. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cp_ring.h"
#include "device/kernel_common.cuh"
#include "device/lse_merge.cuh"

#define CP_MERGE_THREADS 128

__global__ void cp_merge_kernel(float *o, float *lse, int64_t rows, int D) {
    __shared__ float w_s[2];
    __shared__ float red[CP_MERGE_THREADS / 32];
    const int64_t row = blockIdx.x;
    float *o_row = o + row * D, *lse_row = lse + row;
    attn_lse_combine_row<CP_MERGE_THREADS>(
        o_row, rows * D, lse_row, rows, 2, D, w_s, red,
        [&](int d, float value) { o_row[d] = value; }, [&](float value) { *lse_row = value; });
}

extern "C" int cp_merge(float *o, float *lse, int64_t rows, int D, cudaStream_t stream) {
    if (rows == 0)
        return 0;
    cp_merge_kernel<<<(unsigned)rows, CP_MERGE_THREADS, 0, stream>>>(o, lse, rows, D);
    return cudaGetLastError() != cudaSuccess;
}

__global__ void cp_add_kernel(float *acc, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        acc[i] += x[i];
}

extern "C" int cp_add(float *acc, const float *x, size_t n, cudaStream_t stream) {
    if (n == 0)
        return 0;
    const size_t want = (n + 255) / 256;
    cp_add_kernel<<<(unsigned)(want < 1024 ? want : 1024), 256, 0, stream>>>(acc, x, (int64_t)n);
    return cudaGetLastError() != cudaSuccess;
}
