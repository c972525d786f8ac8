/* mini_flash.cu — Exercise 01: a tiled attention forward pass with online softmax, fp32.
 *
 *     O = softmax(scale * Q K^T) V        Q: [Lq, D], K, V: [Lk, D], per (batch, head)
 *
 * YOUR TASK: the four TODOs marked "STEP n" in mini_flash_kernel (exercises/01_mini_flash/
 * README.md explains each one, with budgets), then delete the "not implemented" line in
 * launch_mini_flash. Everything else (launcher, registry) is given. Run the public tests with
 *     scripts/grade.sh 01_mini_flash
 * Keep every function static and keep the names of the registry: the grader links this file.
 *
 * Versions (each one line of intent; run with the command beside it):
 *   1 mini_flash   one thread per query row (its q row and output accumulator in registers),
 *                  K_j/V_j tiles of Bc = 16 keys in shared memory, online softmax, LSE.
 *                  ./build/sim/exercises/01_mini_flash/mini_flash_sim --kernel 1
 * Supports fp32, any Lq and Lk (tail tiles, L = 1), Lq != Lk, D <= 64, causal (bottom-right
 * aligned, common/README.md, "Conventions"; a row that sees no key gets O = 0 and LSE = -inf).
 *
 * Sections: CPU reference | kernels | launchers | registry. main() is the exercise's main.c.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/exercise.h"
#include "attn/problem.h"
#include "device/kernel_common.cuh"

/* ============================== CPU reference ============================================= */
/* The oracle is the harness's attn_reference (common/src/reference.c), in double precision. */

/* ================================== kernels =============================================== */

#define MF_ROWS 32  /* Br: query rows per block = threads per block */
#define MF_KEYS 16  /* Bc: keys per K_j / V_j tile */
#define MF_MAX_D 64 /* largest head dimension: q row and accumulator live in registers */

/* One block: MF_ROWS query rows of one (batch, head); thread t owns row i = i0 + t.
 *
 *   keys ->   tile 0      tile 1      ...   tile n-1 (may be partial: the tail tile)
 *           +-----------+-----------+-----+-----------+
 *   row t   | s[0..15]  | s[0..15]  |     | s[0..r-1] |   s = scale * q_t . k_c, registers only
 *           +-----------+-----------+-----+-----------+
 *   after each tile: m_t = max(m_t, max s), acc_t and l_t rescaled by exp(m_old - m_new)
 *
 *   shared memory: kt[MF_KEYS][D+1], vt[MF_KEYS][D+1] (one K_j, V_j tile; every thread of the
 *   block loads a share of it, then every thread reads all of it: each K/V tile is read from
 *   global memory once per block)
 *   grid = (ceil(Lq / MF_ROWS), min(B*H, 65535)); blockIdx.y strides over the B*H heads. */
