// test_fp8_mma.cu — mma.sync m16n8k32 on FP8 (device/mma.cuh: mma_m16n8k32_e4m3, _e5m2) against
// the fragment layouts as CUTLASS's CuTe states them (cute/atom/mma_traits_sm89.hpp,
// SM89_16x8x32_F32E4M3E4M3F32_TN, the same as the ISA's "Matrix Fragments for mma.m16n8k32"):
// each lane places its bytes by those layouts' (thread, value) -> offset maps, written here as
// the traits give them, not as the simulator computes them. Two warps, each with its own A, B
// and C; the values are small integers and halves, so every sum is exact and the check is
// equality. Runs natively on a GPU of sm_89 or later and on the simulator; exit 77 elsewhere.
//   ./build/sim/tests/cudasim/cudasim_test_fp8_mma_sim
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_fp8.h>

#include "device/mma.cuh"

#include "sim_test.h"

constexpr int warps = 2;

// CuTe's layouts, (T32, V) -> offset in a column-major M x K (A), N x K (B) or M x N (C) tile;
// lane = t0 + 4 t1.
//   A: ((4,8),(4,2,2)) : ((64,1),(16,8,256))   offset -> (m = offset % 16, k = offset / 16)
//   B: ((4,8),(4,2))   : ((32,1),(8,128))      offset -> (n = offset % 8,  k = offset / 8)
//   C: ((4,8),(2,2))   : ((32,1),(16,8))       offset -> (m = offset % 16, n = offset / 16)
__host__ __device__ inline int a_offset(int lane, int v) {
    return 64 * (lane % 4) + lane / 4 + 16 * (v % 4) + 8 * (v / 4 % 2) + 256 * (v / 8);
}
__host__ __device__ inline int b_offset(int lane, int v) {
    return 32 * (lane % 4) + lane / 4 + 8 * (v % 4) + 128 * (v / 4);
}
__host__ __device__ inline int c_offset(int lane, int v) {
    return 32 * (lane % 4) + lane / 4 + 16 * (v % 2) + 8 * (v / 2);
}

// a: [warp][16][32] codes, b: [warp][32][8] codes (row-major [k][n]), c, d: [warp][16][8].
__global__ void fp8_mma(const uint8_t *a, const uint8_t *b, const float *c, float *d, int e5m2) {
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    a += w * 16 * 32;
    b += w * 32 * 8;
    uint32_t fa[4] = {}, fb[2] = {};
    for (int v = 0; v < 16; ++v) { // value v is byte v % 4 of register v / 4
        int off = a_offset(lane, v);
        fa[v / 4] |= static_cast<uint32_t>(a[(off % 16) * 32 + off / 16]) << 8 * (v % 4);
    }
    for (int v = 0; v < 8; ++v) {
        int off = b_offset(lane, v);
        fb[v / 4] |= static_cast<uint32_t>(b[(off / 8) * 8 + off % 8]) << 8 * (v % 4);
    }
    float acc[4];
    for (int v = 0; v < 4; ++v) {
        int off = c_offset(lane, v);
        acc[v] = c[(w * 16 + off % 16) * 8 + off / 16];
    }
    if (e5m2)
        mma_m16n8k32_e5m2(acc, fa, fb, acc);
    else
        mma_m16n8k32_e4m3(acc, fa, fb, acc);
    for (int v = 0; v < 4; ++v) {
        int off = c_offset(lane, v);
        d[(w * 16 + off % 16) * 8 + off / 16] = acc[v];
    }
}

static void check(bool e5m2) {
    // Exactly representable in both formats: integers -8..8 and a few halves and quarters.
    const float pool[] = {-8, -7, -6, -5, -4, -3,   -2,    -1,    0,       1,    2,     3,
                          4,  5,  6,  7,  8,  0.5f, -0.5f, 0.25f, -0.375f, 1.5f, -1.5f, 0.375f};
    const int pool_n = sizeof pool / sizeof pool[0];
    __nv_fp8_interpretation_t f = e5m2 ? __NV_E5M2 : __NV_E4M3;
    std::vector<float> av(warps * 16 * 32), bv(warps * 32 * 8), c(warps * 16 * 8);
    std::vector<uint8_t> a(av.size()), b(bv.size());
    srand(e5m2 ? 7 : 3);
    for (size_t i = 0; i < av.size(); ++i) {
        av[i] = pool[rand() % pool_n];
        a[i] = __nv_cvt_float_to_fp8(av[i], __NV_SATFINITE, f);
    }
    for (size_t i = 0; i < bv.size(); ++i) {
        bv[i] = pool[rand() % pool_n];
        b[i] = __nv_cvt_float_to_fp8(bv[i], __NV_SATFINITE, f);
    }
    for (float &x : c)
        x = static_cast<float>(rand() % 17 - 8);
    uint8_t *d_a = sim_test_upload(a), *d_b = sim_test_upload(b);
    float *d_c = sim_test_upload(c), *d_d = sim_test_alloc<float>(c.size());
    fp8_mma<<<1, warps * 32>>>(d_a, d_b, d_c, d_d, e5m2);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> d = sim_test_download(d_d, c.size());
    sim_test_free(d_a, d_b, d_c, d_d);
    int bad = 0;
    for (int w = 0; w < warps; ++w)
        for (int m = 0; m < 16; ++m)
            for (int n = 0; n < 8; ++n) {
                double want = c[(w * 16 + m) * 8 + n];
                for (int k = 0; k < 32; ++k)
                    want +=
                        static_cast<double>(av[(w * 16 + m) * 32 + k]) * bv[(w * 32 + k) * 8 + n];
                float got = d[(w * 16 + m) * 8 + n];
                if (got != want && ++bad <= 5)
                    std::fprintf(stderr, "%s warp %d D[%d][%d] = %g, expected %g\n",
                                 e5m2 ? "e5m2" : "e4m3", w, m, n, got, want);
            }
    CHECK(bad == 0);
}

int main() {
    if (sim_test_no_gpu("test_fp8_mma"))
        return 77;
#ifndef CUDASIM
    // The code the GPU runs: the gpu build compiles sm_80 and sm_90, so an sm_89 GPU runs the
    // sm_80 code, which has no FP8 mma (the wrapper traps there).
    cudaFuncAttributes attr;
    CHECK_CUDA(cudaFuncGetAttributes(&attr, fp8_mma));
    if (attr.binaryVersion < 89) {
        std::printf("test_fp8_mma: FP8 mma needs code for sm_89 or later (this GPU runs sm_%d's),"
                    " skipped\n",
                    attr.binaryVersion);
        return 77;
    }
#endif
    check(false);
    check(true);
    return sim_test_result("test_fp8_mma");
}
