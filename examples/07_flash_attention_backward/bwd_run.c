/* bwd_run.c — example 07's run on the one driver (attn/example.h): its flags, its inputs and the
 * reference's mask on the host and the device, the slices it checks, and what the driver asks of
 * a module besides the stages (FLOPs, --json members, the table's last lines, the release). The
 * stages and their checks are in bwd_stages.c, the tensor files in bwd_files.c.
 */
#include <math.h>
#include <stddef.h>
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

static const char *mode_name(bwd_mode m) {
    return m == BWD_PATTERN ? "block-sparse pattern" : m == BWD_TOPK ? "top-k selection" : "dense";
}

/* ---- step 1: the flags (and --tensors, read here so that a bad file is a usage error) -------- */

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
        return bwd_load_inputs(s, why, len);
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
    s->q = attn_host_alloc(qn * sizeof(float), "example 07's inputs");
    s->k = attn_host_alloc(kn * sizeof(float), "example 07's inputs");
    s->v = attn_host_alloc(kn * sizeof(float), "example 07's inputs");
    s->dout = attn_host_alloc(qn * sizeof(float), "example 07's inputs");
    s->o = attn_host_alloc(qn * sizeof(float), "example 07's inputs");
    s->lse = attn_host_alloc(attn_problem_lse_elems(p) * sizeof(float) + 16, "example 07's inputs");
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
    if (attn_device_upload_seqlens(p, &s->d_cu_q, &s->d_cu_k))
        return 1;
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
            s->sel =
                attn_host_alloc((size_t)rows * s->k_eff * sizeof(int32_t), "example 07's inputs");
            if (s->sel == NULL)
                return 1;
            bwd_random_selection(p, s->k_eff, s->seed, s->sel);
        }
        s->row_ptr =
            attn_host_alloc((size_t)(csr_rows + 1) * sizeof(int64_t), "example 07's inputs");
        s->col_idx = attn_host_alloc((size_t)csr_rows * s->k_eff * sizeof(int32_t) + 4,
                                     "example 07's inputs");
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
    s->staging = attn_host_alloc(most * 4 + 16, "example 07's inputs");
    if (s->slices == NULL || s->rows == NULL || s->staging == NULL || make_inputs(s) != 0 ||
        make_mask(s) != 0) {
        fprintf(stderr, "error: example 07's inputs or the reference's mask could not be made\n");
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
    void *host[] = {s->q,      s->k,    s->v,   s->dout,    s->o,       s->lse,
                    s->slices, s->rows, s->sel, s->row_ptr, s->col_idx, s->staging};
    void *dev[] = {s->d_q,  s->d_k,  s->d_v,   s->d_o,   s->d_dout, s->d_dq,
                   s->d_dk, s->d_dv, s->d_lse, s->d_sel, s->d_cu_q, s->d_cu_k};
    attn_free_buffers(host, ATTN_COUNT(host), dev, ATTN_COUNT(dev));
    attn_stage_reference_free(&s->fwd_ref);
    bwd_free_grads(&s->ref);
    bwd_free_grads(&s->tol);
    bwd_free_grads(&s->lowp);
    bwd_free_grads(&s->got);
    attn_block_mask_free_device(&s->cols_dev);
    attn_block_mask_free(&s->cols);
    if (s->sparse_on)
        attn_sparse_free(&s->sparse);
}

/* ---- the module ------------------------------------------------------------------------------ */

static const attn_stage bwd_stages[] = {
    [BWD_STAGE_FORWARD] = {.name = "forward",
                           .prepare = bwd_prepare_forward,
                           .clear = bwd_clear_forward,
                           .check = bwd_check_forward},
    [BWD_STAGE_BACKWARD] = {.name = "backward",
                            .prepare = bwd_prepare_backward,
                            .clear = bwd_clear_backward,
                            .check = bwd_check_backward},
};

#define OPT(field) offsetof(bwd_options, field)
static const attn_option bwd_option_table[] = {
    {"--topk", "K",
     "top-k backward (version 6): each query attends to K keys of a seeded random selection in "
     "example 05's format (0: none)",
     ATTN_OPTION_INT, OPT(topk), 0, 1 << 24, NULL, "0", NULL},
    {"--tensors", "DIR",
     "read q, k, v, do, o, lse (and sel with --topk) from DIR/<name>.bin (attn tensor files, as "
     "--dump writes them); the forward stage does not run",
     ATTN_OPTION_TEXT, OPT(inputs), 0, 0, NULL, NULL, NULL},
};
#undef OPT

static void bwd_usage(const attn_example *ex, FILE *f) {
    (void)ex;
    fprintf(f, "\n--pattern SPEC: example 04's patterns (block-sparse backward, version 5); "
               "the kinds:\n");
    attn_pattern_usage(f, NULL);
}

const attn_module bwd_module = {
    ATTN_MODULE_OPTIONS(bwd_option_table, bwd_options),
    .usage = bwd_usage,
    .state_size = sizeof(bwd_state),
    .prepare = bwd_prepare,
    .verdict = bwd_verdict,
    .banner = bwd_banner,
    ATTN_STAGES(bwd_stages),
    .setup = bwd_setup,
    .flops = bwd_flops,
    .record_json = bwd_record_json,
    .dump = bwd_dump,
    .after_table = bwd_after_table,
    .release = bwd_release,
    .inputs_read_from = bwd_inputs_read_from,
};
