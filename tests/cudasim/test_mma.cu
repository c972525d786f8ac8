// test_mma.cu — the tensor-core wrappers of device/mma.cuh against the PTX ISA's fragment layouts:
// every ldmatrix variant element by element, mma.sync m16n8k16 (f16, bf16) fed by ldmatrix as a
// FlashAttention-2 kernel feeds it against a CPU matrix product, cp.async with zero-fill, and
// four warps with tiles of their own in one block. The same program runs natively on a GPU
// (gpu backend) and exits 77 where there is none.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "device/mma.cuh"
#include <attn/half.h>

#include "sim_test.h"

constexpr int warps = 4;
constexpr int threads = warps * 32;
constexpr int row_slot = 24; // elements between stored rows (48 bytes: padded, still aligned)

// ---- ldmatrix --------------------------------------------------------------------------------
// Matrix i of warp w holds value(w, i, r, c) at row r, column c; its 32 rows lie in shuffled
// slots, so each lane's address matters. Lanes whose address the instruction ignores pass a row
// of 0xFFFF that must not show up.
__host__ __device__ inline uint16_t ld_value(int w, int i, int r, int c) {
    return static_cast<uint16_t>(w * 256 + i * 64 + r * 8 + c);
}
__host__ __device__ inline int ld_slot(int row) { return (row * 13 + 5) % 32; }

enum { var_x4, var_x2, var_x4_trans, var_x2_trans, variants };

__global__ void ldmatrix_layouts(uint32_t *out) {
    __shared__ __align__(16) uint16_t rows[warps][33][row_slot];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    for (int c = 0; c < row_slot; ++c) {
        rows[w][ld_slot(lane)][c] = c < 8 ? ld_value(w, lane / 8, lane % 8, c) : 0;
        if (lane == 0)
            rows[w][32][c] = 0xffff;
    }
    __syncwarp();
    const uint16_t *mine = rows[w][ld_slot(lane)];
    const uint16_t *x2_row = lane < 16 ? mine : rows[w][32];
    uint32_t r[variants][4] = {};
    ldmatrix_x4(r[var_x4], mine);
    ldmatrix_x2(r[var_x2], x2_row);
    ldmatrix_x4_trans(r[var_x4_trans], mine);
    ldmatrix_x2_trans(r[var_x2_trans], x2_row);
    for (int v = 0; v < variants; ++v)
        for (int i = 0; i < 4; ++i)
            out[((w * variants + v) * 32 + lane) * 4 + i] = r[v][i];
}

static void check_ldmatrix() {
    size_t n = warps * variants * 32 * 4;
    uint32_t *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n * sizeof(uint32_t)));
    ldmatrix_layouts<<<1, threads>>>(d_out);
    CHECK_CUDA(cudaGetLastError());
    std::vector<uint32_t> out(n);
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(d_out));
    int bad = 0;
    for (int w = 0; w < warps; ++w)
        for (int v = 0; v < variants; ++v)
            for (int lane = 0; lane < 32; ++lane) {
                int g = lane / 4, t = lane % 4;
                bool trans = v == var_x4_trans || v == var_x2_trans;
                int num = v == var_x4 || v == var_x4_trans ? 4 : 2;
                for (int i = 0; i < 4; ++i) {
                    // The ISA: plain (M[g][2t], M[g][2t+1]); .trans (M[2t][g], M[2t+1][g]).
                    uint32_t lo = trans ? ld_value(w, i, 2 * t, g) : ld_value(w, i, g, 2 * t);
                    uint32_t hi =
                        trans ? ld_value(w, i, 2 * t + 1, g) : ld_value(w, i, g, 2 * t + 1);
                    uint32_t want = i < num ? lo | hi << 16 : 0;
                    uint32_t got = out[((w * variants + v) * 32 + lane) * 4 + i];
                    if (got != want && ++bad <= 5)
                        std::fprintf(stderr,
                                     "ldmatrix variant %d warp %d lane %d r[%d]: 0x%08x, "
                                     "expected 0x%08x\n",
                                     v, w, lane, i, got, want);
                }
            }
    CHECK(bad == 0);
}

