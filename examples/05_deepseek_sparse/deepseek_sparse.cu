/* deepseek_sparse.cu — Example 05: DeepSeek Sparse Attention (DSA), the content-based sparsity of
 * DeepSeek-V3.2-Exp: a cheap "lightning indexer" scores every visible key of every query, each
 * query keeps its top-k keys, and attention runs over those keys only.
 *
 *     I(t, s) = sum_j w(t, j) * ReLU(q_I(t, j) . k_I(s))            j < H_I indexer heads
 *     S_t     = the top-k keys s of I(t, .) among the keys t sees   (k = 2048 in DeepSeek)
 *     O_t     = softmax(scale * q_t K_S^T) V_S                       per attention head
 *
 * The selection S_t is shared by every attention head of token t, and so is the one key/value
 * head (MQA, as DeepSeek's MLA): a block that serves all heads of a token loads each selected key
 * once for all of them.
 *
 * Versions, stage by stage (each one line of intent; the program checks every stage, then times
 * each kernel; run one with --kernel N, which also runs what the stages before it need):
 *   1 indexer        (stage indexer) the index scores of 4 queries per block against 64-key tiles
 *                    of k_I on tensor cores (mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate:
 *                    the M dimension is 16 indexer heads of one query), ReLU and the weighted
 *                    head sum fused in registers; per-head logits never reach global memory.
 *                    Query positions in chunks: peak memory B * chunk * Lk floats, not B*Lq*Lk.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 1
 *   2 topk_bitonic   (stage top-k) the baseline: the whole row (<= 4096 keys) sorted in shared
 *                    memory by a block-wide bitonic sort, the first k re-sorted by index.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 2
 *   3 topk_radix     (stage top-k) per row, a radix select over the float bits: 4 passes of an
 *                    8-bit histogram find the k-th largest key's bit pattern (pass 1 over global
 *                    memory, then the candidates in the threshold bin are kept in shared memory),
 *                    one pass writes the selected indices in ascending order. Any k, any row
 *                    length.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 3
 *   4 sparse_mma     (stage attention) FA2 over the selected keys: 64 selected K/V rows gathered
 *                    into shared memory per tile by cp.async, S and P V on tensor cores (example
 *                    03's warp steps, ../03_flash_attention_v2/fa2_tile.cuh) with the 64 heads of
 *                    one token as the rows, online softmax, LSE, -1 slots skipped. D = 64 or 128.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 4
 *   5 sparse_gather  (stage attention) one warp per (token, head) walks the selected keys 32 at a
 *                    time on CUDA cores (example 04's gather with a per-token key list).
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 5
 *   6 end_to_end     (stage attention) the pipeline as it would run in a model: per chunk the
 *                    indexer and radix top-k, then sparse_mma.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 6
 *   7 dense_fa2      (stage attention) the baseline: example 03's fa2_mma, dense, on K and V
 *                    copied into every head; checked against the dense reference.
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 7
 *   8 indexer_fp8    (stage indexer) version 1 in FP8 e4m3, as DeepSeek-V3.2 runs it: q_I and
 *                    k_I quantized per row with a power-of-two scale, then version 1's kernel on
 *                    the codes with mma.sync m16n8k32 (sm_89 and later); README, "FP8".
 *                    ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --kernel 8
 * A plain run: ./build/sim/examples/05_deepseek_sparse/deepseek_sparse_sim --topk 64 -L 512
 * --causal. On a GPU build use build/gpu/.../deepseek_sparse_gpu.
 *
 * All versions: fp16/bf16, any L, Lq != Lk, causal bottom-right aligned, packed variable-length
 * batches (--seqlens), queries that see no key (output 0, LSE -inf).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c, the stages'
 * inputs and checks in deepseek_stages.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <math_constants.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "attn/problem.h"
#include "deepseek_sparse.h"
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"

/* ============================== CPU reference ============================================= */
/* deepseek_reference.c: the index scores in double precision (ds_index_scores_ref), the top-k
 * tie rule (ds_check_selection), and the selection as a CSR mask for the harness's attention
 * reference attn_reference (ds_selection_csr), judged by FlashAttention's 2x rule for fp16/bf16
 * (attn/check.h). */

/* ================================== kernels =============================================== */

#define TILE ATTN_FA2_BC /* keys per tile in versions 1 and 4 (64) */

/* --- version 1: indexer ------------------------------------------------------------------------
 *
 *   grid  = (ceil(chunk / 4), B); block = 128 threads = 4 warps; warp w <-> query i0 + 4x + w
 *
 *   shared memory (attn_padded_layout, rows of D_I + 8)
 *   k_s [64][D_I+8]          64 keys of k_I (cp.async), shared by the 4 queries
 *   q_s [4][H_I][D_I+8]      q_I of the 4 queries (contiguous in global memory: one copy)
 *
 *   warp w, per key tile j, per group of 16 indexer heads hg:
 *     S (16 heads x 64 keys) = q_I(t, 16hg..16hg+15) k_I(j..j+63)^T     attn_fa2_score_tile
 *     acc[key] += w(t, head) * ReLU(S[head][key])                        in registers
 *   then the sum over the 16 rows (heads) of acc: a lane holds rows g and g + 8 of its columns,
 *   so the rows are added by __shfl_xor 4, 8, 16 (the 8 lanes with the same t); lanes 0-3 then
 *   hold I(t, key) for the 64 keys and write them. Per-head scores exist only in registers.
 *
 *     k_I tile: 64 keys                 C fragment of S (16 x 8 n-tile):
 *     +---------------------------+     lane (g, t): heads g, g+8; keys 2t, 2t+1
 *     | q_I(t): H_I heads x D_I   |  -> ReLU, * w(t, head), sum over heads:
 *     +---------------------------+     shuffles across g  -> one score per key */
#define IDX_WARPS 4 /* queries per block */

