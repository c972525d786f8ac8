/* test_tolerance_backward.c — the backward pass's fp32 tolerance (reference_backward.c: each
 * gradient element's bound, derived from the rounding errors of an fp32 backward), measured.
 *
 * A correct fp32 backward (attn_reference_backward_lowp in fp32: the formulas in single precision)
 * must stay at least 4x inside the tolerance of every element, while a backward with the wrong
 * scale (1/D instead of 1/sqrt(D)) or one that drops the last key must fail it.
 *
 *   unit_tolerance_backward_<backend>          a reduced grid (about a second):
 * unit.tolerance_backward unit_tolerance_backward_<backend> --full   the grid of the table in
 *                                   examples/07_flash_attention_backward/README.md ("How it is
 *                                   checked"): D in {16, 64, 128}, L up to 1024, amplitude 1 and
 * 10, causal and not Prints one line per problem: the correct backward's largest error and its
 * margin (smallest tolerance / error), and the wrong ones' largest error / tolerance. Exit 1 if a
 * margin is below 4 or a wrong backward passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/reference.h"
#include "attn/tensor.h"

static int keep_all_but_last(const void *ctx, int b, int h, int i, int j) {
    (void)b, (void)h, (void)i;
    return j != *(const int *)ctx;
}

/* Largest |got - ref| / tol over the three gradients (> 1: the check fails); each gradient's
 * own in per[3] (may be NULL). */
static double worst_ratio(const attn_grads *got, const attn_grads *ref, const attn_grads *tol,
                          size_t qn, size_t kn, double *max_err, double *per) {
    double worst = 0.0;
    const float *g[3] = {got->dq, got->dk, got->dv}, *r[3] = {ref->dq, ref->dk, ref->dv};
    const float *t[3] = {tol->dq, tol->dk, tol->dv};
    for (int x = 0; x < 3; ++x) {
        double w = 0.0;
        for (size_t e = 0; e < (x ? kn : qn); ++e) {
            const double err = fabs((double)g[x][e] - r[x][e]);
            const double ratio = t[x][e] > 0.0f ? err / t[x][e] : (err == 0.0 ? 0.0 : INFINITY);
            if (max_err != NULL && err > *max_err)
                *max_err = err;
            if (!(ratio <= w))
                w = isnan(ratio) ? INFINITY : ratio;
        }
        worst = w > worst ? w : worst;
        if (per != NULL)
            per[x] = w;
    }
    return worst;
}

/* The tolerance's size, pinned from above: over the grid (L > 1, where every gradient is
 * nonzero), each gradient's margin (smallest tolerance / error of the correct fp32 backward) at
 * the problem where it is largest stays below loosest[]: about 1.5 to 2.5 x the largest measured
 * over the --full grid (dQ 546, dK 695, dV 87; the reduced grid: 232, 294, 43). A tolerance
 * derived too loose (a factor of 10 on one gradient's, say) shows there: "at least 4" alone would
 * accept any looser bound. */
static const double loosest[3] = {1000.0, 1000.0, 200.0};
static double largest_margin[3];

static attn_grads alloc3(size_t qn, size_t kn) {
    attn_grads g = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    return g;
}
static void free3(attn_grads *g) { free(g->dq), free(g->dk), free(g->dv); }

static int measure(int D, int L, float amplitude, bool causal) {
    attn_problem p;
    attn_problem_init(&p, 1, 1, L, L, D);
    p.causal = causal;
    const size_t qn = attn_problem_q_elems(&p), kn = attn_problem_k_elems(&p);
    float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *g = malloc(qn * 4);
    const uint64_t seed = 1000u + (uint64_t)(D * 7 + L);
    attn_fill_uniform(q, qn, seed, 0, amplitude, ATTN_F32);
    attn_fill_uniform(k, kn, seed, 1, amplitude, ATTN_F32);
    attn_fill_uniform(v, kn, seed, 2, amplitude, ATTN_F32);
    attn_fill_uniform(g, qn, seed, 3, 1.0f, ATTN_F32);
    attn_grads ref = alloc3(qn, kn), tol = alloc3(qn, kn), out = alloc3(qn, kn);
    attn_reference_backward(&p, NULL, q, k, v, g, NULL, &ref, NULL, &tol);

    double max_err = 0.0, per[3];
    attn_reference_backward_lowp(&p, NULL, q, k, v, g, NULL, &out);
    const double margin = 1.0 / worst_ratio(&out, &ref, &tol, qn, kn, &max_err, per);
    for (int x = 0; L > 1 && x < 3; ++x)
        largest_margin[x] = 1.0 / per[x] > largest_margin[x] ? 1.0 / per[x] : largest_margin[x];

    attn_problem wrong = p; /* the wrong scale: 1/D */
    wrong.scale = 1.0f / (float)D;
    attn_reference_backward_lowp(&wrong, NULL, q, k, v, g, NULL, &out);
    const double scale_ratio = worst_ratio(&out, &ref, &tol, qn, kn, NULL, NULL);

    int last = L - 1; /* the last key dropped */
    attn_mask drop = {ATTN_MASK_PREDICATE, keep_all_but_last, &last, NULL, NULL};
    attn_reference_backward_lowp(&p, &drop, q, k, v, g, NULL, &out);
    const double drop_ratio = worst_ratio(&out, &ref, &tol, qn, kn, NULL, NULL);

    /* with a single key the scale changes nothing (P = 1, dS = 0); at amplitude 10 the last key
     * often weighs e^-30 and dropping it is invisible to any check (as for the forward) */
    const bool ok = margin >= 4.0 && (L == 1 || scale_ratio > 1.0) &&
                    (L == 1 || amplitude > 1.0f || drop_ratio > 1.0);
    printf("%5d %5d %4g %-6s | %9.2e %7.0f | %9.2e %9.2e %s\n", D, L, (double)amplitude,
           causal ? "causal" : "", max_err, margin, scale_ratio, drop_ratio, ok ? "" : "FAIL");
    free3(&ref), free3(&tol), free3(&out);
    free(q), free(k), free(v), free(g);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    const bool full = argc > 1 && strcmp(argv[1], "--full") == 0;
    static const int dims_full[] = {16, 64, 128}, lens_full[] = {1, 100, 512, 1024};
    static const int dims_ci[] = {16, 64}, lens_ci[] = {1, 100};
    const int *dims = full ? dims_full : dims_ci, *lens = full ? lens_full : lens_ci;
    const int nd = full ? 3 : 2, nl = full ? 4 : 2;
    static const float amps[] = {1.0f, 10.0f};
    int failures = 0, problems = 0;
    printf("    D     L    a        | correct backward: | wrong scale, drop last key:\n");
    printf("                        |   max err  margin | largest error / tolerance\n");
    for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 2; ++c)
            for (int x = 0; x < nd; ++x)
                for (int y = 0; y < nl; ++y)
                    failures += measure(dims[x], lens[y], amps[a], c == 1), ++problems;
    static const char *const names[3] = {"dQ", "dK", "dV"};
    for (int x = 0; x < 3; ++x) {
        const bool ok = largest_margin[x] < loosest[x];
        printf("largest %s margin %.0f (below %.0f: the tolerance is not looser than derived)%s\n",
               names[x], largest_margin[x], loosest[x], ok ? "" : " FAIL");
        failures += !ok, ++problems;
    }
    printf("%d passed, %d failed\n", problems - failures, failures);
    return failures ? 1 : 0;
}
