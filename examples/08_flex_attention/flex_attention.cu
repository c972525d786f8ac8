/* flex_attention.cu — Example 08: FlexAttention in CUDA C. One FA2 kernel, specialised at compile
 * time on a modification: a mask_mod (which keys a query may see) and a score_mod (what happens
 * to a score before the softmax), written once as functors (flex_mods.cuh) that the CPU reference
 * calls too; and the block mask derived from the mask_mod on the device, so that the kernel skips
 * EMPTY tiles, computes FULL tiles without evaluating the mask and evaluates it per element only
 * in PARTIAL tiles.
 *
 *     O = softmax(mask(score_mod(scale * Q K^T))) V     per (batch, head); --mod SPEC picks it
 *
 * Versions (each one line of intent; run with the command under it):
 *   1 dense_fa2           example 03's fa2_mma unchanged: the plain kernel every figure compares
 *                         with (dense, it ignores --mod; checked against the dense reference)
 *     ./build/sim/examples/08_flex_attention/flex_attention_sim --kernel 1
 *   2 flex                fa2_mma specialised on the modification: the key tiles of the block
 *                         mask's lists, the mask_mod in PARTIAL tiles only, the score_mod on
 *                         every score
 *     ./build/sim/examples/08_flex_attention/flex_attention_sim --kernel 2 --mod document
 *   3 flex_no_block_mask  version 2 with every tile listed PARTIAL: the mask_mod on every entry,
 *                         EMPTY tiles computed too (what a mask_mod costs without a block mask)
 *     ./build/sim/examples/08_flex_attention/flex_attention_sim --kernel 3 -L 300
 *   4 flex_rope           version 2 with rotary position embeddings fused: reads Q and K before
 *                         rotation and rotates each tile in shared memory on load (needs --rope)
 *     ./build/sim/examples/08_flex_attention/flex_attention_sim --kernel 4 --mod alibi --rope
 * (On a GPU build use build/gpu/.../flex_attention_gpu.) Versions 2-4: fp16/bf16 inputs, fp32
 * accumulation, D = 64 or 128, any L (tail tiles), Lq != Lk (queries aligned bottom-right), the
 * log-sum-exp written; a row that sees no key outputs 0 and LSE -inf. Dense [B, H, L, D] layout
 * only: packed sequences are document masking's job here. With --rope, versions 1-3 read Q and K
 * rotated beforehand (RoPE applied first), version 4 rotates them itself; all four are checked
 * against the reference on the rotated inputs.
 *
 * Sections: CPU reference | kernels | launchers | registry. The modifications: flex_mods.cuh; the
 * flags, inputs and report: flex_module.c (flex_spec.c, flex_reference.c); main() is in main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <type_traits>

#include "../03_flash_attention_v2/fa2_tile.cuh"
#include "attn/example.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/sparse/block_mask.h"
#include "device/dispatch.cuh"
#include "device/kernel_common.cuh"
#include "device/mma.cuh"
#include "flex_attention.h"
#include "flex_mods.cuh"

/* The compiled modifications: one functor type per --mod kind (flex_attention.h's table). */
typedef flex_mod<flex_causal, flex_identity> mod_causal;
typedef flex_mod<flex_and<flex_causal, flex_window>, flex_identity> mod_sliding_window;
typedef flex_mod<flex_or<flex_causal, flex_prefix>, flex_identity> mod_prefix_lm;
typedef flex_mod<flex_and<flex_causal, flex_document>, flex_identity> mod_document;
typedef flex_mod<flex_causal, flex_alibi> mod_alibi;
typedef flex_mod<flex_causal, flex_softcap> mod_softcap;
typedef flex_mod<flex_all, flex_rel_bias> mod_rel_bias;

/* The one switch on the kind: at launch (or when the reference is set up), never per element.
 * Builds the setting's functors and calls fn with them; fn is generic in the modification type,
 * so each case instantiates what fn does (a kernel launch) for that type. */
