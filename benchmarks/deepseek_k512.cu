/* deepseek_k512.cu — a benchmark adapter: example 05's DeepSeek pipeline as ONE harness kernel,
 * "deepseek_k512", so that drivers which take an attn_example (bench_attention's implementations,
 * tests/benchmarks/test_deepseek_kernel.c) can run it on the harness's Q, K, V beside the dense
 * kernels. The lesson is example 05 (examples/05_deepseek_sparse); this file only feeds its
 * stages from tensors they were not designed for.
 *
 * The harness hands every kernel MHA tensors Q, K, V [B,H,L,D]. The adapter derives an indexer of
 * ADAPTER_HI = 16 heads of 64 from them — q_I(t, j) = the first 64 dimensions of Q's head j mod H
 * at t, k_I(s) = those of K's head 0, w = 1/16 — selects the top k = 512 keys per query (the k of
 * the course's comparison table, row "Sparse (k=512)"), and runs example 05's sparse_gather over
 * each head's own K and V (MHA: sparse_mma's one block per token needs one shared K/V head). With
 * every query seeing at most 512 keys the selection is every key, and the result equals dense
 * attention (tests/benchmarks: CTest example05.harness_kernel*).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn/problem.h"
#include "deepseek_sparse.h"
#include "device/kernel_common.cuh"

#define ADAPTER_HI 16
#define ADAPTER_DI 64
#define ADAPTER_TOPK 512 /* the comparison table's "Sparse (k=512)" */

/* The indexer's operands from Q and K, into the workspace.
 *   grid = (max(Lq, Lk), B); block = 128 threads; no shared memory, no barriers. */
template <typename T>
__global__ void adapter_inputs_kernel(const T *__restrict__ q, // [B,H,Lq,D] or [tq,H,D]
                                      const T *__restrict__ k, // [B,H,Lk,D] or [tk,H,D]
                                      T *__restrict__ q_index, // [rows_q, 16, 64]
                                      T *__restrict__ k_index, // [rows_k, 64]
                                      float *__restrict__ w,   // [rows_q, 16]
                                      const int *cu_q, const int *cu_k, int B, int H, int Lq,
                                      int Lk, int D) {
    const int b = blockIdx.y, t = blockIdx.x;
    /* packed rows of position 0 of sequence b (example 05's layouts, deepseek_sparse.h) */
    const int64_t q0 = cu_q ? cu_q[b] : (int64_t)b * Lq, k0 = cu_k ? cu_k[b] : (int64_t)b * Lk;
    const int seq_q = cu_q ? cu_q[b + 1] - cu_q[b] : Lq, seq_k = cu_k ? cu_k[b + 1] - cu_k[b] : Lk;
    for (int e = threadIdx.x; t < seq_q && e < ADAPTER_HI * ADAPTER_DI; e += blockDim.x) {
        const int j = e / ADAPTER_DI, d = e % ADAPTER_DI;
        const attn_seq_head sh = attn_seq_head_at(b * H + j % H, B * H, H, D, Lq, Lk, cu_q, cu_k);
        q_index[(q0 + t) * ADAPTER_HI * ADAPTER_DI + e] = q[sh.q + t * sh.ld + d];
        if (d == 0)
            w[(q0 + t) * ADAPTER_HI + j] = 1.0f / ADAPTER_HI;
    }
    const attn_seq_head h0 = attn_seq_head_at(b * H, B * H, H, D, Lq, Lk, cu_q, cu_k);
    for (int d = threadIdx.x; t < seq_k && d < ADAPTER_DI; d += blockDim.x)
        k_index[(k0 + t) * ADAPTER_DI + d] = k[h0.k + t * h0.ld + d];
}

/* The workspace, carved in this order (each part 256-byte aligned). */
struct adapter_parts {
    size_t q_index, k_index, w, logits, sel, total;
    int chunk;
};

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

