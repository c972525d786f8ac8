/* flash_bwd.cu — Example 07: the backward pass of attention, FlashAttention-2's Algorithm 2
 * (Dao 2023; FlashAttention, Dao et al. 2022, Appendix B): dQ, dK, dV from Q, K, V, O, dO and the
 * forward's log-sum-exp, recomputing P tile by tile instead of storing it.
 *
 *     D_i   = rowsum(dO_i * O_i)                          (the preprocessing kernel)
 *     P_ij  = exp(scale Q_i K_j^T - LSE_i)                recomputed per tile
 *     dV_j += P_ij^T dO_i         dP_ij = dO_i V_j^T      dS_ij = P_ij * (dP_ij - D_i)
 *     dQ_i += scale dS_ij K_j     dK_j += scale dS_ij^T Q_i
 *
 * The derivation and the loop orders are drawn in README.md. The program runs two stages on the
 * one driver: the forward (examples 03-05's kernels make O and LSE) and the backward (the versions
 * below), each checked; bwd_stages.c says against what.
 *
 * Versions (each one line of intent; run with the command under it; --kernel N also runs the
 * forward kernel it reads):
 *   1 naive         the formulas as they read, fp32: P and dS of every (query, key) written to
 *                   global memory (O(B H Lq Lk) workspace), then dQ = dS K, dK = dS^T Q,
 *                   dV = P^T dO by three kernels.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 1
 *   2 fa2_fp32      FA2's backward loop in fp32 on CUDA cores: a block owns a tile of 32 keys
 *                   (K_j, V_j, and dK_j, dV_j in registers), walks the query tiles, recomputes P
 *                   from LSE, and adds its share of dQ_i to an fp32 accumulator with atomics.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 2
 *   3 fa2_mma       the same loop on tensor cores (fp16/bf16, example 03's mma/ldmatrix steps):
 *                   64-key tiles, P^T dO and dS^T Q through shared memory (ldmatrix .trans),
 *                   dS K from registers, dQ by atomics. D = 64 or 128.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 3 --dtype f16
 *   4 fa2_mma_det   deterministic dQ: version 3's loop without the atomics, then a second pass
 *                   in FA2's forward order (a block owns Q_i, walks K_j) that recomputes S and dP
 *                   and accumulates dQ_i in registers: bitwise reproducible, 1.4x the FLOPs.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 4 --dtype bf16
 *   5 block_sparse  version 4 over example 04's block mask: the dQ pass walks a query tile's
 *                   listed key tiles, the dK/dV pass a key tile's listed query tiles (the mask's
 *                   transposed view, attn_block_mask_transpose); full tiles unmasked, partial
 *                   ones apply the pattern's predicate.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 5 --dtype f16
 *     --pattern bigbird:b=64,r=1,seed=1 -L 512
 *   6 topk          top-k sparse backward over example 05's selection (shared by the heads): one
 *                   warp per (query, head) walks its selected keys, dQ_i in registers, dK and dV
 *                   scattered to the selected keys' rows with fp32 atomics.
 *     ./build/sim/examples/07_flash_attention_backward/flash_bwd_sim --kernel 6 --dtype f16
 *     --topk 32 --causal
 * The forward stage's kernels (reused by symbol): 7 fwd_fa2_fp32 and 8 fwd_fa2 (example 03's
 * versions 1 and 2), 9 fwd_block_sparse (example 04's version 2), 10 fwd_topk (example 05's
 * sparse_gather over the same selection, one K/V head per attention head).
 * On a GPU build use build/gpu/.../flash_bwd_gpu.
 *
 * All versions: any L (tail tiles), Lq != Lk, causal bottom-right aligned, packed variable-length
 * batches (--seqlens), rows that see no key (LSE -inf: zero gradients), workspace from the driver
 * (attn_kernel.workspace_bytes: D, the fp32 accumulators; launchers never allocate).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c, the stages in
 * bwd_stages.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>
#include <string.h>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "attn/problem.h"
#include "attn/sparse/block_mask.h"
#include "attn/sparse/patterns.h"
#include "deepseek_sparse.h"
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"
#include "flash_bwd.h"

/* ============================== CPU reference ============================================= */
/* The harness's attn_reference_backward (common/src/reference_backward.c, attn/reference.h): the
 * gradients in double precision from their formulas, with each element's fp32 tolerance, and the
 * same-precision backward of FlashAttention's 2x rule (attn_reference_backward_lowp), compared by
 * attn_check_gradient (attn/check.h). The forward stage is checked by attn_reference. */

/* ================================== kernels =============================================== */

#define WARPS 4        /* every block: 4 warps */
#define F32_BR 32      /* version 2: query rows per tile */
#define F32_BC 32      /* version 2: keys per block (one per lane) */
#define F32_MAX_D 128  /* versions 1, 2 and 6: largest head dimension */
#define BR 64          /* versions 3-5: query rows per tile (4 warps x 16) */
#define BC ATTN_FA2_BC /* versions 3-5: keys per tile (64) */
#define WARP_ROWS ATTN_FA2_WARP_ROWS
static_assert(BR == ATTN_SPARSE_TILE && BC == ATTN_SPARSE_TILE, "tiles must match the mask's");

/* --- the preprocessing, and the conversions after the loops -----------------------------------
 *
 *   grid = (ceil(Lq/4), min(B*H, 65535)); block = 4 warps; warp w <-> query row 4*blockIdx.x + w
 *   D_i = sum_d dO_id O_id (a warp sum), and the row of the fp32 dQ accumulator set to 0. */
template <typename T>
__global__ void bwd_preprocess_kernel(const T *__restrict__ o,    // [B,H,Lq,D] or [tq,H,D]
                                      const T *__restrict__ dout, // like o
                                      float *__restrict__ Dv,     // [B,H,Lq] or [H,tq]
                                      float *__restrict__ dq_acc, // like o (fp32) or NULL
                                      const int *cu_q, const int *cu_k, int BH, int H, int D,
                                      int Lq, int Lk) {
    const int lane = threadIdx.x % 32, i = blockIdx.x * WARPS + threadIdx.x / 32;
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (i >= sh.Lq) /* no barrier in this kernel: a warp may leave */
            continue;
        const int64_t row = sh.q + i * sh.ld;
        float acc = 0.0f;
        for (int d = lane; d < D; d += 32) {
            acc += float(o[row + d]) * float(dout[row + d]);
            if (dq_acc != NULL)
                dq_acc[row + d] = 0.0f;
        }
        acc = attn_warp_sum(acc);
        if (lane == 0)
            Dv[sh.lse + i] = acc;
    }
}

/* dst[e] = mul * src[e] in the destination's type (round to nearest): an fp32 accumulator into
 * the gradient. Grid-stride over n elements; also used with src NULL to zero dst (fp32). */
template <typename T>
__global__ void bwd_convert_kernel(const float *__restrict__ src, T *__restrict__ dst, int64_t n,
                                   float mul) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = src != NULL ? T(mul * src[e]) : T(0.0f);
}

/* --- version 1: naive --------------------------------------------------------------------------
 *
 *   P, dS  [B*H][Lq][Lk] fp32 in the workspace (Lq, Lk: the problem's, maxima when varlen)
 *   kernel 1, grid (Lq, heads): the block of row i writes P_ij = exp(scale q_i.k_j - LSE_i) and
 *             dS_ij = P_ij (dO_i.v_j - D_i) for every key j (threads over j)
 *   kernel 2, grid (Lq, heads): dQ_id = scale sum_j dS_ij k_jd        (threads over d)
 *   kernel 3, grid (Lk, heads): dK_jd = scale sum_i dS_ij q_id, dV_jd = sum_i P_ij dO_id
 * Each output element is one thread's serial sum: no atomics, no shared memory, and an L x L
 * matrix per head in global memory, twice — what the flash versions below avoid. */
