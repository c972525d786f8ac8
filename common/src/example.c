/* example.c — attn_example_main, the driver behind every example's main() (see attn/example.h).
 *
 * Order of work, and why:
 *   1. command line, --help, --list, the problem and whether the selected kernels can run it:
 *      all before touching the device, so that a usage error is exit 2 on every machine, with or
 *      without a GPU;
 *   2. the device (exit 77 with one "SKIP:" line when a gpu build finds no GPU);
 *   3. seeded inputs and the CPU reference (double precision, on every core where OpenMP is
 *      available; for fp16/bf16 also the same-precision implementation the tolerance rule needs).
 *      A big problem's reference would take minutes before the first kernel runs, so beyond a
 *      cost threshold only a sample of rows is computed and checked (--check-rows, --check-all);
 *      the rows left out are NaN in the reference, which the checkers skip (check.h);
 *   4. per kernel: NaN-filled outputs, launch, synchronise, copy back, check, time, report.
 * The log-sum-exp buffer is NaN-filled like O; a kernel that leaves it entirely NaN did not
 * produce it (some kernels do not compute it) and it is not checked. A partly written LSE is
 * checked, and fails.
 */
#include "attn/example.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/bench.h"
#include "attn/check.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/report.h"
#include "attn/tensor.h"
#include "example_sparse.h"

#ifdef ATTN_BACKEND_SIM
static const bool on_simulator = true;
#else
static const bool on_simulator = false;
#endif

/* Everything one invocation holds. Host arrays are fp32 in the problem's layout. */
typedef struct session {
    const attn_example *ex;
    const attn_sparse_example *sparse_ex; /* NULL for a dense example */
    attn_cli cli;
    attn_problem p;
    attn_device_info dev;
    attn_host_inputs in;
    float *ref;           /* [q_elems] double-precision reference output */
    float *ref_lse;       /* [lse_elems] */
    float *lowp;          /* [q_elems] same-precision output (fp16/bf16 only, else NULL) */
    float *out;           /* [q_elems] the kernel's output, unpacked */
    float *lse;           /* [lse_elems] the kernel's log-sum-exp */
    void *staging;        /* [max(q_elems, k_elems)] elements of the dtype, for upload/download */
    attn_buffers dev_buf; /* device Q, K, V, O, LSE (workspace per kernel) */
    sparse_state sparse;  /* --pattern: mask, block mask, CSR (example_sparse.h) */
    float *dense_ref, *dense_ref_lse, *dense_lowp; /* a baseline's reference, without pattern */
} session;