template <class Fn> static void flex_dispatch(const flex_setting &s, Fn &&fn) {
    const int off = s.Lk - s.Lq; /* query i sits at position i + off */
    const flex_causal causal = {off};
    switch (s.spec.kind) {
    case FLEX_CAUSAL:
        fn(mod_causal{causal, {}});
        break;
    case FLEX_SLIDING_WINDOW:
        fn(mod_sliding_window{{causal, {off, s.spec.w}}, {}});
        break;
    case FLEX_PREFIX_LM:
        fn(mod_prefix_lm{{causal, {s.spec.p}}, {}});
        break;
    case FLEX_DOCUMENT:
        fn(mod_document{{causal, {s.doc, off}}, {}});
        break;
    case FLEX_ALIBI:
        fn(mod_alibi{causal, {s.slopes, off}});
        break;
    case FLEX_SOFTCAP:
        fn(mod_softcap{causal, {s.spec.cap, 1.0f / s.spec.cap}});
        break;
    case FLEX_REL_BIAS:
        fn(mod_rel_bias{{}, {s.table, off, s.spec.r}});
        break;
    case FLEX_KINDS:
        break;
    }
}

template <class Score> struct flex_is_identity : std::is_same<Score, flex_identity> {};
template <class Mask> struct flex_is_all : std::is_same<Mask, flex_all> {};

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c), in double precision, with
 * the modification as its mask: keep() is the mask_mod, score() the score_mod, the very functors
 * the kernels inline (called here with F = double), except where a functor holds arithmetic
 * a test could not otherwise tell wrong: ALiBi's score_mod and slopes, and RoPE's rotation of the
 * inputs, are the reference's own (flex_reference.c, written from the published definitions).
 * Causality is part of the mask_mod, so the
 * problem itself is not causal. fp16/bf16 are judged by FlashAttention's 2x rule against
 * attn_reference_lowp under the same mask (attn/check.h). */

/* The reference's callbacks for modification type Mod, stored in ctx (a flex_host_mod). */
template <class Mod> static Mod host_mod_of(const void *ctx) {
    Mod m;
    memcpy(&m, ctx, sizeof m);
    return m;
}
template <class Mod> static int host_keep(const void *ctx, int b, int h, int i, int j) {
    return host_mod_of<Mod>(ctx).mask(b, h, i, j);
}
template <class Mod>
static double host_score(const void *ctx, int b, int h, int i, int j, double s) {
    return host_mod_of<Mod>(ctx).score(s, b, h, i, j);
}

extern "C" attn_mask flex_reference_mask(const flex_setting *s, flex_host_mod *store) {
    attn_mask m;
    memset(&m, 0, sizeof m);
    flex_dispatch(*s, [&](auto mod) {
        using Mod = decltype(mod);
        static_assert(sizeof(Mod) <= sizeof(flex_host_mod), "flex_host_mod is too small");
        memcpy(store, &mod, sizeof mod);
        if (!flex_is_all<decltype(mod.mask)>::value) {
            m.kind = ATTN_MASK_PREDICATE;
            m.keep = host_keep<Mod>;
            m.ctx = store;
        }
        if (!flex_is_identity<decltype(mod.score)>::value) {
            m.score = host_score<Mod>;
            m.score_ctx = store;
        }
    });
    return m;
}

extern "C" void flex_alibi_slopes(int H, float *slopes) {
    for (int h = 0; h < H; ++h)
        slopes[h] = (float)flex_alibi_slope<double>(h, H);
}

/* ================================== kernels =============================================== */

#define BR FLEX_TILE   /* query rows per block: the block mask's tile height */
#define BC ATTN_FA2_BC /* keys per K/V tile (64): the block mask's tile width */
#define WARPS 4        /* warp w owns query rows 16w .. 16w+15 of the tile */
#define WARP_ROWS ATTN_FA2_WARP_ROWS
static_assert(BR == BC && BC == FLEX_TILE && BR == ATTN_FA2_BR,
              "one tile size for the kernel (fa2_tile.cuh's) and its block mask");

