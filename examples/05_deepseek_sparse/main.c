/* main.c — Example 05's program, deepseek_sparse: the DeepSeek Sparse Attention pipeline on the
 * shared harness (command line, inputs, references, checks, timing: common/).
 *
 *   1. indexer   the index scores of every query chunk, against the double-precision reference
 *   2. top-k     radix select and the bitonic baseline on the same scores, under the tie rule
 *   3. attention sparse_mma and sparse_gather over the selection, against the harness's
 *                reference with the selected keys as the mask (FlashAttention's 2x rule)
 *   4. timing    each stage, the pipeline end to end, and dense FA2 (example 03's fa2_mma) on the
 *                same problem, in the same run
 * When every query sees at most k keys the selection is every key: the program says so and runs
 * dense attention. Exit: 0 all checks passed, 1 a check failed, 2 usage, 77 no GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/bench.h"
#include "attn/check.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/profile.h"
#include "attn/reference.h"
#include "attn/report.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h"

/* Example 03's fa2_mma (flash2_fwd.cu), the dense baseline, reused by symbol. */
extern const attn_kernel flash2_fa2_mma;

#ifdef ATTN_BACKEND_SIM
static const bool on_simulator = true;
#else
static const bool on_simulator = false;
#endif

/* Options of this program, on top of the common ones (attn/cli.h). */
typedef struct ds_options {
    int topk, index_heads, index_dim, chunk;
    const char *scores; /* top-k input: "indexer" or a synthetic row kind (see usage) */
    bool corrupt;       /* --corrupt-index V given */
    int corrupt_value;
    const char *dump; /* folder for the tensors, NULL = none */
} ds_options;

static const char *usage_extra =
    "example 05 options:\n"
    "  --topk K             keys kept per query (default: simulator 64, GPU 2048)\n"
    "  --index-heads N      indexer heads H_I: 16, 32, 48 or 64 (default: simulator 16, GPU 64)\n"
    "  --index-dim N        indexer head dimension D_I: 64 or 128 (default: simulator 64, GPU "
    "128)\n"
    "  --chunk N            query positions per indexer chunk (default: logits <= 1 GiB)\n"
    "  --scores KIND        top-k input: indexer (default), equal (all 1), neginf (all -inf),\n"
    "                       large (+-3e38 magnitudes), ties (4 distinct values)\n"
    "  --corrupt-index V    write V into the first selected slot before attention (a test of the\n"
    "                       attention stage's input validation)\n"
    "  --dump DIR           write the inputs and each stage's outputs as attn-tensor files\n"
    "  --check-rows N       here: about N query positions per sequence (default: all while the\n"
    "                       indexer's reference costs <= 2e9 multiply-adds, else 32)\n"
    "every run checks and times all stages: indexer, topk_bitonic, topk_radix, sparse_mma,\n"
    "sparse_gather, the pipeline end to end, and dense fa2_mma (no --kernel, no --pattern)\n";

/* Reads an integer flag value; 0 or a one-line error (exit 2). */
static int int_value(const char *flag, const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < -2147483647L || v > 2147483647L) {
        fprintf(stderr, "error: %s: '%s' is not an integer\n", flag, s);
        return ATTN_EXIT_USAGE;
    }
    *out = (int)v;
    return 0;
}

/* Takes this program's flags out of argv (the rest goes to attn_cli_parse). */
static int parse_options(int *argc, char **argv, ds_options *o) {
    int kept = 1, rc = 0;
    for (int a = 1; a < *argc && rc == 0; ++a) {
        const char *f = argv[a];
        const bool known = !strcmp(f, "--topk") || !strcmp(f, "--index-heads") ||
                           !strcmp(f, "--index-dim") || !strcmp(f, "--chunk") ||
                           !strcmp(f, "--scores") || !strcmp(f, "--corrupt-index") ||
                           !strcmp(f, "--dump");
        if (!known) {
            argv[kept++] = argv[a];
            continue;
        }
        if (a + 1 >= *argc) {
            fprintf(stderr, "error: %s needs a value\n", f);
            return ATTN_EXIT_USAGE;
        }
        const char *v = argv[++a];
        if (!strcmp(f, "--topk"))
            rc = int_value(f, v, &o->topk);
        else if (!strcmp(f, "--index-heads"))
            rc = int_value(f, v, &o->index_heads);
        else if (!strcmp(f, "--index-dim"))
            rc = int_value(f, v, &o->index_dim);
        else if (!strcmp(f, "--chunk"))
            rc = int_value(f, v, &o->chunk);
        else if (!strcmp(f, "--corrupt-index")) {
            rc = int_value(f, v, &o->corrupt_value);
            o->corrupt = true;
        } else if (!strcmp(f, "--scores"))
            o->scores = v;
        else
            o->dump = v;
    }
    *argc = kept;
    if (rc == 0 && strcmp(o->scores, "indexer") && strcmp(o->scores, "equal") &&
        strcmp(o->scores, "neginf") && strcmp(o->scores, "large") && strcmp(o->scores, "ties")) {
        fprintf(stderr,
                "error: --scores: unknown kind '%s' (indexer, equal, neginf, large, ties)\n",
                o->scores);
        return ATTN_EXIT_USAGE;
    }
    if (rc == 0 && o->topk < 1) {
        fprintf(stderr, "error: --topk must be at least 1 (got %d)\n", o->topk);
        return ATTN_EXIT_USAGE;
    }
    if (rc == 0 && o->chunk < 0) {
        fprintf(stderr, "error: --chunk must be positive (got %d)\n", o->chunk);
        return ATTN_EXIT_USAGE;
    }
    return rc;
}

