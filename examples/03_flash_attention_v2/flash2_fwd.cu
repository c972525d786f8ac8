/* flash2_fwd.cu — Example 03: FlashAttention-2 forward (Dao 2023), step by step.
 *
 *     O = softmax(scale * Q K^T) V        Q: [Lq, D], K, V: [Lk, D], per (batch, head)
 *
 * FA2's loop order: a block owns one tile of Br = 64 query rows (4 warps x 16 rows) for its whole
 * life and streams the K/V tiles of its (batch, head) through shared memory. Each warp owns its
 * 16 rows outright, so the softmax statistics m_i, l_i and the output accumulator stay in that
 * warp's registers and warps never exchange partial results; O is divided by l_i once, at the end.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 fa2_fp32  the FA2 loop in fp32 on CUDA cores: Bc = 32 keys per tile, one key per lane,
 *               row max / row sum by 32-lane shuffle butterflies. Any D <= 128.
 *               ./build/sim/examples/03_flash_attention_v2/flash2_fwd_sim --kernel 1
 *   2 fa2_mma   the same loop on tensor cores: fp16/bf16 inputs, fp32 accumulation,
 *               mma.sync m16n8k16, Q in registers (ldmatrix), K/V tiles (Bc = 64) by cp.async,
 *               softmax on the accumulator fragments, P reused from registers as the A operand
 *               of P V. D = 64 or 128.
 *               ./build/sim/examples/03_flash_attention_v2/flash2_fwd_sim --kernel 2 --dtype f16
 * (On a GPU build use build/gpu/.../flash2_fwd_gpu.) Both: any L (partial tail tiles), Lq != Lk,
 * causal bottom-right aligned (query i sees key j iff j <= i + Lk - Lq) with the K/V tiles that
 * lie wholly above the diagonal never loaded, log-sum-exp written. Dense layout only.
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn/kernel_common.cuh"
#include "attn/mma.cuh"
#include "attn/problem.h"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c), in double precision with
 * the same causal and fully-masked-row conventions; fp16/bf16 are judged by FlashAttention's
 * 2x rule against attn_reference_lowp (attn/check.h). */

/* ================================== kernels =============================================== */

#define BR 64        /* query rows per block (both versions) */
#define WARPS 4      /* warps per block; warp w owns rows 16w .. 16w+15 of the tile */
#define WARP_ROWS 16 /* BR / WARPS */
#define FP32_BC 32   /* version 1: keys per K/V tile (one per lane) */
#define FP32_MAX_D 128
#define MMA_BC 64  /* version 2: keys per K/V tile */
#define SMEM_PAD 8 /* version 2: 16 bytes of padding per shared row (see below) */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

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
__global__ void fa2_fp32_kernel(const float *__restrict__ q, // [B,H,Lq,D] row-major
                                const float *__restrict__ k, // [B,H,Lk,D] row-major
                                const float *__restrict__ v, // [B,H,Lk,D] row-major
                                float *__restrict__ o,       // [B,H,Lq,D] row-major
                                float *__restrict__ lse,     // [B,H,Lq] natural log, or NULL
                                int BH, int Lq, int Lk, int D, float scale, bool causal) {
    extern __shared__ float smem[];
    float *q_s = smem;                    /* [BR][D] */
    float *k_s = q_s + BR * D;            /* [FP32_BC][D + 1] */
    float *v_s = k_s + FP32_BC * (D + 1); /* [FP32_BC][D] */
    float *p_s = v_s + FP32_BC * D;       /* [WARPS][WARP_ROWS][FP32_BC] */
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int q0 = blockIdx.x * BR;
    float *p_w = p_s + warp * WARP_ROWS * FP32_BC;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const float *qb = q + (int64_t)bh * Lq * D;
        const float *kb = k + (int64_t)bh * Lk * D;
        const float *vb = v + (int64_t)bh * Lk * D;
        for (int e = tid; e < BR * D; e += blockDim.x) {
            int r = e / D;
            q_s[e] = q0 + r < Lq ? qb[(int64_t)(q0 + r) * D + e % D] : 0.0f;
        }
        float m[WARP_ROWS], l[WARP_ROWS], acc[WARP_ROWS][FP32_MAX_D / 32];
        for (int r = 0; r < WARP_ROWS; ++r) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
            for (int c = 0; c < FP32_MAX_D / 32; ++c)
                acc[r][c] = 0.0f;
        }
        const int nkeys = attn_visible_keys(q0 + BR - 1, Lq, Lk, causal);
        for (int j0 = 0; j0 < nkeys; j0 += FP32_BC) {
            for (int e = tid; e < FP32_BC * D; e += blockDim.x) {
                int j = e / D, d = e % D;
                bool in = j0 + j < Lk;
                k_s[j * (D + 1) + d] = in ? kb[(int64_t)(j0 + j) * D + d] : 0.0f;
                v_s[e] = in ? vb[(int64_t)(j0 + j) * D + d] : 0.0f;
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
                bool visible = key < Lk && (!causal || key <= i + Lk - Lq);
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
            if (i >= Lq)
                break;
            float inv_l = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
            for (int c = 0; c < FP32_MAX_D / 32; ++c) {
                int d = lane + 32 * c;
                if (d < D)
                    o[((int64_t)bh * Lq + i) * D + d] = acc[r][c] * inv_l;
            }
            if (lse != NULL && lane == 0)
                lse[(int64_t)bh * Lq + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
        }
        __syncthreads(); // every warp done with q_s before the next head overwrites it
    }
}