/* --- the block mask: FlexAttention's create_block_mask --------------------------------------
 *
 *   flex_count_kernel   grid (ceil(nk/4), nq, B), 4 warps: warp w counts the visible entries of
 *                       key tile kb = 4 blockIdx.x + w of query tile qb = blockIdx.y, every
 *                       in-range entry evaluated by the mask_mod once (lanes on consecutive keys)
 *   flex_lists_kernel   one thread per (sequence, query tile): walks its key tiles in order and
 *                       lists each by its count
 *
 *     count of tile (qb, kb)          class      list
 *     0                               EMPTY      none: never loaded
 *     rows(qb) x cols(kb)             FULL       full_kv_indices    (no mask work)
 *     anything between                PARTIAL    kv_indices         (mask_mod per element)
 *
 * rows/cols: the in-range part of a tail tile. The mask does not depend on the head (H=None in
 * FlexAttention's terms): it is evaluated at h = 0 and one mask serves every head. */
template <class Mask>
__global__ void flex_count_kernel(int32_t *__restrict__ counts, // [B][nq][nk]
                                  int Lq, int Lk, int nq, int nk, const Mask mask) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int kb = blockIdx.x * WARPS + warp, qb = blockIdx.y, b = blockIdx.z;
    if (kb >= nk) /* the whole warp: no barrier below */
        return;
    const int q0 = qb * BR, j0 = kb * BC;
    const int rows = min(BR, Lq - q0), cols = min(BC, Lk - j0);
    int n = 0;
    for (int r = 0; r < rows; ++r)
        for (int c = lane; c < cols; c += 32)
            n += mask(b, 0, q0 + r, j0 + c) ? 1 : 0;
    for (int offset = 16; offset > 0; offset >>= 1)
        n += __shfl_xor_sync(0xffffffffu, n, offset);
    if (lane == 0)
        counts[((int64_t)b * nq + qb) * nk + kb] = n;
}

__global__ void flex_lists_kernel(const int32_t *__restrict__ counts, // [B][nq][nk]
                                  int B, int Lq, int Lk, const attn_block_mask m) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x; /* b * nq + qb */
    const int nq = m.num_q_blocks, nk = m.num_k_blocks;
    if (row >= B * nq)
        return;
    const int rows = min(BR, Lq - (row % nq) * BR);
    int n_full = 0, n_part = 0;
    for (int kb = 0; kb < nk; ++kb) {
        const int n = counts[(int64_t)row * nk + kb], cols = min(BC, Lk - kb * BC);
        if (n == rows * cols)
            m.full_kv_indices[(int64_t)row * nk + n_full++] = kb;
        else if (n > 0)
            m.kv_indices[(int64_t)row * nk + n_part++] = kb;
    }
    m.full_kv_num_blocks[row] = n_full;
    m.kv_num_blocks[row] = n_part;
}

/* --- versions 2-4: the specialised FA2 kernel -------------------------------------------------
 *
 * Example 03's fa2_mma (walkthrough there) over the key tiles of its query tile's block mask row,
 * as example 04's block_sparse, with the modification compiled in where the scores are made:
 *
 *   per listed key tile j (64 keys), warp w (16 query rows):
 *     S = Q_w K_j^T                         8 n-tiles x D/16 k-steps of mma_m16n8k16
 *     S = modified(S), in log2 units        the only step that knows the modification:
 *         FULL tile     s = score_mod(scale * s) * log2 e          (plain: s * scale * log2 e)
 *         FULL, tail    the same, and -inf for keys past Lk
 *         PARTIAL       the same, and -inf where !mask_mod(b, h, q_idx, kv_idx)
 *     online softmax, O += P V_j            as fa2_mma
 *
 *   a query tile's row of the block mask         what the block does per key tile
 *     full:    [0, 1, 2]                          no mask work at all (the plain kernel's code
 *     partial: [3]                                path, plus the score_mod where there is one)
 *     tiles 4, 5, ...: EMPTY, never loaded        mask_mod on each of its 64 x 64 entries
 *
 * The score_mod sees the scaled score in natural units (FlexAttention's convention) and its
 * result is turned into log2 units for exp2; the identity score_mod keeps the plain kernel's
 * single multiplication by scale * log2 e. The branch between the three tile kinds is taken once
 * per tile and is the same for the whole block; inside a tile every element runs the same
 * straight-line code.
 *
 * Registers of warp w are fa2_mma's (qf, s, of, m, l: fa2_tile.cuh's header), plus the row
 * indices the functors get and two counters of mask_mod calls (written out on a counting launch).
 *
 *   grid  = (ceil(Lq/64), min(B*H, 65535)); blockIdx.y strides over the heads (b = bh / H)
 *   block = 128 threads = 4 warps; shared q_s, k_s, v_s [64][D + 8] as in fa2_mma */

