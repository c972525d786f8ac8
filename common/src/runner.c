/* runner.c — one problem's data and the checked, timed run of one kernel (see attn/runner.h).
 *
 * A big problem's reference would take minutes before the first kernel runs, so the caller may
 * ask for a sample of rows only (attn_cli_rows_to_check resolves the examples' default); the
 * rows left out are NaN in the reference, which the checkers skip (check.h).
 */
#include "attn/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"

#ifdef ATTN_BACKEND_SIM
static const bool on_simulator = true;
#else
static const bool on_simulator = false;
#endif

static double seconds_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the problem's data ---------------------------------------------------------------------- */

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

/* The reference under mask into ref/ref_lse/lowp on every row (sample = 0), or on a sample of rows
 * whose other rows stay NaN and are skipped by the checkers. label names a second, dense,
 * reference beside a masked one. */
static int compute_reference(attn_problem_data *d, int sample, const attn_mask *mask, float *ref,
                             float *ref_lse, float *lowp, const char *label) {
    const attn_problem *p = &d->p;
    int64_t rows = attn_problem_row_count(p);
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
    if (!d->quiet && flops > 2e9) {
        printf("reference: computing %.1f GFLOP on the CPU in double precision (%d threads) ...\n",
               flops * 1e-9, attn_reference_threads());
        fflush(stdout);
    }
    double t0 = seconds_now();
    int rc = attn_reference_rows(p, mask, d->in.q, d->in.k, d->in.v, ref, ref_lse, selected);
    if (rc == 0 && lowp != NULL)
        rc = attn_reference_lowp_rows(p, mask, d->in.q, d->in.k, d->in.v, lowp, selected);
    if (rc != 0) {
        fprintf(stderr, "error: the CPU reference failed (out of host memory?)\n");
        rc = 1;
    } else if (!d->quiet) {
        if (selected != NULL)
            printf("reference: %d of %lld rows sampled (use --check-all for every row), ", sample,
                   (long long)rows);
        else
            printf("reference%s: ", label);
        printf("%.2f s%s\n", seconds_now() - t0,
               lowp ? " (double precision and same-precision)" : "");
    }
    free(selected);
    return rc;
}

/* Host arrays, inputs and reference. 0 on success. */
static int make_host_data(attn_problem_data *d, const attn_mask *mask, bool dense_too,
                          uint64_t seed, int sample, attn_inputs_fn change, void *ctx) {
    const attn_problem *p = &d->p;
    size_t q = attn_problem_q_elems(p), k = attn_problem_k_elems(p);
    size_t lse = attn_problem_lse_elems(p);
    if (attn_host_inputs_make(&d->in, p, seed, d->amplitude) != 0) {
        fprintf(stderr, "error: out of host memory for the inputs\n");
        return 1;
    }
    attn_inputs_apply(d->inputs, d->in.q, q, d->in.k, k, d->in.v, k);
    if (change != NULL && change(ctx, p, &d->in) != 0)
        return 1;
    d->ref = (float *)malloc(q * sizeof(float));
    d->ref_lse = (float *)malloc(lse * sizeof(float));
    d->out = (float *)malloc(q * sizeof(float));
    d->lse = (float *)malloc(lse * sizeof(float));
    d->staging = malloc((q > k ? q : k) * attn_dtype_size(p->dtype));
    if (p->dtype != ATTN_F32)
        d->lowp = (float *)malloc(q * sizeof(float));
    if (!d->ref || !d->ref_lse || !d->out || !d->lse || !d->staging ||
        (p->dtype != ATTN_F32 && !d->lowp)) {
        fprintf(stderr, "error: out of host memory for the reference and results\n");
        return 1;
    }
    if (compute_reference(d, sample, mask, d->ref, d->ref_lse, d->lowp, "") != 0)
        return 1;
    if (!dense_too)
        return 0;
    d->dense_ref = (float *)malloc(q * sizeof(float));
    d->dense_ref_lse = (float *)malloc(lse * sizeof(float));
    d->dense_lowp = d->lowp ? (float *)malloc(q * sizeof(float)) : NULL;
    if (!d->dense_ref || !d->dense_ref_lse || (d->lowp && !d->dense_lowp)) {
        fprintf(stderr, "error: out of host memory for the baseline's reference\n");
        return 1;
    }
    return compute_reference(d, sample, NULL, d->dense_ref, d->dense_ref_lse, d->dense_lowp,
                             " (baseline, dense)");
}

/* Packs host tensor src (count elements) to the dtype and copies it to the device. */
static int upload(attn_problem_data *d, const void *dst, const float *src, size_t count) {
    return attn_device_write((void *)dst, src, count, d->p.dtype, d->staging);
}

