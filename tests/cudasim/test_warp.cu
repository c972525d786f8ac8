// test_warp.cu — warp intrinsics against CUDA's documented semantics: every shuffle variant
// with width 32/16/8/4, ballot/any/all, __syncwarp, partial warps, disjoint masks in divergent
// code, 8-byte and packed-half values; in forward, reverse and shuffled thread order.
#include <cuda_fp16.h>
#include <cudasim.h>
#include <vector>

#include "sim_test.h"

constexpr unsigned full = 0xffffffffu;
constexpr int n = 64; // two warps
constexpr int kinds = 5;

__global__ void shuffles(int *out, int width) {
    int i = threadIdx.x, lane = i % 32;
    int v = i * 10;
    out[0 * n + i] = __shfl_sync(full, v, (lane * 7 + 3) % 37, width);
    out[1 * n + i] = __shfl_up_sync(full, v, 3, width);
    out[2 * n + i] = __shfl_down_sync(full, v, 5, width);
    out[3 * n + i] = __shfl_xor_sync(full, v, 6, width);
    out[4 * n + i] = __shfl_xor_sync(full, v, 1, width);
}

static int expect(int kind, int i, int w) {
    int lane = i % 32, base = i - lane, seg = lane / w * w, v = i * 10;
    switch (kind) {
    case 0:
        return (base + seg + ((lane * 7 + 3) % 37) % w) * 10;
    case 1:
        return lane % w >= 3 ? v - 30 : v;
    case 2:
        return lane % w + 5 < w ? v + 50 : v;
    default: {
        int src = lane ^ (kind == 3 ? 6 : 1);
        return src / w > lane / w ? v : (base + src) * 10; // later segments are out of reach
    }
    }
}

// Sums within each segment of `width` lanes: down-reduction (lane 0 of the segment) and
// butterfly (every lane).
__global__ void reductions(float *down, float *butterfly, int width) {
    float v = static_cast<float>(threadIdx.x % 32 + 1);
    float a = v, b = v;
    for (int d = width / 2; d > 0; d /= 2) {
        a += __shfl_down_sync(full, a, d, width);
        b += __shfl_xor_sync(full, b, d, width);
    }
    down[threadIdx.x] = a;
    butterfly[threadIdx.x] = b;
}

__global__ void votes(unsigned *out) {
    int lane = threadIdx.x % 32;
    unsigned *o = out + threadIdx.x * 6;
    o[0] = __ballot_sync(full, lane % 3 == 0);
    o[1] = __any_sync(full, lane == 17);
    o[2] = __all_sync(full, lane < 32);
    o[3] = __all_sync(full, lane < 31);
    // Divergent halves, each with its own collective: disjoint masks in flight together.
    if (lane < 16)
        o[4] = __ballot_sync(0x0000ffffu, lane & 1);
    else
        o[4] = __ballot_sync(0xffff0000u, lane & 1);
    o[5] = __any_sync(full, 0);
}

// Warp-level exchange through shared memory, ordered by __syncwarp.
__global__ void exchange(int *out) {
    __shared__ int s[n];
    int lane = threadIdx.x % 32, base = threadIdx.x - lane;
    s[threadIdx.x] = static_cast<int>(threadIdx.x) * 2;
    __syncwarp();
    int got = s[base + 31 - lane];
    __syncwarp();
    s[threadIdx.x] = got + 1;
    __syncwarp();
    if (blockIdx.x == gridDim.x - 1)
        out[threadIdx.x] = s[base + (lane + 1) % 32];
}

// 48 threads: the second warp has 16 lanes and must use a 16-lane mask.
__global__ void partial(unsigned *out) {
    out += blockIdx.x * 144;
    unsigned mask = __activemask();
    int v = __shfl_xor_sync(mask, static_cast<int>(threadIdx.x), 1);
    out[threadIdx.x] = mask;
    out[48 + threadIdx.x] = static_cast<unsigned>(v);
    out[96 + threadIdx.x] = __ballot_sync(mask, 1);
}

