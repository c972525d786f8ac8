/* naive_attention.cu — Example 01: attention as a learner first meets it, O(L^2) memory.
 *
 *     O = softmax(scale * Q K^T) V        Q: [Lq, D], K, V: [Lk, D], per (batch, head)
 *
 * computed in three separate steps, with the whole score matrix S = scale * Q K^T (and then the
 * probabilities P = softmax(S), written over S) stored in global memory: B*H*Lq*Lk floats.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 naive        one thread per score / per output element, every operand read from global
 *                  memory; the softmax is one warp per row with shuffle reductions.
 *                  ./build/sim/examples/01_attention_basics/naive_attention_sim --kernel 1
 *   2 naive_tiled  the same three steps; both matrix products stage 16x16 tiles in shared memory
 *                  so each element of Q, K, P and V is read from global memory 16x less often.
 *                  ./build/sim/examples/01_attention_basics/naive_attention_sim --kernel 2
 * (On a GPU build use build/gpu/.../naive_attention_gpu.) Both versions support fp32, any L,
 * Lq != Lk, D <= 256, causal (bottom-right aligned: query i sees key j iff j <= i + Lk - Lq).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c: the harness
 * (common/, attn_example_main) parses the flags, makes inputs, checks and times every version.
 *
 * Limits, on purpose: S costs 4*B*H*Lq*Lk bytes (8 GiB at B=4, H=8, L=8192), and the three steps
 * read and write it through global memory; examples 02 and 03 remove it.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "attn/problem.h"
#include "device/kernel_common.cuh"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c): the same formula in
 * double precision, with the same causal and fully-masked-row conventions. */

/* ================================== kernels =============================================== */

#define TILE 16         /* 16x16 thread blocks / tiles for the two matrix products */
#define SOFTMAX_WARPS 4 /* rows (one per warp) handled by a softmax block */

/* Fully masked entries of S hold -inf; a row that is entirely -inf produces P = 0, O = 0. */

/* --- version 1 ------------------------------------------------------------------------------
 * S[bh, i, j] = scale * sum_d Q[bh, i, d] * K[bh, j, d]      one thread per (i, j)
 *
 *        key j ->  blockIdx.x*16 + threadIdx.x
 *      +-----+-----+----
 *  q   | blk | blk |        grid  = (ceil(Lk/16), ceil(Lq/16), min(B*H, 65535))
 *  i   |16x16|     |        block = (16, 16): threadIdx.x -> j, threadIdx.y -> i
 *  |   +-----+-----+----    blockIdx.z strides over the B*H heads
 *  v   |     |     |
 * Every thread reads a full row of Q and of K from global memory: 2*D loads per score. */
__global__ void scores_naive(const float *__restrict__ q, // [B,H,Lq,D] row-major
                             const float *__restrict__ k, // [B,H,Lk,D] row-major
                             float *__restrict__ s,       // [B,H,Lq,Lk] row-major (workspace)
                             int BH, int Lq, int Lk, int D, float scale, bool causal) {
    int j = blockIdx.x * TILE + threadIdx.x;
    int i = blockIdx.y * TILE + threadIdx.y;
    if (i >= Lq || j >= Lk)
        return;
    for (int bh = blockIdx.z; bh < BH; bh += gridDim.z) {
        const float *qi = q + ((int64_t)bh * Lq + i) * D;
        const float *kj = k + ((int64_t)bh * Lk + j) * D;
        float acc = 0.0f;
        for (int d = 0; d < D; ++d)
            acc += qi[d] * kj[d];
        bool visible = j < attn_visible_keys(i, Lq, Lk, causal);
        s[((int64_t)bh * Lq + i) * Lk + j] = visible ? acc * scale : -INFINITY;
    }
}

/* Row softmax, in place: P[bh, i, :] = exp(S - m_i) / l_i, with m_i = max_j S[bh, i, j],
 * l_i = sum_j exp(S[bh, i, j] - m_i) and lse[bh, i] = m_i + log(l_i). Subtracting the row max
 * first keeps exp() <= 1: without it a score of 100 overflows fp32 (exp(89) is already inf).
 *
 *   row i = blockIdx.x*4 + threadIdx.y       block = (32, 4): one warp per row
 *   lane  = threadIdx.x reads S[i, lane], S[i, lane+32], ...  (coalesced)
 *   reductions over the 32 lanes: attn_warp_max/attn_warp_sum (device/kernel_common.cuh), a
 *   __shfl_xor_sync butterfly of 5 steps after which every lane holds the result
 *   grid  = (ceil(Lq/4), min(B*H, 65535)); blockIdx.y strides over the heads */
