/* test_tolerance.c — the fp32 tolerance of check.c, measured.
 *
 * A correct fp32 implementation (attn_reference_lowp: plain single-precision attention) must stay
 * at least 4x inside the tolerance, while a kernel with the wrong scale (1/D instead of 1/sqrt(D))
 * or one that drops the last key must fail it.
 *
 *   unit_tolerance_<backend>          a reduced grid (seconds), as a unit test
 *   unit_tolerance_<backend> --full   the grid behind the table in check.c: D in {16,64,128,256},
 *                                     L up to 2048, amplitude 1 and 10, causal and not (~1 min)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "attn/check.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "unit_test.h"

static int keep_all_but_last(const void *ctx, int b, int h, int i, int j) {
    (void)b;
    (void)h;
    (void)i;
    return j != *(const int *)ctx;
}

/* Largest error / tolerance over all elements of out (> 1: the check fails). */
static double worst_ratio(attn_tolerance tol, const float *out, const float *ref, size_t n) {
    double worst = 0.0;
    for (size_t e = 0; e < n; ++e) {
        double ratio = fabs((double)out[e] - ref[e]) / (tol.atol + tol.rtol * fabs(ref[e]));
        if (!(ratio <= worst))
            worst = isnan(ratio) ? INFINITY : ratio;
    }
    return worst;
}

typedef struct measurement {
    double max_err, atol, margin; /* margin: min tolerance / error of the correct implementation */
    double scale_ratio, drop_ratio;
    bool correct_passes, scale_fails, drop_fails;
} measurement;

static measurement measure(int D, int L, float amplitude, bool causal) {
    measurement m = {0};
    attn_problem p;
    attn_problem_init(&p, 1, 1, L, L, D);
    p.causal = causal;
    attn_host_inputs in;
    attn_host_inputs_make(&in, &p, 1000u + (uint64_t)(D * 7 + L), amplitude);
    size_t n = in.q_elems;
    float *ref = malloc(n * 4), *out = malloc(n * 4);
    attn_tolerance tol = attn_tolerance_f32(&p, amplitude);
    m.atol = tol.atol;
    attn_reference(&p, NULL, in.q, in.k, in.v, ref, NULL);

    attn_reference_lowp(&p, NULL, in.q, in.k, in.v, out);
    for (size_t e = 0; e < n; ++e)
        m.max_err = fmax(m.max_err, fabs((double)out[e] - ref[e]));
    m.margin = 1.0 / worst_ratio(tol, out, ref, n);
    m.correct_passes = attn_check_output(&p, out, ref, NULL, amplitude).pass;

    attn_problem wrong = p;
    wrong.scale = 1.0f / (float)D;
    attn_reference_lowp(&wrong, NULL, in.q, in.k, in.v, out);
    m.scale_ratio = worst_ratio(tol, out, ref, n);
    m.scale_fails = !attn_check_output(&p, out, ref, NULL, amplitude).pass;

    int last = L - 1;
    attn_mask drop = {ATTN_MASK_PREDICATE, keep_all_but_last, &last, NULL, NULL};
    attn_reference_lowp(&p, &drop, in.q, in.k, in.v, out);
    m.drop_ratio = worst_ratio(tol, out, ref, n);
    m.drop_fails = !attn_check_output(&p, out, ref, NULL, amplitude).pass;

    free(ref);
    free(out);
    attn_host_inputs_free(&in);
    return m;
}

/* Runs the grid, printing a row per case and checking the requirements:
 *   the correct implementation passes with margin >= 4;
 *   the wrong scale fails (undetectable with one key: softmax of one score is 1 at any scale);
 *   a dropped key fails at amplitude 1 (at 10 the last key often weighs ~e^-30 and no check could
 *   see it go). */
static void run_grid(const int *Ds, int nD, const int *Ls, int nL) {
    static const float amps[2] = {1.0f, 10.0f};
    printf("%5s %5s %4s %6s | %9s %9s %8s | %9s %9s\n", "D", "L", "a", "causal", "max err", "atol",
           "margin", "scale", "drop");
    for (int c = 0; c < 2; ++c)
        for (int a = 0; a < 2; ++a)
            for (int d = 0; d < nD; ++d)
                for (int l = 0; l < nL; ++l) {
                    measurement m = measure(Ds[d], Ls[l], amps[a], c);
                    printf("%5d %5d %4g %6s | %9.1e %9.1e %8.0f | %9.1e %9.1e\n", Ds[d], Ls[l],
                           (double)amps[a], c ? "yes" : "no", m.max_err, m.atol, m.margin,
                           m.scale_ratio, m.drop_ratio);
                    CHECK(m.correct_passes);
                    CHECK(m.margin >= 4.0);
                    if (Ls[l] > 1)
                        CHECK(m.scale_fails && m.scale_ratio > 1.0);
                    if (amps[a] == 1.0f)
                        CHECK(m.drop_fails && m.drop_ratio > 1.0);
                }
}

/* The tolerance's shape: it grows with D, amplitude and Lk, and stays below a tenth of the
 * amplitude. */
static void test_tolerance_shape(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 1, 128, 128, 64);
    attn_tolerance t1 = attn_tolerance_f32(&p, 1.0), t10 = attn_tolerance_f32(&p, 10.0);
    CHECK(t1.atol > 0 && t10.atol > 10 * t1.atol);
    CHECK_NEAR(t1.rtol, 1e-4, 0);
    attn_problem_init(&p, 1, 1, 128, 128, 256);
    CHECK(attn_tolerance_f32(&p, 1.0).atol > t1.atol);
    attn_problem_init(&p, 1, 1, 128, 8192, 64);
    CHECK(attn_tolerance_f32(&p, 1.0).atol > t1.atol);
    CHECK(attn_tolerance_f32(&p, 1000.0).atol <= 100.0);
}

int main(int argc, char **argv) {
    static const int Ds[4] = {16, 64, 128, 256};
    static const int full_Ls[4] = {1, 100, 512, 2048}, unit_Ls[3] = {1, 37, 300};
    test_tolerance_shape();
    if (argc > 1 && strcmp(argv[1], "--full") == 0)
        run_grid(Ds, 4, full_Ls, 4);
    else
        run_grid(Ds, 4, unit_Ls, 3);
    return unit_finish();
}
