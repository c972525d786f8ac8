// test_features.cu — device features a student plausibly uses beyond the chapter's own kernels:
// cooperative groups (block, tiles, cg::reduce), __reduce_*_sync, atomicAdd on fp16/bf16 values
// and pairs, spin-waits on another warp (with __nanosleep, and on an atomic alone), the
// cache-hint loads and stores, and WMMA 16x16x16 (row- and column-major operands and results).
// Built for every backend: the gpu program checks the same kernels on a GPU and exits 77 where
// there is none.
#include <cstdio>
#include <cstring>

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#ifdef CUDASIM
#include <cudasim.h>
#endif

#include "sim_test.h"

namespace cg = cooperative_groups;

// Per thread of a 64-thread block: [0] rank in an 8-tile, [1] tile index, [2] the tile's sum
// of block ranks (cg::reduce plus), [3] its maximum (greater), [4] tile.shfl_down by 1, [5] the
// tile's ballot of odd ranks, [6] any/all, [7] the value of the neighbour thread after a block
// sync through shared memory.
__global__ void groups(int *out) {
    __shared__ int shared_rank[64];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
    int r = static_cast<int>(block.thread_rank());
    int *o = out + r * 8;
    o[0] = static_cast<int>(tile.thread_rank());
    o[1] =
        static_cast<int>(tile.meta_group_rank()) * 100 + static_cast<int>(tile.meta_group_size());
    o[2] = cg::reduce(tile, r, cg::plus<int>());
    o[3] = cg::reduce(tile, r, cg::greater<int>());
    o[4] = tile.shfl_down(r, 1);
    o[5] = static_cast<int>(tile.ballot(r % 2));
    o[6] = tile.any(r == 3) * 10 + tile.all(r < 60);
    shared_rank[r] = r;
    block.sync();
    o[7] = shared_rank[(r + 1) % block.size()];
    tile.sync();
    cg::sync(block);
}

// [0..5]: add, min, max (signed), and, or, xor over the warp; [6]: an unsigned max over the
// first 16 lanes only (the others store 0).
__global__ void warp_reduce(int *out) {
    unsigned lane = threadIdx.x % 32;
    int v = static_cast<int>(lane) - 5;
    int *o = out + threadIdx.x * 7;
    o[0] = __reduce_add_sync(0xffffffffu, v);
    o[1] = __reduce_min_sync(0xffffffffu, v);
    o[2] = __reduce_max_sync(0xffffffffu, v);
    o[3] = static_cast<int>(__reduce_and_sync(0xffffffffu, lane | 64u));
    o[4] = static_cast<int>(__reduce_or_sync(0xffffffffu, 1u << (lane % 8)));
    o[5] = static_cast<int>(__reduce_xor_sync(0xffffffffu, lane));
    o[6] = lane < 16 ? static_cast<int>(__reduce_max_sync(0x0000ffffu, lane * 3u)) : 0;
}

__global__ void lowp_atomics(__half *h, __half2 *h2, __nv_bfloat16 *b, __nv_bfloat162 *b2) {
    atomicAdd(h, __float2half(1.0f));
    atomicAdd(h2, __floats2half2_rn(1.0f, 2.0f));
    atomicAdd(b, __float2bfloat16(1.0f));
    atomicAdd(b2, __floats2bfloat162_rn(1.0f, 2.0f));
}

// Thread 32 (warp 1) waits for a flag that thread 0 (warp 0) sets after writing out[0].
__global__ void handoff(int *flag, int *out) {
    if (threadIdx.x == 0) {
        atomicExch(&out[0], 42);
        atomicExch(flag, 1);
    }
    if (threadIdx.x == 32) {
        while (atomicAdd(flag, 0) == 0)
            __nanosleep(100);
        out[1] = atomicAdd(&out[0], 0) + 1;
    }
}

