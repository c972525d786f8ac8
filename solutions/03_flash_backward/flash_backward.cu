/* flash_backward.cu — Exercise 03: the backward pass of attention, fp32: FlashAttention-2's
 * loop for dK and dV (a block owns a tile of keys and walks the query rows), recomputing the
 * probabilities from the forward's log-sum-exp.
 *
 *     D_i   = rowsum(dO_i * O_i)                                  given: fb_preprocess_kernel
 *     P_ij  = exp(scale q_i.k_j - LSE_i)    for the entries row i sees, else 0
 *     dS_ij = P_ij (dO_i.v_j - D_i)
 *     dV_j  = sum_i P_ij dO_i,  dK_j = scale sum_i dS_ij q_i      YOUR TASK: fb_dkdv_kernel
 *     dQ_i  = scale sum_j dS_ij k_j                               given: fb_dq_kernel
 *
 * YOUR TASK: the TODOs marked "STEP n" in fb_dkdv_kernel (exercises/03_flash_backward/README.md
 * explains each one, with budgets), then delete the "not implemented" line in
 * launch_flash_backward. Everything else (preprocessing, dQ, launcher, registry) is given. Run
 * the public tests with
 *     scripts/grade.sh 03_flash_backward
 * Keep every function static and keep the names of the registry: the grader links this file.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 flash_backward  the preprocessing (D), the dK/dV pass (a block of FB_KEYS threads owns a
 *                     key each, K_j and V_j in shared memory, the query tiles FB_ROWS rows at a
 *                     time; dK_j, dV_j in registers), and the dQ pass (one thread per query row)
 *                     ./build/sim/exercises/03_flash_backward/flash_backward_check_sim --case
 *                     correct --seed 1 -B 1 -H 2 -L 70 -D 32 --causal
 * Supports fp32, any Lq and Lk (tail tiles, L = 1), Lq != Lk, D <= 64, causal (bottom-right
 * aligned as in attn/problem.h: query i sees key j iff j <= i + Lk - Lq; a row that sees no key
 * has LSE = -inf and zero gradients).
 *
 * Sections: CPU reference | kernels | launchers | registry.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/exercise.h"
#include "attn/problem.h"
#include "device/kernel_common.cuh"
#include "flash_backward.h"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference_backward (common/src/reference_backward.c), in
 * double precision; each gradient element is held to its own fp32 tolerance (attn/check.h). */

/* ================================== kernels =============================================== */

#define FB_DQ_ROWS 32 /* the dQ pass: query rows per block (one thread each) */
#define FB_DQ_KEYS 16 /* the dQ pass: keys per K_j / V_j tile */

/* Given. One thread per query row: D_i = sum_d dO_id O_id.
 *   grid = (ceil(Lq / 128), min(B*H, 65535)); blockIdx.y strides over the B*H heads. */
static __global__ void fb_preprocess_kernel(const float *__restrict__ o,    // [B,H,Lq,D]
                                            const float *__restrict__ dout, // [B,H,Lq,D]
                                            float *__restrict__ Dv,         // [B,H,Lq]
                                            int BH, int Lq, int D) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int bh = blockIdx.y; bh < BH && i < Lq; bh += gridDim.y) {
        const int64_t row = ((int64_t)bh * Lq + i) * D;
        float acc = 0.0f;
        for (int d = 0; d < D; ++d)
            acc += dout[row + d] * o[row + d];
        Dv[(int64_t)bh * Lq + i] = acc;
    }
}

/* YOUR TASK. One block: FB_KEYS keys of one (batch, head); thread t owns key j = j0 + t.
 *
 *   query rows ->  tile i0       tile i0+16    ...    (the last one may be partial)
 *                +------------+------------+-----+
 *   key t        | 16 entries | 16 entries |     |   P, dS of (row, key t): registers only
 *                +------------+------------+-----+
 *   dV[t] += P dO_row, dK[t] += dS q_row for every row of every tile: dK_j and dV_j stay in
 *   this thread's registers until the end, and are written once.
 *
 *   shared memory: kt[FB_KEYS][D+1], vt[FB_KEYS][D+1] (the block's keys, loaded once; thread t
 *   reads row t), qt[FB_ROWS][D], dot[FB_ROWS][D] (one query tile: Q_i and dO_i, every thread
 *   reads all of it), lse_t[FB_ROWS], d_t[FB_ROWS] (LSE_i and D_i of the tile)
 *   grid = (ceil(Lk / FB_KEYS), min(B*H, 65535)); blockIdx.y strides over the B*H heads. */
