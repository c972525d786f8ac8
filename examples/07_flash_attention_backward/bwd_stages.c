/* bwd_stages.c — example 07's stages on the one driver (attn/example.h): its flags, its inputs,
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
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h" /* example 05: ds_selection_csr */
#include "flash_bwd.h"

static bwd_state *of(void *state) { return (bwd_state *)state; }

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

static const char *mode_name(bwd_mode m) {
    return m == BWD_PATTERN ? "block-sparse pattern" : m == BWD_TOPK ? "top-k selection" : "dense";
}

/* ---- step 1: the flags (and --tensors, read here so that a bad file is a usage error) -------- */

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
    s->sel = xmalloc((size_t)rows * s->k_eff * sizeof(int32_t));
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

static int load_inputs(bwd_state *s, char *why, size_t len) {
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

int bwd_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                attn_problem *p, char *why, size_t len) {
    (void)ex;
    bwd_state *s = of(state);
    s->opt = *(const bwd_options *)opts;
    s->p = *p;
    if (cli->pattern != NULL && s->opt.topk > 0) {
        snprintf(why, len,
                 "--pattern and --topk: give one (a block-sparse pattern, or a top-k "
                 "selection)");
        return ATTN_EXIT_USAGE;
    }
    if (cli->pattern != NULL) {
        /* example 04's patterns; "none" is dense */
        static const attn_sparse_config cfg = {"none", NULL};
        if (attn_sparse_prepare(&s->sparse, &cfg, cli->pattern, why, len) != 0)
            return ATTN_EXIT_USAGE;
        s->sparse_on = true;
        s->mode = s->sparse.has_pattern ? BWD_PATTERN : BWD_DENSE;
    } else if (s->opt.topk > 0) {
        s->mode = BWD_TOPK;
        s->k_eff = s->opt.topk < p->Lk ? s->opt.topk : p->Lk;
    }
    if (s->opt.inputs != NULL) {
        s->from_files = true;
        return load_inputs(s, why, len);
    }
    return 0;
}

attn_verdict bwd_verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                         size_t len) {
    const bwd_state *s = of(state);
    const bwd_mode km = bwd_kernel_mode(k);
    if (km != s->mode) {
        static const char *const needs[] = {"no --pattern and no --topk", "a --pattern",
                                            "--topk K"};
        snprintf(why, len, "kernel '%s' serves the %s case (%s); this problem is %s", k->name,
                 mode_name(km), needs[km], mode_name(s->mode));
        return ATTN_KERNEL_CANNOT;
    }
    if (k->stage == 0 && s->from_files) {
        snprintf(why, len, "the forward's O and LSE come from --tensors");
        return ATTN_KERNEL_CANNOT;
    }
    if (strcmp(k->name, "naive") == 0) {
        /* P and dS of every (sequence, head) slice in device memory */
        const double bytes = 2.0 * 4.0 * p->B * p->H * (double)p->Lq * p->Lk;
        if (bytes > 4.0 * (1 << 30)) {
            snprintf(why, len, "naive materialises P and dS: %.1f GiB for this problem (at most 4)",
                     bytes / (1 << 30));
            return ATTN_KERNEL_CANNOT;
        }
    }
    return attn_kernel_verdict(k, p, why, len);
}

void bwd_banner(void *state, const attn_problem *p) {
    const bwd_state *s = of(state);
    printf("backward of %s attention%s", mode_name(s->mode), p->causal ? " (causal)" : "");
    if (!s->from_files) /* else dO is read too: no seed made it */
        printf(": dO uniform in [-1, 1)");
    if (s->mode == BWD_TOPK)
        printf("; top-k %d (%d slots: min(k, Lk)), %s", s->opt.topk, s->k_eff,
               s->from_files ? "the selection read from sel.bin"
                             : "a seeded random selection shared by the heads");
    printf("\n%s\n", s->from_files ? "inputs, the forward's O and LSE: read from --tensors"
                                   : "forward stage: O and LSE from the kernel of examples 03-05 "
                                     "that serves the problem, checked, then read by the backward");
}

/* ---- step 3: inputs and references -------------------------------------------------------- */

static int upload(bwd_state *s, void **dst, const float *src, size_t count) {
    return attn_device_upload(dst, src, count, s->p.dtype, s->staging);
}

