/* reference.c — the CPU oracle every test compares against.
 *
 * For each query row (b, h, i), in double precision:
 *
 *     s_j = scale * sum_d q[i,d] * k[j,d]          for every key j the row sees (then, with a
 *                                                   score modification, s_j = score(.., s_j))
 *     m   = max_j s_j                               (subtracted before exp: exp(s_j - m) <= 1, so
 *     l   = sum_j exp(s_j - m)                       scores of +-1000 cannot overflow)
 *     o_d = sum_j exp(s_j - m) * v[j,d] / l
 *     lse = m + log(l)                              = log(sum_j exp(s_j))
 *
 * A row that sees no key outputs 0 and lse = -inf (common/README.md, "Conventions").
 * attn_reference_lowp is the same computation in the problem's own precision: the "straightforward
 * implementation" against which FlashAttention's tolerance rule measures a kernel (check.h).
 *
 * Rows are independent: both run their rows on OpenMP threads when the harness is built with it,
 * each row summed serially in a fixed order, so that the bits do not depend on the thread count.
 */
#include "attn/reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn/tensor.h"

/* The score of entry (i, j) of row r: scale * q.k, or what the mask's score modification makes
 * of it (FlexAttention's score_mod). */
static double modified_score(const attn_mask *mask, const attn_row *r, int j, double s) {
    return mask != NULL && mask->score != NULL
               ? mask->score(mask->score_ctx, r->b, r->h, r->i, j, s)
               : s;
}

/* ---- double-precision reference -------------------------------------------------------------- */

static double dot_double(const float *x, const float *y, int n) {
    double acc = 0.0;
    for (int d = 0; d < n; ++d)
        acc += (double)x[d] * (double)y[d];
    return acc;
}

/* One query row. s: [seq_k] scores scratch; acc: [D] output accumulator. */
static void reference_row(const attn_problem *p, const attn_mask *mask, const attn_row *r,
                          const float *q, const float *k, const float *v, double *s, double *acc,
                          float *out, float *lse) {
    const int D = p->D, Lk = attn_problem_seq_k(p, r->b);
    const float *qi = q + r->offset; /* [D] */
    double m = -INFINITY;
    for (int j = 0; j < Lk; ++j) {
        s[j] = -INFINITY; /* masked: exp(-inf - m) = 0 */
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j)) {
            const float *kj = k + attn_problem_row_offset(p, false, r->b, r->h, j);
            s[j] = modified_score(mask, r, j, (double)p->scale * dot_double(qi, kj, D));
            m = s[j] > m ? s[j] : m;
        }
    }
    float *oi = out + r->offset; /* [D] */
    if (m == -INFINITY) {        /* the row sees no key */
        for (int d = 0; d < D; ++d)
            oi[d] = 0.0f;
        if (lse != NULL)
            lse[r->lse_index] = -INFINITY;
        return;
    }
    double l = 0.0;
    for (int d = 0; d < D; ++d)
        acc[d] = 0.0;
    for (int j = 0; j < Lk; ++j) {
        if (s[j] == -INFINITY)
            continue; /* contributes nothing; skipping is only faster */
        double e = exp(s[j] - m);
        const float *vj = v + attn_problem_row_offset(p, false, r->b, r->h, j);
        l += e;
        for (int d = 0; d < D; ++d)
            acc[d] += e * (double)vj[d];
    }
    for (int d = 0; d < D; ++d)
        oi[d] = (float)(acc[d] / l);
    if (lse != NULL)
        lse[r->lse_index] = (float)(m + log(l));
}

/* ---- same-precision implementation ----------------------------------------------------------- */

static float dot_float(const float *x, const float *y, int n) {
    float acc = 0.0f;
    for (int d = 0; d < n; ++d)
        acc += x[d] * y[d];
    return acc;
}