template <typename T, int DI>
__global__ void indexer_kernel(const T *__restrict__ q_index,     // [rows_q, H_I, D_I]
                               const T *__restrict__ k_index,     // [rows_k, D_I]
                               const float *__restrict__ w,       // [rows_q, H_I]
                               const float *__restrict__ q_scale, // [rows_q, H_I] or NULL (v. 8)
                               const float *__restrict__ k_scale, // [rows_k] or NULL (v. 8)
                               float *__restrict__ logits,        // [B, chunk, Lk]
                               const int *__restrict__ cu_q,      // [B+1] or NULL
                               const int *__restrict__ cu_k,      // [B+1] or NULL
                               int Lq, int Lk, int HI, int i0, int chunk, bool causal) {
    using Lay = attn_padded_layout<DI>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *k_s = reinterpret_cast<T *>(smem_raw); /* [TILE][LD] */
    T *q_s = k_s + TILE * Lay::LD;            /* [IDX_WARPS * H_I][LD] */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const attn_seq sq = attn_seq_at(blockIdx.y, Lq, Lk, cu_q, cu_k);
    const int first = i0 + blockIdx.x * IDX_WARPS; /* first query of the block */
    const int end = min(i0 + chunk, sq.Lq);
    if (first >= end) /* the same for every thread: no barrier is skipped by some only */
        return;
    const int i = first + warp;
    const bool has = i < end; /* warp-uniform */

    /* The block's q_I rows, 64 at a time (4 * H_I is a multiple of 64); missing queries: zeros. */
    const T *qsrc = q_index + (sq.q0 + first) * HI * DI;
    for (int r0 = 0; r0 < IDX_WARPS * HI; r0 += TILE)
        attn_load_tile_async<T, DI, TILE, Lay>(q_s + r0 * Lay::LD, qsrc + r0 * DI, DI,
                                               (end - first) * HI - r0);
    cp_async_commit();

    float wv[DS_MAX_INDEX_HEADS / 16][2] = {}; /* w of heads 16hg + g and 16hg + g + 8 */
    for (int hg = 0; has && hg < HI / 16; ++hg)
        for (int h = 0; h < 2; ++h) {
            const int64_t at = (sq.q0 + i) * HI + hg * 16 + g + 8 * h;
            wv[hg][h] = q_scale != NULL ? w[at] * q_scale[at] : w[at]; /* FP8: the q scale */
        }
    const int nkeys = attn_visible_keys(end - 1, sq.Lq, sq.Lk, causal); /* the block's last row */
    const int mine = has ? attn_visible_keys(i, sq.Lq, sq.Lk, causal) : 0;
    float *lrow = logits + ((int64_t)blockIdx.y * chunk + (i - i0)) * Lk;
    const T *qw = q_s + warp * HI * Lay::LD;

    for (int j0 = 0; j0 < nkeys; j0 += TILE) {
        attn_load_tile_async<T, DI, TILE, Lay>(k_s, k_index + (sq.k0 + j0) * DI, DI, sq.Lk - j0);
        cp_async_commit();
        cp_async_wait<0>();
        // every thread's copies of k_I (and, the first time, q_I) have landed before ldmatrix
        __syncthreads();
        if (j0 < mine) { /* warp-uniform: the shuffles below see all 32 lanes */
            float acc[TILE / 8][2] = {};
            for (int hg = 0; hg < HI / 16; ++hg) {
                uint32_t qf[DI / 16][4];
                for (int kk = 0; kk < DI / 16; ++kk)
                    ldmatrix_x4(qf[kk], qw + Lay::at(hg * 16 + lane % 16, kk * 16 + lane / 16 * 8));
                float s[TILE / 8][4];
                attn_fa2_score_tile<T, DI, Lay>(s, qf, k_s);
                for (int nt = 0; nt < TILE / 8; ++nt)
                    for (int x = 0; x < 4; ++x)
                        acc[nt][x & 1] += fmaxf(s[nt][x], 0.0f) * wv[hg][x >> 1];
            }
            for (int nt = 0; nt < TILE / 8; ++nt)
                for (int c = 0; c < 2; ++c)
                    for (int off = 4; off < 32; off <<= 1) /* the 8 lanes with this t */
                        acc[nt][c] += __shfl_xor_sync(0xffffffffu, acc[nt][c], off);
            for (int nt = 0; g == 0 && nt < TILE / 8; ++nt)
                for (int c = 0; c < 2; ++c) {
                    const int key = j0 + nt * 8 + 2 * t + c;
                    if (key < mine) /* FP8: the key's scale, once for all heads */
                        lrow[key] =
                            k_scale != NULL ? acc[nt][c] * k_scale[sq.k0 + key] : acc[nt][c];
                }
        }
        __syncthreads(); // every warp done reading k_s before the next tile's copies overwrite it
    }
}

/* --- version 8: indexer_fp8 ---------------------------------------------------------------------
 *
 * DeepSeek-V3.2's indexer runs in FP8 e4m3 (inference/model.py, class Indexer: act_quant of q_I
 * and k_I in blocks of 128 values, then fp8_index): each row of D_I values (one per token and
 * indexer head of q_I, one per token of k_I) is stored as D_I e4m3 codes and one scale, a power of
 * two (scale_fmt "ue8m0"; inference/kernel.py, act_quant_kernel and fast_round_scale):
 *
 *   a = max(amax(|x|), 1e-4)   s = 2^ceil(log2(fl32(a * (1/448))))   x8 = e4m3(x / s)
 *
 * 448 is e4m3's largest value: the row's largest element lands in [224, 448] and keeps e4m3's 3
 * mantissa bits like every other; x / s is exact (s is a power of two). The scales are positive,
 * so they pass through the ReLU:
 *
 *   I(t, s) = k_scale(s) * sum_j (w(t, j) q_scale(t, j)) * ReLU(q8(t, j) . k8(s))
 *
 * q_scale folds into the head weights (as DeepSeek does) and k_scale multiplies the head sum once
 * per key; with power-of-two scales both products are exact. The dot products are mma.sync
 * m16n8k32 on e4m3 (sm_89 and later) with fp32 accumulation: version 1's kernel itself, on
 * T = attn_e4m3x2 (two codes per 16-bit unit, ../03_flash_attention_v2/fa2_tile.cuh) with D_I / 2
 * units per row. Half the bytes of q_I and k_I, and twice the tensor-core rate of fp16 on an H100
 * (the datasheet's; not measured here).
 *
 *   quantize_e4m3_rows: grid = ceil(rows / 4), block = 4 warps, one warp per row: amax by
 *   __shfl_xor, then each lane converts its columns (no shared memory, no barrier). */
