/* test_bench.c — statistics of timing samples, the byte model, and (on the simulator, where a
 * launcher may run on the host) the timing loop: warm-up and timed launches are counted, a
 * launch error is reported and ends the loop, adaptive repetition stops at the spread goal or
 * the cap; and the runner (attn/runner.h) times a kernel that passes, and one that fails its
 * check only when asked (the benchmark never reports a wrong kernel's time). */
#include <stdlib.h>

#include "attn/bench.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/runner.h"
#include "unit_test.h"

static void test_stats(void) {
    double odd[5] = {5.0, 1.0, 4.0, 2.0, 3.0};
    attn_stats s = attn_stats_of(odd, 5);
    CHECK(s.reps == 5 && s.median_ms == 3.0 && s.min_ms == 1.0 && s.max_ms == 5.0);
    CHECK(s.mean_ms == 3.0);
    CHECK(odd[0] == 1.0 && odd[4] == 5.0); /* sorted in place */
    double even[4] = {10.0, 1.0, 4.0, 2.0};
    s = attn_stats_of(even, 4);
    CHECK(s.median_ms == 3.0 && s.min_ms == 1.0 && s.max_ms == 10.0 && s.mean_ms == 4.25);
    double one[1] = {7.5};
    s = attn_stats_of(one, 1);
    CHECK(s.median_ms == 7.5 && s.min_ms == 7.5 && s.max_ms == 7.5 && s.reps == 1);
    s = attn_stats_of(NULL, 0);
    CHECK(s.reps == 0 && s.median_ms == 0.0);
    CHECK(attn_stats_of(odd, 3).spread == 0.0); /* too few samples for quartiles */
    double eight[8] = {8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0};
    s = attn_stats_of(eight, 8); /* q1 = sorted[2] = 3, q3 = sorted[6] = 7, median 4.5 */
    CHECK(s.spread == (7.0 - 3.0) / 4.5);
}

static void test_min_bytes(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 5, 7, 8);
    /* fp32: Q and O 2*3*5*8 each, K and V 2*3*7*8 each, 4 bytes; LSE 2*3*5 floats */
    CHECK(attn_problem_min_bytes(&p) == (2.0 * 240 + 2.0 * 336) * 4 + 30 * 4);
    p.dtype = ATTN_F16;
    CHECK(attn_problem_min_bytes(&p) == (2.0 * 240 + 2.0 * 336) * 2 + 30 * 4);
}

static int launches;

static void count_launch(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    (void)b;
    (void)s;
    launches++;
}

/* Makes the runtime record an error, as a bad kernel launch would. */
static void failing_launch(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    (void)b;
    (void)s;
    launches++;
    cudaMemset((void *)&launches, 0, sizeof launches); /* not device memory: an error */
}

static void test_timing_on_simulator(void) {
    if (strcmp(attn_backend_name(), "sim") != 0)
        return;
    attn_problem p;
    attn_problem_init(&p, 1, 1, 4, 4, 4);
    attn_buffers buf;
    memset(&buf, 0, sizeof buf);
    attn_kernel k = {1,    "counter", "counts", count_launch, {1u, 4, 1, true, true, false},
                     NULL, 0,         NULL};
    attn_timing_opts opts = {2, 5, 1, 0, 0.0, 0.0};
    attn_stats st;
    launches = 0;
    CHECK_EQ(attn_time_kernel(&k, &p, &buf, &opts, &st), 0);
    CHECK_EQ(launches, 7);
    CHECK(st.reps == 5 && st.min_ms >= 0.0 && st.min_ms <= st.median_ms &&
          st.median_ms <= st.max_ms);
    opts.reps = 0;
    CHECK(attn_time_kernel(&k, &p, &buf, &opts, &st) != 0);
    k.launch = failing_launch;
    opts.reps = 5;
    opts.warmup = 0;
    launches = 0;
    CHECK(attn_time_kernel(&k, &p, &buf, &opts, &st) != 0);
    CHECK_EQ(launches, 1);                    /* stops at the first failed launch */
    CHECK(cudaGetLastError() == cudaSuccess); /* the error was consumed and reported */

    /* Adaptive repetition: batches until the spread goal (a goal of 0 is never met: the cap
     * stops it; a huge goal is met after the first batch). */
    k.launch = count_launch;
    opts = (attn_timing_opts){0, 4, 1, 10, 0.0, 0.0};
    launches = 0;
    CHECK_EQ(attn_time_kernel(&k, &p, &buf, &opts, &st), 0);
    CHECK_EQ(launches, 10); /* batches of 4, 4, then the 2 left to the cap */
    CHECK_EQ(st.reps, 10);
    opts.target_spread = 1e30;
    launches = 0;
    CHECK_EQ(attn_time_kernel(&k, &p, &buf, &opts, &st), 0);
    CHECK_EQ(launches, 4);
}

