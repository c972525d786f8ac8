/* cp_ring.h — lesson code: the strategies of example 11, attention over a sequence spread across
 * P ranks.
 *   ring    pass-KV: each rank keeps its queries; the K/V shards travel round the ring, one step
 *           per shard, the next shard's transfer overlapping this step's attention; each step's
 *           partial result is merged into the running one by its log-sum-exp.
 *   zigzag  the same ring over the zigzag layout (cp_layout.h), which balances causal work.
 *   ulysses all-to-all: each rank trades its positions of every head for all positions of H/P
 *           heads, attends locally, and trades back.
 * The attention of every step is example 03's FlashAttention-2 kernel (fwd below), except the
 * pairs a sliding window cuts (cp_window_attend); the merge is cp_merge.cu. DeepSeek sparse
 * attention across ranks: cp_dsa.h. Transfers: transport.h. */
#ifndef CP_RING_H
#define CP_RING_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "attn/problem.h"
#include "attn/tensor.h"
#include "cp_layout.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes the enclosing function return 1 when expr is true (an error, already reported). */
#define CP_TRY(expr)                                                                               \
    do {                                                                                           \
        if (expr)                                                                                  \
            return 1;                                                                              \
    } while (0)

/* A failure planted for the tests: rank `rank` exits (CP_FAULT_DIE) or stops answering
 * (CP_FAULT_HANG) at step `step`, before posting that step's transfers. */
enum { CP_FAULT_NONE = 0, CP_FAULT_DIE = 1, CP_FAULT_HANG = 2 };
typedef struct cp_fault {
    int kind, rank, step;
} cp_fault;

typedef struct cp_setup {
    cp_strategy strategy;
    attn_problem p;         /* the whole problem: [B, H, L, D], Lq = Lk = L, fp32 */
    const attn_kernel *fwd; /* example 03's fa2_fp32 */
    const attn_kernel *bwd; /* example 07's fa2_fp32 backward */
    cp_fault fault;
    int plant; /* a bug planted for the checks' own tests: CP_PLANT_* */
} cp_setup;

/* --plant: no-merge (each step's result replaces the running one instead of merging with it),
 * no-skip (a masked pair computed whole, as if not causal), no-window (a pair cut by the sliding
 * window computed without it: whole, or causal on the diagonal): the checks must fail. */
enum { CP_PLANT_NONE = 0, CP_PLANT_NO_MERGE = 1, CP_PLANT_NO_SKIP = 2, CP_PLANT_NO_WINDOW = 3 };

/* This rank's share of the result, and what it computed. */
typedef struct cp_result {
    int nchunks;
    cp_chunk chunk[CP_MAX_CHUNKS];
    float *o[CP_MAX_CHUNKS], *lse[CP_MAX_CHUNKS]; /* device: [B, H, len, D], [B, H, len] each */
    void *mem[CP_MAX_CHUNKS];                     /* the allocations behind them */
    double entries; /* score entries of the launched problems (attn_problem_entries) */
    int steps_computed, steps_skipped, launches;
    bool dsa;        /* DeepSeek sparse attention (cp_dsa.h): what it moved, in bytes[] */
    double bytes[3]; /* received: indexer keys, K/V gathered; K/V a fetch would receive */
} cp_result;

/* Runs the strategy on this rank's share of in (every rank holds the same seeded inputs and
 * takes its positions). 0, or 1 after a CUDA error. A wait that times out does not return:
 * cp_timeout (below) ends the job. */
int cp_forward(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *out);
void cp_result_free(cp_result *r);

/* The backward (through the ring for ring and zigzag, through the all-to-all for Ulysses): this
 * rank's dQ for its queries and dK, dV for its own K/V shard, each [B, H, len, D] per chunk
 * (device), of the loss sum(dO * O). */
typedef struct cp_grads {
    /* per chunk: dO (uploaded), the forward's O and LSE, the gradients */
    const float *dout[CP_MAX_CHUNKS], *o[CP_MAX_CHUNKS], *lse[CP_MAX_CHUNKS];
    float *dq[CP_MAX_CHUNKS], *dk[CP_MAX_CHUNKS], *dv[CP_MAX_CHUNKS];
    float *scratch;  /* one pair's dQ, dK, dV */
    void *workspace; /* example 07's kernel's */
    size_t workspace_bytes;
    void *mem;
} cp_grads;

/* dout: the whole [B, H, L, D] loss gradient on the host (every rank the same); fwd: this rank's
 * forward result; work: what the backward computed (entries, steps). 0, or 1 after an error. */
int cp_backward(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, const float *dout,
                const cp_result *fwd, cp_result *work, cp_grads *g);
void cp_grads_free(cp_grads *g);

/* The Ulysses all-to-all (cp_ulysses.c), as cp_forward and cp_backward call it: r holds this
 * rank's chunk and its result's buffers; g the backward's gradients (NULL: the forward). */
int cp_ulysses(cp_transport *t, const cp_setup *s, const attn_host_inputs *in, cp_result *r,
               cp_grads *g);

/* Rows [c.start, c.start + c.len) of every (sequence, head) of a [B, H, L, width] host tensor,
 * as a new [B, H, c.len, width] tensor (malloc'ed), and the way back. */
float *cp_slice(const float *full, int BH, int L, int width, cp_chunk c);
void cp_unslice(float *full, const float *part, int BH, int L, int width, cp_chunk c);

/* The merge of cp_merge.cu: split 1 into split 0 of o [2][rows][D], lse [2][rows]. */
int cp_merge(float *o, float *lse, int64_t rows, int D, cudaStream_t stream);
/* A pair cut by the sliding window (cp_merge.cu): the queries at positions [qs, qs + qlen)
 * against the keys at [ks, ks + klen), each row's keys i - W < j <= i only; q, o [BH, qlen, D],
 * k, v [BH, klen, D], lse [BH, qlen]; a row without a key gets O = 0, LSE = -inf. */
int cp_window_attend(const float *q, const float *k, const float *v, float *o, float *lse, int BH,
                     int qs, int qlen, int ks, int klen, int W, int D, float scale,
                     cudaStream_t stream);
/* Its backward (cp_merge.cu), with the forward's final o and lse: adds the pair's part of dQ
 * (into dq, [BH, qlen, D]) and of dK, dV (into dk, dv, [BH, klen, D]). */
typedef struct cp_window_bwd_args {
    const float *q, *k, *v, *o, *dout, *lse;
    float *dq, *dk, *dv;
    int BH, qs, qlen, ks, klen, W, D;
    float scale;
} cp_window_bwd_args;
int cp_window_attend_bwd(const cp_window_bwd_args *a, cudaStream_t stream);
/* acc[i] += x[i], i < n (cp_merge.cu): a gradient's contributions summed. */
int cp_add(float *acc, const float *x, size_t n, cudaStream_t stream);

/* A wait that timed out or failed (rc: CP_TIMEOUT or CP_FAILED): prints one line naming this
 * rank, the step, the peer (-1: the all-to-all's) and what it waited for (sent: the peer was
 * to take what this rank sent), and ends every rank (MPI_Abort). cp_faults.c. */
void cp_transfer_failed(const cp_transport *t, int rc, int step, int peer, const char *what,
                        bool sent);
/* The planted fault, if it is this rank's at this step. cp_faults.c. */
void cp_fault_point(const cp_transport *t, const cp_fault *f, int step);

#ifdef __cplusplus
}
#endif
#endif /* CP_RING_H */
