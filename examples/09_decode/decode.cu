/* decode.cu — Example 09: decoding. One new query per sequence (or a few, in a speculative step)
 * against a growing key/value cache: the step a deployed model repeats for every token it writes.
 *
 *     o_(b,h) = softmax(scale * q_(b,h) K_b^T) V_b      over the cache_seqlens[b] tokens of b
 *
 * Prefill (examples 01-06) has many queries per (sequence, head): a block owns a tile of 64 of
 * them and every K/V byte it loads serves 64 rows. Decoding has one: every byte of the cache is
 * read for a handful of multiply-adds, so the step is bound by memory bandwidth, and the versions
 * below are about reading the cache once, with enough blocks to keep every SM reading.
 *
 * Versions (one line of intent each; the stage they belong to; the command that runs them):
 *   1 append        (stage append) the new tokens' K, V (and index key) written into their pages:
 *                   position cache_seqlens[b] - Lq + i of sequence b, through the block table.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 1
 *   2 naive         (stage attention) one warp per (sequence, query head) over the contiguous
 *                   cache, key by key: a 32-lane dot product, then the online softmax update.
 *                   B x H warps in all: a single sequence leaves most of a GPU idle.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 2
 *   3 split_kv      (stage attention) flash-decoding: the same loop over a slice of the cache per
 *                   block (grid: splits x H x B); each writes its O and LSE, and a combine kernel
 *                   merges the slices by their LSE. Splits: README, "How many splits".
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 3
 *   4 gqa           (stage attention) the g = H / H_kv query heads that share a K/V head (and the
 *                   Lq new tokens) in one block: each K/V tile is loaded once into shared memory
 *                   (cp.async) and serves all their rows; split-KV and the combine as in 3.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 4
 *   5 paged         (stage attention) version 4 over the paged cache: each key of a tile found
 *                   through the block table; the same arithmetic in the same order, so its output
 *                   equals version 4's bit for bit.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 5
 *   6 indexer       (stage indexer) DeepSeek's lightning indexer at decode: the index scores of
 *                   each new token against every index key of its sequence, read from a paged
 *                   index-key cache; CUDA cores, any H_I <= 64 heads, D_I <= 128.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 6
 *   7 topk_radix    (stage top-k) example 05's radix select, at decode shape (one row per token).
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 7
 *   8 topk_bitonic  (stage top-k) example 05's bitonic baseline (caches of <= 4096 tokens).
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 8
 *   9 sparse        (stage sparse) attention over the k selected tokens of the paged cache: the
 *                   tile loop of 5 with each tile's keys taken from the selection, split over the
 *                   selection, the combine of 3. Shared by the heads of a group.
 *                   ./build/sim/examples/09_decode/decode_sim --kernel 9
 *  10 latent        (stage attention, --latent only) DeepSeek's multi-head latent attention at
 *                   decode in its absorbed form (FlashMLA's layout): H query heads of 576 (512
 *                   latent + 64 RoPE) over ONE paged latent row of 576 per token, read as K over
 *                   its 576 columns and as V over its first 512 from the same tile in shared
 *                   memory (no V pool); version 5's kernel with D_K = 576, D_V = 512, Bc = 32.
 *                   ./build/sim/examples/09_decode/decode_sim --latent --cache-lens 300,17,0 -H 16
 *  11 append_fp8    version 1 quantising: each new token's K and V (per K/V head) or latent row
 *                   (per 128 values, FlashMLA's 656-byte row) into e4m3 codes and a power-of-two
 *                   scale (decode.h, "FP8 cache").
 *  12 paged_fp8     version 5 over the e4m3 K/V cache: each tile dequantised into shared memory
 *                   (code x scale, rounded to T), the rest of version 5 unchanged.
 *  13 latent_fp8    version 10 over FlashMLA's FP8 latent rows, dequantised the same way.
 *                   Versions 11-13 run with --fp8 only (and only they; their data and checks:
 *                   decode_fp8.c; 11 and 12 also in the model's library, decode_api.c,
 *                   dec_session_use_fp8):
 *                   ./build/sim/examples/09_decode/decode_sim --fp8 --latent --cache-lens 100,1
 * A plain run: ./build/sim/examples/09_decode/decode_sim (every version, checked, then timed).
 * On a GPU build use build/gpu/.../decode_gpu.
 *
 * Versions 1-9: f32, f16, bf16 (fp32 accumulation); D = 64 or 128; H divisible by H_kv
 * (g = 1: multi-head; H_kv = 1: multi-query); 1 to 8 new tokens per sequence, causal among them
 * (bottom-right aligned); a different cache length per sequence, 0 included (output 0, LSE -inf).
 * Version 10: bf16, f16; D_K = 576, D_V = 512, H_kv = 1; the rest as above. With --latent only
 * version 10 runs (the others answer "not a latent kernel"); without it, version 10 is skipped.
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c, the stages'
 * inputs and checks in decode_stages.c, the page pool and the split rules in decode_host.c, the
 * library the model calls in decode_api.c.
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

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/problem.h"
#include "decode.h"
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/lse_merge.cuh"
#include "device/mma.cuh"

/* ============================== CPU reference ============================================= */
/* decode_reference.c: each output row in double precision over the unpaged cache (grouped heads
 * read directly, no copy per query head), the same-precision implementation FlashAttention's rule
 * needs, and the selection as a key list; the index scores are example 05's reference
 * (ds_index_scores_ref), the top-k its tie rule (ds_check_selection). */

/* ================================== kernels =============================================== */

#define TILE_THREADS 128 /* versions 4, 5, 9 and the combine: 4 warps */

/* Where the keys come from (the tiled kernel's template argument). SRC_LATENT: the paged latent
 * cache of version 10, addressed as SRC_PAGED, whose V is the first D_V columns of the K rows. */
enum { SRC_CONTIGUOUS, SRC_PAGED, SRC_SELECTED, SRC_LATENT };
/* How the cache stores its values (the tiled kernel's template argument Q): in T; in e4m3 with
 * one scale per token and K/V head (versions 11-12, decode.h "FP8 cache"); in FlashMLA's 656-byte
 * latent rows (version 13). */
enum { Q_NONE, Q_TOKEN, Q_LATENT };

/* What every attention version reads, passed by value. */
template <typename T> struct dec_params {
    const T *q;             // [B, Lq, H, D] (latent: D = D_K = 576)
    T *o;                   // [B, Lq, H, D] (latent: D_V = 512)
    float *lse;             // [H, B * Lq]
    const T *k, *v;         // [B, H_kv, L_cap, D] contiguous, or the pools [pages, P, H_kv, D]
                            // (latent: k the pool [pages, P, 1, 576], v unused)
    const int *seqlens;     // [B]
    const int *table;       // [B, W] block table (paged)
    const int32_t *sel;     // [B * Lq, topk] (selected)
    float *part;            // split-KV partials: O [splits][rows][D_V], then LSE [splits][rows]
    const uint8_t *k8, *v8; // the FP8 pools (Q_TOKEN: [pages, P, H_kv, D] e4m3; Q_LATENT: k8
                            // [pages, P, 656]); NULL otherwise
    const float *ks, *vs;   // Q_TOKEN: their scales [pages, P, H_kv]
    int B, H, H_kv, Lq, L_cap, W, P, topk, splits, chunk; /* chunk: keys (slots) per split */
    float scale2; // scale * log2(e): scores in base 2, exp2f
};

/* Keys new token i of a sequence with L cached tokens sees (bottom-right causal; 0 if L = 0). */
__device__ __forceinline__ int dec_visible(int i, int Lq, int L) {
    return attn_visible_keys(i, Lq, L, true);
}

/* Element offset of token t's row of K/V head hk in sequence b: the contiguous cache, or the page
 * the block table names for it. */
template <int SRC, typename T>
__device__ __forceinline__ int64_t dec_key_offset(const dec_params<T> &a, int b, int hk, int t,
                                                  int D) {
    if (SRC == SRC_CONTIGUOUS)
        return (((int64_t)b * a.H_kv + hk) * a.L_cap + t) * D;
    const int page = a.table[(int64_t)b * a.W + t / a.P];
    return (((int64_t)page * a.P + t % a.P) * a.H_kv + hk) * D;
}

/* One output row's result: the final O and LSE when there is one split, else this split's
 * partial (O already divided by its l, LSE = m + log l; a split with no key: 0 and -inf). D: the
 * output row's width (D_V: the value width, 512 for the latent version, else the head's D). */
template <typename T, int D>
__device__ __forceinline__ void dec_store(const dec_params<T> &a, int split, int64_t row, int d,
                                          float value) {
    if (a.splits == 1)
        a.o[row * D + d] = T(value); /* round to nearest */
    else
        a.part[((int64_t)split * a.B * a.Lq * a.H + row) * D + d] = value;
}

