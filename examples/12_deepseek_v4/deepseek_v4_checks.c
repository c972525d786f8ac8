/* deepseek_v4_checks.c — Example 12's three stages' clear and check hooks (attn/example.h): what
 * each kernel wrote against the double-precision reference (deepseek_v4_reference.c), on the query
 * rows the module samples (deepseek_v4_stages.c sets them up):
 *   compress   every entry (and CSA's index keys) within the storage dtype's rounding of the
 *              reference's; the accepted device entries are what the later references read;
 *   index      the scores within fp32's rounding of the reference's on the accepted index keys,
 *              -inf exactly where the entry is not visible; the selection under example 05's
 *              tie rule (ds_check_selection) over the visible entries;
 *   attention  every query row, every head, against the reference over the window and the
 *              accepted selection (CSA) or every visible entry (HCA); decode also has its paged
 *              pool of entries compared with the reference's entries.
 * Bounds: an fp16 (bf16) output is within 2^-10 (2^-7) of its value relative, plus 2e-3 (1.6e-2)
 * absolute for the fp32 sums of O(1) terms — a dropped slot, a missing bias, a window one token
 * off or a missing sink moves values by more than 5e-2 at these sizes (tests/CMakeLists.txt
 * plants them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/tensor.h"
#include "deepseek_v4.h"

static bool checked(const v4_state *s, int t) { return t % s->stride == 0 || t == s->c.L - 1; }

static double rel_bound(const v4_state *s) { return s->p.dtype == ATTN_F16 ? 0x1p-10 : 0x1p-7; }
static double abs_bound(const v4_state *s) { return s->p.dtype == ATTN_F16 ? 2e-3 : 1.6e-2; }

/* got (n values) against want: the largest error into out; the first failure into detail. */
static void compare(const v4_state *s, const char *what, const float *got, const double *want,
                    size_t n, size_t row_len, attn_stage_check *out) {
    for (size_t i = 0; i < n; ++i) {
        const double err = fabs((double)got[i] - want[i]);
        const double bound = rel_bound(s) * fabs(want[i]) + abs_bound(s);
        if (isnan(out->max_err) || err > out->max_err || isnan(got[i]))
            out->max_err = isnan(got[i]) ? INFINITY : err;
        if ((!(err <= bound)) && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail, "%s row %zu channel %zu: got %.6g, want %.6g",
                     what, i / row_len, i % row_len, got[i], want[i]);
        }
    }
    out->bound = abs_bound(s);
}

/* n values of the dtype at src on the device into dst as fp32. */
static int read_back(const v4_state *s, float *dst, const void *src, size_t n) {
    void *tmp = attn_host_alloc(n * attn_dtype_size(s->p.dtype), "the read-back outputs");
    const int rc = tmp == NULL || attn_device_read(dst, src, n, s->p.dtype, tmp);
    free(tmp);
    return rc;
}

int v4_clear_compress(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    v4_state *s = state;
    const size_t es = attn_dtype_size(s->p.dtype), n = (size_t)s->n * s->c.B;
    return attn_device_fill_nan(s->args.comp, n * s->c.D * es) ||
           (s->c.kind == V4_CSA && attn_device_fill_nan(s->args.icomp, n * s->c.DI * es));
}

int v4_check_compress(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    v4_state *s = state;
    const size_t n = (size_t)s->n * s->c.B;
    if (read_back(s, s->comp, s->args.comp, n * s->c.D))
        return 1;
    compare(s, "entry", s->comp, s->ref_comp, n * s->c.D, s->c.D, out);
    if (s->c.kind == V4_CSA) {
        if (read_back(s, s->icomp, s->args.icomp, n * s->c.DI))
            return 1;
        compare(s, "index key", s->icomp, s->ref_icomp, n * s->c.DI, s->c.DI, out);
    }
    out->rows = (int64_t)n;
    return 0;
}

