// asan_cases.cu — planted out-of-bounds reads that AddressSanitizer must report at the kernel's
// line (global memory, a static __shared__ array, dynamic shared memory), and a clean kernel that
// must run without reports. Built in the ASan preset only; argv[1] picks the case.
#include <cstring>

#include "sim_test.h"

constexpr int n = 32;

__global__ void oob_global(const float *in, float *out) {
    out[threadIdx.x] = in[threadIdx.x + 1]; // @oob_global
}

__global__ void oob_static_shared(float *out) {
    __shared__ float s[n];
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    const float *row = s; // through a pointer, as in real code (UBSan's index check is blind)
    out[threadIdx.x] = row[threadIdx.x + 1]; // @oob_static_shared
}

__global__ void oob_dynamic_shared(float *out) {
    extern __shared__ float d[];
    d[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = d[threadIdx.x + 1]; // @oob_dynamic_shared
}

// The same accesses kept in bounds, over many blocks that reuse shared memory and stacks.
__global__ void in_bounds(const float *in, float *out) {
    __shared__ float s[n];
    extern __shared__ float d[];
    unsigned i = blockIdx.x * n + threadIdx.x;
    s[threadIdx.x] = in[i];
    d[threadIdx.x] = 2.0f * in[i];
    __syncthreads();
    unsigned j = (threadIdx.x + 1) % n;
    float v = s[j] + d[j];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    out[i] = v;
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    const int blocks = 50;
    float *in = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&in, n * sizeof(float))); // exactly n floats: in[n] is out of bounds
    CHECK_CUDA(cudaMalloc(&out, blocks * n * sizeof(float)));
    CHECK_CUDA(cudaMemset(in, 0, n * sizeof(float)));
    if (!std::strcmp(argv[1], "global")) {
        oob_global<<<1, n>>>(in, out);
    } else if (!std::strcmp(argv[1], "static_shared")) {
        oob_static_shared<<<1, n>>>(out);
    } else if (!std::strcmp(argv[1], "dynamic_shared")) {
        oob_dynamic_shared<<<1, n, n * sizeof(float)>>>(out);
    } else if (!std::strcmp(argv[1], "clean")) {
        float *big = nullptr;
        CHECK_CUDA(cudaMalloc(&big, blocks * n * sizeof(float)));
        CHECK_CUDA(cudaMemset(big, 0, blocks * n * sizeof(float)));
        in_bounds<<<blocks, n, n * sizeof(float)>>>(big, out);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaFree(big));
    } else {
        return 2;
    }
    CHECK_CUDA(cudaFree(in));
    CHECK_CUDA(cudaFree(out));
    return sim_test_result(argv[1]);
}