#define QUANT_WARPS 4
#define E4M3_MAX 448.0f

/* 2^ceil(log2(r)) for r > 0, from r's bits: the exponent, plus one if any mantissa bit is set. */
__device__ __forceinline__ float pow2_ceil(float r) {
    const uint32_t b = __float_as_uint(r);
    const int e = (int)((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0u);
    return __uint_as_float((uint32_t)(e + 127) << 23);
}

template <typename T>
__global__ void quantize_e4m3_rows_kernel(const T *__restrict__ x,  // [rows, d]
                                          uint8_t *__restrict__ x8, // [rows, d] e4m3 codes
                                          float *__restrict__ scale, int64_t rows, int d) {
    const int lane = threadIdx.x % 32;
    const int64_t r = (int64_t)blockIdx.x * QUANT_WARPS + threadIdx.x / 32;
    if (r >= rows) /* warp-uniform: the shuffles below see all 32 lanes */
        return;
    const T *row = x + r * d;
    float amax = 1e-4f; /* DeepSeek's floor: a row of zeros still gets a finite scale */
    for (int c = lane; c < d; c += 32)
        amax = fmaxf(amax, fabsf((float)row[c]));
    for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float s = pow2_ceil(amax * (1.0f / E4M3_MAX));
    for (int c = lane; c < d; c += 32)
        x8[r * d + c] = __nv_cvt_float_to_fp8((float)row[c] / s, __NV_SATFINITE, __NV_E4M3);
    if (lane == 0)
        scale[r] = s;
}

/* --corrupt-scale F: a planted bug for the tests, one key's scale multiplied by F after the
 * quantization (the FP8 indexer's checks must fail). */
__global__ void plant_scale_kernel(float *scale, float factor) { scale[0] *= factor; }

/* --- versions 2 and 3: top-k --------------------------------------------------------------------
 *
 * Both take a row of n visible scores and write the k selected key positions, ascending, then -1.
 * A row with n <= k takes every key (no selection needed).
 *
 * Order-preserving bits: for IEEE floats, flipping the sign bit of positives and every bit of
 * negatives gives unsigned integers in the same order as the floats (-inf lowest, +inf highest),
 * so "k largest floats" = "k largest keys", and a key can be selected one byte at a time.
 *
 * Version 2, radix select (256 threads per row):
 *   pass 1  histogram of the top byte of every key (shared atomics);  warp 0 scans the 256 bins
 *           from the top and finds the bin B1 where the running count reaches k: the k-th largest
 *           key starts with B1; 'remaining' = how many more keys are needed from inside B1.
 *           The keys whose top byte is B1 (the candidates) are copied into shared memory.
 *   pass 2..4  the same on the next byte, among keys that match the bytes found so far (read from
 *           the candidates when they fitted, else again from global memory).
 *   After 4 passes the prefix is the k-th largest key T itself; keys > T are all selected and
 *   'remaining' of the keys == T (the first ones by position: ties go to the lowest index).
 *   output  one pass over the row in position order: a block-wide prefix count of (key > T) and
 *           (key == T) gives each selected key its slot, so indices come out ascending.
 *
 * Version 3, bitonic (the baseline): (key, position) pairs of the whole row in shared memory,
 * sorted by key descending (block-wide bitonic network, one __syncthreads per step), then the
 * first k re-sorted by position. O(n log^2 n) compare-exchanges against radix select's ~5 n
 * reads; the row must fit in shared memory (<= 4096 keys). */
#define TOPK_THREADS 256
#define TOPK_WARPS (TOPK_THREADS / 32)
#define TOPK_CAND 4096 /* candidate keys kept in shared memory after pass 1 (16 KiB) */

__device__ __forceinline__ uint32_t order_key(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* What a top-k block works on: its row of scores, where the result goes, and n visible keys.
 * A row with n <= K takes every visible key here (ascending, then -1). Returns true (the same for
 * every thread of the block) when there is a selection left to make: a query with n > K. */
__device__ __forceinline__ bool topk_prepare(const float *logits, int32_t *sel, const int *cu_q,
                                             const int *cu_k, int Lq, int Lk, int i0, int chunk,
                                             int K, bool causal, const float *&row, int32_t *&out,
                                             int &n) {
    const attn_seq sq = attn_seq_at(blockIdx.y, Lq, Lk, cu_q, cu_k);
    const int i = i0 + blockIdx.x;
    if ((int)blockIdx.x >= chunk || i >= sq.Lq)
        return false;
    n = attn_visible_keys(i, sq.Lq, sq.Lk, causal);
    row = logits + ((int64_t)blockIdx.y * chunk + blockIdx.x) * Lk;
    out = sel + (sq.q0 + i) * K;
    for (int s = threadIdx.x; n <= K && s < K; s += blockDim.x)
        out[s] = s < n ? s : -1;
    return n > K;
}

/* Warp 0: the bin (0..255) of hist where the count from the top reaches `need`, and how many
 * keys are still needed from inside it. Lane l owns bins 255 - 8l down to 248 - 8l. */
__device__ __forceinline__ void find_bin(const unsigned *hist, int need, int *bin_out,
                                         int *need_out) {
    const int lane = threadIdx.x % 32;
    int local = 0;
    for (int x = 0; x < 8; ++x)
        local += hist[255 - 8 * lane - x];
    int incl = local;
    for (int off = 1; off < 32; off <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off)
            incl += y;
    }
    const int excl = incl - local; /* keys in the bins above this lane's */
    if (excl < need && need <= incl) {
        int above = excl;
        for (int x = 0; x < 8; ++x) {
            const int bin = 255 - 8 * lane - x;
            if (above + (int)hist[bin] >= need) {
                *bin_out = bin;
                *need_out = need - above;
                break;
            }
            above += hist[bin];
        }
    }
}

__global__ void topk_radix_kernel(const float *__restrict__ logits, // [B, chunk, Lk]
                                  int32_t *__restrict__ sel,        // [rows_q, K]
                                  const int *__restrict__ cu_q,     // [B+1] or NULL
                                  const int *__restrict__ cu_k,     // [B+1] or NULL
                                  int Lq, int Lk, int i0, int chunk, int K, bool causal) {
    __shared__ unsigned hist[256];
    __shared__ uint32_t cand[TOPK_CAND];
    __shared__ int ncand, s_bin, s_need;
    __shared__ int warp_sums[TOPK_WARPS];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float *row;
    int32_t *out;
    int n;
    if (!topk_prepare(logits, sel, cu_q, cu_k, Lq, Lk, i0, chunk, K, causal, row, out, n))
        return; /* the same for every thread of the block */

    uint32_t prefix = 0; /* the bytes of the k-th largest key found so far */
    int need = K;        /* keys still to select among those matching prefix */
    bool from_cand = false;
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        const uint32_t known = pass == 0 ? 0u : 0xffffffffu << (shift + 8);
        for (int x = tid; x < 256; x += TOPK_THREADS)
            hist[x] = 0;
        if (tid == 0 && pass == 0)
            ncand = 0;
        __syncthreads(); // the histogram is cleared before any thread counts into it
        if (from_cand) {
            for (int c = tid; c < ncand; c += TOPK_THREADS)
                if ((cand[c] & known) == prefix)
                    atomicAdd(&hist[(cand[c] >> shift) & 255u], 1u);
        } else {
            for (int e = tid; e < n; e += TOPK_THREADS) {
                const uint32_t key = order_key(row[e]);
                if ((key & known) == prefix)
                    atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
        }
        __syncthreads(); // every count is in the histogram before warp 0 scans it
        if (warp == 0)
            find_bin(hist, need, &s_bin, &s_need);
        __syncthreads(); // the threshold bin is published before every thread reads it
        prefix |= (uint32_t)s_bin << shift;
        need = s_need;
        if (pass == 0) { /* keep the keys of the threshold bin for passes 2-4 */
            for (int e = tid; e < n; e += TOPK_THREADS) {
                const uint32_t key = order_key(row[e]);
                if ((key >> 24) == (prefix >> 24)) {
                    const int at = atomicAdd(&ncand, 1);
                    if (at < TOPK_CAND)
                        cand[at] = key;
                }
            }
            __syncthreads(); // the candidate count is final before every thread reads it
            from_cand = ncand <= TOPK_CAND;
        }
    }

    /* prefix == T, the k-th largest key: select every key > T and the first `need` keys == T. */
    const uint32_t T = prefix;
    int gt_before = 0, eq_before = 0; /* selected keys > T, keys == T, in earlier chunks */
    for (int e0 = 0; e0 < n; e0 += TOPK_THREADS) {
        const int e = e0 + tid;
        const uint32_t key = e < n ? order_key(row[e]) : 0u;
        const int gt = e < n && key > T, eq = e < n && key == T;
        /* both counts in one int (each <= 256 per chunk): an inclusive scan over the block */
        int incl = gt | eq << 16;
        for (int off = 1; off < 32; off <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, off);
            if (lane >= off)
                incl += y;
        }
        if (lane == 31)
            warp_sums[warp] = incl;
        __syncthreads(); // every warp's total is written before the threads add them up
        int base = 0, total = 0;
        for (int x = 0; x < TOPK_WARPS; ++x) {
            base += x < warp ? warp_sums[x] : 0;
            total += warp_sums[x];
        }
        const int excl = base + incl - (gt | eq << 16);
        const int gt_rank = gt_before + (excl & 0xffff), eq_rank = eq_before + (excl >> 16);
        if (gt || (eq && eq_rank < need))
            out[gt_rank + min(eq_rank, need)] = e;
        gt_before += total & 0xffff;
        eq_before += total >> 16;
        __syncthreads(); // every thread has read warp_sums before the next chunk overwrites them
    }
}

