/* bench.c — timing of kernel launches with CUDA events (wall clock on the simulator). */
#include "attn/bench.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn/device.h"

#ifdef ATTN_BACKEND_SIM
static const bool simulated = true; /* no L2 to flush: the simulator has no caches to model */
#else
static const bool simulated = false;
#endif

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

attn_stats attn_stats_of(double *samples_ms, int n) {
    attn_stats s = {0};
    if (n <= 0)
        return s;
    qsort(samples_ms, (size_t)n, sizeof *samples_ms, compare_doubles);
    double sum = 0.0;
    for (int r = 0; r < n; ++r)
        sum += samples_ms[r];
    s.reps = n;
    s.min_ms = samples_ms[0];
    s.max_ms = samples_ms[n - 1];
    s.median_ms = n % 2 ? samples_ms[n / 2] : 0.5 * (samples_ms[n / 2 - 1] + samples_ms[n / 2]);
    s.mean_ms = sum / n;
    if (n >= 4 && s.median_ms > 0.0)
        s.spread = (samples_ms[3 * n / 4] - samples_ms[n / 4]) / s.median_ms;
    return s;
}

/* One launch (of a chunked stage's kernel, one per chunk: attn_buffers.chunks); a launch error
 * (bad configuration, too much shared memory, ...) is reported with the kernel's name. */
static int launch_checked(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                          cudaStream_t stream) {
    char what[160];
    if (buf->chunks > 0) {
        attn_buffers one = *buf;
        for (one.chunk = 0; one.chunk < buf->chunks; ++one.chunk)
            k->launch(p, &one, stream);
    } else {
        k->launch(p, buf, stream);
    }
    snprintf(what, sizeof what, "launch of kernel '%s'", k->name);
    return attn_cuda_report(cudaGetLastError(), what, __FILE__, __LINE__);
}

/* The buffer written before each timed launch so that the kernel starts with a cold L2, as it
 * would inside a model. Allocated on first use, 2x the L2 size, and kept for the life of the
 * process: timing loops run many times and reallocating it each time would cost more than it. */
static void *flush_buf;
static size_t flush_bytes;

int attn_bench_flush_init(void) {
    if (flush_buf != NULL || simulated)
        return 0;
    int dev = 0, l2 = 0;
    ATTN_CUDA_TRY(cudaGetDevice(&dev));
    ATTN_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    if (l2 <= 0)
        return 0; /* no L2 reported: nothing to flush */
    flush_bytes = 2 * (size_t)l2;
    flush_buf = attn_device_alloc(flush_bytes);
    return flush_buf == NULL;
}

/* One timed repetition: flush (outside the timed interval), then start, launch, stop. */
static int time_one(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                    bool flush, cudaEvent_t start, cudaEvent_t stop, int rep, double *ms) {
    cudaStream_t stream = NULL; /* the default stream */
    float elapsed = 0.0f;
    if (flush && flush_buf != NULL)
        ATTN_CUDA_TRY(cudaMemsetAsync(flush_buf, rep & 0xff, flush_bytes, stream));
    ATTN_CUDA_TRY(cudaEventRecord(start, stream));
    if (launch_checked(k, p, buf, stream))
        return 1;
    ATTN_CUDA_TRY(cudaEventRecord(stop, stream));
    ATTN_CUDA_TRY(cudaEventSynchronize(stop)); /* also returns errors raised while running */
    ATTN_CUDA_TRY(cudaEventElapsedTime(&elapsed, start, stop));
    *ms = elapsed;
    return 0;
}

/* The timed repetitions, with events created and destroyed around them. */
static int time_reps(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                     bool flush, int reps, double *samples) {
    cudaEvent_t start = NULL, stop = NULL;
    int rc =
        attn_cuda_report(cudaEventCreate(&start), "cudaEventCreate(&start)", __FILE__, __LINE__) ||
        attn_cuda_report(cudaEventCreate(&stop), "cudaEventCreate(&stop)", __FILE__, __LINE__);
    for (int r = 0; rc == 0 && r < reps; ++r)
        rc = time_one(k, p, buf, flush, start, stop, r, &samples[r]);
    if (start != NULL)
        cudaEventDestroy(start);
    if (stop != NULL)
        cudaEventDestroy(stop);
    return rc;
}

int attn_time_kernel(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                     const attn_timing_opts *opts, attn_stats *out) {
    if (opts->reps < 1) {
        fprintf(stderr, "error: timing needs at least one repetition (got %d)\n", opts->reps);
        return 1;
    }
    for (int w = 0; w < opts->warmup; ++w)
        if (launch_checked(k, p, buf, NULL))
            return 1;
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    bool flush = opts->flush_l2 && !simulated;
    if (flush && attn_bench_flush_init())
        return 1;
    int cap = opts->max_reps > opts->reps ? opts->max_reps : opts->reps;
    double *samples = (double *)malloc((size_t)cap * sizeof(double));
    if (samples == NULL) {
        fprintf(stderr, "error: out of host memory for %d timing samples\n", cap);
        return 1;
    }
    int n = 0, rc = 0;
    double total_ms = 0.0;
    do { /* batches of opts->reps: one batch unless adaptive */
        int batch = cap - n < opts->reps ? cap - n : opts->reps;
        rc = time_reps(k, p, buf, flush, batch, samples + n);
        for (int r = n; rc == 0 && r < n + batch; ++r)
            total_ms += samples[r];
        n += batch;
        if (rc == 0)
            *out = attn_stats_of(samples, n);
    } while (rc == 0 && n < cap && out->spread > opts->target_spread &&
             (opts->max_seconds <= 0.0 || total_ms < 1e3 * opts->max_seconds));
    free(samples);
    return rc;
}

double attn_problem_min_bytes(const attn_problem *p) {
    double elem = (double)attn_dtype_size(p->dtype);
    double qo = 2.0 * (double)attn_problem_q_elems(p); /* Q read, O written */
    double kv = 2.0 * (double)attn_problem_k_elems(p); /* K and V read */
    return (qo + kv) * elem + (double)attn_problem_lse_elems(p) * sizeof(float);
}
