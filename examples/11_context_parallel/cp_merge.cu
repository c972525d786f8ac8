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

/* Row `row` of one side of a pair cut by the window ([BH, len] rows at positions start ..):
 * returns its (sequence, head) and sets the run of the other side's positions (other ..
 * other + other_len - 1) that the window pairs it with: a query row i meets the keys
 * max(other, i - W + 1) .. min(other_end - 1, i), a key row j the queries
 * max(other, j) .. min(other_end - 1, j + W - 1). */
__device__ static int64_t cp_window_run(int64_t row, int len, int start, int other, int other_len,
                                        int W, bool query, int *lo, int *hi) {
    const int pos = start + (int)(row % len);
    *lo = max(other, query ? pos - W + 1 : pos);
    *hi = min(other + other_len - 1, query ? pos : pos + W - 1);
    return row / len;
}

/* One query row of a pair cut by the window: keys max(ks, i - W + 1) .. min(ks + klen - 1, i)
 * (global positions), accumulated in the row's own output; a row with none: O = 0, LSE = -inf. */
__global__ void cp_window_kernel(const float *q, const float *k, const float *v, float *o,
                                 float *lse, int64_t rows, int qlen, int qs, int klen, int ks,
                                 int W, int D, float scale) {
    const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    int lo, hi;
    const int64_t bh = cp_window_run(row, qlen, qs, ks, klen, W, true, &lo, &hi);
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
 * max(qs, j) .. min(qs + qlen - 1, j + W - 1). One thread per row, no atomics (delta is
 * recomputed per entry on the key side). */
__device__ static float cp_dot(const float *a, const float *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; ++d)
        s += a[d] * b[d];
    return s;
}

/* Threads 0 .. qrows - 1: a query row's dQ; the next krows: a key row's dK and dV. */
__global__ void cp_window_bwd_kernel(cp_window_bwd_args a, int64_t qrows, int64_t krows) {
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const bool query = t < qrows;
    const int64_t row = query ? t : t - qrows;
    if (!query && row >= krows)
        return;
    const int D = a.D;
    int lo, hi;
    const int64_t bh = query ? cp_window_run(row, a.qlen, a.qs, a.ks, a.klen, a.W, true, &lo, &hi)
                             : cp_window_run(row, a.klen, a.ks, a.qs, a.qlen, a.W, false, &lo, &hi);
    for (int x = lo; x <= hi; ++x) {
        /* the entry (query qr, key kr): this row and the x-th of its run */
        const int64_t qr = query ? row : bh * a.qlen + (x - a.qs);
        const int64_t kr = query ? bh * a.klen + (x - a.ks) : row;
        const float *q = a.q + qr * D, *dout = a.dout + qr * D;
        const float *k = a.k + kr * D, *v = a.v + kr * D;
        const float p = expf(a.scale * cp_dot(q, k, D) - a.lse[qr]);
        const float ds = p * (cp_dot(dout, v, D) - cp_dot(dout, a.o + qr * D, D));
        for (int d = 0; d < D; ++d) {
            if (query) {
                a.dq[qr * D + d] += a.scale * ds * k[d];
            } else {
                a.dv[kr * D + d] += p * dout[d];
                a.dk[kr * D + d] += a.scale * ds * q[d];
            }
        }
    }
}

extern "C" int cp_window_attend_bwd(const cp_window_bwd_args *a, cudaStream_t stream) {
    const int64_t qrows = (int64_t)a->BH * a->qlen, krows = (int64_t)a->BH * a->klen;
    if (qrows == 0 || krows == 0)
        return 0;
    cp_window_bwd_kernel<<<(unsigned)((qrows + krows + 127) / 128), 128, 0, stream>>>(*a, qrows,
                                                                                      krows);
    return cudaGetLastError() != cudaSuccess;
}