/* One query row as a straightforward fp16/bf16 kernel computes it: the inputs are in the dtype,
 * the scores S and every sum are accumulated in fp32 (as tensor-core kernels do), and the
 * operands that such a kernel stores in the dtype -- the probabilities P fed to P.V and the
 * output O -- are rounded to it. S stays in fp32: rounded to fp16, scores beyond 65504 would
 * overflow and large scores would lose their low bits, and the error of that implementation
 * would then be no bound for anything (check.h). s: [seq_k] scratch; acc: [D]. */
static void lowp_row(const attn_problem *p, const attn_mask *mask, const attn_row *r,
                     const float *q, const float *k, const float *v, float *s, float *acc,
                     float *out) {
    const int D = p->D, Lk = attn_problem_seq_k(p, r->b);
    const attn_dtype t = p->dtype;
    const float *qi = q + r->offset; /* [D] */
    float m = -INFINITY;
    for (int j = 0; j < Lk; ++j) {
        s[j] = -INFINITY;
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j)) {
            const float *kj = k + attn_problem_row_offset(p, false, r->b, r->h, j);
            s[j] = (float)modified_score(mask, r, j, p->scale * dot_float(qi, kj, D));
            m = s[j] > m ? s[j] : m;
        }
    }
    float l = 0.0f;
    for (int j = 0; j < Lk; ++j) {
        s[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - m); /* s now holds exp(s - m) */
        l += s[j];
    }
    for (int d = 0; d < D; ++d)
        acc[d] = 0.0f;
    for (int j = 0; l > 0.0f && j < Lk; ++j) { /* l = 0: a row that sees no key outputs 0 */
        float pj = attn_round_dtype(s[j] / l, t);
        const float *vj = v + attn_problem_row_offset(p, false, r->b, r->h, j);
        for (int d = 0; d < D; ++d)
            acc[d] += pj * vj[d];
    }
    float *oi = out + r->offset;
    for (int d = 0; d < D; ++d)
        oi[d] = attn_round_dtype(acc[d], t);
}

/* ---- the row loop both share ----------------------------------------------------------------- */

typedef struct reference_job {
    const attn_problem *p;
    const attn_mask *mask;
    const float *q, *k, *v;
    float *out, *lse; /* lse: NULL when not wanted */
    bool lowp;        /* lowp_row instead of reference_row */
} reference_job;

/* A row left out: NaN, which tells the checkers it was not computed. */
static void skip_row(const reference_job *job, const attn_row *r) {
    float *oi = job->out + r->offset;
    for (int d = 0; d < job->p->D; ++d)
        oi[d] = NAN;
    if (job->lse != NULL)
        job->lse[r->lse_index] = NAN;
}

static int run_rows(const reference_job *job, const uint8_t *row_selected) {
    const attn_problem *p = job->p;
    if (attn_problem_validate(p, NULL, 0) != 0)
        return -1;
    const int64_t rows = attn_problem_row_count(p);
    /* Per thread: the scores [Lk], then the output accumulator [D] (lowp_row: as floats) */
    const size_t scratch_bytes = ((size_t)p->Lk + (size_t)p->D) * sizeof(double);
    int failed = 0;
    /* Dynamic schedule: under causality row i sees up to i + 1 keys, so equal shares of rows are
     * unequal shares of work. Every thread reaches the loop even when its scratch allocation
     * failed (a worksharing loop must be met by the whole team); it then computes nothing. */
#pragma omp parallel reduction(| : failed)
    {
        double *scratch = (double *)malloc(scratch_bytes);
        failed |= scratch == NULL;
#pragma omp for schedule(dynamic, 16)
        for (int64_t n = 0; n < rows; ++n) {
            attn_row r = attn_row_at(p, n);
            if (row_selected != NULL && !row_selected[n])
                skip_row(job, &r);
            else if (scratch != NULL && job->lowp)
                lowp_row(p, job->mask, &r, job->q, job->k, job->v, (float *)scratch,
                         (float *)scratch + p->Lk, job->out);
            else if (scratch != NULL)
                reference_row(p, job->mask, &r, job->q, job->k, job->v, scratch, scratch + p->Lk,
                              job->out, job->lse);
        }
        free(scratch);
    }
    return failed ? -1 : 0;
}

