/* device/kernel_common.cuh — the few device and launch helpers that every example's kernels
 * share, kept in one place so that the causal rule and the reductions are written once.
 * Include after <cuda_runtime.h>; valid CUDA C++ for nvcc and for the simulator. */
#ifndef ATTN_KERNEL_COMMON_CUH
#define ATTN_KERNEL_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

/* Number of keys query i sees: all Lk, or under bottom-right causal alignment (common/README.md,
 * "Conventions") the keys j <= i + Lk - Lq, clamped to [0, Lk]. Keys are visible as a prefix, so
 * "key j is visible" is j < attn_visible_keys(i, ...), and a tile of queries [q0, q1) needs the
 * keys below attn_visible_keys(q1 - 1, ...) (its last row sees the most). */
__device__ __forceinline__ int attn_visible_keys(int i, int Lq, int Lk, bool causal) {
    if (!causal)
        return Lk;
    int n = i + Lk - Lq + 1;
    return n < 0 ? 0 : (n > Lk ? Lk : n);
}

/* Where the rows of one (sequence, head) live, in either layout (common/README.md, "Conventions"),
 * so that a kernel addresses dense and variable-length batches with the same code: dense [B,H,L,D]:
 * head bh = b*H + h owns L consecutive rows, D elements apart; varlen [total,H,D]: sequence b
 * starts at packed row cu[b]; its rows of head h are H*D elements apart; its LSE rows start at
 * h*total_q + cu_q[b]. Row i of Q/O is at q + i*ld, of K/V at k + i*ld, its LSE at lse + i. */
typedef struct attn_seq_head {
    int64_t q, k; /* element offset of row 0 in Q/O and in K/V */
    int64_t lse;  /* index of row 0 in the LSE buffer */
    int64_t ld;   /* elements between consecutive rows: D dense, H*D varlen */
    int Lq, Lk;   /* this sequence's query and key counts */
} attn_seq_head;

__device__ __forceinline__ attn_seq_head attn_seq_head_at(int bh, int BH, int H, int D, int Lq,
                                                          int Lk,
                                                          const int *cu_q,   // [B+1] or NULL
                                                          const int *cu_k) { // [B+1] or NULL
    attn_seq_head s;
    if (cu_q == NULL) {
        s.q = (int64_t)bh * Lq * D;
        s.k = (int64_t)bh * Lk * D;
        s.lse = (int64_t)bh * Lq;
        s.ld = D;
        s.Lq = Lq;
        s.Lk = Lk;
    } else {
        const int b = bh / H, h = bh % H;
        s.q = ((int64_t)cu_q[b] * H + h) * D;
        s.k = ((int64_t)cu_k[b] * H + h) * D;
        s.lse = (int64_t)h * cu_q[BH / H] + cu_q[b];
        s.ld = (int64_t)H * D;
        s.Lq = cu_q[b + 1] - cu_q[b];
        s.Lk = cu_k[b + 1] - cu_k[b];
    }
    return s;
}

/* Where sequence b lives in a per-token array (one entry per position, dense [B, L] or varlen
 * [total]): the index of its position 0 on the query and the key side, and its lengths. The host's
 * twin is attn_problem_token_index (attn/problem.h). */
typedef struct attn_seq {
    int64_t q0, k0;
    int Lq, Lk;
} attn_seq;

__device__ __forceinline__ attn_seq attn_seq_at(int b, int Lq, int Lk,
                                                const int *cu_q,   // [B+1] or NULL (dense)
                                                const int *cu_k) { // [B+1] or NULL
    attn_seq s;
    if (cu_q == NULL) {
        s.q0 = (int64_t)b * Lq;
        s.k0 = (int64_t)b * Lk;
        s.Lq = Lq;
        s.Lk = Lk;
    } else {
        s.q0 = cu_q[b];
        s.k0 = cu_k[b];
        s.Lq = cu_q[b + 1] - cu_q[b];
        s.Lk = cu_k[b + 1] - cu_k[b];
    }
    return s;
}

/* Max and sum over the 32 lanes of a full warp: a butterfly of __shfl_xor_sync, 5 steps, after
 * which every lane holds the result. All 32 lanes must call it. */
__device__ __forceinline__ float attn_warp_max(float x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}

__device__ __forceinline__ float attn_warp_sum(float x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

/* Grid extent for the B*H heads: gridDim.y and gridDim.z are limited to 65535, so kernels put
 * min(B*H, 65535) blocks there and stride over the remaining heads. The environment variable
 * ATTN_MAX_HEAD_BLOCKS=N (a test's setting) lowers the limit to N, so that blocks stride over
 * several heads at small sizes: the checked build then sees the barriers that guard a block's
 * move to its next head (tests/README.md). */
static inline unsigned attn_head_blocks(int BH) {
    static int cap = -1;
    if (cap < 0) {
        const char *v = getenv("ATTN_MAX_HEAD_BLOCKS");
        cap = v != NULL && atoi(v) > 0 && atoi(v) < 65535 ? atoi(v) : 65535;
    }
    return (unsigned)(BH < cap ? BH : cap);
}

#endif /* ATTN_KERNEL_COMMON_CUH */