/* One block-wide bitonic sort of a[0 .. np) (np a power of two), descending. */
__device__ __forceinline__ void bitonic_sort_desc(unsigned long long *a, int np) {
    for (int size = 2; size <= np; size <<= 1)
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            for (int x = threadIdx.x; x < np; x += blockDim.x) {
                const int y = x ^ stride;
                if (y > x) {
                    const bool desc = (x & size) == 0;
                    const unsigned long long ax = a[x], ay = a[y];
                    if (desc ? ax < ay : ax > ay) {
                        a[x] = ay;
                        a[y] = ax;
                    }
                }
            }
            __syncthreads(); // this step's exchanges are done before the next step reads them
        }
}

__global__ void topk_bitonic_kernel(const float *__restrict__ logits, // [B, chunk, Lk]
                                    int32_t *__restrict__ sel,        // [rows_q, K]
                                    const int *__restrict__ cu_q,     // [B+1] or NULL
                                    const int *__restrict__ cu_k,     // [B+1] or NULL
                                    int Lq, int Lk, int i0, int chunk, int K, bool causal) {
    /* (key << 32) | (~position): descending order = key descending, then position ascending */
    __shared__ unsigned long long a[DS_BITONIC_MAX_KEYS];
    const float *row;
    int32_t *out;
    int n;
    if (!topk_prepare(logits, sel, cu_q, cu_k, Lq, Lk, i0, chunk, K, causal, row, out, n))
        return; /* the same for every thread of the block */
    int np = 1;
    while (np < n)
        np <<= 1;
    for (int e = threadIdx.x; e < np; e += blockDim.x)
        a[e] = e < n ? (unsigned long long)order_key(row[e]) << 32 | (0xffffffffu - (uint32_t)e)
                     : 0ull; /* padding sorts last */
    __syncthreads();         // the row is in shared memory before the network reads it
    bitonic_sort_desc(a, np);
    /* keep the first K, as ~position alone: sorting those descending orders them by position */
    for (int e = threadIdx.x; e < np; e += blockDim.x)
        a[e] = e < K ? a[e] & 0xffffffffull : 0ull;
    __syncthreads(); // every entry rewritten before the second sort reads them
    bitonic_sort_desc(a, np);
    for (int s = threadIdx.x; s < K; s += blockDim.x)
        out[s] = (int32_t)(0xffffffffu - (uint32_t)a[s]);
}

