/* 03_flash_backward_case.c — Exercise 03's case program (the checker): one test case of a
 * flash_backward.cu submission (grader/README.md, "Case programs"; the spec:
 * exercises/03_flash_backward/README.md), run in the submission's own program
 * (03_flash_backward_runner.c) through the channel, with the backward's tensors beyond Q, K, V
 * as the launch's extra buffers (grader_rpc.h):
 *   grader_03_flash_backward_sim --case causal --seed 5 -B 1 -H 2 -L 70 -D 32 --causal
 *
 * The check, in order: fresh inputs from --seed (Q, K, V of the case's amplitude, dO in
 * [-1, 1)), the forward's O and LSE from the double-precision reference rounded to fp32, the
 * gradients' reference (attn_reference_backward, with each element's fp32 tolerance); the
 * solution runs first, here, on the same inputs; the submission's program gets Q, K, V, O, dO
 * and LSE (each ending at an inaccessible page on the simulator) and NaN-filled dQ, dK, dV and
 * D; afterwards every input must be unchanged and every guard zone intact, and dQ, dK and dV
 * must match BOTH the reference (each element within its tolerance: attn_check_gradient) and
 * the solution (within twice it; a case with more than 65535 heads, B*H, is judged by the
 * reference alone: the solution's run would double its time). Any NaN/inf fails, with a message
 * saying where. All three gradients are checked: the message describes the first wrong one (dK,
 * dV, then dQ) and says which of dK, dV, dQ are right, and what that points at. A dK that is the
 * reference divided by the scale gets a hint.
 * The exercise's own check program (flash_backward_check_sim) links this file with
 * 03_flash_backward_local.c, which runs the learner's kernel in process. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "flash_backward.h"
#include "grader_case.h"

extern const attn_example flash_backward_example_solution; /* solutions/03_flash_backward */

#define GUARD 256        /* bytes of NaN on each side of every buffer */
#define MAX_GRID_Y 65535 /* a grid's largest y dimension (blocks) */

static const char *const NAMES[FB_BUFFERS] = {"O", "dO", "LSE", "dQ", "dK", "dV", "D"};

static void set_message(grader_result *r, const char *fmt, const char *a, const char *b) {
    snprintf(r->message, sizeof r->message, fmt, a, b);
}

/* The solution's kernel 1 on the device: dQ, dK, dV into sol (fp32 host arrays). 0, or 1. */
static int run_solution(const attn_problem *p, float *const in[6],
                        const size_t bytes[FB_BUFFERS + 3], attn_grads *sol) {
    const attn_kernel *k = attn_example_find(&flash_backward_example_solution, 1);
    void *dev[FB_BUFFERS + 3] = {0};
    int rc = k == NULL;
    for (int t = 0; rc == 0 && t < FB_BUFFERS + 3; ++t) {
        dev[t] = attn_device_alloc(bytes[t] ? bytes[t] : 16);
        rc = dev[t] == NULL || (t < 6 ? attn_to_device(dev[t], in[t], bytes[t])
                                      : attn_device_fill_nan(dev[t], bytes[t] ? bytes[t] : 16));
    }
    if (rc == 0) { /* dev: Q, K, V, O, dO, LSE, dQ, dK, dV, D */
        attn_buffers b;
        memset(&b, 0, sizeof b);
        b.q = dev[0], b.k = dev[1], b.v = dev[2];
        void *args[FB_BUFFERS] = {dev[3], dev[4], dev[5], dev[6], dev[7], dev[8], dev[9]};
        b.args = args;
        k->launch(p, &b, 0);
        rc = cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
             attn_to_host(sol->dq, dev[6], bytes[6]) || attn_to_host(sol->dk, dev[7], bytes[7]) ||
             attn_to_host(sol->dv, dev[8], bytes[8]);
    }
    for (int t = 0; t < FB_BUFFERS + 3; ++t)
        attn_device_free(dev[t]);
    return rc;
}

