// test_sm90.cu — Hopper's asynchronous instructions (device/sm90.cuh) against the layouts as the
// PTX ISA and CUTLASS's CuTe state them, written here as data (facts, not code, from: the PTX ISA,
// "Matrix Descriptor Format", "Shared Memory Matrix Layout" and the wgmma register fragment
// figures; cute/arch/mma_sm90_desc.hpp (GmmaDescriptor's bit fields), cute/atom/
// mma_traits_sm90_gmma.hpp (CLayout_64xN, ALayout_64x16, ALayout_64x32 and the canonical
// K-major and MN-major layouts of make_gmma_desc); the tensor map's swizzle from the PTX ISA's
// "Tensor-map: swizzling modes" and cuda.h's CUtensorMapSwizzle).
//
//   tables   (simulator only) the simulator's layout functions (cudasim/sm90.h) against the data
//   wgmma    A x B on f16, bf16, e4m3 and e5m2, N = 64 and 128, A from shared memory and from
//            registers, every swizzle mode, K-major and MN-major B, four instructions along K
//            (the descriptor advanced as CUTLASS does); operands placed by the data's layouts;
//            small integers, so every sum is exact and the check is equality; and one e4m3 case
//            whose small products Hopper's FP8 accumulation drops (the simulator's model of it,
//            which this case holds a GPU to where it runs natively: not run on one yet)
//   tma      2-D to 5-D boxes in every swizzle mode, with elements outside the tensor (zeros),
//            compared byte for byte with the placement the swizzle table gives; the plain bulk
//            copy
//   pipeline a producer warp loads tiles by TMA into a 2-stage ring guarded by full/empty
//            mbarriers, two consumer warpgroups take turns (named barriers) and run wgmma on them
// Runs natively on an sm_90 GPU (the kernels are compiled for sm_90a) and on the simulator; exit
// 77 on a GPU without them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attn/fp8.h"
#include "attn/half.h"
#include "device/sm90.cuh"

#include "sim_test.h"

// ---- the data
// ------------------------------------------------------------------------------------

