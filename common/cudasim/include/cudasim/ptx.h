// cudasim/ptx.h — the simulator's versions of the PTX instructions that common/device/mma.cuh
// wraps: mma.sync m16n8k16 (f16 and bf16 inputs, f32 accumulators), mma.sync m16n8k32 (e4m3 and
// e5m2 inputs, f32 accumulators), ldmatrix and cp.async.
//
// Inline PTX cannot be compiled for the host, so under the simulator each wrapper of mma.cuh
// calls the function here with the same operands. Each reproduces the instruction's per-lane
// fragment layout exactly (the layouts are drawn in mma.cuh, from the PTX ISA, sections "Matrix
// Fragments for mma.m16n8k16 with floating point type" and "Warp-level matrix load instruction:
// ldmatrix"), built on cudasim::warp_allgather: one warp collective per call, so a lane that
// exited or lanes that call different functions are reported at the call site (file, line).
//
//   mma_m16n8k16<bf16>   each D element: acc = C[i][j]; for k = 0..15: acc += A[i][k] * B[k][j]
//                        (fp32, in this order; every product is exact in fp32). The tensor
//                        core's accumulation order and rounding are not specified, so a GPU may
//                        differ in the last bits.
//   ldmatrix<num, trans> each lane reads its own row (so ASan and TSan see the access where the
//                        GPU makes it), then the rows are exchanged with one warp collective.
//   cp_async_16          as the hardware: the destination holds poison (0xFF bytes: NaN) from
//                        the issue until the issuing thread's cp_async_wait for its commit group
//                        (or wait_all), so a missing wait or a wrong group count shows in the
//                        results (and the sim-check build names the read). The kernel's barrier
//                        after the wait is still needed: TSan and racecheck report its absence.
#ifndef CUDASIM_PTX_H
#define CUDASIM_PTX_H

#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>
#include <cudasim/half_types.h>

#include "../../../include/attn/fp8.h"

// The trailing parameters a warp-wide wrapper takes on the simulator: its call site, for the
// error reports of warp collectives.
#define CUDASIM_PTX_CALL_SITE , const char *file = __builtin_FILE(), int line = __builtin_LINE()