__global__ void naive_p_ds_kernel(const float *__restrict__ q, const float *__restrict__ k,
                                  const float *__restrict__ v, const float *__restrict__ dout,
                                  const float *__restrict__ lse, const float *__restrict__ Dv,
                                  float *__restrict__ P, float *__restrict__ dS, const int *cu_q,
                                  const int *cu_k, int BH, int H, int D, int Lq, int Lk,
                                  float scale, bool causal) {
    const int i = blockIdx.x;
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (i >= sh.Lq)
            continue;
        const float *qi = q + sh.q + i * sh.ld, *gi = dout + sh.q + i * sh.ld;
        const float lse_i = lse[sh.lse + i], D_i = Dv[sh.lse + i];
        const int visible = attn_visible_keys(i, sh.Lq, sh.Lk, causal);
        float *Prow = P + ((int64_t)bh * Lq + i) * Lk, *dSrow = dS + ((int64_t)bh * Lq + i) * Lk;
        for (int j = threadIdx.x; j < sh.Lk; j += blockDim.x) {
            float p = 0.0f, ds = 0.0f;
            if (j < visible) {
                const float *kj = k + sh.k + j * sh.ld, *vj = v + sh.k + j * sh.ld;
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; ++d) {
                    s += qi[d] * kj[d];
                    dp += gi[d] * vj[d];
                }
                p = expf(scale * s - lse_i);
                ds = p * (dp - D_i);
            }
            Prow[j] = p;
            dSrow[j] = ds;
        }
    }
}

__global__ void naive_dq_kernel(const float *__restrict__ k, const float *__restrict__ dS,
                                float *__restrict__ dq, const int *cu_q, const int *cu_k, int BH,
                                int H, int D, int Lq, int Lk, float scale) {
    const int i = blockIdx.x;
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (i >= sh.Lq)
            continue;
        const float *dSrow = dS + ((int64_t)bh * Lq + i) * Lk;
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float acc = 0.0f;
            for (int j = 0; j < sh.Lk; ++j)
                acc += dSrow[j] * k[sh.k + j * sh.ld + d];
            dq[sh.q + i * sh.ld + d] = scale * acc;
        }
    }
}

__global__ void naive_dkdv_kernel(const float *__restrict__ q, const float *__restrict__ dout,
                                  const float *__restrict__ P, const float *__restrict__ dS,
                                  float *__restrict__ dk, float *__restrict__ dv, const int *cu_q,
                                  const int *cu_k, int BH, int H, int D, int Lq, int Lk,
                                  float scale) {
    const int j = blockIdx.x;
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (j >= sh.Lk)
            continue;
        const int64_t col = (int64_t)bh * Lq * Lk + j; /* entry (i, j) at col + i * Lk */
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float ak = 0.0f, av = 0.0f;
            for (int i = 0; i < sh.Lq; ++i) {
                const int64_t x = sh.q + i * sh.ld + d;
                ak += dS[col + (int64_t)i * Lk] * q[x];
                av += P[col + (int64_t)i * Lk] * dout[x];
            }
            dk[sh.k + j * sh.ld + d] = scale * ak;
            dv[sh.k + j * sh.ld + d] = av;
        }
    }
}

/* --- version 2: fa2_fp32 ------------------------------------------------------------------------
 *
 *   grid  = (ceil(Lk/32), min(B*H, 65535)); block = 128 threads = 4 warps
 *   the block owns keys j0 .. j0+31 (lane c <-> key j0 + c) for its whole life: K_j, V_j in
 *   shared memory, dK_j, dV_j in registers; it walks the query tiles i0 = 0, 32, ... (causal:
 *   from the first one that sees key j0).
 *
 *   shared memory (fp32; rows of D + 1: lane c reads row c column-wise, no bank conflicts)
 *   k_s, v_s [32][D+1]    K_j, V_j          q_s, do_s [32][D+1]   Q_i, dO_i
 *   p_s, ds_s [32][33]    P_ij, dS_ij       lse_s, d_s [32]        LSE_i, D_i
 *
 *   per query tile i (32 rows):
 *     (a) warp w, rows r = w, w+4, ..., lane c:  s = q_r.k_c,  P = exp(scale s - LSE_r),
 *         dP = dO_r.v_c,  dS = P (dP - D_r)   -> p_s[r][c], ds_s[r][c]      (masked: P = 0)
 *     (b) __syncthreads
 *     (c) lane c (key), warp w (columns d = w, w+4, ...):
 *         dV[c][d] += sum_r P[r][c] dO[r][d]      dK[c][d] += sum_r dS[r][c] Q[r][d]
 *     (d) warp w (rows r = w, w+4, ...), lane (columns d = lane, lane+32, ...):
 *         dQ[r][d] += scale sum_c dS[r][c] K[c][d]   -> atomicAdd into the fp32 accumulator:
 *         every key block adds its part of the same dQ row, so the adds must be atomic
 *     (e) __syncthreads
 *   after the last tile: dK = scale dK, dV, written once. */
__global__ void fa2_bwd_fp32_kernel(const float *__restrict__ q, const float *__restrict__ k,
                                    const float *__restrict__ v, const float *__restrict__ dout,
                                    const float *__restrict__ lse, const float *__restrict__ Dv,
                                    float *__restrict__ dq_acc, float *__restrict__ dk,
                                    float *__restrict__ dv, const int *cu_q, const int *cu_k,
                                    int BH, int H, int D, int Lq, int Lk, float scale,
                                    bool causal) {
    extern __shared__ float smem[];
    const int LDS = D + 1;
    float *k_s = smem, *v_s = k_s + F32_BC * LDS, *q_s = v_s + F32_BC * LDS;
    float *do_s = q_s + F32_BR * LDS, *p_s = do_s + F32_BR * LDS, *ds_s = p_s + F32_BR * 33;
    float *lse_s = ds_s + F32_BR * 33, *d_s = lse_s + F32_BR;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int j0 = blockIdx.x * F32_BC, key = j0 + lane;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, cu_q, cu_k);
        if (j0 >= sh.Lk) /* the same for every thread: no barrier is skipped by some only */
            continue;
        for (int e = tid; e < F32_BC * D; e += blockDim.x) {
            const int c = e / D, d = e % D;
            const bool in = j0 + c < sh.Lk;
            k_s[c * LDS + d] = in ? k[sh.k + (j0 + c) * sh.ld + d] : 0.0f;
            v_s[c * LDS + d] = in ? v[sh.k + (j0 + c) * sh.ld + d] : 0.0f;
        }
        float dk_r[F32_MAX_D / WARPS] = {}, dv_r[F32_MAX_D / WARPS] = {}; /* column warp + 4t */
        /* causal: query i sees key j0 iff j0 <= i + Lk - Lq */
        const int first = causal ? max(0, j0 - (sh.Lk - sh.Lq)) : 0;
        for (int i0 = first - first % F32_BR; i0 < sh.Lq; i0 += F32_BR) {
            for (int e = tid; e < F32_BR * D; e += blockDim.x) {
                const int r = e / D, d = e % D;
                const bool in = i0 + r < sh.Lq;
                q_s[r * LDS + d] = in ? q[sh.q + (i0 + r) * sh.ld + d] : 0.0f;
                do_s[r * LDS + d] = in ? dout[sh.q + (i0 + r) * sh.ld + d] : 0.0f;
            }
            for (int r = tid; r < F32_BR; r += blockDim.x) {
                lse_s[r] = i0 + r < sh.Lq ? lse[sh.lse + i0 + r] : 0.0f;
                d_s[r] = i0 + r < sh.Lq ? Dv[sh.lse + i0 + r] : 0.0f;
            }
            __syncthreads(); // Q_i, dO_i, LSE_i, D_i (and K_j, V_j) complete before any use

            for (int r = warp; r < F32_BR; r += WARPS) { /* (a) */
                const int i = i0 + r;
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; ++d) {
                    s += q_s[r * LDS + d] * k_s[lane * LDS + d];
                    dp += do_s[r * LDS + d] * v_s[lane * LDS + d];
                }
                const bool vis = i < sh.Lq && key < attn_visible_keys(i, sh.Lq, sh.Lk, causal);
                const float p = vis ? expf(scale * s - lse_s[r]) : 0.0f;
                p_s[r * 33 + lane] = p;
                ds_s[r * 33 + lane] = p * (dp - d_s[r]);
            }
            __syncthreads(); // (b) P and dS complete before any warp reads another warp's rows

            for (int t = 0; warp + WARPS * t < D; ++t) { /* (c) */
                const int d = warp + WARPS * t;
                float av = 0.0f, ak = 0.0f;
                for (int r = 0; r < F32_BR; ++r) {
                    av += p_s[r * 33 + lane] * do_s[r * LDS + d];
                    ak += ds_s[r * 33 + lane] * q_s[r * LDS + d];
                }
                dv_r[t] += av;
                dk_r[t] += ak;
            }
            for (int r = warp; r < F32_BR && i0 + r < sh.Lq; r += WARPS) /* (d) */
                for (int d = lane; d < D; d += 32) {
                    float acc = 0.0f;
                    for (int c = 0; c < F32_BC; ++c)
                        acc += ds_s[r * 33 + c] * k_s[c * LDS + d];
                    atomicAdd(dq_acc + sh.q + (i0 + r) * sh.ld + d, scale * acc);
                }
            __syncthreads(); // (e) every warp done with this tile before the next one's loads
        }
        if (key < sh.Lk)
            for (int t = 0; warp + WARPS * t < D; ++t) {
                dk[sh.k + key * sh.ld + warp + WARPS * t] = scale * dk_r[t];
                dv[sh.k + key * sh.ld + warp + WARPS * t] = dv_r[t];
            }
        __syncthreads(); // every warp done reading K_j, V_j before the next head's loads
    }
}