static double seconds_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *program_name(const char *argv0) {
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

/* ---- 1. command line and problem ------------------------------------------------------------- */

static void print_kernel_list(FILE *f, const attn_example *ex) {
    fprintf(f, "%s: %s\n", ex->name, ex->summary);
    for (int n = 0; n < ex->num_kernels; ++n) {
        const attn_kernel *k = &ex->kernels[n];
        const attn_requirements *req = &k->req;
        fprintf(f, "%3d  %s\n       %s\n       supports:", k->id, k->name, k->description);
        for (int t = ATTN_F32; t <= ATTN_BF16; ++t)
            if (req->dtypes & ATTN_DTYPE_BIT(t))
                fprintf(f, " %s", attn_dtype_name((attn_dtype)t));
        fprintf(f, "; D <= %d", req->max_d);
        if (req->d_multiple > 1)
            fprintf(f, ", multiple of %d", req->d_multiple);
        fprintf(f, "; %s; %s", req->causal ? "causal" : "not causal",
                req->varlen ? "varlen" : "not varlen");
        if (req->gpu_only)
            fprintf(f, "; GPU only (not on the simulator)");
        fputc('\n', f);
    }
}

static bool selected(const session *s, const attn_kernel *k) {
    return s->cli.kernel == 0 || s->cli.kernel == k->id;
}

/* The first dtype (lowest bit) that a selected kernel supports. */
static attn_dtype default_dtype(const session *s) {
    unsigned mask = 0;
    for (int n = 0; n < s->ex->num_kernels; ++n)
        if (selected(s, &s->ex->kernels[n]))
            mask |= s->ex->kernels[n].req.dtypes;
    for (int t = ATTN_F32; t <= ATTN_BF16; ++t)
        if (mask & ATTN_DTYPE_BIT(t))
            return (attn_dtype)t;
    return ATTN_F32;
}

static void build_problem(session *s) {
    const attn_cli *c = &s->cli;
    const int *def = on_simulator ? s->ex->default_sim : s->ex->default_gpu;
    attn_problem_init(&s->p, c->B ? c->B : def[0], c->H ? c->H : def[1], c->Lq ? c->Lq : def[2],
                      c->Lk ? c->Lk : def[2], c->D ? c->D : def[3]);
    s->p.dtype = c->dtype_set ? c->dtype : default_dtype(s);
    s->p.causal = c->causal;
    if (c->scale > 0.0f)
        s->p.scale = c->scale;
    s->p.cu_seqlens_q = c->cu_seqlens_q; /* NULL unless --seqlens (a packed varlen batch) */
    s->p.cu_seqlens_k = c->cu_seqlens_k;
}

typedef enum verdict { KERNEL_RUNS, KERNEL_NEEDS_GPU, KERNEL_CANNOT } verdict;

/* Can kernel k run the problem here? A kernel refused only for being GPU-only on the simulator
 * is a skip (no GPU), any other refusal is about the problem itself. */
static verdict kernel_verdict(const session *s, const attn_kernel *k, char *why, size_t len) {
    const attn_problem *p = &s->p;
    if (sparse_refuses(&s->sparse, k, (int)(k - s->ex->kernels), why, len) != 0)
        return KERNEL_CANNOT;
    if (attn_kernel_supports(k, p, !on_simulator, why, len) == 0)
        return KERNEL_RUNS;
    return attn_kernel_supports(k, p, true, NULL, 0) == 0 ? KERNEL_NEEDS_GPU : KERNEL_CANNOT;
}

/* 0 when at least one selected kernel can run the problem here; else ATTN_EXIT_USAGE (nothing
 * can run it) or ATTN_EXIT_NO_GPU (only GPU-only kernels could), with the reason in why. */
static int check_selection(const session *s, char *why, size_t len) {
    int needs_gpu = 0, max_d = 0;
    char reasons[768] = "", gpu_reason[256] = ""; /* every kernel's reason, "; "-separated */
    for (int n = 0; n < s->ex->num_kernels; ++n) {
        const attn_kernel *k = &s->ex->kernels[n];
        char reason[256];
        if (!selected(s, k))
            continue;
        max_d = k->req.max_d > max_d ? k->req.max_d : max_d;
        switch (kernel_verdict(s, k, reason, sizeof reason)) {
        case KERNEL_RUNS:
            return 0;
        case KERNEL_NEEDS_GPU:
            if (needs_gpu++ == 0)
                snprintf(gpu_reason, sizeof gpu_reason, "%s", reason);
            break;
        case KERNEL_CANNOT: {
            size_t used = strlen(reasons);
            snprintf(reasons + used, sizeof reasons - used, "%s%s", used ? "; " : "", reason);
            break;
        }
        }
    }
    if (needs_gpu > 0) {
        snprintf(why, len, "%s", gpu_reason);
        return ATTN_EXIT_NO_GPU;
    }
    if (s->cli.kernel != 0)
        snprintf(why, len, "%s", reasons);
    else if (s->p.D > max_d)
        snprintf(why, len, "D=%d is larger than any kernel of this example supports (max %d)",
                 s->p.D, max_d);
    else
        snprintf(why, len, "no kernel of this example can run this problem: %s", reasons);
    return ATTN_EXIT_USAGE;
}

/* Steps 1: returns -1 to go on, or the exit status. */
static int prepare(session *s, int argc, char **argv) {
    char msg[512];
    if (attn_cli_parse(&s->cli, argc, argv, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    if (s->cli.help) {
        attn_cli_usage(stdout, program_name(argv[0]), s->ex);
        return 0;
    }
    if (s->cli.list) {
        print_kernel_list(stdout, s->ex);
        return 0;
    }
    if (s->cli.kernel != 0 && attn_example_find(s->ex, s->cli.kernel) == NULL) {
        fprintf(stderr, "error: no kernel %d in this example (use --list)\n", s->cli.kernel);
        return ATTN_EXIT_USAGE;
    }
    build_problem(s);
    if (attn_problem_validate(&s->p, msg, sizeof msg) != 0) {
        fprintf(stderr, "error: %s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    if (sparse_prepare(&s->sparse, s->sparse_ex, s->cli.pattern, msg, sizeof msg) != 0) {
        fprintf(stderr, "error: %s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    int rc = check_selection(s, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "%s%s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP: " : "error: ", msg);
    return rc != 0 ? rc : -1;
}

/* ---- 2. device and banner -------------------------------------------------------------------- */

/* "<what> 5,0,17 (total 22)": the lengths of a varlen batch, the first 16 of them. */
static void print_seqlens(const char *what, const int *cu, int B) {
    printf("%s ", what);
    for (int b = 0; b < B && b < 16; ++b)
        printf("%s%d", b ? "," : "", cu[b + 1] - cu[b]);
    printf("%s (total %d)", B > 16 ? ",..." : "", cu[B]);
}

static void print_banner(const session *s) {
    const attn_problem *p = &s->p;
    const attn_device_info *d = &s->dev;
    printf("%s: %s\n", s->ex->name, s->ex->summary);
    printf("backend: %s, device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", attn_backend_name(), d->name,
           d->cc_major, d->cc_minor, d->sm_count, (double)d->global_mem / (1 << 30));
    if (d->simulated)
        printf("CPU simulator: results are checked exactly as on a GPU, but timings are not GPU "
               "performance.\n");
    printf("problem: B=%d H=%d Lq=%d Lk=%d D=%d %s %s, scale %g, seed %llu, amplitude %g "
           "(%.3g GFLOP)\n",
           p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
           p->causal ? "causal" : "non-causal", (double)p->scale, (unsigned long long)s->cli.seed,
           (double)s->cli.amplitude, attn_problem_flops(p) * 1e-9);
    if (attn_problem_is_varlen(p)) {
        print_seqlens("varlen: packed [total, H, D], query lengths", p->cu_seqlens_q, p->B);
        print_seqlens(", key lengths", p->cu_seqlens_k, p->B);
        putchar('\n');
    }
}

/* ---- 3. inputs and reference ----------------------------------------------------------------- */

/* FLOPs of the reference over the rows it computes (every row when selected is NULL), counted as
 * attn_problem_flops counts them. */
static double reference_flops(const attn_problem *p, const uint8_t *selected) {
    if (selected == NULL)
        return attn_problem_flops(p);
    double keys = 0.0;
    for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r))
        keys += selected[r.index] ? attn_problem_row_keys(p, r.b, r.i) : 0;
    return 4.0 * keys * p->D;
}

/* The reference on every row, or on a sample of rows (--check-rows) whose other rows stay NaN
 * and are skipped by the checkers. */
static int compute_reference(session *s, const attn_mask *mask, float *ref, float *ref_lse,
                             float *lowp) {
    const attn_problem *p = &s->p;
    bool quiet = s->cli.quiet;
    int64_t rows = attn_problem_row_count(p);
    int sample = attn_cli_rows_to_check(&s->cli, p);
    uint8_t *selected = NULL;
    if (sample > 0) {
        selected = (uint8_t *)malloc((size_t)rows);
        if (selected == NULL) {
            fprintf(stderr, "error: out of host memory for the reference's row sample\n");
            return 1;
        }
        attn_reference_sample_rows(p, sample, selected);
    }
    /* Beyond about a second of work on one core, say what is happening first. */
    double flops = reference_flops(p, selected);
    if (!quiet && flops > 2e9) {
        printf("reference: computing %.1f GFLOP on the CPU in double precision (%d threads) ...\n",
               flops * 1e-9, attn_reference_threads());
        fflush(stdout);
    }
    double t0 = seconds_now();
    int rc = attn_reference_rows(p, mask, s->in.q, s->in.k, s->in.v, ref, ref_lse, selected);
    if (rc == 0 && lowp != NULL)
        rc = attn_reference_lowp_rows(p, mask, s->in.q, s->in.k, s->in.v, lowp, selected);
    if (rc != 0) {
        fprintf(stderr, "error: the CPU reference failed (out of host memory?)\n");
        rc = 1;
    } else if (!quiet) {
        if (selected != NULL)
            printf("reference: %d of %lld rows sampled (use --check-all for every row), ", sample,
                   (long long)rows);
        else
            printf("reference%s: ",
                   mask == NULL && s->sparse.has_pattern ? " (baseline, dense)" : "");
        printf("%.2f s%s\n", seconds_now() - t0,
               lowp ? " (double precision and same-precision)" : "");
    }
    free(selected);
    return rc;
}

/* Host arrays, inputs and reference. 0 on success. */
static int make_host_data(session *s) {
    const attn_problem *p = &s->p;
    size_t q = attn_problem_q_elems(p), k = attn_problem_k_elems(p);
    size_t lse = attn_problem_lse_elems(p);
    if (attn_host_inputs_make(&s->in, p, s->cli.seed, s->cli.amplitude) != 0) {
        fprintf(stderr, "error: out of host memory for the inputs\n");
        return 1;
    }
    s->ref = (float *)malloc(q * sizeof(float));
    s->ref_lse = (float *)malloc(lse * sizeof(float));
    s->out = (float *)malloc(q * sizeof(float));
    s->lse = (float *)malloc(lse * sizeof(float));
    s->staging = malloc((q > k ? q : k) * attn_dtype_size(p->dtype));
    if (p->dtype != ATTN_F32)
        s->lowp = (float *)malloc(q * sizeof(float));
    if (!s->ref || !s->ref_lse || !s->out || !s->lse || !s->staging ||
        (p->dtype != ATTN_F32 && !s->lowp)) {
        fprintf(stderr, "error: out of host memory for the reference and results\n");
        return 1;
    }
    /* Sparse examples: the pattern's masks first (the reference needs its predicate), and for a
     * dense baseline timed beside the sparse kernels a second, dense, reference. */
    bool need_csr = false, need_dense = false;
    for (int n = 0; n < s->ex->num_kernels; ++n)
        if (selected(s, &s->ex->kernels[n])) {
            need_csr |= (sparse_flags(&s->sparse, n) & ATTN_PATTERNS_CSR) != 0;
            need_dense |= s->sparse.has_pattern && sparse_mask_for(&s->sparse, n) == NULL;
        }
    if (sparse_build(&s->sparse, p, need_csr, s->cli.quiet) != 0)
        return 1;
    const attn_mask *mask = s->sparse.has_pattern ? &s->sparse.mask : NULL;
    if (compute_reference(s, mask, s->ref, s->ref_lse, s->lowp) != 0)
        return 1;
    if (!need_dense)
        return 0;
    s->dense_ref = (float *)malloc(q * sizeof(float));
    s->dense_ref_lse = (float *)malloc(lse * sizeof(float));
    s->dense_lowp = s->lowp ? (float *)malloc(q * sizeof(float)) : NULL;
    if (!s->dense_ref || !s->dense_ref_lse || (s->lowp && !s->dense_lowp)) {
        fprintf(stderr, "error: out of host memory for the baseline's reference\n");
        return 1;
    }
    return compute_reference(s, NULL, s->dense_ref, s->dense_ref_lse, s->dense_lowp);
}

/* Packs host tensor src (count elements) to the dtype and copies it to the device. */
static int upload(session *s, const void *dst, const float *src, size_t count) {
    attn_pack(s->staging, src, count, s->p.dtype);
    return attn_to_device((void *)dst, s->staging, count * attn_dtype_size(s->p.dtype));
}

static int make_device_data(session *s) {
    const attn_problem *p = &s->p;
    size_t elem = attn_dtype_size(p->dtype);
    size_t q = attn_problem_q_elems(p), k = attn_problem_k_elems(p);
    attn_buffers *b = &s->dev_buf;
    b->q = attn_device_alloc(q * elem);
    b->k = attn_device_alloc(k * elem);
    b->v = attn_device_alloc(k * elem);
    b->o = attn_device_alloc(q * elem);
    b->lse = (float *)attn_device_alloc(attn_problem_lse_elems(p) * sizeof(float));
    if (!b->q || !b->k || !b->v || !b->o || !b->lse)
        return 1;
    if (attn_problem_is_varlen(p)) { /* the kernels read the offsets on the device */
        size_t cu_bytes = ((size_t)p->B + 1) * sizeof(int);
        b->cu_seqlens_q = (const int *)attn_device_alloc(cu_bytes);
        b->cu_seqlens_k = (const int *)attn_device_alloc(cu_bytes);
        if (!b->cu_seqlens_q || !b->cu_seqlens_k ||
            attn_to_device((void *)b->cu_seqlens_q, p->cu_seqlens_q, cu_bytes) ||
            attn_to_device((void *)b->cu_seqlens_k, p->cu_seqlens_k, cu_bytes))
            return 1;
    }
    return upload(s, b->q, s->in.q, q) || upload(s, b->k, s->in.k, k) ||
           upload(s, b->v, s->in.v, k);
}

static void free_session(session *s) {
    attn_buffers *b = &s->dev_buf;
    attn_device_free((void *)b->q);
    attn_device_free((void *)b->k);
    attn_device_free((void *)b->v);
    attn_device_free(b->o);
    attn_device_free(b->lse);
    attn_device_free((void *)b->cu_seqlens_q);
    attn_device_free((void *)b->cu_seqlens_k);
    attn_host_inputs_free(&s->in);
    free(s->ref);
    free(s->ref_lse);
    free(s->lowp);
    free(s->out);
    free(s->lse);
    free(s->staging);
    free(s->dense_ref);
    free(s->dense_ref_lse);
    free(s->dense_lowp);
    sparse_free(&s->sparse);
    attn_cli_free(&s->cli);
}

/* ---- 4. one kernel --------------------------------------------------------------------------- */

/* The result of one kernel: the record plus storage for its note. */
typedef struct outcome {
    attn_run_record rec;
    char note[256];
} outcome;

static void set_status(outcome *o, const char *status, const char *note) {
    o->rec.status = status;
    snprintf(o->note, sizeof o->note, "%s", note);
}

static bool all_nan(const float *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        if (!isnan(x[e]))
            return false;
    return true;
}

/* Copies the results back and checks them: PASS or FAIL. A baseline kernel of a sparse example
 * is checked against the dense reference. */
static int check_results(session *s, const attn_kernel *k, outcome *o) {
    const attn_problem *p = &s->p;
    bool dense =
        s->dense_ref != NULL && sparse_mask_for(&s->sparse, (int)(k - s->ex->kernels)) == NULL;
    const float *ref = dense ? s->dense_ref : s->ref, *lowp = dense ? s->dense_lowp : s->lowp;
    const float *ref_lse = dense ? s->dense_ref_lse : s->ref_lse;
    size_t q = attn_problem_q_elems(p), lse = attn_problem_lse_elems(p);
    if (attn_to_host(s->staging, s->dev_buf.o, q * attn_dtype_size(p->dtype)) ||
        attn_to_host(s->lse, s->dev_buf.lse, lse * sizeof(float))) {
        set_status(o, "ERROR", "copying the results back failed");
        return 1;
    }
    attn_unpack(s->out, s->staging, q, p->dtype);
    attn_check_result out = attn_check_output(p, s->out, ref, lowp, s->cli.amplitude);
    bool pass = out.pass;
    o->rec.max_abs_err = out.nonfinite ? INFINITY : out.max_abs_err;
    if (!s->cli.quiet)
        attn_check_print(stdout, "  output", &out);
    if (all_nan(s->lse, lse)) {
        if (!s->cli.quiet)
            printf("  lse: not produced by this kernel (buffer still NaN), not checked\n");
    } else {
        attn_check_result l = attn_check_lse(p, s->lse, ref_lse);
        pass = pass && l.pass;
        if (!s->cli.quiet)
            attn_check_print(stdout, "  lse", &l);
    }
    set_status(o, pass ? "PASS" : "FAIL", "");
    return 0;
}

/* NaN-fills the outputs, launches, synchronises, checks. 0 when the kernel ran (PASS or FAIL). */
static int launch_and_check(session *s, const attn_kernel *k, const attn_buffers *buf, outcome *o) {
    const attn_problem *p = &s->p;
    if (attn_device_fill_nan(buf->o, attn_problem_q_elems(p) * attn_dtype_size(p->dtype)) ||
        attn_device_fill_nan(buf->lse, attn_problem_lse_elems(p) * sizeof(float))) {
        set_status(o, "ERROR", "filling the outputs with NaN failed");
        return 1;
    }
    k->launch(p, buf, NULL);
    cudaError_t err = cudaGetLastError(); /* launch errors: configuration, shared memory */
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize(); /* errors while running: bad addresses, traps */
    if (err == cudaSuccess)
        err = cudaGetLastError();
    if (err != cudaSuccess) {
        char note[256];
        snprintf(note, sizeof note, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
        set_status(o, "ERROR", note);
        if (!s->cli.quiet)
            printf("  ERROR: %s\n", note);
        return 1;
    }
    return check_results(s, k, o);
}

static void time_kernel(session *s, const attn_kernel *k, const attn_buffers *buf, outcome *o) {
    const attn_cli *c = &s->cli;
    /* The simulator has no clocks or caches to warm up and its timings are only indicative:
     * 2 launches keep a plain run of an example within a few seconds. */
    attn_timing_opts opts = {c->warmup >= 0 ? c->warmup : (on_simulator ? 0 : 5),
                             c->reps > 0 ? c->reps : (on_simulator ? 2 : 20), 1};
    if (attn_time_kernel(k, &s->p, buf, &opts, &o->rec.time) != 0) {
        set_status(o, "ERROR", "a launch failed while timing (see above)");
        return;
    }
    double sec = o->rec.time.median_ms * 1e-3;
    o->rec.timed = true;
    o->rec.tflops = sparse_flops(&s->sparse, (int)(k - s->ex->kernels), &s->p) / sec * 1e-12;
    o->rec.gbps = attn_problem_min_bytes(&s->p) / sec * 1e-9;
}

static void run_kernel(session *s, const attn_kernel *k, outcome *o) {
    char why[256];
    if (kernel_verdict(s, k, why, sizeof why) != KERNEL_RUNS) {
        set_status(o, "SKIP", why);
        if (!s->cli.quiet)
            printf("  SKIP: %s\n", why);
        return;
    }
    size_t ws = k->workspace_bytes ? k->workspace_bytes(&s->p) : 0;
    attn_buffers buf = s->dev_buf;
    sparse_buffers(&s->sparse, &buf);
    buf.workspace = ws ? attn_device_alloc(ws) : NULL;
    buf.workspace_bytes = ws;
    o->rec.workspace_bytes = (double)ws;
    if (ws != 0 && buf.workspace == NULL) {
        snprintf(why, sizeof why, "cannot allocate %zu bytes of workspace", ws);
        set_status(o, "ERROR", why);
        return;
    }
    if (launch_and_check(s, k, &buf, o) == 0 && !s->cli.check_only)
        time_kernel(s, k, &buf, o);
    attn_device_free(buf.workspace);
}

static void init_outcome(const session *s, const attn_kernel *k, outcome *o) {
    memset(o, 0, sizeof *o);
    o->rec.example = s->ex->name;
    o->rec.kernel = k->name;
    o->rec.kernel_id = k->id;
    o->rec.backend = attn_backend_name();
    o->rec.device = s->dev.name;
    o->rec.problem = s->p;
    o->rec.note = o->note;
    o->rec.max_abs_err = NAN; /* not checked, until it is */
}

/* Runs every selected kernel; prints the table. Returns the exit status. */
static int run_all(session *s, outcome *outcomes) {
    int n_run = 0, rc = 0;
    for (int n = 0; n < s->ex->num_kernels; ++n) {
        const attn_kernel *k = &s->ex->kernels[n];
        if (!selected(s, k))
            continue;
        outcome *o = &outcomes[n_run++];
        init_outcome(s, k, o);
        if (!s->cli.quiet) {
            printf("[%d] %s: %s\n", k->id, k->name, k->description);
            fflush(stdout);
        }
        run_kernel(s, k, o);
        if (strcmp(o->rec.status, "FAIL") == 0 || strcmp(o->rec.status, "ERROR") == 0)
            rc = 1;
        if ((s->cli.json_path && attn_report_append(s->cli.json_path, false, &o->rec)) ||
            (s->cli.csv_path && attn_report_append(s->cli.csv_path, true, &o->rec)))
            rc = 1;
    }
    if (!s->cli.quiet)
        putchar('\n');
    attn_report_header(stdout);
    for (int n = 0; n < n_run; ++n)
        attn_report_row(stdout, &outcomes[n].rec);
    attn_run_record *recs = (attn_run_record *)malloc(sizeof *recs * (size_t)(n_run + 1));
    for (int n = 0; recs != NULL && n < n_run; ++n)
        recs[n] = outcomes[n].rec;
    if (recs != NULL)
        sparse_print_speedups(&s->sparse, s->ex, recs, n_run);
    free(recs);
    return rc;
}

/* ---- the driver ------------------------------------------------------------------------------ */

static int example_main(int argc, char **argv, const attn_example *ex,
                        const attn_sparse_example *sparse_ex) {
    session s;
    memset(&s, 0, sizeof s);
    s.ex = ex;
    s.sparse_ex = sparse_ex;
    int rc = prepare(&s, argc, argv);
    if (rc >= 0) {
        attn_cli_free(&s.cli);
        return rc;
    }
    char why[512];
    rc = attn_device_init(&s.dev, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "%s%s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP: " : "error: ", why);
        attn_cli_free(&s.cli);
        return rc;
    }
    if (!s.cli.quiet)
        print_banner(&s);
    outcome *outcomes = (outcome *)calloc((size_t)ex->num_kernels, sizeof *outcomes);
    if (outcomes == NULL || make_host_data(&s) != 0 || make_device_data(&s) != 0)
        rc = 1;
    else
        rc = run_all(&s, outcomes);
    free(outcomes);
    free_session(&s);
    return rc;
}

int attn_example_main(int argc, char **argv, const attn_example *ex) {
    return example_main(argc, argv, ex, NULL);
}

int attn_sparse_example_main(int argc, char **argv, const attn_sparse_example *ex) {
    return example_main(argc, argv, ex->base, ex);
}
