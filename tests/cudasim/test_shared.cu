// test_shared.cu — static __shared__ arrays (per block, reused across blocks), dynamic shared
// memory (NaN-filled before each block, aliasing extern arrays, alignment, opt-in above 48 KiB).
#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <vector>

#include "sim_test.h"

constexpr int tile = 16;

// Classic tiled transpose: a 2D static shared tile with padding.
__global__ void transpose(const float *in, float *out, int n) {
    __shared__ float t[tile][tile + 1];
    int x = blockIdx.x * tile + threadIdx.x, y = blockIdx.y * tile + threadIdx.y;
    if (x < n && y < n)
        t[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * tile + threadIdx.x;
    y = blockIdx.x * tile + threadIdx.y;
    if (x < n && y < n)
        out[y * n + x] = t[threadIdx.x][threadIdx.y];
}

// Reads dynamic shared memory before anything writes it: the simulator's fill shows.
__global__ void read_uninitialised(float *f, int *i, unsigned short *h) {
    extern __shared__ float sf[];
    extern __shared__ int si[];
    extern __shared__ __half sh[];
    f[threadIdx.x] = sf[threadIdx.x];
    i[threadIdx.x] = si[threadIdx.x];
    h[threadIdx.x] = __half_as_ushort(sh[threadIdx.x]);
    __syncthreads();
    sf[threadIdx.x] = 1.0f; // dirty it: the next block must see the fill again
}

// Two extern arrays name the same buffer, which is aligned for vector loads.
__global__ void alias(int *out) {
    extern __shared__ __align__(16) int a[];
    extern __shared__ float4 b[];
    a[threadIdx.x] = static_cast<int>(threadIdx.x) * 3;
    __syncthreads();
    const int *view = reinterpret_cast<const int *>(b);
    if (blockIdx.x == gridDim.x - 1) { // one block reports (blocks run in parallel)
        out[threadIdx.x] = view[threadIdx.x];
        out[blockDim.x + threadIdx.x] = static_cast<int>(reinterpret_cast<uintptr_t>(b) % 16);
    }
}

// Uses every byte of a large opt-in buffer.
__global__ void big_buffer(unsigned *out, unsigned words) {
    extern __shared__ unsigned w[];
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x)
        w[i] = i * 2654435761u;
    __syncthreads();
    unsigned acc = 0;
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x)
        acc ^= w[words - 1 - i];
    if (blockIdx.x == gridDim.x - 1)
        out[threadIdx.x] = acc;
}

int main() {
    const int n = 45; // not a multiple of the tile
    std::vector<float> h(n * n), t(n * n);
    for (int i = 0; i < n * n; ++i)
        h[i] = static_cast<float>(i);
    float *din = nullptr, *dout = nullptr;
    CHECK_CUDA(cudaMalloc(&din, n * n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dout, n * n * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(din, h.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    dim3 grid((n + tile - 1) / tile, (n + tile - 1) / tile);
    transpose<<<grid, dim3(tile, tile)>>>(din, dout, n);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(t.data(), dout, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x)
            bad += t[x * n + y] != h[y * n + x];
    CHECK(bad == 0);

    const int threads = 64;
    float *f = nullptr;
    int *i = nullptr;
    unsigned short *hs = nullptr;
    CHECK_CUDA(cudaMalloc(&f, 3 * threads * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&i, 3 * threads * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&hs, 3 * threads * sizeof(unsigned short)));
    for (int b = 0; b < 3; ++b) {
        read_uninitialised<<<1, threads, threads * sizeof(float)>>>(
            f + b * threads, i + b * threads, hs + b * threads);
        CHECK_CUDA(cudaGetLastError());
    }
    std::vector<float> hf(3 * threads);
    std::vector<int> hi(3 * threads);
    std::vector<unsigned short> hh(3 * threads);
    CHECK_CUDA(cudaMemcpy(hf.data(), f, hf.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hi.data(), i, hi.size() * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hh.data(), hs, hh.size() * 2, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int k = 0; k < 3 * threads; ++k)
        bad += !std::isnan(hf[k]) || hi[k] != -1 || hh[k] != 0xffff;
    CHECK(bad == 0);

    int *ai = nullptr;
    CHECK_CUDA(cudaMalloc(&ai, 2 * threads * sizeof(int)));
    alias<<<4, threads, threads * sizeof(int)>>>(ai);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(hi.data(), ai, 2 * threads * sizeof(int), cudaMemcpyDeviceToHost));
    for (int k = 0; k < threads; ++k)
        CHECK(hi[k] == 3 * k && hi[threads + k] == 0);

    // 100 KiB needs the opt-in, as on a GPU.
    const unsigned bytes = 100 * 1024, words = bytes / 4;
    unsigned *u = nullptr;
    CHECK_CUDA(cudaMalloc(&u, 128 * sizeof(unsigned)));
    big_buffer<<<2, 128, bytes>>>(u, words);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_CUDA(cudaFuncSetAttribute(big_buffer, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
    big_buffer<<<2, 128, bytes>>>(u, words);
    CHECK_CUDA(cudaGetLastError());
    std::vector<unsigned> hu(128);
    CHECK_CUDA(cudaMemcpy(hu.data(), u, 128 * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned t = 0; t < 128; ++t) {
        unsigned want = 0;
        for (unsigned k = t; k < words; k += 128)
            want ^= (words - 1 - k) * 2654435761u;
        CHECK(hu[t] == want);
    }
    sim_test_free(din, dout, f, i, hs, ai, u);
    return sim_test_result("shared");
}