/* --- version 2: fa2_mma ----------------------------------------------------------------------
 *
 *   grid  = (ceil(Lq/64), min(B*H, 65535)); blockIdx.y strides over the heads
 *   block = 128 threads = 4 warps; warp w owns query rows 16w .. 16w+15 of the tile
 *
 *   shared memory, rows of D + 8 elements       registers of warp w (per lane)
 *   q_s [64][D+8]  Q tile (read once, by         qf[D/16][4]   A fragments of its 16 Q rows
 *                  ldmatrix into qf)             s[8][4]       S = Q K_j^T, 16 x 64 (C layout)
 *   k_s [64][D+8]  K_j, by cp.async              of[D/8][4]    O accumulator 16 x D (C layout)
 *   v_s [64][D+8]  V_j, by cp.async              m[2], l[2]    rows g and g + 8 (g = lane / 4)
 *
 *   The 8-element pad makes consecutive rows start 16 bytes apart in the 32 banks, so the 8 row
 *   addresses of one ldmatrix phase hit 8 different 16-byte bank groups (no conflicts).
 *
 *   Per K/V tile j (64 keys), warp w:
 *     S (16 x 64)  = Q_w (16 x D) K_j^T      8 n-tiles x D/16 k-steps of mma_m16n8k16
 *     online softmax on S's fragments        m, alpha, P = exp2(S - m); quad shuffles 1, 2
 *     O (16 x D)  = alpha * O + P V_j        4 k-steps (16 keys) x D/8 n-tiles
 *
 * Each lane of a quad (the 4 lanes with the same g) holds 2 columns of every n-tile of rows g
 * and g + 8, so a row reduction is: reduce the lane's own 16 values, then __shfl_xor 1 and 2.
 *
 * Why P never goes through shared memory — the C layout of S is the A layout of P:
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
 * pack(s[2k+1][2], s[2k+1][3]) — a conversion to 16 bits in registers, no data movement. */

/* The element type's mma and packing of two floats into one .b32 register (low half first). */
template <typename T> struct mma_traits;

template <> struct mma_traits<__half> {
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 16
                                               const uint32_t *b) { // [2] B fragment, 16 x 8
        mma_m16n8k16_f16(d, a, b, d);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        uint32_t u;
        memcpy(&u, &h, sizeof u);
        return u;
    }
};

template <> struct mma_traits<__nv_bfloat16> {
    static __device__ __forceinline__ void mma(float *d,            // [4] C/D fragment, 16 x 8
                                               const uint32_t *a,   // [4] A fragment, 16 x 16
                                               const uint32_t *b) { // [2] B fragment, 16 x 8
        mma_m16n8k16_bf16(d, a, b, d);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        uint32_t u;
        memcpy(&u, &h, sizeof u);
        return u;
    }
};

