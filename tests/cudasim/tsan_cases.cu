// tsan_cases.cu — a missing __syncthreads and a missing __syncwarp, which ThreadSanitizer must
// report as data races at the kernel's line, and the same kernels with their barriers (plus
// block-to-block reuse of shared memory, atomics and shuffles), which must run without reports.
// Built in the TSan preset only; argv[1] picks the case.
#include <cstring>

#include "sim_test.h"

constexpr int n = 64;

__global__ void missing_syncthreads(float *out) {
    __shared__ float s[n];
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    out[threadIdx.x] = s[(threadIdx.x + 1) % n]; // @missing_syncthreads
}

__global__ void missing_syncwarp(int *out) {
    __shared__ int s[32];
    s[threadIdx.x] = static_cast<int>(threadIdx.x) * 2;
    out[threadIdx.x] = s[threadIdx.x ^ 1]; // @missing_syncwarp
}

__global__ void with_barriers(float *out, int *counter) {
    __shared__ float s[n];
    extern __shared__ int w[];
    unsigned t = threadIdx.x, lane = t % 32, base = t - lane;
    for (int round = 0; round < 3; ++round) {
        s[t] = static_cast<float>(t + round);
        w[t] = static_cast<int>(t) * 2 + round;
        __syncwarp();
        int mate = w[base + (lane ^ 1)];
        __syncthreads();
        float v = s[(t + 1) % n] + static_cast<float>(mate);
        v += __shfl_down_sync(0xffffffffu, v, 1);
        __syncthreads();
        out[blockIdx.x * n + t] = v;
    }
    if (t == 0)
        atomicAdd(counter, 1);
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    const int blocks = 40;
    float *f = nullptr;
    int *i = nullptr;
    CHECK_CUDA(cudaMalloc(&f, blocks * n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&i, blocks * n * sizeof(int)));
    CHECK_CUDA(cudaMemset(i, 0, blocks * n * sizeof(int)));
    if (!std::strcmp(argv[1], "missing_syncthreads")) {
        missing_syncthreads<<<1, n>>>(f);
    } else if (!std::strcmp(argv[1], "missing_syncwarp")) {
        missing_syncwarp<<<1, 32>>>(i);
    } else if (!std::strcmp(argv[1], "clean")) {
        for (int launch = 0; launch < 3; ++launch)
            with_barriers<<<blocks, n, n * sizeof(int)>>>(f, i);
        CHECK_CUDA(cudaGetLastError());
        int count = 0;
        CHECK_CUDA(cudaMemcpy(&count, i, sizeof count, cudaMemcpyDeviceToHost));
        CHECK(count == 3 * blocks);
    } else {
        return 2;
    }
    CHECK_CUDA(cudaFree(f));
    CHECK_CUDA(cudaFree(i));
    return sim_test_result(argv[1]);
}
