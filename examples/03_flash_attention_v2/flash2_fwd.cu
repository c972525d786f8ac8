/* flash2_fwd.cu — Example 03: FlashAttention-2 forward (Dao 2023), step by step.
 *
 *     O = softmax(scale * Q K^T) V        Q: [Lq, D], K, V: [Lk, D], per (batch, head)
 *
 * FA2's loop order: a block owns one tile of Br = 64 query rows (4 warps x 16 rows) for its whole
 * life and streams the K/V tiles of its (batch, head) through shared memory. Each warp owns its
 * 16 rows outright, so the softmax statistics m_i, l_i and the output accumulator stay in that
 * warp's registers and warps never exchange partial results; O is divided by l_i once, at the end.
 *
 * Versions (each one line of intent; run with the command under it; speeds: README, "Measured"):
 *   1 fa2_fp32      the FA2 loop in fp32 on CUDA cores: Bc = 32 keys per tile, one key per lane,
 *                   row max / row sum by 32-lane shuffle butterflies. Any D <= 128.
 *     ./build/sim/examples/03_flash_attention_v2/flash2_fwd_sim --kernel 1
 *   2 fa2_mma       the same loop on tensor cores: fp16/bf16 inputs, fp32 accumulation,
 *                   mma.sync m16n8k16, Q in registers (ldmatrix), K/V tiles (Bc = 64) by
 *                   cp.async, softmax on the accumulator fragments, P reused from registers as
 *                   the A operand of P V. D = 64 or 128.
 *     ./build/sim/examples/03_flash_attention_v2/flash2_fwd_sim --kernel 2 --dtype f16
 *   3 fa2_pipeline  version 2's math with a memory pipeline: K/V tiles double-buffered (the
 *                   cp.async copy of tile j+1 in flight while tile j is computed), XOR-swizzled
 *                   shared memory instead of padding, O written back in 16-byte chunks.
 *                   D = 64 or 128.
 *     ./build/sim/examples/03_flash_attention_v2/flash2_fwd_sim --kernel 3 --dtype bf16
 * On a GPU build use build/gpu/.../flash2_fwd_gpu.
 * Measured times: README.md, "Measured" (regenerated from the result files by
 * benchmarks/update_tables.py; GPU to be measured, the simulator's are CPU times).
 *
 * All versions: any L (partial tail tiles), Lq != Lk, causal bottom-right aligned (query i sees
 * key j iff j <= i + Lk - Lq) with the K/V tiles that lie wholly above the diagonal never loaded,
 * log-sum-exp written, dense [B,H,L,D] or packed variable-length batches (cu_seqlens; on the
 * command line --seqlens N1,N2,...).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>
#include <string.h>

#include "attn/problem.h"
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"
#include "fa2_tile.cuh"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c), in double precision with
 * the same causal and fully-masked-row conventions; fp16/bf16 are judged by FlashAttention's
 * 2x rule against attn_reference_lowp (attn/check.h). */

/* ================================== kernels =============================================== */

#define BR ATTN_FA2_BR /* query rows per block (every version): 64 */
#define WARPS 4        /* warps per block; warp w owns rows 16w .. 16w+15 of the tile */
#define WARP_ROWS 16   /* BR / WARPS */
#define FP32_BC 32     /* version 1: keys per K/V tile (one per lane) */
#define FP32_MAX_D 128
#define MMA_BC ATTN_FA2_BC /* versions 2 and 3: keys per K/V tile (64, fa2_tile.cuh) */

/* Every kernel takes the problem's shape and both layouts through the same parameters:
 *   q, o      [B,H,Lq,D] row-major, or varlen [total_q,H,D]
 *   k, v      [B,H,Lk,D] row-major, or varlen [total_k,H,D]
 *   lse       [B,H,Lq], or varlen [H,total_q]; natural log; NULL when not wanted
 *   cu_q/cu_k [B+1] device prefix offsets (varlen) or NULL (dense); Lq, Lk are then the maxima
 * and attn_seq_head_at (device/kernel_common.cuh) turns (b, h) into row 0 and a row stride. A
 * block whose query tile starts past its sequence's end has nothing to do and skips the head. */