template <typename T, int D>
__device__ __forceinline__ void dec_store_lse(const dec_params<T> &a, int split, int64_t row,
                                              float m, float l) {
    const float lse = l > 0.0f ? m * CUDART_LN2_F + logf(l) : -INFINITY; /* m in base 2 */
    const int64_t rows = (int64_t)a.B * a.Lq * a.H;
    if (a.splits == 1)
        a.lse[(row % a.H) * (rows / a.H) + row / a.H] = lse; /* [H, B*Lq] */
    else
        a.part[(int64_t)a.splits * rows * D + (int64_t)split * rows + row] = lse;
}

/* --- versions 2 and 3: naive and split_kv --------------------------------------------------------
 *
 *   naive:    grid (H, B);          block = 1 warp;  keys 0 .. n-1 of the row
 *   split_kv: grid (splits, H, B);  block = 1 warp;  keys [s * chunk, (s+1) * chunk) of the row
 *
 *   lane l holds q[l], q[l+32], ... and acc[l], acc[l+32], ... (D / 32 of each); per key t:
 *       s  = sum over the lanes of q . K[t]            (5 shuffles)
 *       m' = max(m, s);  l = l 2^(m - m') + 2^(s - m');  acc = acc 2^(m - m') + 2^(s - m') V[t]
 *   K[t] and V[t] are read by the 32 lanes side by side: one coalesced row per key.
 *   Every query head reads its K/V head itself: with g heads per K/V head the cache is read g
 *   times (version 4 reads it once). */
template <typename T, int D>
__device__ __forceinline__ void warp_attend_keys(const T *kb, const T *vb, const float *qr, int t0,
                                                 int t1, float &m, float &l, float *acc) {
    const int lane = threadIdx.x % 32;
    for (int t = t0; t < t1; ++t) {
        const T *kr = kb + (int64_t)t * D, *vr = vb + (int64_t)t * D;
        float s = 0.0f;
        for (int c = 0; c < D / 32; ++c)
            s += qr[c] * float(kr[lane + 32 * c]);
        s = attn_warp_sum(s);
        const float m_new = fmaxf(m, s); /* s is finite: m_new too */
        const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
        l = l * alpha + p;
        for (int c = 0; c < D / 32; ++c)
            acc[c] = acc[c] * alpha + p * float(vr[lane + 32 * c]);
        m = m_new;
    }
}

/* One warp: query head h of sequence b, every new token i, keys [s * chunk, (s+1) * chunk) of
 * what i sees (the whole of it for naive: chunk = L_cap, one split). */
template <typename T, int D> __global__ void split_kv_kernel(const dec_params<T> a) {
    const int lane = threadIdx.x, split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (a.H / a.H_kv), L = a.seqlens[b];
    const T *kb = a.k + ((int64_t)b * a.H_kv + hk) * a.L_cap * D; /* contiguous: [L_cap, D] */
    const T *vb = a.v + ((int64_t)b * a.H_kv + hk) * a.L_cap * D;
    for (int i = 0; i < a.Lq; ++i) {
        const int64_t row = ((int64_t)b * a.Lq + i) * a.H + h;
        const int n = dec_visible(i, a.Lq, L);
        const int t0 = min(split * a.chunk, n), t1 = min(t0 + a.chunk, n);
        float qr[D / 32], acc[D / 32];
        for (int c = 0; c < D / 32; ++c) {
            qr[c] = float(a.q[row * D + lane + 32 * c]) * a.scale2;
            acc[c] = 0.0f;
        }
        float m = -INFINITY, l = 0.0f;
        warp_attend_keys<T, D>(kb, vb, qr, t0, t1, m, l, acc);
        for (int c = 0; c < D / 32; ++c)
            dec_store<T, D>(a, split, row, lane + 32 * c, l > 0.0f ? acc[c] / l : 0.0f);
        if (lane == 0)
            dec_store_lse<T, D>(a, split, row, m, l);
    }
}

/* --- the combine (versions 3, 4, 5, 9)
 * -------------------------------------------------------------
 *
 *   grid (B * Lq * H rows); block = 128 threads; split s of the row left O_s and LSE_s:
 *       M = max_s LSE_s,   w_s = exp(LSE_s - M),   O = sum_s w_s O_s / sum_s w_s,
 *       LSE = M + log sum_s w_s
 *   (a split with no key has LSE_s = -inf: weight 0; a row with no key at all outputs 0, -inf).
 *
 *   shared:  red[4]   each warp's max of LSE_s          w_s[splits]   the weights */
template <typename T, int D> __global__ void combine_kernel(const dec_params<T> a) {
    __shared__ float w_s[DEC_MAX_SPLITS];
    __shared__ float red[TILE_THREADS / 32];
    const int64_t row = blockIdx.x, rows = (int64_t)a.B * a.Lq * a.H;
    const float *lse_part = a.part + (int64_t)a.splits * rows * D;
    /* the steps above, written once for every example that merges by the LSE (example 11's ring
     * too): device/lse_merge.cuh */
    attn_lse_combine_row<TILE_THREADS>(
        a.part + row * D, rows * D, lse_part + row, rows, a.splits, D, w_s, red,
        [&](int d, float value) { a.o[row * D + d] = T(value); },
        [&](float value) { a.lse[(row % a.H) * (rows / a.H) + row / a.H] = value; });
}

/* --- versions 4, 5, 9, 10 (and 12, 13): one block for the rows that share a K/V head
 * -----------------------
 *
 *   grid  = (splits, H_kv x row tiles, B)   [sparse: (splits, H_kv x row tiles, B x Lq)]
 *   block = 128 threads; its rows: up to 16 of the (new token i, head of the group) pairs that
 *           read K/V head hk (dense: Lq x g of them; sparse: the g heads of one token, whose
 *           selection they share). SmolLM2: g = 3, so one block, 3 rows, reads each row of the
 *           cache once for 3 heads; version 3 reads it 3 times.
 *
 *   shared memory (rows padded by 16 bytes: a quarter-warp's 16-byte reads of 8 rows hit 8
 *   different bank groups)
 *     k_s, v_s  [Bc][D + 16/sizeof(T)]  a tile of Bc = 64 keys, cp.async (latent: k_s only)
 *     q_s       [16][D]    the rows' queries, fp32, scaled by scale * log2(e)
 *     p_s       [16][Bc]   S = Q K^T of the tile, then P = 2^(S - m)
 *     m_s, l_s, alpha_s [16]   the rows' running max, sum, and this tile's rescale factor
 *     tok_s     [Bc]       the tile's token positions (-1: none): j itself, or sel[j]
 *     off_s     [Bc]       where each token's K/V row starts (contiguous, or through its page)
 *
 *   the loop of example 03's fa2_tile.cuh, step for step and with its step names: the prologue
 *   once (dec_block: the tiles above and the block's rows; dec_load_q: q_s, m, l), then per key
 *   tile j0, each step followed by a barrier (tiled_kernel's loop gives the reasons):
 *     dec_tile_tokens     the tile's tokens and where their rows start (tok_s, off_s)
 *     dec_copy_kv         K_j and V_j into k_s, v_s: cp.async, or dequantised (fp8_tile)
 *     dec_score_tile      S, scaled (q_s holds scale2 q) and masked (-inf): thread (jj = t % Bc,
 *                         rows t / Bc, t / Bc + 128/Bc, ...), one dot product of D each
 *     dec_online_softmax  warp w, rows w, w + 4, ...: the row's max over the tile,
 *                         m' = max(m, tile max), P = 2^(S - m'), l = l 2^(m - m') + sum P
 *     dec_accumulate_pv   thread (column t % D, every row; for D = 64 rows of one parity):
 *                         acc = acc * alpha + sum_jj P[r][jj] V[jj][column]
 *   and after the last tile dec_write_o (O / l, LSE).
 *
 *   Why CUDA cores, not fa2_tile.cuh's mma steps: those give each of a block's 4 warps 16 query
 *   rows of 64 and take 16-bit or FP8 inputs only (attn_mma_traits); a decode block has at most
 *   DEC_ROWS = 16 rows for its 4 warps together, and versions 4, 5, 9 and 12 take fp32 too. So
 *   the steps share the tile out by thread as above: a thread per score, a warp per row's
 *   softmax, each output column to one thread (two at D = 64, each with half the rows).
 *
 *         tile of K/V (Bc keys)              rows (token, head)      p_s
 *       +-----------------------+   S        (i0,h0) (i0,h1) ...   [r][jj]  -> softmax -> P V
 *       | key j0 ... j0 + Bc-1  | ------->
 *       +-----------------------+
 *
 * Contiguous (4) and paged (5) differ in one function, dec_key_offset: a tile's keys are looked up
 * in the block table once each, and every other step is the same code, so the two agree bit for
 * bit.
 *
 * Version 10 (latent, FlashMLA's layout): the same kernel with D_K = 576 and D_V = 512 over the
 * paged latent cache (H_kv = 1, so g = H: every query head reads the one latent row). Each tile is
 * copied ONCE, into k_s: S reads it as K over its 576 columns, PV as V over its first 512; there is
 * no v_s and no V pool. A 576-wide tile of 64 keys would be 74 KB in 16 bits, so Bc = 32:
 *
 *         k_s [32][576 + 8]  (bf16/fp16)                     q_s [16][576] fp32
 *       +--------------------------------+--------+        +---------------------+
 *   jj  | c_KV: columns 0 .. 511         | k_rope |  S <-- | latent q | rope q   |  rows (i, h)
 *       | (read as V by PV)              | 512..575        +---------------------+
 *       +--------------------------------+--------+
 *       S = q_s . k_s[jj][0..575]       O += P[r][jj] k_s[jj][0..511]
 *
 *   bytes at 16 bits: k_s 32 x 584 x 2 = 37,376; off_s 256; q_s 16 x 576 x 4 = 36,864; p_s
 *   16 x 32 x 4 = 2,048; m_s, l_s, alpha_s 192; tok_s 128: 76,864 in all, above the 48 KB a block
 *   gets without asking, so the launcher opts in (cudaFuncAttributeMaxDynamicSharedMemorySize, as
 *   for every version here); an H100 gives a block up to 227 KB, two such blocks fit on an SM. The
 *   PV step's accumulators: 16 rows x 4 columns per thread (512 / 128). fp32 is refused (FlashMLA
 *   takes bf16 and fp16 only; its tile would be twice the bytes). At Bc = 32 with 4 warps the
 *   barrier after S orders nothing: score (r, jj) is written by warp r % 4, lane jj, the thread
 *   that reads it in row r's softmax (it stays: at Bc = 64 it is needed). */
