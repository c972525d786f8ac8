/* attn/problem.h — what an attention launch computes, where its data lives, and the
 * per-example kernel registry.
 *
 * Conventions (the dense and varlen layouts, causal alignment, rows that see no key, the scale):
 * common/README.md, "Conventions".
 */
#ifndef ATTN_PROBLEM_H
#define ATTN_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_dtype { ATTN_F32 = 0, ATTN_F16 = 1, ATTN_BF16 = 2 } attn_dtype;

#define ATTN_DTYPE_BIT(t) (1u << (unsigned)(t))
/* The tensor-core kernels' dtypes. */
#define ATTN_DTYPES_F16_BF16 (ATTN_DTYPE_BIT(ATTN_F16) | ATTN_DTYPE_BIT(ATTN_BF16))

/* Bytes of one element; name as used on the command line ("f32", "f16", "bf16"). */
size_t attn_dtype_size(attn_dtype t);
const char *attn_dtype_name(attn_dtype t);
/* Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16"/"half", "bf16"/"bfloat16". 0 on success. */
int attn_dtype_parse(const char *s, attn_dtype *out);

typedef struct attn_problem {
    int B;  /* batch size (number of sequences when varlen) */
    int H;  /* heads */
    int Lq; /* queries per sequence (max over the batch when varlen) */
    int Lk; /* keys per sequence (max over the batch when varlen) */
    int D;  /* head dimension (same for Q, K and V) */
    attn_dtype dtype;
    bool causal; /* bottom-right aligned: common/README.md, "Conventions" */
    float scale; /* softmax scale; attn_problem_init sets 1/sqrt(D) */
    /* Variable length: NULL for the dense [B,H,L,D] layout. Host copies, B+1 entries each,
     * non-decreasing, starting at 0; the device copies live in attn_buffers. */
    const int *cu_seqlens_q; /* [B+1] host */
    const int *cu_seqlens_k; /* [B+1] host */
} attn_problem;

/* Fills a dense problem with scale = 1/sqrt(D), fp32, non-causal. */
void attn_problem_init(attn_problem *p, int B, int H, int Lq, int Lk, int D);

/* Checks the problem is well formed (positive sizes, monotone cu_seqlens, ...).
 * Returns 0 if valid, else writes a one-line reason into why (may be NULL). */
int attn_problem_validate(const attn_problem *p, char *why, size_t why_len);

bool attn_problem_is_varlen(const attn_problem *p);
/* Rows of Q (resp. K/V) per head: B*Lq dense, cu_seqlens_q[B] varlen. */
int64_t attn_problem_q_rows(const attn_problem *p);
int64_t attn_problem_k_rows(const attn_problem *p);
/* Element counts of Q, K (= V), O and of the log-sum-exp [B,H,Lq] (varlen: [H,total_q]). */
size_t attn_problem_q_elems(const attn_problem *p);
size_t attn_problem_k_elems(const attn_problem *p);
size_t attn_problem_lse_elems(const attn_problem *p);
/* Length of sequence b (queries / keys). */
int attn_problem_seq_q(const attn_problem *p, int b);
int attn_problem_seq_k(const attn_problem *p, int b);
/* Token number of position i of sequence b over the whole batch, on the query (is_q) or key side:
 * b*Lq + i (b*Lk + i) dense, cu_seqlens_q[b] + i (cu_seqlens_k[b] + i) varlen; i = 0 is where
 * sequence b starts in an array of one entry per token (an example's per-token tensors). The
 * kernels' twin is attn_seq_at (device/kernel_common.cuh). */
int64_t attn_problem_token_index(const attn_problem *p, bool is_q, int b, int i);
/* How many keys query i of sequence b sees under bottom-right causal alignment (the last query
 * sees the last key): seq_k(b) - seq_q(b) + i + 1, clamped to [0, seq_k(b)]. With causal off:
 * seq_k(b). Host code's one answer to "which keys does row i see" for causal problems (a mask's
 * own rule: attn_entry_visible, attn/reference.h). */
int attn_causal_keys(const attn_problem *p, int b, int i);
/* Element offset of row i of head h of sequence b, in Q/O (is_q) or K/V, for either layout.
 * Dense: ((b*H + h)*L + i)*D. Varlen: ((cu[b] + i)*H + h)*D. */
int64_t attn_problem_row_offset(const attn_problem *p, bool is_q, int b, int h, int i);
/* Index of (b,h,i) in the log-sum-exp buffer.
 * Dense: (b*H + h)*Lq + i. Varlen: h*total_q + cu[b] + i. */
int64_t attn_problem_lse_index(const attn_problem *p, int b, int h, int i);

/* Query rows (b, h, i) over every sequence and head: attn_problem_q_rows(p) * H. */
int64_t attn_problem_row_count(const attn_problem *p);