/* The (sequence, head) slices to check: all of them, or for a sample of about check_rows query
 * rows whole slices spread evenly over the batch, the last one always among them (its sequence
 * is the longest of a dense batch and, causal, its last rows see every key). */
static void choose_slices(bwd_state *s, int check_rows) {
    const attn_problem *p = &s->p;
    const int S = p->B * p->H;
    const int64_t rows = attn_problem_row_count(p);
    int want = S;
    if (check_rows > 0 && rows > check_rows) {
        const double per = (double)rows / S;
        want = (int)ceil(check_rows / per);
        want = want < 1 ? 1 : want > S ? S : want;
    }
    for (int t = 0; t < want; ++t)
        s->slices[(int)((double)(t + 1) * S / want) - 1] = 1;
    s->checked_rows = 0;
    for (int64_t n = 0; n < rows; ++n) {
        const attn_row r = attn_row_at(p, n);
        s->rows[n] = s->slices[r.b * p->H + r.h];
        s->checked_rows += s->rows[n];
    }
}

static int make_inputs(bwd_state *s) {
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    if (s->from_files)
        return 0;
    s->q = xmalloc(qn * sizeof(float));
    s->k = xmalloc(kn * sizeof(float));
    s->v = xmalloc(kn * sizeof(float));
    s->dout = xmalloc(qn * sizeof(float));
    s->o = xmalloc(qn * sizeof(float));
    s->lse = xmalloc(attn_problem_lse_elems(p) * sizeof(float) + 16);
    if (!s->q || !s->k || !s->v || !s->dout || !s->o || !s->lse)
        return 1;
    /* streams 0-2: Q, K, V as the harness makes them (attn_host_inputs_make); 3: dO */
    attn_fill_uniform(s->q, qn, s->seed, 0, s->amplitude, p->dtype);
    attn_fill_uniform(s->k, kn, s->seed, 1, s->amplitude, p->dtype);
    attn_fill_uniform(s->v, kn, s->seed, 2, s->amplitude, p->dtype);
    attn_fill_uniform(s->dout, qn, s->seed, 3, 1.0f, p->dtype);
    attn_inputs_apply(s->inputs, s->q, qn, s->k, kn, s->v, kn); /* --inputs: dO keeps its signs */
    attn_fill_nan_host(s->o, qn * sizeof(float));
    attn_fill_nan_host(s->lse, attn_problem_lse_elems(p) * sizeof(float));
    return 0;
}

static int make_device(bwd_state *s) {
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t ln = attn_problem_lse_elems(p), el = attn_dtype_size(p->dtype);
    if (upload(s, &s->d_q, s->q, qn) || upload(s, &s->d_k, s->k, kn) ||
        upload(s, &s->d_v, s->v, kn) || upload(s, &s->d_dout, s->dout, qn) ||
        upload(s, &s->d_o, s->o, qn))
        return 1;
    s->d_lse = attn_device_alloc(ln * sizeof(float) + 16);
    s->d_dq = attn_device_alloc(qn * el + 16);
    s->d_dk = attn_device_alloc(kn * el + 16);
    s->d_dv = attn_device_alloc(kn * el + 16);
    if (!s->d_lse || !s->d_dq || !s->d_dk || !s->d_dv ||
        attn_to_device(s->d_lse, s->lse, ln * sizeof(float)))
        return 1;
    if (p->cu_seqlens_q) {
        const size_t n = (size_t)(p->B + 1) * sizeof(int);
        s->d_cu_q = attn_device_alloc(n);
        s->d_cu_k = attn_device_alloc(n);
        if (!s->d_cu_q || !s->d_cu_k || attn_to_device(s->d_cu_q, p->cu_seqlens_q, n) ||
            attn_to_device(s->d_cu_k, p->cu_seqlens_k, n))
            return 1;
    }
    if (s->mode == BWD_TOPK) {
        const size_t n = (size_t)attn_problem_q_rows(p) * s->k_eff * sizeof(int32_t);
        s->d_sel = attn_device_alloc(n + 16);
        if (s->d_sel == NULL || attn_to_device(s->d_sel, s->sel, n))
            return 1;
    }
    bwd_args *a = &s->args;
    memset(a, 0, sizeof *a);
    a->p = &s->p;
    a->mode = s->mode;
    a->q = s->d_q, a->k = s->d_k, a->v = s->d_v, a->o = s->d_o, a->dout = s->d_dout;
    a->lse = s->d_lse;
    a->dq = s->d_dq, a->dk = s->d_dk, a->dv = s->d_dv;
    a->cu_q = s->d_cu_q, a->cu_k = s->d_cu_k;
    a->sel = s->d_sel;
    a->topk = s->k_eff;
    a->fwd.q = s->d_q, a->fwd.k = s->d_k, a->fwd.v = s->d_v, a->fwd.o = s->d_o;
    a->fwd.lse = s->d_lse;
    a->fwd.cu_seqlens_q = s->d_cu_q, a->fwd.cu_seqlens_k = s->d_cu_k;
    if (s->mode == BWD_PATTERN) {
        a->rows = s->sparse.blocks_dev;
        a->cols = s->cols_dev;
        a->pattern = &s->sparse.pattern;
        attn_sparse_buffers(&s->sparse, &a->fwd); /* example 04's kernel reads a->fwd.sparse */
    }
    return 0;
}

