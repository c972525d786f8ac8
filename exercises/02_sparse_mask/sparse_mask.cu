/* sparse_mask.cu — Exercise 02: design a sparse attention pattern for long documents, build its
 * block mask, and write the block-sparse FlashAttention kernel that skips the tiles it leaves out.
 *
 *     O = softmax(scale * Q K^T + M) V,   M[i][j] = 0 if key j is visible to query i, else -inf
 *
 * YOUR TASK (exercises/02_sparse_mask/README.md explains each step, with budgets):
 *   STEP 1  the pattern: keep_entry (with constants of your own)
 *   STEP 2  its block mask: sparse_mask_build_block_mask
 *   STEP 3  the kernel's tile loop: visit only the listed tiles (3a-3d in sparse_mask_kernel),
 *           then delete the "not implemented" lines in launch_sparse_mask
 *   STEP 4  look at your pattern: build/sim/exercises/02_sparse_mask/sparse_mask_show_sim
 * Run the public tests with
 *     exercises/02_sparse_mask/test.sh
 * Keep every other function static and the exported names of sparse_mask.h: the grader links
 * this file with the solution's.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 sparse_mask  one block per (32 query rows, head) visits only the 32-key tiles its block
 *                  mask lists: full tiles with no per-entry test, partial tiles through the
 *                  pattern. exercises/02_sparse_mask/test.sh
 * It must support fp32, any L (tail tiles, L < 32, L = 1), Lq != Lk, D <= 128, causal
 * (bottom-right aligned; a row that sees no key gets O = 0 and LSE = -inf), B > 1.
 *
 * Sections: CPU reference | pattern | block mask | kernels | launchers | registry.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attn/exercise.h"
#include "device/kernel_common.cuh"
#include "sparse_mask.h"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c) with sparse_mask_keep as
 * its predicate mask, in double precision. */

/* ================================= pattern ================================================ */

/* STEP 1 (TODO, about 6 lines): your pattern. The use case (README, "The spec"): long documents,
 * causal. Every query must keep its diagonal key, reach every earlier key in at most two hops
 * (i -> t -> j with keep(i, t) and keep(t, j)), and at L = 4096 see at most 10 % of the causal
 * entries and touch at most 40 % of the causal 32x32 tiles. Return 1 if query i may see key j,
 * else 0; i' = i + Lk - Lq is query i's position on the key axis (causality, applied on top by
 * the problem, is j <= i'). Callable from the host (reference, builder) and the device (kernel). */
static __host__ __device__ int keep_entry(int Lq, int Lk, int i, int j) {
    (void)Lq, (void)Lk, (void)i, (void)j;
    return SPARSE_MASK_NOT_IMPLEMENTED; /* replace */
}

extern "C" int sparse_mask_keep(int Lq, int Lk, int i, int j) { return keep_entry(Lq, Lk, i, j); }

/* ================================ block mask ============================================== */

/* STEP 2 (TODO, about 55 lines): the block mask of your pattern for problem p.
 * attn_block_mask_alloc(m, p->B, p->Lq, p->Lk, block_q, block_k) makes empty lists; then for
 * every query block qb (rows qb*block_q .. min((qb+1)*block_q, Lq) - 1) and key block kb (keys
 * kb*block_k .. min((kb+1)*block_k, Lk) - 1) decide from the pattern's structure whether ALL
 * in-range entries are visible (append kb to full_kv_indices, count in full_kv_num_blocks), SOME
 * are (kv_indices / kv_num_blocks), or none (skip). "Visible" includes causality when p->causal.
 * Lists are per slice b < p->B, ascending; row (b, qb) starts at (b * num_q_blocks + qb) *
 * num_k_blocks in the index arrays. Must be exact for ANY block_q, block_k, Lq, Lk. Do not call
 * attn_block_mask_from_mask (the grader's O(Lq*Lk) oracle): reason per tile or per column. */
extern "C" int sparse_mask_build_block_mask(attn_block_mask *m, const attn_problem *p, int block_q,
                                            int block_k) {
    (void)m, (void)p, (void)block_q, (void)block_k;
    fprintf(stderr, "sparse_mask_build_block_mask: TODO not implemented (README step 2)\n");
    return SPARSE_MASK_NOT_IMPLEMENTED;
}

/* ================================== kernels =============================================== */

#define BR SPARSE_MASK_BLOCK_Q /* Br: query rows per block = threads per block */
#define BC SPARSE_MASK_BLOCK_K /* Bc: keys per K_j / V_j tile */