// The swizzle patterns (the ISA's figures): the 16-byte chunk that chunk c of row r lands in,
// rows being 128-byte lines of shared memory (addresses 1024-byte aligned for 128B, 512 for 64B,
// 256 for 32B).
static const int sw128[8][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6},
                                {2, 3, 0, 1, 6, 7, 4, 5}, {3, 2, 1, 0, 7, 6, 5, 4},
                                {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
                                {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
static const int sw64[4][4] = {{0, 1, 2, 3}, {1, 0, 3, 2}, {2, 3, 0, 1}, {3, 2, 1, 0}};
static const int sw32[2][2] = {{0, 1}, {1, 0}};

// The swizzled shared address by the tables: chunk bits 4.. and line bits 7.. (span: 128, 64,
// 32; 16 = none).
static uint32_t table_swizzle(uint32_t a, unsigned span) {
    uint32_t chunk = a >> 4, line = a >> 7, c;
    if (span == 128)
        c = sw128[line % 8][chunk % 8], a = (a & ~0x70u) | c << 4;
    else if (span == 64)
        c = sw64[line % 4][chunk % 4], a = (a & ~0x30u) | c << 4;
    else if (span == 32)
        c = sw32[line % 2][chunk % 2], a = (a & ~0x10u) | c << 4;
    return a;
}

// CuTe's layouts as (shape, stride) lists, evaluated as CuTe does: coordinates are taken
// colexicographically (first mode fastest).
struct mode3 {
    int shape[3], stride[3];
};
__host__ __device__ inline int eval3(const mode3 &m, int idx) {
    int off = 0;
    for (int i = 0; i < 3; ++i) {
        off += (idx % m.shape[i]) * m.stride[i];
        idx /= m.shape[i];
    }
    return off;
}
// CLayout_64xN: ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)), offset = m + 64 n.
// ALayout_64x16: ((4,8,4),(2,2,2)) : ((128,1,16),(64,8,512)), offset = m + 64 k.
// ALayout_64x32: ((4,8,4),(4,2,2)) : ((256,1,16),(64,8,1024)), offset = m + 64 k.
__host__ __device__ inline mode3 thr16() { return mode3{{4, 8, 4}, {128, 1, 16}}; }
__host__ __device__ inline mode3 thr8() { return mode3{{4, 8, 4}, {256, 1, 16}}; }
__host__ __device__ inline mode3 c_values(int n) { return mode3{{2, 2, n / 8}, {64, 8, 512}}; }
static const mode3 a16_values = {{2, 2, 2}, {64, 8, 512}}, a8_values = {{4, 2, 2}, {64, 8, 1024}};

// make_gmma_desc's canonical layouts in 16-byte units (T = 16 / element size elements each; W =
// 1, 2, 4, 8 for INTERLEAVE, B32, B64, B128):
//   K-major:  INTERLEAVE ((8,m),2):((1,SBO),LBO)     B<W> ((8,m),2):((W,SBO),1)
//   MN-major: INTERLEAVE ((1,m),(8,k)):((-,SBO),(1,LBO))   B<W> ((W,m),(8,k)):((1,LBO),(W,SBO))
// The byte offset of element (mn, k), before the swizzle.
__host__ __device__ inline uint32_t canonical_offset(bool k_major, unsigned layout, int elem,
                                                     int mn, int k, uint32_t lbo, uint32_t sbo) {
    int T = 16 / elem, W = layout == 1 ? 8 : layout == 2 ? 4 : layout == 3 ? 2 : 1;
    uint32_t L = lbo / 16, S = sbo / 16, units;
    if (k_major) {
        uint32_t row = mn % 8, group = mn / 8, chunk = k / T;
        units = layout == 0 ? row * 1 + group * S + chunk * L : row * W + group * S + chunk * 1;
        return units * 16 + (k % T) * elem;
    }
    uint32_t c = mn / T, krow = k % 8, kgroup = k / 8;
    units = layout == 0 ? c * S + krow * 1 + kgroup * L
                        : (c % W) * 1 + (c / W) * L + krow * W + kgroup * S;
    return units * 16 + (mn % T) * elem;
}
__host__ __device__ inline unsigned span_of(unsigned layout) {
    return layout == 1 ? 128 : layout == 2 ? 64 : layout == 3 ? 32 : 16;
}

// ---- tables (the simulator's functions)
// ------------------------------------------------------------
#ifdef CUDASIM
// GmmaDescriptor's bit fields: start address [0,14), leading byte offset [16,30), stride byte
// offset [32,46), base offset [49,52), layout type [62,64) (INTERLEAVE 0, B128 1, B64 2, B32 3);
// the three offsets in 16-byte units.
struct desc_field {
    int lo, bits;
};
static const desc_field f_start = {0, 14}, f_lbo = {16, 14}, f_sbo = {32, 14}, f_base = {49, 3},
                        f_layout = {62, 2};

static void check_tables() {
    using namespace cudasim::sm90;
    // Descriptors: device/sm90.cuh's encoder and the simulator's decoder against the fields.
    const uint32_t starts[] = {0, 16, 1024, 0x3fff0}, offs[] = {16, 128, 1024, 8192};
    for (uint32_t s : starts)
        for (uint32_t lbo : offs)
            for (unsigned layout = 0; layout < 4; ++layout) {
                uint32_t sbo = 2 * lbo;
                uint64_t want = (uint64_t)(s >> 4) << f_start.lo |
                                (uint64_t)(lbo >> 4) << f_lbo.lo |
                                (uint64_t)(sbo >> 4) << f_sbo.lo | (uint64_t)layout << f_layout.lo;
                matrix_desc m = decode_desc(want);
                CHECK(m.start == s && m.lbo == lbo && m.sbo == sbo && m.layout == layout &&
                      m.base_offset == 0);
                CHECK(decode_desc(want | 5ull << f_base.lo).base_offset == 5);
            }
    // Swizzles.
    for (uint32_t a = 0; a < 4096; a += 4)
        for (unsigned span : {16u, 32u, 64u, 128u})
            CHECK(swizzle_address(a, span) == table_swizzle(a, span));
    // Fragments.
    for (int n : {8, 64, 128, 256})
        for (int t = 0; t < 128; ++t)
            for (int i = 0; i < n / 2; ++i) {
                int off = eval3(thr16(), t) + eval3(c_values(n), i);
                unsigned row, col;
                accum_coord(t, i, &row, &col);
                CHECK((int)row == off % 64 && (int)col == off / 64);
            }
    for (int t = 0; t < 128; ++t) {
        for (int v = 0; v < 8; ++v) {
            int off = eval3(thr16(), t) + eval3(a16_values, v);
            unsigned row, k;
            a_frag_coord(t, v, 2, &row, &k);
            CHECK((int)row == off % 64 && (int)k == off / 64);
        }
        for (int v = 0; v < 16; ++v) {
            int off = eval3(thr8(), t) + eval3(a8_values, v);
            unsigned row, k;
            a_frag_coord(t, v, 1, &row, &k);
            CHECK((int)row == off % 64 && (int)k == off / 64);
        }
    }
    // Canonical layouts.
    for (int elem : {1, 2})
        for (unsigned layout = 0; layout < 4; ++layout)
            for (int km = 0; km < 2; ++km) {
                if (!km && elem == 1)
                    continue; // FP8 operands are K-major only
                uint32_t lbo = 2048, sbo = 1024, start = 4096;
                matrix_desc d{start, lbo, sbo, 0, layout};
                int K = 32 / elem;
                for (int mn = 0; mn < 128; ++mn)
                    for (int k = 0; k < K; ++k) {
                        uint32_t want = table_swizzle(
                            start + canonical_offset(km, layout, elem, mn, k, lbo, sbo),
                            span_of(layout));
                        CHECK(operand_address(d, km, elem, mn, k) == want);
                    }
            }
    // A TMA box: element (e0, e1) of a 64 x 8 box of 2-byte elements at 1024, 128B swizzle.
    uint32_t box[2] = {64, 8};
    for (uint32_t e1 = 0; e1 < 8; ++e1)
        for (uint32_t e0 = 0; e0 < 64; ++e0) {
            uint32_t e[2] = {e0, e1};
            CHECK(box_address(1024, 2, box, e, 2, 128) ==
                  table_swizzle(1024 + (e1 * 64 + e0) * 2, 128));
        }
}
#endif

// ---- wgmma
// -----------------------------------------------------------------------------------------
enum class el { f16, bf16, e4m3, e5m2 };

__host__ __device__ inline int el_size(el t) { return t == el::e4m3 || t == el::e5m2 ? 1 : 2; }

// Operand images (bytes of shared memory from a 1024-aligned base) and the result.
struct wg_case {
    el type;
    int n;       // N
    bool a_regs; // A from registers
    unsigned a_layout, b_layout;
    bool b_mn; // B MN-major
    uint32_t a_lbo, a_sbo, b_lbo, b_sbo;
};
constexpr int ksteps = 4;
constexpr uint32_t a_base = 0, b_base = 32768, smem_image = 65536;

// The descriptor's start for instruction s along K (32 bytes of K each), as CUTLASS advances it.
// K-major swizzled: K runs along the span-wide rows; when the tile's K (128 bytes) is wider than
// the span, the next span of K is a new block of all the tile's rows (mn_count / 8 groups, SBO
// apart). K-major interleave: two core matrices (2 LBO) per instruction. MN-major: two 8-row
// groups along K (2 SBO swizzled, 2 LBO interleave).
__host__ __device__ inline uint32_t k_advance(bool k_major, unsigned layout, uint32_t lbo,
                                              uint32_t sbo, int s, int mn_count) {
    if (k_major) {
        if (layout == 0)
            return s * 2 * lbo;
        uint32_t span = span_of(layout), byte = s * 32;
        return byte / span * (mn_count / 8) * sbo + byte % span;
    }
    return layout == 0 ? s * 2 * lbo : s * 2 * sbo;
}

__global__ void wgmma_kernel(const unsigned char *image, const uint32_t *a_regs_in, float *out,
                             wg_case c) {
    extern __shared__ unsigned char smem_raw[];
    uint32_t sa = smem_address(smem_raw);
    unsigned char *smem = smem_raw + (1024 - sa % 1024) % 1024;
    for (uint32_t i = threadIdx.x; i < smem_image / 16; i += blockDim.x)
        reinterpret_cast<uint4 *>(smem)[i] = reinterpret_cast<const uint4 *>(image)[i];
    __syncthreads();
    fence_proxy_async();
    float d[64];
    for (int i = 0; i < 64; ++i)
        d[i] = 0.0f;
    int t = threadIdx.x;
    wgmma_fence();
    for (int s = 0; s < ksteps; ++s) {
        uint64_t bd =
            wgmma_desc(smem + b_base + k_advance(!c.b_mn, c.b_layout, c.b_lbo, c.b_sbo, s, c.n),
                       c.b_lbo, c.b_sbo, c.b_layout);
        uint64_t ad =
            wgmma_desc(smem + a_base + k_advance(true, c.a_layout, c.a_lbo, c.a_sbo, s, 64),
                       c.a_lbo, c.a_sbo, c.a_layout);
        const uint32_t *ar = a_regs_in + (s * 128 + t) * 4;
        bool acc = s > 0;
#define ATTN_TEST_WG(N)                                                                            \
    if (c.type == el::f16 && !c.a_regs && !c.b_mn)                                                 \
        wgmma_ss_f16<N>(d, ad, bd, acc);                                                           \
    else if (c.type == el::f16 && !c.a_regs)                                                       \
        wgmma_ss_f16<N, 0, 1>(d, ad, bd, acc);                                                     \
    else if (c.type == el::f16 && !c.b_mn)                                                         \
        wgmma_rs_f16<N>(d, ar, bd, acc);                                                           \
    else if (c.type == el::f16)                                                                    \
        wgmma_rs_f16<N, 1>(d, ar, bd, acc);                                                        \
    else if (c.type == el::bf16 && !c.a_regs && !c.b_mn)                                           \
        wgmma_ss_bf16<N>(d, ad, bd, acc);                                                          \
    else if (c.type == el::bf16 && !c.a_regs)                                                      \
        wgmma_ss_bf16<N, 0, 1>(d, ad, bd, acc);                                                    \
    else if (c.type == el::bf16 && !c.b_mn)                                                        \
        wgmma_rs_bf16<N>(d, ar, bd, acc);                                                          \
    else if (c.type == el::bf16)                                                                   \
        wgmma_rs_bf16<N, 1>(d, ar, bd, acc);                                                       \
    else if (c.type == el::e4m3 && !c.a_regs)                                                      \
        wgmma_ss_e4m3<N>(d, ad, bd, acc);                                                          \
    else if (c.type == el::e4m3)                                                                   \
        wgmma_rs_e4m3<N>(d, ar, bd, acc);                                                          \
    else if (!c.a_regs)                                                                            \
        wgmma_ss_e5m2<N>(d, ad, bd, acc);                                                          \
    else                                                                                           \
        wgmma_rs_e5m2<N>(d, ar, bd, acc);
        if (c.n == 64) {
            ATTN_TEST_WG(64)
        } else {
            ATTN_TEST_WG(128)
        }
#undef ATTN_TEST_WG
    }
    wgmma_commit_group();
    wgmma_wait_group<0>();
    wgmma_fence_operand(d);
    for (int i = 0; i < c.n / 2; ++i) {
        int off = eval3(thr16(), t) + eval3(c_values(c.n), i);
        out[(off % 64) * c.n + off / 64] = d[i];
    }
}

static uint16_t encode(el t, float v) {
    if (t == el::f16)
        return attn_f32_to_f16(v);
    if (t == el::bf16)
        return attn_f32_to_bf16(v);
    return attn_fp8_from_f32(v, t == el::e4m3 ? ATTN_FP8_E4M3 : ATTN_FP8_E5M2, true);
}

// tiny (FP8 only): each k32 step's sum is one product of 1 and 31 of 2^-15, which Hopper's FP8
// accumulation (common/cudasim/README.md, "wgmma") drops: 13 bits below the largest exponent
// they are zero. Every element is then ksteps exactly, where fp32 sums would give
// ksteps (1 + 31 2^-15).
static void run_wgmma(const wg_case &c, bool tiny = false) {
    const int es = el_size(c.type), K = ksteps * 32 / es;
    std::vector<float> A(64 * K), B(c.n * K); // A[m][k], B[n][k]
    // Small integers and halves from a hash of the index (no period a transposed or permuted
    // placement could share).
    auto hash = [](uint32_t i) { return (i * 2654435761u) >> 7; };
    for (uint32_t i = 0; i < A.size(); ++i)
        A[i] = tiny ? (i % 32 == 0 ? 1.0f : 0x1p-9f)
                    : static_cast<float>(static_cast<int>(hash(i) % 9) - 4);
    for (uint32_t i = 0; i < B.size(); ++i)
        B[i] = tiny ? (i % 32 == 0 ? 1.0f : 0x1p-6f)
                    : static_cast<float>(static_cast<int>(hash(i + 7919) % 7) - 3) *
                          (hash(i + 104729) % 3 ? 1.0f : 0.5f);
    std::vector<unsigned char> image(smem_image, 0);
    auto put = [&](uint32_t addr, float v) {
        uint16_t bits = encode(c.type, v);
        std::memcpy(&image[addr], &bits, es);
    };
    const int kk = 32 / es; // K per instruction
    for (int s = 0; s < ksteps; ++s)
        for (int k = 0; k < kk; ++k) {
            for (int m = 0; m < 64; ++m) {
                uint32_t start = a_base + k_advance(true, c.a_layout, c.a_lbo, c.a_sbo, s, 64);
                put(table_swizzle(
                        start + canonical_offset(true, c.a_layout, es, m, k, c.a_lbo, c.a_sbo),
                        span_of(c.a_layout)),
                    A[m * K + s * kk + k]);
            }
            for (int n = 0; n < c.n; ++n) {
                uint32_t start = b_base + k_advance(!c.b_mn, c.b_layout, c.b_lbo, c.b_sbo, s, c.n);
                put(table_swizzle(
                        start + canonical_offset(!c.b_mn, c.b_layout, es, n, k, c.b_lbo, c.b_sbo),
                        span_of(c.b_layout)),
                    B[n * K + s * kk + k]);
            }
        }
    // A in registers, by ALayout_64x16 / 64x32: value v of thread t in register v / (4 / es).
    std::vector<uint32_t> regs(ksteps * 128 * 4, 0);
    for (int s = 0; s < ksteps; ++s)
        for (int t = 0; t < 128; ++t)
            for (int v = 0; v < kk / 2; ++v) { // 64 x kk values over 128 threads
                int off = eval3(es == 2 ? thr16() : thr8(), t) +
                          eval3(es == 2 ? a16_values : a8_values, v);
                int m = off % 64, k = off / 64;
                uint32_t bits = encode(c.type, A[m * K + s * kk + k]);
                regs[(s * 128 + t) * 4 + v / (4 / es)] |= bits << (8 * es * (v % (4 / es)));
            }
    std::vector<float> want(64 * c.n, 0.0f);
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < c.n; ++n) {
            double acc = 0;
            for (int k = 0; k < K; ++k)
                acc += (double)A[m * K + k] * B[n * K + k];
            want[m * c.n + n] = tiny ? static_cast<float>(ksteps) : static_cast<float>(acc);
        }
    unsigned char *dimage;
    uint32_t *dregs;
    float *dout;
    CHECK_CUDA(cudaMalloc(&dimage, image.size()));
    CHECK_CUDA(cudaMalloc(&dregs, regs.size() * 4));
    CHECK_CUDA(cudaMalloc(&dout, want.size() * 4));
    CHECK_CUDA(cudaMemcpy(dimage, image.data(), image.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dregs, regs.data(), regs.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0, want.size() * 4));
    const size_t smem = smem_image + 1024;
    CHECK_CUDA(
        cudaFuncSetAttribute(wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    wgmma_kernel<<<1, 128, smem>>>(dimage, dregs, dout, c);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> got(want.size());
    CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i] && bad++ < 3)
            std::fprintf(
                stderr,
                "wgmma type %d N %d a_regs %d layouts %u/%u b_mn %d: D[%zu][%zu] = %g, want %g\n",
                (int)c.type, c.n, c.a_regs, c.a_layout, c.b_layout, c.b_mn, i / c.n, i % c.n,
                got[i], want[i]);
    CHECK(bad == 0);
    cudaFree(dimage);
    cudaFree(dregs);
    cudaFree(dout);
}

static void check_wgmma() {
    // K-major, every mode: interleave with core matrices of 128 bytes, LBO 128 between the two
    // along K and SBO 1024 between 8-row groups (8 core matrices along K each); swizzled with
    // SBO = 8 rows of the span.
    for (el t : {el::f16, el::bf16, el::e4m3, el::e5m2})
        for (int n : {64, 128})
            for (unsigned layout = 0; layout < 4; ++layout)
                for (int a_regs = 0; a_regs < 2; ++a_regs) {
                    uint32_t lbo = layout == 0 ? 128 : 0;
                    uint32_t sbo = layout == 0 ? 128 * 2 * ksteps : 8 * span_of(layout);
                    run_wgmma(
                        wg_case{t, n, a_regs != 0, layout, layout, false, lbo, sbo, lbo, sbo});
                }
    // MN-major B (f16, bf16: V in P V), A K-major 128B. Interleave: 16-byte chunks along N SBO
    // = 128 apart, 8-row groups along K LBO = 1024 apart. Swizzled: 8-row groups along K SBO =
    // 8 spans apart, span-wide columns along N LBO apart after all of K.
    for (el t : {el::f16, el::bf16})
        for (int n : {64, 128})
            for (unsigned layout = 0; layout < 4; ++layout)
                for (int a_regs = 0; a_regs < 2; ++a_regs) {
                    uint32_t span = span_of(layout);
                    uint32_t lbo = layout == 0 ? 1024 : 8 * span * 2 * ksteps;
                    uint32_t sbo = layout == 0 ? 128 : 8 * span;
                    if (layout == 0 && n == 128)
                        lbo = 2048; // 16 chunks along N before the next 8-row group
                    run_wgmma(wg_case{t, n, a_regs != 0, 1, layout, true, 0, 1024, lbo, sbo});
                }
    // FP8's sums: the products below the step's quantum vanish (A from shared memory and from
    // registers, 128B swizzle).
    for (int a_regs = 0; a_regs < 2; ++a_regs)
        run_wgmma(
            wg_case{el::e4m3, 64, a_regs != 0, 3, 3, false, 0, 8 * span_of(3), 0, 8 * span_of(3)},
            true);
}

// ---- TMA
// -------------------------------------------------------------------------------------------
struct tma_case {
    CUtensorMapDataType type;
    int elem, rank;
    uint64_t dim[5];
    uint32_t box[5];
    int coord[5];
    CUtensorMapSwizzle swizzle;
};

// One thread loads the box; every thread waits on the mbarrier, then the block copies the
// shared bytes out as they lie.
__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, tma_case c, uint32_t bytes,
                           unsigned char *out) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t bar;
    uint32_t sa = smem_address(smem_raw);
    unsigned char *tile = smem_raw + (1024 - sa % 1024) % 1024;
    if (threadIdx.x == 0) {
        mbarrier_init(&bar, 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(&bar, bytes);
        const int *k = c.coord;
        if (c.rank == 2)
            tma_load_2d(tile, &map, &bar, k[0], k[1]);
        else if (c.rank == 3)
            tma_load_3d(tile, &map, &bar, k[0], k[1], k[2]);
        else if (c.rank == 4)
            tma_load_4d(tile, &map, &bar, k[0], k[1], k[2], k[3]);
        else
            tma_load_5d(tile, &map, &bar, k[0], k[1], k[2], k[3], k[4]);
    }
    mbarrier_wait(&bar, 0);
    for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x)
        out[i] = tile[i];
}