static __global__ void fb_dkdv_kernel(const float *__restrict__ q,    // [B,H,Lq,D]
                                      const float *__restrict__ k,    // [B,H,Lk,D]
                                      const float *__restrict__ v,    // [B,H,Lk,D]
                                      const float *__restrict__ dout, // [B,H,Lq,D]
                                      const float *__restrict__ lse,  // [B,H,Lq]
                                      const float *__restrict__ Dv,   // [B,H,Lq]
                                      float *__restrict__ dk,         // [B,H,Lk,D]
                                      float *__restrict__ dv,         // [B,H,Lk,D]
                                      int BH, int Lq, int Lk, int D, float scale, bool causal) {
    extern __shared__ float smem[];
    const int pitch = D + 1; /* +1: thread t reads row t column by column, no bank conflicts */
    float *kt = smem, *vt = kt + FB_KEYS * pitch;
    float *qt = vt + FB_KEYS * pitch, *dot = qt + FB_ROWS * D;
    float *lse_t = dot + FB_ROWS * D, *d_t = lse_t + FB_ROWS;
    const int t = threadIdx.x;
    const int j0 = blockIdx.x * FB_KEYS, j = j0 + t;

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const float *qh = q + (int64_t)bh * Lq * D, *gh = dout + (int64_t)bh * Lq * D;
        const float *kh = k + (int64_t)bh * Lk * D, *vh = v + (int64_t)bh * Lk * D;
        /* The block's keys (given): keys past Lk are 0 and never read. */
        for (int e = t; e < FB_KEYS * D; e += FB_KEYS) {
            const int c = e / D, d = e % D;
            const bool in = j0 + c < Lk;
            kt[c * pitch + d] = in ? kh[(int64_t)(j0 + c) * D + d] : 0.0f;
            vt[c * pitch + d] = in ? vh[(int64_t)(j0 + c) * D + d] : 0.0f;
        }
        float dk_acc[FB_MAX_D], dv_acc[FB_MAX_D];
        for (int d = 0; d < D; ++d)
            dk_acc[d] = dv_acc[d] = 0.0f;

        /* STEP 2: causal (bottom-right), query i sees key j0 iff j0 <= i + Lk - Lq: the query
         * tiles before the first such i see no key of this block. */
        const int first = causal ? max(0, j0 - (Lk - Lq)) : 0;
        for (int i0 = first - first % FB_ROWS; i0 < Lq; i0 += FB_ROWS) {
            /* STEP 1: the query tile Q_i, dO_i, LSE_i, D_i; rows past Lq are 0, never read. */
            for (int e = t; e < FB_ROWS * D; e += FB_KEYS) {
                const int r = e / D, d = e % D;
                const bool in = i0 + r < Lq;
                qt[e] = in ? qh[(int64_t)(i0 + r) * D + d] : 0.0f;
                dot[e] = in ? gh[(int64_t)(i0 + r) * D + d] : 0.0f;
            }
            for (int r = t; r < FB_ROWS; r += FB_KEYS) {
                const bool in = i0 + r < Lq;
                lse_t[r] = in ? lse[(int64_t)bh * Lq + i0 + r] : 0.0f;
                d_t[r] = in ? Dv[(int64_t)bh * Lq + i0 + r] : 0.0f;
            }
            __syncthreads(); // the query tile is complete before any thread reads it

            /* STEP 3: every entry (row i, key j) the row sees: P, dS, and the accumulations. */
            for (int r = 0; r < FB_ROWS; ++r) {
                const int i = i0 + r;
                const bool visible = j < Lk && i < Lq && (!causal || j <= i + Lk - Lq);
                if (!visible)
                    continue;
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; ++d) {
                    s += qt[r * D + d] * kt[t * pitch + d];
                    dp += dot[r * D + d] * vt[t * pitch + d];
                }
                const float p = expf(scale * s - lse_t[r]);
                const float ds = p * (dp - d_t[r]);
                for (int d = 0; d < D; ++d) {
                    dv_acc[d] += p * dot[r * D + d];
                    dk_acc[d] += ds * qt[r * D + d];
                }
            }
            __syncthreads(); // every thread is done with this query tile before the next load
        }
        /* STEP 4: dK_j = scale sum dS q (S = scale Q K^T), dV_j, for a real key. */
        if (j < Lk)
            for (int d = 0; d < D; ++d) {
                dk[((int64_t)bh * Lk + j) * D + d] = scale * dk_acc[d];
                dv[((int64_t)bh * Lk + j) * D + d] = dv_acc[d];
            }
        __syncthreads(); // every thread is done with kt, vt before the next head's keys
    }
}

/* Given. The dQ pass: one thread per query row i (FB_DQ_ROWS per block), its q and dO rows in
 * registers, the keys FB_DQ_KEYS at a time through shared memory, as exercise 01's forward:
 *   dQ_i = scale sum_j P_ij (dO_i.v_j - D_i) k_j over the keys the row sees.
 *   grid = (ceil(Lq / FB_DQ_ROWS), min(B*H, 65535)). */
