/* test_reference_backward.c — the backward oracle itself is proven: attn_reference_backward (the
 * gradients from their formulas, in double precision; reference_backward.c) against central finite
 * differences of a double-precision forward written here independently, on tiny shapes:
 *
 *     dL/dx ~ (L(x + h) - L(x - h)) / 2h,    L(Q, K, V) = sum(dO * O(Q, K, V)),  h = 1e-5
 *
 * for every element of Q, K and V (truncation error O(h^2) ~ 1e-10, cancellation ~ 1e-11; the
 * reference's gradients are rounded to fp32: relative 6e-8). Also: the LSE it consumes against
 * the harness's forward reference (attn_reference), rows that see no key (LSE -inf, every
 * gradient exactly 0), slices left out (NaN), and the fp32 same-precision backward close to it.
 * Shapes: dense, causal with Lq > Lk (empty rows) and Lq < Lk, a predicate mask, a CSR mask,
 * and a varlen batch with an empty sequence. Exit 0 when all hold, else 1 naming the case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/reference.h"
#include "attn/tensor.h"

static int failures = 0, checks = 0;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            printf("  FAIL: " __VA_ARGS__);                                                        \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The loss sum(dO * O) of the forward, in double, from the definition: per row a softmax over the
 * visible keys (a row that sees none outputs 0). */
static double loss(const attn_problem *p, const attn_mask *mask, const double *q, const double *k,
                   const double *v, const double *dout) {
    double total = 0.0;
    for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r)) {
        const int Lk = attn_problem_seq_k(p, r.b);
        double m = -INFINITY, s[64];
        for (int j = 0; j < Lk; ++j) {
            s[j] = -INFINITY;
            if (!attn_entry_visible(p, mask, r.b, r.h, r.i, j))
                continue;
            const double *kj = k + attn_problem_row_offset(p, false, r.b, r.h, j);
            double acc = 0.0;
            for (int d = 0; d < p->D; ++d)
                acc += q[r.offset + d] * kj[d];
            s[j] = p->scale * acc;
            m = s[j] > m ? s[j] : m;
        }
        if (m == -INFINITY)
            continue;
        double l = 0.0;
        for (int j = 0; j < Lk; ++j)
            l += exp(s[j] - m);
        for (int j = 0; j < Lk; ++j) {
            if (s[j] == -INFINITY)
                continue;
            const double *vj = v + attn_problem_row_offset(p, false, r.b, r.h, j);
            const double pj = exp(s[j] - m) / l;
            for (int d = 0; d < p->D; ++d)
                total += dout[r.offset + d] * pj * vj[d];
        }
    }
    return total;
}

static double *to_double(const float *x, size_t n) {
    double *y = malloc(n * sizeof *y);
    for (size_t e = 0; y && e < n; ++e)
        y[e] = x[e];
    return y;
}

/* Central differences of the loss in every element of x (one of q, k, v) against grad. */
static double fd_error(const attn_problem *p, const attn_mask *mask, double *x, size_t n,
                       const float *grad, double *dq, double *dk, double *dv, double *dout) {
    const double h = 1e-5;
    double worst = 0.0;
    for (size_t e = 0; e < n; ++e) {
        const double x0 = x[e];
        x[e] = x0 + h;
        const double up = loss(p, mask, dq, dk, dv, dout);
        x[e] = x0 - h;
        const double down = loss(p, mask, dq, dk, dv, dout);
        x[e] = x0;
        const double fd = (up - down) / (2 * h);
        const double err = fabs(grad[e] - fd) / (1e-6 + fabs(fd));
        worst = !(err <= worst) ? err : worst; /* NaN wins */
    }
    return worst;
}

static int keep_band(const void *ctx, int b, int h, int i, int j) {
    (void)ctx, (void)b;
    return abs(i - j) <= 1 + h; /* differs per head */
}

