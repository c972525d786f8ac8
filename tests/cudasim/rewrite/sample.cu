// sample.cu — input of the rewriter test: each construct cudasim_rewrite handles, in the forms
// students write. It is also compiled and run (cudasim.rewrite.sample), so the output must work.
#include <cstdio>

#include "sample_helpers.cuh"

namespace kernels {
__global__ void fill(int *out, int value) { out[threadIdx.x] = twice(value); }
} // namespace kernels

template <int N, typename T> __global__ void scale(T *data, T factor) {
    extern __shared__ __align__(16) unsigned char raw[];
    T *tile = reinterpret_cast<T *>(raw);
    tile[threadIdx.x] = data[threadIdx.x] * factor;
    __syncthreads();
    data[threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x] + N;
}

__global__ void reverse(const float *in, float *out) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

// Static shared arrays: each declarator inside a cudasim::shared_array (the checked build's guard
// after it), the scalar left as it is.
__global__ void pairs(const float *in, float *out) {
    __shared__ __align__(16) float even[32], odd[32];
    __shared__ int count;
    if (threadIdx.x == 0)
        count = static_cast<int>(sizeof even / sizeof even[0]);
    if (threadIdx.x % 2)
        odd[threadIdx.x / 2] = in[threadIdx.x];
    else
        even[threadIdx.x / 2] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = even[threadIdx.x % count] + odd[threadIdx.x % count];
}

int main() {
    const char *text = "k<<<1, 1>>>(x) and extern __shared__ float s[];";
    char quote = '"';
    /* k<<<1, 1>>>(x); extern __shared__ float s[]; */
    // k<<<1, 1>>>(x);
    int *d = nullptr;
    float *in = nullptr, *out = nullptr;
    cudaMalloc(&d, 32 * sizeof(int));
    cudaMalloc(&in, 64 * sizeof(float));
    cudaMalloc(&out, 64 * sizeof(float));

    kernels::fill<<<1, 32>>>(d, 7);
    scale<4, int><<<dim3(1), dim3(32), 32 * sizeof(int)>>>(d, 3);
    int h[32];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int bad = h[0] != 7 * 2 * 3 + 4;

    (kernels::fill)<<<1, 32>>>(d, 1);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bad += h[31] != 2;

    // A launch inside a function-like macro: the kernel's name is the macro argument's.
#define LAUNCH_FILL(k, n, v) k<<<1, n>>>(d, v)
    LAUNCH_FILL(kernels::fill, 32, 3);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bad += h[31] != 6;

    float hin[64], hout[64];
    for (int i = 0; i < 64; ++i)
        hin[i] = static_cast<float>(i);
    cudaMemcpy(in, hin, sizeof hin, cudaMemcpyHostToDevice);
    // clang-format off
    reverse<<<
        1, 64,
        64 * sizeof(float), 0>>>(in,
                                 out);
    // clang-format on
    cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost);
    bad += hout[0] != 63.0f || hout[63] != 0.0f;
    pairs<<<1, 64>>>(in, out);
    cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost);
    bad += hout[0] != 1.0f || hout[33] != 5.0f; // in[0] + in[1]; in[2] + in[3]

    bad += cudaGetLastError() != cudaSuccess;
    std::printf("%s %c %s\n", text, quote, bad ? "FAILED" : "rewrite sample passed");
    cudaFree(d);
    cudaFree(in);
    cudaFree(out);
    return bad;
}
