/* fa2_tile.cuh (example 03) — the warp-level steps of the FlashAttention-2 tensor-core kernels,
 * written once for every example that runs them: example 03's fa2_mma and fa2_pipeline, and example
 * 04's block-sparse and window kernels (fa2_mma driven by a list of key tiles). The kernels keep
 * their own loops, barriers and copy schedules; what is here is the math between two barriers,
 * and the one Q step that fa2_mma and example 04's kernels share, barriers included:
 *
 *   attn_mma_traits<T>          the element type's mma.sync and float-pair packing
 *   attn_e4m3x2                 two FP8 e4m3 values: the unit FP8 tiles move in (no packing)
 *   attn_padded_layout<D>       shared-memory tile layouts (row padding, XOR swizzle)
 *   attn_swizzled_layout<D>
 *   attn_load_tile_async        one thread's share of the cp.async copy of a tile
 *   attn_fa2_load_q_fragments   Q tile -> this warp's A fragments (ldmatrix)
 *   attn_fa2_load_q             Q tile by cp.async, then its A fragments (two barriers)
 *   attn_fa2_score_tile         S = Q_w K_j^T                     (16 x 64, C layout)
 *   attn_fa2_scale_and_mask     S * scale in log2 units, -inf where a predicate drops a key
 *   attn_fa2_online_softmax     m, l, P = exp2(S - m) in place, O *= alpha
 *   attn_fa2_accumulate_pv      O += P V_j, P straight from the S registers
 *   attn_fa2_finish_rows        l over the quad, O / l, LSE
 *   attn_fa2_store_o            O fragments -> global memory, 32-bit stores
 * and, built from them, the loop every tensor-core FA2 kernel runs (at the end of this file):
 *   attn_fa2_warp<D>            one warp's register state over a head (below)
 *   attn_fa2_tile_steps         FA2's four steps on one key tile: score, scale and mask,
 *                               online softmax, accumulate P V
 *   attn_fa2_block<T, Lay>      the one-stage kernels' shared tiles and rows (the prologue)
 *   attn_fa2_copy_kv            K_j and V_j by cp.async, two groups; waits for K_j
 *   attn_fa2_tile               one key tile of the one-stage kernels: the copies, the four
 *                               steps, their barriers
 *   attn_fa2_write_o            after the last tile: finish the rows, store O
 *
 * Register state of warp w (per lane; g = lane / 4, t = lane % 4), one block = 4 such warps:
 *   qf[D/16][4]   A fragments of the warp's 16 Q rows, one per k-step of 16 columns
 *   s[8][4]       S = Q K_j^T, 16 rows x 64 keys as 8 n-tiles of 8 keys (C layout), then P
 *   of[D/8][4]    O accumulator, 16 rows x D as D/8 n-tiles (C layout)
 *   m[2], l[2]    running max (log2 units) and this lane's part of the row sum, rows g and g + 8
 *
 * C layout of one 16 x 8 n-tile (device/mma.cuh): lane (g, t) holds c[0], c[1] = row g, columns
 * 2t, 2t + 1 and c[2], c[3] = row g + 8, same columns. The 4 lanes of a quad (same g) thus hold a
 * row between them, so a row reduction is: the lane's own values, then __shfl_xor 1 and 2.
 *
 * Include after <cuda_runtime.h>, <cuda_fp16.h>, <cuda_bf16.h>. */
#ifndef ATTN_FA2_TILE_CUH
#define ATTN_FA2_TILE_CUH

#include <math.h>
#include <math_constants.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "device/kernel_common.cuh"
#include "device/mma.cuh"

#define ATTN_FA2_BC 64        /* keys per K/V tile (8 n-tiles of S) */
#define ATTN_FA2_WARP_ROWS 16 /* query rows per warp: the mma's M */
#define ATTN_FA2_BR 64        /* query rows per block: 4 warps of ATTN_FA2_WARP_ROWS */

/* Padding of every row of attn_padded_layout, in elements: 16 bytes, so that the 8 row addresses
 * of one ldmatrix phase fall in 8 different 16-byte bank groups (no bank conflicts). */
#define ATTN_SMEM_PAD 8