/* --- version 4: sparse_mma -----------------------------------------------------------------------
 *
 *   grid  = (Lq, B, ceil(H / 64)); block = min(4, ceil(H / 16)) warps; one block <-> one token t
 *   and 64 of its heads; warp w owns heads 16w .. 16w+15 (the rows of its mma tiles); with
 *   H = 16 a block is a single warp, and the block's other rows stay zero
 *
 *   shared memory (attn_padded_layout, rows of D + 8)
 *   q_s [64][D+8]   q of token t for the block's heads (row = head)
 *   k_s [64][D+8]   K rows of the selected keys sel[t][j0 .. j0+63] (gathered by cp.async)
 *   v_s [64][D+8]   V rows of the same keys
 *   ok  [64]        slot holds a key this token may see (else -1 / out of range: masked)
 *
 *      selection of t:  [ 3  9 10 41 57 ... | -1 -1 ]      per tile of 64 slots:
 *                          |  |  |             skipped      K[sel[j]] -> k_s[j], V likewise
 *      K (one head):   row 3, 9, 10, 41, ...                S (heads x slots) = Q K_sel^T
 *                                                           online softmax, O += P V_sel
 *
 * The steps between the barriers are example 03's (../03_flash_attention_v2/fa2_tile.cuh); only the
 * rows (heads of one token, not 64 tokens of one head) and the tile source (a gather, not a
 * contiguous tile) differ. Every gathered row is used by the 64 heads: the reason DeepSeek shares
 * the selection. */
/* What both attention versions read, passed by value. */
template <typename T> struct sparse_params {
    const T *q;             // [B,H,Lq,D] or [total_q,H,D]
    const T *k, *v;         // [rows_k, D]: one head, shared by the H query heads
    T *o;                   // like q
    float *lse;             // [B,H,Lq] or [H,total_q], or NULL
    const int32_t *sel;     // [rows_q, K] selected key positions, ascending, then -1
    const int *cu_q, *cu_k; // [B+1] device, NULL = dense
    int B, H, Lq, Lk, D, K;
    float scale;
    bool causal;
    bool mha; /* sparse_gather only: k, v have H heads in q's layout, each head its own */
};

#define SPARSE_HEADS 64 /* heads per block: 4 warps x 16 */

/* This thread's share of the cp.async gather of the rows sel[j0 .. j0+63] of a [rows][D] matrix
 * into a shared tile; a slot that is past nsel or holds no visible key is zero-filled. */
template <typename T, int D, typename Lay>
__device__ __forceinline__ void gather_tile_async(T *dst,               // [TILE][LD] shared
                                                  const T *base,        // row 0 of the sequence
                                                  const int32_t *slots, // sel row, from j0
                                                  int nsel, int visible) {
    for (int c = threadIdx.x; c < TILE * (D / 8); c += blockDim.x) {
        const int r = c / (D / 8), col = (c % (D / 8)) * 8;
        const int key = r < nsel ? slots[r] : -1;
        const bool ok = key >= 0 && key < visible;
        cp_async_16(dst + Lay::at(r, col), ok ? base + (int64_t)key * D + col : base, ok);
    }
}

