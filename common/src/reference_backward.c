/* reference_backward.c — the CPU oracle of the backward pass (attn/reference.h): the gradients
 * in double precision from their formulas (tests/unit/test_reference_backward.c proves them
 * against central finite differences of a double-precision forward), the same-precision backward
 * of FlashAttention's 2x rule, and the fp32 tolerance of each gradient element. The derivation
 * of the formulas: examples/07_flash_attention_backward/README.md.
 *
 * Both references walk a slice (b, h) twice, so that no Lq x Lk matrix is stored (the CPU side of
 * the lesson, and what lets them check GPU-sized problems):
 *   row pass, one query row at a time:   LSE_i, D_i, dQ_i
 *   column pass, one key at a time:      dK_j, dV_j, recomputing P_ij and dS_ij from LSE_i, D_i
 * Rows (then keys) run on OpenMP threads where the harness has it, each summed serially in a
 * fixed order: the results do not depend on the number of threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attn/reference.h"
#include "attn/tensor.h"

#define U32 0x1p-24 /* unit roundoff of fp32 */

static double dot(const float *x, const float *y, int n) {
    double acc = 0.0;
    for (int d = 0; d < n; ++d)
        acc += (double)x[d] * (double)y[d];
    return acc;
}

static double dot_abs(const float *x, const float *y, int n) {
    double acc = 0.0;
    for (int d = 0; d < n; ++d)
        acc += fabs((double)x[d] * (double)y[d]);
    return acc;
}

static float dot_f32(const float *x, const float *y, int n) {
    float acc = 0.0f;
    for (int d = 0; d < n; ++d)
        acc += x[d] * y[d];
    return acc;
}

static bool slice_on(const attn_problem *p, const uint8_t *slices, int b, int h) {
    return slices == NULL || slices[b * p->H + h];
}

/* The key rows of the selected slices, numbered like the query rows' attn_row_at: n -> (b, h, j)
 * with n = (b * H + h) * Lk + j (dense numbering over the longest sequence; a varlen sequence's
 * positions past its end are skipped). */
static bool key_at(const attn_problem *p, int64_t n, int *b, int *h, int *j) {
    const int64_t s = n / p->Lk;
    *b = (int)(s / p->H);
    *h = (int)(s % p->H);
    *j = (int)(n % p->Lk);
    return *j < attn_problem_seq_k(p, *b);
}

static void fill_nan(float *x, size_t n) { attn_fill_nan_host(x, n * sizeof(float)); }

/* ---- the double-precision reference ---------------------------------------------------------
 * The fp32 tolerance of each element (tol), derived from the rounding errors of an fp32 kernel
 * that follows the same formulas (versions 1 and 2), u = 2^-24, first order, sums of n terms
 * counted as sqrt(n) u of their absolute sum (the probabilistic bound the forward's tolerance
 * uses, common/src/check.c):
 *   scores     e(s_ij) <= sqrt(D) u sigma_ij,         sigma_ij = scale sum_d |q_id k_jd|
 *   LSE_i      the forward's: sqrt(D) u max_j sigma_ij + sqrt(n_i) u + u |LSE_i|
 *   P_ij       relative: eps_ij = u (sqrt(D) (sigma_ij + max_j sigma_ij) + sqrt(n_i)
 *                                    + 2 |LSE_i| + |s_ij| + 4)
 *   dP_ij      sqrt(D) u pi_ij,                       pi_ij = sum_d |dO_id v_jd|
 *   O_i, D_i   the forward's O: u (2 sqrt(D) max_j sigma_ij + sqrt(n_i) + 4) sum_j P_ij |v_jd|
 *              per column d, so e(D_i) = sqrt(D) u sum_d |dO_id O_id| + sum_d |dO_id| e(O_id)
 *   dS_ij      e_ij = P_ij (eps_ij |dP_ij - D_i| + sqrt(D) u pi_ij + e(D_i)) + u |dS_ij|
 *   dQ_id      scale (sum_j e_ij |k_jd| + sqrt(n_i) u sum_j |dS_ij k_jd|)
 *   dK_jd      scale (sum_i e_ij |q_id| + sqrt(m_j) u sum_i |dS_ij q_id|)   m_j: rows seeing j
 *   dV_jd      sum_i eps_ij P_ij |dO_id| + sqrt(m_j) u sum_i P_ij |dO_id|
 * and tol = 2 x that (the safety factor of the forward's P.V term) + 2 u |g| (the output's
 * rounding and the scale's multiply) + 2^-100: values below fp32's normal range (2^-126) carry
 * no relative accuracy (and a GPU's exp2 flushes them to 0), so a gradient of 1e-42 that comes
 * out 0 is right. An element that nothing contributes to (a key no query sees, a row that sees
 * no key) must be 0 to within that floor. Measured margins (tests/unit/test_tolerance_backward.c;
 * the table in examples/07_flash_attention_backward/README.md). */