static bool all_ff(const unsigned char *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        if (x[e] != 0xFF)
            return false;
    return true;
}

/* Inputs unchanged, guard zones intact? 0, or 1 with the message. answer buffers: Q, K, V, O,
 * LSE (the base ones: O and LSE empty here), then the extras in FB_ order. */
static int buffers_intact(const grader_remote_answer *a, float *const in[6],
                          const size_t bytes[FB_BUFFERS + 3], grader_result *r) {
    static const char *const base[5] = {"Q", "K", "V", "O", "LSE"};
    for (int t = 0; t < 5 + FB_BUFFERS; ++t) {
        const char *name = t < 5 ? base[t] : NAMES[t - 5];
        const bool input = t < 3 || (t >= 5 && t - 5 <= FB_LSE);
        const int src = t < 3 ? t : t - 2; /* in[]: Q, K, V, O, dO, LSE */
        if (input && memcmp(a->data[t], in[src], bytes[src]) != 0) {
            set_message(r, "the kernel wrote into its input %s (inputs are read-only: %s)", name,
                        "outputs go to dQ, dK, dV and D only");
            return 1;
        }
        if (!all_ff(a->lead[t], a->lead_bytes[t]) || !all_ff(a->trail[t], a->trail_bytes[t])) {
            set_message(r, "the kernel wrote past the start or end of %s%s", name,
                        input ? " (an input)" : " (check the row and key bounds: j < Lk, i < Lq)");
            return 1;
        }
    }
    return 0;
}

/* The learner-facing line for a gradient that fails. */
static void describe(grader_result *r, const char *what, const char *against,
                     const attn_grad_check *c, bool is_q, size_t nonfinite) {
    snprintf(r->message, sizeof r->message,
             "%s differs from the %s at [b=%d,h=%d,%s=%d,d=%d]: got %.6g, want %.6g (tolerance "
             "%.3g); %zu of %zu elements wrong%s",
             what, against, c->b, c->h, is_q ? "i" : "j", c->i, c->d, c->first_got, c->first_want,
             c->first_bound, c->bad, c->checked,
             nonfinite ? ", some NaN/inf: never written, or computed from a NaN (a read past the "
                         "end of an input, or exp(-inf + inf))"
                       : "");
}

static int64_t min_slice(int64_t lowest, const attn_problem *p, const attn_grad_check *c) {
    const int64_t slice = (int64_t)c->b * p->H + c->h; /* c: the first wrong element */
    return slice < lowest ? slice : lowest;
}

static size_t count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
    for (size_t e = 0; e < n; ++e)
        bad += !isfinite(x[e]);
    return bad;
}

/* A dK that is the reference divided by the scale: the scale of S = scale Q K^T forgotten in
 * dK. The message then says so first. */
static void dk_scale_hint(const attn_problem *p, const float *dk, const float *ref,
                          const float *tol, size_t kn, grader_result *r) {
    float *scaled = malloc(kn * 4);
    for (size_t e = 0; scaled != NULL && e < kn; ++e)
        scaled[e] = dk[e] * p->scale;
    if (scaled != NULL && attn_check_gradient(p, false, scaled, ref, tol, NULL, kn).bad == 0) {
        char was[sizeof r->message];
        snprintf(was, sizeof was, "%s", r->message);
        snprintf(r->message, sizeof r->message,
                 "dK is the reference divided by the scale: dK = scale dS^T Q, since "
                 "S = scale Q K^T: %.400s",
                 was);
    }
    free(scaled);
}

/* Appends which of dQ, dK, dV are right, and what that points at: dV needs only P (the scale,
 * LSE, the mask, the tile loads), dK also dS (dP, D_i) and dK's scale; dQ is the given pass.
 * lowest: the first (batch, head) slice, b * H + h, with a wrong element. */