/* One block computes rows i0 .. i0+Br-1 of O for one (batch, head) bh, visiting only the key
 * tiles that query block qb's lists name (F full, P partial, blank skipped, never loaded):
 *
 *             key tiles kb:  0   1   2   3   4   5   6   7
 *                          +---+---+---+---+---+---+---+---+
 *   query block qb  Q_i -> | P |   |   | P |   | P | F | P |   full_kv_indices  = {6}
 *   (Br rows, thread r     +---+---+---+---+---+---+---+---+   kv_indices       = {0, 3, 5, 7}
 *    owns row i0 + r)      (an example: which tiles are F or P is up to your pattern)
 *
 *   for each listed tile: load K_j, V_j (all threads) -> S_ij = scale * Q_i K_j^T (thread r: its
 *   row) -> mask: full tile only j < Lk; partial tile also causality and keep(i, j) -> online
 *   softmax update of m_i, l_i, O_i (registers / own row of o_i).
 *   grid  = (ceil(Lq/Br), min(B*H, 65535)); blockIdx.y strides over the heads
 *   shared memory, rows of D+1 floats (no bank conflicts): q_i [Br], k_j [Bc], v_j [Bc], o_i [Br]
 */
static __global__ void sparse_mask_kernel(const float *__restrict__ q, // [B,H,Lq,D] row-major
                                          const float *__restrict__ k, // [B,H,Lk,D] row-major
                                          const float *__restrict__ v, // [B,H,Lk,D] row-major
                                          float *__restrict__ o,       // [B,H,Lq,D] row-major
                                          float *__restrict__ lse,     // [B,H,Lq] or NULL
                                          const int32_t *__restrict__ full_num, // [B][NQ]
                                          const int32_t *__restrict__ full_idx, // [B][NQ][NK]
                                          const int32_t *__restrict__ part_num, // [B][NQ]
                                          const int32_t *__restrict__ part_idx, // [B][NQ][NK]
                                          int NQ, int NK, int BH, int H, int Lq, int Lk, int D,
                                          float scale, bool causal) {
    extern __shared__ float smem[];
    const int ld = D + 1;
    float *q_i = smem;
    float *k_j = q_i + BR * ld;
    float *v_j = k_j + BC * ld;
    float *o_i = v_j + BC * ld;
    const int r = threadIdx.x;
    const int qb = blockIdx.x;
    const int i0 = qb * BR;
    const int i = i0 + r;
    const int n_i = i < Lq ? attn_visible_keys(i, Lq, Lk, causal) : 0; /* causal keys of row i */
    float *o_row = o_i + r * ld;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const float *qh = q + (int64_t)bh * Lq * D;
        const float *kh = k + (int64_t)bh * Lk * D;
        const float *vh = v + (int64_t)bh * Lk * D;
        const int64_t row = (int64_t)(bh / H) * NQ + qb; /* this block's lists, slice b */
        for (int e = r; e < BR * D; e += BR) {
            int rr = e / D, d = e % D;
            q_i[rr * ld + d] = i0 + rr < Lq ? qh[(int64_t)(i0 + rr) * D + d] : 0.0f;
        }
        for (int d = 0; d < D; ++d)
            o_row[d] = 0.0f;
        float m = -INFINITY, l = 0.0f;

        /* Unused until your steps use them (delete this line then): */
        (void)kh, (void)vh, (void)row, (void)full_num, (void)full_idx, (void)part_num,
            (void)part_idx, (void)NK, (void)n_i;

        /* STEP 3a (TODO, about 4 lines): loop over the listed tiles of this block's row of the
         * block mask: full_num[row] full tiles full_idx[row * NK + 0 ..], then part_num[row]
         * partial tiles part_idx[row * NK + 0 ..]. For each: kb, j0 = kb * BC, and whether it is
         * partial. (The softmax below does not care about the order of the tiles.) */
        for (int t = 0; t < 0; ++t) {
            const bool partial = false; /* replace */
            const int j0 = 0;           /* replace */

            /* STEP 3b (TODO, about 8 lines): load keys j0 .. j0+BC-1 of K and V into k_j and
             * v_j (key c, element d at [c * ld + d]); all BR threads share the BC * D elements;
             * keys past Lk (the tail tile) are 0 and never read from kh/vh. Then make sure the
             * whole tile (and, the first time, Q_i) is written before anyone reads it. */

            float s[BC];
#pragma unroll
            for (int c = 0; c < BC; ++c)
                s[c] = 0.0f;
            for (int d = 0; d < D; ++d) {
                float qd = q_i[r * ld + d];
#pragma unroll
                for (int c = 0; c < BC; ++c)
                    s[c] += qd * k_j[c * ld + d];
            }
            float m_tile = -INFINITY;
#pragma unroll
            for (int c = 0; c < BC; ++c) {
                int j = j0 + c;
                /* STEP 3c (TODO, about 2 lines): is key j visible to row i? In a full tile every
                 * key in range (j < Lk); in a partial tile causality (j < n_i) and your pattern. */
                bool visible = false; /* replace */
                (void)j, (void)partial;
                s[c] = visible ? s[c] * scale : -INFINITY;
                m_tile = fmaxf(m_tile, s[c]);
            }

            /* Online softmax: rescale the old sum and output by alpha = exp(m_old - m_new). */
            float m_new = fmaxf(m, m_tile);
            if (m_new != -INFINITY) {
                float alpha = expf(m - m_new);
                float l_tile = 0.0f;
#pragma unroll
                for (int c = 0; c < BC; ++c) {
                    s[c] = expf(s[c] - m_new);
                    l_tile += s[c];
                }
                l = alpha * l + l_tile;
                for (int d = 0; d < D; ++d) {
                    float acc = alpha * o_row[d];
#pragma unroll
                    for (int c = 0; c < BC; ++c)
                        acc += s[c] * v_j[c * ld + d];
                    o_row[d] = acc;
                }
                m = m_new;
            }
            /* STEP 3d (TODO, 1 line): make sure every thread is done with K_j and V_j before
             * the next tile overwrites them. */
        }

        /* O_i = O~_i / l_i, LSE_i = m_i + log(l_i); a row with no visible key: 0 and -inf.
         * o_row is the thread's own, and the next bh writes q_i only after the tile loop's last
         * barrier (n_tiles is the same for the whole block), so no barrier is needed here. */
        if (i < Lq) {
            float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
            float *out = o + ((int64_t)bh * Lq + i) * D;
            for (int d = 0; d < D; ++d)
                out[d] = o_row[d] * inv_l;
            if (lse != NULL)
                lse[(int64_t)bh * Lq + i] = l > 0.0f ? m + logf(l) : -INFINITY;
        }
    }
}