template <typename T, int DK, int DV, bool LATENT> struct tile_cfg {
    static constexpr int BC = DK > 128 ? 32 : 64;    /* keys per tile */
    static constexpr int CH = 16 / (int)sizeof(T);   /* elements per 16-byte copy */
    static constexpr int LD = DK + CH;               /* padded row of k_s, v_s */
    static constexpr int PHASES = TILE_THREADS / BC; /* S step: row groups */
    static constexpr int CPT = DV >= TILE_THREADS ? DV / TILE_THREADS : 1; /* PV: columns */
    static constexpr int RSTRIDE = DV >= TILE_THREADS ? 1 : TILE_THREADS / DV;
    static constexpr int RPT = DEC_ROWS / RSTRIDE; /* PV: rows per thread */
    static constexpr size_t smem = (LATENT ? 1 : 2) * (size_t)BC * LD * sizeof(T) +
                                   (size_t)BC * sizeof(int64_t) +
                                   ((size_t)DEC_ROWS * (DK + BC + 3) + BC) * sizeof(float);
    static_assert(LATENT || DK == DV, "separate K and V tiles have one width");
    static_assert(DV % TILE_THREADS == 0 || TILE_THREADS % DV == 0, "PV: columns over threads");
    static_assert(!LATENT || sizeof(T) != 2 || smem == 76864, "the tile map's byte count");
};

/* q . k for a row of q_s (fp32) and a row of k_s (T), 16 bytes of k at a time. */
template <typename T, int D> __device__ __forceinline__ float dot_row(const float *q, const T *k) {
    constexpr int CH = 16 / (int)sizeof(T);
    float s = 0.0f;
    for (int d = 0; d < D; d += CH) {
        uint4 chunk;
        chunk = *reinterpret_cast<const uint4 *>(k + d); /* an assignment: the checked build
                                                            sees it as one 16-byte load */
        T e[CH];
        memcpy(e, &chunk, sizeof chunk);
        for (int x = 0; x < CH; ++x)
            s += q[d + x] * float(e[x]);
    }
    return s;
}

/* 16 e4m3 codes (one 16-byte load) times their scale, each rounded to T, into dst. The scales
 * are powers of two: the products are exact in bf16 and fp32 (fp16: exact unless subnormal). */
template <typename T>
__device__ __forceinline__ void dequant16(const uint8_t *src, float scale, T *dst) {
    uint4 chunk;
    chunk = *reinterpret_cast<const uint4 *>(src);
    uint8_t c[16];
    memcpy(c, &chunk, sizeof chunk);
    for (int x = 0; x < 16; ++x)
        dst[x] = T(__half2float(__half(__nv_cvt_fp8_to_halfraw(c[x], __NV_E4M3))) * scale);
}

/* The K and V rows of a tile from an FP8 cache, dequantised to T on chip (FlashMLA dequantises
 * to bf16 the same way): plain loads, no cp.async. A slot with no token: zeros.
 *   Q_TOKEN   off_s[jj] is the row's element offset in [pages, P, H_kv, D]: its byte offset in
 *             the e4m3 pools, and off / D its scale's index.
 *   Q_LATENT  off / D is the token's row of 656 bytes: 512 e4m3 of c_t (4 scales, one per 128)
 *             then the 64 RoPE values in T, copied as they are. */
template <typename T, int D, int LD, int BC, int Q>
__device__ __forceinline__ void fp8_tile(const dec_params<T> &a, const int64_t *off_s, T *k_s,
                                         T *v_s) {
    if (Q == Q_TOKEN) {
        for (int c = threadIdx.x; c < BC * (D / 16); c += TILE_THREADS) {
            const int jj = c / (D / 16), col = c % (D / 16) * 16;
            const int64_t off = off_s[jj];
            T *kd = k_s + jj * LD + col, *vd = v_s + jj * LD + col;
            if (off >= 0) {
                dequant16(a.k8 + off + col, a.ks[off / D], kd);
                dequant16(a.v8 + off + col, a.vs[off / D], vd);
            } else {
                for (int x = 0; x < 16; ++x)
                    kd[x] = vd[x] = T(0.0f);
            }
        }
    } else {
        constexpr int NOPE = DEC_LATENT_DV / 16, ROPE = (D - DEC_LATENT_DV) * 2 / 16;
        static_assert(Q != Q_LATENT || sizeof(T) == 2,
                      "the latent FP8 row keeps its RoPE part in 16 bits");
        for (int c = threadIdx.x; c < BC * (NOPE + ROPE); c += TILE_THREADS) {
            const int jj = c / (NOPE + ROPE), x = c % (NOPE + ROPE);
            const int64_t off = off_s[jj];
            const uint8_t *row = a.k8 + (off >= 0 ? off / D : 0) * DEC_FP8_LATENT_BYTES;
            if (x < NOPE) {
                if (off >= 0) {
                    float scale; /* the scale of the 128 values this 16 belong to */
                    memcpy(&scale, row + DEC_LATENT_DV + 4 * (x * 16 / 128), sizeof scale);
                    dequant16(row + 16 * x, scale, k_s + jj * LD + 16 * x);
                } else {
                    for (int e = 0; e < 16; ++e)
                        k_s[jj * LD + 16 * x + e] = T(0.0f);
                }
            } else {
                const int e0 = DEC_LATENT_DV + 8 * (x - NOPE); /* 8 values of 16 bits */
                uint4 chunk = make_uint4(0, 0, 0, 0);
                if (off >= 0)
                    chunk = *reinterpret_cast<const uint4 *>(row + DEC_LATENT_DV + 16 +
                                                             2 * (e0 - DEC_LATENT_DV));
                *reinterpret_cast<uint4 *>(k_s + jj * LD + e0) = chunk;
            }
        }
    }
}

/* The tiled kernel's prologue: its shared tiles (the map above, in this order in the block's
 * dynamic shared memory: tile_cfg::smem bytes, the launcher's shape) and the rows this block and
 * this thread own (as attn_fa2_block in fa2_tile.cuh). D: the width of q and K (D_K); DV: of V and
 * O (D_V); SRC: where the keys come from (SRC_LATENT: V is the K tile's first DV columns). */