/* --- versions 3-5: the tensor-core tile ---------------------------------------------------------
 *
 * Which block owns which tile (README, "Two loop orders"):
 *
 *   dK/dV pass (versions 3, 4, 5): block kb owns      dQ pass (versions 4, 5): block qb owns
 *   key tile K_j, V_j and walks the query tiles       query tile Q_i, dO_i and walks the key
 *   down its column of the score matrix:              tiles along its row (FA2's forward order):
 *
 *            key tiles ->                                       key tiles ->
 *          +----+----+----+----+                              +----+----+----+----+
 *   query  |    | kb |    |    |     dK_j, dV_j in     query  |    |    |    |    |
 *   tiles  +----+----+----+----+     registers;        tiles  +----+----+----+----+
 *     |    |    | v  |    |    |     dQ_i: atomics       |    | qb --> --> -->   |  dQ_i in
 *     v    +----+----+----+----+     (version 3) or      v    +----+----+----+----+  registers,
 *          |    | v  |    |    |     the dQ pass              |    |    |    |    |  written once
 *          +----+----+----+----+     (versions 4, 5)          +----+----+----+----+
 *
 *   block = 4 warps; warp w owns 16 query rows of each query tile (S, dP, dS, dQ_i: C layout,
 *   rows g, g+8 per lane) and 16 keys of the block's key tile (dK_j, dV_j: C layout, keys g, g+8)
 *
 *   shared memory, rows of D + 8 (attn_padded_layout; the 64 x 64 tiles: rows of 72)
 *   k_s, v_s [64][D+8]   K_j, V_j (cp.async)        p_s, ds_s [64][72]   P, dS of the tile (T)
 *   q_s, do_s [64][D+8]  Q_i, dO_i (cp.async)
 *
 *   dK/dV pass, per query tile, warp w:
 *     S_w  = Q_w K_j^T            attn_fa2_score_tile (example 03), masked, P = exp2(S - LSE)
 *     P -> p_s; __syncthreads; dV_w += P^T dO   the A operand is a column slice of P: ldmatrix
 *                                               .trans from p_s (bwd_accumulate_tn)
 *     dP_w = dO_w V_j^T           attn_fa2_score_tile with dO as A and V_j as B
 *     dS_w = P (dP - D) -> ds_s; __syncthreads; dK_w += dS^T Q      (bwd_accumulate_tn)
 *     version 3: dQ_w += dS_w K_j from registers (dS's C layout is the A layout, as P in the
 *                forward's P V), added to the fp32 accumulator with atomics (bwd_dq_atomic)
 *     __syncthreads before the next tile's copies overwrite q_s, do_s, p_s, ds_s
 *   dQ pass (versions 4, 5), per key tile, warp w: S, P, dP, dS as above from registers;
 *     dQ_w += dS_w K_j (attn_fa2_accumulate_pv with dS for P and K_j for V). */

/* The arguments of the tensor-core kernels (fp16/bf16 tensors; fp32 statistics). */
template <typename T> struct tc_params {
    const T *q, *k, *v, *dout;
    const float *lse, *Dv;
    float *dq_acc; /* version 3 */
    T *dq, *dk, *dv;
    const int *cu_q, *cu_k;
    int BH, H, Lq, Lk;
    float scale;
    bool causal;
};

/* The tiles a block walks and which entries inside them count. dense: the key tiles of a query
 * tile up to its last row's causal limit, or the query tiles of a key tile from the first row
 * that sees its first key. listed: the block mask's lists (rows: a query block's key blocks;
 * cols: the transposed view, a key block's query blocks), full first, then partial. */
struct bwd_tiles {
    bool listed;
    attn_block_mask rows, cols; /* arrays in device memory (listed only) */
    attn_pattern pattern;       /* the predicate of partial tiles (n_parts 0: none) */
};

struct tile_walk {
    const int32_t *full, *part;
    int n_full, n_part, first, n;
    bool listed;

    /* The tiles of block `own` (a query tile if !by_key, a key tile if by_key) of sequence b. */
    __device__ tile_walk(const bwd_tiles &tp, bool by_key, int b, int own, const attn_seq_head &sh,
                         bool causal)
        : full(NULL), part(NULL), n_full(0), n_part(0), first(0), n(0), listed(tp.listed) {
        if (listed) {
            const attn_block_mask &m = by_key ? tp.cols : tp.rows;
            const int64_t row = (int64_t)b * m.num_q_blocks + own;
            full = m.full_kv_indices + row * m.num_k_blocks;
            part = m.kv_indices + row * m.num_k_blocks;
            n_full = m.full_kv_num_blocks[row];
            n_part = m.kv_num_blocks[row];
        } else if (by_key) { /* query tiles from the first row that sees key own * BC */
            const int i_first = causal ? max(0, own * BC - (sh.Lk - sh.Lq)) : 0;
            first = i_first / BR;
            n = max(0, (sh.Lq + BR - 1) / BR - first);
        } else { /* key tiles up to what the tile's last row sees */
            const int last = min(own * BR + BR, sh.Lq) - 1;
            n = (attn_visible_keys(last, sh.Lq, sh.Lk, causal) + BC - 1) / BC;
        }
    }
    __device__ int count() const { return listed ? n_full + n_part : n; }
    /* Tile t; *partial: a partial tile of the mask (its entries need the pattern's test). */
    __device__ int at(int t, bool *partial) const {
        *partial = listed && t >= n_full;
        return !listed ? first + t : t < n_full ? full[t] : part[t - n_full];
    }
};