static void which_gradients(const attn_problem *p, const bool wrong[3], int64_t lowest,
                            grader_result *r) {
    const char *why = "";
    if (lowest >= MAX_GRID_Y)
        why = ": only heads past the grid's 65535 rows (B*H > 65535) are wrong: loop over the "
              "heads, bh from blockIdx.y in steps of gridDim.y";
    else if (wrong[1] && !wrong[2])
        why = ": dV is right, so P is: look at dS = P (dP - D_i) or dK's scale";
    else if (!wrong[1] && wrong[2])
        why = ": dK is right: look at dV = sum of P dO_i";
    else if (wrong[1] && wrong[2])
        why = p->causal ? ": look at P = exp(scale q.k - LSE_i), its causal mask, the causal "
                          "tile skip or the query tile's load"
                        : ": look at P = exp(scale q.k - LSE_i), its mask or the query tile's load";
    else if (wrong[0])
        why = ": dQ is the given pass: a changed launcher, D or input?";
    const size_t used = strlen(r->message);
    snprintf(r->message + used, sizeof r->message - used, " [dK %s, dV %s, dQ %s%s]",
             wrong[1] ? "wrong" : "right", wrong[2] ? "wrong" : "right",
             wrong[0] ? "wrong" : "right", why);
}

int main(int argc, char **argv) {
    grader_case c;
    grader_result r;
    memset(&r, 0, sizeof r);
    r.max_err = r.time_ms = r.solution_ms = -1.0;
    int status = grader_case_parse(&c, argc, argv, &flash_backward_example_solution);
    if (status != 0)
        return status;
    if (c.perf) {
        fprintf(stderr, "error: exercise 03 has no performance case\n");
        return ATTN_EXIT_USAGE;
    }
    attn_problem *p = &c.p;
    attn_device_info info;
    char why[256];
    if (attn_device_init(&info, why, sizeof why) != 0) {
        fprintf(stderr, "SKIP: %s\n", why);
        return ATTN_EXIT_NO_GPU;
    }
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t ln = attn_problem_lse_elems(p);
    /* host: Q, K, V, O, dO, LSE; then dQ, dK, dV, D */
    const size_t bytes[FB_BUFFERS + 3] = {qn * 4, kn * 4, kn * 4, qn * 4, qn * 4,
                                          ln * 4, qn * 4, kn * 4, kn * 4, ln * 4};
    float *in[6];
    for (int t = 0; t < 6; ++t)
        in[t] = malloc(bytes[t] + 4);
    attn_grads ref = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    attn_grads tol = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    attn_grads sol = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    attn_grads scratch = {malloc(qn * 4), malloc(kn * 4), malloc(kn * 4)};
    const uint64_t seed = c.cli.seed;
    attn_fill_uniform(in[0], qn, seed, 0, c.cli.amplitude, ATTN_F32);
    attn_fill_uniform(in[1], kn, seed, 1, c.cli.amplitude, ATTN_F32);
    attn_fill_uniform(in[2], kn, seed, 2, c.cli.amplitude, ATTN_F32);
    attn_fill_uniform(in[4], qn, seed, 3, 1.0f, ATTN_F32);
    /* More heads than a grid's y dimension holds (65535: the case that a kernel indexing heads
     * by blockIdx.y alone fails) costs the simulator about a second of CPU per run at any L:
     * the reference alone judges it, so the case is not twice as long. */
    const bool with_solution = (int64_t)p->B * p->H <= MAX_GRID_Y;
    if (attn_reference(p, NULL, in[0], in[1], in[2], in[3], in[5]) != 0 ||
        attn_reference_backward(p, NULL, in[0], in[1], in[2], in[4], NULL, &ref, NULL, &tol) ||
        (with_solution && run_solution(p, in, bytes, &sol) != 0)) {
        fprintf(stderr, "grader error: the reference or the solution failed on this case\n");
        return ATTN_EXIT_USAGE;
    }

    const attn_example *sub = grader_remote_example();
    const attn_kernel *k = sub->num_kernels > 0 ? &sub->kernels[0] : NULL;
    if (k == NULL) {
        snprintf(r.message, sizeof r.message, "no kernel with id 1 in flash_backward_example");
        return grader_emit(&c, &r, 1);
    }
    if (attn_kernel_supports(k, p, false, why, sizeof why) != 0) {
        snprintf(r.message, sizeof r.message, "the kernel refuses this problem: %s", why);
        return grader_emit(&c, &r, 1);
    }
    grader_remote_extra extra[FB_BUFFERS];
    for (int t = 0; t < FB_BUFFERS; ++t) {
        extra[t].name = NAMES[t];
        extra[t].input = t <= FB_LSE;
        extra[t].data = t <= FB_LSE ? in[3 + t] : NULL;
        extra[t].bytes = bytes[3 + t];
    }
    void *packed[3] = {in[0], in[1], in[2]};
    const size_t in_bytes[3] = {bytes[0], bytes[1], bytes[2]};
    grader_remote_answer a;
    grader_remote_launch_extra(p, NULL, packed, in_bytes, 0, 0, GUARD, extra, FB_BUFFERS, &a);
    if (a.error != 0) {
        snprintf(r.message, sizeof r.message, "the launch failed: %s: %s", a.error_name,
                 a.error_text);
        return grader_emit(&c, &r, 1);
    }
    if (buffers_intact(&a, in, bytes, &r) != 0)
        return grader_emit(&c, &r, 1);
    attn_grads got = {(float *)a.data[5 + FB_DQ], (float *)a.data[5 + FB_DK],
                      (float *)a.data[5 + FB_DV]};
    memcpy(scratch.dq, got.dq, qn * 4); /* aligned copies of the answer */
    memcpy(scratch.dk, got.dk, kn * 4);
    memcpy(scratch.dv, got.dv, kn * 4);
    got = scratch;

    const char *gname[3] = {"dQ", "dK", "dV"};
    const float *g[3] = {got.dq, got.dk, got.dv}, *rf[3] = {ref.dq, ref.dk, ref.dv};
    const float *tl[3] = {tol.dq, tol.dk, tol.dv}, *sl[3] = {sol.dq, sol.dk, sol.dv};
    const size_t n[3] = {qn, kn, kn};
    bool wrong[3] = {false, false, false};
    int first = -1; /* the first wrong gradient, in the order dK, dV, dQ: the message is its */
    int64_t lowest = INT64_MAX; /* the first slice with a wrong element, of every gradient */
    r.max_err = 0.0;
    for (int t = 0; t < 3; ++t) { /* dK and dV first: the learner's part; all three checked */
        const int x = (t + 1) % 3;
        attn_grad_check ck = attn_check_gradient(p, x == 0, g[x], rf[x], tl[x], NULL, n[x]);
        r.max_err = ck.err > r.max_err ? ck.err : r.max_err;
        const bool vs_reference = ck.bad > 0;
        if (!vs_reference && with_solution) {
            /* the solution, the second oracle: within twice the tolerance of it */
            float *twice = malloc(n[x] * 4);
            for (size_t e = 0; twice != NULL && e < n[x]; ++e)
                twice[e] = 2.0f * tl[x][e];
            ck = twice ? attn_check_gradient(p, x == 0, g[x], sl[x], twice, NULL, n[x])
                       : (attn_grad_check){0};
            free(twice);
        }
        if (ck.bad == 0)
            continue;
        wrong[x] = true;
        lowest = min_slice(lowest, p, &ck);
        if (first < 0) {
            first = x;
            describe(&r, gname[x], vs_reference ? "reference" : "solution", &ck, x == 0,
                     count_nonfinite(g[x], n[x]));
            if (x == 1 && vs_reference)
                dk_scale_hint(p, g[x], rf[x], tl[x], kn, &r);
        }
    }
    if (first >= 0) {
        which_gradients(p, wrong, lowest, &r);
        return grader_emit(&c, &r, 1);
    }
    r.passed = true;
    r.fraction = 1.0;
    snprintf(r.message, sizeof r.message, "correct (max abs error %.2g)", r.max_err);
    return grader_emit(&c, &r, 0);
}
