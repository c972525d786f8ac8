// test_barriers.cu — __syncthreads in loops (tree reduction, multi-phase stencil),
// __syncthreads_count/and/or, and correctness of barrier code in every thread order.
#include <cudasim.h>
#include <vector>

#include "sim_test.h"

constexpr int threads = 256;

// Block-wide tree reduction: a barrier per level, in a loop.
__global__ void block_sum(const int *in, int *out) {
    __shared__ int s[threads];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

// Repeated neighbour averaging: two barriers per iteration (read phase, write phase).
__global__ void smooth(float *data, int iters) {
    __shared__ float s[threads];
    unsigned t = threadIdx.x, n = blockDim.x;
    s[t] = data[t];
    __syncthreads();
    for (int i = 0; i < iters; ++i) {
        float v = (s[(t + n - 1) % n] + s[t] + s[(t + 1) % n]) / 3.0f;
        __syncthreads();
        s[t] = v;
        __syncthreads();
    }
    data[t] = s[t];
}

__global__ void vote(int *out) {
    int t = threadIdx.x;
    int thirds = __syncthreads_count(t % 3 == 0);
    int all_small = __syncthreads_and(t < 1000);
    int all_even = __syncthreads_and(t % 2 == 0);
    int any_big = __syncthreads_or(t == 100);
    int none = __syncthreads_or(0);
    if (t == 0) {
        out[0] = thirds;
        out[1] = all_small;
        out[2] = all_even;
        out[3] = any_big;
        out[4] = none;
    }
}

static void run_all(cudasim_order order) {
    cudasim_set_order(order, 1234);
    const int blocks = 33;
    std::vector<int> h(blocks * threads);
    long long want[blocks] = {0};
    for (int i = 0; i < blocks * threads; ++i) {
        h[i] = (i * 7919) % 1000 - 500;
        want[i / threads] += h[i];
    }
    int *in = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&in, h.size() * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&out, blocks * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(in, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
    block_sum<<<blocks, threads>>>(in, out);
    CHECK_CUDA(cudaGetLastError());
    int got[blocks];
    CHECK_CUDA(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; ++b)
        CHECK(got[b] == want[b]);

    float hf[threads], ref[threads], tmp[threads];
    for (int i = 0; i < threads; ++i)
        hf[i] = ref[i] = static_cast<float>(i % 17);
    for (int it = 0; it < 20; ++it) {
        for (int i = 0; i < threads; ++i)
            tmp[i] = (ref[(i + threads - 1) % threads] + ref[i] + ref[(i + 1) % threads]) / 3.0f;
        std::copy(tmp, tmp + threads, ref);
    }
    float *df = nullptr;
    CHECK_CUDA(cudaMalloc(&df, sizeof hf));
    CHECK_CUDA(cudaMemcpy(df, hf, sizeof hf, cudaMemcpyHostToDevice));
    smooth<<<1, threads>>>(df, 20);
    CHECK_CUDA(cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost));
    for (int i = 0; i < threads; ++i)
        CHECK(hf[i] == ref[i]);

    vote<<<1, threads>>>(out);
    CHECK_CUDA(cudaMemcpy(got, out, 5 * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(got[0] == (threads + 2) / 3);
    CHECK(got[1] == 1 && got[2] == 0 && got[3] == 1 && got[4] == 0);
    CHECK_CUDA(cudaFree(in));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(df));
}

int main() {
    for (cudasim_order order :
         {CUDASIM_ORDER_FORWARD, CUDASIM_ORDER_REVERSE, CUDASIM_ORDER_SHUFFLE})
        run_all(order);
    return sim_test_result("barriers");
}