/* Does tile (i0, j0) need the per-entry test? A partial tile, a tail of either sequence, or a
 * tile crossing the causal diagonal (its first row does not see its last key). */
__device__ __forceinline__ bool tile_masked(int i0, int j0, bool partial, const attn_seq_head &sh,
                                            bool causal) {
    return partial || i0 + BR > sh.Lq || j0 + BC > sh.Lk ||
           (causal && j0 + BC - 1 > i0 + sh.Lk - sh.Lq);
}

/* Entry (i, j) of the sequence: in range, causal, and kept by the pattern (if any). */
__device__ __forceinline__ bool entry_visible(int i, int j, const attn_seq_head &sh, bool causal,
                                              const attn_pattern &pat) {
    return i < sh.Lq && j < sh.Lk && (!causal || j <= i + sh.Lk - sh.Lq) &&
           (pat.n_parts == 0 || attn_pattern_keep(&pat, i, j, sh.Lq, sh.Lk));
}

/* acc (16 x D) += M_w^T X for this warp: M is a 64 x 64 tile in shared memory (rows: the query
 * rows of the tile, columns: keys; P or dS), whose columns c0 .. c0+15 are the A operand's rows;
 * X (64 x D: dO or Q) is the B operand, k-major. The A fragment of a transposed operand comes
 * from ldmatrix .trans (device/mma.cuh): matrix m of the x4 load holds rows 16ks + 8(m/2) ..+7
 * and columns c0 + 8(m%2) ..+7 of M, so register m of lane (g, t) is (M[2t][g], M[2t+1][g]) of
 * that quarter = A[g][2t], A[g][2t+1] of quadrant m, the layout mma.sync expects. */
template <typename T, int D, typename Lay, typename PLay>
__device__ __forceinline__ void bwd_accumulate_tn(float (&acc)[D / 8][4],
                                                  const T *m_s,   // [64][PLay::LD] shared
                                                  int c0,         // this warp's 16 columns
                                                  const T *x_s) { // [64][Lay::LD] shared
    const int lane = threadIdx.x % 32;
    for (int ks = 0; ks < BR / 16; ++ks) {
        uint32_t a[4];
        ldmatrix_x4_trans(
            a, m_s + PLay::at(ks * 16 + (lane / 16) * 8 + lane % 8, c0 + ((lane / 8) % 2) * 8));
        for (int dt = 0; dt < D / 8; dt += 2) {
            uint32_t xf[4];
            ldmatrix_x4_trans(xf, x_s + Lay::at(ks * 16 + lane % 16, dt * 8 + (lane / 16) * 8));
            attn_mma_traits<T>::mma(acc[dt], a, xf);
            attn_mma_traits<T>::mma(acc[dt + 1], a, xf + 2);
        }
    }
}

/* This warp's 16 rows of a 16 x 64 C-layout tile (P or dS) into shared memory as T: lane (g, t)
 * writes columns 2t, 2t+1 of each n-tile of rows g and g + 8 (32-bit stores). */
template <typename T, typename PLay>
__device__ __forceinline__ void bwd_store_tile(T *m_s, const float (&s)[BC / 8][4]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    for (int nt = 0; nt < BC / 8; ++nt)
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<uint32_t *>(m_s +
                                          PLay::at(warp * WARP_ROWS + g + 8 * h, nt * 8 + 2 * t)) =
                attn_mma_traits<T>::pack(s[nt][2 * h], s[nt][2 * h + 1]);
}

/* dQ_w += dS_w K_j added to the fp32 accumulator (version 3): attn_fa2_accumulate_pv's product
 * with its loops exchanged, two n-tiles of dQ at a time, so that 8 accumulators are live rather
 * than D/2; each lane then adds its 8 elements atomically (rows g, g+8 that exist). */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void bwd_dq_atomic(float *dq_acc, const float (&ds)[BC / 8][4],
                                              const T *k_s, int row0, const attn_seq_head &sh) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t af[BC / 16][4];
    for (int ks = 0; ks < BC / 16; ++ks) {
        af[ks][0] = attn_mma_traits<T>::pack(ds[2 * ks][0], ds[2 * ks][1]);
        af[ks][1] = attn_mma_traits<T>::pack(ds[2 * ks][2], ds[2 * ks][3]);
        af[ks][2] = attn_mma_traits<T>::pack(ds[2 * ks + 1][0], ds[2 * ks + 1][1]);
        af[ks][3] = attn_mma_traits<T>::pack(ds[2 * ks + 1][2], ds[2 * ks + 1][3]);
    }
    for (int dt = 0; dt < D / 8; dt += 2) {
        float c[2][4] = {};
        for (int ks = 0; ks < BC / 16; ++ks) {
            uint32_t kf[4];
            ldmatrix_x4_trans(kf, k_s + Lay::at(ks * 16 + lane % 16, dt * 8 + (lane / 16) * 8));
            attn_mma_traits<T>::mma(c[0], af[ks], kf);
            attn_mma_traits<T>::mma(c[1], af[ks], kf + 2);
        }
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + g + 8 * h;
            if (row >= sh.Lq)
                continue;
            for (int u = 0; u < 2; ++u) {
                float *dst = dq_acc + sh.q + row * sh.ld + (dt + u) * 8 + 2 * t;
                atomicAdd(dst, c[u][2 * h]);
                atomicAdd(dst + 1, c[u][2 * h + 1]);
            }
        }
    }
}

/* The statistics of rows g and g + 8 of this warp: LSE in log2 units (+inf for a row past the
 * end or one that sees no key: P = exp2(S - inf) = 0 then, never -inf - -inf) and D_i. */
__device__ __forceinline__ void row_stats(const float *lse, const float *Dv, int row0,
                                          const attn_seq_head &sh, float (&lse2)[2],
                                          float (&Di)[2]) {
    const int g = threadIdx.x % 32 / 4;
    for (int h = 0; h < 2; ++h) {
        const int i = row0 + g + 8 * h;
        const float x = i < sh.Lq ? lse[sh.lse + i] : -INFINITY;
        lse2[h] = x == -INFINITY ? INFINITY : x * CUDART_L2E_F;
        Di[h] = i < sh.Lq ? Dv[sh.lse + i] : 0.0f;
    }
}

/* S = Q_w K_j^T -> P (in place), masked where needed. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void
recompute_p(float (&s)[BC / 8][4], const uint32_t (&qf)[D / 16][4], const T *k_s, int row0, int j0,
            bool masked, float scale2, const float (&lse2)[2], const attn_seq_head &sh, bool causal,
            const attn_pattern &pat) {
    const int g = threadIdx.x % 32 / 4;
    attn_fa2_score_tile<T, D, Lay>(s, qf, k_s);
    const int rows[2] = {row0 + g, row0 + g + 8};
    attn_fa2_scale_and_mask(s, j0, masked, scale2, [&](int h, int key) {
        return entry_visible(rows[h], key, sh, causal, pat);
    });
    for (int nt = 0; nt < BC / 8; ++nt)
        for (int x = 0; x < 4; ++x)
            s[nt][x] = exp2f(s[nt][x] - lse2[x >> 1]);
}

/* dS = P (dP - D_i) in place of P's registers; dP = dO_w V_j^T. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void make_ds(float (&s)[BC / 8][4], const uint32_t (&dof)[D / 16][4],
                                        const T *v_s, const float (&Di)[2]) {
    float dp[BC / 8][4];
    attn_fa2_score_tile<T, D, Lay>(dp, dof, v_s);
    for (int nt = 0; nt < BC / 8; ++nt)
        for (int x = 0; x < 4; ++x)
            s[nt][x] = s[nt][x] * (dp[nt][x] - Di[x >> 1]);
}

/* The prologue both tensor-core kernels share: the K_j, V_j, Q_i and dO_i tiles, rows of Lay::LD
 * (the map above), in this order at the start of the block's dynamic shared memory (the dK/dV
 * pass puts p_s and ds_s after them), and their copies: K_j, V_j of key tile j0 or Q_i, dO_i of
 * query tile i0 of the head, each pair one cp.async group (rows past the sequence's end
 * zero-filled) that the caller waits for. */