static void run_tma(const tma_case &c) {
    size_t n = 1, box_n = 1;
    for (int d = 0; d < c.rank; ++d)
        n *= c.dim[d], box_n *= c.box[d];
    std::vector<unsigned char> host(n * c.elem);
    for (size_t i = 0; i < host.size(); ++i)
        host[i] = static_cast<unsigned char>((i * 2654435761u) >> 11);
    unsigned char *dsrc, *dout;
    uint32_t bytes = static_cast<uint32_t>(box_n * c.elem);
    CHECK_CUDA(cudaMalloc(&dsrc, host.size()));
    CHECK_CUDA(cudaMalloc(&dout, bytes));
    CHECK_CUDA(cudaMemcpy(dsrc, host.data(), host.size(), cudaMemcpyHostToDevice));
    CUtensorMap map;
    cuuint64_t strides[4];
    cuuint32_t ones[5] = {1, 1, 1, 1, 1};
    for (int d = 1; d < c.rank; ++d)
        strides[d - 1] = (d == 1 ? c.elem : strides[d - 2]) * c.dim[d - 1];
    CHECK(attn_encode_tensor_map(&map, c.type, c.rank, dsrc, c.dim, strides, c.box, ones,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, c.swizzle,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
    tma_kernel<<<1, 128, bytes + 1024>>>(map, c, bytes, dout);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<unsigned char> got(bytes);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost));
    // The box in order (dimension 0 fastest), each element at the swizzled place of its dense
    // offset (the tile is 1024-byte aligned); zeros outside the tensor.
    unsigned span = c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? 128
                    : c.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                    : c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                                                             : 16;
    int bad = 0;
    for (size_t i = 0; i < box_n; ++i) {
        size_t r = i, src = 0;
        bool inside = true;
        for (int d = 0, stride = c.elem; d < c.rank; ++d) {
            long g = c.coord[d] + static_cast<long>(r % c.box[d]);
            r /= c.box[d];
            inside = inside && g >= 0 && g < static_cast<long>(c.dim[d]);
            src += g * stride;
            stride *= static_cast<int>(c.dim[d]);
        }
        uint32_t at = table_swizzle(static_cast<uint32_t>(i * c.elem), span);
        for (int b = 0; b < c.elem; ++b) {
            unsigned char want = inside ? host[src + b] : 0;
            if (got[at + b] != want && bad++ < 3)
                std::fprintf(stderr,
                             "tma rank %d swizzle %d: box element %zu byte %d = %u, want %u\n",
                             c.rank, (int)c.swizzle, i, b, got[at + b], want);
        }
    }
    CHECK(bad == 0);
    cudaFree(dsrc);
    cudaFree(dout);
}