static int make_device_data(attn_problem_data *d) {
    const attn_problem *p = &d->p;
    size_t elem = attn_dtype_size(p->dtype);
    size_t q = attn_problem_q_elems(p), k = attn_problem_k_elems(p);
    attn_buffers *b = &d->dev;
    d->mem_before = attn_device_mem_used();
    b->q = attn_device_alloc(q * elem);
    b->k = attn_device_alloc(k * elem);
    b->v = attn_device_alloc(k * elem);
    b->o = attn_device_alloc(q * elem);
    b->lse = (float *)attn_device_alloc(attn_problem_lse_elems(p) * sizeof(float));
    if (!b->q || !b->k || !b->v || !b->o || !b->lse)
        return 1;
    int *cu_q, *cu_k; /* varlen: the kernels read the offsets on the device */
    int err = attn_device_upload_seqlens(p, &cu_q, &cu_k);
    b->cu_seqlens_q = cu_q, b->cu_seqlens_k = cu_k;
    if (err)
        return 1;
    return upload(d, b->q, d->in.q, q) || upload(d, b->k, d->in.k, k) ||
           upload(d, b->v, d->in.v, k);
}

int attn_problem_data_make_with(attn_problem_data *d, const attn_problem *p, const attn_mask *mask,
                                bool dense_too, uint64_t seed, float amplitude, attn_inputs signs,
                                int check_rows, bool quiet, attn_inputs_fn change, void *ctx) {
    memset(d, 0, sizeof *d);
    d->p = *p;
    d->amplitude = amplitude;
    d->inputs = signs;
    d->quiet = quiet;
    return make_host_data(d, mask, dense_too, seed, check_rows, change, ctx) || make_device_data(d);
}

int attn_problem_data_make(attn_problem_data *d, const attn_problem *p, const attn_mask *mask,
                           bool dense_too, uint64_t seed, float amplitude, int check_rows,
                           bool quiet) {
    return attn_problem_data_make_with(d, p, mask, dense_too, seed, amplitude, ATTN_INPUTS_UNIFORM,
                                       check_rows, quiet, NULL, NULL);
}

void attn_problem_data_free(attn_problem_data *d) {
    attn_buffers *b = &d->dev;
    attn_device_free((void *)b->q);
    attn_device_free((void *)b->k);
    attn_device_free((void *)b->v);
    attn_device_free(b->o);
    attn_device_free(b->lse);
    attn_device_free((void *)b->cu_seqlens_q);
    attn_device_free((void *)b->cu_seqlens_k);
    attn_host_inputs_free(&d->in);
    free(d->ref);
    free(d->ref_lse);
    free(d->lowp);
    free(d->out);
    free(d->lse);
    free(d->staging);
    free(d->dense_ref);
    free(d->dense_ref_lse);
    free(d->dense_lowp);
    memset(d, 0, sizeof *d);
}

/* ---- one kernel ------------------------------------------------------------------------------ */

attn_verdict attn_kernel_verdict(const attn_kernel *k, const attn_problem *p, char *why,
                                 size_t len) {
    if (attn_kernel_supports(k, p, !on_simulator, why, len) == 0)
        return ATTN_KERNEL_RUNS;
    return attn_kernel_supports(k, p, true, NULL, 0) == 0 ? ATTN_KERNEL_NEEDS_GPU
                                                          : ATTN_KERNEL_CANNOT;
}

void attn_outcome_init(attn_outcome *o, const attn_example *ex, const attn_kernel *k,
                       const attn_problem *p, const char *device) {
    memset(o, 0, sizeof *o);
    o->rec.example = ex->name;
    o->rec.kernel = k->name;
    o->rec.kernel_id = k->id;
    o->rec.backend = attn_backend_name();
    o->rec.device = device;
    o->rec.problem = *p;
    o->rec.note = o->note;
    o->rec.max_abs_err = NAN; /* not checked, until it is */
}

static void set_status(attn_outcome *o, const char *status, const char *note) {
    o->rec.status = status;
    snprintf(o->note, sizeof o->note, "%s", note);
}

static bool all_nan(const float *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        if (!isnan(x[e]))
            return false;
    return true;
}

/* Copies the results back and checks them (against the dense reference when asked): PASS or
 * FAIL. */