template <typename T, int D> struct bwd_block {
    using Lay = attn_padded_layout<D>;
    T *k_s, *v_s;  /* [BC][LD] K_j, V_j */
    T *q_s, *do_s; /* [BR][LD] Q_i, dO_i */
    __device__ explicit bwd_block(unsigned char *smem)
        : k_s(reinterpret_cast<T *>(smem)), v_s(k_s + BC * Lay::LD), q_s(v_s + BC * Lay::LD),
          do_s(q_s + BR * Lay::LD) {}
    __device__ __forceinline__ void copy_kv(const tc_params<T> &a, const attn_seq_head &sh,
                                            int j0) const {
        copy_pair<BC>(k_s, v_s, a.k + sh.k + j0 * sh.ld, a.v + sh.k + j0 * sh.ld, sh.ld,
                      sh.Lk - j0);
    }
    __device__ __forceinline__ void copy_q_do(const tc_params<T> &a, const attn_seq_head &sh,
                                              int i0) const {
        copy_pair<BR>(q_s, do_s, a.q + sh.q + i0 * sh.ld, a.dout + sh.q + i0 * sh.ld, sh.ld,
                      sh.Lq - i0);
    }
    template <int NROWS>
    static __device__ __forceinline__ void copy_pair(T *x_s, T *y_s, const T *x, const T *y,
                                                     int64_t ld, int valid) {
        attn_load_tile_async<T, D, NROWS, Lay>(x_s, x, ld, valid);
        attn_load_tile_async<T, D, NROWS, Lay>(y_s, y, ld, valid);
        cp_async_commit();
    }
};

/* The dK/dV pass (versions 3-5): block blockIdx.x owns key tile kb. DQ_ATOMIC (version 3): also
 * dQ, by atomics. */
template <typename T, int D, bool DQ_ATOMIC>
__global__ void fa2_bwd_kv_kernel(const tc_params<T> a, const bwd_tiles tp) {
    using Lay = attn_padded_layout<D>;
    using PLay = attn_padded_layout<BC>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const bwd_block<T, D> blk(smem_raw);
    T *p_s = blk.do_s + BR * Lay::LD; /* [BR][72] */
    T *ds_s = p_s + BR * PLay::LD;    /* [BR][72] */
    const int warp = threadIdx.x / 32;
    const int kb = blockIdx.x, j0 = kb * BC;
    const float scale2 = a.scale * CUDART_L2E_F;

    for (int bh = blockIdx.y; bh < a.BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, a.BH, a.H, D, a.Lq, a.Lk, a.cu_q, a.cu_k);
        if (j0 >= sh.Lk) /* the same for every thread: no barrier is skipped by some only */
            continue;
        blk.copy_kv(a, sh, j0);
        float dk[D / 8][4] = {}, dv[D / 8][4] = {}; /* keys j0 + 16w + g (+8), C layout */
        const tile_walk tiles(tp, true, bh / a.H, kb, sh, a.causal);
        for (int it = 0; it < tiles.count(); ++it) {
            bool partial;
            const int i0 = tiles.at(it, &partial) * BR, row0 = i0 + warp * WARP_ROWS;
            const bool masked = tile_masked(i0, j0, partial, sh, a.causal);
            blk.copy_q_do(a, sh, i0);
            cp_async_wait_all();
            __syncthreads(); // Q_i, dO_i (and K_j, V_j) landed for every thread before any read
            float lse2[2], Di[2];
            row_stats(a.lse, a.Dv, row0, sh, lse2, Di);

            uint32_t qf[D / 16][4];
            attn_fa2_load_q_fragments<T, D, Lay>(qf, blk.q_s);
            float s[BC / 8][4];
            recompute_p<T, D, Lay>(s, qf, blk.k_s, row0, j0, masked, scale2, lse2, sh, a.causal,
                                   tp.pattern);
            bwd_store_tile<T, PLay>(p_s, s);
            __syncthreads(); // P complete in shared memory before any warp reads it for dV
            bwd_accumulate_tn<T, D, Lay, PLay>(dv, p_s, warp * WARP_ROWS, blk.do_s);

            uint32_t dof[D / 16][4];
            attn_fa2_load_q_fragments<T, D, Lay>(dof, blk.do_s);
            make_ds<T, D, Lay>(s, dof, blk.v_s, Di);
            bwd_store_tile<T, PLay>(ds_s, s);
            __syncthreads(); // dS complete in shared memory before any warp reads it for dK
            bwd_accumulate_tn<T, D, Lay, PLay>(dk, ds_s, warp * WARP_ROWS, blk.q_s);
            if (DQ_ATOMIC)
                bwd_dq_atomic<T, D, Lay>(a.dq_acc, s, blk.k_s, row0, sh);
            __syncthreads(); // all warps done with q_s, do_s, p_s, ds_s (and, last, K_j, V_j)
                             // before the next tile's (or head's) copies overwrite them
        }
        cp_async_wait_all(); /* a key tile no query sees: its copies still land before reuse */
        /* dK = scale sum dS^T Q, dV: this warp's 16 keys, rows of K/V (attn_fa2_store_o with
         * the key side of the slice in place of the query side) */
        for (int dt = 0; dt < D / 8; ++dt)
            for (int x = 0; x < 4; ++x)
                dk[dt][x] *= a.scale;
        attn_seq_head kh = sh;
        kh.q = sh.k;
        kh.Lq = sh.Lk;
        attn_fa2_store_o<T, D>(a.dk, dk, j0 + warp * WARP_ROWS, kh);
        attn_fa2_store_o<T, D>(a.dv, dv, j0 + warp * WARP_ROWS, kh);
    }
}

/* The dQ pass (versions 4, 5): block blockIdx.x owns query tile qb and walks its key tiles, as
 * FA2's forward does; dQ_i stays in registers and is written once, in a fixed order of adds. */