static void check_tma() {
    // 2-D f16 128B (K or V tile: 64 elements = 128 bytes per row), partly past both ends.
    run_tma({CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             2,
             2,
             {104, 70},
             {64, 16},
             {40, 60},
             CU_TENSOR_MAP_SWIZZLE_128B});
    run_tma({CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             2,
             2,
             {64, 64},
             {64, 64},
             {0, 0},
             CU_TENSOR_MAP_SWIZZLE_128B});
    // 3-D bf16 64B, one coordinate negative.
    run_tma({CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             2,
             3,
             {40, 9, 3},
             {32, 8, 2},
             {-8, 2, 1},
             CU_TENSOR_MAP_SWIZZLE_64B});
    // 4-D bytes 32B; 5-D floats, no swizzle.
    run_tma({CU_TENSOR_MAP_DATA_TYPE_UINT8,
             1,
             4,
             {48, 5, 4, 3},
             {32, 4, 2, 2},
             {16, 2, 3, 0},
             CU_TENSOR_MAP_SWIZZLE_32B});
    run_tma({CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
             4,
             5,
             {12, 3, 2, 2, 3},
             {8, 2, 2, 1, 2},
             {4, 2, 0, 1, 2},
             CU_TENSOR_MAP_SWIZZLE_NONE});
#ifdef CUDASIM
    // The driver's rules: an inner box wider than the span, a stride that is not a multiple of 16.
    CUtensorMap map;
    void *p;
    CHECK_CUDA(cudaMalloc(&p, 1 << 16));
    cuuint64_t dim[2] = {128, 64}, stride[1] = {256}, odd[1] = {200};
    cuuint32_t box[2] = {128, 8}, ones[2] = {1, 1};
    CHECK(attn_encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p, dim, stride, box,
                                 ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_ERROR_INVALID_VALUE);
    box[0] = 64;
    CHECK(attn_encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p, dim, odd, box, ones,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_ERROR_INVALID_VALUE);
    cudaFree(p);
#endif
}