// The same without __nanosleep: thread 63 spins on an atomic (on the simulator it lets the other
// threads run once it has spun a while).
__global__ void handoff_spin(int *flag, int *out) {
    if (threadIdx.x == 0) {
        atomicExch(&out[0], 7);
        atomicExch(flag, 1);
    }
    if (threadIdx.x == 63) {
        while (atomicCAS(flag, 1, 1) == 0) {
        }
        out[1] = atomicAdd(&out[0], 0) + 1;
    }
}

__global__ void cache_hints(const float4 *in, float4 *out, float *scalars) {
    int i = threadIdx.x;
    float4 v = __ldcs(in + i);
    __stcs(out + i, v);
    float s = __ldcg(scalars + i) + __ldca(scalars + i) + __ldlu(scalars + i) + __ldcv(scalars + i);
    __stwb(scalars + i, s);
    __stcg(scalars + 32 + i, s);
    __stwt(scalars + 64 + i, s);
}

// D = A * B + C for one 16x16x16 tile per warp; a_col/b_col/d_col pick the memory layouts.
template <typename AL, typename BL>
__global__ void wmma_tile(const __half *a, const __half *b, const float *c, float *d, int d_col) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, AL> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BL> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
    for (int i = 0; i < fc.num_elements; ++i)
        fc.x[i] *= 2.0f; // element-wise: the same on every backend
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 16, d_col ? wmma::mem_col_major : wmma::mem_row_major);
}

static void check_groups() {
    int h[64 * 8];
    sim_test_run(h, [](int *d) { groups<<<1, 64>>>(d); });
    int bad = 0;
    for (int r = 0; r < 64; ++r) {
        const int *o = h + r * 8;
        int base = r / 8 * 8;
        unsigned odd = 0;
        for (int k = 0; k < 8; ++k)
            odd |= ((base + k) % 2 ? 1u : 0u) << k;
        bad += o[0] != r % 8;
        bad += o[1] != (r / 8) * 100 + 8;
        bad += o[2] != 8 * base + 28;
        bad += o[3] != base + 7;
        bad += o[4] != (r % 8 == 7 ? r : r + 1); // the last rank keeps its own value
        bad += o[5] != static_cast<int>(odd);
        bad += o[6] != (base == 0 ? 10 : 0) + (base == 56 ? 0 : 1);
        bad += o[7] != (r + 1) % 64;
    }
    CHECK(bad == 0);
}

static void check_warp_reduce() {
    int h[64 * 7];
    sim_test_run(h, [](int *d) { warp_reduce<<<1, 64>>>(d); });
    int bad = 0, x = 0;
    for (int l = 0; l < 32; ++l)
        x ^= l;
    for (int t = 0; t < 64; ++t) {
        const int *o = h + t * 7;
        bad += o[0] != 496 - 32 * 5 || o[1] != -5 || o[2] != 26 || o[3] != 64 || o[4] != 255;
        bad += o[5] != x || o[6] != (t % 32 < 16 ? 45 : 0);
    }
    CHECK(bad == 0);
}

static void check_lowp_atomics() {
    struct all {
        __half h;
        __nv_bfloat16 b;
        __half2 h2;
        __nv_bfloat162 b2;
    } zero, back;
    std::memset(&zero, 0, sizeof zero);
    all *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, sizeof(all)));
    CHECK_CUDA(cudaMemcpy(d, &zero, sizeof zero, cudaMemcpyHostToDevice));
    lowp_atomics<<<4, 64>>>(&d->h, &d->h2, &d->b, &d->b2);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(&back, d, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(__half2float(back.h) == 256.0f);
    CHECK(__low2float(back.h2) == 256.0f && __high2float(back.h2) == 512.0f);
    CHECK(__bfloat162float(back.b) == 256.0f);
    CHECK(__low2float(back.b2) == 256.0f && __high2float(back.b2) == 512.0f);
    CHECK_CUDA(cudaFree(d));
}

static void check_handoff() {
    int *d = nullptr, h[3];
    CHECK_CUDA(cudaMalloc(&d, sizeof h));
    CHECK_CUDA(cudaMemset(d, 0, sizeof h));
    handoff<<<1, 64>>>(d, d + 1);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[1] == 42 && h[2] == 43);
    CHECK_CUDA(cudaMemset(d, 0, sizeof h));
    handoff_spin<<<1, 64>>>(d, d + 1);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[1] == 7 && h[2] == 8);
    CHECK_CUDA(cudaFree(d));
}