/* A query row (b, h, i) of p. Rows are numbered in the memory order of Q/O: dense b, h, i;
 * varlen b, i, h (empty sequences own no row). Row n starts at element n * D of Q/O, so
 * offset == index * D in both layouts. The one loop the reference and the checkers share:
 *   for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r)) ...
 * and attn_row_at(p, n) addresses row n directly (the parallel reference's loop). */
typedef struct attn_row {
    bool valid;        /* false past the last row */
    int b, h, i;       /* sequence, head, query position inside sequence b */
    int64_t index;     /* n: 0 .. attn_problem_row_count(p) - 1 */
    int64_t offset;    /* attn_problem_row_offset(p, true, b, h, i): element offset in Q/O */
    int64_t lse_index; /* attn_problem_lse_index(p, b, h, i) */
} attn_row;
/* Row n of p; valid is false unless 0 <= n < attn_problem_row_count(p). */
attn_row attn_row_at(const attn_problem *p, int64_t n);
attn_row attn_row_first(const attn_problem *p);
void attn_row_next(const attn_problem *p, attn_row *r);

/* Entries of the score matrix that the problem computes (causal counted exactly). */
double attn_problem_entries(const attn_problem *p);
/* Keys that query i of sequence b sees under causality (masks not counted): the entries of its
 * row of the score matrix. */
int attn_problem_row_keys(const attn_problem *p, int b, int i);
/* Dense-attention FLOPs: 4 * entries * D (QK^T and PV, 2 flops per multiply-add). */
double attn_problem_flops(const attn_problem *p);

/* Device pointers handed to a launcher. No launcher allocates: scratch comes in workspace. */
typedef struct attn_buffers {
    const void *q;           /* [B,H,Lq,D] (varlen [total_q,H,D]), dtype of the problem */
    const void *k;           /* [B,H,Lk,D] (varlen [total_k,H,D]) */
    const void *v;           /* [B,H,Lk,D] (varlen [total_k,H,D]) */
    void *o;                 /* [B,H,Lq,D] (varlen [total_q,H,D]), dtype of the problem */
    float *lse;              /* [B,H,Lq] (varlen [H,total_q]) natural-log LSE of scaled scores;
                                may be NULL when the caller does not want it */
    const int *cu_seqlens_q; /* [B+1] device, NULL unless varlen */
    const int *cu_seqlens_k; /* [B+1] device, NULL unless varlen */
    /* Sparse kernels (example 04 on): what the sparse module (attn/sparse/) hands them, the
     * pattern, its block mask and CSR form (struct attn_sparse_inputs, attn/sparse/block_mask.h);
     * NULL for a dense run. */
    const struct attn_sparse_inputs *sparse;
    void *workspace; /* kernel scratch, size from attn_kernel.workspace_bytes */
    size_t workspace_bytes;
    /* A staged example (attn/example.h): what its kernels read beyond the fields above (the
     * module's data: its launchers' arguments), and for a kernel of a chunked stage the query
     * chunk to work on, 0 .. chunks-1 (chunks is 0 elsewhere). */
    void *args;
    int chunk, chunks;
} attn_buffers;

/* One launcher signature for every kernel of the chapter. Asynchronous on `stream`; reports
 * launch errors through cudaGetLastError like any CUDA launch. */
typedef void (*attn_launch_fn)(const attn_problem *p, const attn_buffers *b, cudaStream_t stream);
/* A staged example's launcher (an attn_launch_fn) `name` that calls launcher(args, stream) with
 * the module's arguments b->args as a const type * (attn_buffers.args), for registry rows:
 *   ATTN_LAUNCH_ARGS(run_compress, v4_launch_compress, v4_args)
 * (a launcher that also reads the chunk or the problem keeps a wrapper of its own). */
#define ATTN_LAUNCH_ARGS(name, launcher, type)                                                     \
    static void name(const attn_problem *p_, const attn_buffers *b_, cudaStream_t s_) {            \
        (void)p_;                                                                                  \
        launcher((const type *)b_->args, s_);                                                      \
    }

/* What a kernel can do; the harness refuses problems outside it with a clear message. Written with
 * designated initialisers, a member left out meaning no / any:
 *   {.dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true} */
typedef struct attn_requirements {
    unsigned dtypes; /* ATTN_DTYPE_BIT mask */
    int max_d;       /* largest head dimension supported */
    int d_multiple;  /* head dimension must be a multiple of this (0 or 1 = any) */
    bool causal;     /* supports causal */
    bool varlen;     /* supports cu_seqlens */
    bool gpu_only;   /* uses features the simulator cannot run (wgmma, TMA, ...) */
} attn_requirements;