// The plain bulk copy: 4 KiB from an offset of a global buffer into shared memory, two copies on
// one mbarrier (the transaction count is their sum), copied back out.
__global__ void bulk_kernel(const unsigned char *src, unsigned char *out) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t bar;
    if (threadIdx.x == 0) {
        mbarrier_init(&bar, 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(&bar, 4096 + 1024);
        bulk_copy_g2s(smem_raw, src + 512, 4096, &bar);
        bulk_copy_g2s(smem_raw + 4096, src + 8192, 1024, &bar);
    }
    mbarrier_wait(&bar, 0);
    for (int i = threadIdx.x; i < 5120; i += blockDim.x)
        out[i] = smem_raw[i];
}

static void check_bulk() {
    std::vector<unsigned char> host(16384), got(5120);
    for (size_t i = 0; i < host.size(); ++i)
        host[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
    unsigned char *dsrc, *dout;
    CHECK_CUDA(cudaMalloc(&dsrc, host.size()));
    CHECK_CUDA(cudaMalloc(&dout, got.size()));
    CHECK_CUDA(cudaMemcpy(dsrc, host.data(), host.size(), cudaMemcpyHostToDevice));
    bulk_kernel<<<1, 128, 5120>>>(dsrc, dout);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size(), cudaMemcpyDeviceToHost));
    CHECK(std::memcmp(got.data(), host.data() + 512, 4096) == 0);
    CHECK(std::memcmp(got.data() + 4096, host.data() + 8192, 1024) == 0);
    cudaFree(dsrc);
    cudaFree(dout);
}