static int check_results(attn_problem_data *d, bool dense, bool quiet, attn_outcome *o) {
    const attn_problem *p = &d->p;
    const float *ref = dense ? d->dense_ref : d->ref, *lowp = dense ? d->dense_lowp : d->lowp;
    const float *ref_lse = dense ? d->dense_ref_lse : d->ref_lse;
    size_t q = attn_problem_q_elems(p), lse = attn_problem_lse_elems(p);
    if (attn_to_host(d->staging, d->dev.o, q * attn_dtype_size(p->dtype)) ||
        attn_to_host(d->lse, d->dev.lse, lse * sizeof(float))) {
        set_status(o, "ERROR", "copying the results back failed");
        return 1;
    }
    attn_unpack(d->out, d->staging, q, p->dtype);
    attn_check_result out = attn_check_output(p, d->out, ref, lowp, d->amplitude);
    bool pass = out.pass;
    o->rec.max_abs_err = out.nonfinite ? INFINITY : out.max_abs_err;
    if (!quiet)
        attn_check_print(stdout, "  output", &out);
    if (all_nan(d->lse, lse)) {
        if (!quiet)
            printf("  lse: not produced by this kernel (buffer still NaN), not checked\n");
    } else {
        attn_check_result l =
            attn_check_lse_allowing(p, d->lse, ref_lse, d->amplitude, d->in.lse_allowance);
        pass = pass && l.pass;
        if (!quiet)
            attn_check_print(stdout, "  lse", &l);
    }
    set_status(o, pass ? "PASS" : "FAIL", "");
    return 0;
}

int attn_launch_synchronized(const attn_kernel *k, const attn_problem *p, const attn_buffers *b,
                             char *note, size_t len) {
    k->launch(p, b, NULL);
    cudaError_t err = cudaGetLastError(); /* launch errors: configuration, shared memory */
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize(); /* errors while running: bad addresses, traps */
    if (err == cudaSuccess)
        err = cudaGetLastError();
    if (err == cudaSuccess)
        return 0;
    snprintf(note, len, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    return 1;
}

/* NaN-fills the outputs, launches, synchronises, checks. 0 when the kernel ran (PASS or FAIL). */
static int launch_and_check(attn_problem_data *d, const attn_kernel *k, const attn_buffers *buf,
                            const attn_run_opts *opts, attn_outcome *o) {
    bool quiet = opts->quiet;
    const attn_problem *p = &d->p;
    if (attn_device_fill_nan(buf->o, attn_problem_q_elems(p) * attn_dtype_size(p->dtype)) ||
        attn_device_fill_nan(buf->lse, attn_problem_lse_elems(p) * sizeof(float))) {
        set_status(o, "ERROR", "filling the outputs with NaN failed");
        return 1;
    }
    attn_device_label_launches(o->rec.example, k->name);
    char note[256];
    if (attn_launch_synchronized(k, p, buf, note, sizeof note) != 0) {
        set_status(o, "ERROR", note);
        if (!quiet)
            printf("  ERROR: %s\n", note);
        return 1;
    }
    return check_results(d, opts->dense_reference && d->dense_ref != NULL, quiet, o);
}

static void time_kernel(attn_problem_data *d, const attn_kernel *k, const attn_buffers *buf,
                        const attn_run_opts *opts, attn_outcome *o) {
    if (attn_time_kernel(k, &d->p, buf, &opts->timing, &o->rec.time) != 0) {
        set_status(o, "ERROR", "a launch failed while timing (see above)");
        return;
    }
    double sec = o->rec.time.median_ms * 1e-3;
    o->rec.timed = true;
    o->rec.tflops = (opts->flops > 0.0 ? opts->flops : attn_problem_flops(&d->p)) / sec * 1e-12;
    o->rec.gbps = attn_problem_min_bytes(&d->p) / sec * 1e-9;
}

void attn_run_kernel(attn_problem_data *d, const attn_kernel *k, const attn_run_opts *opts,
                     attn_outcome *o) {
    char why[256];
    if (opts->refusal != NULL)
        snprintf(why, sizeof why, "%s", opts->refusal);
    if (opts->refusal != NULL ||
        attn_kernel_verdict(k, &d->p, why, sizeof why) != ATTN_KERNEL_RUNS) {
        set_status(o, "SKIP", why);
        if (!opts->quiet)
            printf("  SKIP: %s\n", why);
        return;
    }
    size_t ws = k->workspace_bytes ? k->workspace_bytes(&d->p) : 0;
    attn_buffers buf = d->dev;
    buf.workspace = ws ? attn_device_alloc(ws) : NULL;
    buf.workspace_bytes = ws;
    o->rec.workspace_bytes = (double)ws;
    if (ws != 0 && buf.workspace == NULL) {
        snprintf(why, sizeof why, "cannot allocate %zu bytes of workspace", ws);
        set_status(o, "ERROR", why);
        o->out_of_memory = true;
        return;
    }
    size_t used = attn_device_mem_used();
    o->mem_used = used > d->mem_before ? used - d->mem_before : 0;
    bool ran = launch_and_check(d, k, &buf, opts, o) == 0;
    bool passed = ran && strcmp(o->rec.status, "PASS") == 0;
    if (opts->time && (passed || (ran && opts->time_failed)))
        time_kernel(d, k, &buf, opts, o);
    attn_device_free(buf.workspace);
}