/* The reference's mask: the pattern's predicate (example 04's), or the selection as CSR
 * (example 05's ds_selection_csr), or none. */
static int make_mask(bwd_state *s) {
    const attn_problem *p = &s->p;
    if (s->mode == BWD_PATTERN) {
        if (attn_sparse_build(&s->sparse, &s->p, false, s->quiet) != 0 ||
            attn_block_mask_transpose(&s->sparse.blocks, &s->cols) != 0 ||
            attn_block_mask_to_device(&s->cols, &s->cols_dev) != 0)
            return 1;
        s->mask = &s->sparse.mask;
    } else if (s->mode == BWD_TOPK) {
        const int64_t rows = attn_problem_q_rows(p), csr_rows = (int64_t)p->B * p->Lq;
        if (!s->from_files) {
            s->sel = xmalloc((size_t)rows * s->k_eff * sizeof(int32_t));
            if (s->sel == NULL)
                return 1;
            bwd_random_selection(p, s->k_eff, s->seed, s->sel);
        }
        s->row_ptr = xmalloc((size_t)(csr_rows + 1) * sizeof(int64_t));
        s->col_idx = xmalloc((size_t)csr_rows * s->k_eff * sizeof(int32_t) + 4);
        if (s->row_ptr == NULL || s->col_idx == NULL)
            return 1;
        ds_selection_csr(p, s->k_eff, s->sel, s->row_ptr, s->col_idx);
        s->sel_mask = (attn_mask){ATTN_MASK_CSR, NULL, NULL, s->row_ptr, s->col_idx};
        s->mask = &s->sel_mask;
    }
    return 0;
}

int bwd_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
              attn_buffers *b, int *chunks) {
    bwd_state *s = of(state);
    s->p = *p;
    s->quiet = cli->quiet;
    s->dump_dir = cli->dump_dir;
    s->amplitude = cli->amplitude;
    s->inputs = cli->inputs;
    s->seed = cli->seed;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t most = qn > kn ? qn : kn;
    s->slices = calloc((size_t)p->B * p->H, 1);
    s->rows = calloc((size_t)attn_problem_row_count(p) + 1, 1);
    s->staging = xmalloc(most * 4 + 16);
    if (s->slices == NULL || s->rows == NULL || s->staging == NULL || make_inputs(s) != 0 ||
        make_mask(s) != 0) {
        fprintf(stderr, "error: out of host memory for example 07's inputs\n");
        return 1;
    }
    choose_slices(s, check_rows);
    if (!s->quiet)
        printf("checked: %lld of %lld query rows (%s)\n", (long long)s->checked_rows,
               (long long)attn_problem_row_count(p),
               s->checked_rows == attn_problem_row_count(p)
                   ? "every (sequence, head) slice"
                   : "whole (sequence, head) slices: --check-all checks every one");
    if (make_device(s) != 0)
        return 1;
    b->args = &s->args;
    *chunks = 1;
    return 0;
}

/* ---- the forward stage ----------------------------------------------------------------------- */

