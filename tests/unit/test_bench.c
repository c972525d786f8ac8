/* test_bench.c — statistics of timing samples, the byte model, and (on the simulator, where a
 * launcher may run on the host) the timing loop: warm-up and timed launches are counted, and a
 * launch error is reported and ends the loop. */
#include <stdlib.h>

#include "attn/bench.h"
#include "attn/device.h"
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
    attn_kernel k = {1, "counter", "counts", count_launch, {1u, 4, 1, true, true, false}, NULL};
    attn_timing_opts opts = {2, 5, 1};
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
}

int main(void) {
    test_stats();
    test_min_bytes();
    test_timing_on_simulator();
    return unit_finish();
}