/* The element type's mma and packing of two floats into one .b32 register (low half first).
 * fp16 and bf16 differ only in the instruction's input type and in the conversion. */
template <typename T> struct attn_mma_traits {
    static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                  "16-bit inputs: __half or __nv_bfloat16 (FP8: attn_e4m3x2 below)");
    static constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 16
                                               const uint32_t *b) { // [2] B fragment, 16 x 8
        if constexpr (bf16)
            mma_m16n8k16_bf16(d, a, b, d);
        else
            mma_m16n8k16_f16(d, a, b, d);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        uint32_t u;
        if constexpr (bf16) {
            const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
            memcpy(&u, &h, sizeof u);
        } else {
            const __half2 h = __floats2half2_rn(lo, hi);
            memcpy(&u, &h, sizeof u);
        }
        return u;
    }
};

/* Two FP8 e4m3 values (the lower byte first): the 16-bit unit in which cp.async, ldmatrix and the
 * tile layouts below move FP8 data. A row of D e4m3 values is D / 2 such units, and ldmatrix's
 * 16-bit fragment of 16 units (lane (g, t): row g, units 2t, 2t + 1 = bytes 4t .. 4t + 3) is
 * exactly the A or B fragment of mma.sync m16n8k32 on e4m3 (device/mma.cuh): so a tile step
 * written for 16-bit types runs FP8 with T = attn_e4m3x2 and D / 2 for D (example 05's FP8
 * indexer). Nothing converts it to float: it feeds the mma only. */
struct attn_e4m3x2 {
    uint16_t bits;
};

template <> struct attn_mma_traits<attn_e4m3x2> {
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 32
                                               const uint32_t *b) { // [2] B fragment, 32 x 8
        mma_m16n8k32_e4m3(d, a, b, d);
    }
};

/* Shared-memory layouts of a [rows][D] tile of 16-bit elements. at(row, col) is the element
 * offset of (row, col); col is a multiple of 8 for whole 16-byte chunks, and the 8 elements of a
 * chunk stay contiguous in both layouts (what ldmatrix and cp.async need).
 *
 * padded: rows D + 8 elements apart. The 8 extra elements (16 bytes) shift each row by 4 banks,
 *   so the 8 rows one ldmatrix phase reads start in 8 different 4-bank groups.
 * swizzled: rows exactly D apart, chunk c of row r stored at chunk c ^ (r % 8) — see the diagram
 *   above example 03's fa2_pipeline_kernel. No bytes wasted. Needs D / 8 >= 8 chunks per row. */
template <int D> struct attn_padded_layout {
    static constexpr int LD = D + ATTN_SMEM_PAD; /* elements per shared row */
    static __device__ __forceinline__ int at(int row, int col) { return row * LD + col; }
};

template <int D> struct attn_swizzled_layout {
    static_assert(D % 64 == 0, "the XOR swizzle permutes 8 chunks of 16 bytes per row");
    static constexpr int LD = D;
    static __device__ __forceinline__ int at(int row, int col) {
        return row * D + ((col / 8) ^ (row % 8)) * 8 + col % 8;
    }
};

/* Issues this thread's share of the cp.async copies of NROWS rows of a matrix whose rows are ld
 * elements apart in global memory into a shared tile of layout Lay; rows at or past `valid` are
 * zero-filled (their source is not read). Each copy is one 16-byte chunk (8 elements):
 * consecutive threads copy consecutive chunks of a row, so a warp reads whole rows (coalesced). */
template <typename T, int D, int NROWS, typename Lay>
__device__ __forceinline__ void attn_load_tile_async(T *dst,       // [NROWS][Lay::LD] shared
                                                     const T *src, // [>= valid][ld] global, row 0
                                                     int64_t ld,   // elements between rows of src
                                                     int valid) {  // rows of src that exist
    for (int c = threadIdx.x; c < NROWS * (D / 8); c += blockDim.x) {
        int r = c / (D / 8), col = (c % (D / 8)) * 8;
        bool in = r < valid;
        cp_async_16(dst + Lay::at(r, col), in ? src + r * ld + col : src, in);
    }
}