int v4_clear_index(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    v4_state *s = state;
    const size_t rows = (size_t)s->c.B * s->c.L, K = (size_t)(s->K > 0 ? s->K : 1);
    return attn_device_fill_nan(s->args.logits, rows * s->n * sizeof(float) + 4) ||
           attn_device_fill_nan(s->args.sel, rows * K * sizeof(int32_t));
}

/* The sum of |w_h q_hi k_i| over index heads h and channels i for each of the n entries: the scale
 * of fp32's rounding of their scores. */
static void score_magnitudes(const v4_config *c, const float *qI, const float *wI,
                             const double *keys, int n, double *mag) {
    for (int w = 0; w < n; ++w) {
        mag[w] = 0.0;
        for (int j = 0; j < c->HI * c->DI; ++j) /* head j / DI, channel j % DI */
            mag[w] += fabs((double)wI[j / c->DI] * qI[j] * keys[(size_t)w * c->DI + j % c->DI]);
    }
}

/* Query t of sequence b: its n scores got against want (the reference's on the accepted index
 * keys) within fp32's rounding, -inf where the entry is not visible yet. */
static void check_scores(const v4_state *s, int b, int t, const float *got, const double *want,
                         const double *mag, attn_stage_check *out) {
    const int n = s->n, vis = v4_ref_visible(&s->c, t, n);
    for (int w = 0; w < n && out->pass; ++w) {
        const bool ok =
            w < vis ? fabs(got[w] - want[w]) <= 1e-5 * mag[w] + 1e-30 : got[w] == -INFINITY;
        if (w < vis && fabs(got[w] - want[w]) > out->max_err)
            out->max_err = fabs(got[w] - want[w]);
        if (!ok) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail, "b=%d t=%d entry %d: score %.6g, want %.6g%s",
                     b, t, w, got[w], w < vis ? want[w] : -INFINITY,
                     w < vis ? "" : " (not visible)");
        }
    }
}

/* Query t of sequence b (row): its selection among the visible entries (the rest were -inf:
 * dropped) under example 05's tie rule, accepted into s->sel for the attention stage. */
static void check_selection(v4_state *s, int b, int t, size_t row, const float *got, int32_t *kept,
                            attn_stage_check *out) {
    const int K = s->K, vis = v4_ref_visible(&s->c, t, s->n);
    int nk = 0;
    for (int j = 0; j < K; ++j) {
        const int32_t e = s->seen[row * K + j];
        if (e >= 0 && e < vis)
            kept[nk++] = e;
    }
    for (int j = nk; j < K; ++j)
        kept[j] = -1;
    char why[200];
    if (out->pass && ds_check_selection(got, vis, K, kept, why, sizeof why) != 0) {
        out->pass = false;
        snprintf(out->detail, sizeof out->detail, "b=%d t=%d: %s", b, t, why);
    }
    memcpy(s->sel + row * K, kept, (size_t)K * sizeof(int32_t));
}

int v4_check_index(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    v4_state *s = state;
    const v4_config *c = &s->c;
    const int n = s->n, K = s->K;
    const size_t rows = (size_t)c->B * c->L;
    if (n == 0) { /* below one window: nothing to score, nothing selected */
        out->rows = (int64_t)rows;
        return 0;
    }
    if (attn_to_host(s->logits, s->args.logits, rows * n * sizeof(float)) ||
        attn_to_host(s->seen, s->args.sel, rows * K * sizeof(int32_t)))
        return 1;
    double *want = attn_host_alloc((size_t)n * sizeof(double), "the index check"),
           *keys = attn_host_alloc((size_t)n * c->DI * sizeof(double), "the index check"),
           *mag = attn_host_alloc((size_t)n * sizeof(double), "the index check");
    int32_t *kept = attn_host_alloc((size_t)K * sizeof(int32_t), "the index check");
    int rc = !want || !keys || !mag || !kept;
    out->max_err = 0.0;
    for (int b = 0; !rc && b < c->B; ++b) {
        for (size_t i = 0; i < (size_t)n * c->DI; ++i) /* the accepted index keys */
            keys[i] = s->icomp[(size_t)b * n * c->DI + i];
        for (int t = 0; t < c->L; ++t) {
            if (!checked(s, t))
                continue;
            const size_t row = (size_t)b * c->L + t;
            const float *qI = s->qI + row * c->HI * c->DI, *wI = s->wI + row * c->HI;
            v4_ref_index_scores(c, qI, wI, keys, n, want);
            score_magnitudes(c, qI, wI, keys, n, mag);
            check_scores(s, b, t, s->logits + row * n, want, mag, out);
            check_selection(s, b, t, row, s->logits + row * n, kept, out);
            out->rows++;
        }
    }
    out->bound = NAN;
    free(want);
    free(keys);
    free(mag);
    free(kept);
    return rc;
}