/* The steps of a tile that do not depend on the modification, as functions of (T, D): on the GPU
 * inlined like every step; on the simulator compiled once per (T, D) and called, so that the
 * seven modifications cost seven small kernels to build, not seven copies of the tile math. */
#ifdef __CUDACC__
#define FLEX_STEP __device__ __forceinline__
#else
#define FLEX_STEP __device__ __attribute__((noinline))
#endif

/* RoPE on a 64-row tile in shared memory, in place: row r is at position pos0 + r. Thread x
 * turns the pairs (c, c + D/2) with c = x % (D/2) of rows x / (D/2), x / (D/2) + 128 / (D/2), ...
 * (D/2 divides the 128 threads, so each thread needs one frequency). The rotated values are
 * rounded to T, as a rotated tensor in memory would hold them. */
template <typename T, int D>
FLEX_STEP void flex_rope_tile(T *tile, // [64][D + 8] shared
                              int pos0, const float *__restrict__ inv_freq) {
    using Lay = attn_padded_layout<D>;
    static_assert((WARPS * 32) % (D / 2) == 0, "each thread keeps one frequency");
    const int c = threadIdx.x % (D / 2);
    const float f = inv_freq[c];
    for (int r = threadIdx.x / (D / 2); r < BR; r += WARPS * 32 / (D / 2)) {
        T *row = tile + Lay::at(r, 0);
        float y1, y2;
        flex_rope_pair<float>(float(row[c]), float(row[c + D / 2]), pos0 + r, f, &y1, &y2);
        row[c] = T(y1); /* the 16-bit types' conversions round to nearest */
        row[c + D / 2] = T(y2);
    }
}

/* Q tile of query tile q0 into q_s (rotated when rope.on, at positions q_pos0 + r), then this
 * warp's A fragments. */
template <typename T, int D>
FLEX_STEP void flex_load_q(uint32_t (&qf)[D / 16][4], T *q_s, const T *q_tile, int64_t ld,
                           int valid, const flex_rope &rope, int q_pos0) {
    using Lay = attn_padded_layout<D>;
    attn_load_tile_async<T, D, BR, Lay>(q_s, q_tile, ld, valid);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads(); // the Q tile is complete before it is rotated or read with ldmatrix
    if (rope.on) {
        flex_rope_tile<T, D>(q_s, q_pos0, rope.inv_freq);
        __syncthreads(); // every pair rotated before the warps read rows of other threads
    }
    attn_fa2_load_q_fragments<T, D, Lay>(qf, q_s);
    __syncthreads(); // every warp holds its Q fragments before q_s can be reused (next head)
}

template <typename T, int D>
FLEX_STEP void flex_scores(float (&s)[BC / 8][4], const uint32_t (&qf)[D / 16][4], const T *k_s) {
    attn_fa2_score_tile<T, D, attn_padded_layout<D>>(s, qf, k_s);
}

template <int D>
FLEX_STEP void flex_softmax(float (&s)[BC / 8][4], float (&of)[D / 8][4], float (&m)[2],
                            float (&l)[2]) {
    attn_fa2_online_softmax<D>(s, of, m, l);
}

template <typename T, int D>
FLEX_STEP void flex_pv(float (&of)[D / 8][4], const float (&s)[BC / 8][4], const T *v_s) {
    attn_fa2_accumulate_pv<T, D, attn_padded_layout<D>>(of, s, v_s);
}