/* The A fragments of this warp's 16 rows of the Q tile, for the D/16 k-steps of S = Q K^T.
 * ldmatrix x4: lanes 0-15 give the addresses of rows 0-15 at columns 16kk..+7, lanes 16-31 the
 * same rows at 16kk+8..+15 — the four 8 x 8 quarters of the 16 x 16 A fragment. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void attn_fa2_load_q_fragments(uint32_t (&qf)[D / 16][4],
                                                          const T *q_s) { // [64][Lay::LD] shared
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], q_s + Lay::at(warp * ATTN_FA2_WARP_ROWS + lane % 16,
                                          kk * 16 + (lane / 16) * 8));
}

/* The Q step of the kernels with one copy stage (example 03's fa2_mma, example 04's sparse_fa2):
 * the NROWS-row Q tile at src (rows ld elements apart, rows at or past `valid` zero-filled) into
 * q_s by cp.async, then this warp's A fragments. Every thread of the block calls it; q_s may be
 * overwritten when it returns. */
template <typename T, int D, int NROWS, typename Lay>
__device__ __forceinline__ void attn_fa2_load_q(uint32_t (&qf)[D / 16][4], T *q_s, const T *src,
                                                int64_t ld, int valid) {
    attn_load_tile_async<T, D, NROWS, Lay>(q_s, src, ld, valid);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads(); // the Q tile is complete before the warps read it with ldmatrix
    attn_fa2_load_q_fragments<T, D, Lay>(qf, q_s);
    __syncthreads(); // every warp holds its Q fragments before q_s can be reused (next head)
}

/* S (16 x 64) = Q_w K_j^T for this warp's rows: 8 n-tiles x D/16 k-steps of mma_m16n8k16. K_j's
 * rows are the B operand's columns, so the row-major K tile is read by plain (not .trans)
 * ldmatrix. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void attn_fa2_score_tile(float (&s)[ATTN_FA2_BC / 8][4],
                                                    const uint32_t (&qf)[D / 16][4],
                                                    const T *k_s) { // [64][Lay::LD] shared, K_j
    const int lane = threadIdx.x % 32;
    for (int nt = 0; nt < ATTN_FA2_BC / 8; ++nt) {
        for (int x = 0; x < 4; ++x)
            s[nt][x] = 0.0f;
        /* x4: lanes 0-15 give the B fragment of k-step kk, lanes 16-31 that of kk+1 */
        for (int kk = 0; kk < D / 16; kk += 2) {
            uint32_t kf[4];
            ldmatrix_x4(kf, k_s + Lay::at(nt * 8 + lane % 8, kk * 16 + (lane / 8) * 8));
            attn_mma_traits<T>::mma(s[nt], qf[kk], kf);
            attn_mma_traits<T>::mma(s[nt], qf[kk + 1], kf + 2);
        }
    }
}

/* Scales S into log2 units (scale2 = scale * log2 e, so that exp(x) = exp2(x log2 e)) and masks
 * it: when `masked`, element (h, key) — row g + 8h of the warp, key j0 + 8nt + 2t + (x & 1) —
 * becomes -inf unless keep(h, key). An unmasked tile (every key visible to every row of the
 * block) skips the per-element test. Keep: any callable (int h, int key) -> bool. */
template <typename Keep>
__device__ __forceinline__ void attn_fa2_scale_and_mask(float (&s)[ATTN_FA2_BC / 8][4], int j0,
                                                        bool masked, float scale2,
                                                        const Keep &keep) {
    const int t = threadIdx.x % 4;
    for (int nt = 0; nt < ATTN_FA2_BC / 8; ++nt)
        for (int x = 0; x < 4; ++x) {
            const int key = j0 + nt * 8 + 2 * t + (x & 1);
            s[nt][x] = !masked || keep(x >> 1, key) ? s[nt][x] * scale2 : -INFINITY;
        }
}

/* Online softmax on the fragments: updates the running max m and this lane's part of the row
 * sums l, turns S into P = exp2(S - m) in place and rescales the O accumulator by alpha.
 * h = 0 is row g (elements 0, 1 of each n-tile), h = 1 row g + 8 (elements 2, 3). */