static adapter_parts adapter_layout(const attn_problem *p) {
    const size_t rq = (size_t)attn_problem_q_rows(p), rk = (size_t)attn_problem_k_rows(p);
    const size_t el = attn_dtype_size(p->dtype);
    adapter_parts w;
    /* query chunk: logits <= 256 MiB, a multiple of the indexer's 4 queries */
    int64_t c = ((int64_t)1 << 26) / ((int64_t)p->B * (p->Lk > 0 ? p->Lk : 1));
    c = c < 4 ? 4 : c - c % 4;
    w.chunk = (int)(c < p->Lq ? c : p->Lq);
    w.q_index = 0;
    w.k_index = w.q_index + align256(rq * ADAPTER_HI * ADAPTER_DI * el);
    w.w = w.k_index + align256(rk * ADAPTER_DI * el);
    w.logits = w.w + align256(rq * ADAPTER_HI * sizeof(float));
    w.sel = w.logits + align256((size_t)p->B * w.chunk * p->Lk * sizeof(float));
    w.total = w.sel + align256(rq * ADAPTER_TOPK * sizeof(int32_t));
    return w;
}

static size_t adapter_workspace_bytes(const attn_problem *p) { return adapter_layout(p).total; }

template <typename T>
static void launch_inputs(const attn_problem *p, const attn_buffers *b, const ds_args *a,
                          cudaStream_t stream) {
    dim3 grid(p->Lq > p->Lk ? p->Lq : p->Lk, p->B);
    adapter_inputs_kernel<T><<<grid, 128, 0, stream>>>(
        (const T *)b->q, (const T *)b->k, (T *)a->q_index, (T *)a->k_index, (float *)a->w,
        b->cu_seqlens_q, b->cu_seqlens_k, p->B, p->H, p->Lq, p->Lk, p->D);
}

/* inputs, then per chunk example 05's indexer and radix top-k, then its sparse_gather (MHA) */
static void launch_adapter(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    const adapter_parts parts = adapter_layout(p);
    unsigned char *ws = (unsigned char *)b->workspace;
    const ds_args a = {p,
                       ADAPTER_HI,
                       ADAPTER_DI,
                       ADAPTER_TOPK,
                       parts.chunk,
                       ws + parts.q_index,
                       ws + parts.k_index,
                       (const float *)(ws + parts.w),
                       (float *)(ws + parts.logits),
                       (int32_t *)(ws + parts.sel),
                       b->q,
                       b->k,
                       b->v,
                       b->o,
                       b->lse,
                       b->cu_seqlens_q,
                       b->cu_seqlens_k,
                       NULL,
                       true};
    if (p->dtype == ATTN_BF16)
        launch_inputs<__nv_bfloat16>(p, b, &a, stream);
    else
        launch_inputs<__half>(p, b, &a, stream);
    for (int i0 = 0; i0 < p->Lq; i0 += a.chunk) {
        ds_launch_indexer(&a, i0, stream);
        ds_launch_topk_radix(&a, i0, stream);
    }
    ds_launch_sparse_gather(&a, stream);
}

/* fp16/bf16, D = 64 or 128 (example 05's attention), causal, varlen, runs on the simulator */
static const attn_requirements adapter_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true, .varlen = true};

static const attn_kernel adapter_kernels[] = {
    /* no launch shape: several launches */
    {ATTN_VERSION(1, "deepseek_k512",
                  "DSA end to end on the harness's Q, K, V: indexer 16 x 64 (Q's heads, K's head "
                  "0), top-512, sparse_gather over each head's keys; equals dense attention while "
                  "every query sees <= 512"),
     .launch = launch_adapter, .req = adapter_requirements,
     .workspace_bytes = adapter_workspace_bytes},
};

extern "C" const attn_example deepseek_k512_example = {
    .name = "05_deepseek_sparse",
    .summary =
        "DeepSeek Sparse Attention end to end (indexer, top-k, sparse attention) as one kernel",
    ATTN_KERNELS(adapter_kernels),
    /* B, H, L, D; on a GPU: the comparison table's "Sparse (k=512)" row */
    .defaults = {.gpu = {4, 8, 2048, 64}, .sim = {1, 4, 256, 64}},
};