template <typename T, int D>
FLEX_STEP void flex_finish(T *o, float *lse, attn_fa2_warp<D> &w, int row0,
                           const attn_seq_head &sh) {
    attn_fa2_write_o<T, D>(o, lse, w, row0, sh);
}

/* The modification on this warp's S tile (16 rows x 64 keys, C layout: element (nt, x) is row
 * rows[x >> 1], key j0 + 8 nt + 2t + (x & 1)): scaled, score_mod'ed, in log2 units, and -inf
 * where BOUNDS finds a key past Lk or MASK finds !mask_mod. Every element runs the same
 * straight-line code: the functors are evaluated on every entry of the tile (FlexAttention's
 * order: score_mod, then the mask), a key past Lk asking about key Lk - 1 (its result is dropped
 * by the bound), so that loads a functor makes for a whole head (ALiBi's slope) are made once,
 * not once per visible entry. Returns the mask_mod calls made. */
template <bool MASK, bool BOUNDS, class Mod>
__device__ __forceinline__ unsigned flex_modify(float (&s)[BC / 8][4], const Mod &mod, int b, int h,
                                                const int (&rows)[2], int j0, int Lk, float scale,
                                                float scale2) {
    const int t = threadIdx.x % 4;
    unsigned calls = 0;
    for (int nt = 0; nt < BC / 8; ++nt)
        for (int x = 0; x < 4; ++x) {
            const int key = j0 + nt * 8 + 2 * t + (x & 1), i = rows[x >> 1];
            const int kv = BOUNDS ? min(key, Lk - 1) : key; /* a key that exists */
            bool keep = !BOUNDS || key < Lk;
            if (MASK) {
                ++calls;
                keep = mod.mask(b, h, i, kv) && keep;
            }
            float sc;
            if constexpr (flex_is_identity<decltype(mod.score)>::value)
                sc = s[nt][x] * scale2;
            else
                sc = mod.score(s[nt][x] * scale, b, h, i, kv) * CUDART_L2E_F;
            s[nt][x] = keep ? sc : -INFINITY;
        }
    return calls;
}