template <typename T, int D>
__global__ void fa2_bwd_dq_kernel(const tc_params<T> a, const bwd_tiles tp) {
    using Lay = attn_padded_layout<D>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const bwd_block<T, D> blk(smem_raw);
    const int warp = threadIdx.x / 32;
    const int qb = blockIdx.x, i0 = qb * BR, row0 = i0 + warp * WARP_ROWS;
    const float scale2 = a.scale * CUDART_L2E_F;

    for (int bh = blockIdx.y; bh < a.BH; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, a.BH, a.H, D, a.Lq, a.Lk, a.cu_q, a.cu_k);
        if (i0 >= sh.Lq) /* the same for every thread: no barrier is skipped by some only */
            continue;
        blk.copy_q_do(a, sh, i0);
        cp_async_wait_all();
        __syncthreads(); // Q_i and dO_i landed for every thread before the warps ldmatrix them
        uint32_t qf[D / 16][4], dof[D / 16][4];
        attn_fa2_load_q_fragments<T, D, Lay>(qf, blk.q_s);
        attn_fa2_load_q_fragments<T, D, Lay>(dof, blk.do_s);
        float lse2[2], Di[2];
        row_stats(a.lse, a.Dv, row0, sh, lse2, Di);
        float dq[D / 8][4] = {};
        const tile_walk tiles(tp, false, bh / a.H, qb, sh, a.causal);
        for (int t = 0; t < tiles.count(); ++t) {
            bool partial;
            const int j0 = tiles.at(t, &partial) * BC;
            const bool masked = tile_masked(i0, j0, partial, sh, a.causal);
            blk.copy_kv(a, sh, j0);
            cp_async_wait_all();
            __syncthreads(); // K_j, V_j landed for every thread before any warp reads them
            float s[BC / 8][4];
            recompute_p<T, D, Lay>(s, qf, blk.k_s, row0, j0, masked, scale2, lse2, sh, a.causal,
                                   tp.pattern);
            make_ds<T, D, Lay>(s, dof, blk.v_s, Di);
            attn_fa2_accumulate_pv<T, D, Lay>(dq, s, blk.k_s); /* dQ_w += dS_w K_j */
            __syncthreads(); // all warps done with K_j, V_j before the next tile's copies
        }
        for (int dt = 0; dt < D / 8; ++dt)
            for (int x = 0; x < 4; ++x)
                dq[dt][x] *= a.scale;
        attn_fa2_store_o<T, D>(a.dq, dq, row0, sh);
        __syncthreads(); // every warp holds its fragments before the next head's Q, dO copies
    }
}

/* --- version 6: topk ---------------------------------------------------------------------------
 *
 *   grid  = (Lq, B, ceil(H/4)); block = 4 warps; warp w <-> query i = blockIdx.x of sequence
 *   b = blockIdx.y, head h = 4 blockIdx.z + w (example 05's sparse_gather layout)
 *   the warp walks the query's selection 32 slots at a time, lane l <-> slot c0 + l:
 *     key = sel[c0 + l] (-1: an empty slot, skipped), s = q_i.k_key, P = exp(scale s - LSE_i),
 *     dP = dO_i.v_key, dS = P (dP - D_i)
 *   then for each of the 32 slots (P, dS and the key broadcast by shuffles), lane l owns columns
 *   d = l, l + 32, ...:
 *     dQ_i[d] += dS k_key[d]                 in registers: the query's own sum, written once
 *     dK[key][d] += dS q_i[d], dV[key][d] += P dO_i[d]      atomicAdd: every query that
 *                                            selected the key adds to its rows (a scatter)
 *   Costs: 2 D atomics per selected (query, head) where a dense tile adds nothing atomically —
 *   README, "Top-k: the scatter" for what production kernels do instead. */
template <typename T>
__global__ void topk_bwd_kernel(const T *__restrict__ q, const T *__restrict__ k,
                                const T *__restrict__ v, const T *__restrict__ dout,
                                const float *__restrict__ lse, const float *__restrict__ Dv,
                                const int32_t *__restrict__ sel, // [rows_q, K]
                                T *__restrict__ dq, float *__restrict__ dk_acc,
                                float *__restrict__ dv_acc, const int *cu_q, const int *cu_k, int B,
                                int H, int Lq, int Lk, int D, int K, float scale, bool causal) {
    __shared__ float q_s[WARPS][F32_MAX_D], do_s[WARPS][F32_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int i = blockIdx.x, b = blockIdx.y, h = blockIdx.z * WARPS + warp;
    if (h >= H)
        return; /* no block barrier below: a warp may leave */
    const attn_seq_head sh = attn_seq_head_at(b * H + h, B * H, H, D, Lq, Lk, cu_q, cu_k);
    if (i >= sh.Lq)
        return;
    const int64_t qrow = sh.q + i * sh.ld;
    for (int d = lane; d < D; d += 32) {
        q_s[warp][d] = float(q[qrow + d]);
        do_s[warp][d] = float(dout[qrow + d]);
    }
    __syncwarp(); // the warp's rows complete before every lane reads all of them
    const float lse_i = lse[sh.lse + i], D_i = Dv[sh.lse + i];
    const int visible = attn_visible_keys(i, sh.Lq, sh.Lk, causal);
    const int32_t *srow = sel + ((cu_q != NULL ? (int64_t)cu_q[b] : (int64_t)b * Lq) + i) * K;
    float acc[F32_MAX_D / 32] = {};
    for (int c0 = 0; c0 < K; c0 += 32) {
        const int key = c0 + lane < K ? srow[c0 + lane] : -1;
        float p = 0.0f, ds = 0.0f;
        if (key >= 0 && key < visible) {
            const T *kr = k + sh.k + key * sh.ld, *vr = v + sh.k + key * sh.ld;
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < D; ++d) {
                s += q_s[warp][d] * float(kr[d]);
                dp += do_s[warp][d] * float(vr[d]);
            }
            p = expf(scale * s - lse_i);
            ds = p * (dp - D_i);
        }
        for (int e = 0; e < 32; ++e) {
            const float pe = __shfl_sync(0xffffffffu, p, e);
            const float dse = __shfl_sync(0xffffffffu, ds, e);
            const int ke = __shfl_sync(0xffffffffu, key, e);
            if (pe == 0.0f && dse == 0.0f) /* an empty slot (or nothing to add): the whole warp */
                continue;
            const int64_t kv = sh.k + ke * sh.ld;
            for (int c = 0; c < F32_MAX_D / 32 && lane + 32 * c < D; ++c) {
                const int d = lane + 32 * c;
                acc[c] += dse * float(k[kv + d]);
                atomicAdd(dk_acc + kv + d, dse * q_s[warp][d]);
                atomicAdd(dv_acc + kv + d, pe * do_s[warp][d]);
            }
        }
    }
    for (int c = 0; c < F32_MAX_D / 32 && lane + 32 * c < D; ++c)
        dq[qrow + lane + 32 * c] = T(scale * acc[c]);
}

/* ================================= launchers ============================================== */

static const bwd_args *args_of(const attn_buffers *b) { return (const bwd_args *)b->args; }

/* The workspace's parts for p (the order of bwd_workspace_bytes below). */
static bwd_workspace workspace_of(const attn_problem *p, const attn_buffers *b, bool dq_acc,
                                  bool kv_acc, bool naive) {
    bwd_workspace w = {NULL, NULL, NULL, NULL, NULL, NULL};
    float *x = (float *)b->workspace;
    w.D = x;
    x += attn_problem_lse_elems(p);
    if (dq_acc)
        w.dq_acc = x, x += attn_problem_q_elems(p);
    if (kv_acc)
        w.dk_acc = x, x += attn_problem_k_elems(p), w.dv_acc = x, x += attn_problem_k_elems(p);
    if (naive) {
        const size_t n = (size_t)p->B * p->H * p->Lq * p->Lk;
        w.P = x, x += n, w.dS = x;
    }
    return w;
}

static size_t ws_bytes(const attn_problem *p, bool dq_acc, bool kv_acc, bool naive) {
    size_t n = attn_problem_lse_elems(p);
    n += dq_acc ? attn_problem_q_elems(p) : 0;
    n += kv_acc ? 2 * attn_problem_k_elems(p) : 0;
    n += naive ? 2 * (size_t)p->B * p->H * p->Lq * p->Lk : 0;
    return n * sizeof(float);
}
static size_t ws_naive(const attn_problem *p) { return ws_bytes(p, false, false, true); }
static size_t ws_atomic_dq(const attn_problem *p) { return ws_bytes(p, true, false, false); }
static size_t ws_d_only(const attn_problem *p) { return ws_bytes(p, false, false, false); }
static size_t ws_topk(const attn_problem *p) { return ws_bytes(p, false, true, false); }

