// test_runtime_api.cu — runtime calls a student's host code plausibly makes beyond the basics:
// cudaStreamCreateWithFlags, cudaMallocManaged, cudaMallocPitch with cudaMemcpy2D, the occupancy
// queries; and, on the simulator, that fresh device memory reads as NaN (0xFF bytes). Built for
// every backend: the gpu program checks the same calls on a GPU and exits 77 where there is none.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "sim_test.h"

__global__ void scale_rows(float *m, size_t pitch, int width, int height, float s) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < width && y < height)
        reinterpret_cast<float *>(reinterpret_cast<char *>(m) + y * pitch)[x] *= s;
}

__global__ void count_up(int *counter) { atomicAdd(counter, 1); }

__global__ void big_smem(float *out) {
    extern __shared__ float tile[];
    tile[threadIdx.x] = 1.0f;
    out[threadIdx.x] = tile[threadIdx.x];
}

static void streams_and_managed() {
    cudaStream_t s = nullptr;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *counter = nullptr;
    CHECK_CUDA(cudaMallocManaged(&counter, sizeof(int)));
    *counter = 0; // managed memory: the host writes it directly
    count_up<<<4, 64, 0, s>>>(counter);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK(*counter == 256);
    CHECK_CUDA(cudaFree(counter));
    CHECK_CUDA(cudaStreamDestroy(s));
#ifdef CUDASIM
    CHECK_ERR(cudaStreamCreateWithFlags(&s, 0x40), cudaErrorInvalidValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
#endif
}

static void pitched_copies() {
    const int w = 100, h = 7;
    float host[h][w], back[h][w];
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            host[y][x] = static_cast<float>(y * 1000 + x);
    float *m = nullptr;
    size_t pitch = 0;
    CHECK_CUDA(cudaMallocPitch(&m, &pitch, w * sizeof(float), h));
    CHECK(pitch >= w * sizeof(float) && pitch % sizeof(float) == 0);
    CHECK_CUDA(
        cudaMemcpy2D(m, pitch, host, sizeof host[0], w * sizeof(float), h, cudaMemcpyHostToDevice));
    scale_rows<<<dim3(1, h), 128>>>(m, pitch, w, h, 2.0f);
    CHECK_CUDA(cudaGetLastError());
    std::memset(back, 0, sizeof back);
    CHECK_CUDA(
        cudaMemcpy2D(back, sizeof back[0], m, pitch, w * sizeof(float), h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            bad += back[y][x] != 2.0f * host[y][x];
    CHECK(bad == 0);
    // A width wider than the pitch is refused, with the pitch's own error (CUDA 13.0 on an H200).
    CHECK_ERR(cudaMemcpy2D(m, 8, host, sizeof host[0], 16, 2, cudaMemcpyHostToDevice),
              cudaErrorInvalidPitchValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidPitchValue);
#ifdef CUDASIM
    // Every row is checked against the allocation: one row too many runs past its end.
    CHECK_ERR(cudaMemcpy2D(back, sizeof back[0], m, pitch, w * sizeof(float), h + 1,
                           cudaMemcpyDeviceToHost),
              cudaErrorInvalidValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
#endif
    CHECK_CUDA(cudaFree(m));
}

static void occupancy() {
    int blocks = -1;
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, count_up, 256, 0));
    CHECK(blocks >= 1 && blocks <= 8);
    int min_grid = 0, block = 0;
    CHECK_CUDA(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, count_up));
    CHECK(block >= 32 && block <= 1024 && block % 32 == 0 && min_grid >= 1);
#ifdef CUDASIM
    // The virtual device: 2048 threads, 32 blocks and 228 KiB of shared memory per SM.
    CHECK(blocks == 8);
    CHECK(block == 1024 && min_grid == 2 * 132);
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, count_up, 32, 0));
    CHECK(blocks == 32);
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, big_smem, 128, 64 * 1024));
    CHECK(blocks == 0); // more than 48 KiB without the opt-in cannot launch at all
    CHECK_CUDA(
        cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, big_smem, 128, 100 * 1024));
    CHECK(blocks == 2);
    CHECK_CUDA(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, big_smem, 100 * 1024, 200));
    CHECK(block == 192 && min_grid == 2 * 132);
#endif
}

#ifdef CUDASIM
__global__ void read_fresh(const float *in, const int *ints, float *out, int *out_int) {
    out[threadIdx.x] = in[threadIdx.x];
    out_int[threadIdx.x] = ints[threadIdx.x];
}

// Fresh device memory is 0xFF bytes: NaN as floats, -1 as integers.
static void nan_fill() {
    float *in = nullptr, *out = nullptr;
    int *ints = nullptr, *out_int = nullptr;
    CHECK_CUDA(cudaMalloc(&in, 32 * sizeof(float)));
    CHECK_CUDA(cudaMallocManaged(&ints, 32 * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&out, 32 * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&out_int, 32 * sizeof(int)));
    read_fresh<<<1, 32>>>(in, ints, out, out_int);
    CHECK_CUDA(cudaGetLastError());
    float h[32];
    int hi[32];
    CHECK_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hi, out_int, sizeof hi, cudaMemcpyDeviceToHost));
    int nan = 0, minus_one = 0;
    for (int i = 0; i < 32; ++i) {
        nan += std::isnan(h[i]);
        minus_one += hi[i] == -1;
    }
    CHECK(nan == 32 && minus_one == 32);
    CHECK_CUDA(cudaFree(in));
    CHECK_CUDA(cudaFree(ints));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(out_int));
}
#endif

int main() {
    if (sim_test_no_gpu("runtime_api"))
        return 77;
    streams_and_managed();
    pitched_copies();
    occupancy();
#ifdef CUDASIM
    nan_fill();
#endif
    return sim_test_result("runtime_api");
}