// ---- a warp-specialised pipeline
// ------------------------------------------------------------------ Warpgroup 0 produces: one
// thread loads A (64 x 64 f16) once and then tiles B_j (64 x 64) by TMA into a ring of 2 stages
// (full[s]: the bytes landed; empty[s]: the consumer released the stage). Warpgroups 1 and 2
// consume tiles j = 1, 3, ... and j = 0, 2, ... in turn, ordered by two named barriers (ping-pong),
// each computing D_j = A B_j^T with four wgmma along K.
constexpr int pipe_tiles = 6, pipe_stages = 2;
constexpr uint32_t tile_bytes = 64 * 64 * 2;

__global__ void pipeline_kernel(const __grid_constant__ CUtensorMap amap,
                                const __grid_constant__ CUtensorMap bmap, float *out) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t full[pipe_stages], empty[pipe_stages], a_full;
    uint32_t sa = smem_address(smem_raw);
    unsigned char *a_tile = smem_raw + (1024 - sa % 1024) % 1024;
    unsigned char *ring = a_tile + tile_bytes;
    int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < pipe_stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], 1);
        }
        mbarrier_init(&a_full, 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (t == 0) {
            mbarrier_arrive_expect_tx(&a_full, tile_bytes);
            tma_load_2d(a_tile, &amap, &a_full, 0, 0);
            for (int j = 0; j < pipe_tiles; ++j) {
                int s = j % pipe_stages;
                if (j >= pipe_stages)
                    mbarrier_wait(&empty[s], (j / pipe_stages - 1) % 2);
                mbarrier_arrive_expect_tx(&full[s], tile_bytes);
                tma_load_2d(ring + s * tile_bytes, &bmap, &full[s], 0, 64 * j);
            }
        }
        return;
    }
    setmaxnreg_inc<232>();
    int me = wg - 1; // consumer 0 takes the odd tiles, consumer 1 the even ones, 1 starting
    if (me == 1)
        named_barrier_arrive(1, 256); // let consumer 0 go first... after consumer 1's first tile
    mbarrier_wait(&a_full, 0);
    for (int j = 1 - me; j < pipe_tiles; j += 2) {
        int s = j % pipe_stages;
        mbarrier_wait(&full[s], (j / pipe_stages) % 2);
        named_barrier_sync(1 + me, 256); // my turn
        float d[32];
        wgmma_fence();
        for (int k = 0; k < 4; ++k)
            wgmma_ss_f16<64>(d, wgmma_desc(a_tile + 32 * k, 0, 1024, ATTN_SMEM_SW128),
                             wgmma_desc(ring + s * tile_bytes + 32 * k, 0, 1024, ATTN_SMEM_SW128),
                             k > 0);
        wgmma_commit_group();
        named_barrier_arrive(2 - me, 256); // the other's turn
        wgmma_wait_group<0>();
        wgmma_fence_operand(d);
        if (t == 0)
            mbarrier_arrive(&empty[s]);
        for (int i = 0; i < 32; ++i) {
            int off = eval3(thr16(), t) + eval3(c_values(64), i);
            out[(j * 64 + off % 64) * 64 + off / 64] = d[i];
        }
    }
}