#define TOL_FLOOR 0x1p-100

typedef struct row_stats {
    double lse, D, eD, sigma_max; /* eD: e(D_i) above */
    int n;                        /* keys the row sees */
} row_stats;

/* One query row: its statistics, dQ_i (and its tolerance). s, dp: [Lk] scratch; acc: [3 * D]. */
static void ref_row(const attn_problem *p, const attn_mask *mask, const attn_row *r, const float *q,
                    const float *k, const float *v, const float *dout, double *s, double *dp,
                    double *acc, row_stats *st, float *dq, float *tol_dq) {
    const int D = p->D, Lk = attn_problem_seq_k(p, r->b);
    const double scale = p->scale;
    const float *qi = q + r->offset, *gi = dout + r->offset;
    double m = -INFINITY, sig_max = 0.0;
    int n = 0;
    for (int j = 0; j < Lk; ++j) {
        s[j] = -INFINITY;
        if (!attn_entry_visible(p, mask, r->b, r->h, r->i, j))
            continue;
        const float *kj = k + attn_problem_row_offset(p, false, r->b, r->h, j);
        s[j] = scale * dot(qi, kj, D);
        m = s[j] > m ? s[j] : m;
        const double sig = fabs(scale) * dot_abs(qi, kj, D);
        sig_max = sig > sig_max ? sig : sig_max;
        ++n;
    }
    double *o = acc, *o_abs = acc + D, *g = acc + 2 * D;
    memset(acc, 0, 3 * (size_t)D * sizeof(double));
    st->n = n;
    st->sigma_max = sig_max;
    if (n == 0) { /* sees no key: output 0, LSE -inf, every gradient 0 */
        st->lse = -INFINITY, st->D = 0.0, st->eD = 0.0;
        for (int d = 0; d < D; ++d) {
            dq[r->offset + d] = 0.0f;
            if (tol_dq)
                tol_dq[r->offset + d] = (float)TOL_FLOOR;
        }
        return;
    }
    double l = 0.0;
    for (int j = 0; j < Lk; ++j)
        l += exp(s[j] - m); /* masked: exp(-inf) = 0 */
    st->lse = m + log(l);
    double Dsum = 0.0;
    for (int j = 0; j < Lk; ++j) {
        if (s[j] == -INFINITY) {
            dp[j] = 0.0;
            continue;
        }
        const int64_t kv = attn_problem_row_offset(p, false, r->b, r->h, j);
        const double P = exp(s[j] - st->lse);
        dp[j] = dot(gi, v + kv, D);
        Dsum += P * dp[j];
        for (int d = 0; d < D; ++d) {
            o[d] += P * v[kv + d];
            o_abs[d] += P * fabs((double)v[kv + d]);
        }
    }
    st->D = Dsum;
    /* e(D_i): the fp32 dot dO.O, and the forward's error in O carried through it */
    const double eo = U32 * (2.0 * sqrt((double)D) * sig_max + sqrt((double)n) + 4.0);
    double eD = 0.0, dabs = 0.0;
    for (int d = 0; d < D; ++d) {
        dabs += fabs(gi[d] * o[d]);
        eD += fabs((double)gi[d]) * eo * o_abs[d];
    }
    st->eD = sqrt((double)D) * U32 * dabs + eD;
    /* dQ_i = scale sum_j dS_ij k_j, and its tolerance (o, o_abs reused as accumulators) */
    double *e1 = o, *e2 = o_abs;
    memset(acc, 0, 3 * (size_t)D * sizeof(double));
    for (int j = 0; j < Lk; ++j) {
        if (s[j] == -INFINITY)
            continue;
        const int64_t kv = attn_problem_row_offset(p, false, r->b, r->h, j);
        const double P = exp(s[j] - st->lse), dS = P * (dp[j] - st->D);
        double eds = 0.0;
        if (tol_dq) {
            const double sig = fabs(scale) * dot_abs(qi, k + kv, D);
            const double eps = U32 * (sqrt((double)D) * (sig + sig_max) + sqrt((double)n) +
                                      2.0 * fabs(st->lse) + fabs(s[j]) + 4.0);
            const double pi = dot_abs(gi, v + kv, D);
            eds = P * (eps * fabs(dp[j] - st->D) + sqrt((double)D) * U32 * pi + st->eD) +
                  U32 * fabs(dS);
        }
        for (int d = 0; d < D; ++d) {
            const double kd = k[kv + d];
            g[d] += dS * kd;
            e1[d] += eds * fabs(kd);
            e2[d] += fabs(dS * kd);
        }
    }
    for (int d = 0; d < D; ++d) {
        const double gd = scale * g[d];
        dq[r->offset + d] = (float)gd;
        if (tol_dq)
            tol_dq[r->offset + d] =
                (float)(2.0 * fabs(scale) * (e1[d] + sqrt((double)n) * U32 * e2[d]) +
                        2.0 * U32 * fabs(gd) + TOL_FLOOR);
    }
}