template <typename T, int D, int DV, int SRC> struct dec_block {
    using C = tile_cfg<T, D, DV, SRC == SRC_LATENT>;
    T *k_s, *v_s;               /* [BC][LD] each; latent: v_s is k_s */
    int64_t *off_s;             /* [BC] */
    float *q_s, *p_s;           /* [16][D], [16][BC] */
    float *m_s, *l_s, *alpha_s; /* [16] each */
    int *tok_s;                 /* [BC] */
    int g, hk, r0, b, i_sel;    /* group size, K/V head, first row, sequence, sparse: the token */
    int R, L, split;            /* rows, cached tokens, this block's split */
    int t0, t1;          /* the keys (dense) or selection slots (sparse) of this split: [t0, t1) */
    const int32_t *srow; /* sparse: the token's selection */
    int col0, rphase;    /* this thread's first PV column and first row */
    using acc_t = float[C::RPT][C::CPT]; /* this thread's O accumulators (the PV step) */
    __device__ dec_block(unsigned char *smem, const dec_params<T> &a)
        : k_s(reinterpret_cast<T *>(smem)),
          v_s(SRC == SRC_LATENT ? k_s : k_s + C::BC * C::LD), /* latent: k_s itself */
          off_s(reinterpret_cast<int64_t *>(k_s + (SRC == SRC_LATENT ? 1 : 2) * C::BC * C::LD)),
          q_s(reinterpret_cast<float *>(off_s + C::BC)), p_s(q_s + DEC_ROWS * D),
          m_s(p_s + DEC_ROWS * C::BC), l_s(m_s + DEC_ROWS), alpha_s(l_s + DEC_ROWS),
          tok_s(reinterpret_cast<int *>(alpha_s + DEC_ROWS)) {
        const bool sparse = SRC == SRC_SELECTED;
        g = a.H / a.H_kv;
        const int rows_total = sparse ? g : a.Lq * g; /* rows that read K/V head hk */
        const int tiles = (rows_total + DEC_ROWS - 1) / DEC_ROWS;
        hk = blockIdx.y / tiles, r0 = blockIdx.y % tiles * DEC_ROWS;
        b = sparse ? blockIdx.z / a.Lq : blockIdx.z;
        i_sel = sparse ? blockIdx.z % a.Lq : 0;
        R = min(DEC_ROWS, rows_total - r0), L = a.seqlens[b], split = blockIdx.x;
        /* the block's last row sees the most keys; sparse: the token's selection holds
         * min(k, keys it sees) tokens, then -1 */
        const int last =
            sparse ? min(a.topk, dec_visible(i_sel, a.Lq, L)) : dec_visible(token(R - 1), a.Lq, L);
        t0 = min(split * a.chunk, last), t1 = min(t0 + a.chunk, last);
        srow = sparse ? a.sel + ((int64_t)b * a.Lq + i_sel) * a.topk : NULL;
        col0 = threadIdx.x % (DV < TILE_THREADS ? DV : TILE_THREADS);
        rphase = DV < TILE_THREADS ? threadIdx.x / DV : 0;
    }
    /* row r of the block: new token i and query head h, and its row of q, o, lse */
    __device__ int token(int r) const { return SRC == SRC_SELECTED ? i_sel : (r0 + r) / g; }
    __device__ int head(int r) const {
        return hk * g + (SRC == SRC_SELECTED ? r0 + r : (r0 + r) % g);
    }
    __device__ int64_t row(const dec_params<T> &a, int r) const {
        return ((int64_t)b * a.Lq + token(r)) * a.H + head(r);
    }
};

/* The Q step: the block's rows of q into q_s in fp32, scaled by scale2 (so that S comes out in
 * log2 units, as after attn_fa2_scale_and_mask), and the rows' running max and sum started
 * (m = -inf, l = 0; attn_fa2_warp's start, in shared memory here). Every thread calls it. */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_load_q(const dec_block<T, D, DV, SRC> &blk,
                                           const dec_params<T> &a) {
    for (int x = threadIdx.x; x < blk.R * D; x += TILE_THREADS) {
        const int r = x / D;
        blk.q_s[x] = float(a.q[blk.row(a, r) * D + x % D]) * a.scale2;
    }
    for (int r = threadIdx.x; r < DEC_ROWS; r += TILE_THREADS) {
        blk.m_s[r] = -INFINITY;
        blk.l_s[r] = 0.0f;
    }
    __syncthreads(); // q rows and the running m, l are set before any thread reads them
}

/* The tokens of key tile j0 (slot jj: token j0 + jj, or the selection's entry j0 + jj; -1 past
 * the split's end) and where their rows are: one block-table read per key (dec_key_offset). */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_tile_tokens(const dec_block<T, D, DV, SRC> &blk,
                                                const dec_params<T> &a, int j0) {
    constexpr int KSRC = SRC == SRC_LATENT ? SRC_PAGED : SRC; /* how a key's row is found */
    for (int jj = threadIdx.x; jj < dec_block<T, D, DV, SRC>::C::BC; jj += TILE_THREADS) {
        const int j = j0 + jj;
        const int t = j < blk.t1 ? (SRC == SRC_SELECTED ? blk.srow[j] : j) : -1;
        blk.tok_s[jj] = t;
        blk.off_s[jj] = t >= 0 ? dec_key_offset<KSRC>(a, blk.b, blk.hk, t, D) : -1;
    }
}

/* This thread's share of the cp.async copies of the tile's rows of a cache in T (src: K or V)
 * into dst, 16 bytes per copy, one group; a slot with no token (offset -1): zeros. */
template <typename C, int D, typename T>
__device__ __forceinline__ void dec_copy_rows(T *dst, const T *src, const int64_t *off_s) {
    for (int c = threadIdx.x; c < C::BC * (D / C::CH); c += TILE_THREADS) {
        const int jj = c / (D / C::CH), col = c % (D / C::CH) * C::CH;
        const int64_t off = off_s[jj];
        cp_async_16(dst + jj * C::LD + col, src + (off >= 0 ? off + col : 0), off >= 0);
    }
    cp_async_commit();
}

/* K_j and V_j into k_s and v_s (attn_fa2_copy_kv's step): from a cache in T by cp.async, K_j and
 * V_j as two groups, returning when this thread's K_j has landed (V_j may still be in flight;
 * latent: the K rows only, V being their first DV columns); from an FP8 cache by plain loads,
 * dequantised to T (fp8_tile). */
template <int Q, typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_copy_kv(const dec_block<T, D, DV, SRC> &blk,
                                            const dec_params<T> &a) {
    using C = typename dec_block<T, D, DV, SRC>::C;
    if (Q != Q_NONE) {
        fp8_tile<T, D, C::LD, C::BC, Q>(a, blk.off_s, blk.k_s, blk.v_s);
    } else {
        dec_copy_rows<C, D>(blk.k_s, a.k, blk.off_s);
        if (SRC != SRC_LATENT) {
            dec_copy_rows<C, D>(blk.v_s, a.v, blk.off_s);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
    }
}

/* S = Q K_j^T, scaled and masked (attn_fa2_score_tile and attn_fa2_scale_and_mask's step): the
 * scale is in q_s already; a slot with no token, or a token after what row r's token sees, gets
 * -inf without its dot product. Thread t: key jj = t % BC of rows t / BC, t / BC + PHASES, ... */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_score_tile(const dec_block<T, D, DV, SRC> &blk,
                                               const dec_params<T> &a) {
    using C = typename dec_block<T, D, DV, SRC>::C;
    for (int r = threadIdx.x / C::BC; r < blk.R; r += C::PHASES) {
        const int jj = threadIdx.x % C::BC, t = blk.tok_s[jj];
        float s = -INFINITY;
        if (t >= 0 && t < dec_visible(blk.token(r), a.Lq, blk.L))
            s = dot_row<T, D>(blk.q_s + r * D, blk.k_s + jj * C::LD);
        blk.p_s[r * C::BC + jj] = s;
    }
}

/* Online softmax, one warp per row (rows w, w + 4, ...; attn_fa2_online_softmax's step): updates
 * the row's running max m and sum l, turns its scores into P = 2^(S - m) in place in p_s, and
 * leaves the rescale factor alpha in alpha_s (O *= alpha is done in the PV step: a row's O is
 * spread over the threads by column). */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_online_softmax(const dec_block<T, D, DV, SRC> &blk) {
    using C = typename dec_block<T, D, DV, SRC>::C;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int r = warp; r < blk.R; r += TILE_THREADS / 32) {
        float mt = -INFINITY;
        for (int x = lane; x < C::BC; x += 32)
            mt = fmaxf(mt, blk.p_s[r * C::BC + x]);
        const float m_old = blk.m_s[r], m_new = fmaxf(m_old, attn_warp_max(mt));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* no key yet: no -inf - -inf */
        float ps = 0.0f;
        for (int x = lane; x < C::BC; x += 32) {
            const float p = exp2f(blk.p_s[r * C::BC + x] - m_use);
            blk.p_s[r * C::BC + x] = p;
            ps += p;
        }
        ps = attn_warp_sum(ps);
        if (lane == 0) {
            const float alpha = exp2f(m_old - m_use);
            blk.alpha_s[r] = alpha;
            blk.l_s[r] = blk.l_s[r] * alpha + ps;
            blk.m_s[r] = m_new;
        }
    }
}