int v4_clear_attention(void *state, const attn_kernel *k, int chunk) {
    (void)chunk;
    v4_state *s = state;
    const size_t es = attn_dtype_size(s->p.dtype);
    const size_t pool = (size_t)s->c.B * s->args.pages_per_seq * s->c.page * s->c.D * es;
    return (k->id == V4_K_DECODE && attn_device_fill_nan(s->args.pool, pool)) ||
           attn_device_fill_nan(s->args.o, (size_t)s->c.B * s->c.L * s->c.H * s->c.D * es);
}

/* Decode's paged pool: the entries read through the page table against the reference's. */
static int check_pool(v4_state *s, attn_stage_check *out) {
    const v4_config *c = &s->c;
    const size_t n = (size_t)s->n, D = (size_t)c->D;
    const size_t pool_n = (size_t)c->B * s->args.pages_per_seq * c->page;
    if (read_back(s, s->pool, s->args.pool, pool_n * D))
        return 1;
    float *lin = attn_host_alloc((size_t)c->B * n * D * sizeof(float), "the paged entries");
    if (lin == NULL)
        return 1;
    for (int b = 0; b < c->B; ++b)
        for (size_t w = 0; w < n; ++w) {
            const int32_t pg = s->page_table[b * s->args.pages_per_seq + (int)w / c->page];
            memcpy(lin + ((size_t)b * n + w) * D,
                   s->pool + ((size_t)pg * c->page + w % c->page) * D, D * sizeof(float));
        }
    compare(s, "paged entry", lin, s->ref_comp, (size_t)c->B * n * D, D, out);
    free(lin);
    return 0;
}

int v4_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    v4_state *s = state;
    const v4_config *c = &s->c;
    const size_t L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D, n = (size_t)s->n;
    const int K = s->K;
    if (read_back(s, s->out, s->args.o, (size_t)c->B * L * H * D))
        return 1;
    if (k->id == V4_K_DECODE && n > 0 && check_pool(s, out))
        return 1;
    double *want = attn_host_alloc(H * D * sizeof(double), "the attention check");
    int32_t *chosen = attn_host_alloc((n + 1) * sizeof(int32_t), "the attention check");
    if (!want || !chosen)
        return 1;
    for (int b = 0; b < c->B; ++b)
        for (int t = 0; t < c->L; ++t) {
            if (!checked(s, t))
                continue;
            const size_t row = (size_t)b * L + t;
            const int vis = v4_ref_visible(c, t, (int)n);
            int nc = 0;
            if (c->kind == V4_CSA) {
                for (int j = 0; j < K; ++j)
                    if (s->sel[row * K + j] >= 0)
                        chosen[nc++] = s->sel[row * K + j];
            } else {
                for (int w = 0; w < vis; ++w)
                    chosen[nc++] = w;
            }
            v4_ref_attention_row(c, s->q + row * H * D, s->kv + (size_t)b * L * D,
                                 s->comp + (size_t)b * n * D, chosen, nc, s->sinks, t, want);
            char what[64];
            snprintf(what, sizeof what, "b=%d t=%d output", b, t);
            compare(s, what, s->out + row * H * D, want, H * D, D, out);
            out->rows++;
        }
    free(want);
    free(chosen);
    return 0;
}
