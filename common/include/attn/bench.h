/* attn/bench.h — timing of launches: CUDA events (wall clock on the simulator), warm-up,
 * repetitions (a fixed number, or until the spread is small), median/min/max, L2 flush between
 * repetitions on a GPU.
 */
#ifndef ATTN_BENCH_H
#define ATTN_BENCH_H

#include <stddef.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_stats {
    int reps;
    double median_ms, min_ms, max_ms, mean_ms;
    double spread; /* relative interquartile range (q3 - q1) / median; 0 for fewer than 4 samples */
} attn_stats;

/* Median/min/max/mean/spread of n samples (the array is sorted in place). Quartiles are the
 * samples at ranks floor(n/4) and floor(3n/4) of the sorted array. */
attn_stats attn_stats_of(double *samples_ms, int n);

typedef struct attn_timing_opts {
    int warmup;   /* untimed launches first */
    int reps;     /* timed launches (with max_reps: launches per batch) */
    int flush_l2; /* write a buffer of 2x the L2 size before each timed launch (GPU only) */
    /* Adaptive repetition (0 = off: exactly `reps`): after each batch of `reps` launches, stop
     * when the spread of all samples so far is at most target_spread, when max_reps samples are
     * taken, or when the timed launches have taken max_seconds in total (0 = no limit). */
    int max_reps;
    double target_spread;
    double max_seconds;
} attn_timing_opts;

/* Times k->launch(p, buf, stream) per the options (a chunked stage's kernel, buf->chunks > 0:
 * one launch per chunk make one timed repetition). Returns 0 and fills *out, or 1 after a
 * reported error (a launch or runtime failure). */
int attn_time_kernel(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                     const attn_timing_opts *opts, attn_stats *out);

/* Allocates the L2 flush buffer now (it is otherwise allocated on the first flushed timing), so
 * that device memory measured afterwards does not change when it appears. 0, or 1 after a
 * reported error. Nothing to do on the simulator. */
int attn_bench_flush_init(void);

/* Bytes the kernel must move at least: Q, K, V read once and O written once (+ LSE). */
double attn_problem_min_bytes(const attn_problem *p);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BENCH_H */
