/* deepseek_stages.c — example 05's stages on the one driver (attn/example.h): its flags, its
 * inputs, and what each stage is checked against. The kernels and their launchers are in
 * deepseek_sparse.cu, the CPU oracles in deepseek_reference.c.
 *
 *   stage      kernels                          checked against (every checked row)
 *   indexer    indexer            (chunked)     ds_index_scores_ref, fp32 rounding bound
 *   top-k      topk_bitonic,      (chunked)     the tie rule (ds_check_selection) on the
 *              topk_radix                       kernel's own scores of that chunk
 *   attention  sparse_mma, sparse_gather,       attn_reference with the selection the top-k
 *              end_to_end, dense_fa2            check accepted as its mask (dense_fa2: without
 *                                               it), FlashAttention's 2x rule
 *
 * The indexer and the top-k work on query chunks (the logits of one chunk only: peak memory
 * B * chunk * Lk floats). Each top-k kernel writes its chunk's rows of the selection; the check
 * of that chunk records the rows it accepted, and the attention stage's reference is built from
 * those records, never from the device buffer read back at the end: a kernel that damages
 * another chunk's rows makes attention differ from its reference, and fails.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h"

static ds_state *of(void *state) { return (ds_state *)state; }

/* Is query position i of sequence b among the checked ones? */
static bool checked(const ds_state *s, int b, int i) {
    return i % s->stride == 0 || i == attn_problem_seq_q(&s->p, b) - 1;
}

/* ---- the indexer stage --------------------------------------------------------------------- */

/* The chunk's query positions [i0, i1) of sequence b. */
static void chunk_rows(const ds_state *s, int b, int chunk, int *i0, int *i1) {
    const int n = attn_problem_seq_q(&s->p, b);
    *i0 = chunk * s->opt.chunk;
    *i1 = *i0 + s->opt.chunk < n ? *i0 + s->opt.chunk : n;
}

int ds_clear_logits(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const ds_state *s = of(state);
    return attn_device_fill_nan(s->d_logits,
                                (size_t)s->p.B * s->opt.chunk * s->p.Lk * sizeof(float));
}

/* A synthetic top-k input (--scores), position e of a row. */
static float synthetic_score(int kind, uint64_t seed, int64_t row, int e) {
    const float u = attn_uniform(seed, 6, (uint64_t)row * 1000003u + (uint64_t)e);
    switch (kind) {
    case DS_SCORES_EQUAL:
        return 1.0f;
    case DS_SCORES_NEGINF:
        return -INFINITY;
    case DS_SCORES_LARGE:
        return u * 3e38f;
    default: /* ties: 0, 1, 2, 3 */
        return floorf((u + 1.0f) * 2.0f);
    }
}