template <typename T, int D> __global__ void sparse_mma_kernel(const sparse_params<T> a) {
    using Lay = attn_padded_layout<D>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *q_s = reinterpret_cast<T *>(smem_raw); /* [SPARSE_HEADS][LD] */
    T *k_s = q_s + SPARSE_HEADS * Lay::LD;    /* [TILE][LD] */
    T *v_s = k_s + TILE * Lay::LD;            /* [TILE][LD] */
    __shared__ bool ok[TILE];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int b = blockIdx.y, i = blockIdx.x, h0 = blockIdx.z * SPARSE_HEADS;
    const attn_seq sq = attn_seq_at(b, a.Lq, a.Lk, a.cu_q, a.cu_k);
    if (i >= sq.Lq) /* the same for every thread: no barrier is skipped by some only */
        return;
    /* Rows of this block = heads h0 .. h0+nh-1 of token i: as an attn_seq_head whose "row r" is
     * head h0 + r, so that example 03's output steps address them. */
    attn_seq_head sh =
        attn_seq_head_at(b * a.H + h0, a.B * a.H, a.H, D, a.Lq, a.Lk, a.cu_q, a.cu_k);
    const int64_t head_stride = a.cu_q ? D : (int64_t)a.Lq * D;
    const int64_t lse_stride = a.cu_q ? a.cu_q[a.B] : a.Lq;
    const int64_t lse0 = sh.lse + i; /* head h0 of token i */
    sh.q += i * sh.ld;
    sh.ld = head_stride;
    sh.Lq = min(SPARSE_HEADS, a.H - h0);
    const int row0 = warp * ATTN_FA2_WARP_ROWS;
    const bool active = row0 < sh.Lq; /* warp-uniform: this warp has at least one head */

    attn_load_tile_async<T, D, SPARSE_HEADS, Lay>(q_s, a.q + sh.q, head_stride, sh.Lq);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads(); // the q rows have landed for every thread before the warps ldmatrix them
    uint32_t qf[D / 16][4];
    attn_fa2_load_q_fragments<T, D, Lay>(qf, q_s);

    const float scale2 = a.scale * CUDART_L2E_F;
    const int visible = attn_visible_keys(i, sq.Lq, sq.Lk, a.causal);
    const int nsel = min(a.K, visible); /* a right selection has exactly nsel keys first */
    const int32_t *srow = a.sel + (sq.q0 + i) * a.K;
    const T *kb = a.k + sq.k0 * D, *vb = a.v + sq.k0 * D;
    float of[D / 8][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    for (int j0 = 0; j0 < nsel; j0 += TILE) {
        gather_tile_async<T, D, Lay>(k_s, kb, srow + j0, nsel - j0, visible);
        cp_async_commit();
        gather_tile_async<T, D, Lay>(v_s, vb, srow + j0, nsel - j0, visible);
        cp_async_commit();
        for (int x = threadIdx.x; x < TILE; x += blockDim.x) {
            const int key = j0 + x < nsel ? srow[j0 + x] : -1;
            ok[x] = key >= 0 && key < visible;
        }
        cp_async_wait<1>();
        __syncthreads(); // every thread's K rows and slot flags in place before any warp reads

        /* a warp whose 16 rows are all past the last head (H < 64) only copies and waits */
        float s[TILE / 8][4];
        if (active) {
            attn_fa2_score_tile<T, D, Lay>(s, qf, k_s);
            attn_fa2_scale_and_mask(s, 0, true, scale2, [&](int, int slot) { return ok[slot]; });
            attn_fa2_online_softmax<D>(s, of, m, l);
        }
        cp_async_wait<0>();
        __syncthreads(); // every thread's V rows landed before any warp reads them
        if (active)
            attn_fa2_accumulate_pv<T, D, Lay>(of, s, v_s);
        __syncthreads(); // all warps done with k_s, v_s and ok before the next tile's gather
    }
    attn_fa2_finish_rows<D>(of, m, l, row0, sh, NULL); /* O / l; the LSE has its own stride */
    for (int h = 0; a.lse != NULL && t == 0 && h < 2; ++h) {
        const int r = row0 + g + 8 * h;
        if (r < sh.Lq)
            a.lse[lse0 + (int64_t)r * lse_stride] =
                l[h] > 0.0f ? m[h] * CUDART_LN2_F + logf(l[h]) : -INFINITY;
    }
    attn_fa2_store_o<T, D>(a.o, of, row0, sh);
}

/* --- version 5: sparse_gather ------------------------------------------------------------------
 *
 *   grid  = (Lq, B, ceil(H / 4)); block = 4 warps; warp w <-> token i = blockIdx.x, head
 *   4 * blockIdx.z + w. The warp walks the token's selection 32 slots at a time, one key per lane
 *   (s = q . K[key] on the lane), online softmax over the lanes (shuffles), then the 32 V rows
 *   are read by the whole warp, lane l owning columns l, l + 32, ... No shared K/V, no tensor
 *   cores: each head reads its keys itself (4 heads of a block hit the same rows in L1/L2). */
#define GATHER_WARPS 4
#define GATHER_MAX_D 128

template <typename T> __global__ void sparse_gather_kernel(const sparse_params<T> a) {
    __shared__ float q_s[GATHER_WARPS][GATHER_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int b = blockIdx.y, i = blockIdx.x, h = blockIdx.z * GATHER_WARPS + warp;
    const attn_seq sq = attn_seq_at(b, a.Lq, a.Lk, a.cu_q, a.cu_k);
    if (i >= sq.Lq || h >= a.H) /* this warp has nothing to do; there is no block barrier below */
        return;
    const attn_seq_head sh =
        attn_seq_head_at(b * a.H + h, a.B * a.H, a.H, a.D, a.Lq, a.Lk, a.cu_q, a.cu_k);
    float *qw = q_s[warp];
    for (int d = lane; d < a.D; d += 32)
        qw[d] = float(a.q[sh.q + i * sh.ld + d]) * a.scale * CUDART_L2E_F;
    __syncwarp(); // the query row is complete before every lane reads all of it

    const int visible = attn_visible_keys(i, sq.Lq, sq.Lk, a.causal);
    const int nsel = min(a.K, visible);
    const int32_t *srow = a.sel + (sq.q0 + i) * a.K;
    /* K/V rows of this head: the one shared head ([rows_k, D]), or head h of MHA tensors */
    const T *kb = a.mha ? a.k + sh.k : a.k + sq.k0 * a.D;
    const T *vb = a.mha ? a.v + sh.k : a.v + sq.k0 * a.D;
    const int64_t ldk = a.mha ? sh.ld : a.D;
    float m = -INFINITY, l = 0.0f, acc[GATHER_MAX_D / 32] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c0 = 0; c0 < nsel; c0 += 32) {
        const int key = c0 + lane < nsel ? srow[c0 + lane] : -1;
        const bool has = key >= 0 && key < visible; /* -1 and out-of-range slots: skipped */
        float s = -INFINITY;
        if (has) {
            s = 0.0f;
            for (int d = 0; d < a.D; ++d)
                s += qw[d] * float(kb[key * ldk + d]);
        }
        const float m_new = fmaxf(m, attn_warp_max(s));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* no key yet: no -inf - -inf */
        const float p = exp2f(s - m_use), alpha = exp2f(m - m_use);
        l = alpha * l + attn_warp_sum(p);
        m = m_new;
        for (int c = 0; c < GATHER_MAX_D / 32; ++c)
            acc[c] *= alpha;
        for (int e = 0; e < 32; ++e) {
            const float pe = __shfl_sync(0xffffffffu, p, e);
            const int ke = __shfl_sync(0xffffffffu, key, e);
            if (pe == 0.0f) /* a skipped slot (or a weight that underflowed): nothing to add */
                continue;
            const T *vrow = vb + ke * ldk;
            for (int c = 0; c < GATHER_MAX_D / 32; ++c)
                if (lane + 32 * c < a.D)
                    acc[c] += pe * float(vrow[lane + 32 * c]);
        }
    }
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f; /* no key: output 0, LSE -inf */
    for (int c = 0; c < GATHER_MAX_D / 32; ++c)
        if (lane + 32 * c < a.D)
            a.o[sh.q + i * sh.ld + lane + 32 * c] = T(acc[c] * inv_l); /* round to nearest */
    if (a.lse != NULL && lane == 0)
        a.lse[sh.lse + i] = l > 0.0f ? m * CUDART_LN2_F + logf(l) : -INFINITY;
}

/* ================================= launchers ============================================== */

/* fp16 or bf16, chosen by the problem's dtype (the registry admits only those). */
template <template <typename> class F, typename... Args>
static void by_dtype(attn_dtype t, Args... args) {
    attn_dispatch_dtype(t, [&](auto tt) { F<typename decltype(tt)::type>::run(args...); });
}

/* The indexer on rows of DI elements of T (versions 1 and 8); the scales NULL for fp16/bf16. */
template <typename T, int DI>
static void launch_indexer_kernel(const ds_args *a, const void *qi, const void *ki,
                                  const float *q_scale, const float *k_scale, int i0,
                                  cudaStream_t stream) {
    using Lay = attn_padded_layout<DI>;
    const size_t smem = (size_t)(TILE + IDX_WARPS * a->index_heads) * Lay::LD * sizeof(T);
    cudaFuncSetAttribute(indexer_kernel<T, DI>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)smem);
    dim3 grid((a->chunk + IDX_WARPS - 1) / IDX_WARPS, a->p->B);
    indexer_kernel<T, DI><<<grid, IDX_WARPS * 32, smem, stream>>>(
        (const T *)qi, (const T *)ki, a->w, q_scale, k_scale, a->logits, a->cu_q, a->cu_k, a->p->Lq,
        a->p->Lk, a->index_heads, i0, a->chunk, a->p->causal);
}

