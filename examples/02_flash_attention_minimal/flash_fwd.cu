/* flash_fwd.cu — Example 02: FlashAttention's forward pass in one short kernel, fp32.
 *
 *     O = softmax(scale * Q K^T) V        Q: [Lq, D], K, V: [Lk, D], per (batch, head)
 *
 * computed tile by tile without ever storing the Lq x Lk score matrix: a block keeps Br query rows
 * Q_i on chip, streams the keys and values through shared memory Bc rows at a time (K_j, V_j),
 * and folds each tile into its output with the online softmax (running max m_i, running sum l_i),
 * in the notation of Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 1.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 flash_fwd    one block per (Br query rows, head), one thread per query row; K_j and V_j
 *                  tiles in shared memory; online softmax; writes O and the log-sum-exp.
 *                  ./build/sim/examples/02_flash_attention_minimal/flash_fwd_sim --kernel 1
 * (On a GPU build use build/gpu/.../flash_fwd_gpu.) It supports fp32, any L (tail tiles, L < Br,
 * L = 1), Lq != Lk, D <= 128, causal (bottom-right aligned: query i sees key j iff
 * j <= i + Lk - Lq; a row that sees no key gets O = 0 and LSE = -inf).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is in main.c: the harness
 * (common/, attn_example_main) parses the flags, makes inputs, checks and times the kernel.
 *
 * Limits, on purpose: one thread per query row on fp32 CUDA cores, so it is correct and short
 * but slow; example 03 (FlashAttention-2) splits rows over warps and uses tensor cores.
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

#define BR 32 /* Br: query rows per block = threads per block (one thread per row) */
#define BC 32 /* Bc: keys per K_j / V_j tile */
/* Largest head dimension: 4 tiles of 32 x 129 floats = 64.5 KiB of shared memory. */
#define MAX_D 128

/* One block computes the rows i0 .. i0+Br-1 of O for one (batch, head) bh:
 *
 *              K_j^T, one tile of Bc keys at a time  ->  j0 = 0, Bc, 2Bc, ... (< kv_end)
 *             +------+------+------+------+
 *   Q_i       | S_ij | S_ij |      |      |     S_ij = scale * Q_i K_j^T, Br x Bc, never stored:
 *  (Br x D)   |      |      |      |      |     thread r holds its row, s[0..Bc-1], in registers
 *  row r  --> |======|======| ...  |      |
 *  thread r   +------+------+------+------+
 *                 \ m_i, l_i, O_i updated after every tile (online softmax), then S_ij is dropped
 *
 *   grid  = (ceil(Lq/Br), min(B*H, 65535)); blockIdx.y strides over the B*H heads
 *   block = Br threads; thread r owns query row i = i0 + r: its m_i, l_i (registers) and its
 *           row of O_i (shared memory, touched by no other thread)
 *   shared memory, row pitch D+1 floats: element d of row r sits in bank (r*(D+1) + d) mod 32,
 *   so for even D the 32 threads reading their own rows at the same d hit 32 different banks:
 *       q_i [Br][D+1]   loaded once per block, by all threads together
 *       k_j [Bc][D+1]   reloaded for every tile, by all threads together (read by every thread:
 *       v_j [Bc][D+1]   all threads read the same element at once, a broadcast)
 *       o_i [Br][D+1]   the unnormalised output rows, rescaled by exp(m_old - m_new) per tile
 * Tiles beyond kv_end (keys no row of the block may see under causal masking) are never loaded. */
