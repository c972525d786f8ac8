/* attn/check.h — compares a kernel's output with the reference (the rules: common/README.md,
 * "Tolerance rules").
 *
 * fp32:       pass iff |out - ref| <= atol + rtol*|ref| for every element (attn_tolerance_f32
 *             holds the numbers and their justification).
 * fp16/bf16:  FlashAttention's rule: max|out - ref| <= 2 * max|lowp - ref| + floor, where lowp is
 *             attn_reference_lowp in the same precision and floor is one ulp of the dtype at 1.
 *             That implementation keeps the scores in fp32 (reference.h), so its error stays a
 *             meaningful bound at every input amplitude: an all-zero output, or the mean of V,
 *             fails at amplitudes 1 to 100 (tests/unit/test_check.c).
 * In both, any non-finite output fails (comparisons are written so that NaN cannot pass).
 * Rows the reference did not compute are skipped: an element whose REFERENCE value is NaN is not
 * compared (it is counted in `skipped`). For finite inputs the reference is never NaN except in
 * the rows attn_reference_rows leaves out, which makes NaN its "not computed" mark (checking a
 * sample of rows, example.h). Only the reference decides: a NaN in the kernel's output, where
 * the reference has a value, always fails.
 * The checker returns a status and a report; it never exits the program.
 */
#ifndef ATTN_CHECK_H
#define ATTN_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CHECK_MAX_REPORTED 8

typedef struct attn_mismatch {
    int b, h, i, d; /* position (i inside sequence b; d = -1 for an LSE entry) */
    double got, want;
} attn_mismatch;

typedef struct attn_check_result {
    bool pass;
    size_t checked;     /* elements compared */
    size_t skipped;     /* elements not compared: the reference is NaN (a row it left out) */
    size_t bad;         /* elements out of tolerance or non-finite */
    size_t nonfinite;   /* of which NaN/inf */
    double max_abs_err; /* over finite elements */
    double max_rel_err;
    double bound;    /* fp16/bf16: the allowed max error; fp32: atol */
    double rtol;     /* fp32 (and LSE): the relative part, bound + rtol*|ref|; fp16/bf16: 0 */
    double lowp_err; /* fp16/bf16: max error of the same-precision implementation */
    int num_reported;
    attn_mismatch first[ATTN_CHECK_MAX_REPORTED]; /* first mismatches in memory order */
} attn_check_result;

typedef struct attn_tolerance {
    double atol, rtol;
} attn_tolerance;

/* fp32 tolerance for inputs of the given amplitude (see check.c for the derivation). */
attn_tolerance attn_tolerance_f32(const attn_problem *p, double amplitude);

/* Compares out (fp32 values, layout of p) with ref. For fp16/bf16, lowp must be the output of
 * attn_reference_lowp (for a sample of rows: attn_reference_lowp_rows on the same rows); for fp32
 * it is ignored (may be NULL). amplitude: input amplitude used. */
attn_check_result attn_check_output(const attn_problem *p, const float *out, const float *ref,
                                    const float *lowp, double amplitude);

/* The log-sum-exp's tolerance for inputs of the given amplitude, the same for every dtype (every
 * kernel computes the LSE in fp32; the derivation is in check.c). */
attn_tolerance attn_tolerance_lse(const attn_problem *p, double amplitude);

/* Compares a log-sum-exp buffer: equal infinities match; otherwise |got - want| <= atol +
 * rtol*|want| of attn_tolerance_lse(p, amplitude). */
attn_check_result attn_check_lse_at(const attn_problem *p, const float *lse, const float *ref,
                                    double amplitude);
/* attn_check_lse_at with extra_atol added to the atol: what inputs a kernel derives itself may
 * move the LSE by (attn_host_inputs.lse_allowance); 0 elsewhere. */
attn_check_result attn_check_lse_allowing(const attn_problem *p, const float *lse, const float *ref,
                                          double amplitude, double extra_atol);

/* One gradient of the backward pass (attn_reference_backward) against its reference:
 *   fp32       every element within its own tolerance (tol, from attn_reference_backward);
 *   fp16/bf16  FlashAttention's rule for each gradient: max|got - ref| <= 2 max|lowp - ref| +
 *              one unit in the last place of the dtype at max|ref| (lowp: the same gradient of
 *              attn_reference_backward_lowp), and for each element at least a floor: its fp32
 *              tolerance tol (NULL: none) and one ulp of the dtype at that size, so that a
 *              gradient that is exactly 0 by cancellation is not held to 0 (check.c derives it).
 * Elements whose reference is NaN (a slice left out) are skipped; NaN or inf fails. is_q: the
 * gradient has Q's layout (dQ), else K's (dK, dV), for the position of the first bad element. */
typedef struct attn_grad_check {
    size_t checked, bad;
    double err, bound; /* at the element closest to its bound (err / bound largest) */
    double ratio;      /* that err / bound; PASS iff bad == 0 */
    double lowp_err;   /* fp16/bf16: max |lowp - ref| */
    int64_t first;     /* the first bad element (index), -1 if none */
    int b, h, i, d;    /* its position (i: the query or key position inside sequence b) */
    double first_got, first_want, first_bound;
} attn_grad_check;

attn_grad_check attn_check_gradient(const attn_problem *p, bool is_q, const float *got,
                                    const float *ref, const float *tol, const float *lowp,
                                    size_t n);

/* Prints a summary line (elements checked, and skipped when there are any) and the first
 * mismatches with (b,h,i,d) indices. */
void attn_check_print(FILE *f, const char *what, const attn_check_result *r);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_CHECK_H */