template <typename T> struct indexer_launch {
    static void run(const ds_args *a, int i0, cudaStream_t stream) {
        if (a->index_dim == 64)
            launch_indexer_kernel<T, 64>(a, a->q_index, a->k_index, NULL, NULL, i0, stream);
        else
            launch_indexer_kernel<T, 128>(a, a->q_index, a->k_index, NULL, NULL, i0, stream);
    }
};

void ds_launch_indexer(const ds_args *a, int i0, cudaStream_t stream) {
    by_dtype<indexer_launch>(a->p->dtype, a, i0, stream);
}

template <typename T> struct quantize_launch {
    static void run(const void *x, uint8_t *x8, float *scale, int64_t rows, int d,
                    cudaStream_t stream) {
        const unsigned blocks = (unsigned)((rows + QUANT_WARPS - 1) / QUANT_WARPS);
        if (blocks > 0)
            quantize_e4m3_rows_kernel<T>
                <<<blocks, QUANT_WARPS * 32, 0, stream>>>((const T *)x, x8, scale, rows, d);
    }
};

/* Version 8: every row of q_I and k_I quantized (again for each chunk: a model keeps k_I
 * quantized in its cache, example 09), then version 1's kernel on the codes. */
void ds_launch_indexer_fp8(const ds_args *a, int i0, cudaStream_t stream) {
    const attn_problem *p = a->p;
    const int64_t q_rows = attn_problem_q_rows(p) * a->index_heads, k_rows = attn_problem_k_rows(p);
    by_dtype<quantize_launch>(p->dtype, a->q_index, a->q_index8, a->q_scale, q_rows, a->index_dim,
                              stream);
    by_dtype<quantize_launch>(p->dtype, a->k_index, a->k_index8, a->k_scale, k_rows, a->index_dim,
                              stream);
    if (a->corrupt_scale != 0.0f && k_rows > 0)
        plant_scale_kernel<<<1, 1, 0, stream>>>(a->k_scale, a->corrupt_scale);
    if (a->index_dim == 64) /* D_I e4m3 codes = D_I / 2 units of attn_e4m3x2 */
        launch_indexer_kernel<attn_e4m3x2, 32>(a, a->q_index8, a->k_index8, a->q_scale, a->k_scale,
                                               i0, stream);
    else
        launch_indexer_kernel<attn_e4m3x2, 64>(a, a->q_index8, a->k_index8, a->q_scale, a->k_scale,
                                               i0, stream);
}

void ds_launch_topk_radix(const ds_args *a, int i0, cudaStream_t stream) {
    dim3 grid(a->chunk, a->p->B);
    topk_radix_kernel<<<grid, TOPK_THREADS, 0, stream>>>(a->logits, a->sel, a->cu_q, a->cu_k,
                                                         a->p->Lq, a->p->Lk, i0, a->chunk, a->topk,
                                                         a->p->causal);
}

void ds_launch_topk_bitonic(const ds_args *a, int i0, cudaStream_t stream) {
    dim3 grid(a->chunk, a->p->B);
    topk_bitonic_kernel<<<grid, TOPK_THREADS, 0, stream>>>(a->logits, a->sel, a->cu_q, a->cu_k,
                                                           a->p->Lq, a->p->Lk, i0, a->chunk,
                                                           a->topk, a->p->causal);
}

/* The attention kernels' parameters from the pipeline's arguments. */
template <typename T> static sparse_params<T> sparse_params_of(const ds_args *a) {
    const attn_problem *p = a->p;
    return sparse_params<T>{(const T *)a->q,
                            (const T *)a->k,
                            (const T *)a->v,
                            (T *)a->o,
                            a->lse,
                            a->sel,
                            a->cu_q,
                            a->cu_k,
                            p->B,
                            p->H,
                            p->Lq,
                            p->Lk,
                            p->D,
                            a->topk,
                            p->scale,
                            p->causal,
                            a->mha};
}

template <typename T> struct sparse_mma_launch {
    template <int D> static void go(const ds_args *a, cudaStream_t stream) {
        const attn_problem *p = a->p;
        const size_t smem =
            (size_t)(SPARSE_HEADS + 2 * TILE) * attn_padded_layout<D>::LD * sizeof(T);
        cudaFuncSetAttribute(sparse_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem);
        dim3 grid(p->Lq, p->B, (p->H + SPARSE_HEADS - 1) / SPARSE_HEADS);
        /* one warp per 16 heads, up to 4: with H = 16 a block is one warp */
        const int warps = min(SPARSE_HEADS, p->H + 15) / 16;
        sparse_mma_kernel<T, D><<<grid, warps * 32, smem, stream>>>(sparse_params_of<T>(a));
    }
    static void run(const ds_args *a, cudaStream_t stream) {
        attn_dispatch_head_dim(a->p->D, [&](auto d) { go<decltype(d)::value>(a, stream); });
    }
};

void ds_launch_sparse_mma(const ds_args *a, cudaStream_t stream) {
    by_dtype<sparse_mma_launch>(a->p->dtype, a, stream);
}