__global__ void flash_fwd_kernel(const float *__restrict__ q, // [B,H,Lq,D] row-major
                                 const float *__restrict__ k, // [B,H,Lk,D] row-major
                                 const float *__restrict__ v, // [B,H,Lk,D] row-major
                                 float *__restrict__ o,       // [B,H,Lq,D] row-major
                                 float *__restrict__ lse,     // [B,H,Lq] or NULL
                                 int BH, int Lq, int Lk, int D, float scale, bool causal) {
    extern __shared__ float smem[];
    const int ld = D + 1;
    float *q_i = smem;
    float *k_j = q_i + BR * ld;
    float *v_j = k_j + BC * ld;
    float *o_i = v_j + BC * ld;
    const int r = threadIdx.x;
    const int i0 = blockIdx.x * BR;
    const int i = i0 + r;
    const int n_i = i < Lq ? attn_visible_keys(i, Lq, Lk, causal) : 0; /* keys row i sees */
    const int i_last = (i0 + BR < Lq ? i0 + BR : Lq) - 1;
    const int kv_end =
        attn_visible_keys(i_last, Lq, Lk, causal); /* the block's last row sees most */
    float *o_row = o_i + r * ld;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const float *qb = q + (int64_t)bh * Lq * D;
        const float *kb = k + (int64_t)bh * Lk * D;
        const float *vb = v + (int64_t)bh * Lk * D;
        for (int e = r; e < BR * D; e += BR) { /* consecutive threads, consecutive addresses */
            int row = e / D, d = e % D;
            q_i[row * ld + d] = i0 + row < Lq ? qb[(int64_t)(i0 + row) * D + d] : 0.0f;
        }
        for (int d = 0; d < D; ++d)
            o_row[d] = 0.0f;
        float m = -INFINITY, l = 0.0f; /* m_i, l_i of row i over the keys seen so far */

        for (int j0 = 0; j0 < kv_end; j0 += BC) {
            for (int e = r; e < BC * D; e += BR) {
                int row = e / D, d = e % D;
                bool in = j0 + row < Lk;
                k_j[row * ld + d] = in ? kb[(int64_t)(j0 + row) * D + d] : 0.0f;
                v_j[row * ld + d] = in ? vb[(int64_t)(j0 + row) * D + d] : 0.0f;
            }
            __syncthreads(); // K_j, V_j (and, first time, Q_i) fully written before anyone reads

            /* S_ij row r: s[c] = scale * q_i[r] . k_j[c], -inf for keys row i may not see */
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
                s[c] = j0 + c < n_i ? s[c] * scale : -INFINITY;
                m_tile = fmaxf(m_tile, s[c]);
            }

            /* Online softmax: m_new = max(m_i, rowmax S_ij); the old sum and output were computed
             * relative to m_i, so both are rescaled by alpha = exp(m_i - m_new) <= 1. A row that
             * has seen no key yet (m_new = -inf) has nothing to add. */
            float m_new = fmaxf(m, m_tile);
            if (m_new != -INFINITY) {
                float alpha = expf(m - m_new); /* exp(-inf) = 0 on the first visible tile */
                float l_tile = 0.0f;
#pragma unroll
                for (int c = 0; c < BC; ++c) {
                    s[c] = expf(s[c] - m_new); /* P~_ij, in [0, 1]; masked keys give 0 */
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

        /* O_i = diag(l_i)^-1 O~_i and LSE_i = m_i + log(l_i); a row with no key: 0 and -inf.
         * Only row r's own o_row is read here, and q_i is next written after the loop's last
         * barrier (or never read at all when kv_end <= 0), so the next bh needs no barrier. */
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

/* q_i, k_j, v_j and o_i, each [32][D+1] floats: 32.5 KiB at D = 64, 64.5 KiB at D = 128. Above
 * the 48 KiB every kernel may use, the kernel must opt in (GPUs since Volta allow more). */
static attn_launch_shape flash_fwd_shape(const attn_problem *p) {
    return {"flash_fwd_kernel", BR, (size_t)(2 * BR + 2 * BC) * (p->D + 1) * sizeof(float)};
}

static void launch_flash_fwd(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    int BH = p->B * p->H;
    const attn_launch_shape shape = flash_fwd_shape(p);
    size_t smem = shape.smem_bytes;
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(flash_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem);
    dim3 grid((p->Lq + BR - 1) / BR, attn_head_blocks(BH));
    flash_fwd_kernel<<<grid, shape.threads, smem, stream>>>(
        (const float *)b->q, (const float *)b->k, (const float *)b->v, (float *)b->o, b->lse, BH,
        p->Lq, p->Lk, p->D, p->scale, p->causal);
}

/* ================================= registry =============================================== */

static const attn_requirements flash_requirements = {
    .dtypes = ATTN_DTYPE_BIT(ATTN_F32), .max_d = MAX_D, .causal = true};

static const attn_kernel flash_kernels[] = {
    {ATTN_VERSION(1, "flash_fwd",
                  "Q_i/K_j/V_j tiles in shared memory, online softmax, one thread per row"),
     .launch = launch_flash_fwd, .req = flash_requirements, .launch_shape = flash_fwd_shape},
};

extern "C" const attn_example flash_fwd_example = {
    .name = "02_flash_attention_minimal",
    .summary = "FlashAttention forward, minimal: tiles + online softmax, no L x L matrix (fp32)",
    ATTN_KERNELS(flash_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {4, 8, 2048, 64}, .sim = {1, 4, 1024, 64}},
};