/* The preprocessing kernel: D, and the dQ accumulator zeroed (dq_acc non-NULL). */
template <typename T>
static void launch_preprocess(const attn_problem *p, const bwd_args *a, float *D, float *dq_acc,
                              cudaStream_t stream) {
    const int BH = p->B * p->H;
    dim3 grid((p->Lq + WARPS - 1) / WARPS, attn_head_blocks(BH));
    bwd_preprocess_kernel<T><<<grid, WARPS * 32, 0, stream>>>((const T *)a->o, (const T *)a->dout,
                                                              D, dq_acc, a->cu_q, a->cu_k, BH, p->H,
                                                              p->D, p->Lq, p->Lk);
}

template <typename T>
static void launch_convert(const float *src, void *dst, size_t n, float mul, cudaStream_t stream) {
    const size_t want = (n + 255) / 256;
    const unsigned blocks = (unsigned)(want < 1 ? 1 : want < 4096 ? want : 4096);
    bwd_convert_kernel<T><<<blocks, 256, 0, stream>>>(src, (T *)dst, (int64_t)n, mul);
}

/* Version 1. */
static void launch_naive(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    const bwd_args *a = args_of(b);
    const bwd_workspace w = workspace_of(p, b, false, false, true);
    const int BH = p->B * p->H;
    launch_preprocess<float>(p, a, w.D, NULL, stream);
    naive_p_ds_kernel<<<dim3(p->Lq, attn_head_blocks(BH)), 128, 0, stream>>>(
        (const float *)a->q, (const float *)a->k, (const float *)a->v, (const float *)a->dout,
        a->lse, w.D, w.P, w.dS, a->cu_q, a->cu_k, BH, p->H, p->D, p->Lq, p->Lk, p->scale,
        p->causal);
    naive_dq_kernel<<<dim3(p->Lq, attn_head_blocks(BH)), 128, 0, stream>>>(
        (const float *)a->k, w.dS, (float *)a->dq, a->cu_q, a->cu_k, BH, p->H, p->D, p->Lq, p->Lk,
        p->scale);
    naive_dkdv_kernel<<<dim3(p->Lk, attn_head_blocks(BH)), 128, 0, stream>>>(
        (const float *)a->q, (const float *)a->dout, w.P, w.dS, (float *)a->dk, (float *)a->dv,
        a->cu_q, a->cu_k, BH, p->H, p->D, p->Lq, p->Lk, p->scale);
}

/* Version 2: K/V, Q/dO tiles, P and dS, LSE and D in shared memory (fp32). */
static size_t fp32_smem(const attn_problem *p) {
    return ((size_t)(F32_BC + F32_BC + F32_BR + F32_BR) * (p->D + 1) + 2 * F32_BR * 33 +
            2 * F32_BR) *
           sizeof(float);
}
static attn_launch_shape fa2_fp32_shape(const attn_problem *p) {
    return {"fa2_bwd_fp32_kernel", WARPS * 32, fp32_smem(p)};
}

static void launch_fa2_fp32(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    const bwd_args *a = args_of(b);
    const bwd_workspace w = workspace_of(p, b, true, false, false);
    const int BH = p->B * p->H;
    const size_t smem = fp32_smem(p);
    launch_preprocess<float>(p, a, w.D, w.dq_acc, stream);
    cudaFuncSetAttribute(fa2_bwd_fp32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)smem);
    fa2_bwd_fp32_kernel<<<dim3((p->Lk + F32_BC - 1) / F32_BC, attn_head_blocks(BH)), WARPS * 32,
                          smem, stream>>>(
        (const float *)a->q, (const float *)a->k, (const float *)a->v, (const float *)a->dout,
        a->lse, w.D, w.dq_acc, (float *)a->dk, (float *)a->dv, a->cu_q, a->cu_k, BH, p->H, p->D,
        p->Lq, p->Lk, p->scale, p->causal);
    launch_convert<float>(w.dq_acc, a->dq, attn_problem_q_elems(p), 1.0f, stream);
}

/* Versions 3-5: the dK/dV pass's shared memory (K, V, Q, dO tiles and P, dS), the dQ pass's. */
static size_t kv_smem(const attn_problem *p) {
    return ((size_t)(BC + BC + BR + BR) * (p->D + ATTN_SMEM_PAD) +
            2 * (size_t)BR * (BC + ATTN_SMEM_PAD)) *
           attn_dtype_size(p->dtype);
}
static size_t dq_smem(const attn_problem *p) {
    return (size_t)(BC + BC + BR + BR) * (p->D + ATTN_SMEM_PAD) * attn_dtype_size(p->dtype);
}
static attn_launch_shape fa2_mma_shape(const attn_problem *p) {
    return {"fa2_bwd_kv_kernel", WARPS * 32, kv_smem(p)};
}

template <typename T> static tc_params<T> tc_params_of(const attn_problem *p, const bwd_args *a) {
    tc_params<T> t;
    t.q = (const T *)a->q, t.k = (const T *)a->k, t.v = (const T *)a->v;
    t.dout = (const T *)a->dout;
    t.lse = a->lse, t.Dv = NULL, t.dq_acc = NULL;
    t.dq = (T *)a->dq, t.dk = (T *)a->dk, t.dv = (T *)a->dv;
    t.cu_q = a->cu_q, t.cu_k = a->cu_k;
    t.BH = p->B * p->H, t.H = p->H, t.Lq = p->Lq, t.Lk = p->Lk;
    t.scale = p->scale, t.causal = p->causal;
    return t;
}

/* One backward of versions 3 (atomic), 4 (dense, deterministic) or 5 (listed). */
template <typename T, int D>
static void launch_tc_typed(const attn_problem *p, const attn_buffers *b, bool atomic, bool listed,
                            cudaStream_t stream) {
    static_assert(attn_padded_layout<D>::LD == D + ATTN_SMEM_PAD, "kv_smem's row length");
    const bwd_args *a = args_of(b);
    const bwd_workspace w = workspace_of(p, b, atomic, false, false);
    tc_params<T> t = tc_params_of<T>(p, a);
    t.Dv = w.D;
    t.dq_acc = w.dq_acc;
    bwd_tiles tp;
    memset(&tp, 0, sizeof tp);
    tp.listed = listed;
    if (listed) {
        tp.rows = a->rows;
        tp.cols = a->cols;
        tp.pattern = *a->pattern;
    }
    launch_preprocess<T>(p, a, w.D, w.dq_acc, stream);
    const dim3 kv_grid((p->Lk + BC - 1) / BC, attn_head_blocks(t.BH));
    const size_t smem = kv_smem(p);
    if (atomic) {
        cudaFuncSetAttribute(fa2_bwd_kv_kernel<T, D, true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        fa2_bwd_kv_kernel<T, D, true><<<kv_grid, WARPS * 32, smem, stream>>>(t, tp);
        launch_convert<T>(w.dq_acc, a->dq, attn_problem_q_elems(p), p->scale, stream);
        return;
    }
    cudaFuncSetAttribute(fa2_bwd_kv_kernel<T, D, false>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    fa2_bwd_kv_kernel<T, D, false><<<kv_grid, WARPS * 32, smem, stream>>>(t, tp);
    cudaFuncSetAttribute(fa2_bwd_dq_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)dq_smem(p));
    fa2_bwd_dq_kernel<T, D>
        <<<dim3((p->Lq + BR - 1) / BR, attn_head_blocks(t.BH)), WARPS * 32, dq_smem(p), stream>>>(
            t, tp);
}

/* The registry admits only fp16/bf16 and D = 64 or 128 for versions 3-5. */
static void launch_tc(const attn_problem *p, const attn_buffers *b, bool atomic, bool listed,
                      cudaStream_t stream) {
    attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
        launch_tc_typed<typename decltype(t)::type, decltype(d)::value>(p, b, atomic, listed,
                                                                        stream);
    });
}
static void launch_fa2_mma(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    launch_tc(p, b, true, false, stream);
}
static void launch_fa2_mma_det(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    launch_tc(p, b, false, false, stream);
}
static void launch_block_sparse(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    launch_tc(p, b, false, true, stream);
}

