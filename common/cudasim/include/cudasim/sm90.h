// cudasim/sm90.h — the simulator's versions of Hopper's (sm_90a) asynchronous instructions that
// common/device/sm90.cuh wraps: mbarrier, named barriers, setmaxnreg, the tensor memory
// accelerator (cp.async.bulk.tensor with a CUtensorMap, and the plain bulk copy) and wgmma.
//
// Inline PTX cannot be compiled for the host, so under the simulator each wrapper of sm90.cuh
// calls the function here. The layouts are the PTX ISA's (sections "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Operation using wgmma.mma_async" — its register fragments, "Matrix
// Descriptor Format" and "Shared Memory Matrix Layout" — and "Tensor-map: swizzling modes");
// tests/cudasim/test_sm90.cu checks them against tables written from the ISA and CuTe.
//
// What is simulated, and how a bug shows (every report names the kernel, block, thread, line):
//   mbarrier     a per-block object keyed by its shared-memory address: pending arrivals, the
//                transaction count (tx-count, bytes), the phase. A phase completes when both are
//                zero. mbarrier_wait blocks the thread (the scheduler's deadlock report names it
//                when no thread can complete the phase); try_wait lets the other threads run.
//   TMA          the destination holds poison (0xFF bytes: NaN) from the issue until the copy
//                lands, which it does when a thread waits on its mbarrier; the bytes land and the
//                tx-count drops by them. A wgmma that reads shared memory a TMA fills, in a thread
//                that has not waited for the phase that copy completes, is reported (every build).
//   wgmma        each warp computes its 16 rows of the 64-row result (the fragment layout below);
//                the accumulator registers hold poison until the issuing thread's
//                wgmma_wait_group for its group, so reading them early gives NaN, and writing them
//                while the wgmma is in flight is reported at the wait. A wgmma without
//                wgmma_fence since the thread's last wait, and a group never waited for, are
//                reported.
//   named barrier bar.sync / bar.arrive with an id (1..15) and a thread count: a count that is not
//                a multiple of 32, or that differs between the threads of one barrier, is
//                reported; too few threads show as a deadlock (arrivals left over when the block
//                ends are not reported: a ping-pong's last bar.arrive has no partner).
//   setmaxnreg   checked (24..256, a multiple of 8) and counted; registers are not simulated.
// At the end of a block: an mbarrier whose tx-count does not balance (the bytes expect_tx
// announced against those the copies delivered), a wgmma group never waited for.
#ifndef CUDASIM_SM90_H
#define CUDASIM_SM90_H

#include <cstdint>
#include <cstring>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudasim/half_types.h>

#include "../../../include/attn/fp8.h"