__global__ void softmax_rows(float *__restrict__ s,   // [B,H,Lq,Lk] scores in, probabilities out
                             float *__restrict__ lse, // [B,H,Lq] or NULL
                             int BH, int Lq, int Lk) {
    int i = blockIdx.x * SOFTMAX_WARPS + threadIdx.y;
    int lane = threadIdx.x;
    /* Whole warps leave together, so the full-mask shuffles below never miss a lane. */
    if (i >= Lq)
        return;
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        float *row = s + ((int64_t)bh * Lq + i) * Lk;
        float m = -INFINITY;
        for (int j = lane; j < Lk; j += 32)
            m = fmaxf(m, row[j]);
        m = attn_warp_max(m);
        /* A fully masked row has m = -inf; exp(-inf - -inf) would be NaN, so use 0 there. */
        float m_safe = (m == -INFINITY) ? 0.0f : m;
        float l = 0.0f;
        for (int j = lane; j < Lk; j += 32)
            l += expf(row[j] - m_safe);
        l = attn_warp_sum(l);
        float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
        for (int j = lane; j < Lk; j += 32)
            row[j] = expf(row[j] - m_safe) * inv_l;
        if (lse != NULL && lane == 0)
            lse[(int64_t)bh * Lq + i] = l > 0.0f ? m + logf(l) : -INFINITY;
    }
}

/* O[bh, i, d] = sum_j P[bh, i, j] * V[bh, j, d]      one thread per (i, d)
 *   block = (16, 16): threadIdx.x -> d (consecutive threads read consecutive V elements),
 *   threadIdx.y -> i; grid = (ceil(D/16), ceil(Lq/16), min(B*H, 65535)).
 * Causal rows still loop over all Lk keys (their P is 0 there): the naive version does the full
 * L^2 work; example 03 skips masked tiles. */
__global__ void pv_naive(const float *__restrict__ p, // [B,H,Lq,Lk] probabilities
                         const float *__restrict__ v, // [B,H,Lk,D] row-major
                         float *__restrict__ o,       // [B,H,Lq,D] row-major
                         int BH, int Lq, int Lk, int D) {
    int d = blockIdx.x * TILE + threadIdx.x;
    int i = blockIdx.y * TILE + threadIdx.y;
    if (i >= Lq || d >= D)
        return;
    for (int bh = blockIdx.z; bh < BH; bh += gridDim.z) {
        const float *pi = p + ((int64_t)bh * Lq + i) * Lk;
        const float *vb = v + (int64_t)bh * Lk * D;
        float acc = 0.0f;
        for (int j = 0; j < Lk; ++j)
            acc += pi[j] * vb[(int64_t)j * D + d];
        o[((int64_t)bh * Lq + i) * D + d] = acc;
    }
}

/* --- version 2 ------------------------------------------------------------------------------
 * A 16x16 block computes a 16x16 tile of C = A B^T (scores) or C = A B (output) by walking the
 * shared dimension in steps of 16, staging one tile of each operand in shared memory:
 *
 *   for each step t:   a_tile[ty][tx] = A[row0+ty, t*16+tx]      (all 256 threads load, coalesced)
 *                      b_tile[ty][tx] = B...                      zeros outside the matrix
 *                      __syncthreads()   -- tiles complete before anyone reads them
 *                      acc += a_tile[ty][:] . b_tile[:][tx]
 *                      __syncthreads()   -- everyone done reading before the next step overwrites
 *
 * Each loaded element serves 16 threads, so global traffic for the products drops 16x. The
 * "+1" column of padding keeps the column reads of b_tile in scores_tiled on 16 different
 * shared-memory banks. */
__global__ void scores_tiled(const float *__restrict__ q, // [B,H,Lq,D] row-major
                             const float *__restrict__ k, // [B,H,Lk,D] row-major
                             float *__restrict__ s,       // [B,H,Lq,Lk] row-major (workspace)
                             int BH, int Lq, int Lk, int D, float scale, bool causal) {
    __shared__ float q_tile[TILE][TILE + 1]; // [i][d]
    __shared__ float k_tile[TILE][TILE + 1]; // [j][d]
    int tx = threadIdx.x, ty = threadIdx.y;
    int i0 = blockIdx.y * TILE, j0 = blockIdx.x * TILE;
    for (int bh = blockIdx.z; bh < BH; bh += gridDim.z) {
        const float *qb = q + (int64_t)bh * Lq * D;
        const float *kb = k + (int64_t)bh * Lk * D;
        float acc = 0.0f;
        for (int d0 = 0; d0 < D; d0 += TILE) {
            /* thread (tx, ty) loads Q[i0+ty, d0+tx] and K[j0+ty, d0+tx] */
            bool d_in = d0 + tx < D;
            q_tile[ty][tx] = (i0 + ty < Lq && d_in) ? qb[(int64_t)(i0 + ty) * D + d0 + tx] : 0.0f;
            k_tile[ty][tx] = (j0 + ty < Lk && d_in) ? kb[(int64_t)(j0 + ty) * D + d0 + tx] : 0.0f;
            __syncthreads(); // both tiles fully written before any thread reads them
            for (int dd = 0; dd < TILE; ++dd)
                acc += q_tile[ty][dd] * k_tile[tx][dd];
            __syncthreads(); // all reads done before the next step overwrites the tiles
        }
        int i = i0 + ty, j = j0 + tx;
        if (i < Lq && j < Lk) {
            bool visible = j < attn_visible_keys(i, Lq, Lk, causal);
            s[((int64_t)bh * Lq + i) * Lk + j] = visible ? acc * scale : -INFINITY;
        }
    }
}