template <int D>
__device__ __forceinline__ void attn_fa2_online_softmax(float (&s)[ATTN_FA2_BC / 8][4],
                                                        float (&of)[D / 8][4], float (&m)[2],
                                                        float (&l)[2]) {
    float alpha[2];
    for (int h = 0; h < 2; ++h) {
        float mx = m[h];
        for (int nt = 0; nt < ATTN_FA2_BC / 8; ++nt)
            mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)); /* the 4 lanes of a quad */
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        /* No key seen yet: m stays -inf; use 0 so that no exponent is -inf - -inf. */
        float m_use = mx == -INFINITY ? 0.0f : mx;
        alpha[h] = exp2f(m[h] - m_use);
        m[h] = mx;
        float sum = 0.0f;
        for (int nt = 0; nt < ATTN_FA2_BC / 8; ++nt)
            for (int x = 2 * h; x < 2 * h + 2; ++x) {
                s[nt][x] = exp2f(s[nt][x] - m_use);
                sum += s[nt][x];
            }
        /* l is a plain sum and alpha is the same on the 4 lanes of the quad, so each lane keeps
         * its own part and the quad adds them up once, after the last tile (in
         * attn_fa2_finish_rows). */
        l[h] = alpha[h] * l[h] + sum;
    }
    for (int dt = 0; dt < D / 8; ++dt) {
        of[dt][0] *= alpha[0];
        of[dt][1] *= alpha[0];
        of[dt][2] *= alpha[1];
        of[dt][3] *= alpha[1];
    }
}

/* O (16 x D) += P V_j: 4 k-steps of 16 keys x D/8 n-tiles. P never goes through shared memory,
 * because the C layout of S is the A layout of P:
 *
 *   S accumulator, n-tiles 2k and 2k+1        P as the A operand of k-step k (16 keys)
 *   (16 rows x 8 keys each, float c[4]):      (16 rows x 16 keys, uint32_t a[4], 2 x 16 bit):
 *
 *          keys 16k+0..7   keys 16k+8..15                keys 16k+0..7   keys 16k+8..15
 *   row g  s[2k][0..1]     s[2k+1][0..1]     row g      a[0]            a[2]
 *   row g+8 s[2k][2..3]    s[2k+1][2..3]     row g+8    a[1]            a[3]
 *          at columns 2t, 2t+1 in both                  at columns 2t, 2t+1 in both
 *
 * Lane (g, t) already holds exactly the P elements its A fragment needs: a[0] = pack(s[2k][0],
 * s[2k][1]), a[1] = pack(s[2k][2], s[2k][3]), a[2] = pack(s[2k+1][0], s[2k+1][1]), a[3] =
 * pack(s[2k+1][2], s[2k+1][3]) — a conversion to 16 bits in registers, no data movement.
 * V_j is [keys][D] row-major while the B operand wants it column-major: ldmatrix .trans. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void attn_fa2_accumulate_pv(float (&of)[D / 8][4],
                                                       const float (&s)[ATTN_FA2_BC / 8][4],
                                                       const T *v_s) { // [64][Lay::LD] shared
    const int lane = threadIdx.x % 32;
    for (int ks = 0; ks < ATTN_FA2_BC / 16; ++ks) {
        uint32_t pf[4] = {
            attn_mma_traits<T>::pack(s[2 * ks][0], s[2 * ks][1]),
            attn_mma_traits<T>::pack(s[2 * ks][2], s[2 * ks][3]),
            attn_mma_traits<T>::pack(s[2 * ks + 1][0], s[2 * ks + 1][1]),
            attn_mma_traits<T>::pack(s[2 * ks + 1][2], s[2 * ks + 1][3]),
        };
        /* x4.trans: lanes 0-15 give the B fragment of n-tile dt, lanes 16-31 of dt+1 */
        for (int dt = 0; dt < D / 8; dt += 2) {
            uint32_t vf[4];
            ldmatrix_x4_trans(vf, v_s + Lay::at(ks * 16 + lane % 16, dt * 8 + (lane / 16) * 8));
            attn_mma_traits<T>::mma(of[dt], pf, vf);
            attn_mma_traits<T>::mma(of[dt + 1], pf, vf + 2);
        }
    }
}

/* After the last tile: completes l over the quad, scales the accumulator by 1/l (deferred
 * normalisation; a row that saw no key gets 0) and writes the natural-log LSE of rows g, g + 8
 * that exist. row0: the warp's first query row. */