/* --- version 1: fa2_fp32 ---------------------------------------------------------------------
 *
 *   grid  = (ceil(Lq/64), min(B*H, 65535)); blockIdx.y strides over the B*H heads
 *   block = 128 threads = 4 warps
 *
 *            shared memory                              registers of warp w, lane l
 *   q_s [64][D]   Q tile (loaded once)        m[r], l[r]     r = 0..15: rows 16w + r (every lane
 *   k_s [32][D+1] K_j  (+1: lane l reads                      holds the same values)
 *                 row l column-wise, no       o[r][c]        O[16w + r][l + 32c], c < ceil(D/32)
 *                 bank conflicts)
 *   v_s [32][D]   V_j
 *   p_s [4][16][32] P of each warp (private to it)
 *
 *   Q tile, 64 rows                K_j / V_j tile: 32 keys, lane l <-> key j0 + l
 *   +------------------+           for each of its 16 rows r, warp w:
 *   | warp 0: rows 0-15|             s_l   = scale * q_s[16w+r] . k_s[l]      (lane l, key l)
 *   | warp 1: rows16-31|             m_new = max(m[r], max over lanes s_l)    (5 shuffles)
 *   | warp 2: rows32-47|             p_l   = exp(s_l - m_new), alpha = exp(m[r] - m_new)
 *   | warp 3: rows48-63|             l[r]  = alpha * l[r] + sum over lanes p_l (5 shuffles)
 *   +------------------+             o[r][:] *= alpha;   p_s[w][r][l] = p_l
 *                                  then o[r][c] += sum_j p_s[w][r][j] * v_s[j][l + 32c]
 *   After the last tile: O = o / l, LSE = m + log l. */