template <typename T, int D, class Mod>
__global__ void flex_fa2_kernel(const T *__restrict__ q, // [B,H,Lq,D] (rope: before rotation)
                                const T *__restrict__ k, // [B,H,Lk,D] (rope: before rotation)
                                const T *__restrict__ v, // [B,H,Lk,D]
                                T *__restrict__ o,       // [B,H,Lq,D]
                                float *__restrict__ lse, // [B,H,Lq] or NULL
                                int H, int BH, int Lq, int Lk, float scale,
                                const attn_block_mask blocks, // device arrays, 64 x 64 tiles
                                const Mod mod, const flex_rope rope,
                                unsigned long long *counters) { // [4] or NULL (not counting)
    using Lay = attn_padded_layout<D>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const attn_fa2_block<T, Lay> blk(smem_raw, scale); /* q_s, k_s, v_s [64][LD]; q0, row0 */
    const int g = threadIdx.x % 32 / 4;
    /* the functors' query indices: rows past Lq (discarded at the end) ask about row Lq - 1, so
     * that a functor only ever sees positions that exist */
    const int rows[2] = {min(blk.row0 + g, Lq - 1), min(blk.row0 + g + 8, Lq - 1)};

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const int b = bh / H, h = bh % H;
        const attn_seq_head sh = attn_seq_head_at(bh, BH, H, D, Lq, Lk, NULL, NULL);
        attn_fa2_warp<D> w; /* qf, of, m, l */
        flex_load_q<T, D>(w.qf, blk.q_s, q + sh.q + blk.q0 * sh.ld, sh.ld, Lq - blk.q0, rope,
                          rope.offset + blk.q0 + Lk - Lq);
        unsigned calls_full = 0, calls_partial = 0;

        const int64_t row = (int64_t)b * blocks.num_q_blocks + blockIdx.x;
        const int n_full = blocks.full_kv_num_blocks[row], n_part = blocks.kv_num_blocks[row];
        const int32_t *full = blocks.full_kv_indices + row * blocks.num_k_blocks;
        const int32_t *part = blocks.kv_indices + row * blocks.num_k_blocks;
        for (int t = 0; t < n_full + n_part; ++t) {
            const bool partial = t >= n_full;
            const int j0 = (partial ? part[t - n_full] : full[t]) * BC;
            attn_fa2_copy_kv<T, D, Lay>(blk, k + sh.k, v + sh.k, sh.ld, Lk, j0);
            if (rope.on) {
                flex_rope_tile<T, D>(blk.k_s, rope.offset + j0, rope.inv_freq);
                __syncthreads(); // K_j rotated before the warps read rows rotated by others
            }

            /* attn_fa2_tile's four steps, the modification in place of its scale and mask */
            float s[BC / 8][4];
            flex_scores<T, D>(s, w.qf, blk.k_s);
            if (partial)
                calls_partial +=
                    flex_modify<true, true>(s, mod, b, h, rows, j0, Lk, scale, blk.scale2);
            else if (j0 + BC > Lk) /* a FULL tile at the end of the keys: only the bound */
                calls_full +=
                    flex_modify<false, true>(s, mod, b, h, rows, j0, Lk, scale, blk.scale2);
            else
                calls_full +=
                    flex_modify<false, false>(s, mod, b, h, rows, j0, Lk, scale, blk.scale2);
            flex_softmax<D>(s, w.of, w.m, w.l);

            cp_async_wait<0>();
            __syncthreads(); // every thread's V_j copies done before any warp reads V_j
            flex_pv<T, D>(w.of, s, blk.v_s);
            __syncthreads(); // all warps done with K_j and V_j before the next tile's copies
        }

        /* Deferred normalisation; a row that saw no key has l = 0 and outputs 0, LSE -inf. */
        flex_finish<T, D>(o, lse, w, blk.row0, sh);
        if (counters != NULL) { /* a counting launch (flex_args.count_kernel) */
            if (threadIdx.x == 0) {
                atomicAdd(&counters[0], (unsigned long long)n_full);
                atomicAdd(&counters[1], (unsigned long long)n_part);
            }
            atomicAdd(&counters[2], (unsigned long long)calls_full);
            atomicAdd(&counters[3], (unsigned long long)calls_partial);
        }
    }
}

/* ================================= launchers ============================================== */

/* The block mask: the count kernel for the setting's mask type, then the lists. */
extern "C" int flex_create_block_mask(const flex_setting *s, int B, attn_block_mask *m,
                                      int32_t *counts) {
    const int nq = m->num_q_blocks, nk = m->num_k_blocks;
    flex_dispatch(*s, [&](auto mod) {
        dim3 grid((nk + WARPS - 1) / WARPS, nq, B);
        using Mask = decltype(mod.mask);
        flex_count_kernel<Mask><<<grid, WARPS * 32>>>(counts, s->Lq, s->Lk, nq, nk, mod.mask);
    });
    const int rows = B * nq;
    flex_lists_kernel<<<(rows + 127) / 128, 128>>>(counts, B, s->Lq, s->Lk, *m);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "error: the block mask kernels failed: %s\n", cudaGetErrorString(err));
        return 1;
    }
    return 0;
}

/* Versions 2-4: one block of WARPS warps, shared q_s, k_s, v_s [64][D + ATTN_SMEM_PAD]. */
static attn_launch_shape flex_shape(const attn_problem *p) {
    return {"flex_fa2_kernel", WARPS * 32,
            (size_t)(BR + 2 * BC) * (p->D + ATTN_SMEM_PAD) * attn_dtype_size(p->dtype)};
}