template <int D>
__device__ __forceinline__ void attn_fa2_finish_rows(float (&of)[D / 8][4], const float (&m)[2],
                                                     float (&l)[2], int row0,
                                                     const attn_seq_head &sh,
                                                     float *lse) { // [B,H,Lq] or [H,total_q]/NULL
    const float ln2 = 0.6931471805599453f;                         /* m is in log2 units */
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const float inv_l = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
        for (int dt = 0; dt < D / 8; ++dt) {
            of[dt][2 * h] *= inv_l;
            of[dt][2 * h + 1] *= inv_l;
        }
        const int i = row0 + g + 8 * h;
        if (lse != NULL && t == 0 && i < sh.Lq)
            lse[sh.lse + i] = l[h] > 0.0f ? m[h] * ln2 + logf(l[h]) : -INFINITY;
    }
}

/* Writes the warp's (normalised) O fragments straight from registers: lane (g, t) stores the
 * pair of columns 2t, 2t + 1 of each n-tile of rows g and g + 8 that exist, one 32-bit store each
 * (D, H*D and 2t are even, so every pair is 4-byte aligned). */
template <typename T, int D>
__device__ __forceinline__ void attn_fa2_store_o(T *o, // [B,H,Lq,D] or [total_q,H,D]
                                                 const float (&of)[D / 8][4], int row0,
                                                 const attn_seq_head &sh) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
        const int i = row0 + g + 8 * h;
        if (i >= sh.Lq)
            continue;
        T *orow = o + sh.q + i * sh.ld;
        for (int dt = 0; dt < D / 8; ++dt)
            *reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) =
                attn_mma_traits<T>::pack(of[dt][2 * h], of[dt][2 * h + 1]);
    }
}

/* ============================ the tile loop, written once =================================
 *
 * Every tensor-core FA2 kernel of the chapter runs the same loop: a block owns 64 query rows,
 * each warp keeps its state (attn_fa2_warp) across the key tiles of one (sequence, head), and
 * each key tile j goes through FA2's four steps (attn_fa2_tile_steps):
 *
 *   S = Q_w K_j^T                 attn_fa2_score_tile
 *   S * scale2, -inf if dropped   the kernel's own step: which keys a row sees is all that
 *                                 differs between dense, causal, block-sparse and windowed
 *   m, l, P = exp2(S - m)         attn_fa2_online_softmax (O *= alpha)
 *   O += P V_j                    attn_fa2_accumulate_pv
 *
 * The kernels differ in where their key tiles come from and when they are copied. The one-stage
 * kernels (example 03's fa2_mma, example 04's sparse_fa2, example 08's flex) share their
 * prologue (attn_fa2_block: Q, K_j, V_j tiles in shared memory, the block's and the warp's first
 * rows) and their copy schedule (attn_fa2_tile):
 *
 *   copy K_j, V_j: two cp.async groups -> wait for K_j, barrier -> S, mask, softmax ->
 *   wait for V_j, barrier -> P V_j -> barrier (K_j and V_j free for the next tile's copies)
 *
 * Example 03's fa2_pipeline double-buffers the copies and calls attn_fa2_tile_steps itself. */

/* One warp's registers over one (sequence, head): the state in this file's header, started for a
 * new head (O = 0, m = -inf, l = 0; qf is filled by attn_fa2_load_q or _load_q_fragments). */
template <int D> struct attn_fa2_warp {
    uint32_t qf[D / 16][4]; /* A fragments of the warp's 16 Q rows */
    float of[D / 8][4];     /* O accumulator, 16 x D (C layout) */
    float m[2];             /* running max of rows g, g + 8 (log2 units) */
    float l[2];             /* this lane's part of the row sums */
    __device__ attn_fa2_warp() : of{}, m{-INFINITY, -INFINITY}, l{0.0f, 0.0f} {}
};

/* FA2's four steps on key tile j, for this warp: scale_and_mask(s) turns S into log2 units and
 * drops the keys the kernel's rows do not see (attn_fa2_scale_and_mask with its predicate);
 * v_ready() runs before V_j is read (a one-stage kernel waits there for V_j's copy). k_tile and
 * v_tile: K_j and V_j in shared memory, [64][Lay::LD]. */