__global__ void fa2_fp32_kernel(const float *__restrict__ q,  // [B,H,Lq,D] or [total_q,H,D]
                                const float *__restrict__ k,  // [B,H,Lk,D] or [total_k,H,D]
                                const float *__restrict__ v,  // [B,H,Lk,D] or [total_k,H,D]
                                float *__restrict__ o,        // [B,H,Lq,D] or [total_q,H,D]
                                float *__restrict__ lse,      // [B,H,Lq] or [H,total_q], or NULL
                                const int *__restrict__ cu_q, // [B+1] device, NULL = dense
                                const int *__restrict__ cu_k, // [B+1] device, NULL = dense
                                int BH, int H, int Lq, int Lk, int D, float scale, bool causal) {
    extern __shared__ float smem[];
    float *q_s = smem;                    /* [BR][D] */
    float *k_s = q_s + BR * D;            /* [FP32_BC][D + 1] */
    float *v_s = k_s + FP32_BC * (D + 1); /* [FP32_BC][D] */
    float *p_s = v_s + FP32_BC * D;       /* [WARPS][WARP_ROWS][FP32_BC] */
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int q0 = blockIdx.x * BR;
    float *p_w = p_s + warp * WARP_ROWS * FP32_BC;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (q0 >= sh.Lq) /* the same for every thread: no barrier is skipped by some only */
            continue;
        const float *qb = q + sh.q, *kb = k + sh.k, *vb = v + sh.k;
        for (int e = tid; e < BR * D; e += blockDim.x) {
            int r = e / D;
            q_s[e] = q0 + r < sh.Lq ? qb[(q0 + r) * sh.ld + e % D] : 0.0f;
        }
        float m[WARP_ROWS], l[WARP_ROWS], acc[WARP_ROWS][FP32_MAX_D / 32];
        for (int r = 0; r < WARP_ROWS; ++r) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
            for (int c = 0; c < FP32_MAX_D / 32; ++c)
                acc[r][c] = 0.0f;
        }
        const int nkeys = attn_visible_keys(q0 + BR - 1, sh.Lq, sh.Lk, causal);
        for (int j0 = 0; j0 < nkeys; j0 += FP32_BC) {
            for (int e = tid; e < FP32_BC * D; e += blockDim.x) {
                int j = e / D, d = e % D;
                bool in = j0 + j < sh.Lk;
                k_s[j * (D + 1) + d] = in ? kb[(j0 + j) * sh.ld + d] : 0.0f;
                v_s[e] = in ? vb[(j0 + j) * sh.ld + d] : 0.0f;
            }
            __syncthreads(); // Q (first tile), K_j and V_j complete before any warp reads them
            const int key = j0 + lane;
            for (int r = 0; r < WARP_ROWS; ++r) {
                const int i = q0 + warp * WARP_ROWS + r;
                const float *qr = q_s + (warp * WARP_ROWS + r) * D;
                const float *kr = k_s + lane * (D + 1);
                float s = 0.0f;
                for (int d = 0; d < D; ++d)
                    s += qr[d] * kr[d];
                bool visible = key < attn_visible_keys(i, sh.Lq, sh.Lk, causal);
                s = visible ? s * scale : -INFINITY;
                float m_new = fmaxf(m[r], attn_warp_max(s));
                /* A row that has seen no key yet keeps m = -inf; exponents then use 0 so that
                 * exp(-inf - -inf) never makes a NaN (its p and alpha are simply 0 / 1). */
                float m_use = m_new == -INFINITY ? 0.0f : m_new;
                float p = expf(s - m_use);
                float alpha = expf(m[r] - m_use);
                l[r] = alpha * l[r] + attn_warp_sum(p);
                m[r] = m_new;
                for (int c = 0; c < FP32_MAX_D / 32; ++c)
                    acc[r][c] *= alpha;
                p_w[r * FP32_BC + lane] = p;
            }
            __syncwarp(); // this warp's P rows written before its lanes read all 32 of them
            for (int r = 0; r < WARP_ROWS; ++r)
                for (int c = 0; c < FP32_MAX_D / 32; ++c) {
                    int d = lane + 32 * c;
                    if (d < D) {
                        float sum = 0.0f;
                        for (int j = 0; j < FP32_BC; ++j)
                            sum += p_w[r * FP32_BC + j] * v_s[j * D + d];
                        acc[r][c] += sum;
                    }
                }
            __syncthreads(); // all warps done with K_j, V_j (and P) before the next tile's load
        }
        /* Deferred normalisation: one division per output element, after the last tile. */
        for (int r = 0; r < WARP_ROWS; ++r) {
            int i = q0 + warp * WARP_ROWS + r;
            if (i >= sh.Lq)
                break;
            float inv_l = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            for (int c = 0; c < FP32_MAX_D / 32; ++c) {
                int d = lane + 32 * c;
                if (d < D)
                    o[sh.q + i * sh.ld + d] = acc[r][c] * inv_l;
            }
            if (lse != NULL && lane == 0)
                lse[sh.lse + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
        }
        __syncthreads(); // every warp done with q_s before the next head overwrites it
    }
}