static CUtensorMap tile_map(void *p, uint64_t rows) {
    CUtensorMap map;
    cuuint64_t dim[2] = {64, rows}, stride[1] = {128};
    cuuint32_t box[2] = {64, 64}, ones[2] = {1, 1};
    CHECK(attn_encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p, dim, stride, box,
                                 ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
    return map;
}

static void check_pipeline() {
    const int rows = 64 * pipe_tiles;
    std::vector<uint16_t> a(64 * 64), b(rows * 64);
    std::vector<float> af(a.size()), bf(b.size());
    auto hash = [](uint32_t i) { return (i * 2654435761u) >> 9; };
    for (uint32_t i = 0; i < a.size(); ++i)
        af[i] = static_cast<float>(static_cast<int>(hash(i) % 7) - 3),
        a[i] = attn_f32_to_f16(af[i]);
    for (uint32_t i = 0; i < b.size(); ++i)
        bf[i] = static_cast<float>(static_cast<int>(hash(i + 31) % 5) - 2),
        b[i] = attn_f32_to_f16(bf[i]);
    void *da, *db;
    float *dout;
    CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
    CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
    CHECK_CUDA(cudaMalloc(&dout, rows * 64 * 4));
    CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    CUtensorMap amap = tile_map(da, 64), bmap = tile_map(db, rows);
    size_t smem = 1024 + tile_bytes * (1 + pipe_stages);
    CHECK_CUDA(cudaFuncSetAttribute(pipeline_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem));
#ifdef CUDASIM
    cudasim::sm90::take_counts();
#endif
    pipeline_kernel<<<1, 384, smem>>>(amap, bmap, dout);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> got(rows * 64);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int j = 0; j < pipe_tiles; ++j)
        for (int m = 0; m < 64; ++m)
            for (int n = 0; n < 64; ++n) {
                float want = 0;
                for (int k = 0; k < 64; ++k)
                    want += af[m * 64 + k] * bf[(j * 64 + n) * 64 + k];
                if (got[(j * 64 + m) * 64 + n] != want && bad++ < 3)
                    std::fprintf(stderr, "pipeline tile %d D[%d][%d] = %g, want %g\n", j, m, n,
                                 got[(j * 64 + m) * 64 + n], want);
            }
    CHECK(bad == 0);
#ifdef CUDASIM
    // What the simulator counted: 7 TMA copies of 8 KiB, 4 wgmma per tile, each reading A and B
    // (2 x 64 x 16 x 2 bytes), and the setmaxnreg of 12 warps.
    cudasim::sm90::counts n = cudasim::sm90::take_counts();
    CHECK(n.tma_copies == 1 + pipe_tiles && n.tma_bytes == (1 + pipe_tiles) * tile_bytes);
    CHECK(n.wgmma_ops == 4 * pipe_tiles &&
          n.wgmma_smem_bytes == 4ull * pipe_tiles * 2 * 64 * 16 * 2);
    CHECK(n.setmaxnreg == 12);
#endif
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
}

int main() {
    int dev_count = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0 ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
        std::printf("test_sm90: no sm_90 GPU here\n");
        return 77;
    }
#ifdef CUDASIM
    check_tables();
#endif
    check_wgmma();
    check_tma();
    check_bulk();
    check_pipeline();
    return sim_test_result("test_sm90");
}