namespace cudasim {
namespace sm90 {

// ---- layouts (pure functions; tests/cudasim/test_sm90.cu holds them against the ISA's tables) -

// Shared-memory swizzle modes, numbered as the matrix descriptor's bits 62-63 number them.
enum layout_type : unsigned { interleave = 0, swizzle_128b = 1, swizzle_64b = 2, swizzle_32b = 3 };
// The span of a mode in bytes (16-byte chunks are permuted within it); interleave: 16.
inline unsigned swizzle_span(unsigned layout) {
    return layout == swizzle_128b  ? 128
           : layout == swizzle_64b ? 64
           : layout == swizzle_32b ? 32
                                   : 16;
}
// A shared-memory address after the swizzle: the 16-byte chunk index (bits 4..) is XORed with
// the index of the span-wide row within its 8-row pattern (bits 7..): 1, 2 or 3 bits for the
// 32, 64 and 128-byte modes.
inline uint32_t swizzle_address(uint32_t addr, unsigned span) {
    uint32_t bits = span == 128 ? 3 : span == 64 ? 2 : span == 32 ? 1 : 0;
    uint32_t mask = ((1u << bits) - 1u) << 4;
    return addr ^ ((addr >> 3) & mask);
}

// The 64-bit shared-memory matrix descriptor: start address, leading and stride byte offsets
// (all in bytes here; 16-byte units in the descriptor), base offset, layout type.
struct matrix_desc {
    uint32_t start, lbo, sbo;
    unsigned base_offset, layout;
};
inline matrix_desc decode_desc(uint64_t d) {
    matrix_desc m;
    m.start = static_cast<uint32_t>(d & 0x3fff) << 4;
    m.lbo = static_cast<uint32_t>(d >> 16 & 0x3fff) << 4;
    m.sbo = static_cast<uint32_t>(d >> 32 & 0x3fff) << 4;
    m.base_offset = static_cast<unsigned>(d >> 49 & 0x7);
    m.layout = static_cast<unsigned>(d >> 62 & 0x3);
    return m;
}

// The shared address of element (mn, k) of an operand a descriptor describes: mn is the row of
// A (M) or the column of B (N), k the reduction index; `elem` bytes per element; k_major: K is
// the contiguous dimension. The canonical layouts, with T = 16 / elem elements per 16-byte chunk
// and S the swizzle span:
//   K-major,  interleave: chunk rows of 16 bytes, 8 rows per core matrix, core matrices SBO apart
//             along MN and LBO apart along K:  (mn%8)*16 + (mn/8)*SBO + (k%T)*elem + (k/T)*LBO
//   K-major,  swizzled:   rows of S bytes (K contiguous), 8-row groups SBO apart along MN:
//             (mn%8)*S + (mn/8)*SBO + k*elem
//   MN-major, interleave: (mn%T)*elem + (mn/T)*SBO + (k%8)*16 + (k/8)*LBO
//   MN-major, swizzled:   rows of S bytes along MN, one per k; columns of S bytes LBO apart
//             along MN, 8-row groups SBO apart along K:
//             (mn%(S/elem))*elem + (mn/(S/elem))*LBO + (k%8)*S + (k/8)*SBO
// and then the swizzle of the start address plus that offset.
inline uint32_t operand_address(const matrix_desc &d, bool k_major, unsigned elem, unsigned mn,
                                unsigned k) {
    unsigned T = 16 / elem, S = swizzle_span(d.layout);
    uint32_t off;
    if (k_major)
        off = d.layout == interleave
                  ? (mn % 8) * 16 + (mn / 8) * d.sbo + (k % T) * elem + (k / T) * d.lbo
                  : (mn % 8) * S + (mn / 8) * d.sbo + k * elem;
    else if (d.layout == interleave)
        off = (mn % T) * elem + (mn / T) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo;
    else
        off = (mn % (S / elem)) * elem + (mn / (S / elem)) * d.lbo + (k % 8) * S + (k / 8) * d.sbo;
    return swizzle_address(d.start + off, S);
}

// The accumulator fragment of wgmma m64nNk16 (and k32): thread `t` of the warpgroup (0..127)
// holds N / 2 floats; register i is element (row, col) with, for lane = t % 32, g = lane / 4,
// q = lane % 4:  row = 16 (t / 32) + g + 8 ((i / 2) % 2),  col = 8 (i / 4) + 2 q + i % 2.
inline void accum_coord(unsigned t, unsigned i, unsigned *row, unsigned *col) {
    unsigned lane = t % 32;
    *row = 16 * (t / 32) + lane / 4 + 8 * ((i / 2) % 2);
    *col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}
// A from registers (64 x K): thread t holds 8 elements of 16 bits (K = 16: register v / 2, half
// v % 2) or 16 of 8 bits (K = 32: register v / 4, byte v % 4). Value v of thread t is
//   16-bit: row = 16 (t / 32) + g + 8 ((v / 2) % 2),  k = 2 q + v % 2 + 8 (v / 4)
//   8-bit:  row = 16 (t / 32) + g + 8 ((v / 4) % 2),  k = 4 q + v % 4 + 16 (v / 8)
inline void a_frag_coord(unsigned t, unsigned v, unsigned elem, unsigned *row, unsigned *k) {
    unsigned lane = t % 32, g = lane / 4, q = lane % 4;
    if (elem == 2) {
        *row = 16 * (t / 32) + g + 8 * ((v / 2) % 2);
        *k = 2 * q + v % 2 + 8 * (v / 4);
    } else {
        *row = 16 * (t / 32) + g + 8 * ((v / 4) % 2);
        *k = 4 * q + v % 4 + 16 * (v / 8);
    }
}

// The shared-memory offset, from the box's start, of element (e0, e1, ...) of a TMA box (dense,
// dimension 0 contiguous), swizzled on the shared address `dst + offset` as wgmma reads it.
inline uint32_t box_address(uint32_t dst, unsigned rank, const uint32_t *box, const uint32_t *e,
                            unsigned elem, unsigned span) {
    uint64_t lin = 0;
    for (unsigned d = rank; d-- > 0;)
        lin = lin * box[d] + e[d];
    return swizzle_address(dst + static_cast<uint32_t>(lin * elem), span);
}

// ---- the runtime's side (common/cudasim/src/sm90.cpp) ---------------------------------------
// The shared address of p (an offset into the block's dynamic shared memory, which plays the
// part of the shared window; mbarriers may live in static __shared__ too).
uint32_t shared_address(const void *p, const char *what, const char *file, int line);
void *shared_pointer(uint32_t addr);

void mbarrier_init(void *bar, unsigned count, const char *file, int line);
uint64_t mbarrier_arrive(void *bar, unsigned count, uint32_t tx, const char *file, int line);
void mbarrier_expect_tx(void *bar, uint32_t tx, const char *file, int line);
bool mbarrier_try_wait(void *bar, unsigned parity, bool block, const char *file, int line);
void named_barrier(unsigned id, unsigned count, bool wait, const char *file, int line);
void setmaxnreg(unsigned regs, bool inc, const char *file, int line);
void fence_proxy_async(const char *file, int line);

void tma_load(void *dst, const CUtensorMap *map, void *bar, unsigned rank, const int32_t *coords,
              const char *file, int line);
void bulk_copy(void *dst, const void *src, uint32_t bytes, void *bar, const char *file, int line);

// The operand types of wgmma.
enum class wg_type : unsigned char { f16, bf16, e4m3, e5m2 };
// One wgmma.mma_async of this thread: D (n / 2 floats) = A * B (+ D when scale_d). A from
// registers (a_regs: 4 words) when a_regs is not null, else from the descriptor a_desc; tnsp_a /
// tnsp_b: the operand is MN-major (f16 and bf16 only).
void wgmma(float *d, unsigned n, wg_type type, const uint32_t *a_regs, uint64_t a_desc,
           uint64_t b_desc, bool scale_d, bool tnsp_a, bool tnsp_b, const char *file, int line);
void wgmma_fence(const char *file, int line);
void wgmma_commit(const char *file, int line);
void wgmma_wait(int pending, const char *file, int line);

// Counts of the block's asynchronous machinery, summed over a launch's blocks, for the
// simulator's profile of these kernels (cudasim_sm90_counts resets them).
struct counts {
    unsigned long long tma_copies, tma_bytes, bulk_bytes, wgmma_ops, wgmma_smem_bytes,
        mbarrier_waits, mbarrier_blocked, named_barrier_waits, setmaxnreg;
};
counts take_counts();

// The order of events, when recording (record_events(true)): one line per event, in the order the
// simulator ran them, "<warp> <what>" (block 0 only).
void record_events(bool on);
const char *events(); // the lines so far, '\n'-separated; cleared by record_events(true)

} // namespace sm90
} // namespace cudasim

#endif // CUDASIM_SM90_H