/* Issues this thread's share of the cp.async copies of NROWS rows of a [rows][D] matrix into a
 * shared tile whose rows are D + SMEM_PAD elements apart; rows at or past `valid` are
 * zero-filled (their source is not read). Each copy is one 16-byte chunk (8 elements). */
template <typename T, int D, int NROWS>
__device__ __forceinline__ void load_tile_async(T *dst,       // [NROWS][D + SMEM_PAD] shared
                                                const T *src, // [>= valid][D] global, first row
                                                int valid) {  // rows of src that exist
    for (int c = threadIdx.x; c < NROWS * (D / 8); c += blockDim.x) {
        int r = c / (D / 8), col = (c % (D / 8)) * 8;
        bool in = r < valid;
        cp_async_16(dst + r * (D + SMEM_PAD) + col, in ? src + (int64_t)r * D + col : src, in);
    }
}

template <typename T, int D>
__global__ void fa2_mma_kernel(const T *__restrict__ q, // [B,H,Lq,D] row-major, fp16/bf16
                               const T *__restrict__ k, // [B,H,Lk,D] row-major
                               const T *__restrict__ v, // [B,H,Lk,D] row-major
                               T *__restrict__ o,       // [B,H,Lq,D] row-major
                               float *__restrict__ lse, // [B,H,Lq] natural log, or NULL
                               int BH, int Lq, int Lk, float scale, bool causal) {
    constexpr int LD = D + SMEM_PAD; /* shared row stride, elements */
    constexpr int KSTEPS = D / 16;   /* k-steps of S = Q K^T */
    constexpr int DTILES = D / 8;    /* n-tiles of O */
    constexpr int NTILES = MMA_BC / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw); /* [BR][LD] */
    T *k_s = q_s + BR * LD;                   /* [MMA_BC][LD] */
    T *v_s = k_s + MMA_BC * LD;               /* [MMA_BC][LD] */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;
    const int q0 = blockIdx.x * BR;
    const int row0 = q0 + warp * WARP_ROWS; /* first query row of this warp */
    const float scale2 = scale * LOG2E;     /* scores in log2 units: exp(x) = exp2(x log2 e) */

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const T *qb = q + (int64_t)bh * Lq * D;
        const T *kb = k + (int64_t)bh * Lk * D;
        const T *vb = v + (int64_t)bh * Lk * D;
        load_tile_async<T, D, BR>(q_s, qb + (int64_t)q0 * D, Lq - q0);
        cp_async_commit();
        cp_async_wait_all();
        __syncthreads(); // the Q tile is complete before the warps read it with ldmatrix
        uint32_t qf[KSTEPS][4];
        for (int kk = 0; kk < KSTEPS; ++kk)
            ldmatrix_x4(qf[kk],
                        q_s + (warp * WARP_ROWS + lane % 16) * LD + kk * 16 + (lane / 16) * 8);
        __syncthreads(); // every warp holds its Q fragments before q_s can be reused (next head)

        float of[DTILES][4];
        for (int dt = 0; dt < DTILES; ++dt)
            for (int x = 0; x < 4; ++x)
                of[dt][x] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}; /* running max of rows g, g + 8 (log2 units) */
        float l[2] = {0.0f, 0.0f};           /* this lane's part of the row sums */
        const int rows[2] = {row0 + g, row0 + g + 8};

        const int nkeys = attn_visible_keys(q0 + BR - 1, Lq, Lk, causal);
        for (int j0 = 0; j0 < nkeys; j0 += MMA_BC) {
            /* K_j and V_j as two groups, so S can start as soon as K_j has landed. */
            load_tile_async<T, D, MMA_BC>(k_s, kb + (int64_t)j0 * D, Lk - j0);
            cp_async_commit();
            load_tile_async<T, D, MMA_BC>(v_s, vb + (int64_t)j0 * D, Lk - j0);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads(); // every thread's K_j copies done before any warp reads K_j

            float s[NTILES][4];
            for (int nt = 0; nt < NTILES; ++nt) {
                for (int x = 0; x < 4; ++x)
                    s[nt][x] = 0.0f;
                /* x4: lanes 0-15 give the B fragment of k-step 2kk, lanes 16-31 that of 2kk+1 */
                for (int kk = 0; kk < KSTEPS; kk += 2) {
                    uint32_t kf[4];
                    ldmatrix_x4(kf, k_s + (nt * 8 + lane % 8) * LD + kk * 16 + (lane / 8) * 8);
                    mma_traits<T>::mma(s[nt], qf[kk], kf);
                    mma_traits<T>::mma(s[nt], qf[kk + 1], kf + 2);
                }
            }

            /* Scale and mask: keys past Lk (tail tile) and, causal, keys past each row's
             * diagonal get -inf. Only tiles that reach past either bound need the test. */
            const bool tail = j0 + MMA_BC > Lk;
            const bool diag = causal && j0 + MMA_BC - 1 > q0 + Lk - Lq;
            for (int nt = 0; nt < NTILES; ++nt)
                for (int x = 0; x < 4; ++x) {
                    int key = j0 + nt * 8 + 2 * t + (x & 1);
                    int i = rows[x >> 1];
                    bool visible = !(tail || diag) || (key < Lk && (!causal || key <= i + Lk - Lq));
                    s[nt][x] = visible ? s[nt][x] * scale2 : -INFINITY;
                }

            /* Online softmax on the fragments: h = 0 for row g (elements 0, 1), 1 for g + 8. */
            float alpha[2];
            for (int h = 0; h < 2; ++h) {
                float mx = m[h];
                for (int nt = 0; nt < NTILES; ++nt)
                    mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)); /* the 4 lanes of a quad */
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                /* No key seen yet: m stays -inf; use 0 so that no exponent is -inf - -inf. */
                float m_use = mx == -INFINITY ? 0.0f : mx;
                alpha[h] = exp2f(m[h] - m_use);
                m[h] = mx;
                float sum = 0.0f;
                for (int nt = 0; nt < NTILES; ++nt)
                    for (int x = 2 * h; x < 2 * h + 2; ++x) {
                        s[nt][x] = exp2f(s[nt][x] - m_use);
                        sum += s[nt][x];
                    }
                /* l is a plain sum and alpha is the same on the 4 lanes of the quad, so each
                 * lane keeps its own part and the quad adds them up once, after the last tile. */
                l[h] = alpha[h] * l[h] + sum;
            }
            for (int dt = 0; dt < DTILES; ++dt) {
                of[dt][0] *= alpha[0];
                of[dt][1] *= alpha[0];
                of[dt][2] *= alpha[1];
                of[dt][3] *= alpha[1];
            }

            cp_async_wait<0>();
            __syncthreads(); // every thread's V_j copies done before any warp reads V_j
            for (int ks = 0; ks < MMA_BC / 16; ++ks) {
                uint32_t pf[4] = {
                    mma_traits<T>::pack(s[2 * ks][0], s[2 * ks][1]),
                    mma_traits<T>::pack(s[2 * ks][2], s[2 * ks][3]),
                    mma_traits<T>::pack(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                    mma_traits<T>::pack(s[2 * ks + 1][2], s[2 * ks + 1][3]),
                };
                /* x4.trans: lanes 0-15 give the B fragment of n-tile dt, lanes 16-31 of dt+1 */
                for (int dt = 0; dt < DTILES; dt += 2) {
                    uint32_t vf[4];
                    ldmatrix_x4_trans(vf,
                                      v_s + (ks * 16 + lane % 16) * LD + dt * 8 + (lane / 16) * 8);
                    mma_traits<T>::mma(of[dt], pf, vf);
                    mma_traits<T>::mma(of[dt + 1], pf, vf + 2);
                }
            }
            __syncthreads(); // all warps done with K_j and V_j before the next tile's copies
        }

        /* Deferred normalisation: complete l over the quad, divide once, write O and LSE. */
        for (int h = 0; h < 2; ++h) {
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        }
        for (int h = 0; h < 2; ++h) {
            const int i = rows[h];
            if (i >= Lq)
                continue;
            const float inv_l = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
            T *orow = o + ((int64_t)bh * Lq + i) * D;
            for (int dt = 0; dt < DTILES; ++dt) {
                uint32_t pair =
                    mma_traits<T>::pack(of[dt][2 * h] * inv_l, of[dt][2 * h + 1] * inv_l);
                /* one 32-bit store: D and 2t are even, so the pair is 4-byte aligned */
                *reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) = pair;
            }
            if (lse != NULL && t == 0)
                lse[(int64_t)bh * Lq + i] = l[h] > 0.0f ? m[h] * LN2 + logf(l[h]) : -INFINITY;
        }
    }
}