static void check_cache_hints() {
    float4 in[32];
    float s[96];
    for (int i = 0; i < 32; ++i) {
        in[i] = make_float4(i, i + 0.5f, -i, 1);
        s[i] = static_cast<float>(i);
    }
    float4 *din = nullptr, *dout = nullptr, out[32];
    float *ds = nullptr;
    CHECK_CUDA(cudaMalloc(&din, sizeof in));
    CHECK_CUDA(cudaMalloc(&dout, sizeof out));
    CHECK_CUDA(cudaMalloc(&ds, sizeof s));
    CHECK_CUDA(cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(ds, s, sizeof s, cudaMemcpyHostToDevice));
    cache_hints<<<1, 32>>>(din, dout, ds);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 32; ++i) {
        bad += std::memcmp(&out[i], &in[i], sizeof(float4)) != 0;
        bad += s[i] != 4.0f * i || s[32 + i] != 4.0f * i || s[64 + i] != 4.0f * i;
    }
    CHECK(bad == 0);
    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(ds));
}

// Small integers: every product and sum is exact in fp16 inputs and fp32 accumulation.
static void check_wmma() {
    __half a[256], b[256];
    float c[256], d[256];
    float af[256], bf[256];
    for (int i = 0; i < 256; ++i) {
        af[i] = static_cast<float>(i % 7 - 3);
        bf[i] = static_cast<float>(i % 5 - 2);
        a[i] = __float2half(af[i]);
        b[i] = __float2half(bf[i]);
        c[i] = static_cast<float>(i % 11);
    }
    __half *da = nullptr, *db = nullptr;
    float *dc = nullptr, *dd = nullptr;
    CHECK_CUDA(cudaMalloc(&da, sizeof a));
    CHECK_CUDA(cudaMalloc(&db, sizeof b));
    CHECK_CUDA(cudaMalloc(&dc, sizeof c));
    CHECK_CUDA(cudaMalloc(&dd, sizeof d));
    CHECK_CUDA(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dc, c, sizeof c, cudaMemcpyHostToDevice));
    using nvcuda::wmma::col_major;
    using nvcuda::wmma::row_major;
    for (int variant = 0; variant < 4; ++variant) {
        bool a_col = variant & 1, b_col = variant & 2, d_col = variant == 3;
        if (!a_col && !b_col)
            wmma_tile<row_major, row_major><<<1, 32>>>(da, db, dc, dd, d_col);
        else if (a_col && !b_col)
            wmma_tile<col_major, row_major><<<1, 32>>>(da, db, dc, dd, d_col);
        else if (!a_col)
            wmma_tile<row_major, col_major><<<1, 32>>>(da, db, dc, dd, d_col);
        else
            wmma_tile<col_major, col_major><<<1, 32>>>(da, db, dc, dd, d_col);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 16; ++j) {
                float want = 2.0f * c[i * 16 + j];
                for (int k = 0; k < 16; ++k)
                    want +=
                        af[a_col ? k * 16 + i : i * 16 + k] * bf[b_col ? j * 16 + k : k * 16 + j];
                bad += d[d_col ? j * 16 + i : i * 16 + j] != want;
            }
        CHECK(bad == 0);
    }
    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
    CHECK_CUDA(cudaFree(dd));
}

int main() {
    if (sim_test_no_gpu("features"))
        return 77;
#ifdef CUDASIM
    // Every check in each order: the spin-wait ends whichever warp runs first.
    for (int order = CUDASIM_ORDER_FORWARD; order <= CUDASIM_ORDER_SHUFFLE; ++order) {
        cudasim_set_order(static_cast<cudasim_order>(order), 7);
#else
    {
#endif
        check_groups();
        check_warp_reduce();
        check_lowp_atomics();
        check_handoff();
        check_cache_hints();
        check_wmma();
    }
    return sim_test_result("features");
}
