// test_profile_kernels.cu — the profile of real kernels in the instrumented build (sim-check
// preset), through the C API of cudasim.h, against counts computed by hand:
//
//   copy        4 blocks x 128 threads, out[i] = in[i]: 16 warp requests each way, 4 sectors each
//   strided     32 lanes read in[32 * lane]: 1 request, 32 sectors; the store: 1 request, 4
//   copy16      32 lanes assign one uint4 each (a memcpy to the compiler, traced by the
//               simulator's vector types): 1 request of 512 bytes, 16 sectors each way
//   conflict    32 lanes write and read shared word 32 * lane (all in bank 0): 2 requests, 32
//               wavefronts each, 62 conflicts
//   transpose   one warp, a 32x32 tile through shared memory: 32 row stores (1 wavefront each)
//               and 32 column loads, 32 wavefronts each in rows of 32 floats, 1 in rows of 33
//   mma         one mma.m16n8k16: 4,096 FLOPs
// The kernels' index arithmetic lives in registers (-O2): only the listed accesses reach memory.
#include <cstdint>
#include <cstdio>

#include <cudasim.h>

#include "device/mma.cuh"
#include "sim_test.h"

__global__ void copy(const float *in, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i];
}

__global__ void strided(const float *in, float *out) { out[threadIdx.x] = in[32 * threadIdx.x]; }

__global__ void copy16(const float *in, float *out) {
    reinterpret_cast<uint4 *>(out)[threadIdx.x] = reinterpret_cast<const uint4 *>(in)[threadIdx.x];
}

__global__ void conflict(float *out) {
    __shared__ float s[32 * 32];
    s[32 * threadIdx.x] = (float)threadIdx.x;
    __syncthreads(); // every lane's word written before any is read
    out[threadIdx.x] = s[32 * threadIdx.x];
}

template <int PAD> __global__ void transpose(const float *in, float *out) {
    __shared__ float tile[32][32 + PAD];
    int t = threadIdx.x;
    for (int r = 0; r < 32; ++r)
        tile[r][t] = in[32 * r + t];
    __syncthreads(); // the whole tile written before columns are read
    for (int r = 0; r < 32; ++r)
        out[32 * r + t] = tile[t][r];
}

__global__ void one_mma(float *d) {
    uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    uint32_t b[2] = {0x3c003c00u, 0x3c003c00u};
    float c[4] = {0, 0, 0, 0}, out[4];
    mma_m16n8k16_f16(out, a, b, c);
    if (threadIdx.x == 0)
        d[0] = out[0];
}

static cudasim_profile_summary profiled(void (*launch)(float *, float *), float *in, float *out) {
    cudasim_profile_summary s;
    launch(in, out);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK(cudasim_profile_report(nullptr, &s) == 1);
    return s;
}

int main() {
    if (!cudasim_profile_available()) {
        std::printf("profile_kernels: this build is not instrumented (the sim-check preset)\n");
        return 1;
    }
    float *in = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&in, 32 * 32 * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&out, 32 * 32 * sizeof(float)));
    CHECK_CUDA(cudaMemset(in, 0, 32 * 32 * sizeof(float)));
    CHECK(cudasim_profile_enable(1) == 0);

    cudasim_profile_summary s =
        profiled([](float *i, float *o) { copy<<<4, 128>>>(i, o); }, in, out);
    CHECK(s.global_load_requests == 16 && s.global_load_sectors == 64);
    CHECK(s.global_store_requests == 16 && s.global_store_sectors == 64);
    CHECK(s.dram_bytes == 2 * 2048 && s.shared_requests == 0);

    s = profiled([](float *i, float *o) { strided<<<1, 32>>>(i, o); }, in, out);
    CHECK(s.global_load_requests == 1 && s.global_load_sectors == 32);
    CHECK(s.global_store_requests == 1 && s.global_store_sectors == 4);

    s = profiled([](float *i, float *o) { copy16<<<1, 32>>>(i, o); }, in, out);
    CHECK(s.global_load_requests == 1 && s.global_load_sectors == 16);
    CHECK(s.global_store_requests == 1 && s.global_store_sectors == 16);
    CHECK(s.global_load_bytes == 512 && s.global_store_bytes == 512);

    s = profiled([](float *, float *o) { conflict<<<1, 32>>>(o); }, in, out);
    CHECK(s.shared_requests == 2 && s.shared_wavefronts == 64 && s.shared_conflicts == 62);

    s = profiled([](float *i, float *o) { transpose<0><<<1, 32>>>(i, o); }, in, out);
    CHECK(s.shared_requests == 64 && s.shared_wavefronts == 32 + 32 * 32);
    CHECK(s.shared_conflicts == 31 * 32);
    CHECK(s.global_load_requests == 32 && s.global_load_sectors == 32 * 4);
    s = profiled([](float *i, float *o) { transpose<1><<<1, 32>>>(i, o); }, in, out);
    CHECK(s.shared_requests == 64 && s.shared_wavefronts == 64 && s.shared_conflicts == 0);

    s = profiled([](float *, float *o) { one_mma<<<1, 32>>>(o); }, in, out);
    CHECK(s.mma == 1 && s.flops == 4096.0);

    cudasim_profile_enable(0);
    cudaFree(in);
    cudaFree(out);
    return sim_test_result("profile_kernels");
}