__global__ void pv_tiled(const float *__restrict__ p, // [B,H,Lq,Lk] probabilities
                         const float *__restrict__ v, // [B,H,Lk,D] row-major
                         float *__restrict__ o,       // [B,H,Lq,D] row-major
                         int BH, int Lq, int Lk, int D) {
    __shared__ float p_tile[TILE][TILE + 1]; // [i][j]
    __shared__ float v_tile[TILE][TILE + 1]; // [j][d]
    int tx = threadIdx.x, ty = threadIdx.y;
    int i0 = blockIdx.y * TILE, d0 = blockIdx.x * TILE;
    for (int bh = blockIdx.z; bh < BH; bh += gridDim.z) {
        const float *pb = p + (int64_t)bh * Lq * Lk;
        const float *vb = v + (int64_t)bh * Lk * D;
        float acc = 0.0f;
        for (int j0 = 0; j0 < Lk; j0 += TILE) {
            /* thread (tx, ty) loads P[i0+ty, j0+tx] and V[j0+ty, d0+tx] */
            p_tile[ty][tx] =
                (i0 + ty < Lq && j0 + tx < Lk) ? pb[(int64_t)(i0 + ty) * Lk + j0 + tx] : 0.0f;
            v_tile[ty][tx] =
                (j0 + ty < Lk && d0 + tx < D) ? vb[(int64_t)(j0 + ty) * D + d0 + tx] : 0.0f;
            __syncthreads(); // both tiles fully written before any thread reads them
            for (int jj = 0; jj < TILE; ++jj)
                acc += p_tile[ty][jj] * v_tile[jj][tx];
            __syncthreads(); // all reads done before the next step overwrites the tiles
        }
        int i = i0 + ty, d = d0 + tx;
        if (i < Lq && d < D)
            o[((int64_t)bh * Lq + i) * D + d] = acc;
    }
}

/* ================================= launchers ============================================== */

static size_t scores_workspace(const attn_problem *p) {
    return (size_t)p->B * p->H * p->Lq * p->Lk * sizeof(float);
}

typedef void (*scores_kernel)(const float *, const float *, float *, int, int, int, int, float,
                              bool);
typedef void (*pv_kernel)(const float *, const float *, float *, int, int, int, int);

/* The three launches shared by both versions; only the two matrix-product kernels differ. */
static void launch_three_steps(const attn_problem *p, const attn_buffers *b, cudaStream_t stream,
                               scores_kernel scores, pv_kernel pv) {
    int BH = p->B * p->H;
    float *s = (float *)b->workspace;
    dim3 tile_block(TILE, TILE);
    dim3 scores_grid((p->Lk + TILE - 1) / TILE, (p->Lq + TILE - 1) / TILE, attn_head_blocks(BH));
    scores<<<scores_grid, tile_block, 0, stream>>>((const float *)b->q, (const float *)b->k, s, BH,
                                                   p->Lq, p->Lk, p->D, p->scale, p->causal);
    dim3 softmax_block(32, SOFTMAX_WARPS);
    dim3 softmax_grid((p->Lq + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS, attn_head_blocks(BH));
    softmax_rows<<<softmax_grid, softmax_block, 0, stream>>>(s, b->lse, BH, p->Lq, p->Lk);
    dim3 pv_grid((p->D + TILE - 1) / TILE, (p->Lq + TILE - 1) / TILE, attn_head_blocks(BH));
    pv<<<pv_grid, tile_block, 0, stream>>>(s, (const float *)b->v, (float *)b->o, BH, p->Lq, p->Lk,
                                           p->D);
}

static void launch_naive(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    launch_three_steps(p, b, stream, scores_naive, pv_naive);
}

static void launch_naive_tiled(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    launch_three_steps(p, b, stream, scores_tiled, pv_tiled);
}

/* ================================= registry =============================================== */

static const attn_requirements naive_requirements = {
    .dtypes = ATTN_DTYPE_BIT(ATTN_F32), .max_d = 256, .causal = true};

/* serves 0: dense attention; no launch shape (each version launches three kernels). */
static const attn_kernel naive_kernels[] = {
    {ATTN_VERSION(1, "naive",
                  "S=QK^T in global memory, warp-per-row softmax, O=PV; one thread per element"),
     .launch = launch_naive, .req = naive_requirements, .workspace_bytes = scores_workspace},
    {ATTN_VERSION(2, "naive_tiled",
                  "same three steps, 16x16 shared-memory tiles for both matrix products"),
     .launch = launch_naive_tiled, .req = naive_requirements, .workspace_bytes = scores_workspace},
};

extern "C" const attn_example naive_attention_example = {
    .name = "01_attention_basics",
    .summary = "naive O(L^2) attention: scores, softmax and output as three kernels (fp32)",
    ATTN_KERNELS(naive_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {4, 8, 2048, 64}, .sim = {1, 4, 1024, 64}},
};
