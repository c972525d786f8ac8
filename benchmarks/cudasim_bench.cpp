// cudasim_bench — the simulator's own costs: one fiber switch, and a barrier-heavy launch
// (64 blocks x 256 threads x 10 __syncthreads). Prints a human line and a JSON line for each.
// These are CPU timings of the simulator, not GPU performance.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>
#include <cudasim.h>

namespace {

constexpr int blocks = 64, threads = 256, barriers = 10;

__global__ void barrier_kernel(int *out) {
    __shared__ int s[threads];
    int acc = 0;
    for (int i = 0; i < barriers; ++i) {
        s[threadIdx.x] = static_cast<int>(threadIdx.x) + i;
        __syncthreads();
        acc += s[(threadIdx.x + 1) % threads];
    }
    out[blockIdx.x * threads + threadIdx.x] = acc;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main() {
    std::vector<double> switch_ns;
    for (int r = 0; r < 7; ++r)
        switch_ns.push_back(cudasim_measure_switch_ns(2000000));
    double sw = median(switch_ns);
    std::printf("fiber switch: %.2f ns (median of %zu runs of 4M switches)\n", sw,
                switch_ns.size());
    std::printf("{\"bench\":\"cudasim_fiber_switch\",\"ns\":%.3f}\n", sw);

    int *out = nullptr;
    if (cudaMalloc(&out, sizeof(int) * blocks * threads) != cudaSuccess)
        return 1;
    void *args[] = {static_cast<void *>(&out)};
    std::vector<double> ms;
    for (int r = 0; r < 12; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        cudaError_t e = cudaLaunchKernel(barrier_kernel, dim3(blocks), dim3(threads), args);
        auto t1 = std::chrono::steady_clock::now();
        if (e != cudaSuccess) {
            std::fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(e));
            return 1;
        }
        if (r >= 2) // the first launches map the fiber stacks
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    double m = median(ms);
    std::printf("launch %d blocks x %d threads x %d barriers: %.3f ms (median of %zu, %d OS "
                "threads; min %.3f, max %.3f)\n",
                blocks, threads, barriers, m, ms.size(), cudasim_get_threads(),
                *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()));
    std::printf("{\"bench\":\"cudasim_barrier_launch\",\"blocks\":%d,\"threads\":%d,"
                "\"barriers\":%d,\"os_threads\":%d,\"ms\":%.4f}\n",
                blocks, threads, barriers, cudasim_get_threads(), m);
    cudaFree(out);
    return 0;
}
