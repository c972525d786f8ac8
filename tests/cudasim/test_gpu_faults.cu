// test_gpu_faults.cu — accesses a GPU faults on and the host would silently make: a vector load or
// store at an address not aligned for the vector (float4 through a pointer 4 bytes past a 16-byte
// boundary), and a kernel reading the host's static data through a pointer argument. Each must
// be reported naming the kernel and the line marked "// @<case>" (CMakeLists.txt), in every
// simulator build: the plain build at the cast that makes the misaligned vector pointer and at
// the launch for the host pointer (it does not see loads); the checked and sanitizer builds at
// the access itself, with the block and thread. `aligned` must run without a report.
// argv[1] picks the case.
#include <cstring>

#include "sim_test.h"

constexpr int n = 32;

// A host array of the program (not device memory): a GPU kernel cannot read it.
static float host_table[n];

__global__ void misaligned_copy(const float *in, float *out) {
    float4 v = *reinterpret_cast<const float4 *>(in + 1); // @misaligned_copy
    out[threadIdx.x] = v.x + v.w;
}

__global__ void misaligned_member(const float *in, float *out) {
    out[threadIdx.x] = reinterpret_cast<const float4 *>(in + 1)->y; // @misaligned_member
}

__global__ void misaligned_store(const float *in, float *out) {
    float4 v = make_float4(in[0], in[1], in[2], in[3]);
    *reinterpret_cast<float4 *>(out + 1) = v; // @misaligned_store
}

__global__ void host_static(const float *table, float *out) {
    out[threadIdx.x] = table[threadIdx.x]; // @host_static
}

// The same accesses, aligned and on device memory.
__global__ void aligned(const float *in, float *out) {
    float4 v = *reinterpret_cast<const float4 *>(in + 4 * threadIdx.x);
    *reinterpret_cast<float4 *>(out + 4 * threadIdx.x) = v;
    out[4 * threadIdx.x] += reinterpret_cast<const float4 *>(in)->w;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: test_gpu_faults <case>\n");
        return 2;
    }
    float *in = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&in, 4 * n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&out, 4 * n * sizeof(float)));
    CHECK_CUDA(cudaMemset(in, 0, 4 * n * sizeof(float)));
    for (int i = 0; i < n; ++i)
        host_table[i] = static_cast<float>(i);
    const char *c = argv[1];
    cudaError_t want = cudaErrorLaunchFailure;
    if (!std::strcmp(c, "misaligned_copy")) {
        misaligned_copy<<<1, 1>>>(in, out);
    } else if (!std::strcmp(c, "misaligned_member")) {
        misaligned_member<<<1, 1>>>(in, out);
    } else if (!std::strcmp(c, "misaligned_store")) {
        misaligned_store<<<1, 1>>>(in, out);
    } else if (!std::strcmp(c, "host_static")) {
        host_static<<<1, 1>>>(host_table, out); // @host_static_launch
    } else if (!std::strcmp(c, "aligned")) {
        aligned<<<1, n>>>(in, out);
        want = cudaSuccess;
    } else {
        std::fprintf(stderr, "test_gpu_faults: unknown case '%s'\n", c);
        return 2;
    }
    cudaError_t got = cudaDeviceSynchronize();
    // The launch fails, as a GPU's would (the plain build's launch-time report is sticky as an
    // illegal address; the access reports end the launch with a launch failure).
    if (want == cudaSuccess)
        CHECK_ERR(got, cudaSuccess);
    else
        CHECK(got == cudaErrorLaunchFailure || got == cudaErrorIllegalAddress);
    return sim_test_result(c);
}