namespace cudasim {
namespace detail {
// The runtime's side (common/cudasim/src/checkers.cpp): per simulated thread, pending copies by
// commit group; and, in the sim-check build, the ldmatrix row read as an access the checkers see.
void cp_async_issue(void *dst, const void *src, bool pred);
void cp_async_commit_group();
void cp_async_wait_group(int pending_allowed); // < 0: wait_all
void ptx_row_read(void *dst, const void *row);
// src/access.h: hands one warp's tensor instruction to the profile
void deliver_mma(uint64_t block, uint32_t warp, uint64_t flops, const char *file, int line);
// src/ptx.cpp: this lane's two rows of A and two columns of B of an mma, from the warp's gathered
// registers (regs[lane] = that lane's a[0..3], b[0..1]), converted to fp32 (out of line: the
// checked build would otherwise see the reads of the FP8 table and of the gathered registers as
// the kernel's loads).
void mma_operands_16(const uint32_t (*regs)[6], unsigned lane, bool bf16, float (&arow)[2][16],
                     float (&bcol)[2][16]);
void mma_operands_fp8(const uint32_t (*regs)[6], unsigned lane, attn_fp8_format fa,
                      attn_fp8_format fb, float (&arow)[2][32], float (&bcol)[2][32]);
// ... and an ldmatrix's registers r[0..num) from the 32 gathered rows (rows[lane] = the row that
// lane read; the first 8 * num are the matrices').
void ldmatrix_fragments(const uint16_t (*rows)[8], unsigned lane, int num, bool trans, uint32_t *r);
// Their element conversions, for the test that compares them with attn/half.h's and attn/fp8.h's.
float mma_f16_to_f32(uint16_t h);
float mma_fp8_to_f32(uint8_t code, attn_fp8_format f);
} // namespace detail

namespace ptx {

inline unsigned lane_id() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
}

// ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: each of the first 8 * num lanes reads its
// row; every lane then picks its elements from all rows.
template <int num, bool trans>
inline __attribute__((always_inline)) void ldmatrix(uint32_t *r, const void *row, const char *what,
                                                    const char *file, int line) {
    unsigned lane = lane_id();
    uint16_t mine[8] = {};
    if (lane < 8 * num) {
#if CUDASIM_CHECK
        detail::ptx_row_read(mine, row); // checked: 16-byte aligned, in shared memory
#else
        memcpy(mine, row, sizeof mine);
#endif
    }
    const void *rows = detail::warp_allgather_view(mine, sizeof mine, what, file, line);
    detail::ldmatrix_fragments(static_cast<const uint16_t(*)[8]>(rows), lane, num, trans, r);
}

// The D fragment of an m16n8kK mma from this lane's two rows of A and two columns of B (already
// in fp32): d[i] = c[i] + sum over k in order, row g + 8 (i / 2), column 2t + i % 2; and the
// warp's instruction (2 * 16 * 8 * K FLOPs) handed to the profile once, by lane 0.
template <unsigned K>
inline void mma_accumulate(float *d, const float (&arow)[2][K], const float (&bcol)[2][K],
                           const float *c, const char *file, int line) {
    float out[4];
    for (unsigned i = 0; i < 4; ++i) {
        const float *ar = arow[i / 2], *bc = bcol[i % 2];
        float acc = c[i];
        for (unsigned k = 0; k < K; ++k)
            acc += ar[k] * bc[k];
        out[i] = acc;
    }
    memcpy(d, out, sizeof out);
    if (lane_id() == 0) {
        uint64_t block = blockIdx.x + gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
        unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        detail::deliver_mma(block, thread / 32, 2ull * 16 * 8 * K, file, line);
    }
}

// An mma's operands from the whole warp (one warp collective): regs[lane] = that lane's a[0..3],
// b[0..1], read in place until this lane's next warp collective (warp_allgather_view).
inline const uint32_t (*gather_operands(const uint32_t *a, const uint32_t *b, const char *what,
                                        const char *file, int line))[6] {
    uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    return static_cast<const uint32_t(*)[6]>(
        detail::warp_allgather_view(mine, sizeof mine, what, file, line));
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: D = A * B + C; d may be c.
// This lane's rows of A (g, g + 8) and columns of B (2t, 2t + 1), where lane = 4g + t, are
// picked from the gathered registers as the ISA lays them out (src/ptx.cpp).
template <bool bf16>
inline void mma_m16n8k16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
                         const char *what, const char *file, int line) {
    const uint32_t(*regs)[6] = gather_operands(a, b, what, file, line);
    float arow[2][16], bcol[2][16];
    detail::mma_operands_16(regs, lane_id(), bf16, arow, bcol);
    mma_accumulate<16>(d, arow, bcol, c, file, line);
}

// mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89 and later):
// D = A * B + C with A 16 x 32 and B 32 x 8 in FP8, four to a register. The ISA's layout (section
// "Matrix Fragments for mma.m16n8k32", and CuTe's SM89_16x8x32 traits): lane 4g + t holds
// A[g + 8 (r % 2)][4t + 16 (r / 2) + j] in byte j of a[r], B[4t + 16 r + j][g] in byte j of b[r],
// and D as m16n8k16 does. Every product of two FP8 values is exact in fp32; the sum runs over k
// in order in fp32 (the tensor core's accumulation order and precision are not specified: a GPU
// may differ in the last bits).
template <attn_fp8_format fa, attn_fp8_format fb>
inline void mma_m16n8k32_fp8(float *d, const uint32_t *a, const uint32_t *b, const float *c,
                             const char *what, const char *file, int line) {
    const uint32_t(*regs)[6] = gather_operands(a, b, what, file, line);
    float arow[2][32], bcol[2][32];
    detail::mma_operands_fp8(regs, lane_id(), fa, fb, arow, bcol);
    mma_accumulate<32>(d, arow, bcol, c, file, line);
}

// cp.async.cg.shared.global [dst], [src], 16, src_size: 16 bytes, or 16 zeros when !pred (the
// source is then not read); they land at the issuing thread's wait for their group.
inline __attribute__((always_inline)) void cp_async_16(void *smem_dst, const void *gmem_src,
                                                       bool pred) {
    detail::cp_async_issue(smem_dst, gmem_src, pred);
}
// cp.async.commit_group: closes this thread's group of copies issued since the last commit.
inline void cp_async_commit() { detail::cp_async_commit_group(); }
// cp.async.wait_group n: all but this thread's newest n committed groups have landed.
inline void cp_async_wait(int n) { detail::cp_async_wait_group(n); }
// cp.async.wait_all: every copy of this thread has landed, committed or not.
inline void cp_async_wait_all() { detail::cp_async_wait_group(-1); }

} // namespace ptx
} // namespace cudasim

#endif // CUDASIM_PTX_H