int ds_check_indexer(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    ds_state *s = of(state);
    const bool fp8 = k->id == DS_KERNEL_INDEXER_FP8;
    ds_fp8_view v = {0};
    const attn_problem *p = &s->p;
    const int Lk = p->Lk, C = s->opt.chunk;
    const size_t lbytes = (size_t)p->B * C * Lk * sizeof(float);
    if (attn_to_host(s->logits, s->d_logits, lbytes))
        return 1;
    double *want = attn_host_alloc((size_t)Lk * sizeof(double) + 8, "the indexer's reference");
    double *bound = attn_host_alloc((size_t)Lk * sizeof(double) + 8, "the indexer's reference");
    out->max_err = 0.0;
    if (want == NULL || bound == NULL || (fp8 && ds_fp8_read_back(s, &v, chunk, out) != 0)) {
        free(want);
        free(bound);
        ds_fp8_release(&v);
        fprintf(stderr, "error: the indexer's check: no host memory, or no read-back\n");
        return 1;
    }
    for (int b = 0; b < p->B; ++b) {
        int i0, i1;
        chunk_rows(s, b, chunk, &i0, &i1);
        for (int i = i0; i < i1; ++i) {
            float *got = s->logits + ((size_t)b * C + (i - i0)) * Lk;
            if (fp8 && s->fp8_scores != NULL) /* --dump: kept before --scores replaces them */
                memcpy(s->fp8_scores + attn_problem_token_index(p, true, b, i) * Lk, got,
                       (size_t)attn_problem_row_keys(p, b, i) * sizeof(float));
            if (checked(s, b, i)) {
                /* (2) FP8: the exact scores of the kernel's own codes and scales */
                const int n = fp8 ? ds_fp8_scores_ref(p, s->opt.index_heads, s->opt.index_dim, v.qv,
                                                      v.ws, v.kv, v.ks, b, i, want, bound)
                                  : ds_index_scores_ref(p, s->opt.index_heads, s->opt.index_dim,
                                                        s->qi, s->ki, s->w, b, i, want, bound);
                if (fp8)
                    ds_fp8_check_exact(s, &v, b, i, got, out);
                ds_check_index_scores(got, want, bound, n, b, i, out);
            }
            /* --scores: the top-k stage's input replaced, once the indexer's is checked */
            for (int t = 0;
                 s->opt.scores != DS_SCORES_INDEXER && t < attn_problem_row_keys(p, b, i); ++t)
                got[t] = synthetic_score(s->opt.scores, s->seed,
                                         attn_problem_token_index(p, true, b, i), t);
        }
    }
    free(want);
    free(bound);
    s->fp8_checked |= fp8;
    if (fp8 && chunk == (p->Lq + C - 1) / C - 1) /* measured, beside the bound it is held to */
        printf("indexer_fp8 against the unquantized inputs' exact scores: the largest error is "
               "%.3g of its FP8 bound; top-%d set recall >= %.3f on every checked row\n",
               s->fp8_worst, s->k_eff, s->fp8_recall);
    ds_fp8_release(&v);
    if (s->opt.scores != DS_SCORES_INDEXER && attn_to_device(s->d_logits, s->logits, lbytes))
        return 1;
    return 0;
}

/* ---- the top-k stage ----------------------------------------------------------------------- */

int ds_clear_selection(void *state, const attn_kernel *k, int chunk) {
    (void)k;
    const ds_state *s = of(state);
    for (int b = 0; b < s->p.B; ++b) { /* only this chunk's rows: the others hold earlier chunks' */
        int i0, i1;
        chunk_rows(s, b, chunk, &i0, &i1);
        if (i1 > i0 &&
            attn_device_fill_nan((int32_t *)s->d_sel +
                                     attn_problem_token_index(&s->p, true, b, i0) * s->k_eff,
                                 (size_t)(i1 - i0) * s->k_eff * sizeof(int32_t)))
            return 1;
    }
    return 0;
}

int ds_check_topk(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k;
    ds_state *s = of(state);
    const attn_problem *p = &s->p;
    const int K = s->k_eff;
    for (int b = 0; b < p->B; ++b) {
        int i0, i1;
        chunk_rows(s, b, chunk, &i0, &i1);
        if (i1 <= i0)
            continue;
        int32_t *rows = s->seen + attn_problem_token_index(p, true, b, i0) * K;
        if (attn_to_host(rows, (int32_t *)s->d_sel + attn_problem_token_index(p, true, b, i0) * K,
                         (size_t)(i1 - i0) * K * sizeof(int32_t)))
            return 1;
        for (int i = i0; i < i1; ++i) {
            const int32_t *got = s->seen + attn_problem_token_index(p, true, b, i) * K;
            if (!checked(s, b, i))
                continue;
            char why[200];
            const float *scores = s->logits + ((size_t)b * s->opt.chunk + (i - i0)) * p->Lk;
            out->rows++;
            if (ds_check_selection(scores, attn_problem_row_keys(p, b, i), K, got, why,
                                   sizeof why) != 0 &&
                out->pass) {
                out->pass = false;
                snprintf(out->detail, sizeof out->detail, "b=%d i=%d: %s", b, i, why);
            }
            /* the accepted rows are what attention's reference reads (the last top-k kernel to
             * run on a chunk is the one whose selection stays on the device) */
            memcpy(s->sel + attn_problem_token_index(p, true, b, i) * K, got,
                   (size_t)K * sizeof(int32_t));
        }
    }
    return 0;
}

