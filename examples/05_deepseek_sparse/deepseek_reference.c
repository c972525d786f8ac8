/* deepseek_reference.c — the CPU oracles of example 05, in double precision (deepseek_sparse.h).
 *
 *   ds_index_scores_ref   the lightning indexer's scores of one query, plus an error scale
 *   ds_check_index_scores the indexer's scores of one query against those, within fp32 rounding
 *   ds_check_selection    the top-k tie rule (any right selection passes, a wrong one fails)
 *   ds_selection_csr      the selection as the harness reference's CSR mask, so that sparse
 *                         attention is checked by attn_reference itself
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepseek_sparse.h"

int ds_index_scores_ref(const attn_problem *p, int index_heads, int index_dim, const float *q_index,
                        const float *k_index, const float *w, int b, int i, double *scores,
                        double *bound) {
    const int n = attn_problem_row_keys(p, b, i);
    const int64_t r = attn_problem_token_index(p, true, b, i);
    for (int s = 0; s < n; ++s) {
        const float *ks = k_index + attn_problem_token_index(p, false, b, s) * index_dim;
        double sum = 0.0, scale = 0.0;
        for (int j = 0; j < index_heads; ++j) {
            const float *qj = q_index + (r * index_heads + j) * index_dim;
            double dot = 0.0, mag = 0.0;
            for (int d = 0; d < index_dim; ++d) {
                dot += (double)qj[d] * ks[d];
                mag += fabs((double)qj[d] * ks[d]);
            }
            const double wj = w[r * index_heads + j];
            sum += wj * (dot > 0.0 ? dot : 0.0); /* ReLU, then the head's weight */
            scale += fabs(wj) * mag;
        }
        scores[s] = sum;
        if (bound)
            bound[s] = scale;
    }
    return n;
}

void ds_check_index_scores(const float *got, const double *want, const double *bound, int n, int b,
                           int i, attn_stage_check *out) {
    out->rows++;
    for (int t = 0; t < n; ++t) {
        /* fp32 sums of D_I products per head: a few ulps of the magnitudes */
        const double err = fabs(got[t] - want[t]), tol_t = 1e-5 * bound[t] + 1e-30;
        out->max_err = err > out->max_err ? err : out->max_err;
        if (!(err <= tol_t) && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "b=%d i=%d key %d: %.9g, want %.9g (tolerance %.3g)", b, i, t, (double)got[t],
                     want[t], tol_t);
        }
    }
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int ds_check_selection(const float *scores, int n, int topk, const int32_t *sel, char *why,
                       size_t why_len) {
    const int want = topk < n ? topk : n;
    float kth = -INFINITY; /* the true topk-th largest score (n <= topk: every key is taken) */
    if (want > 0 && n > topk) {
        float *sorted = malloc((size_t)n * sizeof *sorted);
        if (!sorted) {
            snprintf(why, why_len, "out of memory");
            return 1;
        }
        memcpy(sorted, scores, (size_t)n * sizeof *sorted);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_desc);
        kth = sorted[topk - 1];
        free(sorted);
    }
    for (int s = 0; s < topk; ++s) {
        const int32_t x = sel[s];
        if (s >= want) {
            if (x != -1) {
                snprintf(why, why_len, "slot %d holds %d, want -1 (only %d keys to select)", s, x,
                         want);
                return 1;
            }
            continue;
        }
        if (x < 0 || x >= n) {
            snprintf(why, why_len, "slot %d holds %d, outside the %d visible keys", s, x, n);
            return 1;
        }
        if (s > 0 && x <= sel[s - 1]) {
            snprintf(why, why_len, "slot %d holds %d after %d: not strictly ascending", s, x,
                     sel[s - 1]);
            return 1;
        }
        if (!(scores[x] >= kth)) {
            snprintf(why, why_len, "key %d has score %.9g below the %d-th largest %.9g", x,
                     (double)scores[x], topk, (double)kth);
            return 1;
        }
    }
    return 0;
}

void ds_selection_csr(const attn_problem *p, int topk, const int32_t *sel, int64_t *row_ptr,
                      int32_t *col_idx) {
    int64_t nnz = 0;
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < p->Lq; ++i) {
            row_ptr[(int64_t)b * p->Lq + i] = nnz;
            if (i >= attn_problem_seq_q(p, b))
                continue;
            const int32_t *row = sel + attn_problem_token_index(p, true, b, i) * topk;
            for (int s = 0; s < topk; ++s)
                if (row[s] >= 0)
                    col_idx[nnz++] = row[s];
        }
    row_ptr[(int64_t)p->B * p->Lq] = nnz;
}
