// test_order.cu — the thread-order option exposes a missing barrier: a kernel that reads a
// neighbour's shared-memory element without __syncthreads is right in forward order (the lower
// thread has already written it) and wrong in reverse or shuffled order, where the fixed kernel
// stays right. With --env the order comes from CUDASIM_ORDER (set by CTest to reverse).
#include <cmath>
#include <cstring>
#include <cudasim.h>

#include "sim_test.h"

constexpr int n = 256;

__global__ void shift_no_barrier(float *out) {
    extern __shared__ float s[];
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    // missing __syncthreads(): thread t reads what thread t-1 wrote
    out[blockIdx.x * blockDim.x + threadIdx.x] =
        threadIdx.x > 0 ? s[threadIdx.x - 1] : -1.0f; // @order_race
}

__global__ void shift_with_barrier(float *out) {
    extern __shared__ float s[];
    s[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x > 0 ? s[threadIdx.x - 1] : -1.0f;
}

// Number of wrong outputs of one kernel run (4 blocks).
static int wrong(void (*kernel)(float *), float *d) {
    float h[4 * n];
    kernel<<<4, n, n * sizeof(float)>>>(d);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 4 * n; ++i) {
        int t = i % n;
        bad += h[i] != (t > 0 ? static_cast<float>(t - 1) : -1.0f);
    }
    return bad;
}

int main(int argc, char **argv) {
    float *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, 4 * n * sizeof(float)));
    if (argc > 1 && std::strcmp(argv[1], "--env") == 0) {
        CHECK(cudasim_get_order() == CUDASIM_ORDER_REVERSE);
        CHECK(wrong(shift_no_barrier, d) == 4 * (n - 1));
        CHECK(wrong(shift_with_barrier, d) == 0);
        return sim_test_result("order (CUDASIM_ORDER)");
    }
    cudasim_set_order(CUDASIM_ORDER_FORWARD, 0);
    CHECK(wrong(shift_no_barrier, d) == 0);
    CHECK(wrong(shift_with_barrier, d) == 0);
    // Reverse: every thread reads before its neighbour writes (the NaN fill shows).
    cudasim_set_order(CUDASIM_ORDER_REVERSE, 0);
    CHECK(wrong(shift_no_barrier, d) == 4 * (n - 1));
    CHECK(wrong(shift_with_barrier, d) == 0);
    // Shuffled: about half of the reads come too early; the seed makes it reproducible.
    cudasim_set_order(CUDASIM_ORDER_SHUFFLE, 42);
    int first = wrong(shift_no_barrier, d);
    CHECK(first > n / 2);
    CHECK(wrong(shift_with_barrier, d) == 0);
    CHECK(cudasim_get_order() == CUDASIM_ORDER_SHUFFLE);
    CHECK_CUDA(cudaFree(d));
    return sim_test_result("order");
}
