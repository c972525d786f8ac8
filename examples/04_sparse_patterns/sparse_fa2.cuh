/* sparse_fa2.cuh — Example 04's versions 2 and 3: FA2 (example 03's fa2_mma) over the key tiles a
 * *tile source* lists, the one kernel behind block_sparse (the block mask's lists) and window (a
 * band computed from w). Included by sparse_patterns.cu, and by example 06, which specialises the
 * block-sparse kernel on its own pattern kind (attn_launch_block_sparse<its kind>).
 * The walkthrough: README.md, "The block-sparse kernel".
 */
#ifndef ATTN_SPARSE_FA2_CUH
#define ATTN_SPARSE_FA2_CUH

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
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"

/* ================================== kernels =============================================== */

#define BR ATTN_FA2_BR /* query rows per block (64); = ATTN_SPARSE_TILE, the mask's block_q */
#define BC ATTN_FA2_BC /* keys per K/V tile (64); = ATTN_SPARSE_TILE, the block mask's block_k */
#define WARPS 4        /* warps per block; warp w owns rows 16w .. 16w+15 of the tile */
#define WARP_ROWS ATTN_FA2_WARP_ROWS /* BR / WARPS = 16 */
static_assert(BR == ATTN_SPARSE_TILE && BC == ATTN_SPARSE_TILE, "tiles must match the mask's");

/* --- versions 2 and 3: one FA2 body, two sources of key tiles --------------------------------
 *
 * The kernel is example 03's fa2_mma (walkthrough there), with the same prologue and tile loop
 * (attn_fa2_block, attn_fa2_tile: the copies, then score, scale and mask, online softmax,
 * accumulate P V, in examples/03_flash_attention_v2/fa2_tile.cuh), with one change: instead of the
 * key tiles 0, 1, ... up to the causal diagonal, a query tile visits the key tiles a *tile source*
 * lists, and applies the per-element mask only on the tiles the source marks as masked:
 *
 *   query tile qb            key tiles of qb (block mask row)     what the block does
 *   +------------------+     full:    [3, 4]                      S = Q K^T, softmax, P V
 *   | warp 0: rows 0-15|     partial: [2, 5]                      the same, plus: entries the
 *   | warp 1: rows16-31|                                            pattern drops get -inf
 *   | warp 2: rows32-47|     tiles never listed are never loaded: the work is
 *   | warp 3: rows48-63|     (listed tiles) x 64 x 64 instead of Lk x 64
 *   +------------------+
 *
 * block_list_tiles (version 2) reads the lists from the block mask in device memory;
 * band_tiles (version 3) computes them: the keys of a window lie in one band around the
 * diagonal, so the key tiles of a query tile are a contiguous range known from w alone.
 *
 *   grid  = (ceil(Lq/64), min(B*H, 65535)); blockIdx.y strides over the heads (b = bh / H)
 *   block = 128 threads = 4 warps; shared q_s, k_s, v_s [64][D + 8] as in fa2_mma */

/* Tile source of version 2: the block mask's lists for (sequence b, query block qb); Own decides
 * the parts of an example's own pattern kinds (device/patterns.cuh, attn_pattern_keep_with). */