/* The stages as harness kernels, so that attn_time_kernel times them: the launcher reads the
 * pipeline's arguments and the stage to run from here (one of the two set). */
static ds_args g_args;
static void (*g_chunked)(const ds_args *, int, cudaStream_t); /* once per query chunk */
static void (*g_whole)(const ds_args *, cudaStream_t);        /* once */

static void launch_stage(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)b;
    if (g_whole)
        g_whole(&g_args, s);
    else
        for (int i0 = 0; i0 < p->Lq; i0 += g_args.chunk)
            g_chunked(&g_args, i0, s);
}

/* Everything one run holds. Host arrays are fp32 values already rounded to the dtype. */
typedef struct run {
    attn_cli cli;
    ds_options opt;
    attn_problem p;  /* H query heads; K, V: one shared head */
    attn_problem p1; /* the same with H = 1: the layout of the shared K and V */
    int64_t rows_q, rows_k;
    float *q, *k1, *v1, *kx, *vx, *qi, *ki, *w; /* kx, vx: K, V copied into every head */
    float *logits;                              /* [B, chunk, Lk] host copy of one chunk */
    int32_t *sel;                               /* [rows_q, topk] */
    int64_t *row_ptr;                           /* the selection as the reference's CSR mask */
    int32_t *col_idx;
    float *out, *lse, *ref, *ref_lse, *lowp;
    void *staging;
    /* device */
    void *d_q, *d_k1, *d_v1, *d_kx, *d_vx, *d_qi, *d_ki, *d_o;
    float *d_w, *d_logits, *d_lse;
    int32_t *d_sel;
    int *d_cu_q, *d_cu_k;
    const char *device; /* the device's name */
    int stride; /* query positions checked: i % stride == 0 and each sequence's last (1: all) */
    int failures;
} run;