// ---- mma fed by ldmatrix ---------------------------------------------------------------------
// Warp w multiplies its own A (16 x 16) by its own B (16 x 8) and adds its own C. A and B come
// from global memory by cp.async into padded shared tiles, then to fragments by ldmatrix: A by
// x4; B twice, by x2.trans from MN-major storage, [k][n] (as V in P * V), and by x2 from K-major
// storage, [n][k] (as K in Q * K^T; "X-major": X is the contiguous dimension, device/mma.cuh).
// d[w][0] and d[w][1] are the two results, 16 x 8 each.
struct mma_tiles {
    uint16_t a[16][row_slot], bk[16][row_slot], bn[8][row_slot];
};

__global__ void mma_from_shared(const uint16_t *a, const uint16_t *b, const float *c, float *d,
                                int bf16) {
    __shared__ __align__(16) mma_tiles tiles[warps];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    int g = lane / 4, t = lane % 4;
    mma_tiles &s = tiles[w];
    a += w * 16 * 16;
    b += w * 16 * 8;
    // A: 32 chunks of 16 bytes, one per lane; B MN-major by lanes 0..15, K-major by 16..31 (the
    // K-major copy is transposed by plain stores, cp.async copies only contiguous bytes).
    cp_async_16(&s.a[lane / 2][lane % 2 * 8], a + lane * 8, true);
    if (lane < 16)
        cp_async_16(&s.bk[lane][0], b + lane * 8, true);
    cp_async_commit();
    for (int e = lane; e < 16 * 8; e += 32)
        s.bn[e % 8][e / 8] = b[e];
    cp_async_wait<0>();
    __syncwarp();

    uint32_t fa[4], fbk[2], fbn[2];
    ldmatrix_x4(fa, &s.a[lane % 16][lane / 16 * 8]);
    ldmatrix_x2_trans(fbk, &s.bk[lane % 16][0]);
    ldmatrix_x2(fbn, &s.bn[lane % 8][lane / 8 % 2 * 8]);

    const float *cw = c + w * 16 * 8;
    float acc[2][4];
    for (int i = 0; i < 4; ++i) // the C/D layout: row g + 8 * (i / 2), column 2t + i % 2
        acc[0][i] = acc[1][i] = cw[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    if (bf16) {
        mma_m16n8k16_bf16(acc[0], fa, fbk, acc[0]);
        mma_m16n8k16_bf16(acc[1], fa, fbn, acc[1]);
    } else {
        mma_m16n8k16_f16(acc[0], fa, fbk, acc[0]);
        mma_m16n8k16_f16(acc[1], fa, fbn, acc[1]);
    }
    for (int v = 0; v < 2; ++v)
        for (int i = 0; i < 4; ++i)
            d[((w * 2 + v) * 16 + g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[v][i];
}

static float lowp(uint16_t bits, bool bf16) {
    return bf16 ? attn_bf16_to_f32(bits) : attn_f16_to_f32(bits);
}

// integers: small integers (every sum exact); otherwise uniform in [-1, 1).
static void check_mma(bool bf16, bool integers) {
    const char *what = bf16 ? "bf16" : "f16";
    std::vector<uint16_t> a(warps * 16 * 16), b(warps * 16 * 8);
    std::vector<float> c(warps * 16 * 8);
    srand(bf16 * 2 + integers + 1);
    auto value = [&](int range) {
        return integers ? static_cast<float>(rand() % (2 * range + 1) - range)
                        : static_cast<float>(rand()) / RAND_MAX * 2.0f - 1.0f;
    };
    for (uint16_t &x : a)
        x = bf16 ? attn_f32_to_bf16(value(4)) : attn_f32_to_f16(value(4));
    for (uint16_t &x : b)
        x = bf16 ? attn_f32_to_bf16(value(4)) : attn_f32_to_f16(value(4));
    for (float &x : c)
        x = value(8);

    size_t d_size = warps * 2 * 16 * 8;
    uint16_t *d_a = sim_test_upload(a), *d_b = sim_test_upload(b);
    float *d_c = sim_test_upload(c), *d_d = sim_test_alloc<float>(d_size);
    mma_from_shared<<<1, threads>>>(d_a, d_b, d_c, d_d, bf16);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> d = sim_test_download(d_d, d_size);
    sim_test_free(d_a, d_b, d_c, d_d);

    int bad = 0;
    for (int w = 0; w < warps; ++w)
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 8; ++j) {
                // The order the simulator documents (each product exact in fp32), and a bound
                // for any other order: 16 roundings of partial sums no larger than `mag`.
                float ref = c[(w * 16 + i) * 8 + j];
                double mag = std::fabs(ref);
                for (int k = 0; k < 16; ++k) {
                    float p =
                        lowp(a[(w * 16 + i) * 16 + k], bf16) * lowp(b[(w * 16 + k) * 8 + j], bf16);
                    ref += p;
                    mag += std::fabs(p);
                }
                double tol = integers ? 0.0 : 16 * mag * std::ldexp(1.0, -24);
                for (int v = 0; v < 2; ++v) {
                    float got = d[((w * 2 + v) * 16 + i) * 8 + j];
#ifdef CUDASIM
                    bool ok = got == ref;
#else
                    bool ok = std::fabs(got - ref) <= tol;
#endif
                    if (!ok && ++bad <= 5)
                        std::fprintf(stderr,
                                     "mma %s (%s, B by %s) warp %d D[%d][%d] = %.9g, expected "
                                     "%.9g (tolerance %.3g)\n",
                                     what, integers ? "integers" : "random",
                                     v ? "ldmatrix_x2" : "ldmatrix_x2_trans", w, i, j, got, ref,
                                     tol);
                }
            }
    CHECK(bad == 0);
}

// ---- cp.async ----------------------------------------------------------------------------------
// Thread i copies 16 bytes into slot i of shared memory when i % 3 != 0 and zero-fills it
// otherwise, passing a source just past the end of the input (it must not be read). Two groups
// (even, odd threads' halves) exercise wait_group 1 and 0.
__global__ void cp_async_fill(const uint32_t *in, uint32_t *out, int n) {
    extern __shared__ __align__(16) uint32_t slots[];
    int i = threadIdx.x;
    bool pred = i % 3 != 0;
    const uint32_t *src = pred ? in + i * 4 : in + n * 4;
    cp_async_16(&slots[i * 4], src, pred);
    cp_async_commit();
    cp_async_16(&slots[(n + i) * 4], in + i * 4, true);
    cp_async_commit();
    cp_async_wait<1>();
    cp_async_wait<0>();
    cp_async_wait_all();
    __syncthreads();
    // Read another thread's slots: the barrier above is what makes the copies visible.
    int j = (i + 1) % n;
    for (int k = 0; k < 4; ++k) {
        out[j * 4 + k] = slots[j * 4 + k];
        out[(n + j) * 4 + k] = slots[(n + j) * 4 + k];
    }
}

static void check_cp_async() {
    const int n = 64;
    std::vector<uint32_t> in(n * 4);
    for (int e = 0; e < n * 4; ++e)
        in[e] = 0x10000u + e;
    uint32_t *d_in, *d_out;
    CHECK_CUDA(cudaMalloc(&d_in, in.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_out, 2 * in.size() * 4));
    CHECK_CUDA(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
    cp_async_fill<<<1, n, 2 * n * 16>>>(d_in, d_out, n);
    CHECK_CUDA(cudaGetLastError());
    std::vector<uint32_t> out(2 * n * 4);
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_out));
    int bad = 0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < 4; ++k) {
            bad += out[i * 4 + k] != (i % 3 ? in[i * 4 + k] : 0u);
            bad += out[(n + i) * 4 + k] != in[i * 4 + k];
        }
    CHECK(bad == 0);
}

int main() {
    if (sim_test_no_gpu("test_mma"))
        return 77;
    check_ldmatrix();
    for (int bf16 = 0; bf16 < 2; ++bf16)
        for (int integers = 1; integers >= 0; --integers)
            check_mma(bf16, integers);
    check_cp_async();
    return sim_test_result("test_mma");
}
