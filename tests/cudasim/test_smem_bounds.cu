// test_smem_bounds.cu — accesses outside the launch's dynamic shared memory, one per case
// (argv[1]): the simulator must end the launch with cudaErrorIllegalAddress (sticky until
// cudaDeviceReset, as on a GPU) and a report naming the kernel, block, thread, read or write and
// the offset. Not in the ASan preset, where AddressSanitizer reports these accesses itself.
#include <cstring>

#include "sim_test.h"

// Thread 63 of each block writes one element past the launch's 64 floats.
__global__ void write_past_end(float *out) {
    extern __shared__ float s[];
    s[threadIdx.x + 1] = 1.0f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f;
}

// The launch forgot the dynamic shared memory size: the first read is out of bounds.
__global__ void read_without_size(float *out) {
    extern __shared__ float s[];
    out[threadIdx.x] = s[threadIdx.x];
}

__global__ void fill(float *out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    float *out = nullptr;
    CHECK_CUDA(cudaMalloc(&out, 256 * sizeof(float)));
    if (!std::strcmp(c, "write_past_end")) {
        write_past_end<<<2, 64, 64 * sizeof(float)>>>(out);
    } else if (!std::strcmp(c, "read_without_size")) {
        read_without_size<<<1, 32>>>(out);
    } else {
        std::fprintf(stderr, "usage: test_smem_bounds write_past_end|read_without_size\n");
        return 2;
    }
    CHECK_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
    CHECK_ERR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    CHECK_CUDA(cudaDeviceReset());
    CHECK_CUDA(cudaMalloc(&out, 256 * sizeof(float)));
    fill<<<4, 64>>>(out);
    CHECK_CUDA(cudaGetLastError());
    float h[256];
    CHECK_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1.0f && h[255] == 1.0f);
    if (sim_test_failures)
        return sim_test_result("smem_bounds");
    std::printf("bounds checks passed\n");
    return 0;
}