template <class Own> struct block_list_tiles {
    struct params {
        attn_block_mask mask; /* arrays in device memory, 64 x 64 tiles */
        attn_pattern pattern; /* the predicate of partial tiles (n_parts = 0: causal only) */
    };
    const params *p;
    const int32_t *full, *part; /* [num_k_blocks] rows of the lists */
    int n_full, n_part, seq_q, seq_k;
    int diag; /* causal: the last key that every row of the tile sees (first row's aligned a) */
    bool causal;

    __device__ block_list_tiles(const params &prm, int b, int qb, const attn_seq_head &sh,
                                bool is_causal)
        : p(&prm), seq_q(sh.Lq), seq_k(sh.Lk), diag(qb * BR + sh.Lk - sh.Lq), causal(is_causal) {
        const int64_t row = (int64_t)b * prm.mask.num_q_blocks + qb;
        full = prm.mask.full_kv_indices + row * prm.mask.num_k_blocks;
        part = prm.mask.kv_indices + row * prm.mask.num_k_blocks;
        n_full = prm.mask.full_kv_num_blocks[row];
        n_part = prm.mask.kv_num_blocks[row];
    }
    __device__ int count() const { return n_full + n_part; }
    /* Key tile t (full ones first); *masked: needs the per-element test (partial, a tail, or a
     * tile that crosses the causal diagonal: a user-built mask may list one as full, and
     * causality still holds inside it). */
    __device__ int key_tile(int t, bool *masked) const {
        const int kb = t < n_full ? full[t] : part[t - n_full];
        *masked = t >= n_full || (kb + 1) * BC > seq_k || (causal && (kb + 1) * BC - 1 > diag);
        return kb;
    }
    __device__ bool visible(int i, int key) const {
        return key < seq_k && (!causal || key <= i + seq_k - seq_q) &&
               attn_pattern_keep_with<Own>(&p->pattern, i, key, seq_q, seq_k);
    }
};

/* Tile source of version 3: key j is visible to the query at aligned position a = i + Lk - Lq
 * iff lo <= j - a <= hi (the union of the window parts; causal caps hi at 0). */
struct band_tiles {
    struct params {
        int lo, hi; /* the band of delta = j - a; lo > hi: empty */
    };
    int lo, hi, first, n, a_first, a_last, seq_k, off;

    __device__ band_tiles(const params &prm, int b, int qb, const attn_seq_head &sh, bool causal) {
        (void)b;
        off = sh.Lk - sh.Lq;
        seq_k = sh.Lk;
        lo = prm.lo;
        hi = causal && prm.hi > 0 ? 0 : prm.hi;
        a_first = qb * BR + off;
        a_last = min(qb * BR + BR, sh.Lq) - 1 + off;
        const int jmin = max(a_first + lo, 0), jmax = min(a_last + hi, seq_k - 1);
        first = jmin / BC;
        n = lo <= hi && jmin <= jmax ? jmax / BC - first + 1 : 0;
    }
    __device__ int count() const { return n; }
    __device__ int key_tile(int t, bool *masked) const {
        const int j0 = (first + t) * BC, j1 = j0 + BC - 1;
        /* every (row, key) of the tile inside the band, and no key past the end */
        *masked = !(j0 - a_last >= lo && j1 - a_first <= hi && j1 < seq_k);
        return first + t;
    }
    __device__ bool visible(int i, int key) const {
        const int d = key - (i + off);
        return key < seq_k && d >= lo && d <= hi;
    }
};

template <typename T, int D, typename Tiles>
__global__ void sparse_fa2_kernel(const T *__restrict__ q, // [B,H,Lq,D] (varlen [tq,H,D])
                                  const T *__restrict__ k, // [B,H,Lk,D] (varlen [tk,H,D])
                                  const T *__restrict__ v, // [B,H,Lk,D] (varlen [tk,H,D])
                                  T *__restrict__ o,       // [B,H,Lq,D] (varlen [tq,H,D])
                                  float *__restrict__ lse, // [B,H,Lq] (varlen [H,tq]) or NULL
                                  const int *cu_q,         // [B+1] or NULL (dense layout)
                                  const int *cu_k,         // [B+1] or NULL
                                  int B, int H, int Lq, int Lk, float scale, bool causal,
                                  const typename Tiles::params tp) {
    using Lay = attn_padded_layout<D>; /* rows D + 8 elements apart */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const attn_fa2_block<T, Lay> blk(smem_raw, scale); /* q_s, k_s, v_s [64][LD]; q0, row0 */
    const int g = threadIdx.x % 32 / 4;
    const int rows[2] = {blk.row0 + g, blk.row0 + g + 8}; /* this lane's query rows */

    for (int bh = blockIdx.y; bh < B * H; bh += gridDim.y) {
        const attn_seq_head sh = attn_seq_head_at(bh, B * H, H, D, Lq, Lk, cu_q, cu_k);
        if (blk.q0 >= sh.Lq) /* a short sequence of a varlen batch: the whole block skips */
            continue;
        attn_fa2_warp<D> w; /* qf, of, m, l */
        attn_fa2_load_q<T, D, BR, Lay>(w.qf, blk.q_s, q + sh.q + blk.q0 * sh.ld, sh.ld,
                                       sh.Lq - blk.q0);

        /* The only difference from dense FA2: the key tiles are the tile source's, and the mask
         * test runs on the tiles it marks masked only, with its predicate. */
        const Tiles tiles(tp, bh / H, blockIdx.x, sh, causal);
        for (int t = 0; t < tiles.count(); ++t) {
            bool masked;
            const int j0 = tiles.key_tile(t, &masked) * BC;
            attn_fa2_tile<T, D, Lay>(
                w, blk, k + sh.k, v + sh.k, sh.ld, sh.Lk, j0, [&](float(&s)[BC / 8][4]) {
                    attn_fa2_scale_and_mask(s, j0, masked, blk.scale2, [&](int h, int key) {
                        return tiles.visible(rows[h], key);
                    });
                });
        }

        /* Deferred normalisation; a row that saw no key has l = 0 and outputs 0, LSE -inf. */
        attn_fa2_write_o<T, D>(o, lse, w, blk.row0, sh);
    }
}

