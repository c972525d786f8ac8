/* attn/bench.h — timing of launches: CUDA events (wall clock on the simulator), warm-up,
 * repetitions, median/min/max, L2 flush between repetitions on a GPU.
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
} attn_stats;

/* Median/min/max/mean of n samples (the array is sorted in place). */
attn_stats attn_stats_of(double *samples_ms, int n);

typedef struct attn_timing_opts {
    int warmup;   /* untimed launches first */
    int reps;     /* timed launches */
    int flush_l2; /* write a buffer of 2x the L2 size before each timed launch (GPU only) */
} attn_timing_opts;

/* Times k->launch(p, buf, stream) per the options. Returns 0 and fills *out, or 1 after a
 * reported error (a launch or runtime failure). */
int attn_time_kernel(const attn_kernel *k, const attn_problem *p, const attn_buffers *buf,
                     const attn_timing_opts *opts, attn_stats *out);

/* Bytes the kernel must move at least: Q, K, V read once and O written once (+ LSE). */
double attn_problem_min_bytes(const attn_problem *p);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BENCH_H */