template <typename T, int D, class Mod>
static void launch_typed(const attn_problem *p, const attn_buffers *b, const void *q, const void *k,
                         const attn_block_mask &blocks, const Mod &mod, const flex_rope &rope,
                         unsigned long long *counters) {
    static_assert(attn_padded_layout<D>::LD == D + ATTN_SMEM_PAD, "flex_shape's rows");
    const attn_launch_shape shape = flex_shape(p);
    cudaFuncSetAttribute(flex_fa2_kernel<T, D, Mod>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)shape.smem_bytes);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(p->B * p->H));
    flex_fa2_kernel<T, D, Mod><<<grid, shape.threads, shape.smem_bytes>>>(
        (const T *)q, (const T *)k, (const T *)b->v, (T *)b->o, b->lse, p->H, p->B * p->H, p->Lq,
        p->Lk, p->scale, blocks, mod, rope, counters);
}

/* Versions 2-4 differ in their arguments only: which block mask, whether RoPE is applied on load
 * (and then to the inputs before rotation). The registry admits D = 64 or 128, fp16/bf16. */
static void launch_flex(const attn_problem *p, const attn_buffers *b, int id, bool all_partial,
                        bool rope_on) {
    flex_args *a = (flex_args *)b->args;
    flex_rope rope = a->rope;
    rope.on = rope_on;
    const void *q = rope_on ? a->q_raw : b->q, *k = rope_on ? a->k_raw : b->k;
    const attn_block_mask &blocks = all_partial ? a->partial : a->blocks;
    unsigned long long *counters = NULL;
    if (a->count_kernel == id) { /* this launch is counted (the checked one), no later one */
        counters = a->counters + 4 * (id - 1);
        a->count_kernel = 0;
    }
    flex_dispatch(a->dev, [&](auto mod) {
        attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
            launch_typed<typename decltype(t)::type, decltype(d)::value, decltype(mod)>(
                p, b, q, k, blocks, mod, rope, counters);
        });
    });
}

static void launch_flex_blocks(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)s;
    launch_flex(p, b, 2, false, false);
}
static void launch_flex_no_block_mask(const attn_problem *p, const attn_buffers *b,
                                      cudaStream_t s) {
    (void)s;
    launch_flex(p, b, 3, true, false);
}
static void launch_flex_rope(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)s;
    launch_flex(p, b, 4, false, true);
}

/* ================================= registry =============================================== */

/* Version 1 is example 03's version 2, by its symbol (examples/03_flash_attention_v2/flash2_fwd.cu;
 * this example's library links example 03's). */
extern "C" const attn_kernel flash2_fa2_mma;

/* fp16/bf16, D = 64 or 128, dense layout (document masking packs sequences instead of varlen);
 * no causal flag: causality is a mask_mod of --mod */
static const attn_requirements flex_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64};

static const attn_kernel flex_kernels[FLEX_KERNELS] = {
    {ATTN_VERSION(1, "dense_fa2", "baseline: example 03's fa2_mma, dense, no modification"),
     .launch = flash2_fa2_mma.launch, .req = flex_requirements, .serves = ATTN_SERVES_BASELINE,
     .launch_shape = flash2_fa2_mma.launch_shape},
    {ATTN_VERSION(2, "flex",
                  "fa2_mma specialised on --mod: block-mask tiles, mask_mod only in PARTIAL tiles"),
     .launch = launch_flex_blocks, .req = flex_requirements, .launch_shape = flex_shape},
    {ATTN_VERSION(3, "flex_no_block_mask",
                  "version 2 with every tile PARTIAL: mask_mod on every entry"),
     .launch = launch_flex_no_block_mask, .req = flex_requirements, .launch_shape = flex_shape},
    {ATTN_VERSION(4, "flex_rope",
                  "version 2 with RoPE fused: Q and K rotated in shared memory on load (--rope)"),
     .launch = launch_flex_rope, .req = flex_requirements, .launch_shape = flex_shape},
};

extern "C" const attn_module flex_module; /* flex_module.c */

extern "C" const attn_example flex_attention_example = {
    .name = "08_flex_attention",
    .summary = "FlexAttention in CUDA C: score_mod and mask_mod compiled into FA2, block masks "
               "from mask_mod",
    ATTN_KERNELS(flex_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {4, 16, 4096, 64}, .sim = {1, 4, 256, 64}},
    .module = &flex_module,
};
