/* bwd_stages.c — example 07's two stages on the one driver (attn/example.h): what each runs on
 * and what each stage is checked against. The kernels are in flash_bwd.cu; the CPU oracles are
 * the harness's (attn/reference.h: attn_reference for the forward, attn_reference_backward).
 *
 *   stage     kernels                              checked against
 *   forward   fwd_fa2 (example 03), fwd_block_     attn_reference under the problem's mask (the
 *             sparse (04), fwd_topk (05): the      harness's forward oracle), FlashAttention's
 *             one that serves the problem          2x rule for fp16/bf16; LSE: attn_check_lse_at
 *   backward  versions 1-6                         attn_reference_backward (double, from the
 *                                                  formulas; attn_check_gradient, attn/check.h):
 *                                                  dQ, dK, dV each; fp32 element by element
 *                                                  against a derived tolerance, fp16/bf16 by
 *                                                  FlashAttention's 2x rule per gradient
 *
 * Why the forward is a stage of real kernels rather than the reference's O rounded: the backward
 * then reads what a training step hands it (the forward kernel's O in the dtype and its fp32
 * LSE), the two are timed in the same run (forward + backward TFLOP/s), and a GPU-sized problem
 * needs no CPU forward over every head. The gradients' reference does not read the forward's
 * output at all: it is computed from Q, K, V and dO alone.
 *
 * A large problem is checked on whole (sequence, head) slices (each slice's gradients depend on
 * that slice only), as many as --check-rows asks for; --tensors DIR reads the tensors (the
 * forward's O and LSE included) from files instead, and the forward stage does not run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "flash_bwd.h"

static bwd_state *of(void *state) { return (bwd_state *)state; }

/* ---- the forward stage ----------------------------------------------------------------------- */

int bwd_prepare_forward(void *state, char *why, size_t len) {
    (void)why, (void)len;
    bwd_state *s = of(state);
    return attn_stage_reference_make(&s->fwd_ref, &s->p, s->mask, s->q, s->k, s->v, s->rows,
                                     "the forward reference");
}

int bwd_clear_forward(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const bwd_state *s = of(state);
    return attn_device_fill_nan_output(&s->p, s->d_o, s->d_lse);
}

/* o and lse keep what the kernel wrote: the backward reads it (and --dump writes it). */
int bwd_check_forward(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    bwd_state *s = of(state);
    return attn_stage_check_output(&s->p, s->d_o, s->d_lse, s->staging, s->o, s->lse, &s->fwd_ref,
                                   s->amplitude, out);
}

/* ---- the backward stage ---------------------------------------------------------------------- */

static int alloc_grads(attn_grads *g, size_t qn, size_t kn) {
    g->dq = attn_host_alloc(qn * sizeof(float), "the gradients");
    g->dk = attn_host_alloc(kn * sizeof(float), "the gradients");
    g->dv = attn_host_alloc(kn * sizeof(float), "the gradients");
    return g->dq && g->dk && g->dv ? 0 : 1;
}

void bwd_free_grads(attn_grads *g) {
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

int bwd_prepare_backward(void *state, char *why, size_t len) {
    (void)why, (void)len;
    bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const bool f32 = p->dtype == ATTN_F32;
    /* tol: fp32's tolerance, and fp16/bf16's floor (attn_check_gradient) */
    if (alloc_grads(&s->ref, qn, kn) || alloc_grads(&s->got, qn, kn) ||
        alloc_grads(&s->tol, qn, kn) || (!f32 && alloc_grads(&s->lowp, qn, kn)) ||
        attn_reference_backward(p, s->mask, s->q, s->k, s->v, s->dout, s->slices, &s->ref, NULL,
                                &s->tol) ||
        (!f32 && attn_reference_backward_lowp(p, s->mask, s->q, s->k, s->v, s->dout, s->slices,
                                              &s->lowp))) {
        fprintf(stderr, "error: the gradients' reference failed (out of host memory?)\n");
        return 1;
    }
    s->ref_done = true;
    return 0;
}

int bwd_clear_backward(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const bwd_state *s = of(state);
    const size_t el = attn_dtype_size(s->p.dtype);
    return attn_device_fill_nan(s->d_dq, attn_problem_q_elems(&s->p) * el) ||
           attn_device_fill_nan(s->d_dk, attn_problem_k_elems(&s->p) * el) ||
           attn_device_fill_nan(s->d_dv, attn_problem_k_elems(&s->p) * el);
}

int bwd_check_backward(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t el = attn_dtype_size(p->dtype);
    void *dev[3] = {s->d_dq, s->d_dk, s->d_dv};
    float *host[3] = {s->got.dq, s->got.dk, s->got.dv};
    for (int t = 0; t < 3; ++t) {
        const size_t n = t == 0 ? qn : kn;
        if (attn_to_host(s->staging, dev[t], n * el))
            return 1;
        attn_unpack(host[t], s->staging, n, p->dtype);
    }
    const bool f32 = p->dtype == ATTN_F32;
    static const char *const names[3] = {"dQ", "dK", "dV"};
    attn_grad_check c[3] = {
        attn_check_gradient(p, true, s->got.dq, s->ref.dq, s->tol.dq, s->lowp.dq, qn),
        attn_check_gradient(p, false, s->got.dk, s->ref.dk, s->tol.dk, s->lowp.dk, kn),
        attn_check_gradient(p, false, s->got.dv, s->ref.dv, s->tol.dv, s->lowp.dv, kn),
    };
    int worst = 0;
    out->pass = true;
    out->rows = s->checked_rows;
    for (int t = 0; t < 3; ++t) {
        worst = c[t].ratio > c[worst].ratio ? t : worst;
        if (c[t].bad > 0 && out->pass)
            snprintf(out->detail, sizeof out->detail,
                     "%s: %zu of %zu elements wrong; first (b=%d h=%d %s=%d d=%d): %.6g, want "
                     "%.6g (bound %.3g)",
                     names[t], c[t].bad, c[t].checked, c[t].b, c[t].h, t == 0 ? "i" : "j", c[t].i,
                     c[t].d, c[t].first_got, c[t].first_want, c[t].first_bound);
        out->pass = out->pass && c[t].bad == 0;
    }
    out->max_err = c[worst].err;
    out->bound = c[worst].bound;
    if (!s->quiet) { /* each gradient: its error and bound at the element closest to failing */
        printf("    [%d] %s:", k->id, k->name);
        for (int t = 0; t < 3; ++t)
            printf(" %s %.3g / %.3g%s", names[t], c[t].err, c[t].bound, t < 2 ? "," : "");
        if (f32)
            printf("  (err / its own tolerance, attn_reference_backward)\n");
        else
            printf("  (err / 2 x the %s backward's error + 1 ulp + floor: %.3g, %.3g, %.3g)\n",
                   attn_dtype_name(p->dtype), c[0].lowp_err, c[1].lowp_err, c[2].lowp_err);
    }
    if (s->dump_dir != NULL && bwd_dump_grads(s, k->name, &s->got) != 0)
        return 1;
    return 0;
}