template <typename T, int D, typename Lay, typename ScaleMask, typename VReady>
__device__ __forceinline__ void
attn_fa2_tile_steps(attn_fa2_warp<D> &w, const T *k_tile, const T *v_tile,
                    const ScaleMask &scale_and_mask, const VReady &v_ready) {
    float s[ATTN_FA2_BC / 8][4];
    attn_fa2_score_tile<T, D, Lay>(s, w.qf, k_tile);
    scale_and_mask(s);
    attn_fa2_online_softmax<D>(s, w.of, w.m, w.l);
    v_ready();
    attn_fa2_accumulate_pv<T, D, Lay>(w.of, s, v_tile);
}

/* The one-stage kernels' prologue: the Q, K_j and V_j tiles, 64 rows of Lay::LD elements each, in
 * this order at the start of the block's dynamic shared memory (3 x 64 x Lay::LD elements: the
 * launcher's shape), and the rows this block and this warp own. */
template <typename T, typename Lay> struct attn_fa2_block {
    T *q_s, *k_s, *v_s; /* [64][Lay::LD] each */
    int q0;             /* the block's first query row */
    int row0;           /* this warp's first query row */
    float scale2;       /* scale * log2 e: scores in log2 units, exp(x) = exp2(x log2 e) */
    __device__ attn_fa2_block(unsigned char *smem, float scale)
        : q_s(reinterpret_cast<T *>(smem)), k_s(q_s + ATTN_FA2_BR * Lay::LD),
          v_s(k_s + ATTN_FA2_BC * Lay::LD), q0(blockIdx.x * ATTN_FA2_BR),
          row0(q0 + threadIdx.x / 32 * ATTN_FA2_WARP_ROWS), scale2(scale * CUDART_L2E_F) {}
};

/* Copies key tile j0 of a head (kb, vb: its row 0; rows ld apart, Lk of them; rows past Lk are
 * zero-filled) into the block's K_j and V_j tiles as two cp.async groups, and returns when K_j
 * has landed for every thread: S can start while V_j is still in flight. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void attn_fa2_copy_kv(const attn_fa2_block<T, Lay> &blk, const T *kb,
                                                 const T *vb, int64_t ld, int Lk, int j0) {
    attn_load_tile_async<T, D, ATTN_FA2_BC, Lay>(blk.k_s, kb + j0 * ld, ld, Lk - j0);
    cp_async_commit();
    attn_load_tile_async<T, D, ATTN_FA2_BC, Lay>(blk.v_s, vb + j0 * ld, ld, Lk - j0);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads(); // every thread's K_j copies done before any warp reads K_j
}

/* Key tile j0 of the one-stage kernels: the copies, the four steps, the barriers. Every thread of
 * the block calls it (barriers). */
template <typename T, int D, typename Lay, typename ScaleMask>
__device__ __forceinline__ void
attn_fa2_tile(attn_fa2_warp<D> &w, const attn_fa2_block<T, Lay> &blk, const T *kb, const T *vb,
              int64_t ld, int Lk, int j0, const ScaleMask &scale_and_mask) {
    attn_fa2_copy_kv<T, D, Lay>(blk, kb, vb, ld, Lk, j0);
    attn_fa2_tile_steps<T, D, Lay>(w, blk.k_s, blk.v_s, scale_and_mask, [] {
        cp_async_wait<0>();
        __syncthreads(); // every thread's V_j copies done before any warp reads V_j
    });
    __syncthreads(); // all warps done with K_j and V_j before the next tile's copies
}

/* After a head's last tile: the rows finished (attn_fa2_finish_rows: O / l, LSE) and O stored
 * from the registers (attn_fa2_store_o). A row that saw no key outputs 0, LSE -inf. */
template <typename T, int D>
__device__ __forceinline__ void attn_fa2_write_o(T *o, float *lse, attn_fa2_warp<D> &w, int row0,
                                                 const attn_seq_head &sh) {
    attn_fa2_finish_rows<D>(w.of, w.m, w.l, row0, sh, lse);
    attn_fa2_store_o<T, D>(o, w.of, row0, sh);
}

#endif /* ATTN_FA2_TILE_CUH */