/* O = alpha O + P V_j for this thread's accumulators (attn_fa2_accumulate_pv's step): columns
 * col0, col0 + 128, ... of rows rphase, rphase + RSTRIDE, ...; V_j: the rows of v_s (latent: the
 * first DV columns of k_s). */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_accumulate_pv(const dec_block<T, D, DV, SRC> &blk,
                                                  typename dec_block<T, D, DV, SRC>::acc_t &acc) {
    using C = typename dec_block<T, D, DV, SRC>::C;
    for (int x = 0; x < C::RPT; ++x) {
        const int r = blk.rphase + C::RSTRIDE * x;
        if (r >= blk.R)
            break;
        const float alpha = blk.alpha_s[r];
        for (int y = 0; y < C::CPT; ++y) {
            const int col = blk.col0 + TILE_THREADS * y;
            float o = acc[x][y] * alpha;
            for (int jj = 0; jj < C::BC; ++jj)
                o += blk.p_s[r * C::BC + jj] * float(blk.v_s[jj * C::LD + col]);
            acc[x][y] = o;
        }
    }
}

/* After the last tile: this thread's O divided by its row's l (a row that saw no key: 0) and the
 * rows' LSE, stored (dec_store: the output when there is one split, else this split's partial). */
template <typename T, int D, int DV, int SRC>
__device__ __forceinline__ void dec_write_o(const dec_block<T, D, DV, SRC> &blk,
                                            const dec_params<T> &a,
                                            const typename dec_block<T, D, DV, SRC>::acc_t &acc) {
    using C = typename dec_block<T, D, DV, SRC>::C;
    for (int x = 0; x < C::RPT; ++x) {
        const int r = blk.rphase + C::RSTRIDE * x;
        if (r >= blk.R)
            break;
        const int64_t row = blk.row(a, r);
        const float l = blk.l_s[r];
        for (int y = 0; y < C::CPT; ++y)
            dec_store<T, DV>(a, blk.split, row, blk.col0 + TILE_THREADS * y,
                             l > 0.0f ? acc[x][y] / l : 0.0f);
    }
    for (int r = threadIdx.x; r < blk.R; r += TILE_THREADS)
        dec_store_lse<T, DV>(a, blk.split, blk.row(a, r), blk.m_s[r], blk.l_s[r]);
}

/* Versions 4, 5, 9, 10, 12, 13: the prologue, the steps of each key tile with their barriers,
 * the output (the map and the steps above). */
template <typename T, int D, int DV, int SRC, int Q = Q_NONE>
__global__ void tiled_kernel(const dec_params<T> a) {
    using C = tile_cfg<T, D, DV, SRC == SRC_LATENT>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const dec_block<T, D, DV, SRC> blk(smem_raw, a);
    dec_load_q(blk, a);
    typename dec_block<T, D, DV, SRC>::acc_t acc = {};
    for (int j0 = blk.t0; j0 < blk.t1; j0 += C::BC) {
        dec_tile_tokens(blk, a, j0);
        __syncthreads(); // the tokens' row offsets are in place before the copies use them
        dec_copy_kv<Q>(blk, a);
        __syncthreads(); // every thread's K rows have landed before any thread reads the tile
        dec_score_tile(blk, a);
        __syncthreads(); // the tile's scores are complete before the rows' softmax reads them
        dec_online_softmax(blk);
        cp_async_wait<0>(); /* V_j's group (latent, FP8: nothing left in flight) */
        __syncthreads();    // P, the rescale factors and every thread's V rows are in place
        dec_accumulate_pv(blk, acc);
        __syncthreads(); // every thread is done with k_s, v_s, p_s, tok_s before the next copies
    }
    dec_write_o(blk, a, acc);
}

/* --- version 1: append
 * -----------------------------------------------------------------------------
 *
 *   grid (Lq, B); block = 128 threads: new token i of sequence b goes to position
 *   pos = cache_seqlens[b] - Lq + i, i.e. page block_table[b][pos / P], slot pos % P; its H_kv x D
 *   keys (and values, and its index key) are one contiguous row on both sides: 16-byte copies.
 *   Latent (no v_new, no ki_new): the token's 576-wide latent row alone.
 *
 *      k_new [B, Lq, H_kv, D]          k_pages [pages, P, H_kv, D]
 *      (b, i) ----------------------> page table[b][pos / P], slot pos % P */
template <typename T>
__global__ void append_kernel(const T *k_new, const T *v_new, const T *ki_new, T *k_pages,
                              T *v_pages, T *ki_pages, const int *seqlens, const int *table, int W,
                              int P, int Lq, int H_kv, int D, int DI) {
    const int i = blockIdx.x, b = blockIdx.y, L = seqlens[b];
    if (L == 0) /* an empty batch slot appends nothing */
        return;
    const int pos = L - Lq + i; /* L >= Lq: checked on the host */
    const int64_t slot = (int64_t)table[(int64_t)b * W + pos / P] * P + pos % P;
    const int64_t src = (int64_t)b * Lq + i;
    const int n16 = H_kv * D * (int)sizeof(T) / 16;
    const uint4 *ks = reinterpret_cast<const uint4 *>(k_new + src * H_kv * D);
    uint4 *kd = reinterpret_cast<uint4 *>(k_pages + slot * H_kv * D);
    if (v_new == NULL) { /* latent (version 10's cache): the one latent row */
        for (int c = threadIdx.x; c < n16; c += blockDim.x)
            kd[c] = ks[c];
    } else {
        const uint4 *vs = reinterpret_cast<const uint4 *>(v_new + src * H_kv * D);
        uint4 *vd = reinterpret_cast<uint4 *>(v_pages + slot * H_kv * D);
        for (int c = threadIdx.x; c < n16; c += blockDim.x) {
            kd[c] = ks[c];
            vd[c] = vs[c];
        }
    }
    if (ki_new != NULL) {
        const uint4 *is = reinterpret_cast<const uint4 *>(ki_new + src * DI);
        uint4 *id = reinterpret_cast<uint4 *>(ki_pages + slot * DI);
        for (int c = threadIdx.x; c < DI * (int)sizeof(T) / 16; c += blockDim.x)
            id[c] = is[c];
    }
}

/* --- version 11: append_fp8
 * -------------------------------------------------------------------------
 *
 *   grid (Lq, B); block = 4 warps; one warp per group of values that shares a scale:
 *     a = max|x| over the group   s = 2^ceil(log2(max(a / 448, 1e-4)))   x8 = e4m3(x / s)
 *   (FlashMLA's rule, tests/quant.py: a power-of-two scale, so x / s is exact and the group's
 *   largest value lands in (224, 448], keeping e4m3's 3 mantissa bits). The groups:
 *     K/V (v_new != NULL)  each K/V head's D values of the token, K and V apart: H_kv x 2 groups,
 *                          codes at the row's place in [pages, P, H_kv, D], scales [pages, P, H_kv]
 *     latent               the 4 groups of 128 of c_t (the row's first 512 values), then its 64
 *                          RoPE values copied in T: FlashMLA's 656-byte row (decode.h) */
__device__ __forceinline__ float fp8_scale_of(float amax) {
    int e;
    const float m = frexpf(fmaxf(amax / 448.0f, 1e-4f), &e); /* = m 2^e, m in [0.5, 1) */
    return ldexpf(1.0f, m == 0.5f ? e - 1 : e);              /* 2^ceil(log2 .) */
}

/* One warp: n values of x quantised into codes with one scale, written to *scale. */
template <typename T>
__device__ __forceinline__ void fp8_quantize_group(const T *x, int n, uint8_t *codes,
                                                   float *scale) {
    const int lane = threadIdx.x % 32;
    float amax = 0.0f;
    for (int c = lane; c < n; c += 32)
        amax = fmaxf(amax, fabsf(float(x[c])));
    const float s = fp8_scale_of(attn_warp_max(amax));
    for (int c = lane; c < n; c += 32)
        codes[c] = __nv_cvt_float_to_fp8(float(x[c]) / s, __NV_SATFINITE, __NV_E4M3);
    if (lane == 0)
        *scale = s;
}

template <typename T>
__global__ void append_fp8_kernel(const T *k_new, const T *v_new, uint8_t *k8, uint8_t *v8,
                                  float *ks, float *vs, const int *seqlens, const int *table, int W,
                                  int P, int Lq, int H_kv, int D) {
    const int i = blockIdx.x, b = blockIdx.y, L = seqlens[b], warp = threadIdx.x / 32;
    if (L == 0)
        return;
    const int pos = L - Lq + i;
    const int64_t slot = (int64_t)table[(int64_t)b * W + pos / P] * P + pos % P;
    const int64_t src = (int64_t)b * Lq + i;
    if (v_new == NULL) { /* latent: D = 576 */
        const T *x = k_new + src * D;
        uint8_t *row = k8 + slot * DEC_FP8_LATENT_BYTES;
        float *scales = reinterpret_cast<float *>(row + DEC_LATENT_DV);
        for (int grp = warp; grp < DEC_LATENT_DV / 128; grp += blockDim.x / 32)
            fp8_quantize_group(x + 128 * grp, 128, row + 128 * grp, scales + grp);
        T *rope = reinterpret_cast<T *>(row + DEC_LATENT_DV + 16);
        for (int c = threadIdx.x; c < D - DEC_LATENT_DV; c += blockDim.x)
            rope[c] = x[DEC_LATENT_DV + c];
        return;
    }
    for (int grp = warp; grp < 2 * H_kv; grp += blockDim.x / 32) {
        const int hk = grp / 2;
        const T *x = (grp % 2 ? v_new : k_new) + (src * H_kv + hk) * D;
        uint8_t *codes = (grp % 2 ? v8 : k8) + (slot * H_kv + hk) * D;
        fp8_quantize_group(x, D, codes, (grp % 2 ? vs : ks) + slot * H_kv + hk);
    }
}

