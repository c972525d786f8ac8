// test_atomics.cu — atomics from many blocks at once (blocks run on parallel OS threads):
// add/sub for every type, min/max, exchange, CAS (a spin-free counter), inc/dec, and the
// threadfence "last block" pattern.
#include <algorithm>

#include "sim_test.h"

constexpr int blocks = 96, threads = 128;

struct counters {
    int i_add, i_sub, i_max, i_min;
    unsigned u_add, u_max, u_min, u_inc, u_or, u_cas;
    unsigned long long ull_add, ull_cas;
    float f_add;
    double d_add;
    int exch_seen[blocks * threads + 1]; // [0]: the exchanged slot; [v]: times v was displaced
    unsigned done;
    int last_block_sum;
    int partial[blocks];
};

__global__ void hammer(counters *c) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&c->i_add, 2);
    atomicSub(&c->i_sub, 3);
    atomicMax(&c->i_max, id * 7 % 1000 - 300);
    atomicMin(&c->i_min, id * 7 % 1000 - 300);
    atomicAdd(&c->u_add, 1u);
    atomicMax(&c->u_max, static_cast<unsigned>(id));
    atomicMin(&c->u_min, static_cast<unsigned>(id) + 5u);
    atomicInc(&c->u_inc, 1000000u);
    atomicOr(&c->u_or, 1u << (id % 32));
    atomicAdd(&c->ull_add, 1ull << 33);
    atomicAdd(&c->f_add, 0.5f);
    atomicAdd(&c->d_add, 0.25);
    int old = atomicExch(&c->exch_seen[0], id + 1);
    if (old > 0)
        atomicAdd(&c->exch_seen[old], 1); // every value is displaced exactly once, except the last
    // A CAS retry loop: increments that must not be lost.
    unsigned cur = atomicOr(&c->u_cas, 0u), seen; // an atomic read
    while ((seen = atomicCAS(&c->u_cas, cur, cur + 1)) != cur)
        cur = seen;
    unsigned long long cur64 = atomicOr(&c->ull_cas, 0ull), seen64;
    while ((seen64 = atomicCAS(&c->ull_cas, cur64, cur64 + 3)) != cur64)
        cur64 = seen64;

    // The last block to finish sums the partial results of all blocks.
    __shared__ bool last;
    if (threadIdx.x == 0) {
        c->partial[blockIdx.x] = static_cast<int>(blockIdx.x);
        __threadfence();
        last = atomicInc(&c->done, gridDim.x) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        int s = 0;
        for (unsigned b = 0; b < gridDim.x; ++b)
            s += c->partial[b];
        c->last_block_sum = s;
    }
}

int main() {
    counters h{};
    h.i_max = -1000000;
    h.i_min = 1000000;
    h.u_min = 0xffffffffu;
    counters *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, sizeof(counters)));
    CHECK_CUDA(cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice));
    hammer<<<blocks, threads>>>(d);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    const int n = blocks * threads;
    int want_max = -1000000, want_min = 1000000;
    for (int id = 0; id < n; ++id) {
        want_max = std::max(want_max, id * 7 % 1000 - 300);
        want_min = std::min(want_min, id * 7 % 1000 - 300);
    }
    CHECK(h.i_add == 2 * n);
    CHECK(h.i_sub == -3 * n);
    CHECK(h.i_max == want_max && h.i_min == want_min);
    CHECK(h.u_add == static_cast<unsigned>(n));
    CHECK(h.u_max == static_cast<unsigned>(n - 1) && h.u_min == 5u);
    CHECK(h.u_inc == static_cast<unsigned>(n));
    CHECK(h.u_or == 0xffffffffu);
    CHECK(h.ull_add == static_cast<unsigned long long>(n) << 33);
    CHECK(h.f_add == 0.5f * n);
    CHECK(h.d_add == 0.25 * n);
    int displaced = 0, twice = 0;
    for (int v = 1; v <= n; ++v) {
        displaced += h.exch_seen[v] == 1;
        twice += h.exch_seen[v] > 1;
    }
    CHECK(displaced == n - 1 && twice == 0 && h.exch_seen[0] >= 1);
    CHECK(h.u_cas == static_cast<unsigned>(n));
    CHECK(h.ull_cas == 3ull * n);
    CHECK(h.done == static_cast<unsigned>(blocks)); // atomicInc wraps only past its limit
    CHECK(h.last_block_sum == blocks * (blocks - 1) / 2);
    CHECK_CUDA(cudaFree(d));
    return sim_test_result("atomics");
}
