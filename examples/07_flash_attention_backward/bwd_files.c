/* bwd_files.c — example 07's tensors as files (attn/tensor.h's format): --tensors DIR reads the
 * inputs and the forward's O and LSE (checked against the problem's shapes, a bad file being a
 * usage error), --dump DIR writes them and the gradients.
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

/* Reads DIR/name.bin into *dst (malloc'ed) as rows x cols (cols 0: a 1-D tensor of rows values),
 * each value rounded to the problem's dtype. 0, or ATTN_EXIT_USAGE with why. */
static int load_input(const bwd_state *s, const char *name, const char *what, int64_t rows,
                      int64_t cols, bool round, float **dst, char *why, size_t len) {
    char path[1024], reason[512];
    snprintf(path, sizeof path, "%s/%s.bin", s->opt.inputs, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, len, "--tensors: %s is missing: the backward needs %s", path, what);
        return ATTN_EXIT_USAGE;
    }
    fclose(f);
    int64_t dims[3] = {0, 0, 0};
    int ndim = 0;
    if (attn_tensor_load(path, dst, &ndim, dims, 3, reason, sizeof reason) != 0) {
        snprintf(why, len, "--tensors: %s", reason);
        return ATTN_EXIT_USAGE;
    }
    const int want_ndim = cols > 0 ? 2 : 1;
    if (ndim != want_ndim || dims[0] != rows || (cols > 0 && dims[1] != cols)) {
        char got[96] = "", want[64];
        for (int d = 0; d < ndim; ++d) {
            size_t u = strlen(got);
            snprintf(got + u, sizeof got - u, "%s%lld", d ? ", " : "", (long long)dims[d]);
        }
        if (cols > 0)
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else
            snprintf(want, sizeof want, "[%lld]", (long long)rows);
        snprintf(why, len, "--tensors: %s.bin is [%s] but this problem's %s is %s", name, got, what,
                 want);
        free(*dst);
        *dst = NULL;
        return ATTN_EXIT_USAGE;
    }
    for (int64_t e = 0; round && e < rows * (cols > 0 ? cols : 1); ++e)
        (*dst)[e] = attn_round_dtype((*dst)[e], s->p.dtype);
    return 0;
}

/* The selection of a file, checked as the kernels need it: per query, ascending keys it sees,
 * then -1. 0, or ATTN_EXIT_USAGE with why. */
static int load_selection(bwd_state *s, char *why, size_t len) {
    const attn_problem *p = &s->p;
    const int64_t rows = attn_problem_q_rows(p);
    char path[1024], reason[512];
    snprintf(path, sizeof path, "%s/sel.bin", s->opt.inputs);
    float *vals = NULL;
    int64_t dims[3] = {0, 0, 0};
    int ndim = 0;
    if (attn_tensor_load(path, &vals, &ndim, dims, 3, reason, sizeof reason) != 0) {
        snprintf(why, len, "--tensors: %s (--topk needs the selection, [%lld, %d])", reason,
                 (long long)rows, s->k_eff);
        return ATTN_EXIT_USAGE;
    }
    if (ndim != 2 || dims[0] != rows || dims[1] != s->k_eff) {
        snprintf(why, len,
                 "--tensors: sel.bin has %lld slots per query for %lld queries, but --topk %d on "
                 "this problem needs %d slots (min(k, Lk)) for %lld",
                 ndim == 2 ? (long long)dims[1] : -1LL, (long long)dims[0], s->opt.topk, s->k_eff,
                 (long long)rows);
        free(vals);
        return ATTN_EXIT_USAGE;
    }
    s->sel = attn_host_alloc((size_t)rows * s->k_eff * sizeof(int32_t), "the selection");
    for (int b = 0; s->sel && b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
            const int64_t r = attn_problem_token_index(p, true, b, i);
            const int n = attn_problem_row_keys(p, b, i);
            for (int t = 0; t < s->k_eff; ++t) {
                const float x = vals[r * s->k_eff + t];
                const int32_t prev = t ? s->sel[r * s->k_eff + t - 1] : -2;
                const bool ok = x == -1.0f ? (prev != -2 || t == 0)
                                           : (x == floorf(x) && x >= 0 && x < n &&
                                              (t == 0 || (prev >= 0 && x > prev)));
                if (!ok) {
                    snprintf(why, len,
                             "--tensors: sel.bin: query (b=%d, i=%d) slot %d holds %g, not an "
                             "ascending key in [0, %d) nor a trailing -1",
                             b, i, t, (double)x, n);
                    free(vals);
                    return ATTN_EXIT_USAGE;
                }
                s->sel[r * s->k_eff + t] = (int32_t)x;
            }
        }
    free(vals);
    return s->sel ? 0 : 1;
}