static void check(const char *name, const attn_problem *p, const attn_mask *mask) {
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t ln = attn_problem_lse_elems(p);
    float *q = malloc(qn * 4), *k = malloc(kn * 4), *v = malloc(kn * 4), *g = malloc(qn * 4);
    attn_fill_uniform(q, qn, 7, 0, 1.5f, ATTN_F32);
    attn_fill_uniform(k, kn, 7, 1, 1.5f, ATTN_F32);
    attn_fill_uniform(v, kn, 7, 2, 1.0f, ATTN_F32);
    attn_fill_uniform(g, qn, 7, 3, 1.0f, ATTN_F32);
    attn_grads ref = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    attn_grads tol = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    attn_grads lowp = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    float *lse = malloc(ln * 4 + 4), *lse_fwd = malloc(ln * 4 + 4), *o = malloc(qn * 4);
    EXPECT(attn_reference_backward(p, mask, q, k, v, g, NULL, &ref, lse, &tol) == 0,
           "%s: reference", name);
    EXPECT(attn_reference_backward_lowp(p, mask, q, k, v, g, NULL, &lowp) == 0, "%s: lowp", name);
    EXPECT(attn_reference(p, mask, q, k, v, o, lse_fwd) == 0, "%s: forward", name);

    double *qd = to_double(q, qn), *kd = to_double(k, kn), *vd = to_double(v, kn);
    double *gd = to_double(g, qn);
    const double eq = fd_error(p, mask, qd, qn, ref.dq, qd, kd, vd, gd);
    const double ek = fd_error(p, mask, kd, kn, ref.dk, qd, kd, vd, gd);
    const double ev = fd_error(p, mask, vd, kn, ref.dv, qd, kd, vd, gd);
    printf("%-24s finite differences: dQ %.1e, dK %.1e, dV %.1e (relative)\n", name, eq, ek, ev);
    EXPECT(eq <= 1e-6 && ek <= 1e-6 && ev <= 1e-6, "%s: gradient vs finite differences", name);

    /* the LSE it consumes is the forward's; a row that sees no key: -inf and a zero dQ row */
    int lse_bad = 0, empty = 0, nonzero = 0;
    for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r)) {
        const float a = lse[r.lse_index], b = lse_fwd[r.lse_index];
        lse_bad += !(a == b || fabsf(a - b) <= 1e-6f * (1.0f + fabsf(b)));
        if (a != -INFINITY)
            continue;
        empty++;
        for (int d = 0; d < p->D; ++d)
            nonzero += ref.dq[r.offset + d] != 0.0f;
    }
    EXPECT(lse_bad == 0, "%s: %d LSE values differ from attn_reference's", name, lse_bad);
    EXPECT(nonzero == 0, "%s: %d dQ elements of empty rows are not 0", name, nonzero);
    /* the fp32 same-precision backward is within its tolerance, and the tolerance is finite */
    int lowp_bad = 0, tol_bad = 0;
    const float *a3[3] = {lowp.dq, lowp.dk, lowp.dv}, *r3[3] = {ref.dq, ref.dk, ref.dv};
    const float *t3[3] = {tol.dq, tol.dk, tol.dv};
    for (int t = 0; t < 3; ++t)
        for (size_t e = 0; e < (t ? kn : qn); ++e) {
            lowp_bad += !(fabsf(a3[t][e] - r3[t][e]) <= t3[t][e]);
            tol_bad += !(t3[t][e] >= 0.0f && isfinite(t3[t][e]));
        }
    EXPECT(lowp_bad == 0, "%s: %d fp32 lowp elements outside the tolerance", name, lowp_bad);
    EXPECT(tol_bad == 0, "%s: %d tolerances negative or not finite", name, tol_bad);
    printf("%-24s %d empty rows, LSE and fp32 backward agree\n", "", empty);

    /* a slice left out is NaN (not checked); the others are unchanged */
    if (p->B * p->H > 1) {
        uint8_t *slices = calloc((size_t)p->B * p->H, 1);
        slices[p->B * p->H - 1] = 1;
        attn_grads part = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
        EXPECT(attn_reference_backward(p, mask, q, k, v, g, slices, &part, NULL, NULL) == 0, "%s",
               name);
        int wrong = 0;
        for (attn_row r = attn_row_first(p); r.valid; attn_row_next(p, &r)) {
            const bool on = slices[r.b * p->H + r.h];
            for (int d = 0; d < p->D; ++d)
                wrong += on ? part.dq[r.offset + d] != ref.dq[r.offset + d]
                            : !isnan(part.dq[r.offset + d]);
        }
        EXPECT(wrong == 0, "%s: %d dQ elements wrong with one slice selected", name, wrong);
        free(part.dq), free(part.dk), free(part.dv), free(slices);
    }
    free(q), free(k), free(v), free(g), free(lse), free(lse_fwd), free(o);
    free(qd), free(kd), free(vd), free(gd);
    free(ref.dq), free(ref.dk), free(ref.dv), free(tol.dq), free(tol.dk), free(tol.dv);
    free(lowp.dq), free(lowp.dk), free(lowp.dv);
}

int main(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 2, 3, 5, 4);
    check("dense 3x5", &p, NULL);

    attn_problem_init(&p, 2, 1, 5, 3, 4);
    p.causal = true; /* rows 0 and 1 see no key */
    check("causal Lq 5 > Lk 3", &p, NULL);

    attn_problem_init(&p, 1, 1, 3, 6, 8);
    p.causal = true;
    check("causal Lq 3 < Lk 6", &p, NULL);

    attn_problem_init(&p, 1, 2, 6, 6, 4);
    attn_mask band = {ATTN_MASK_PREDICATE, keep_band, NULL, NULL, NULL};
    check("predicate mask", &p, &band);

    /* CSR: row 0 {1, 3}, row 1 {} (empty), row 2 {0, 1, 2, 3} */
    static const int64_t row_ptr[4] = {0, 2, 2, 6};
    static const int32_t col_idx[6] = {1, 3, 0, 1, 2, 3};
    attn_mask csr = {ATTN_MASK_CSR, NULL, NULL, row_ptr, col_idx};
    attn_problem_init(&p, 1, 2, 3, 4, 4);
    check("CSR mask", &p, &csr);

    static const int cu_q[4] = {0, 2, 2, 5}, cu_k[4] = {0, 3, 4, 6};
    attn_problem_init(&p, 3, 2, 3, 3, 4);
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.causal = true;
    check("varlen causal", &p, NULL);

    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
