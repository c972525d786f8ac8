// cudasim_bench — the simulator's own costs: one fiber switch, a barrier-heavy launch
// (64 blocks x 256 threads x 10 __syncthreads), a shuffle-heavy one (128 blocks x 4 warps x
// 64 __shfl_xor_sync, like a FlashAttention row reduction) and a tensor-core one (128 blocks x 4
// warps x 64 fp16 mma.sync m16n8k16, the emulation of include/cudasim/ptx.h). Prints a human line
// and a JSON line for each.
// These are CPU timings of the simulator, not GPU performance.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>
#include <cudasim.h>
#include <cudasim/ptx.h>

namespace {

constexpr int blocks = 64, threads = 256, barriers = 10;

// Each step writes one of two buffers, waits, reads a neighbour's slot. Two buffers make one
// barrier per step enough: step i+2 rewrites buffer i%2 only after every thread passed the
// barrier of step i+1, so all reads of step i are done.
__global__ void barrier_kernel(int *out) {
    __shared__ int s[2][threads];
    int acc = 0;
    for (int i = 0; i < barriers; ++i) {
        s[i & 1][threadIdx.x] = static_cast<int>(threadIdx.x) + i;
        __syncthreads(); // the neighbour's write of this step is visible
        acc += s[i & 1][(threadIdx.x + 1) % threads];
    }
    out[blockIdx.x * threads + threadIdx.x] = acc;
}

constexpr int shfl_blocks = 128, shfl_threads = 128, shuffles = 64;

__global__ void shuffle_kernel(float *out) {
    float v = static_cast<float>(threadIdx.x);
    for (int i = 0; i < shuffles; ++i)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1 << (i % 5)));
    out[blockIdx.x * shfl_threads + threadIdx.x] = v;
}

constexpr int mmas = 64;

// Each warp's 64 mma accumulate into its D fragment (fp16 1.0 in every A and B register, so each
// adds 16 to every element).
__global__ void mma_kernel(float *out) {
    const uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    const uint32_t b[2] = {0x3c003c00u, 0x3c003c00u};
    float d[4] = {0, 0, 0, 0};
    for (int i = 0; i < mmas; ++i)
        cudasim::ptx::mma_m16n8k16<false>(d, a, b, d, "mma", __FILE__, __LINE__);
    out[blockIdx.x * shfl_threads + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

// Median wall time of a launch (ms), after two warm-up launches that map the fiber stacks.
template <typename... P>
double time_launch(void (*kernel)(P...), int grid, int block, void **args) {
    std::vector<double> ms;
    for (int r = 0; r < 12; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        cudaError_t e = cudaLaunchKernel(kernel, dim3(grid), dim3(block), args);
        auto t1 = std::chrono::steady_clock::now();
        if (e != cudaSuccess) {
            std::fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(e));
            return -1.0;
        }
        if (r >= 2)
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return median(ms);
}

// The human line and the JSON line of a launch of `count` barriers, shuffles or mma ("barrier",
// "shuffle", "mma") per thread.
void report_launch(const char *what, int grid, int block, int count, double ms) {
    std::printf("launch %d blocks x %d threads x %d %ss: %.3f ms (median of 10, %d OS threads)\n",
                grid, block, count, what, ms, cudasim_get_threads());
    std::printf("{\"bench\":\"cudasim_%s_launch\",\"blocks\":%d,\"threads\":%d,\"%ss\":%d,"
                "\"os_threads\":%d,\"ms\":%.4f}\n",
                what, grid, block, what, count, cudasim_get_threads(), ms);
}

int main() {
    std::vector<double> switch_ns;
    for (int r = 0; r < 7; ++r)
        switch_ns.push_back(cudasim_measure_switch_ns(2000000));
    double sw = median(switch_ns);
    std::printf("fiber switch: %.2f ns (median of %zu runs of 4M switches)\n", sw,
                switch_ns.size());
    std::printf("{\"bench\":\"cudasim_fiber_switch\",\"ns\":%.3f}\n", sw);

    int *out = nullptr;
    float *fout = nullptr;
    if (cudaMalloc(&out, sizeof(int) * blocks * threads) != cudaSuccess ||
        cudaMalloc(&fout, sizeof(float) * shfl_blocks * shfl_threads) != cudaSuccess)
        return 1;
    void *args[] = {static_cast<void *>(&out)};
    double m = time_launch(barrier_kernel, blocks, threads, args);
    report_launch("barrier", blocks, threads, barriers, m);
    void *fargs[] = {static_cast<void *>(&fout)};
    double s = time_launch(shuffle_kernel, shfl_blocks, shfl_threads, fargs);
    report_launch("shuffle", shfl_blocks, shfl_threads, shuffles, s);
    double t = time_launch(mma_kernel, shfl_blocks, shfl_threads, fargs);
    report_launch("mma", shfl_blocks, shfl_threads, mmas, t);
    if (m < 0 || s < 0 || t < 0)
        return 1;
    // The mma launch computed what it should: 64 x 16 in each of a lane's four elements.
    std::vector<float> got(shfl_blocks * shfl_threads);
    cudaMemcpy(got.data(), fout, sizeof(float) * got.size(), cudaMemcpyDeviceToHost);
    for (float v : got)
        if (v != 4.0f * mmas * 16) {
            std::fprintf(stderr, "mma launch: a lane's D sums to %g, not %g\n", v, 4.0 * mmas * 16);
            return 1;
        }
    cudaFree(out);
    cudaFree(fout);
    return 0;
}