/* One key j of slice (b, h): dK_j, dV_j (and their tolerances) from the rows' statistics. */
static void ref_key(const attn_problem *p, const attn_mask *mask, int b, int h, int j,
                    const float *q, const float *k, const float *v, const float *dout,
                    const row_stats *stats, double *acc, attn_grads *ref, attn_grads *tol) {
    const int D = p->D, Lq = attn_problem_seq_q(p, b);
    const double scale = p->scale;
    const int64_t kv = attn_problem_row_offset(p, false, b, h, j);
    const float *kj = k + kv, *vj = v + kv;
    double *gk = acc, *gv = acc + D, *ek1 = acc + 2 * D, *ek2 = acc + 3 * D, *ev1 = acc + 4 * D,
           *ev2 = acc + 5 * D;
    memset(acc, 0, 6 * (size_t)D * sizeof(double));
    int m = 0;
    for (int i = 0; i < Lq; ++i) {
        if (!attn_entry_visible(p, mask, b, h, i, j))
            continue;
        const int64_t qo = attn_problem_row_offset(p, true, b, h, i);
        const row_stats *st = &stats[attn_problem_lse_index(p, b, h, i)];
        const float *qi = q + qo, *gi = dout + qo;
        const double s = scale * dot(qi, kj, D), P = exp(s - st->lse);
        const double dp = dot(gi, vj, D), dS = P * (dp - st->D);
        double eds = 0.0, eps = 0.0;
        if (tol != NULL) {
            const double sig = fabs(scale) * dot_abs(qi, kj, D);
            eps = U32 * (sqrt((double)D) * (sig + st->sigma_max) + sqrt((double)st->n) +
                         2.0 * fabs(st->lse) + fabs(s) + 4.0);
            eds =
                P * (eps * fabs(dp - st->D) + sqrt((double)D) * U32 * dot_abs(gi, vj, D) + st->eD) +
                U32 * fabs(dS);
        }
        for (int d = 0; d < D; ++d) {
            gk[d] += dS * qi[d];
            gv[d] += P * gi[d];
            ek1[d] += eds * fabs((double)qi[d]);
            ek2[d] += fabs(dS * qi[d]);
            ev1[d] += eps * P * fabs((double)gi[d]);
            ev2[d] += P * fabs((double)gi[d]);
        }
        ++m;
    }
    for (int d = 0; d < D; ++d) {
        const double dk = scale * gk[d], dv = gv[d];
        ref->dk[kv + d] = (float)dk;
        ref->dv[kv + d] = (float)dv;
        if (tol != NULL) {
            tol->dk[kv + d] =
                (float)(2.0 * fabs(scale) * (ek1[d] + sqrt((double)m) * U32 * ek2[d]) +
                        2.0 * U32 * fabs(dk) + TOL_FLOOR);
            tol->dv[kv + d] = (float)(2.0 * (ev1[d] + sqrt((double)m) * U32 * ev2[d]) +
                                      2.0 * U32 * fabs(dv) + TOL_FLOOR);
        }
    }
}