/* ================================= launchers ============================================== */

static void launch_fa2_fp32(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    int BH = p->B * p->H, D = p->D;
    size_t smem = (size_t)(BR * D + FP32_BC * (D + 1) + FP32_BC * D + BR * FP32_BC) * sizeof(float);
    /* Above 48 KiB (D > 48 here) a kernel must opt in to more dynamic shared memory. */
    cudaFuncSetAttribute(fa2_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(BH));
    fa2_fp32_kernel<<<grid, WARPS * 32, smem, stream>>>((const float *)b->q, (const float *)b->k,
                                                        (const float *)b->v, (float *)b->o, b->lse,
                                                        BH, p->Lq, p->Lk, D, p->scale, p->causal);
}

template <typename T, int D>
static void launch_mma_typed(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    int BH = p->B * p->H;
    size_t smem = (size_t)(BR + 2 * MMA_BC) * (D + SMEM_PAD) * sizeof(T);
    cudaFuncSetAttribute(fa2_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)smem);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(BH));
    fa2_mma_kernel<T, D><<<grid, WARPS * 32, smem, stream>>>((const T *)b->q, (const T *)b->k,
                                                             (const T *)b->v, (T *)b->o, b->lse, BH,
                                                             p->Lq, p->Lk, p->scale, p->causal);
}