int bwd_prepare_forward(void *state, char *why, size_t len) {
    (void)why, (void)len;
    bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), ln = attn_problem_lse_elems(p);
    s->o_ref = xmalloc(qn * sizeof(float));
    s->lse_ref = xmalloc(ln * sizeof(float) + 16);
    s->o_lowp = xmalloc(qn * sizeof(float));
    if (!s->o_ref || !s->lse_ref || !s->o_lowp ||
        attn_reference_rows(p, s->mask, s->q, s->k, s->v, s->o_ref, s->lse_ref, s->rows) ||
        attn_reference_lowp_rows(p, s->mask, s->q, s->k, s->v, s->o_lowp, s->rows)) {
        fprintf(stderr, "error: the forward reference failed (out of host memory?)\n");
        return 1;
    }
    return 0;
}

int bwd_clear_forward(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const bwd_state *s = of(state);
    return attn_device_fill_nan_output(&s->p, s->d_o, s->d_lse);
}

int bwd_check_forward(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const size_t qn = attn_problem_q_elems(p), ln = attn_problem_lse_elems(p);
    if (attn_to_host(s->staging, s->d_o, qn * attn_dtype_size(p->dtype)) ||
        attn_to_host(s->lse, s->d_lse, ln * sizeof(float)))
        return 1;
    attn_unpack(s->o, s->staging, qn, p->dtype); /* what the backward reads (and --dump writes) */
    attn_stage_check_attention(p, s->o, s->lse, s->o_ref, s->lse_ref, s->o_lowp, s->amplitude, out);
    return 0;
}

/* ---- the backward stage ---------------------------------------------------------------------- */

static int alloc_grads(attn_grads *g, size_t qn, size_t kn) {
    g->dq = xmalloc(qn * sizeof(float));
    g->dk = xmalloc(kn * sizeof(float));
    g->dv = xmalloc(kn * sizeof(float));
    return g->dq && g->dk && g->dv ? 0 : 1;
}

static void free_grads(attn_grads *g) {
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

static int dump_grads(const bwd_state *s, const char *suffix, const attn_grads *g) {
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
    if (s->dump_dir != NULL && dump_grads(s, k->name, &s->got) != 0)
        return 1;
    return 0;
}

/* ---- FLOPs, records, dump, the table's last lines ------------------------------------------- */

/* The forward's FLOPs (4 per visible entry and head dimension, as attn_problem_flops): dense
 * (causal counted exactly), the pattern's entries, or the selection's. */
static double forward_flops(const bwd_state *s) {
    const attn_problem *p = &s->p;
    if (s->mode == BWD_PATTERN)
        return 4.0 * s->sparse.stats.entries * p->H * p->D;
    if (s->mode == BWD_TOPK) {
        double n = 0.0;
        for (int b = 0; b < p->B; ++b)
            for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
                const int keys = attn_problem_row_keys(p, b, i);
                n += keys < s->k_eff ? keys : s->k_eff;
            }
        return 4.0 * n * p->H * p->D;
    }
    return attn_problem_flops(p);
}

/* FlashAttention's convention: the backward counts 2.5 x the forward's FLOPs (five matrix
 * products of the forward's size where the forward has two), whatever a version recomputes. */
double bwd_flops(void *state, const attn_kernel *k) {
    const double f = forward_flops(of(state));
    return k->stage == 0 ? f : 2.5 * f;
}

void bwd_record_json(void *state, const attn_kernel *k, char *out, size_t len) {
    (void)k;
    const bwd_state *s = of(state);
    char pattern[256] = "";
    if (s->mode == BWD_PATTERN)
        attn_pattern_format(&s->sparse.pattern, pattern, sizeof pattern);
    snprintf(out, len,
             "\"stage\":\"%s\",\"mode\":\"%s\",\"topk\":%d,\"pattern\":\"%s\","
             "\"forward_flops\":%.6g,\"device_mem_bytes\":%.0f",
             k->stage == 0 ? "forward" : "backward", mode_name(s->mode), s->k_eff, pattern,
             forward_flops(s), (double)attn_device_mem_used());
}