/* --- versions 2 and 3: the tensor-core tile ---------------------------------------------------
 *
 *   grid  = (ceil(Lq/64), min(B*H, 65535)); blockIdx.y strides over the heads
 *   block = 128 threads = 4 warps; warp w owns query rows 16w .. 16w+15 of the tile
 *
 *   registers of warp w (per lane)
 *     qf[D/16][4]   A fragments of its 16 Q rows (ldmatrix, once per head)
 *     s[8][4]       S = Q K_j^T, 16 x 64 (C layout), then P = exp2(S - m) in place
 *     of[D/8][4]    O accumulator 16 x D (C layout)
 *     m[2], l[2]    rows g and g + 8 (g = lane / 4)
 *
 *   Per K/V tile j (64 keys), warp w:
 *     S (16 x 64)  = Q_w (16 x D) K_j^T      8 n-tiles x D/16 k-steps of mma_m16n8k16
 *     online softmax on S's fragments        m, alpha, P = exp2(S - m); quad shuffles 1, 2
 *     O (16 x D)  = alpha * O + P V_j        4 k-steps (16 keys) x D/8 n-tiles
 *
 * Each lane of a quad (the 4 lanes with the same g) holds 2 columns of every n-tile of rows g
 * and g + 8, so a row reduction is: reduce the lane's own 16 values, then __shfl_xor 1 and 2.
 * P never goes through shared memory: the C layout of S is the A layout of P (the fragment
 * diagram is above attn_fa2_accumulate_pv).
 *
 * The two versions differ only in how the tiles sit in shared memory (a layout) and in when they
 * are copied there; the warp-level steps in between — attn_fa2_load_q_fragments, _score_tile,
 * _scale_and_mask, _online_softmax, _accumulate_pv, _finish_rows, _store_o — and the layouts
 * attn_padded_layout / attn_swizzled_layout live in fa2_tile.cuh (this folder), shared
 * with example 04's sparse kernels. */

/* Scales and masks S for this warp: keys past the sequence's Lk (tail tile) and, causal, keys
 * past each row's diagonal get -inf. Only a tile reaching past either bound for some row of this
 * warp needs the per-element test. row0: the warp's first query row. */
__device__ __forceinline__ void scale_and_mask(float (&s)[MMA_BC / 8][4], int j0, int row0, int Lq,
                                               int Lk, bool causal, float scale2) {
    const int g = threadIdx.x % 32 / 4;
    const bool tail = j0 + MMA_BC > Lk;
    const bool diag = causal && j0 + MMA_BC > attn_visible_keys(row0, Lq, Lk, causal);
    const int visible[2] = {attn_visible_keys(row0 + g, Lq, Lk, causal),
                            attn_visible_keys(row0 + g + 8, Lq, Lk, causal)};
    attn_fa2_scale_and_mask(s, j0, tail || diag, scale2,
                            [&](int h, int key) { return key < visible[h]; });
}

/* --- version 2: fa2_mma ----------------------------------------------------------------------
 *
 *   shared memory, rows of D + 8 elements (attn_padded_layout)
 *   q_s [64][D+8]  Q tile (read once, by ldmatrix into qf)
 *   k_s [64][D+8]  K_j, by cp.async
 *   v_s [64][D+8]  V_j, by cp.async
 *
 *   Per tile (attn_fa2_tile, fa2_tile.cuh): copy K_j and V_j (two cp.async groups) -> wait for
 *   K_j, barrier -> S, scale and mask, softmax -> wait for V_j, barrier -> P V_j -> barrier. The
 *   copies and the math take turns: while a tile is in flight the warps wait, and while they
 *   compute nothing is being copied. The prologue (attn_fa2_block: the tiles in shared memory,
 *   the block's and warp's rows) and the tile loop are the ones example 04's and 08's kernels
 *   run too: what this kernel adds is which key tiles it visits and scale_and_mask above. */
