/* cp_merge.cu — example 11's kernels of its own: the merge of a ring step's partial result
 * into the running one by their log-sum-exp (device/lse_merge.cuh, the combine example 09's
 * split-KV uses too, here with two splits, in place). The attention of each step is example 03's
 * FlashAttention-2 kernel, called through its registry (cp_ring.c); the backward's is example
 * 07's, whose contributions cp_add sums.
 *
 *   grid (rows); block 128 threads; part: O [2][rows][D] fp32, then LSE [2][rows]:
 *   split 0 the running result, split 1 the step's; the merged result replaces split 0.
 * and the pair that a sliding window's edge cuts (cp_window_attend): one thread per query row,
 * its keys a contiguous range of the key chunk, an online softmax over them. */
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

/* One query row of a pair cut by the window: keys max(ks, i - W + 1) .. min(ks + klen - 1, i)
 * (global positions), accumulated in the row's own output; a row with none: O = 0, LSE = -inf. */
__global__ void cp_window_kernel(const float *q, const float *k, const float *v, float *o,
                                 float *lse, int64_t rows, int qlen, int qs, int klen, int ks,
                                 int W, int D, float scale) {
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    const int64_t bh = row / qlen;
    const int pos = qs + (int)(row % qlen);
    const int lo = max(ks, pos - W + 1), hi = min(ks + klen - 1, pos);
    const float *q_row = q + row * D;
    const float *k_seq = k + bh * klen * D, *v_seq = v + bh * klen * D;
    float *o_row = o + row * D;
    for (int d = 0; d < D; ++d)
        o_row[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j = lo; j <= hi; ++j) {
        const float *k_row = k_seq + (int64_t)(j - ks) * D, *v_row = v_seq + (int64_t)(j - ks) * D;
        float s = 0.0f;
        for (int d = 0; d < D; ++d)
            s += q_row[d] * k_row[d];
        s *= scale;
        const float m_new = fmaxf(m, s), c = expf(m - m_new), e = expf(s - m_new);
        l = l * c + e;
        for (int d = 0; d < D; ++d)
            o_row[d] = o_row[d] * c + e * v_row[d];
        m = m_new;
    }
    if (l > 0.0f)
        for (int d = 0; d < D; ++d)
            o_row[d] /= l;
    lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

extern "C" int cp_window_attend(const float *q, const float *k, const float *v, float *o,
                                float *lse, int BH, int qs, int qlen, int ks, int klen, int W,
                                int D, float scale, cudaStream_t stream) {
    const int64_t rows = (int64_t)BH * qlen;
    if (rows == 0)
        return 0;
    cp_window_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(
        q, k, v, o, lse, rows, qlen, qs, klen, ks, W, D, scale);
    return cudaGetLastError() != cudaSuccess;
}

/* The backward of a pair cut by the window, with the forward's final O and LSE (so that
 * P = exp(s - LSE) is the global softmax and delta = rowsum(dO O) the global one; example 07's
 * README derives the formulas): dS = P (dO . v - delta). Query rows add dQ += scale dS k; key
 * rows add dK += scale dS q and dV += P dO, each key row over the queries whose window holds it,
 * max(qs, j) .. min(qs + qlen - 1, j + W - 1). One thread per row, no atomics. */
__device__ static float cp_dot(const float *a, const float *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; ++d)
        s += a[d] * b[d];
    return s;
}

__global__ void cp_window_dq_kernel(cp_window_bwd_args a, int64_t rows) {
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    const int D = a.D;
    const int64_t bh = row / a.qlen;
    const int pos = a.qs + (int)(row % a.qlen);
    const int lo = max(a.ks, pos - a.W + 1), hi = min(a.ks + a.klen - 1, pos);
    const float *q = a.q + row * D, *dout = a.dout + row * D;
    const float delta = cp_dot(dout, a.o + row * D, D), lse = a.lse[row];
    float *dq = a.dq + row * D;
    for (int j = lo; j <= hi; ++j) {
        const int64_t kr = (bh * a.klen + (j - a.ks)) * D;
        const float p = expf(a.scale * cp_dot(q, a.k + kr, D) - lse);
        const float ds = p * (cp_dot(dout, a.v + kr, D) - delta);
        for (int d = 0; d < D; ++d)
            dq[d] += a.scale * ds * a.k[kr + d];
    }
}

__global__ void cp_window_dkv_kernel(cp_window_bwd_args a, int64_t rows) {
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    const int D = a.D;
    const int64_t bh = row / a.klen;
    const int key = a.ks + (int)(row % a.klen);
    const int lo = max(a.qs, key), hi = min(a.qs + a.qlen - 1, key + a.W - 1);
    const float *k = a.k + row * D, *v = a.v + row * D;
    float *dk = a.dk + row * D, *dv = a.dv + row * D;
    for (int i = lo; i <= hi; ++i) {
        const int64_t qr = bh * a.qlen + (i - a.qs);
        const float *q = a.q + qr * D, *dout = a.dout + qr * D;
        const float p = expf(a.scale * cp_dot(q, k, D) - a.lse[qr]);
        const float ds = p * (cp_dot(dout, v, D) - cp_dot(dout, a.o + qr * D, D));
        for (int d = 0; d < D; ++d) {
            dv[d] += p * dout[d];
            dk[d] += a.scale * ds * q[d];
        }
    }
}

extern "C" int cp_window_attend_bwd(const cp_window_bwd_args *a, cudaStream_t stream) {
    const int64_t qrows = (int64_t)a->BH * a->qlen, krows = (int64_t)a->BH * a->klen;
    if (qrows == 0 || krows == 0)
        return 0;
    cp_window_dq_kernel<<<(unsigned)((qrows + 127) / 128), 128, 0, stream>>>(*a, qrows);
    cp_window_dkv_kernel<<<(unsigned)((krows + 127) / 128), 128, 0, stream>>>(*a, krows);
    return cudaGetLastError() != cudaSuccess;
}