/* --- version 6: indexer
 * ----------------------------------------------------------------------------
 *
 *   grid (ceil(L_cap / 128), Lq, B); block = 128 threads, thread <-> one key t of new token i:
 *       I(i, t) = sum_j w(i, j) ReLU(q_I(i, j) . k_I(t))       j < H_I
 *   q_I(i) (H_I x D_I) and w(i) sit in shared memory; each thread reads its key's index row from
 *   its page 16 bytes at a time and keeps the H_I partial dot products in registers. Example 05's
 *   indexer runs the heads on tensor cores (16 heads = the mma's 16 rows) over a contiguous k_I;
 *   this one reads the paged cache and takes any H_I (SmolLM2's trained indexer has 4 heads of
 *   32). Scores of keys a token does not see are not written (the top-k reads only the others). */
#define IDX_THREADS 128

template <typename T>
__global__ void indexer_kernel(const T *q_index, const float *w, const T *ki_pages, float *logits,
                               const int *seqlens, const int *table, int W, int P, int Lq,
                               int L_cap, int HI, int DI) {
    __shared__ float qi_s[DEC_MAX_INDEX_HEADS * DEC_MAX_INDEX_DIM];
    __shared__ float w_s[DEC_MAX_INDEX_HEADS];
    constexpr int CH = 16 / (int)sizeof(T);
    const int i = blockIdx.y, b = blockIdx.z, t = blockIdx.x * IDX_THREADS + threadIdx.x;
    const int n = dec_visible(i, Lq, seqlens[b]);
    if ((int)blockIdx.x * IDX_THREADS >= n) /* the same for every thread of the block */
        return;
    const int64_t qrow = (int64_t)b * Lq + i;
    for (int x = threadIdx.x; x < HI * DI; x += IDX_THREADS)
        qi_s[x] = float(q_index[qrow * HI * DI + x]);
    for (int x = threadIdx.x; x < HI; x += IDX_THREADS)
        w_s[x] = w[qrow * HI + x];
    __syncthreads(); // the token's index queries and weights are in place before any key is scored
    if (t >= n)
        return;
    const T *kr = ki_pages + ((int64_t)table[(int64_t)b * W + t / P] * P + t % P) * DI;
    float dots[DEC_MAX_INDEX_HEADS];
    for (int j = 0; j < HI; ++j)
        dots[j] = 0.0f;
    for (int d = 0; d < DI; d += CH) {
        uint4 chunk;
        chunk = *reinterpret_cast<const uint4 *>(kr + d); /* one 16-byte load (as above) */
        T e[CH];
        memcpy(e, &chunk, sizeof chunk);
        for (int j = 0; j < HI; ++j)
            for (int x = 0; x < CH; ++x)
                dots[j] += qi_s[j * DI + d + x] * float(e[x]);
    }
    float score = 0.0f;
    for (int j = 0; j < HI; ++j)
        score += w_s[j] * fmaxf(dots[j], 0.0f);
    logits[qrow * L_cap + t] = score;
}

/* ================================= launchers ============================================== */

/* F<T, D>::run for fp32 or a cell of the {fp16, bf16} x {64, 128} grid (device/dispatch.cuh). */
template <template <typename, int> class F, typename... Args>
static void by_type(attn_dtype t, int D, Args... args) {
    if (t == ATTN_F32)
        attn_dispatch_head_dim(D, [&](auto d) { F<float, decltype(d)::value>::run(args...); });
    else
        attn_dispatch_tc(t, D, [&](auto tt, auto d) {
            F<typename decltype(tt)::type, decltype(d)::value>::run(args...);
        });
}

template <typename T>
static dec_params<T> params_of(const dec_args *a, int src, int splits, int keys) {
    const bool contiguous = src == SRC_CONTIGUOUS;
    dec_params<T> p;
    p.q = (const T *)a->q;
    p.o = (T *)a->o;
    p.lse = a->lse;
    p.k = (const T *)(contiguous ? a->k_cache : a->k_pages);
    p.v = (const T *)(contiguous ? a->v_cache : a->v_pages); /* latent: NULL, never read */
    p.seqlens = a->seqlens;
    p.table = a->block_table;
    p.sel = a->sel;
    p.part = a->part;
    p.B = a->B, p.H = a->H, p.H_kv = a->H_kv, p.Lq = a->Lq, p.L_cap = a->L_cap;
    p.W = a->table_width, p.P = a->page_size, p.topk = a->topk;
    p.splits = splits < 1 ? 1 : splits;
    p.chunk = keys > 0 ? (keys + p.splits - 1) / p.splits : 1;
    p.scale2 = a->scale * CUDART_L2E_F;
    p.k8 = a->k8_pages, p.v8 = a->v8_pages, p.ks = a->k8_scales, p.vs = a->v8_scales;
    return p;
}

template <typename T, int D> struct combine_launch {
    static void run(const dec_params<T> p, cudaStream_t stream) {
        if (p.splits > 1)
            combine_kernel<T, D>
                <<<(unsigned)((int64_t)p.B * p.Lq * p.H), TILE_THREADS, 0, stream>>>(p);
    }
};

template <typename T, int D> struct split_kv_launch {
    static void run(const dec_args *a, int splits, cudaStream_t stream) {
        const dec_params<T> p = params_of<T>(a, SRC_CONTIGUOUS, splits, a->L_cap);
        split_kv_kernel<T, D><<<dim3(p.splits, a->H, a->B), 32, 0, stream>>>(p);
        combine_launch<T, D>::run(p, stream);
    }
};

void dec_launch_naive(const dec_args *a, cudaStream_t stream) {
    by_type<split_kv_launch>(a->dtype, a->D, a, 1, stream); /* one split: the whole cache */
}

void dec_launch_split_kv(const dec_args *a, cudaStream_t stream) {
    by_type<split_kv_launch>(a->dtype, a->D, a, a->splits, stream);
}

/* The tiled kernel for keys from SRC, its shared memory opted in (above 48 KB a launch must ask),
 * then the combine over D_V-wide partials. */
template <typename T, int DK, int DV, int SRC, int Q = Q_NONE>
static void tiled_run(const dec_args *a, cudaStream_t stream) {
    using C = tile_cfg<T, DK, DV, SRC == SRC_LATENT>;
    const bool sparse = SRC == SRC_SELECTED;
    const int keys = sparse ? a->topk : a->L_cap;
    const dec_params<T> p = params_of<T>(a, SRC, a->splits, keys);
    const int g = a->H / a->H_kv, rows = sparse ? g : a->Lq * g;
    const dim3 grid(p.splits, a->H_kv * ((rows + DEC_ROWS - 1) / DEC_ROWS),
                    sparse ? a->B * a->Lq : a->B);
    cudaFuncSetAttribute(tiled_kernel<T, DK, DV, SRC, Q>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::smem);
    tiled_kernel<T, DK, DV, SRC, Q><<<grid, TILE_THREADS, C::smem, stream>>>(p);
    combine_launch<T, DV>::run(p, stream);
}

template <typename T, int D> struct tiled_launch {
    static void run(const dec_args *a, int src, cudaStream_t stream) {
        if (src == SRC_CONTIGUOUS)
            tiled_run<T, D, D, SRC_CONTIGUOUS>(a, stream);
        else if (src == SRC_PAGED)
            tiled_run<T, D, D, SRC_PAGED>(a, stream);
        else
            tiled_run<T, D, D, SRC_SELECTED>(a, stream);
    }
};

void dec_launch_gqa(const dec_args *a, cudaStream_t stream) {
    by_type<tiled_launch>(a->dtype, a->D, a, (int)SRC_CONTIGUOUS, stream);
}

void dec_launch_paged(const dec_args *a, cudaStream_t stream) {
    by_type<tiled_launch>(a->dtype, a->D, a, (int)SRC_PAGED, stream);
}

void dec_launch_sparse(const dec_args *a, cudaStream_t stream) {
    by_type<tiled_launch>(a->dtype, a->D, a, (int)SRC_SELECTED, stream);
}