template <typename T, int D>
__global__ void fa2_mma_kernel(const T *__restrict__ q,      // [B,H,Lq,D] or [total_q,H,D]
                               const T *__restrict__ k,      // [B,H,Lk,D] or [total_k,H,D]
                               const T *__restrict__ v,      // [B,H,Lk,D] or [total_k,H,D]
                               T *__restrict__ o,            // [B,H,Lq,D] or [total_q,H,D]
                               float *__restrict__ lse,      // [B,H,Lq] or [H,total_q], or NULL
                               const int *__restrict__ cu_q, // [B+1] device, NULL = dense
                               const int *__restrict__ cu_k, // [B+1] device, NULL = dense
                               int BH, int H, int Lq, int Lk, float scale, bool causal) {
    using Lay = attn_padded_layout<D>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const attn_fa2_block<T, Lay> blk(smem_raw, scale); /* q_s, k_s, v_s [64][LD]; q0, row0 */

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (blk.q0 >= sh.Lq) /* the same for every thread: no barrier is skipped by some only */
            continue;
        attn_fa2_warp<D> w; /* qf, of, m, l */
        attn_fa2_load_q<T, D, BR, Lay>(w.qf, blk.q_s, q + sh.q + blk.q0 * sh.ld, sh.ld,
                                       sh.Lq - blk.q0);

        /* the key tiles up to the causal diagonal; S starts as soon as K_j has landed */
        const int nkeys = attn_visible_keys(blk.q0 + BR - 1, sh.Lq, sh.Lk, causal);
        for (int j0 = 0; j0 < nkeys; j0 += MMA_BC)
            attn_fa2_tile<T, D, Lay>(
                w, blk, k + sh.k, v + sh.k, sh.ld, sh.Lk, j0, [&](float(&s)[MMA_BC / 8][4]) {
                    scale_and_mask(s, j0, blk.row0, sh.Lq, sh.Lk, causal, blk.scale2);
                });

        attn_fa2_write_o<T, D>(o, lse, w, blk.row0, sh);
    }
}

/* --- version 3: fa2_pipeline -----------------------------------------------------------------
 *
 *   shared memory, rows of exactly D elements (attn_swizzled_layout), 2 stages for K and V
 *   q_s    [64][D]     Q tile; at the end each warp's 16 rows hold its O tile for the store
 *   k_s[2] [64][D]     K_j in stage j % 2, K_{j+1} arriving in the other
 *   v_s[2] [64][D]     V_j likewise
 *   D = 128, fp16: 16 + 2 x 16 + 2 x 16 = 80 KiB (version 2: 3 x 17 = 51 KiB)
 *
 * Double buffering: the copy of tile j+1 is issued before tile j is computed, so the memory
 * system works on j+1 while the tensor cores work on j.
 *
 *   time ->   copy:  [Q, K0 V0] [K1 V1 ........] [K2 V2 ........] [K3 V3 ........]
 *             math:             [   tile 0     ] [   tile 1     ] [   tile 2     ] ...
 *   stage:                       reads 0, fills 1 reads 1, fills 0 reads 0, fills 1
 *
 *   per tile j:  issue copies of tile j+1 into stage (j+1) % 2; commit (a group, maybe empty)
 *                wait_group 1: all but the newest group done -> tile j has landed (this thread)
 *                __syncthreads  -> tile j has landed for every thread
 *                S, softmax, P V from stage j % 2
 *                __syncthreads  -> every warp is done with stage j % 2, which the copies of
 *                                  tile j+2 (issued first thing in the next iteration) overwrite
 *
 * XOR swizzle: a row of D = 64 halves is 128 bytes = 8 chunks of 16 bytes = all 32 banks once.
 * Stored plainly (row r at r * 128 bytes), chunk c of every row sits on the same 4 banks; one
 * ldmatrix phase reads chunk c of 8 consecutive rows -> 8 accesses to the same 4 banks, an
 * 8-way conflict. Storing chunk c of row r at chunk c ^ (r % 8) spreads them:
 *
 *   logical chunk:   0  1  2  3  4  5  6  7         physical chunk = c ^ (r % 8)
 *   row 0          | 0  1  2  3  4  5  6  7 |       a phase reading logical chunk 2 of
 *   row 1          | 1  0  3  2  5  4  7  6 |       rows 0..7 touches physical chunks
 *   row 2          | 2  3  0  1  6  7  4  5 |         2, 3, 0, 1, 6, 7, 4, 5
 *   row 3          | 3  2  1  0  7  6  5  4 |       = every chunk once = all 32 banks,
 *   row 4          | 4  5  6  7  0  1  2  3 |       no conflict; the same holds for any c
 *   row 5          | 5  4  7  6  1  0  3  2 |       (c ^ r takes 8 distinct values as r
 *   row 6          | 6  7  4  5  2  3  0  1 |       runs over 0..7)
 *   row 7          | 7  6  5  4  3  2  1  0 |
 *
 * Every ldmatrix here reads 8 consecutive rows (a multiple of 8 first) at one logical chunk:
 * Q and K (row-major reads) and V (.trans, the same row addresses), so all are conflict-free.
 * For D = 128 a row is 16 chunks (two passes over the banks) and the XOR changes the low three
 * bits of the chunk index only: the same argument holds. Padding (version 2) gets the same
 * effect by shifting rows 16 bytes apart, at the cost of 8 unused elements per row.
 *
 * Output: each warp writes its O fragments into its own 16 rows of q_s (32-bit stores; the 8
 * lanes with the same t hit 8 different chunks, so no conflicts either), then reads them back
 * 16 bytes at a time and stores whole 16-byte chunks of each row to global memory (coalesced:
 * consecutive lanes write consecutive chunks), instead of version 2's scattered 4-byte stores. */