/* What a kernel serves (attn_kernel.serves), a bit set. 0, the value of every dense kernel
 * (examples 01-03), means ATTN_SERVES_DENSE alone: dense attention (causal with --causal), and a
 * sparse pattern is refused. Sparse kernels (example 04 on) add the pattern kinds they serve,
 * ATTN_SERVES_PATTERN(kind) of attn/sparse/patterns.h: every part of a pattern must be one of
 * them. */
#define ATTN_SERVES_DENSE (1u << 30) /* also runs without a pattern (dense or causal) */
#define ATTN_SERVES_CSR (1u << 29)   /* reads the pattern's CSR form (attn/sparse/patterns.h) */
/* A dense kernel timed beside the sparse ones: it ignores the pattern, is checked against the
 * dense reference, and is the baseline of the measured speedups. */
#define ATTN_SERVES_BASELINE (1u << 31)

/* How a launcher launches its kernel for a problem: the configuration that the resource report
 * (benchmarks/resource_usage.py, through bench_attention --launch-shapes) and the launcher
 * itself both use. */
typedef struct attn_launch_shape {
    const char *global; /* the __global__ function launched, e.g. "fa2_mma_kernel" */
    int threads;        /* threads per block */
    size_t smem_bytes;  /* dynamic shared memory per block */
} attn_launch_shape;

/* A registry row, with designated initialisers after the three members every row has:
 *   {ATTN_VERSION(2, "fa2_mma", "what it changes"), .launch = launch_fa2_mma, .req = mma_req,
 *    .launch_shape = fa2_mma_shape}
 * (the members left out are NULL or 0: no workspace, dense, no launch shape, stage 0). */
#define ATTN_VERSION(id_, name_, description_)                                                     \
    .id = (id_), .name = (name_), .description = (description_)
/* The number of elements of an array (a registry's rows, a module's options or stages). */
#define ATTN_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

typedef struct attn_kernel {
    int id;                  /* 1-based, stable: --kernel N */
    const char *name;        /* short identifier, e.g. "naive" */
    const char *description; /* one line: what this version changes */
    attn_launch_fn launch;
    attn_requirements req;
    /* Scratch bytes the kernel needs for p (NULL: none). */
    size_t (*workspace_bytes)(const attn_problem *p);
    unsigned serves; /* ATTN_SERVES_* above; 0: dense */
    /* The launch shape for p (NULL: not reported, e.g. a launcher that launches several kernels).
     * Only called for problems the kernel supports. */
    attn_launch_shape (*launch_shape)(const attn_problem *p);
    /* A staged example's kernel: the index of its stage in the module's stages (attn/example.h);
     * 0 everywhere else. */
    int stage;
} attn_kernel;

/* The kernels of a registry, rows (an array): .kernels and .num_kernels. */
#define ATTN_KERNELS(rows) .kernels = (rows), .num_kernels = ATTN_COUNT(rows)

/* A plain run's problem, B, H, L, D, on a GPU and on the simulator. */
typedef struct attn_default_sizes {
    int gpu[4], sim[4];
} attn_default_sizes;

/* One example: its kernels, in order of the walkthrough. Written with designated initialisers:
 *   {.name = "03_flash_attention_v2", .summary = "...", ATTN_KERNELS(rows),
 *    .defaults = {.gpu = {2, 8, 2048, 128}, .sim = {1, 4, 512, 64}}} */
typedef struct attn_example {
    const char *name;    /* e.g. "01_attention_basics" */
    const char *summary; /* one line for --help */
    const attn_kernel *kernels;
    int num_kernels;
    /* Default problem for a plain run: GPU sizes and simulator sizes differ. */
    attn_default_sizes defaults;
    /* What the example adds to the driver: its flags, a sparse pattern, its own stages
     * (attn/example.h); NULL for a dense attention example. */
    const struct attn_module *module;
    const void *module_config; /* the module's settings for this example (the sparse module:
                                  attn_sparse_config, its default pattern), NULL for none */
} attn_example;

/* 0 if kernel k can run problem p; else writes the reason (e.g. "D=300 exceeds the kernel's
 * maximum 256") into why. on_gpu: false on the simulator, where gpu_only kernels cannot run. */
int attn_kernel_supports(const attn_kernel *k, const attn_problem *p, bool on_gpu, char *why,
                         size_t why_len);
/* Kernel with the given id, or NULL. */
const attn_kernel *attn_example_find(const attn_example *ex, int id);

/* Writes the formatted reason into why (nothing when why is NULL or why_len 0) and returns rc, so
 * that a function reporting through a caller's buffer can `return attn_reason(why, len, 2, ...)`
 * (the model libraries' sessions, examples 09 and 12, keep their last error this way). */
int attn_reason(char *why, size_t why_len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif /* ATTN_PROBLEM_H */