// Values of other types: 8-byte double and float2, packed __half2.
__global__ void typed(double *d, float2 *f2, __half2 *h2) {
    int i = threadIdx.x;
    d[i] = __shfl_sync(full, 0.5 + i, 31 - i);
    f2[i] = __shfl_down_sync(full, make_float2(static_cast<float>(i), -1.0f * i), 2);
    h2[i] = __shfl_xor_sync(full, __floats2half2_rn(static_cast<float>(i), 0.25f), 3);
}

static void run(cudasim_order order) {
    cudasim_set_order(order, 99);
    int *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, kinds * n * sizeof(int)));
    std::vector<int> h(kinds * n);
    for (int w : {32, 16, 8, 4}) {
        shuffles<<<1, n>>>(d, w);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int k = 0; k < kinds; ++k)
            for (int i = 0; i < n; ++i)
                bad += h[k * n + i] != expect(k, i, w);
        if (bad)
            std::fprintf(stderr, "width %d: %d wrong shuffle results\n", w, bad);
        CHECK(bad == 0);
    }
    float *down = nullptr, *bfly = nullptr;
    CHECK_CUDA(cudaMalloc(&down, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&bfly, n * sizeof(float)));
    for (int w : {32, 16, 8, 4, 2, 1}) {
        reductions<<<1, n>>>(down, bfly, w);
        float hd[n], hb[n];
        CHECK_CUDA(cudaMemcpy(hd, down, sizeof hd, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(hb, bfly, sizeof hb, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i) {
            int lane = i % 32, first = lane / w * w;
            float seg_sum = static_cast<float>(w * (first + 1) + w * (w - 1) / 2);
            CHECK(hb[i] == seg_sum);
            if (lane == first)
                CHECK(hd[i] == seg_sum);
        }
    }
    unsigned *u = nullptr;
    CHECK_CUDA(cudaMalloc(&u, 6 * n * sizeof(unsigned))); // also holds partial's 2 x 144
    votes<<<1, n>>>(u);
    std::vector<unsigned> hu(6 * n);
    CHECK_CUDA(cudaMemcpy(hu.data(), u, hu.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
        const unsigned *o = &hu[i * 6];
        CHECK(o[0] == 0x49249249u && o[1] == 1 && o[2] == 1 && o[3] == 0 && o[5] == 0);
        CHECK(o[4] == (i % 32 < 16 ? 0x0000aaaau : 0xaaaa0000u));
    }
    exchange<<<3, n>>>(d);
    CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
        int base = i / 32 * 32, next = base + (i % 32 + 1) % 32;
        CHECK(h[i] == (base + 31 - (next - base)) * 2 + 1);
    }
    partial<<<2, 48>>>(u);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(hu.data(), u, 288 * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 48; ++i) {
            const unsigned *o = &hu[b * 144];
            unsigned mask = i < 32 ? full : 0xffffu;
            CHECK(o[i] == mask && o[48 + i] == static_cast<unsigned>(i ^ 1) && o[96 + i] == mask);
        }
    double *dd = nullptr;
    float2 *f2 = nullptr;
    __half2 *h2 = nullptr;
    CHECK_CUDA(cudaMalloc(&dd, 32 * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&f2, 32 * sizeof(float2)));
    CHECK_CUDA(cudaMalloc(&h2, 32 * sizeof(__half2)));
    typed<<<1, 32>>>(dd, f2, h2);
    double hd[32];
    float2 hf[32];
    __half2 hh[32];
    CHECK_CUDA(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hf, f2, sizeof hf, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hh, h2, sizeof hh, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; ++i) {
        CHECK(hd[i] == 0.5 + (31 - i));
        int s = i + 2 < 32 ? i + 2 : i;
        CHECK(hf[i].x == static_cast<float>(s) && hf[i].y == -1.0f * s);
        CHECK(__low2float(hh[i]) == static_cast<float>(i ^ 3) && __high2float(hh[i]) == 0.25f);
    }
    sim_test_free(d, down, bfly, u, dd, f2, h2);
}

int main() {
    for (cudasim_order order :
         {CUDASIM_ORDER_FORWARD, CUDASIM_ORDER_REVERSE, CUDASIM_ORDER_SHUFFLE})
        run(order);
    return sim_test_result("warp");
}