/* ================================= launchers ============================================== */

/* Versions 2 and 3: one block of WARPS warps, shared q_s, k_s, v_s [64][D + ATTN_SMEM_PAD]. */
static attn_launch_shape sparse_fa2_shape(const attn_problem *p) {
    return {"sparse_fa2_kernel", WARPS * 32,
            (size_t)(BR + 2 * BC) * (p->D + ATTN_SMEM_PAD) * attn_dtype_size(p->dtype)};
}

template <typename T, int D, typename Tiles>
static void launch_sparse_typed(const attn_problem *p, const attn_buffers *b,
                                const typename Tiles::params &tp, cudaStream_t stream) {
    static_assert(attn_padded_layout<D>::LD == D + ATTN_SMEM_PAD, "sparse_fa2_shape's rows");
    const attn_launch_shape shape = sparse_fa2_shape(p);
    cudaFuncSetAttribute(sparse_fa2_kernel<T, D, Tiles>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shape.smem_bytes);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(p->B * p->H));
    sparse_fa2_kernel<T, D, Tiles><<<grid, shape.threads, shape.smem_bytes, stream>>>(
        (const T *)b->q, (const T *)b->k, (const T *)b->v, (T *)b->o, b->lse, b->cu_seqlens_q,
        b->cu_seqlens_k, p->B, p->H, p->Lq, p->Lk, p->scale, p->causal, tp);
}

/* The registry admits only D = 64 or 128 and fp16/bf16 (fa2_mma's requirements, example 03). */
template <typename Tiles>
static void launch_sparse(const attn_problem *p, const attn_buffers *b,
                          const typename Tiles::params &tp, cudaStream_t stream) {
    attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
        launch_sparse_typed<typename decltype(t)::type, decltype(d)::value, Tiles>(p, b, tp,
                                                                                   stream);
    });
}

/* Version 2 for a pattern whose own kinds Own decides: reads b->sparse->block_mask, which the
 * harness builds in 64 x 64 tiles (ATTN_SPARSE_TILE); a user-built mask must use the same tiles.
 * With b->sparse->pattern NULL (a user's layout) it computes every in-range entry of every listed
 * tile, full or partial, with causality on top (README: "Your own block layout"; the
 * reference's mask is attn_block_mask_as_mask). */
template <class Own>
static void attn_launch_block_sparse(const attn_problem *p, const attn_buffers *b,
                                     cudaStream_t stream) {
    typename block_list_tiles<Own>::params tp;
    tp.mask = *b->sparse->block_mask;
    memset(&tp.pattern, 0, sizeof tp.pattern);
    if (b->sparse->pattern != NULL)
        tp.pattern = *b->sparse->pattern;
    launch_sparse<block_list_tiles<Own>>(p, b, tp, stream);
}

#endif /* ATTN_SPARSE_FA2_CUH */