static __global__ void mini_flash_kernel(const float *__restrict__ q, // [B,H,Lq,D] row-major
                                         const float *__restrict__ k, // [B,H,Lk,D] row-major
                                         const float *__restrict__ v, // [B,H,Lk,D] row-major
                                         float *__restrict__ o,       // [B,H,Lq,D] row-major
                                         float *__restrict__ lse,     // [B,H,Lq] or NULL
                                         int BH, int Lq, int Lk, int D, float scale, bool causal) {
    extern __shared__ float tiles[];
    const int pitch = D + 1; /* +1: rows start in different banks */
    float *kt = tiles;
    float *vt = tiles + MF_KEYS * pitch;
    const int t = threadIdx.x;
    const int i = blockIdx.x * MF_ROWS + t;
    const bool row_ok = i < Lq;
    /* Keys row i may see (a prefix 0 .. n_keys-1), and the most any row of the block sees. */
    const int n_keys = row_ok ? attn_visible_keys(i, Lq, Lk, causal) : 0;
    const int last = min(blockIdx.x * MF_ROWS + MF_ROWS, Lq) - 1;
    const int block_keys = attn_visible_keys(last, Lq, Lk, causal);

    for (int bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const float *kh = k + (int64_t)bh * Lk * D;
        const float *vh = v + (int64_t)bh * Lk * D;
        float qr[MF_MAX_D], acc[MF_MAX_D];
        for (int d = 0; d < D; ++d) {
            qr[d] = row_ok ? q[((int64_t)bh * Lq + i) * D + d] * scale : 0.0f;
            acc[d] = 0.0f;
        }
        float m = -INFINITY; /* running max of the scores seen so far */
        float l = 0.0f;      /* running sum of exp(score - m) */
        /* Unused until your steps use them (delete this line then): */
        (void)kh, (void)vh, (void)vt, (void)n_keys, (void)o, (void)lse, (void)acc, (void)m, (void)l;

        for (int j0 = 0; j0 < block_keys; j0 += MF_KEYS) {
            /* STEP 1 (TODO, about 7 lines): load K_j and V_j, keys j0 .. j0+MF_KEYS-1, into
             * kt and vt (element d of key c at [c * pitch + d]). All MF_ROWS threads share the
             * MF_KEYS * D elements; keys past Lk (the tail tile) must be 0 and never read from
             * kh/vh. Then make sure the whole tile is there before anyone reads it. */

            /* Scores of row i against the tile: the dot products are given. */
            float s[MF_KEYS];
            float tile_max = -INFINITY;
            for (int c = 0; c < MF_KEYS; ++c) {
                float dot = 0.0f;
                for (int d = 0; d < D; ++d)
                    dot += qr[d] * kt[c * pitch + d];
                /* STEP 2 (TODO, about 2 lines): s[c] = dot for a key row i may see (key j0 + c
                 * is visible iff j0 + c < n_keys), -INFINITY otherwise; keep tile_max. */
                s[c] = -INFINITY; /* replace */
                (void)dot;
                tile_max = fmaxf(tile_max, s[c]);
            }

            /* STEP 3 (TODO, about 14 lines): the online softmax update. m_new = max(m,
             * tile_max); if m_new is -INFINITY the row has seen no key yet: skip. Else rescale
             * l and acc[0..D-1] by exp(m - m_new), add p = exp(s[c] - m_new) to l and p * v_c
             * to acc for every key c of the tile, and set m = m_new. Then make sure every thread
             * is done with the tile before the next iteration overwrites it. */
        }

        /* STEP 4 (TODO, about 7 lines): for a real row (row_ok), write O[bh, i, :] = acc / l
         * and, when lse != NULL, LSE[bh, i] = m + log(l). A row that saw no key (l == 0) gets
         * O = 0 and LSE = -INFINITY. */
    }
}

/* ================================= launchers ============================================== */

static void launch_mini_flash(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    /* TODO (last step): delete the next line once steps 1-4 are written. */
    fprintf(stderr, "mini_flash: TODO not implemented (see exercises/01_mini_flash/README.md)\n");
    const int BH = p->B * p->H;
    const size_t smem = (size_t)2 * MF_KEYS * (p->D + 1) * sizeof(float); /* 8.3 KiB at D = 64 */
    dim3 grid((p->Lq + MF_ROWS - 1) / MF_ROWS, attn_head_blocks(BH));
    mini_flash_kernel<<<grid, MF_ROWS, smem, stream>>>((const float *)b->q, (const float *)b->k,
                                                       (const float *)b->v, (float *)b->o, b->lse,
                                                       BH, p->Lq, p->Lk, p->D, p->scale, p->causal);
}

/* ================================= registry =============================================== */

/* B, H, L, D of a plain run: .gpu on a GPU, .sim on the simulator */
ATTN_EXERCISE(
    mini_flash_example, "01_mini_flash",
    "Exercise 01: tiled attention forward with online softmax (fp32)",
    ATTN_VERSION(1, "mini_flash",
                 "K_j/V_j tiles in shared memory, online softmax, one thread per query row"),
    launch_mini_flash, MF_MAX_D, .gpu = {4, 8, 1024, 64}, .sim = {1, 2, 256, 64});