/* 16-bit only (dec_latent_unsupported refuses fp32): D_K = 576, D_V = 512. */
void dec_launch_latent(const dec_args *a, cudaStream_t stream) {
    if (a->dtype == ATTN_BF16)
        tiled_run<__nv_bfloat16, DEC_LATENT_DK, DEC_LATENT_DV, SRC_LATENT>(a, stream);
    else if (a->dtype == ATTN_F16)
        tiled_run<__half, DEC_LATENT_DK, DEC_LATENT_DV, SRC_LATENT>(a, stream);
}

/* The FP8 cache's attention (versions 12, 13): version 5's and version 10's kernel with the tile
 * dequantised on chip. */
template <typename T, int D> struct paged_fp8_launch {
    static void run(const dec_args *a, cudaStream_t stream) {
        tiled_run<T, D, D, SRC_PAGED, Q_TOKEN>(a, stream);
    }
};

void dec_launch_paged_fp8(const dec_args *a, cudaStream_t stream) {
    by_type<paged_fp8_launch>(a->dtype, a->D, a, stream);
}

void dec_launch_latent_fp8(const dec_args *a, cudaStream_t stream) {
    if (a->dtype == ATTN_BF16)
        tiled_run<__nv_bfloat16, DEC_LATENT_DK, DEC_LATENT_DV, SRC_LATENT, Q_LATENT>(a, stream);
    else if (a->dtype == ATTN_F16)
        tiled_run<__half, DEC_LATENT_DK, DEC_LATENT_DV, SRC_LATENT, Q_LATENT>(a, stream);
}

size_t dec_workspace_bytes(const dec_args *a, int splits) {
    const size_t rows = (size_t)a->B * a->Lq * a->H;
    const size_t dv = a->latent ? DEC_LATENT_DV : (size_t)a->D;
    return splits > 1 ? (size_t)splits * rows * (dv + 1) * sizeof(float) : 0;
}

template <typename T> static void append_typed(const dec_args *a, cudaStream_t stream) {
    append_kernel<T><<<dim3(a->Lq, a->B), 128, 0, stream>>>(
        (const T *)a->k_new, (const T *)a->v_new, (const T *)a->ki_new, (T *)a->k_pages,
        (T *)a->v_pages, (T *)a->ki_pages, a->seqlens, a->block_table, a->table_width, a->page_size,
        a->Lq, a->H_kv, a->D, a->index_dim);
}

template <typename T> static void append_fp8_typed(const dec_args *a, cudaStream_t stream) {
    append_fp8_kernel<T><<<dim3(a->Lq, a->B), 128, 0, stream>>>(
        (const T *)a->k_new, (const T *)a->v_new, a->k8_pages, a->v8_pages, a->k8_scales,
        a->v8_scales, a->seqlens, a->block_table, a->table_width, a->page_size, a->Lq, a->H_kv,
        a->D);
}

void dec_launch_append_fp8(const dec_args *a, cudaStream_t stream) {
    if (a->dtype == ATTN_BF16)
        append_fp8_typed<__nv_bfloat16>(a, stream);
    else if (a->dtype == ATTN_F16)
        append_fp8_typed<__half>(a, stream);
    else
        append_fp8_typed<float>(a, stream);
}

void dec_launch_append(const dec_args *a, cudaStream_t stream) {
    if (a->dtype == ATTN_BF16)
        append_typed<__nv_bfloat16>(a, stream);
    else if (a->dtype == ATTN_F16)
        append_typed<__half>(a, stream);
    else
        append_typed<float>(a, stream);
}

template <typename T> static void indexer_typed(const dec_args *a, cudaStream_t stream) {
    const dim3 grid((a->L_cap + IDX_THREADS - 1) / IDX_THREADS, a->Lq, a->B);
    indexer_kernel<T><<<grid, IDX_THREADS, 0, stream>>>(
        (const T *)a->q_index, a->w, (const T *)a->ki_pages, a->logits, a->seqlens, a->block_table,
        a->table_width, a->page_size, a->Lq, a->L_cap, a->index_heads, a->index_dim);
}

void dec_launch_indexer(const dec_args *a, cudaStream_t stream) {
    if (a->dtype == ATTN_BF16)
        indexer_typed<__nv_bfloat16>(a, stream);
    else if (a->dtype == ATTN_F16)
        indexer_typed<__half>(a, stream);
    else
        indexer_typed<float>(a, stream);
}

/* Example 05's top-k kernels at decode shape: its [B, chunk, Lk] logits are ours with chunk = Lq
 * and Lk = L_cap, its packed query rows b * Lq + i ours (cu_q), its per-sequence key counts the
 * cache lengths (cu_k); every new token sees its sequence's tokens up to itself (causal). */
void dec_launch_topk(const dec_args *a, bool bitonic, cudaStream_t stream) {
    attn_problem p;
    attn_problem_init(&p, a->B, a->H, a->Lq, a->L_cap, a->D);
    p.causal = true;
    ds_args d;
    memset(&d, 0, sizeof d);
    d.p = &p;
    d.topk = a->topk;
    d.chunk = a->Lq;
    d.logits = a->logits;
    d.sel = a->sel;
    d.cu_q = a->cu_q;
    d.cu_k = a->cu_k;
    if (bitonic)
        ds_launch_topk_bitonic(&d, 0, stream);
    else
        ds_launch_topk_radix(&d, 0, stream);
}

/* ================================= registry =============================================== */

const char *dec_latent_unsupported(int H_kv, int D, attn_dtype dtype) {
    if (H_kv != 1)
        return "--latent is multi-query: one latent row per token serves every head (--kv-heads 1)";
    if (D != DEC_LATENT_DK)
        return "--latent: the latent rows are 576 wide (512 + 64 of RoPE; -D 576 or no -D)";
    if (dtype != ATTN_BF16 && dtype != ATTN_F16)
        return "--latent takes bf16 or fp16 (FlashMLA's dtypes; --dtype bf16 or f16)";
    return NULL;
}

const char *dec_unsupported(int H, int H_kv, int D, int Lq, int index_heads, int index_dim) {
    if (D != 64 && D != 128)
        return "the kernels take D = 64 or 128 (-D; 576 is MLA's latent layout: --latent)";
    if (H_kv < 1 || H % H_kv != 0)
        return "the query heads must be a multiple of the key/value heads (-H, --kv-heads)";
    if (Lq < 1 || Lq > DEC_MAX_QUERIES)
        return "--queries takes 1 to 8 new tokens per sequence";
    if (index_heads < 1 || index_heads > DEC_MAX_INDEX_HEADS)
        return "--index-heads takes 1 to 64 indexer heads";
    if (index_dim < 8 || index_dim > DEC_MAX_INDEX_DIM || index_dim % 8 != 0)
        return "--index-dim takes a multiple of 8 up to 128";
    return NULL;
}

/* The stages' kernels on the one driver: each reads a dec_run from attn_buffers.args
 * (decode_stages.c makes it) and runs its version with that version's split count (1: the
 * versions that do not split). */
#define DEC_RUN(name, n_splits, launch)                                                            \
    static void run_##name(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {         \
        (void)p;                                                                                   \
        const dec_run *r = (const dec_run *)b->args;                                               \
        dec_args a = r->args;                                                                      \
        a.splits = (n_splits);                                                                     \
        launch;                                                                                    \
    }
DEC_RUN(append, 1, dec_launch_append(&a, s))
DEC_RUN(naive, 1, dec_launch_naive(&a, s))
DEC_RUN(split_kv, r->splits_split_kv, dec_launch_split_kv(&a, s))
DEC_RUN(gqa, r->splits_tiled, dec_launch_gqa(&a, s))
DEC_RUN(paged, r->splits_tiled, dec_launch_paged(&a, s))
DEC_RUN(indexer, 1, dec_launch_indexer(&a, s))
DEC_RUN(topk_radix, 1, dec_launch_topk(&a, false, s))
DEC_RUN(topk_bitonic, 1, dec_launch_topk(&a, true, s))
DEC_RUN(sparse, r->splits_sparse, dec_launch_sparse(&a, s))
DEC_RUN(latent, r->splits_tiled, dec_launch_latent(&a, s))
DEC_RUN(append_fp8, 1, dec_launch_append_fp8(&a, s))
DEC_RUN(paged_fp8, r->splits_tiled, dec_launch_paged_fp8(&a, s))
DEC_RUN(latent_fp8, r->splits_tiled, dec_launch_latent_fp8(&a, s))
#undef DEC_RUN

/* f32/f16/bf16, D = 64 or 128 (the module refuses other D), new tokens causal among
 * themselves, a cache length per sequence; every kernel runs on the simulator */
static const attn_requirements dec_requirements = {
    .dtypes = ATTN_DTYPE_BIT(ATTN_F32) | ATTN_DTYPES_F16_BF16,
    .max_d = 128,
    .d_multiple = 64,
    .causal = true,
    .varlen = true,
};