int attn_reference_backward(const attn_problem *p, const attn_mask *mask, const float *q,
                            const float *k, const float *v, const float *dout,
                            const uint8_t *slices, attn_grads *ref, float *lse, attn_grads *tol) {
    if (mask != NULL && mask->score != NULL)
        return -1; /* a score modification's backward is not derived here (attn/reference.h) */
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t ln = attn_problem_lse_elems(p);
    row_stats *stats = (row_stats *)calloc(ln ? ln : 1, sizeof *stats);
    if (stats == NULL)
        return -1;
    fill_nan(ref->dq, qn);
    fill_nan(ref->dk, kn);
    fill_nan(ref->dv, kn);
    if (tol != NULL) {
        fill_nan(tol->dq, qn);
        fill_nan(tol->dk, kn);
        fill_nan(tol->dv, kn);
    }
    if (lse != NULL)
        fill_nan(lse, ln);
    const int64_t rows = attn_problem_row_count(p), keys = (int64_t)p->B * p->H * p->Lk;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        double *s = (double *)malloc(((size_t)2 * p->Lk + 6 * (size_t)p->D + 2) * sizeof(double));
        failed = s == NULL;
        double *dp = s ? s + p->Lk : NULL, *acc = s ? s + 2 * p->Lk : NULL;
#pragma omp for schedule(dynamic, 16)
        for (int64_t n = 0; n < rows; ++n) {
            const attn_row r = attn_row_at(p, n);
            if (s == NULL || !slice_on(p, slices, r.b, r.h))
                continue;
            ref_row(p, mask, &r, q, k, v, dout, s, dp, acc, &stats[r.lse_index], ref->dq,
                    tol ? tol->dq : NULL);
            if (lse != NULL)
                lse[r.lse_index] = (float)stats[r.lse_index].lse;
        }
        /* the implicit barrier: every row's statistics are in place */
#pragma omp for schedule(dynamic, 16)
        for (int64_t n = 0; n < keys; ++n) {
            int b, h, j;
            if (s == NULL || !key_at(p, n, &b, &h, &j) || !slice_on(p, slices, b, h))
                continue;
            ref_key(p, mask, b, h, j, q, k, v, dout, stats, acc, ref, tol);
        }
        free(s);
    }
    free(stats);
    return failed ? -1 : 0;
}

/* ---- the same-precision backward ------------------------------------------------------------ */

typedef struct row_lowp {
    float m, l, D; /* max and sum of exp (fp32, natural units), rowsum(P dP) */
} row_lowp;

static float rnd(float x, attn_dtype t) { return attn_round_dtype(x, t); }

/* P_ij and dP_ij of one entry as the straightforward implementation has them. */
static void lowp_entry(const attn_problem *p, const float *qi, const float *kj, const float *gi,
                       const float *vj, const row_lowp *st, float *P, float *dP) {
    const float s = p->scale * dot_f32(qi, kj, p->D);
    *P = rnd(expf(s - st->m) / st->l, p->dtype);
    *dP = rnd(dot_f32(gi, vj, p->D), p->dtype);
}