int bwd_dump(void *state, const char *dir) {
    const bwd_state *s = of(state);
    const attn_problem *p = &s->p;
    const int64_t qr = (int64_t)(attn_problem_q_elems(p) / (size_t)p->D);
    const int64_t kr = (int64_t)(attn_problem_k_elems(p) / (size_t)p->D);
    const struct {
        const char *name;
        const float *data;
        int64_t d0, d1;
    } t[] = {
        {"q", s->q, qr, p->D}, {"k", s->k, kr, p->D},
        {"v", s->v, kr, p->D}, {"do", s->dout, qr, p->D},
        {"o", s->o, qr, p->D}, {"lse", s->lse, (int64_t)attn_problem_lse_elems(p), 0},
    };
    char path[1024];
    int rc = 0;
    for (size_t n = 0; rc == 0 && n < sizeof t / sizeof t[0]; ++n) {
        int64_t d[2] = {t[n].d0, t[n].d1};
        snprintf(path, sizeof path, "%s/%s.bin", dir, t[n].name);
        rc = attn_tensor_save(path, t[n].data, t[n].d1 > 0 ? 2 : 1, d);
    }
    if (rc == 0 && s->mode == BWD_TOPK) {
        const int64_t rows = attn_problem_q_rows(p), d[2] = {rows, s->k_eff};
        float *x = xmalloc((size_t)rows * s->k_eff * sizeof(float));
        for (int64_t e = 0; x != NULL && e < rows * s->k_eff; ++e)
            x[e] = (float)s->sel[e];
        snprintf(path, sizeof path, "%s/sel.bin", dir);
        rc = x == NULL || attn_tensor_save(path, x, 2, d);
        free(x);
    }
    if (rc != 0) {
        fprintf(stderr, "error: --dump: cannot write %s\n", path);
        return 1;
    }
    bwd_state tmp = *s;
    tmp.dump_dir = dir;
    return s->ref_done ? dump_grads(&tmp, "ref", &s->ref) : 0;
}

void bwd_after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    (void)ex;
    const bwd_state *s = of(state);
    double fwd_ms = 0.0, atomic_ms = 0.0, det_ms = 0.0;
    for (int r = 0; r < n; ++r)
        if (recs[r].timed && strncmp(recs[r].kernel, "fwd_", 4) == 0)
            fwd_ms = recs[r].time.median_ms;
    const char *unit = attn_on_simulator() ? " (CPU simulator timings, not GPU performance)" : "";
    if (fwd_ms > 0.0) {
        printf("\nforward + backward (FlashAttention's FLOP convention: backward = 2.5 x "
               "forward)%s:\n",
               unit);
        for (int r = 0; r < n; ++r) {
            if (!recs[r].timed || strncmp(recs[r].kernel, "fwd_", 4) == 0)
                continue;
            const double ms = fwd_ms + recs[r].time.median_ms;
            printf("  %-16s %10.3f ms  %8.3f TFLOP/s\n", recs[r].kernel, ms,
                   3.5 * forward_flops(s) / (ms * 1e-3) * 1e-12);
        }
    }
    for (int r = 0; r < n; ++r) {
        if (!recs[r].timed)
            continue;
        atomic_ms = strcmp(recs[r].kernel, "fa2_mma") == 0 ? recs[r].time.median_ms : atomic_ms;
        det_ms = strcmp(recs[r].kernel, "fa2_mma_det") == 0 ? recs[r].time.median_ms : det_ms;
    }
    if (atomic_ms > 0.0 && det_ms > 0.0)
        printf("deterministic dQ (version 4) vs atomics (version 3): %.2fx the time%s\n",
               det_ms / atomic_ms, unit);
}

void bwd_release(void *state) {
    bwd_state *s = of(state);
    float *host[] = {s->q, s->k, s->v, s->dout, s->o, s->lse, s->o_ref, s->lse_ref, s->o_lowp};
    void *dev[] = {s->d_q,  s->d_k,  s->d_v,   s->d_o,   s->d_dout, s->d_dq,
                   s->d_dk, s->d_dv, s->d_lse, s->d_sel, s->d_cu_q, s->d_cu_k};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
    free_grads(&s->ref);
    free_grads(&s->tol);
    free_grads(&s->lowp);
    free_grads(&s->got);
    free(s->slices);
    free(s->rows);
    free(s->sel);
    free(s->row_ptr);
    free(s->col_idx);
    free(s->staging);
    attn_block_mask_free_device(&s->cols_dev);
    attn_block_mask_free(&s->cols);
    if (s->sparse_on)
        attn_sparse_free(&s->sparse);
}

/* --tensors DIR: the banner names the folder instead of a seed and amplitude. */
const char *bwd_inputs_read_from(void *state) {
    const bwd_state *s = (const bwd_state *)state;
    return s->from_files ? s->opt.inputs : NULL;
}