static __global__ void fb_dq_kernel(const float *__restrict__ q, const float *__restrict__ k,
                                    const float *__restrict__ v, const float *__restrict__ dout,
                                    const float *__restrict__ lse, const float *__restrict__ Dv,
                                    float *__restrict__ dq, int BH, int Lq, int Lk, int D,
                                    float scale, bool causal) {
    __shared__ float kt[FB_DQ_KEYS][FB_MAX_D + 1], vt[FB_DQ_KEYS][FB_MAX_D + 1];
    const int t = threadIdx.x, i = blockIdx.x * FB_DQ_ROWS + t;
    const bool row_ok = i < Lq;
    const int n_keys = row_ok ? attn_visible_keys(i, Lq, Lk, causal) : 0;
    const int last = min(blockIdx.x * FB_DQ_ROWS + FB_DQ_ROWS, Lq) - 1;
    const int block_keys = attn_visible_keys(last, Lq, Lk, causal);
    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const int64_t row = ((int64_t)bh * Lq + (row_ok ? i : 0)) * D;
        float qr[FB_MAX_D], gr[FB_MAX_D], acc[FB_MAX_D];
        for (int d = 0; d < D; ++d) {
            qr[d] = row_ok ? q[row + d] : 0.0f;
            gr[d] = row_ok ? dout[row + d] : 0.0f;
            acc[d] = 0.0f;
        }
        const float lse_i = row_ok ? lse[(int64_t)bh * Lq + i] : 0.0f;
        const float D_i = row_ok ? Dv[(int64_t)bh * Lq + i] : 0.0f;
        for (int j0 = 0; j0 < block_keys; j0 += FB_DQ_KEYS) {
            for (int e = t; e < FB_DQ_KEYS * D; e += FB_DQ_ROWS) {
                const int c = e / D, d = e % D;
                const bool in = j0 + c < Lk;
                kt[c][d] = in ? k[((int64_t)bh * Lk + j0 + c) * D + d] : 0.0f;
                vt[c][d] = in ? v[((int64_t)bh * Lk + j0 + c) * D + d] : 0.0f;
            }
            __syncthreads(); // the key tile is complete before any thread reads it
            for (int c = 0; c < FB_DQ_KEYS && j0 + c < n_keys; ++c) {
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; ++d) {
                    s += qr[d] * kt[c][d];
                    dp += gr[d] * vt[c][d];
                }
                const float ds = expf(scale * s - lse_i) * (dp - D_i);
                for (int d = 0; d < D; ++d)
                    acc[d] += ds * kt[c][d];
            }
            __syncthreads(); // every thread is done with the tile before the next load
        }
        for (int d = 0; row_ok && d < D; ++d)
            dq[row + d] = scale * acc[d];
    }
}

/* ================================= launchers ============================================== */

static void launch_flash_backward(const attn_problem *p, const attn_buffers *b,
                                  cudaStream_t stream) {
    void *const *x = (void *const *)b->args; /* flash_backward.h: FB_O, FB_DO, ... */
    const float *q = (const float *)b->q, *k = (const float *)b->k, *v = (const float *)b->v;
    const float *o = (const float *)x[FB_O], *dout = (const float *)x[FB_DO];
    const float *lse = (const float *)x[FB_LSE];
    float *Dv = (float *)x[FB_D];
    const int BH = p->B * p->H;
    fb_preprocess_kernel<<<dim3((p->Lq + 127) / 128, attn_head_blocks(BH)), 128, 0, stream>>>(
        o, dout, Dv, BH, p->Lq, p->D);
    const size_t smem =
        ((size_t)2 * FB_KEYS * (p->D + 1) + 2 * FB_ROWS * p->D + 2 * FB_ROWS) * sizeof(float);
    fb_dkdv_kernel<<<dim3((p->Lk + FB_KEYS - 1) / FB_KEYS, attn_head_blocks(BH)), FB_KEYS, smem,
                     stream>>>(q, k, v, dout, lse, Dv, (float *)x[FB_DK], (float *)x[FB_DV], BH,
                               p->Lq, p->Lk, p->D, p->scale, p->causal);
    fb_dq_kernel<<<dim3((p->Lq + FB_DQ_ROWS - 1) / FB_DQ_ROWS, attn_head_blocks(BH)), FB_DQ_ROWS, 0,
                   stream>>>(q, k, v, dout, lse, Dv, (float *)x[FB_DQ], BH, p->Lq, p->Lk, p->D,
                             p->scale, p->causal);
}

/* ================================= registry =============================================== */

/* B, H, L, D of a plain run: .gpu on a GPU, .sim on the simulator */
ATTN_EXERCISE(
    flash_backward_example, "03_flash_backward",
    "Exercise 03: the backward pass, dK and dV by FlashAttention-2's key-outer loop (fp32)",
    ATTN_VERSION(1, "flash_backward",
                 "dK/dV pass: a block owns 32 keys and walks the query tiles; dQ pass"),
    launch_flash_backward, FB_MAX_D, .gpu = {4, 8, 1024, 64}, .sim = {1, 2, 128, 64});