int bwd_load_inputs(bwd_state *s, char *why, size_t len) {
    const attn_problem *p = &s->p;
    const int64_t qr = (int64_t)(attn_problem_q_elems(p) / (size_t)p->D);
    const int64_t kr = (int64_t)(attn_problem_k_elems(p) / (size_t)p->D);
    int rc = load_input(s, "q", "Q (rows x D)", qr, p->D, true, &s->q, why, len);
    rc = rc ? rc : load_input(s, "k", "K (rows x D)", kr, p->D, true, &s->k, why, len);
    rc = rc ? rc : load_input(s, "v", "V (rows x D)", kr, p->D, true, &s->v, why, len);
    rc = rc ? rc
            : load_input(s, "do", "dO, the loss gradient (rows x D)", qr, p->D, true, &s->dout, why,
                         len);
    rc = rc ? rc
            : load_input(s, "o", "the forward's output O (rows x D)", qr, p->D, true, &s->o, why,
                         len);
    rc = rc ? rc
            : load_input(s, "lse", "the forward's log-sum-exp LSE",
                         (int64_t)attn_problem_lse_elems(p), 0, false, &s->lse, why, len);
    if (rc == 0 && s->mode == BWD_TOPK)
        rc = load_selection(s, why, len);
    return rc;
}

int bwd_dump_grads(const bwd_state *s, const char *suffix, const attn_grads *g) {
    const attn_problem *p = &s->p;
    const int64_t qd[2] = {(int64_t)(attn_problem_q_elems(p) / (size_t)p->D), p->D};
    const int64_t kd[2] = {(int64_t)(attn_problem_k_elems(p) / (size_t)p->D), p->D};
    const char *names[3] = {"dq", "dk", "dv"};
    const float *data[3] = {g->dq, g->dk, g->dv};
    for (int t = 0; t < 3; ++t) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_%s.bin", s->dump_dir, names[t], suffix);
        if (attn_tensor_save(path, data[t], 2, t == 0 ? qd : kd) != 0) {
            fprintf(stderr, "error: --dump: cannot write %s\n", path);
            return 1;
        }
    }
    return 0;
}

int bwd_dump(void *state, const char *dir) {
    const bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const int64_t qr = (int64_t)(attn_problem_q_elems(p) / (size_t)p->D);
    const int64_t kr = (int64_t)(attn_problem_k_elems(p) / (size_t)p->D);
    const attn_dump_tensor t[] = {
        {"q", s->q, NULL, 2, {qr, p->D}},
        {"k", s->k, NULL, 2, {kr, p->D}},
        {"v", s->v, NULL, 2, {kr, p->D}},
        {"do", s->dout, NULL, 2, {qr, p->D}},
        {"o", s->o, NULL, 2, {qr, p->D}},
        {"lse", s->lse, NULL, 1, {(int64_t)attn_problem_lse_elems(p)}},
        {"sel", NULL, s->mode == BWD_TOPK ? s->sel : NULL, 2, {attn_problem_q_rows(p), s->k_eff}},
    };
    if (attn_dump_tensors(dir, t, (int)(sizeof t / sizeof t[0])) != 0)
        return 1;
    bwd_state tmp = *s;
    tmp.dump_dir = dir;
    return s->ref_done ? bwd_dump_grads(&tmp, "ref", &s->ref) : 0;
}

/* --tensors DIR: the banner names the folder instead of a seed and amplitude. */
const char *bwd_inputs_read_from(void *state) {
    const bwd_state *s = (const bwd_state *)state;
    return s->from_files ? s->opt.inputs : NULL;
}
