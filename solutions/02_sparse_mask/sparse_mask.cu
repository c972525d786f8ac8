/* sparse_mask.cu — Exercise 02 (solution): a sparse pattern for long documents, its block mask,
 * and the block-sparse FlashAttention kernel that skips every tile the mask leaves out. fp32.
 *
 *     O = softmax(scale * Q K^T + M) V,   M[i][j] = 0 if key j is visible to query i, else -inf
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 sparse_mask  local window of 128 keys + a landmark key every 128 positions; one block per
 *                  (32 query rows, head) visits only the 32-key tiles its block mask lists:
 *                  full tiles with no per-entry test, partial tiles through the predicate.
 *                  exercises/02_sparse_mask/test.sh --solution
 * It supports fp32, any L (tail tiles, L < 32, L = 1), Lq != Lk, D <= 128, causal (bottom-right
 * aligned; a row that sees no key gets O = 0 and LSE = -inf), B > 1 (one mask slice per batch).
 *
 * Sections: CPU reference | pattern | block mask | kernels | launchers | registry. The public
 * tests and the grader (grader/cases/02_sparse_mask_case.c) drive it.
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

/* Long documents: a token needs its neighbourhood (the local window) and a route to everything
 * before it. Every STRIDE-th key is a landmark that all queries see, and a landmark sees the
 * WINDOW keys before it, so any earlier key j is reached in two hops: i -> the first landmark
 * t >= j (t - j < STRIDE <= WINDOW) -> j. Landmarks STRIDE >= 4 tiles apart keep the block
 * density low: each landmark column costs one partial tile per query block.
 *
 *   keep(i, j) = |i' - j| < WINDOW  or  j mod STRIDE == STRIDE - 1,   i' = i + Lk - Lq
 *
 * (i' is query i's position on the key axis, bottom-right aligned like causality.) */
#define WINDOW 128
#define STRIDE 128

static __host__ __device__ bool is_landmark(int j) { return j % STRIDE == STRIDE - 1; }

static __host__ __device__ int keep_entry(int Lq, int Lk, int i, int j) {
    int d = i + Lk - Lq - j;
    return (d > -WINDOW && d < WINDOW) || is_landmark(j);
}

extern "C" int sparse_mask_keep(int Lq, int Lk, int i, int j) { return keep_entry(Lq, Lk, i, j); }

/* ================================ block mask ============================================== */

/* Column j of a tile, over the tile's rows with key-axis positions a0..a1: are all / some of its
 * entries visible? A column's entries differ only in d = a - j, which runs over [a0-j, a1-j];
 * causality keeps d >= 0, the window keeps |d| < WINDOW, a landmark column keeps every d. */
typedef struct column_view {
    bool all, any;
} column_view;

static column_view classify_column(int a0, int a1, int j, bool causal) {
    int lo = a0 - j, hi = a1 - j; /* d over the column */
    if (causal && lo < 0)
        lo = 0;
    column_view c = {false, false};
    if (lo > hi) /* every entry is in the future */
        return c;
    if (is_landmark(j)) {
        c.any = true;
        c.all = !causal || a0 >= j;
        return c;
    }
    c.any = lo < WINDOW && hi > -WINDOW;
    c.all = (!causal || a0 >= j) && a0 - j > -WINDOW && a1 - j < WINDOW;
    return c;
}

/* A tile is full if all its columns are, listed (partial) if any column has a visible entry.
 * O(block_k) per tile, O(Lq*Lk / block_q) in all: no entry-by-entry evaluation. */
extern "C" int sparse_mask_build_block_mask(attn_block_mask *m, const attn_problem *p, int block_q,
                                            int block_k) {
    if (attn_problem_validate(p, NULL, 0) != 0 ||
        attn_block_mask_alloc(m, p->B, p->Lq, p->Lk, block_q, block_k) != 0)
        return -1;
    int nq = m->num_q_blocks, nk = m->num_k_blocks;
    for (int qb = 0; qb < nq; ++qb) {
        int i_last = (qb + 1) * block_q < p->Lq ? (qb + 1) * block_q - 1 : p->Lq - 1;
        int a0 = qb * block_q + p->Lk - p->Lq, a1 = i_last + p->Lk - p->Lq;
        int32_t *full = m->full_kv_indices + (size_t)qb * nk;
        int32_t *part = m->kv_indices + (size_t)qb * nk;
        int n_full = 0, n_part = 0;
        for (int kb = 0; kb < nk; ++kb) {
            int j_end = (kb + 1) * block_k < p->Lk ? (kb + 1) * block_k : p->Lk;
            bool all = true, any = false;
            for (int j = kb * block_k; j < j_end; ++j) {
                column_view c = classify_column(a0, a1, j, p->causal);
                all = all && c.all;
                any = any || c.any;
            }
            if (all)
                full[n_full++] = kb;
            else if (any)
                part[n_part++] = kb;
        }
        m->full_kv_num_blocks[qb] = n_full;
        m->kv_num_blocks[qb] = n_part;
    }
    /* Every sequence has the same length (no varlen): the other slices repeat slice 0. */
    size_t counts = (size_t)nq, lists = (size_t)nq * nk;
    for (int b = 1; b < p->B; ++b) {
        memcpy(m->full_kv_num_blocks + b * counts, m->full_kv_num_blocks, counts * sizeof(int32_t));
        memcpy(m->kv_num_blocks + b * counts, m->kv_num_blocks, counts * sizeof(int32_t));
        memcpy(m->full_kv_indices + b * lists, m->full_kv_indices, lists * sizeof(int32_t));
        memcpy(m->kv_indices + b * lists, m->kv_indices, lists * sizeof(int32_t));
    }
    return 0;
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
 *    owns row i0 + r)        landmark    landmark  window
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
        const int n_full = full_num[row];
        const int n_tiles = n_full + part_num[row];
        for (int e = r; e < BR * D; e += BR) {
            int rr = e / D, d = e % D;
            q_i[rr * ld + d] = i0 + rr < Lq ? qh[(int64_t)(i0 + rr) * D + d] : 0.0f;
        }
        for (int d = 0; d < D; ++d)
            o_row[d] = 0.0f;
        float m = -INFINITY, l = 0.0f;

        for (int t = 0; t < n_tiles; ++t) {
            const bool partial = t >= n_full;
            const int kb = partial ? part_idx[row * NK + (t - n_full)] : full_idx[row * NK + t];
            const int j0 = kb * BC;
            for (int e = r; e < BC * D; e += BR) {
                int c = e / D, d = e % D;
                bool in = j0 + c < Lk;
                k_j[c * ld + d] = in ? kh[(int64_t)(j0 + c) * D + d] : 0.0f;
                v_j[c * ld + d] = in ? vh[(int64_t)(j0 + c) * D + d] : 0.0f;
            }
            __syncthreads(); // K_j, V_j (and, first time, Q_i) fully written before anyone reads

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
            /* Full tile: every in-range entry is visible, only the tail j >= Lk is cut. Partial
             * tile: causality and the pattern, entry by entry. */
            float m_tile = -INFINITY;
#pragma unroll
            for (int c = 0; c < BC; ++c) {
                int j = j0 + c;
                bool visible = partial ? j < n_i && keep_entry(Lq, Lk, i, j) : j < Lk;
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
            __syncthreads(); // all reads of K_j, V_j done before the next tile overwrites them
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