/* ---- the attention stage ------------------------------------------------------------------- */

/* Query rows of the reference: the checked positions, every head. */
static uint8_t *checked_rows(const ds_state *s) {
    uint8_t *rows = attn_host_alloc((size_t)attn_problem_row_count(&s->p) + 1, "the checked rows");
    for (int64_t n = 0; rows != NULL && n < attn_problem_row_count(&s->p); ++n) {
        const attn_row row = attn_row_at(&s->p, n);
        rows[n] = checked(s, row.b, row.i);
    }
    return rows;
}

int ds_check_selection_row(const int32_t *row, int k, int n, char *why, size_t why_len) {
    for (int t = 0; t < k; ++t)
        if (row[t] < -1 || row[t] >= n || (row[t] >= 0 && t > 0 && row[t] <= row[t - 1])) {
            snprintf(why, why_len, "slot %d holds %d, not -1 nor an ascending position in [0, %d)",
                     t, row[t], n);
            return 1;
        }
    return 0;
}

int ds_prepare_attention(void *state, char *why, size_t len) {
    ds_state *s = of(state);
    const attn_problem *p = &s->p;
    const int K = s->k_eff;
    /* what the attention kernels will read: the selection on the device, validated */
    if (attn_to_host(s->seen, s->d_sel, (size_t)s->rows_q * K * sizeof(int32_t)))
        return 1;
    if (s->opt.corrupt_text != NULL && s->rows_q > 0) { /* a test of this very validation */
        s->seen[0] = s->corrupt_value;
        if (attn_to_device(s->d_sel, s->seen, sizeof(int32_t)))
            return 1;
    }
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
            const int32_t *row = s->seen + attn_problem_token_index(p, true, b, i) * K;
            const int n = attn_problem_row_keys(p, b, i);
            char bad[160];
            if (ds_check_selection_row(row, K, n, bad, sizeof bad)) {
                snprintf(why, len, "attention input: query (b=%d, i=%d) %s", b, i, bad);
                return ATTN_EXIT_USAGE;
            }
        }
    /* the reference: the selection the top-k checks accepted, as its CSR mask */
    const int64_t csr_rows = (int64_t)p->B * p->Lq;
    s->row_ptr = attn_host_alloc((size_t)(csr_rows + 1) * sizeof(int64_t), "the reference's mask");
    s->col_idx =
        attn_host_alloc((size_t)csr_rows * K * sizeof(int32_t) + 4, "the reference's mask");
    uint8_t *rows = checked_rows(s);
    if (s->row_ptr == NULL || s->col_idx == NULL || rows == NULL) {
        free(rows);
        return 1;
    }
    ds_selection_csr(p, K, s->sel, s->row_ptr, s->col_idx);
    attn_mask mask = {ATTN_MASK_CSR, NULL, NULL, s->row_ptr, s->col_idx};
    const int rc = attn_stage_reference_make(&s->ref, p, &mask, s->q, s->kx, s->vx, rows,
                                             "the attention reference");
    free(rows);
    return rc;
}

int ds_clear_output(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const ds_state *s = of(state);
    return attn_device_fill_nan_output(&s->p, s->d_o, s->d_lse);
}

/* The dense reference of the baseline, on the checked rows (made on its first check). */
static int dense_reference(ds_state *s) {
    if (s->dense_ref.o != NULL)
        return 0;
    uint8_t *rows = checked_rows(s);
    const int rc =
        rows == NULL || attn_stage_reference_make(&s->dense_ref, &s->p, NULL, s->q, s->kx, s->vx,
                                                  rows, "the dense reference");
    free(rows);
    return rc;
}

int ds_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    ds_state *s = of(state);
    const bool dense = (k->serves & ATTN_SERVES_BASELINE) != 0;
    if (dense && dense_reference(s) != 0)
        return 1;
    return attn_stage_check_output(&s->p, s->d_o, s->d_lse, s->staging, s->out, s->lse,
                                   dense ? &s->dense_ref : &s->ref, s->amplitude, out);
}
