/* reference.c — the CPU oracle every test compares against.
 *
 * For each query row (b, h, i), in double precision:
 *
 *     s_j = scale * sum_d q[i,d] * k[j,d]          for every key j the row sees
 *     m   = max_j s_j                               (subtracted before exp: exp(s_j - m) <= 1, so
 *     l   = sum_j exp(s_j - m)                       scores of +-1000 cannot overflow)
 *     o_d = sum_j exp(s_j - m) * v[j,d] / l
 *     lse = m + log(l)                              = log(sum_j exp(s_j))
 *
 * A row that sees no key outputs 0 and lse = -inf (the chapter's convention, problem.h).
 * attn_reference_lowp is the same computation in the problem's own precision: the "straightforward
 * implementation" against which FlashAttention's tolerance rule measures a kernel (check.h).
 */
#include "attn/reference.h"

#include <math.h>
#include <stdlib.h>

#include "attn/tensor.h"

/* ---- which entries a row sees ---------------------------------------------------------------- */

/* CSR row r holds a sorted key list: binary search for j. */
static bool csr_contains(const attn_mask *mask, int64_t r, int j) {
    int64_t lo = mask->row_ptr[r], hi = mask->row_ptr[r + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mask->col_idx[mid] == j)
            return true;
        if (mask->col_idx[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool attn_entry_visible(const attn_problem *p, const attn_mask *mask, int b, int h, int i, int j) {
    /* Bottom-right causal alignment: the last query sees the last key. */
    if (p->causal && j > i + attn_problem_seq_k(p, b) - attn_problem_seq_q(p, b))
        return false;
    if (mask == NULL)
        return true;
    switch (mask->kind) {
    case ATTN_MASK_NONE:
        return true;
    case ATTN_MASK_PREDICATE:
        return mask->keep(mask->ctx, b, h, i, j) != 0;
    case ATTN_MASK_CSR:
        return csr_contains(mask, (int64_t)b * p->Lq + i, j);
    }
    return false;
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
            s[j] = (double)p->scale * dot_double(qi, kj, D);
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

int attn_reference(const attn_problem *p, const attn_mask *mask, const float *q, const float *k,
                   const float *v, float *out, float *lse) {
    if (attn_problem_validate(p, NULL, 0) != 0)
        return -1;
    double *s = (double *)malloc((size_t)p->Lk * sizeof(double));
    double *acc = (double *)malloc((size_t)p->D * sizeof(double));
    int rc = (s == NULL || acc == NULL) ? -1 : 0;
    for (attn_row r = attn_row_first(p); rc == 0 && r.valid; attn_row_next(p, &r))
        reference_row(p, mask, &r, q, k, v, s, acc, out, lse);
    free(s);
    free(acc);
    return rc;
}

/* ---- same-precision implementation ----------------------------------------------------------- */

static float dot_float(const float *x, const float *y, int n) {
    float acc = 0.0f;
    for (int d = 0; d < n; ++d)
        acc += x[d] * y[d];
    return acc;
}

/* One query row in fp32 arithmetic, every stored intermediate (S, P, O) rounded to the dtype.
 * s: [seq_k] scratch; acc: [D]. */
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
            s[j] = attn_round_dtype(p->scale * dot_float(qi, kj, D), t);
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

int attn_reference_lowp(const attn_problem *p, const attn_mask *mask, const float *q,
                        const float *k, const float *v, float *out) {
    if (attn_problem_validate(p, NULL, 0) != 0)
        return -1;
    float *s = (float *)malloc((size_t)p->Lk * sizeof(float));
    float *acc = (float *)malloc((size_t)p->D * sizeof(float));
    int rc = (s == NULL || acc == NULL) ? -1 : 0;
    for (attn_row r = attn_row_first(p); rc == 0 && r.valid; attn_row_next(p, &r))
        lowp_row(p, mask, &r, q, k, v, s, acc, out);
    free(s);
    free(acc);
    return rc;
}