/* The correct answer written on the host (device pointers are host pointers on the simulator). */
static void host_correct(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)s;
    launches++;
    attn_reference(p, NULL, (const float *)b->q, (const float *)b->k, (const float *)b->v,
                   (float *)b->o, b->lse);
}

static void host_wrong(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    host_correct(p, b, s);
    ((float *)b->o)[0] += 1.0f;
}

static void test_runner_times_only_passing(void) {
    if (strcmp(attn_backend_name(), "sim") != 0)
        return;
    static const attn_kernel kernels[] = {
        {1, "right", "correct", host_correct, {1u, 64, 1, true, false, false}, NULL, 0, NULL},
        {2, "wrong", "one element off", host_wrong, {1u, 64, 1, true, false, false}, NULL, 0, NULL},
        {3,
         "f16_only",
         "cannot run f32",
         host_correct,
         {2u, 64, 1, true, false, false},
         NULL,
         0,
         NULL}};
    static const attn_example ex = {.name = "test",
                                    .summary = "runner",
                                    ATTN_KERNELS(kernels),
                                    .defaults = {.gpu = {1, 1, 8, 8}, .sim = {1, 1, 8, 8}}};
    attn_problem p;
    attn_problem_init(&p, 1, 2, 9, 9, 8);
    attn_problem_data d;
    CHECK_EQ(attn_problem_data_make(&d, &p, NULL, false, 1, 1.0f, 0, true), 0);
    attn_run_opts opts = {.time = true, .timing = {0, 3, 1, 0, 0.0, 0.0}, .quiet = true};
    attn_outcome o;
    launches = 0;
    attn_outcome_init(&o, &ex, &kernels[0], &p, "sim");
    attn_run_kernel(&d, &kernels[0], &opts, &o);
    CHECK(strcmp(o.rec.status, "PASS") == 0 && o.rec.timed && o.rec.time.reps == 3);
    CHECK_EQ(launches, 4); /* the checked launch, then 3 timed */
    CHECK(o.mem_used > 0);
    launches = 0;
    attn_outcome_init(&o, &ex, &kernels[1], &p, "sim");
    attn_run_kernel(&d, &kernels[1], &opts, &o);
    CHECK(strcmp(o.rec.status, "FAIL") == 0 && !o.rec.timed);
    CHECK_EQ(launches, 1);   /* checked, never timed */
    opts.time_failed = true; /* what the examples do */
    attn_outcome_init(&o, &ex, &kernels[1], &p, "sim");
    attn_run_kernel(&d, &kernels[1], &opts, &o);
    CHECK(strcmp(o.rec.status, "FAIL") == 0 && o.rec.timed);
    attn_outcome_init(&o, &ex, &kernels[2], &p, "sim");
    attn_run_kernel(&d, &kernels[2], &opts, &o);
    CHECK(strcmp(o.rec.status, "SKIP") == 0 && strstr(o.note, "f32") != NULL && !o.rec.timed);
    attn_problem_data_free(&d);
}

int main(void) {
    test_stats();
    test_min_bytes();
    test_timing_on_simulator();
    test_runner_times_only_passing();
    return unit_finish();
}