/* ================================= launchers ============================================== */

/* The block mask comes from the caller (buffers.sparse->block_mask, arrays in device memory), built
 * by sparse_mask_build_block_mask for this problem in BR x BC tiles. */
static void launch_sparse_mask(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    /* TODO (last step): delete the next two lines once steps 1-3 are written. */
    fprintf(stderr, "sparse_mask: TODO not implemented (README step 3)\n");
    return;
    const attn_block_mask *bm = b->sparse != NULL ? b->sparse->block_mask : NULL;
    if (bm == NULL || bm->block_q != BR || bm->block_k != BC || bm->batches != p->B ||
        bm->Lq != p->Lq || bm->Lk != p->Lk) {
        fprintf(stderr,
                "sparse_mask: launch needs the problem's %dx%d block mask in "
                "buffers.sparse->block_mask\n",
                BR, BC);
        return;
    }
    int BH = p->B * p->H;
    size_t smem = (size_t)(2 * BR + 2 * BC) * (p->D + 1) * sizeof(float);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(sparse_mask_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem);
    dim3 grid(bm->num_q_blocks, attn_head_blocks(BH));
    sparse_mask_kernel<<<grid, BR, smem, stream>>>(
        (const float *)b->q, (const float *)b->k, (const float *)b->v, (float *)b->o, b->lse,
        bm->full_kv_num_blocks, bm->full_kv_indices, bm->kv_num_blocks, bm->kv_indices,
        bm->num_q_blocks, bm->num_k_blocks, BH, p->H, p->Lq, p->Lk, p->D, p->scale, p->causal);
}

/* ================================= registry =============================================== */

/* B, H, L, D of a plain run: .gpu on a GPU, .sim on the simulator */
ATTN_EXERCISE(sparse_mask_example, "02_sparse_mask",
              "Exercise 02: a sparse pattern, its block mask and a block-sparse kernel (fp32)",
              ATTN_VERSION(1, "sparse_mask",
                           "block-sparse flash: listed full tiles unmasked, partial tiles masked"),
              launch_sparse_mask, SPARSE_MASK_MAX_D, .gpu = {4, 8, 4096, 64},
              .sim = {1, 2, 512, 64});
