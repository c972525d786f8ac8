// device/mma.cuh — tensor-core building blocks for the FlashAttention-2 kernels: mma.sync
// m16n8k16 (f16 and bf16 inputs, f32 accumulators), ldmatrix and cp.async.
//
// Each function is one PTX instruction on a GPU (inline asm, sm_80 or newer). Inline PTX cannot
// be compiled for the host, so under the simulator (CUDASIM, see common/cudasim/README.md) each
// calls the simulator's version of the instruction (common/cudasim/include/cudasim/ptx.h), which
// reproduces its per-lane fragment layout exactly. A kernel written on top of them is the
// same code on both backends. Like the instructions, every function except cp.async must be
// called by all 32 lanes of the warp together (the simulator reports a lane that does not).
//
// Notation: lane = %laneid, g = lane / 4 (groupID), t = lane % 4 (threadID_in_group); a .b32
// register holds two 16-bit elements, the first (lower column or row index) in its low half.
// The layouts are those of the PTX ISA, sections "Matrix Fragments for mma.m16n8k16 with floating
// point type" and "Warp-level matrix load instruction: ldmatrix".
//
// ---- mma_m16n8k16_f16 / _bf16: D = A * B + C ----------------------------------------------------
//   mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
//
// A, 16 x 16 (m x k), uint32_t a[4]: lane holds row g and g + 8, columns 2t, 2t + 1 of each half.
//
//                 k = 0..7               k = 8..15
//             +----------------------+----------------------+
//   row g     | a[0] = A[g][2t..2t+1] | a[2] = A[g][8+2t..]   |
//   row g + 8 | a[1] = A[g+8][2t..]   | a[3] = A[g+8][8+2t..] |
//             +----------------------+----------------------+
//
//   inside each 8 x 8 quadrant:   k:  0 1 | 2 3 | 4 5 | 6 7
//                               row 0:  L0  | L1  | L2  | L3
//                               row 1:  L4  | L5  | L6  | L7
//                                 ...
//                               row 7:  L28 | L29 | L30 | L31
//
// B, 16 x 8 (k x n), uint32_t b[2]: lane holds column g, rows 2t, 2t + 1 of each half of k.
//
//                 n:  0     1     2    ...    7
//   k = 0, 1      :  L0    L4    L8   ...   L28     b[0] = (B[2t][g], B[2t+1][g])
//   k = 2, 3      :  L1    L5    L9   ...   L29
//   k = 4, 5      :  L2    L6    L10  ...   L30
//   k = 6, 7      :  L3    L7    L11  ...   L31
//   k = 8..15     :  the same lanes again             b[1] = (B[8+2t][g], B[9+2t][g])
//
// C and D, 16 x 8 f32, float c[4], d[4]: one element per register.
//
//                 n:  0, 1   2, 3   4, 5   6, 7
//   row 0         :   L0     L1     L2     L3        c[0] = C[g][2t],   c[1] = C[g][2t+1]
//   row 1         :   L4     L5     L6     L7
//     ...
//   row 7         :   L28    L29    L30    L31
//   rows 8..15    :   the same lanes again           c[2] = C[g+8][2t], c[3] = C[g+8][2t+1]
//
// d may be c (accumulate in place). On the simulator each D element is
//   acc = C[i][j]; for k = 0..15: acc += A[i][k] * B[k][j]   (fp32, in this order)
// where every product is exact in fp32 (11- or 8-bit significands); the tensor core's internal
// accumulation order and rounding are not specified, so a GPU may differ in the last bits.
//
// ---- ldmatrix_x{2,4}[_trans]: load 8 x 8 matrices of 16-bit elements from shared memory ---------
//   ldmatrix.sync.aligned.m8n8.x{2,4}[.trans].shared.b16
//
// Matrix i (0 .. num-1) is read from the 8 row addresses passed by lanes 8i .. 8i+7 (lane 8i + r
// passes row r: 8 contiguous elements, 16 bytes, 16-byte aligned, in shared memory); the
// addresses of lanes 8*num and above are ignored. Register r[i] of every lane receives from
// matrix M = matrix i:
//
//   plain:  (M[g][2t], M[g][2t+1])        .trans:  (M[2t][g], M[2t+1][g])
//
//        col:  0 1 | 2 3 | 4 5 | 6 7             col:  0    1    ...   7
//   row 0:     L0  | L1  | L2  | L3          row 0, 1:   L0   L4   ...   L28
//   row 1:     L4  | L5  | L6  | L7          row 2, 3:   L1   L5   ...   L29
//    ...                                     row 4, 5:   L2   L6   ...   L30
//   row 7:     L28 | L29 | L30 | L31         row 6, 7:   L3   L7   ...   L31
//
// So the plain layout is that of a quadrant of A, the transposed one that of B. With a tile in
// shared memory at `p`, `ld` elements per row ("X-major": X is the contiguous dimension, as in the
// PTX ISA's wgmma section and CuTe):
//   A (16 x 16, row-major):       ldmatrix_x4(a, p + (lane % 16) * ld + (lane / 16) * 8)
//   B stored MN-major, [k][n]     ldmatrix_x2_trans(b, p + (lane % 16) * ld)
//     (V in P * V):
//   B stored K-major, [n][k]      ldmatrix_x2(b, p + (lane % 8) * ld + (lane / 8 % 2) * 8)
//     (K in Q * K^T):
// The simulator reads each lane's row in that lane (so ASan and TSan see the access where the
// GPU makes it) and exchanges the rows with one warp collective.
//
// ---- cp_async_16, cp_async_commit, cp_async_wait<N>, cp_async_wait_all --------------------------
//   cp.async.cg.shared.global [dst], [src], 16, src_size;   (src_size = pred ? 16 : 0)
//   cp.async.commit_group;   cp.async.wait_group N;   cp.async.wait_all;
//
// cp_async_16 copies 16 bytes (both addresses 16-byte aligned) from global to shared memory, or
// writes 16 zero bytes when !pred (the source is then not read). On a GPU the copy completes
// asynchronously: wait for its group, then __syncthreads() before other threads read it. The
// simulator does the same: the destination holds poison (NaN) until the issuing thread's wait
// for its group, and the barrier is still needed (TSan and the sim-check build report it).
#ifndef ATTN_MMA_CUH
#define ATTN_MMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "device/mma.cuh needs sm_80 or newer (mma.sync m16n8k16 with bf16, cp.async)"
#endif