static void lowp_row(const attn_problem *p, const attn_mask *mask, const attn_row *r,
                     const float *q, const float *k, const float *v, const float *dout, float *acc,
                     row_lowp *st, float *dq) {
    const int D = p->D, Lk = attn_problem_seq_k(p, r->b);
    const float *qi = q + r->offset, *gi = dout + r->offset;
    float m = -INFINITY;
    int n = 0;
    for (int j = 0; j < Lk; ++j)
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j)) {
            const float s =
                p->scale * dot_f32(qi, k + attn_problem_row_offset(p, false, r->b, r->h, j), D);
            m = s > m ? s : m;
            ++n;
        }
    memset(acc, 0, (size_t)D * sizeof(float));
    st->m = m, st->l = 0.0f, st->D = 0.0f;
    if (n == 0) {
        for (int d = 0; d < D; ++d)
            dq[r->offset + d] = 0.0f;
        return;
    }
    for (int j = 0; j < Lk; ++j)
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j))
            st->l += expf(p->scale *
                              dot_f32(qi, k + attn_problem_row_offset(p, false, r->b, r->h, j), D) -
                          m);
    float Dsum = 0.0f;
    for (int j = 0; j < Lk; ++j)
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j)) {
            const int64_t kv = attn_problem_row_offset(p, false, r->b, r->h, j);
            float P, dP;
            lowp_entry(p, qi, k + kv, gi, v + kv, st, &P, &dP);
            Dsum += P * dP;
        }
    st->D = Dsum;
    for (int j = 0; j < Lk; ++j)
        if (attn_entry_visible(p, mask, r->b, r->h, r->i, j)) {
            const int64_t kv = attn_problem_row_offset(p, false, r->b, r->h, j);
            float P, dP;
            lowp_entry(p, qi, k + kv, gi, v + kv, st, &P, &dP);
            const float dS = rnd(P * (dP - st->D), p->dtype);
            for (int d = 0; d < D; ++d)
                acc[d] += dS * k[kv + d];
        }
    for (int d = 0; d < D; ++d)
        dq[r->offset + d] = rnd(p->scale * rnd(acc[d], p->dtype), p->dtype);
}

static void lowp_key(const attn_problem *p, const attn_mask *mask, int b, int h, int j,
                     const float *q, const float *k, const float *v, const float *dout,
                     const row_lowp *stats, float *acc, attn_grads *out) {
    const int D = p->D, Lq = attn_problem_seq_q(p, b);
    const int64_t kv = attn_problem_row_offset(p, false, b, h, j);
    float *gk = acc, *gv = acc + D;
    memset(acc, 0, 2 * (size_t)D * sizeof(float));
    for (int i = 0; i < Lq; ++i) {
        if (!attn_entry_visible(p, mask, b, h, i, j))
            continue;
        const int64_t qo = attn_problem_row_offset(p, true, b, h, i);
        const row_lowp *st = &stats[attn_problem_lse_index(p, b, h, i)];
        float P, dP;
        lowp_entry(p, q + qo, k + kv, dout + qo, v + kv, st, &P, &dP);
        const float dS = rnd(P * (dP - st->D), p->dtype);
        for (int d = 0; d < D; ++d) {
            gk[d] += dS * q[qo + d];
            gv[d] += P * dout[qo + d];
        }
    }
    for (int d = 0; d < D; ++d) {
        out->dk[kv + d] = rnd(p->scale * rnd(gk[d], p->dtype), p->dtype);
        out->dv[kv + d] = rnd(gv[d], p->dtype);
    }
}

int attn_reference_backward_lowp(const attn_problem *p, const attn_mask *mask, const float *q,
                                 const float *k, const float *v, const float *dout,
                                 const uint8_t *slices, attn_grads *out) {
    if (mask != NULL && mask->score != NULL)
        return -1;
    const size_t ln = attn_problem_lse_elems(p);
    row_lowp *stats = (row_lowp *)calloc(ln ? ln : 1, sizeof *stats);
    if (stats == NULL)
        return -1;
    fill_nan(out->dq, attn_problem_q_elems(p));
    fill_nan(out->dk, attn_problem_k_elems(p));
    fill_nan(out->dv, attn_problem_k_elems(p));
    const int64_t rows = attn_problem_row_count(p), keys = (int64_t)p->B * p->H * p->Lk;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *acc = (float *)malloc(2 * (size_t)p->D * sizeof(float) + 8);
        failed = acc == NULL;
#pragma omp for schedule(dynamic, 16)
        for (int64_t n = 0; n < rows; ++n) {
            const attn_row r = attn_row_at(p, n);
            if (acc != NULL && slice_on(p, slices, r.b, r.h))
                lowp_row(p, mask, &r, q, k, v, dout, acc, &stats[r.lse_index], out->dq);
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t n = 0; n < keys; ++n) {
            int b, h, j;
            if (acc != NULL && key_at(p, n, &b, &h, &j) && slice_on(p, slices, b, h))
                lowp_key(p, mask, b, h, j, q, k, v, dout, stats, acc, out);
        }
        free(acc);
    }
    free(stats);
    return failed ? -1 : 0;
}