template <typename T, int D>
__global__ void fa2_pipeline_kernel(const T *__restrict__ q,      // [B,H,Lq,D] or [total_q,H,D]
                                    const T *__restrict__ k,      // [B,H,Lk,D] or [total_k,H,D]
                                    const T *__restrict__ v,      // [B,H,Lk,D] or [total_k,H,D]
                                    T *__restrict__ o,            // [B,H,Lq,D] or [total_q,H,D]
                                    float *__restrict__ lse,      // [B,H,Lq] or [H,total_q]/NULL
                                    const int *__restrict__ cu_q, // [B+1] device, NULL = dense
                                    const int *__restrict__ cu_k, // [B+1] device, NULL = dense
                                    int BH, int H, int Lq, int Lk, float scale, bool causal) {
    using Lay = attn_swizzled_layout<D>;
    constexpr int TILE = MMA_BC * D; /* elements of one K or V stage */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw); /* [BR][D] */
    T *k_s = q_s + BR * D;                    /* [2][MMA_BC][D] */
    T *v_s = k_s + 2 * TILE;                  /* [2][MMA_BC][D] */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int t = lane % 4, g = lane / 4;
    const int q0 = blockIdx.x * BR;
    const int row0 = q0 + warp * WARP_ROWS;    /* first query row of this warp */
    const float scale2 = scale * CUDART_L2E_F; /* scores in log2 units: exp(x) = exp2(x log2 e) */

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (q0 >= sh.Lq) /* the same for every thread: no barrier is skipped by some only */
            continue;
        const T *kb = k + sh.k, *vb = v + sh.k;
        const int nkeys = attn_visible_keys(q0 + BR - 1, sh.Lq, sh.Lk, causal);
        const int ntiles = (nkeys + MMA_BC - 1) / MMA_BC;

        /* Prologue: Q in one group, tile 0 (if any) in the next, both in flight together. */
        attn_load_tile_async<T, D, BR, Lay>(q_s, q + sh.q + q0 * sh.ld, sh.ld, sh.Lq - q0);
        cp_async_commit();
        if (ntiles > 0) {
            attn_load_tile_async<T, D, MMA_BC, Lay>(k_s, kb, sh.ld, sh.Lk);
            attn_load_tile_async<T, D, MMA_BC, Lay>(v_s, vb, sh.ld, sh.Lk);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();    // the Q tile has landed for every thread before the warps ldmatrix it
        attn_fa2_warp<D> w; /* qf, of, m, l */
        attn_fa2_load_q_fragments<T, D, Lay>(w.qf, q_s);

        for (int j = 0; j < ntiles; ++j) {
            const int j0 = j * MMA_BC, stage = j % 2;
            if (j + 1 < ntiles) { /* prefetch tile j+1 into the other stage */
                const int next = j0 + MMA_BC;
                attn_load_tile_async<T, D, MMA_BC, Lay>(k_s + (1 - stage) * TILE, kb + next * sh.ld,
                                                        sh.ld, sh.Lk - next);
                attn_load_tile_async<T, D, MMA_BC, Lay>(v_s + (1 - stage) * TILE, vb + next * sh.ld,
                                                        sh.ld, sh.Lk - next);
            }
            cp_async_commit(); /* possibly empty: the group count stays one per tile */
            cp_async_wait<1>();
            __syncthreads(); // tile j's copies (every thread's) landed before any warp reads it

            attn_fa2_tile_steps<T, D, Lay>(
                w, k_s + stage * TILE, v_s + stage * TILE,
                [&](float(&s)[MMA_BC / 8][4]) {
                    scale_and_mask(s, j0, row0, sh.Lq, sh.Lk, causal, scale2);
                },
                [] {});      /* V_j landed with K_j */
            __syncthreads(); // every warp done with this stage before the next prefetch refills it
        }

        /* Output through shared memory: the warp's O tile into its own 16 rows of q_s, then
         * 16-byte chunks of whole rows to global memory. */
        attn_fa2_finish_rows<D>(w.of, w.m, w.l, row0, sh, lse);
        __syncwarp(); // every lane of the warp done reading its Q rows before O overwrites them
        T *o_s = q_s + warp * WARP_ROWS * D; /* [16][D], swizzled like q_s */
        for (int dt = 0; dt < D / 8; ++dt)
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<uint32_t *>(o_s + Lay::at(g + 8 * h, dt * 8 + 2 * t)) =
                    attn_mma_traits<T>::pack(w.of[dt][2 * h], w.of[dt][2 * h + 1]);
        __syncwarp(); // the warp's O rows complete in o_s before its lanes read whole chunks
        for (int c = lane; c < WARP_ROWS * (D / 8); c += 32) {
            const int r = c / (D / 8), col = (c % (D / 8)) * 8;
            if (row0 + r < sh.Lq)
                *reinterpret_cast<uint4 *>(o + sh.q + (row0 + r) * sh.ld + col) =
                    *reinterpret_cast<const uint4 *>(o_s + Lay::at(r, col));
        }
        __syncthreads(); // every warp has read its O rows from q_s before the next head's Q copy
    }
}