// On the simulator each wrapper is one call of the instruction's emulation (cudasim/ptx.h), and
// every warp-wide wrapper also takes its call site, for the error reports of warp collectives.
#ifdef CUDASIM
#include <cudasim/ptx.h>
#define ATTN_MMA_CALL_SITE CUDASIM_PTX_CALL_SITE
#else
#define ATTN_MMA_CALL_SITE
#endif

// D = A * B + C with f16 inputs (layouts above); d may alias c.
__device__ __forceinline__ void mma_m16n8k16_f16(float *d, const uint32_t *a, const uint32_t *b,
                                                 const float *c ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::mma_m16n8k16<false>(d, a, b, c, "mma_m16n8k16_f16()", file, line);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// D = A * B + C with bf16 inputs (layouts above); d may alias c.
__device__ __forceinline__ void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b,
                                                  const float *c ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::mma_m16n8k16<true>(d, a, b, c, "mma_m16n8k16_bf16()", file, line);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// D = A * B + C with FP8 inputs, m16n8k32 (sm_89 and later; layouts in cudasim/ptx.h, from the
// ISA's "Matrix Fragments for mma.m16n8k32"); d may alias c. A and B are both e4m3 (DeepSeek's
// choice for the indexer and FlashAttention-3's for the forward pass) or both e5m2. Compiled for
// an older GPU, the call traps: such a kernel must not be launched there.
#define ATTN_MMA_FP8(NAME, FMT, PTX_TYPE)                                                          \
    __device__ __forceinline__ void NAME(float *d, const uint32_t *a, const uint32_t *b,           \
                                         const float *c ATTN_MMA_CALL_SITE) {                      \
        ATTN_MMA_FP8_BODY(NAME, FMT, PTX_TYPE)                                                     \
    }
#ifdef CUDASIM
#define ATTN_MMA_FP8_BODY(NAME, FMT, PTX_TYPE)                                                     \
    cudasim::ptx::mma_m16n8k32_fp8<FMT, FMT>(d, a, b, c, #NAME "()", file, line);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define ATTN_MMA_FP8_BODY(NAME, FMT, PTX_TYPE)                                                     \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." PTX_TYPE "." PTX_TYPE ".f32 "            \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"           \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),    \
                   "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
#define ATTN_MMA_FP8_BODY(NAME, FMT, PTX_TYPE) __trap();
#endif
ATTN_MMA_FP8(mma_m16n8k32_e4m3, ATTN_FP8_E4M3, "e4m3")
ATTN_MMA_FP8(mma_m16n8k32_e5m2, ATTN_FP8_E5M2, "e5m2")
#undef ATTN_MMA_FP8
#undef ATTN_MMA_FP8_BODY

// Four 8 x 8 matrices into r[0..3]; lane 8i + j passes row j of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *smem_row ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::ldmatrix<4, false>(r, smem_row, "ldmatrix_x4()", file, line);
#else
    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// Two 8 x 8 matrices into r[0..1]; lanes 0..15 pass the rows, the others' addresses are ignored.
__device__ __forceinline__ void ldmatrix_x2(uint32_t *r, const void *smem_row ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::ldmatrix<2, false>(r, smem_row, "ldmatrix_x2()", file, line);
#else
    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
#endif
}

// ldmatrix_x4 with each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r,
                                                  const void *smem_row ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::ldmatrix<4, true>(r, smem_row, "ldmatrix_x4_trans()", file, line);
#else
    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// ldmatrix_x2 with each matrix transposed.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t *r,
                                                  const void *smem_row ATTN_MMA_CALL_SITE) {
#ifdef CUDASIM
    cudasim::ptx::ldmatrix<2, true>(r, smem_row, "ldmatrix_x2_trans()", file, line);
#else
    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
#endif
}

// 16 bytes from global to shared memory, or 16 zero bytes when !pred (src is then not read).
__device__ __forceinline__ void cp_async_16(void *smem_dst, const void *gmem_src, bool pred) {
#ifdef CUDASIM
    cudasim::ptx::cp_async_16(smem_dst, gmem_src, pred);
#else
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(__cvta_generic_to_global(gmem_src)), "r"(pred ? 16 : 0)
                 : "memory");
#endif
}

// Closes the group of this thread's cp.async copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#ifdef CUDASIM
    cudasim::ptx::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
    static_assert(N >= 0, "cp_async_wait<N>: N counts pending groups");
#ifdef CUDASIM
    cudasim::ptx::cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Waits for all of this thread's cp.async copies, committed or not.
__device__ __forceinline__ void cp_async_wait_all() {
#ifdef CUDASIM
    cudasim::ptx::cp_async_wait_all();
#else
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

#undef ATTN_MMA_CALL_SITE
#endif // ATTN_MMA_CUH