/* The registry admits only D = 64 or 128 and fp16/bf16 (requirements below). */
static void launch_fa2_mma(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    bool bf16 = p->dtype == ATTN_BF16;
    if (p->D == 64)
        bf16 ? launch_mma_typed<__nv_bfloat16, 64>(p, b, stream)
             : launch_mma_typed<__half, 64>(p, b, stream);
    else
        bf16 ? launch_mma_typed<__nv_bfloat16, 128>(p, b, stream)
             : launch_mma_typed<__half, 128>(p, b, stream);
}

/* ================================= registry =============================================== */

static const attn_requirements fp32_requirements = {
    ATTN_DTYPE_BIT(ATTN_F32), /* dtypes */
    FP32_MAX_D,               /* max_d */
    1,                        /* d_multiple */
    true,                     /* causal */
    false,                    /* varlen */
    false,                    /* gpu_only */
};

static const attn_requirements mma_requirements = {
    ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16), /* dtypes */
    128,                                                  /* max_d: D = 64 or 128 */
    64,                                                   /* d_multiple */
    true,                                                 /* causal */
    false,                                                /* varlen */
    false,                                                /* gpu_only */
};

static const attn_kernel flash2_kernels[] = {
    {1, "fa2_fp32",
     "FA2 loop order in fp32: Q tile per block, 16 rows per warp, K/V streamed, deferred 1/l",
     launch_fa2_fp32, fp32_requirements, NULL},
    {2, "fa2_mma",
     "same loop on tensor cores (mma.sync m16n8k16, fp16/bf16): Q and P in registers, cp.async",
     launch_fa2_mma, mma_requirements, NULL},
};

extern "C" const attn_example flash2_fwd_example = {
    "03_flash_attention_v2",
    "FlashAttention-2 forward: Q-tile-per-block loop, warps split Q rows, tensor cores",
    flash2_kernels,
    (int)(sizeof flash2_kernels / sizeof flash2_kernels[0]),
    {2, 8, 2048, 128}, /* GPU default: B, H, L, D */
    {1, 4, 512, 64},   /* simulator default: well under a second per launch (README) */
};