/* Is query position i of sequence b among the checked ones? */
static bool checked(const run *r, int b, int i) {
    return i % r->stride == 0 || i == attn_problem_seq_q(&r->p, b) - 1;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "error: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Uploads count fp32 values as the problem's dtype. */
static int upload(run *r, void **dst, const float *src, size_t count) {
    const size_t bytes = count * attn_dtype_size(r->p.dtype);
    *dst = attn_device_alloc(bytes ? bytes : 16);
    if (!*dst)
        return 1;
    attn_pack(r->staging, src, count, r->p.dtype);
    return attn_to_device(*dst, r->staging, bytes);
}

static void *device_zeros(size_t bytes) {
    void *d = attn_device_alloc(bytes ? bytes : 16);
    if (d && bytes)
        cudaMemset(d, 0, bytes);
    return d;
}

static int make_data(run *r) {
    const attn_problem *p = &r->p;
    const int HI = r->opt.index_heads, DI = r->opt.index_dim, D = p->D;
    const uint64_t seed = r->cli.seed;
    const size_t q_elems = attn_problem_q_elems(p), k1_elems = (size_t)r->rows_k * D;
    const size_t qi_elems = (size_t)r->rows_q * HI * DI, ki_elems = (size_t)r->rows_k * DI;
    r->q = xmalloc(q_elems * sizeof(float));
    r->k1 = xmalloc(k1_elems * sizeof(float));
    r->v1 = xmalloc(k1_elems * sizeof(float));
    r->kx = xmalloc(attn_problem_k_elems(p) * sizeof(float));
    r->vx = xmalloc(attn_problem_k_elems(p) * sizeof(float));
    r->qi = xmalloc(qi_elems * sizeof(float));
    r->ki = xmalloc(ki_elems * sizeof(float));
    r->w = xmalloc((size_t)r->rows_q * HI * sizeof(float));
    /* streams 0-2: Q, K, V (as the harness); 3-5: q_I, k_I, w */
    attn_fill_uniform(r->q, q_elems, seed, 0, r->cli.amplitude, p->dtype);
    attn_fill_uniform(r->k1, k1_elems, seed, 1, r->cli.amplitude, p->dtype);
    attn_fill_uniform(r->v1, k1_elems, seed, 2, 1.0f, p->dtype);
    attn_fill_uniform(r->qi, qi_elems, seed, 3, 1.0f, p->dtype);
    attn_fill_uniform(r->ki, ki_elems, seed, 4, 1.0f, p->dtype);
    /* DeepSeek scales the head weights by H_I^-1/2 (and the softmax scale D_I^-1/2) */
    attn_fill_uniform(r->w, (size_t)r->rows_q * HI, seed, 5, 1.0f / sqrtf((float)HI * DI),
                      ATTN_F32);
    for (int b = 0; b < p->B; ++b)
        for (int h = 0; h < p->H; ++h)
            for (int s = 0; s < attn_problem_seq_k(p, b); ++s) {
                const int64_t x = attn_problem_row_offset(p, false, b, h, s);
                const int64_t y = ds_row_k(p, b, s) * D;
                memcpy(r->kx + x, r->k1 + y, (size_t)D * sizeof(float));
                memcpy(r->vx + x, r->v1 + y, (size_t)D * sizeof(float));
            }
    size_t most = q_elems > attn_problem_k_elems(p) ? q_elems : attn_problem_k_elems(p);
    most = most > qi_elems ? most : qi_elems;
    r->staging = xmalloc(most * 4 + 16);
    r->logits = xmalloc((size_t)p->B * r->opt.chunk * p->Lk * sizeof(float) + 16);
    r->sel = xmalloc((size_t)r->rows_q * r->opt.topk * sizeof(int32_t) + 16);
    r->out = xmalloc(q_elems * sizeof(float));
    r->ref = xmalloc(q_elems * sizeof(float));
    r->lowp = xmalloc(q_elems * sizeof(float));
    r->lse = xmalloc(attn_problem_lse_elems(p) * sizeof(float) + 16);
    r->ref_lse = xmalloc(attn_problem_lse_elems(p) * sizeof(float) + 16);

    if (upload(r, &r->d_q, r->q, q_elems) || upload(r, &r->d_k1, r->k1, k1_elems) ||
        upload(r, &r->d_v1, r->v1, k1_elems) || upload(r, &r->d_qi, r->qi, qi_elems) ||
        upload(r, &r->d_ki, r->ki, ki_elems))
        return 1;
    r->d_w = attn_device_alloc((size_t)r->rows_q * HI * sizeof(float) + 16);
    r->d_logits = attn_device_alloc((size_t)p->B * r->opt.chunk * p->Lk * sizeof(float) + 16);
    r->d_sel = attn_device_alloc((size_t)r->rows_q * r->opt.topk * sizeof(int32_t) + 16);
    r->d_o = device_zeros(q_elems * attn_dtype_size(p->dtype));
    r->d_lse = attn_device_alloc(attn_problem_lse_elems(p) * sizeof(float) + 16);
    if (!r->d_w || !r->d_logits || !r->d_sel || !r->d_o || !r->d_lse ||
        attn_to_device(r->d_w, r->w, (size_t)r->rows_q * HI * sizeof(float)))
        return 1;
    if (p->cu_seqlens_q) {
        const size_t n = (size_t)(p->B + 1) * sizeof(int);
        r->d_cu_q = attn_device_alloc(n);
        r->d_cu_k = attn_device_alloc(n);
        if (!r->d_cu_q || !r->d_cu_k || attn_to_device(r->d_cu_q, p->cu_seqlens_q, n) ||
            attn_to_device(r->d_cu_k, p->cu_seqlens_k, n))
            return 1;
    }
    g_args = (ds_args){.p = &r->p,
                       .index_heads = HI,
                       .index_dim = DI,
                       .topk = r->opt.topk,
                       .chunk = r->opt.chunk,
                       .q_index = r->d_qi,
                       .k_index = r->d_ki,
                       .w = r->d_w,
                       .logits = r->d_logits,
                       .sel = r->d_sel,
                       .q = r->d_q,
                       .k = r->d_k1,
                       .v = r->d_v1,
                       .o = r->d_o,
                       .lse = r->d_lse,
                       .cu_q = r->d_cu_q,
                       .cu_k = r->d_cu_k};
    return 0;
}

static int synchronize(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "error: %s: CUDA error %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

static void verdict(run *r, const char *stage, bool pass, const char *detail) {
    if (!pass)
        r->failures++;
    if (!pass || !r->cli.quiet)
        printf("%-16s %s  %s\n", stage, pass ? "PASS" : "FAIL", detail);
}

/* A synthetic row for --scores (position e of n). */
static float synthetic_score(const char *kind, uint64_t seed, int64_t row, int e) {
    const float u = attn_uniform(seed, 6, (uint64_t)row * 1000003u + (uint64_t)e);
    if (!strcmp(kind, "equal"))
        return 1.0f;
    if (!strcmp(kind, "neginf"))
        return -INFINITY;
    if (!strcmp(kind, "large"))
        return u * 3e38f;
    return floorf((u + 1.0f) * 2.0f); /* ties: 0, 1, 2, 3 */
}

/* Stages 1 and 2 on one chunk of query positions: returns 0, or 1 after a runtime error. */
static int check_chunk(run *r, int i0, double *max_err, int64_t *rows_checked) {
    const attn_problem *p = &r->p;
    const int chunk = r->opt.chunk, Lk = p->Lk, K = r->opt.topk;
    const bool synthetic = strcmp(r->opt.scores, "indexer") != 0;
    const size_t lbytes = (size_t)p->B * chunk * Lk * sizeof(float);
    attn_device_fill_nan(r->d_logits, lbytes);
    ds_launch_indexer(&g_args, i0, 0);
    if (synchronize("indexer") || attn_to_host(r->logits, r->d_logits, lbytes))
        return 1;
    double *want = xmalloc((size_t)Lk * sizeof(double) + 8), *bound = xmalloc(Lk * 8 + 8);
    char detail[256] = "";
    for (int b = 0; b < p->B; ++b)
        for (int i = i0; i < i0 + chunk && i < attn_problem_seq_q(p, b); ++i) {
            float *got = r->logits + ((size_t)b * chunk + (i - i0)) * Lk;
            const int n = checked(r, b, i)
                              ? ds_index_scores_ref(p, r->opt.index_heads, r->opt.index_dim, r->qi,
                                                    r->ki, r->w, b, i, want, bound)
                              : 0;
            *rows_checked += checked(r, b, i);
            for (int s = 0; s < n; ++s) {
                /* fp32 accumulation of D_I products per head: a few ulps of the magnitudes */
                const double err = fabs(got[s] - want[s]), tol = 1e-5 * bound[s] + 1e-30;
                *max_err = err > *max_err ? err : *max_err;
                if (!(err <= tol) && detail[0] == '\0')
                    snprintf(detail, sizeof detail, "b=%d i=%d key %d: %.9g, want %.9g", b, i, s,
                             (double)got[s], want[s]);
            }
            /* --scores: the top-k stage's input replaced, once the indexer's is checked */
            for (int s = 0; synthetic && s < attn_problem_row_keys(p, b, i); ++s)
                got[s] = synthetic_score(r->opt.scores, r->cli.seed, ds_row_q(p, b, i), s);
        }
    free(want);
    free(bound);
    if (detail[0])
        verdict(r, "indexer", false, detail);
    if (synthetic && attn_to_device(r->d_logits, r->logits, lbytes))
        return 1;

    /* top-k: the baseline first (if it takes the rows), then radix select, whose result stays */
    for (int version = 0; version < 2; ++version) {
        if (version == 0 && Lk > DS_BITONIC_MAX_KEYS)
            continue;
        const size_t sbytes = (size_t)r->rows_q * K * sizeof(int32_t);
        attn_device_fill_nan(r->d_sel, sbytes);
        (version == 0 ? ds_launch_topk_bitonic : ds_launch_topk_radix)(&g_args, i0, 0);
        if (synchronize(version == 0 ? "topk_bitonic" : "topk_radix") ||
            attn_to_host(r->sel, r->d_sel, sbytes))
            return 1;
        for (int b = 0; b < p->B; ++b)
            for (int i = i0; i < i0 + chunk && i < attn_problem_seq_q(p, b); ++i) {
                char why[200];
                if (!checked(r, b, i))
                    continue;
                const float *row = r->logits + ((size_t)b * chunk + (i - i0)) * Lk;
                if (ds_check_selection(row, attn_problem_row_keys(p, b, i), K,
                                       r->sel + ds_row_q(p, b, i) * K, why, sizeof why)) {
                    char line[300];
                    snprintf(line, sizeof line, "b=%d i=%d: %s", b, i, why);
                    verdict(r, version == 0 ? "topk_bitonic" : "topk_radix", false, line);
                    return 0;
                }
            }
    }
    return 0;
}

/* The selection handed to attention: -1 or a key the query sees, ascending. 0 or exit 2. */
static int validate_selection(const run *r) {
    const attn_problem *p = &r->p;
    const int K = r->opt.topk;
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
            const int32_t *row = r->sel + ds_row_q(p, b, i) * K;
            const int n = attn_problem_row_keys(p, b, i);
            for (int s = 0; s < K; ++s)
                if (row[s] < -1 || row[s] >= n || (row[s] >= 0 && s > 0 && row[s] <= row[s - 1])) {
                    fprintf(stderr,
                            "error: attention input: query (b=%d, i=%d) slot %d holds index %d, "
                            "not -1 nor an ascending key in [0, %d)\n",
                            b, i, s, row[s], n);
                    return ATTN_EXIT_USAGE;
                }
        }
    return 0;
}

/* Runs one attention kernel and checks O and the LSE against the reference. */
static int check_attention(run *r, const char *name, void (*launch)(const ds_args *, cudaStream_t),
                           const float *lowp) {
    const attn_problem *p = &r->p;
    const size_t q_elems = attn_problem_q_elems(p), nl = attn_problem_lse_elems(p);
    attn_device_fill_nan(r->d_o, q_elems * attn_dtype_size(p->dtype));
    attn_device_fill_nan(r->d_lse, nl * sizeof(float));
    launch(&g_args, 0);
    if (synchronize(name) ||
        attn_to_host(r->staging, r->d_o, q_elems * attn_dtype_size(p->dtype)) ||
        attn_to_host(r->lse, r->d_lse, nl * sizeof(float)))
        return 1;
    attn_unpack(r->out, r->staging, q_elems, p->dtype);
    attn_check_result co = attn_check_output(p, r->out, r->ref, lowp, r->cli.amplitude);
    attn_check_result cl = attn_check_lse(p, r->lse, r->ref_lse);
    char detail[200];
    snprintf(detail, sizeof detail, "max |O - ref| %.3g (bound %.3g), LSE max err %.3g",
             co.max_abs_err, co.bound, cl.max_abs_err);
    verdict(r, name, co.pass && cl.pass, detail);
    if (!co.pass)
        attn_check_print(stdout, name, &co);
    if (!cl.pass)
        attn_check_print(stdout, "LSE", &cl);
    return 0;
}

/* Dense FA2 (example 03's fa2_mma) on the same problem, K and V copied into every head. */
static const attn_kernel *dense_kernel(void) { return &flash2_fa2_mma; }

static attn_buffers dense_buffers(run *r) {
    attn_buffers b;
    memset(&b, 0, sizeof b);
    b.q = r->d_q;
    b.k = r->d_kx;
    b.v = r->d_vx;
    b.o = r->d_o;
    b.lse = r->d_lse;
    b.cu_seqlens_q = r->d_cu_q;
    b.cu_seqlens_k = r->d_cu_k;
    return b;
}

static void time_one(run *r, const char *name, attn_launch_fn fn, const attn_buffers *buf,
                     double flops, const attn_timing_opts *t, double *ms_out) {
    attn_kernel k = {0, name, name, fn, {0}, NULL, 0, NULL};
    attn_stats st;
    attn_timing_opts once = *t;
    attn_profile prof = {0};
    if (r->cli.profile) { /* --profile: one launch of the stage, profiled (attn/profile.h) */
        once.reps = 1;
        once.warmup = 0;
        once.flush_l2 = 0;
        attn_profile_set_flops(flops);
    }
    if (attn_time_kernel(&k, &r->p, buf, &once, &st)) {
        r->failures++;
        return;
    }
    if (r->cli.profile)
        attn_profile_collect(stdout, &prof);
    const double tflops = flops > 0 ? flops / (st.median_ms * 1e-3) / 1e12 : 0.0;
    printf("%-16s %10.3f ms", name, st.median_ms);
    if (flops > 0 && !on_simulator)
        printf("  %8.1f TFLOP/s", tflops);
    printf("\n");
    if (ms_out)
        *ms_out = st.median_ms;
    if (r->cli.json_path || r->cli.csv_path) { /* one line per stage (attn/report.h) */
        char extra[1280], profile_json[1024];
        attn_profile_json(&prof, profile_json, sizeof profile_json);
        snprintf(extra, sizeof extra,
                 "\"topk\":%d,\"index_heads\":%d,\"index_dim\":%d,\"chunk\":%d,"
                 "\"device_mem_bytes\":%.0f%s%s",
                 r->opt.topk, r->opt.index_heads, r->opt.index_dim, r->opt.chunk,
                 (double)attn_device_mem_used(), prof.valid ? "," : "", profile_json);
        attn_run_record rec;
        memset(&rec, 0, sizeof rec);
        rec.example = "05_deepseek_sparse";
        rec.kernel = name;
        rec.backend = attn_backend_name();
        rec.device = r->device;
        rec.problem = r->p;
        rec.status = "PASS";
        rec.note = "";
        rec.max_abs_err = NAN;
        rec.timed = true;
        rec.time = st;
        rec.tflops = tflops;
        rec.extra_json = extra;
        if ((r->cli.json_path && attn_report_append(r->cli.json_path, false, &rec)) ||
            (r->cli.csv_path && attn_report_append(r->cli.csv_path, true, &rec)))
            r->failures++;
    }
}

/* A stage of the pipeline, timed like a kernel (launch_stage). */
static void time_stage(run *r, const char *name,
                       void (*chunked)(const ds_args *, int, cudaStream_t),
                       void (*whole)(const ds_args *, cudaStream_t), double flops,
                       const attn_timing_opts *t, double *ms_out) {
    attn_buffers none;
    memset(&none, 0, sizeof none);
    g_chunked = chunked;
    g_whole = whole;
    time_one(r, name, launch_stage, &none, flops, t, ms_out);
}

/* Releases everything a run allocated (NULL pointers are skipped by free and the harness). */
static void run_free(run *r) {
    float *host[] = {r->q, r->k1,     r->v1,  r->kx,  r->vx,  r->qi,      r->ki,
                     r->w, r->logits, r->out, r->lse, r->ref, r->ref_lse, r->lowp};
    void *dev[] = {r->d_q, r->d_k1, r->d_v1,     r->d_kx,  r->d_vx,  r->d_qi,   r->d_ki,
                   r->d_o, r->d_w,  r->d_logits, r->d_lse, r->d_sel, r->d_cu_q, r->d_cu_k};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
    free(r->sel);
    free(r->row_ptr);
    free(r->col_idx);
    free(r->staging);
    attn_cli_free(&r->cli);
}

static int run_program(run *r, int argc, char **argv) {
    r->opt.topk = on_simulator ? 64 : 2048;
    r->opt.index_heads = on_simulator ? 16 : 64;
    r->opt.index_dim = on_simulator ? 64 : 128;
    r->opt.scores = "indexer";
    int rc = parse_options(&argc, argv, &r->opt);
    if (rc)
        return rc;
    char err[512];
    if ((rc = attn_cli_parse(&r->cli, argc, argv, err, sizeof err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    static const attn_example usage_ex = {"05_deepseek_sparse",
                                          "DeepSeek Sparse Attention: lightning indexer, top-k "
                                          "selection, attention over the selected keys",
                                          NULL,
                                          0,
                                          {1, 16, 8192, 128},
                                          {1, 8, 256, 64}};
    if (r->cli.help || r->cli.list) {
        attn_cli_usage(stdout, "deepseek_sparse", &usage_ex);
        fputs(usage_extra, stdout);
        return 0;
    }
    if (r->cli.profile && !attn_profile_available()) {
        attn_profile_start(err, sizeof err); /* the one line saying how to get a profile */
        fprintf(stderr, "error: %s\n", err);
        return ATTN_EXIT_USAGE;
    }
    if (r->cli.pattern || r->cli.kernel) {
        fprintf(stderr, "error: %s: example 05 runs every stage; its selection is the indexer's\n",
                r->cli.pattern ? "--pattern" : "--kernel");
        return ATTN_EXIT_USAGE;
    }
    const int *def = on_simulator ? usage_ex.default_sim : usage_ex.default_gpu;
    attn_problem *p = &r->p;
    attn_problem_init(p, r->cli.B ? r->cli.B : def[0], r->cli.H ? r->cli.H : def[1],
                      r->cli.Lq ? r->cli.Lq : def[2], r->cli.Lk ? r->cli.Lk : def[2],
                      r->cli.D ? r->cli.D : def[3]);
    p->dtype = r->cli.dtype_set ? r->cli.dtype : ATTN_F16;
    p->causal = r->cli.causal;
    if (r->cli.scale > 0.0f)
        p->scale = r->cli.scale;
    p->cu_seqlens_q = r->cli.cu_seqlens_q;
    p->cu_seqlens_k = r->cli.cu_seqlens_k;
    if (attn_problem_validate(p, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return ATTN_EXIT_USAGE;
    }
    const char *why = ds_unsupported(p, r->opt.index_heads, r->opt.index_dim, r->opt.topk);
    if (why) {
        fprintf(stderr, "error: %s (got dtype %s, D=%d, --index-heads %d, --index-dim %d)\n", why,
                attn_dtype_name(p->dtype), p->D, r->opt.index_heads, r->opt.index_dim);
        return ATTN_EXIT_USAGE;
    }
    r->p1 = r->p;
    r->p1.H = 1;
    r->rows_q = attn_problem_q_rows(p);
    r->rows_k = attn_problem_k_rows(p);
    if (r->opt.chunk == 0) { /* logits of one chunk <= 1 GiB, a multiple of the indexer's 4 */
        int64_t c = ((int64_t)1 << 28) / ((int64_t)p->B * p->Lk);
        c = c < 4 ? 4 : c - c % 4;
        r->opt.chunk = (int)(c < p->Lq ? c : p->Lq);
    }
    r->opt.chunk = r->opt.chunk < p->Lq ? r->opt.chunk : p->Lq;
    /* rows to check: every one while the indexer's reference costs <= 2e9 multiply-adds (or with
     * --check-all), else about --check-rows (default 32) query positions per sequence */
    const double ref_cost = (double)r->rows_q * p->Lk * r->opt.index_heads * r->opt.index_dim;
    int want_rows = r->cli.check_rows >= 0 ? r->cli.check_rows : (ref_cost <= 2e9 ? 0 : 32);
    r->stride = want_rows > 0 && want_rows < p->Lq ? (p->Lq + want_rows - 1) / want_rows : 1;

    attn_device_info dev;
    if ((rc = attn_device_init_reported(&dev)) != 0)
        return rc;
    r->device = dev.name;
    if (make_data(r))
        return 1;
    int max_keys = 0;
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
            int n = attn_problem_row_keys(p, b, i);
            max_keys = n > max_keys ? n : max_keys;
        }
    if (!r->cli.quiet)
        printf(
            "05_deepseek_sparse on %s (%s): B=%d H=%d Lq=%d Lk=%d D=%d %s%s%s, top-k %d, indexer "
            "%d x %d, chunk %d\n",
            dev.name, attn_backend_name(), p->B, p->H, p->Lq, p->Lk, p->D,
            attn_dtype_name(p->dtype), p->causal ? " causal" : "", p->cu_seqlens_q ? " varlen" : "",
            r->opt.topk, r->opt.index_heads, r->opt.index_dim, r->opt.chunk);
    if (!r->cli.quiet)
        printf("memory: logits of one chunk %.3g MiB (all L x L: %.3g MiB), selection %.3g MiB\n",
               (double)p->B * r->opt.chunk * p->Lk * 4 / 1048576.0,
               (double)p->B * p->Lq * p->Lk * 4 / 1048576.0,
               (double)r->rows_q * r->opt.topk * 4 / 1048576.0);

    /* the dense baseline's K and V (every head a copy of the shared one) */
    if (upload(r, &r->d_kx, r->kx, attn_problem_k_elems(p)) ||
        upload(r, &r->d_vx, r->vx, attn_problem_k_elems(p)))
        return 1;
    const attn_kernel *dense = dense_kernel();
    const bool all_dense = max_keys <= r->opt.topk;

    /* stages 1 and 2 */
    double idx_err = 0.0;
    int64_t idx_rows = 0;
    for (int i0 = 0; i0 < p->Lq; i0 += r->opt.chunk)
        if (check_chunk(r, i0, &idx_err, &idx_rows))
            return 1;
    if (r->failures == 0) {
        char d[160];
        snprintf(d, sizeof d, "%lld query rows%s, max |I - ref| %.3g", (long long)idx_rows,
                 r->stride > 1 ? " (a sample)" : "", idx_err);
        verdict(r, "indexer", true, d);
        snprintf(d, sizeof d, "%s under the tie rule (scores: %s)",
                 r->stride > 1 ? "the same rows" : "every row", r->opt.scores);
        if (p->Lk <= DS_BITONIC_MAX_KEYS)
            verdict(r, "topk_bitonic", true, d);
        verdict(r, "topk_radix", true, d);
    }
    if (r->opt.corrupt && r->rows_q > 0)
        r->sel[0] = r->opt.corrupt_value;
    if ((rc = validate_selection(r)) != 0)
        return rc;
    if (r->opt.corrupt && attn_to_device(r->d_sel, r->sel, sizeof(int32_t)))
        return 1;

    /* stage 3: the reference with the selection as the mask */
    const int64_t csr_rows = (int64_t)p->B * p->Lq;
    r->row_ptr = xmalloc((size_t)(csr_rows + 1) * sizeof(int64_t));
    r->col_idx = xmalloc((size_t)csr_rows * r->opt.topk * sizeof(int32_t) + 4);
    ds_selection_csr(p, r->opt.topk, r->sel, r->row_ptr, r->col_idx);
    attn_mask mask = {ATTN_MASK_CSR, NULL, NULL, r->row_ptr, r->col_idx};
    if (all_dense && !r->cli.quiet)
        printf("every query sees at most %d keys: the selection is every key, attention is dense "
               "(fa2_mma runs it)\n",
               r->opt.topk);
    uint8_t *rows = xmalloc((size_t)attn_problem_row_count(p) + 1);
    for (int64_t n = 0; n < attn_problem_row_count(p); ++n) {
        attn_row row = attn_row_at(p, n);
        rows[n] = checked(r, row.b, row.i);
    }
    const int ref_rc =
        attn_reference_rows(p, &mask, r->q, r->kx, r->vx, r->ref, r->ref_lse, rows) ||
        attn_reference_lowp_rows(p, &mask, r->q, r->kx, r->vx, r->lowp, rows);
    free(rows);
    if (ref_rc) {
        fprintf(stderr, "error: the reference failed\n");
        return 1;
    }
    if (check_attention(r, "sparse_mma", ds_launch_sparse_mma, r->lowp) ||
        check_attention(r, "sparse_gather", ds_launch_sparse_gather, r->lowp))
        return 1;
    if (all_dense && dense) {
        attn_buffers db = dense_buffers(r);
        attn_device_fill_nan(r->d_o, attn_problem_q_elems(p) * attn_dtype_size(p->dtype));
        dense->launch(p, &db, 0);
        if (synchronize("fa2_mma") ||
            attn_to_host(r->staging, r->d_o, attn_problem_q_elems(p) * attn_dtype_size(p->dtype)))
            return 1;
        attn_unpack(r->out, r->staging, attn_problem_q_elems(p), p->dtype);
        attn_check_result c = attn_check_output(p, r->out, r->ref, r->lowp, r->cli.amplitude);
        char d[120];
        snprintf(d, sizeof d, "dense, max |O - ref| %.3g (bound %.3g)", c.max_abs_err, c.bound);
        verdict(r, "fa2_mma", c.pass, d);
    }
    if (r->opt.dump) {
        char path[1024];
        int64_t dims[4] = {r->rows_q, r->opt.topk, 0, 0};
        float *self = xmalloc((size_t)r->rows_q * r->opt.topk * sizeof(float) + 4);
        for (int64_t x = 0; x < r->rows_q * r->opt.topk; ++x)
            self[x] = (float)r->sel[x];
        snprintf(path, sizeof path, "%s/sel.bin", r->opt.dump);
        rc = attn_tensor_save(path, self, 2, dims);
        free(self);
        const struct {
            const char *name;
            const float *data;
            int64_t d0, d1, d2;
        } t[] = {
            {"q_index", r->qi, r->rows_q, r->opt.index_heads, r->opt.index_dim},
            {"k_index", r->ki, r->rows_k, r->opt.index_dim, 1},
            {"weights", r->w, r->rows_q, r->opt.index_heads, 1},
            {"q", r->q, (int64_t)attn_problem_q_elems(p) / p->D, p->D, 1},
            {"k", r->k1, r->rows_k, p->D, 1},
            {"v", r->v1, r->rows_k, p->D, 1},
            {"o_ref", r->ref, (int64_t)attn_problem_q_elems(p) / p->D, p->D, 1},
        };
        for (size_t n = 0; rc == 0 && n < sizeof t / sizeof t[0]; ++n) {
            int64_t d[3] = {t[n].d0, t[n].d1, t[n].d2};
            snprintf(path, sizeof path, "%s/%s.bin", r->opt.dump, t[n].name);
            rc = attn_tensor_save(path, t[n].data, t[n].d2 > 1 ? 3 : 2, d);
        }
        if (rc) {
            fprintf(stderr, "error: --dump: cannot write %s\n", path);
            return 1;
        }
    }

    /* stage 4: timing */
    if (!r->cli.check_only && r->failures == 0) {
        attn_timing_opts t = {0};
        t.reps = r->cli.reps >= 0 ? r->cli.reps : (on_simulator ? 2 : 20);
        t.warmup = r->cli.warmup >= 0 ? r->cli.warmup : (on_simulator ? 0 : 5);
        t.reps = t.reps < 1 ? 1 : t.reps;
        t.flush_l2 = 1;
        /* FlashMLA's convention: 2 * Lq * k * H * (D_qk + D_v), here with the keys each query
         * really attends to */
        double sparse_entries = 0.0;
        for (int b = 0; b < p->B; ++b)
            for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
                int n = attn_problem_row_keys(p, b, i);
                sparse_entries += n < r->opt.topk ? n : r->opt.topk;
            }
        const double sparse_flops = 2.0 * sparse_entries * p->H * (2.0 * p->D);
        double e2e = 0.0, dense_ms = 0.0;
        char why[512];
        if (r->cli.profile && attn_profile_start(why, sizeof why) == 0)
            printf("--profile: each stage launched once, profiled; its time includes the "
                   "profile's cost\n");
        printf("%s timings (median of %d%s):\n", on_simulator ? "CPU simulator" : "GPU", t.reps,
               on_simulator ? "; CPU time, not GPU performance" : "");
        printf("device memory in use: %.1f MiB (inputs, dense K/V copies, logits chunk, "
               "selection)\n",
               (double)attn_device_mem_used() / 1048576.0);
        time_stage(r, "indexer", ds_launch_indexer, NULL, 0, &t, NULL);
        if (p->Lk <= DS_BITONIC_MAX_KEYS)
            time_stage(r, "topk_bitonic", ds_launch_topk_bitonic, NULL, 0, &t, NULL);
        time_stage(r, "topk_radix", ds_launch_topk_radix, NULL, 0, &t, NULL);
        time_stage(r, "sparse_mma", NULL, ds_launch_sparse_mma, sparse_flops, &t, NULL);
        time_stage(r, "sparse_gather", NULL, ds_launch_sparse_gather, sparse_flops, &t, NULL);
        time_stage(r, "end_to_end", NULL, ds_launch_pipeline, 0, &t, &e2e);
        if (dense) {
            attn_buffers db = dense_buffers(r);
            time_one(r, "dense fa2_mma", dense->launch, &db, attn_problem_flops(p), &t, &dense_ms);
        }
        if (e2e > 0 && dense_ms > 0)
            printf("end to end vs dense FA2: %.2fx\n", dense_ms / e2e);
    }
    return r->failures ? 1 : 0;
}

int main(int argc, char **argv) {
    static run r; /* zero-initialised: every pointer NULL until allocated */
    const int rc = run_program(&r, argc, argv);
    run_free(&r);
    return rc;
}