/* ================================= launchers ============================================== */

/* Each version's launch shape: threads per block and dynamic shared memory for p (the registry
 * reports them; the launchers below use them). */
static attn_launch_shape fa2_fp32_shape(const attn_problem *p) {
    const int D = p->D;
    return {"fa2_fp32_kernel", WARPS * 32,
            (size_t)(BR * D + FP32_BC * (D + 1) + FP32_BC * D + BR * FP32_BC) * sizeof(float)};
}

/* Q, K and V tiles, rows padded (attn_padded_layout<D>::LD = D + ATTN_SMEM_PAD elements). */
static attn_launch_shape fa2_mma_shape(const attn_problem *p) {
    return {"fa2_mma_kernel", WARPS * 32,
            (size_t)(BR + 2 * MMA_BC) * (p->D + ATTN_SMEM_PAD) * attn_dtype_size(p->dtype)};
}

/* Q and 2 stages of K and V, swizzled rather than padded. */
static attn_launch_shape fa2_pipeline_shape(const attn_problem *p) {
    return {"fa2_pipeline_kernel", WARPS * 32,
            (size_t)(BR + 4 * MMA_BC) * p->D * attn_dtype_size(p->dtype)};
}

static void launch_fa2_fp32(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    int BH = p->B * p->H, D = p->D;
    const attn_launch_shape shape = fa2_fp32_shape(p);
    /* Above 48 KiB (D > 48 here) a kernel must opt in to more dynamic shared memory. */
    cudaFuncSetAttribute(fa2_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)shape.smem_bytes);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(BH));
    fa2_fp32_kernel<<<grid, shape.threads, shape.smem_bytes, stream>>>(
        (const float *)b->q, (const float *)b->k, (const float *)b->v, (float *)b->o, b->lse,
        b->cu_seqlens_q, b->cu_seqlens_k, BH, p->H, p->Lq, p->Lk, D, p->scale, p->causal);
}