template <typename T> struct sparse_gather_launch {
    static void run(const ds_args *a, cudaStream_t stream) {
        const attn_problem *p = a->p;
        dim3 grid(p->Lq, p->B, (p->H + GATHER_WARPS - 1) / GATHER_WARPS);
        sparse_gather_kernel<T><<<grid, GATHER_WARPS * 32, 0, stream>>>(sparse_params_of<T>(a));
    }
};

void ds_launch_sparse_gather(const ds_args *a, cudaStream_t stream) {
    by_dtype<sparse_gather_launch>(a->p->dtype, a, stream);
}

void ds_launch_pipeline(const ds_args *a, cudaStream_t stream) {
    for (int i0 = 0; i0 < a->p->Lq; i0 += a->chunk) {
        ds_launch_indexer(a, i0, stream);
        ds_launch_topk_radix(a, i0, stream);
    }
    ds_launch_sparse_mma(a, stream);
}

/* ================================= registry =============================================== */

const char *ds_unsupported(const attn_problem *p, int index_heads, int index_dim, int topk) {
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return "the kernels take f16 or bf16 (--dtype f16|bf16)";
    if (p->D != 64 && p->D != 128)
        return "sparse_mma takes D = 64 or 128 (-D)";
    if (index_heads < 16 || index_heads > DS_MAX_INDEX_HEADS || index_heads % 16 != 0)
        return "the indexer takes --index-heads 16, 32, 48 or 64 (a multiple of the mma's 16 rows)";
    if (index_dim != 64 && index_dim != 128)
        return "the indexer takes --index-dim 64 or 128";
    if (topk < 1)
        return "--topk must be at least 1";
    return NULL;
}

/* The stages' kernels on the one driver: each reads the pipeline's arguments from
 * attn_buffers.args (deepseek_stages.c makes them); the chunked ones (DS_CHUNKED) work on query
 * chunk b->chunk, rows from b->chunk * chunk. */
static const ds_args *args_of(const attn_buffers *b) { return (const ds_args *)b->args; }
#define DS_CHUNKED(name, launcher)                                                                 \
    static void name(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {               \
        (void)p;                                                                                   \
        launcher(args_of(b), (b->chunk * args_of(b)->chunk), s);                                   \
    }
DS_CHUNKED(run_indexer, ds_launch_indexer)
DS_CHUNKED(run_indexer_fp8, ds_launch_indexer_fp8)
DS_CHUNKED(run_topk_bitonic, ds_launch_topk_bitonic)
DS_CHUNKED(run_topk_radix, ds_launch_topk_radix)
#undef DS_CHUNKED
ATTN_LAUNCH_ARGS(run_sparse_mma, ds_launch_sparse_mma, ds_args)
ATTN_LAUNCH_ARGS(run_sparse_gather, ds_launch_sparse_gather, ds_args)
ATTN_LAUNCH_ARGS(run_pipeline, ds_launch_pipeline, ds_args)

/* Example 03's fa2_mma (flash2_fwd.cu), on the baseline's buffers: K and V in every head. */
extern "C" const attn_kernel flash2_fa2_mma;
static void run_dense(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    flash2_fa2_mma.launch(p, args_of(b)->dense, s);
}

const char *const ds_score_kinds[] = {"indexer", "equal", "neginf", "large", "ties"};

/* fp16/bf16, D = 64 or 128, causal, varlen; every kernel runs on the simulator */
static const attn_requirements ds_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true, .varlen = true};

static const attn_kernel ds_kernels[] = {
    {ATTN_VERSION(1, "indexer",
                  "index scores of 4 queries x 64-key tiles on tensor cores, ReLU, weighted sum"),
     .launch = run_indexer, .req = ds_requirements, .stage = DS_STAGE_INDEXER},
    {ATTN_VERSION(2, "topk_bitonic",
                  "the whole row sorted in shared memory (<= 4096 keys), first k kept"),
     .launch = run_topk_bitonic, .req = ds_requirements, .stage = DS_STAGE_TOPK},
    {ATTN_VERSION(3, "topk_radix",
                  "radix select over the float bits: 4 histogram passes, any row length"),
     .launch = run_topk_radix, .req = ds_requirements, .stage = DS_STAGE_TOPK},
    {ATTN_VERSION(4, "sparse_mma",
                  "FA2 over the selected keys: 64 gathered K/V rows per tile, tensor cores"),
     .launch = run_sparse_mma, .req = ds_requirements, .stage = DS_STAGE_ATTENTION},
    {ATTN_VERSION(5, "sparse_gather",
                  "one warp per (token, head) over the selected keys, CUDA cores"),
     .launch = run_sparse_gather, .req = ds_requirements, .stage = DS_STAGE_ATTENTION},
    {ATTN_VERSION(6, "end_to_end", "the pipeline: per chunk indexer + topk_radix, then sparse_mma"),
     .launch = run_pipeline, .req = ds_requirements, .stage = DS_STAGE_ATTENTION},
    {ATTN_VERSION(7, "dense_fa2",
                  "baseline: example 03's fa2_mma, dense, K and V copied into every head"),
     .launch = run_dense, .req = ds_requirements, .serves = ATTN_SERVES_BASELINE,
     .stage = DS_STAGE_ATTENTION},
    {ATTN_VERSION(
         DS_KERNEL_INDEXER_FP8, "indexer_fp8",
         "version 1 in FP8 e4m3: q_I, k_I per row with a power-of-two scale, mma.sync m16n8k32"),
     .launch = run_indexer_fp8, .req = ds_requirements, .stage = DS_STAGE_INDEXER},
};

extern "C" const attn_module ds_module; /* its flags, inputs and stages: deepseek_run.c */

extern "C" const attn_example deepseek_sparse_example = {
    .name = "05_deepseek_sparse",
    .summary = "DeepSeek Sparse Attention: lightning indexer, top-k selection, attention over the "
               "selected keys",
    ATTN_KERNELS(ds_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {1, 16, 8192, 128}, .sim = {1, 8, 256, 64}},
    .module = &ds_module,
};