/* Version 6. */
template <typename T>
static void launch_topk_typed(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    const bwd_args *a = args_of(b);
    const bwd_workspace w = workspace_of(p, b, false, true, false);
    const size_t kn = attn_problem_k_elems(p);
    launch_preprocess<T>(p, a, w.D, NULL, stream);
    launch_convert<float>(NULL, w.dk_acc, 2 * kn, 0.0f, stream); /* dK, dV accumulators = 0 */
    topk_bwd_kernel<T><<<dim3(p->Lq, p->B, (p->H + WARPS - 1) / WARPS), WARPS * 32, 0, stream>>>(
        (const T *)a->q, (const T *)a->k, (const T *)a->v, (const T *)a->dout, a->lse, w.D, a->sel,
        (T *)a->dq, w.dk_acc, w.dv_acc, a->cu_q, a->cu_k, p->B, p->H, p->Lq, p->Lk, p->D, a->topk,
        p->scale, p->causal);
    launch_convert<T>(w.dk_acc, a->dk, kn, p->scale, stream);
    launch_convert<T>(w.dv_acc, a->dv, kn, 1.0f, stream);
}
static void launch_topk(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    attn_dispatch_dtype(
        p->dtype, [&](auto t) { launch_topk_typed<typename decltype(t)::type>(p, b, stream); });
}

/* The forward stage: examples 03, 04 and 05's kernels, by symbol, on the problem's buffers. */
extern "C" const attn_example flash2_fwd_example;      /* example 03 */
extern "C" const attn_kernel flash2_fa2_mma;           /* example 03, version 2 */
extern "C" const attn_example sparse_patterns_example; /* example 04: 2 is block_sparse */

static void run_fwd_fa2_fp32(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    attn_example_find(&flash2_fwd_example, 1)->launch(p, &args_of(b)->fwd, stream);
}
static void run_fwd_fa2(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    flash2_fa2_mma.launch(p, &args_of(b)->fwd, stream);
}
static void run_fwd_block_sparse(const attn_problem *p, const attn_buffers *b,
                                 cudaStream_t stream) {
    attn_example_find(&sparse_patterns_example, 2)->launch(p, &args_of(b)->fwd, stream);
}
static void run_fwd_topk(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    const bwd_args *a = args_of(b);
    ds_args d;
    memset(&d, 0, sizeof d);
    d.p = p;
    d.topk = a->topk;
    d.q = a->q, d.k = a->k, d.v = a->v, d.o = (void *)a->fwd.o, d.lse = a->fwd.lse;
    d.sel = (int32_t *)a->sel;
    d.cu_q = a->cu_q, d.cu_k = a->cu_k;
    d.mha = true; /* every head its own K and V, in q's layout */
    ds_launch_sparse_gather(&d, stream);
}

/* ================================= registry =============================================== */

/* fp32 versions (1, 2) and example 03's fa2_fp32: any D up to 128 */
static const attn_requirements fp32_requirements = {
    .dtypes = ATTN_DTYPE_BIT(ATTN_F32), .max_d = F32_MAX_D, .causal = true, .varlen = true};
/* version 6 and example 05's sparse_gather: fp16/bf16, any D up to 128 */
static const attn_requirements gather_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = F32_MAX_D, .causal = true, .varlen = true};
/* versions 3-5 (and example 03's fa2_mma, 04's block_sparse): flash2_fa2_mma.req, fp16/bf16,
 * D = 64 or 128 */

static const attn_kernel bwd_kernels[] = {
    {ATTN_VERSION(1, "naive",
                  "the formulas as they read: P and dS in global memory (O(L^2)), three kernels"),
     .launch = launch_naive, .req = fp32_requirements, .workspace_bytes = ws_naive,
     .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(2, "fa2_fp32",
                  "FA2 backward in fp32: a block owns 32 keys, walks Q tiles, dQ by atomics"),
     .launch = launch_fa2_fp32, .req = fp32_requirements, .workspace_bytes = ws_atomic_dq,
     .launch_shape = fa2_fp32_shape, .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(3, "fa2_mma",
                  "the same loop on tensor cores (fp16/bf16): P^T dO, dS^T Q via ldmatrix.trans"),
     .launch = launch_fa2_mma, .req = flash2_fa2_mma.req, .workspace_bytes = ws_atomic_dq,
     .launch_shape = fa2_mma_shape, .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(4, "fa2_mma_det",
                  "deterministic dQ: no atomics, a second pass in the forward's loop order"),
     .launch = launch_fa2_mma_det, .req = flash2_fa2_mma.req, .workspace_bytes = ws_d_only,
     .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(5, "block_sparse",
                  "version 4 over example 04's block mask and its transposed view"),
     .launch = launch_block_sparse, .req = flash2_fa2_mma.req, .workspace_bytes = ws_d_only,
     .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(6, "topk", "example 05's selection: dQ per query, dK/dV scattered by atomics"),
     .launch = launch_topk, .req = gather_requirements, .workspace_bytes = ws_topk,
     .stage = BWD_STAGE_BACKWARD},
    {ATTN_VERSION(7, "fwd_fa2_fp32", "example 03's fa2_fp32: O and LSE for versions 1 and 2"),
     .launch = run_fwd_fa2_fp32, .req = fp32_requirements, .stage = BWD_STAGE_FORWARD},
    {ATTN_VERSION(8, "fwd_fa2", "example 03's fa2_mma: O and LSE for versions 3 and 4"),
     .launch = run_fwd_fa2, .req = flash2_fa2_mma.req, .stage = BWD_STAGE_FORWARD},
    {ATTN_VERSION(9, "fwd_block_sparse", "example 04's block_sparse: O and LSE for version 5"),
     .launch = run_fwd_block_sparse, .req = flash2_fa2_mma.req, .stage = BWD_STAGE_FORWARD},
    {ATTN_VERSION(10, "fwd_topk", "example 05's sparse_gather: O and LSE for version 6"),
     .launch = run_fwd_topk, .req = gather_requirements, .stage = BWD_STAGE_FORWARD},
};

bwd_mode bwd_kernel_mode(const attn_kernel *k) {
    static const bwd_mode by_id[] = {BWD_DENSE, BWD_DENSE,   BWD_DENSE, BWD_DENSE,
                                     BWD_DENSE, BWD_PATTERN, BWD_TOPK,  BWD_DENSE,
                                     BWD_DENSE, BWD_PATTERN, BWD_TOPK};
    return k->id >= 1 && k->id <= 10 ? by_id[k->id] : BWD_DENSE;
}

extern "C" const attn_module bwd_module; /* its flags, inputs and stages: bwd_run.c */

extern "C" const attn_example flash_bwd_example = {
    .name = "07_flash_attention_backward",
    .summary = "the backward pass: FlashAttention-2's dQ, dK, dV by recomputation, dense, "
               "block-sparse and top-k",
    ATTN_KERNELS(bwd_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {1, 16, 4096, 128}, .sim = {1, 2, 256, 64}},
    .module = &bwd_module,
};