/* Versions 2 and 3 share the launch: the same grid and block, and the kernel's arguments. */
template <typename T>
static void launch_tc(void (*kernel)(const T *, const T *, const T *, T *, float *, const int *,
                                     const int *, int, int, int, int, float, bool),
                      const attn_launch_shape &shape, const attn_problem *p, const attn_buffers *b,
                      cudaStream_t stream) {
    int BH = p->B * p->H;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)shape.smem_bytes);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(BH));
    kernel<<<grid, shape.threads, shape.smem_bytes, stream>>>(
        (const T *)b->q, (const T *)b->k, (const T *)b->v, (T *)b->o, b->lse, b->cu_seqlens_q,
        b->cu_seqlens_k, BH, p->H, p->Lq, p->Lk, p->scale, p->causal);
}

template <typename T, int D>
static void launch_mma_typed(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    static_assert(attn_padded_layout<D>::LD == D + ATTN_SMEM_PAD, "fa2_mma_shape's row length");
    launch_tc<T>(fa2_mma_kernel<T, D>, fa2_mma_shape(p), p, b, stream);
}

template <typename T, int D>
static void launch_pipeline_typed(const attn_problem *p, const attn_buffers *b,
                                  cudaStream_t stream) {
    launch_tc<T>(fa2_pipeline_kernel<T, D>, fa2_pipeline_shape(p), p, b, stream);
}

/* The registry admits only D = 64 or 128 and fp16/bf16 (requirements below). */
static void launch_fa2_mma(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
        launch_mma_typed<typename decltype(t)::type, decltype(d)::value>(p, b, stream);
    });
}

static void launch_fa2_pipeline(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
        launch_pipeline_typed<typename decltype(t)::type, decltype(d)::value>(p, b, stream);
    });
}

/* ================================= registry =============================================== */

static const attn_requirements fp32_requirements = {
    .dtypes = ATTN_DTYPE_BIT(ATTN_F32), .max_d = FP32_MAX_D, .causal = true, .varlen = true};

/* versions 2 and 3; constexpr, so that flash2_fa2_mma below is initialised before any code runs
 * (example 04's registry copies its requirements) */
static constexpr attn_requirements mma_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true, .varlen = true};

/* Version 2, by name for the examples that reuse it: example 04 times it as its dense baseline
 * (declare it there as extern "C" const attn_kernel flash2_fa2_mma). */
extern "C" const attn_kernel flash2_fa2_mma = {
    ATTN_VERSION(
        2, "fa2_mma",
        "same loop on tensor cores (mma.sync m16n8k16, fp16/bf16): Q and P in registers, cp.async"),
    .launch = launch_fa2_mma, .req = mma_requirements, .launch_shape = fa2_mma_shape};

static const attn_kernel flash2_kernels[] = {
    {ATTN_VERSION(
         1, "fa2_fp32",
         "FA2 loop order in fp32: Q tile per block, 16 rows per warp, K/V streamed, deferred 1/l"),
     .launch = launch_fa2_fp32, .req = fp32_requirements, .launch_shape = fa2_fp32_shape},
    flash2_fa2_mma,
    {ATTN_VERSION(
         3, "fa2_pipeline",
         "memory pipeline: K/V double-buffered by cp.async, XOR-swizzled smem, 16-byte O stores"),
     .launch = launch_fa2_pipeline, .req = mma_requirements, .launch_shape = fa2_pipeline_shape},
};

extern "C" const attn_example flash2_fwd_example = {
    .name = "03_flash_attention_v2",
    .summary = "FlashAttention-2 forward: Q-tile-per-block loop, warps split Q rows, tensor cores",
    ATTN_KERNELS(flash2_kernels),
    /* B, H, L, D; on the simulator: well under a second per launch (README) */
    .defaults = {.gpu = {2, 8, 2048, 128}, .sim = {1, 4, 512, 64}},
};