int attn_reference_rows(const attn_problem *p, const attn_mask *mask, const float *q,
                        const float *k, const float *v, float *out, float *lse,
                        const uint8_t *row_selected) {
    reference_job job = {p, mask, q, k, v, out, lse, false};
    return run_rows(&job, row_selected);
}

int attn_reference(const attn_problem *p, const attn_mask *mask, const float *q, const float *k,
                   const float *v, float *out, float *lse) {
    return attn_reference_rows(p, mask, q, k, v, out, lse, NULL);
}

int attn_reference_lowp_rows(const attn_problem *p, const attn_mask *mask, const float *q,
                             const float *k, const float *v, float *out,
                             const uint8_t *row_selected) {
    reference_job job = {p, mask, q, k, v, out, NULL, true};
    return run_rows(&job, row_selected);
}

int attn_reference_lowp(const attn_problem *p, const attn_mask *mask, const float *q,
                        const float *k, const float *v, float *out) {
    return attn_reference_lowp_rows(p, mask, q, k, v, out, NULL);
}

int attn_reference_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ---- row sampling ---------------------------------------------------------------------------- */

/* Row number (attn_row_at) of query i of slice (b, h). */
static int64_t row_index(const attn_problem *p, int b, int h, int i) {
    return attn_problem_row_offset(p, true, b, h, i) / p->D;
}

/* Marks q of the n rows of slice (b, h), q <= n: first the rows a tiled kernel most often gets
 * wrong, then rows spread evenly. */
static void sample_slice(const attn_problem *p, int b, int h, int n, int q, uint8_t *sel) {
    /* -1: the last row (causal: it sees every key); then the first row and both sides of the
     * boundaries at 64 and 128 (tile heights of 16, 32, 64 and 128 all end there) */
    static const int priority[] = {-1, 0, 63, 64, 127, 128};
    int taken = 0;
    for (size_t k = 0; k < sizeof priority / sizeof priority[0] && taken < q; ++k) {
        int i = priority[k] < 0 ? n - 1 : priority[k];
        if (i < n && !sel[row_index(p, b, h, i)]) {
            sel[row_index(p, b, h, i)] = 1;
            taken++;
        }
    }
    /* the rest at the centres of q - taken equal parts, moved on to the next free row where one
     * is taken already (there is one: q <= n) */
    const int64_t rest = q - taken;
    for (int64_t k = 0; k < rest; ++k) {
        int64_t i = (2 * k + 1) * n / (2 * rest);
        while (sel[row_index(p, b, h, (int)i)])
            i = (i + 1) % n;
        sel[row_index(p, b, h, (int)i)] = 1;
    }
}

int64_t attn_reference_sample_rows(const attn_problem *p, int count, uint8_t *row_selected) {
    const int64_t rows = attn_problem_row_count(p);
    memset(row_selected, count >= rows ? 1 : 0, (size_t)rows);
    if (count >= rows)
        return rows;
    /* Slice (b, h) of n rows gets floor(count * (R + n) / rows) - floor(count * R / rows) rows,
     * R = the rows before it: proportional shares that add up to exactly count, each <= n since
     * count < rows. count * n < 2^62 cannot overflow; carried is the remainder of the division. */
    int64_t carried = 0;
    for (int b = 0; b < p->B; ++b) {
        const int n = attn_problem_seq_q(p, b);
        for (int h = 0; h < p->H && n > 0; ++h) {
            int64_t share = carried + (int64_t)count * n;
            carried = share % rows;
            sample_slice(p, b, h, n, (int)(share / rows), row_selected);
        }
    }
    return count;
}
