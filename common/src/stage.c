/* stage.c — what a staged example's forward stage does around its kernels (attn/example.h): its
 * reference on the checked rows, the read-back of what a kernel wrote, and the check of it
 * against the reference. The driver (example.c) calls none of this; the modules do.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/reference.h"
#include "attn/tensor.h"

int attn_stage_reference_make(attn_stage_reference *r, const attn_problem *p, const attn_mask *mask,
                              const float *q, const float *k, const float *v, const uint8_t *rows,
                              const char *what) {
    const size_t qn = attn_problem_q_elems(p), ln = attn_problem_lse_elems(p);
    memset(r, 0, sizeof *r);
    r->o = (float *)attn_host_alloc(qn * sizeof(float), what);
    r->lse = r->o ? (float *)attn_host_alloc(ln * sizeof(float) + 16, what) : NULL;
    r->lowp = r->lse ? (float *)attn_host_alloc(qn * sizeof(float), what) : NULL;
    if (r->lowp == NULL)
        return 1;
    if (attn_reference_rows(p, mask, q, k, v, r->o, r->lse, rows) ||
        attn_reference_lowp_rows(p, mask, q, k, v, r->lowp, rows)) {
        fprintf(stderr, "error: %s failed (out of host memory?)\n", what);
        return 1;
    }
    return 0;
}

void attn_stage_reference_free(attn_stage_reference *r) {
    free(r->o);
    free(r->lse);
    free(r->lowp);
    memset(r, 0, sizeof *r);
}

int attn_stage_read_output(const attn_problem *p, const void *d_o, const float *d_lse,
                           void *staging, float *o, float *lse) {
    const size_t qn = attn_problem_q_elems(p), ln = attn_problem_lse_elems(p);
    return attn_device_read(o, d_o, qn, p->dtype, staging) ||
           attn_to_host(lse, d_lse, ln * sizeof(float));
}

void attn_stage_check_attention(const attn_problem *p, const float *o, const float *lse,
                                const float *ref, const float *ref_lse, const float *lowp,
                                double amplitude, attn_stage_check *out) {
    const attn_check_result co = attn_check_output(p, o, ref, lowp, amplitude);
    const attn_check_result cl = attn_check_lse_at(p, lse, ref_lse, amplitude);
    out->pass = co.pass && cl.pass;
    out->rows = (int64_t)(co.checked / (size_t)(p->D > 0 ? p->D : 1));
    out->max_err = co.nonfinite ? INFINITY : co.max_abs_err;
    out->bound = co.bound;
    out->detail[0] = '\0';
    if (!co.pass && co.num_reported > 0)
        snprintf(out->detail, sizeof out->detail,
                 "O: %zu of %zu elements wrong; first (b=%d h=%d i=%d d=%d): %.6g, want %.6g",
                 co.bad, co.checked, co.first[0].b, co.first[0].h, co.first[0].i, co.first[0].d,
                 co.first[0].got, co.first[0].want);
    else if (!cl.pass && cl.num_reported > 0)
        snprintf(out->detail, sizeof out->detail, "LSE (b=%d h=%d i=%d): %.6g, want %.6g",
                 cl.first[0].b, cl.first[0].h, cl.first[0].i, cl.first[0].got, cl.first[0].want);
}

int attn_stage_check_output(const attn_problem *p, const void *d_o, const float *d_lse,
                            void *staging, float *o, float *lse, const attn_stage_reference *r,
                            double amplitude, attn_stage_check *out) {
    if (attn_stage_read_output(p, d_o, d_lse, staging, o, lse))
        return 1;
    attn_stage_check_attention(p, o, lse, r->o, r->lse, r->lowp, amplitude, out);
    return 0;
}