/* versions 10, 13: bf16/fp16 (FlashMLA's), D = 576 (the latent row), --latent only (dec_verdict) */
static const attn_requirements dec_latent_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16,
    .max_d = DEC_LATENT_DK,
    .d_multiple = 64,
    .causal = true,
    .varlen = true,
};

static const attn_stage dec_stages[] = {
    {"append", false, NULL, dec_clear, dec_check_append},
    {"attention", false, NULL, dec_clear, dec_check_attention},
    {"indexer", false, NULL, dec_clear, dec_check_indexer},
    {"top-k", false, NULL, dec_clear, dec_check_topk},
    {"sparse", false, dec_prepare_sparse, dec_clear, dec_check_sparse},
    {"append", false, NULL, dec_clear, dec_check_append_fp8}, /* --fp8 */
    {"attention", false, dec_prepare_fp8, dec_clear, dec_check_fp8},
};

static const attn_kernel dec_kernels[] = {
    {ATTN_VERSION(1, "append",
                  "the new tokens' K, V and index key written into their pages (block table)"),
     .launch = run_append, .req = dec_requirements, .stage = DEC_STAGE_APPEND},
    {ATTN_VERSION(2, "naive",
                  "one warp per (sequence, query head), key by key over the contiguous cache"),
     .launch = run_naive, .req = dec_requirements, .stage = DEC_STAGE_ATTENTION},
    {ATTN_VERSION(3, "split_kv",
                  "flash-decoding: the cache split over blocks, partial O + LSE, combine"),
     .launch = run_split_kv, .req = dec_requirements, .stage = DEC_STAGE_ATTENTION},
    {ATTN_VERSION(4, "gqa",
                  "one block per K/V head: tiles in shared memory serve its query heads, split-KV"),
     .launch = run_gqa, .req = dec_requirements, .stage = DEC_STAGE_ATTENTION},
    {ATTN_VERSION(5, "paged",
                  "version 4 over the paged cache through the block table (same arithmetic)"),
     .launch = run_paged, .req = dec_requirements, .stage = DEC_STAGE_ATTENTION},
    {ATTN_VERSION(6, "indexer", "DSA index scores of each new token over a paged index-key cache"),
     .launch = run_indexer, .req = dec_requirements, .stage = DEC_STAGE_INDEXER},
    {ATTN_VERSION(7, "topk_radix",
                  "example 05's radix select at decode shape (one row per new token)"),
     .launch = run_topk_radix, .req = dec_requirements, .stage = DEC_STAGE_TOPK},
    {ATTN_VERSION(8, "topk_bitonic",
                  "example 05's bitonic baseline (caches of at most 4096 tokens)"),
     .launch = run_topk_bitonic, .req = dec_requirements, .stage = DEC_STAGE_TOPK},
    {ATTN_VERSION(9, "sparse", "attention over the k selected tokens of the paged cache, split-KV"),
     .launch = run_sparse, .req = dec_requirements, .stage = DEC_STAGE_SPARSE},
    {ATTN_VERSION(10, "latent",
                  "MLA: 576-wide queries over one paged latent row per token, V its first 512"),
     .launch = run_latent, .req = dec_latent_requirements, .stage = DEC_STAGE_ATTENTION},
    {ATTN_VERSION(11, "append_fp8",
                  "version 1 quantising into an e4m3 cache with power-of-two scales (--fp8)"),
     .launch = run_append_fp8, .req = dec_requirements, .stage = DEC_STAGE_APPEND_FP8},
    {ATTN_VERSION(12, "paged_fp8",
                  "version 5 over the e4m3 K/V cache, dequantised on chip (--fp8)"),
     .launch = run_paged_fp8, .req = dec_requirements, .stage = DEC_STAGE_FP8},
    {ATTN_VERSION(13, "latent_fp8",
                  "version 10 over FlashMLA's 656-byte FP8 latent rows (--fp8 --latent)"),
     .launch = run_latent_fp8, .req = dec_latent_requirements, .stage = DEC_STAGE_FP8},
};

#define OPT(field) offsetof(dec_options, field)
static const attn_option dec_option_table[] = {
    {"--cache-lens", "L1,L2,...",
     "cache length of each sequence (0: an empty batch slot); B = the count (else -B x -L)",
     ATTN_OPTION_TEXT, OPT(cache_lens), 0, 0, NULL, NULL, NULL},
    {"--queries", "N", "new tokens per sequence: 1 decoding, 2-8 a speculative step (causal)",
     ATTN_OPTION_INT, OPT(queries), 1, DEC_MAX_QUERIES, NULL, "1", NULL},
    {"--kv-heads", "N",
     "key/value heads H_kv; H must be a multiple (0: 3 for the simulator's default 9 heads, 8 for "
     "the GPU's 32; H, no grouping, when -H is given)",
     ATTN_OPTION_INT, OPT(kv_heads), 0, 4096, NULL, "0", NULL},
    {"--page-size", "P", "tokens per page of the paged cache", ATTN_OPTION_INT, OPT(page_size), 1,
     DEC_MAX_PAGE_SIZE, NULL, "16", "64"},
    {"--splits", "auto|fa|N",
     "split-KV: our rule (auto), FlashAttention-2's heuristic (fa), or N splits (1 to 256)",
     ATTN_OPTION_TEXT, OPT(splits), 0, 0, NULL, "auto", NULL},
    {"--topk", "K",
     "DSA: tokens kept per new token (0: 64 on the simulator, 2048 on a GPU, at most the longest "
     "cache)",
     ATTN_OPTION_INT, OPT(topk), 0, INT_MAX, NULL, "0", NULL},
    {"--index-heads", "N", "DSA: indexer heads H_I (1 to 64)", ATTN_OPTION_INT, OPT(index_heads), 1,
     DEC_MAX_INDEX_HEADS, NULL, "4", "64"},
    {"--index-dim", "N", "DSA: indexer head dimension D_I (a multiple of 8, at most 128)",
     ATTN_OPTION_INT, OPT(index_dim), 8, DEC_MAX_INDEX_DIM, NULL, "32", "128"},
    {"--table-pages", "N", "pages per sequence in the block table (0: what the longest needs)",
     ATTN_OPTION_INT, OPT(table_pages), 0, INT_MAX, NULL, "0", NULL},
    {"--spare-pages", "N", "pages in the pool beyond those the sequences use", ATTN_OPTION_INT,
     OPT(spare_pages), 0, INT_MAX, NULL, "7", NULL},
    {"--latent", NULL,
     "DeepSeek's MLA decode (version 10): q [B,Lq,H,576], one paged latent row of 576 per token "
     "(K; V = its first 512), o [B,Lq,H,512]; bf16 unless --dtype, scale 1/sqrt(192) unless "
     "--scale",
     ATTN_OPTION_SWITCH, OPT(latent), 0, 0, NULL, NULL, NULL},
    {"--corrupt-table", "V",
     "write V into the block table's first entry (a test: the program must refuse a page outside "
     "the pool)",
     ATTN_OPTION_TEXT, OPT(corrupt_table), 0, 0, NULL, NULL, NULL},
    {"--fp8", NULL,
     "the step over the FP8 cache (versions 11-13, and only they): e4m3 codes, power-of-two scales "
     "per token and K/V head (--latent: FlashMLA's 656-byte rows)",
     ATTN_OPTION_SWITCH, OPT(fp8), 0, 0, NULL, NULL, NULL},
    {"--outliers", "F", "--fp8: channels 7 and 37 of every key row times F", ATTN_OPTION_FACTOR,
     OPT(outliers), 0, 0, NULL, "1", NULL},
    {"--corrupt-scale", "F",
     "--fp8: the first new token's K scale times F after the append (a test: both checks fail)",
     ATTN_OPTION_FACTOR, OPT(corrupt_scale), 0, 0, NULL, "1", NULL},
};
#undef OPT

static const attn_module dec_module = {
    ATTN_MODULE_OPTIONS(dec_option_table, dec_options),
    .state_size = sizeof(dec_state),
    .prepare = dec_prepare,
    .verdict = dec_verdict,
    .banner = dec_banner,
    ATTN_STAGES(dec_stages),
    .host_bytes = dec_host_bytes,
    .setup = dec_setup,
    .flops = dec_flops,
    .record_json = dec_record_json,
    .dump = dec_dump,
    .after_table = dec_after_table,
    .release = dec_release,
};

extern "C" const attn_example decode_example = {
    .name = "09_decode",
    .summary = "decoding: a KV cache, split-KV (flash-decoding), GQA, a paged cache, DeepSeek "
               "sparse decode",
    ATTN_KERNELS(dec_kernels),
    /* B, H, L, D; on a GPU: B, H, L (cache), D; on the simulator: SmolLM2-135M's heads (9 over 3)
     */
    .defaults = {.gpu = {8, 32, 32768, 128}, .sim = {4, 9, 300, 64}},
    .module = &dec_module,
};
