/* deepseek_v4_stages.c — Example 12 on the one driver (attn/example.h): its flags, its seeded
 * inputs, and the three stages' checks against the double-precision reference
 * (deepseek_v4_reference.c):
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

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/device.h"
#include "attn/tensor.h"
#include "deepseek_v4.h"

typedef struct v4_state {
    v4_options opt;
    v4_config c;
    attn_problem p, dsp;
    int n, K;   /* entries per sequence, the selection's width min(topk, n) */
    int stride; /* query rows checked: every stride-th position and the last */
    uint64_t rng;
    float amplitude;
    bool ties;
    /* host inputs (values the device reads) */
    float *q, *kv, *ckv, *cgate, *cbias, *cnorm, *ikv, *igate, *ibias, *inorm, *qI, *wI, *sinks;
    int32_t *page_table;
    /* references and what the checks accepted */
    double *ref_comp, *ref_icomp;
    float *comp, *icomp, *logits, *out, *pool;
    int32_t *sel, *seen;
    /* device */
    v4_args args;
    ds_args ds[2];
    void *d[24];
    int nd;
} v4_state;

size_t v4_state_size(void) { return sizeof(v4_state); }
static v4_state *of(void *state) { return (v4_state *)state; }
static void *xcalloc(size_t n) { return calloc(n ? n : 1, 1); }

int v4_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
               attn_problem *p, char *why, size_t len) {
    (void)ex;
    v4_state *s = of(state);
    s->opt = *(const v4_options *)opts;
    if (p->Lq != p->Lk) {
        snprintf(why, len, "the layer attends to its own tokens: --lq and --lk must be equal");
        return ATTN_EXIT_USAGE;
    }
    if (cli->pattern != NULL) {
        snprintf(why, len, "--pattern: example 12's sparsity is its compressed entries");
        return ATTN_EXIT_USAGE;
    }
    v4_config *c = &s->c;
    *c = (v4_config){s->opt.kind == 0 ? V4_CSA : V4_HCA,
                     p->B,
                     p->Lq,
                     p->H,
                     p->D,
                     s->opt.m,
                     s->opt.window,
                     s->opt.topk,
                     s->opt.index_heads,
                     s->opt.index_dim,
                     s->opt.rope_dim,
                     160000.0,
                     1e-6,
                     s->opt.page};
    const char *bad = v4_config_problem(c);
    if (bad != NULL) {
        snprintf(why, len, "%s (got -m %d, --window %d, -L %d, --topk %d, -D %d, --rope-dim %d)",
                 bad, c->m, c->window, c->L, c->topk, c->D, c->rope_dim);
        return ATTN_EXIT_USAGE;
    }
    s->n = c->L / c->m;
    s->K = c->topk < s->n ? c->topk : s->n;
    /* example 05's indexer and top-k see a problem of L queries against n keys, not causal (the
     * entries not yet visible are masked between the two) */
    attn_problem_init(&s->dsp, c->B, 1, c->L, s->n > 0 ? s->n : 1, 64);
    s->dsp.dtype = p->dtype;
    s->amplitude = cli->amplitude;
    s->rng = cli->seed * 2654435761u + 12345u;
    s->ties = getenv("V4_INDEX_TIES") != NULL; /* tests: every index query zero, every score tied */
    return 0;
}

attn_verdict v4_verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                        size_t len) {
    v4_state *s = of(state);
    const attn_verdict v = attn_kernel_verdict(k, p, why, len);
    if (v != ATTN_KERNEL_RUNS)
        return v;
    const bool csa = s->c.kind == V4_CSA;
    if ((k->id == V4_K_INDEX || k->id == V4_K_CSA) && !csa) {
        snprintf(why, len, "an HCA layer has no indexer (--kind csa runs it)");
        return ATTN_KERNEL_CANNOT;
    }
    if (k->id == V4_K_HCA && csa) {
        snprintf(why, len, "a CSA layer attends to its selection (--kind hca runs this one)");
        return ATTN_KERNEL_CANNOT;
    }
    if (csa && (k->id == V4_K_INDEX || k->id == V4_K_DECODE)) {
        const char *bad = ds_unsupported(&s->dsp, s->c.HI, s->c.DI, s->K > 0 ? s->K : 1);
        if (bad != NULL) {
            snprintf(why, len, "example 05's indexer: %s", bad);
            return ATTN_KERNEL_CANNOT;
        }
    }
    return ATTN_KERNEL_RUNS;
}

void v4_banner(void *state, const attn_problem *p) {
    (void)p;
    const v4_state *s = of(state);
    const v4_config *c = &s->c;
    printf("V4 %s layer: m = %d (%d entries per sequence), window %d, rope dim %d",
           c->kind == V4_CSA ? "CSA" : "HCA", c->m, s->n, c->window, c->rope_dim);
    if (c->kind == V4_CSA)
        printf(", top-k %d (kept %d), index heads %d x dim %d", c->topk, s->K, c->HI, c->DI);
    printf(", decode pages of %d entries\n", c->page);
}

/* ---- inputs ------------------------------------------------------------------------------ */

static float uniform(v4_state *s) { /* [-1, 1) */
    s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((s->rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* n values amplitude * U[-1, 1) + offset, rounded to the storage type when lowp */
static float *make(v4_state *s, size_t n, float amp, float offset, bool lowp) {
    float *x = xcalloc(n * sizeof(float));
    for (size_t i = 0; x != NULL && i < n; ++i) {
        x[i] = amp * uniform(s) + offset;
        if (lowp)
            x[i] = attn_round_dtype(x[i], s->p.dtype);
    }
    return x;
}

static void *upload(v4_state *s, const float *x, size_t n, bool lowp) {
    void *d = NULL;
    if (lowp) {
        void *staging = xcalloc(n * attn_dtype_size(s->p.dtype));
        const int rc = staging == NULL || attn_device_upload(&d, x, n, s->p.dtype, staging);
        free(staging);
        if (rc != 0)
            return NULL;
    } else {
        d = attn_device_alloc(n * sizeof(float) + 16);
        if (d != NULL && attn_to_device(d, x, n * sizeof(float)) != 0)
            return NULL;
    }
    s->d[s->nd++] = d;
    return d;
}

static void *device_buffer(v4_state *s, size_t bytes) {
    void *d = attn_device_alloc(bytes + 16);
    s->d[s->nd++] = d;
    return d;
}

/* Example 05's arguments for the indexer and top-k over g's buffers (v4_args.ds): ds[0] a
 * prefill over every row (a chunk of rows sets its own chunk), ds[1] one decoding query. */
void v4_index_args(void *ds_pair, const attn_problem *dsp, v4_args *g, int K) {
    ds_args *ds = (ds_args *)ds_pair;
    for (int i = 0; i < 2; ++i) {
        ds_args *d = &ds[i];
        memset(d, 0, sizeof *d);
        d->p = dsp;
        d->index_heads = g->c.HI;
        d->index_dim = g->c.DI;
        d->topk = K;
        d->chunk = i == 0 ? g->c.L : 1;
        d->q_index = g->qI;
        d->k_index = g->icomp;
        d->w = g->wI;
        d->logits = g->logits;
        d->sel = g->sel;
    }
    g->ds = ds;
}

int v4_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
             attn_buffers *b, int *chunks) {
    (void)check_rows; /* example 12 samples query positions per sequence (below) */
    v4_state *s = of(state);
    s->p = *p;
    v4_config *c = &s->c;
    /* every row while the references cost <= 2e9 multiply-adds, else about --check-rows
     * (default 32) positions per sequence */
    const double cost = (double)c->B * c->L *
                        ((double)c->H * c->D * (c->window + c->topk) +
                         (c->kind == V4_CSA ? 2.0 * c->L / c->m * c->HI * c->DI : 0.0));
    const int want_rows = cli->check_rows >= 0 ? cli->check_rows : (cost <= 2e9 ? 0 : 32);
    s->stride = want_rows > 0 && want_rows < c->L ? (c->L + want_rows - 1) / want_rows : 1;
    const size_t B = (size_t)c->B, L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D;
    const size_t cw = (c->kind == V4_CSA ? 2 : 1) * D, DI = (size_t)c->DI, HI = (size_t)c->HI;
    const size_t n = (size_t)s->n, K = (size_t)(s->K > 0 ? s->K : 1);
    const float a = s->amplitude;
    s->q = make(s, B * L * H * D, a, 0.0f, true);
    s->kv = make(s, B * L * D, a, 0.0f, true);
    /* --inputs opposed: the queries' and the tokens' signs set as the harness sets them (the
     * tokens are keys and values at once) */
    attn_inputs_apply(cli->inputs, s->q, B * L * H * D, s->kv, B * L * D, NULL, 0);
    s->ckv = make(s, B * L * cw, a, 0.0f, true);
    s->cgate = make(s, B * L * cw, 2.0f, 0.0f, true);
    s->cbias = make(s, (size_t)c->m * cw, 0.5f, 0.0f, false);
    s->cnorm = make(s, D, 0.2f, 1.0f, false);
    s->sinks = make(s, H, 1.0f, 0.0f, false);
    const bool csa = c->kind == V4_CSA;
    if (csa) {
        s->ikv = make(s, B * L * 2 * DI, a, 0.0f, true);
        s->igate = make(s, B * L * 2 * DI, 2.0f, 0.0f, true);
        s->ibias = make(s, (size_t)c->m * 2 * DI, 0.5f, 0.0f, false);
        s->inorm = make(s, DI, 0.2f, 1.0f, false);
        s->qI = make(s, B * L * HI * DI, s->ties ? 0.0f : a, 0.0f, true);
        s->wI = make(s, B * L * HI, 1.0f / sqrtf((float)(HI * DI)), 0.0f, false);
    }
    const int pps = (int)((n + (size_t)c->page - 1) / (size_t)c->page) + 1;
    s->page_table = xcalloc(B * (size_t)pps * sizeof(int32_t));
    for (size_t i = 0; i < B * (size_t)pps; ++i) /* pages handed out in reverse: not identity */
        s->page_table[i] = (int32_t)(B * (size_t)pps - 1 - i);
    s->ref_comp = xcalloc(B * n * D * sizeof(double));
    s->ref_icomp = xcalloc(B * n * DI * sizeof(double));
    s->comp = xcalloc(B * n * D * sizeof(float));
    s->icomp = xcalloc(B * n * DI * sizeof(float));
    s->logits = xcalloc(B * L * n * sizeof(float));
    s->sel = xcalloc(B * L * K * sizeof(int32_t));
    s->seen = xcalloc(B * L * K * sizeof(int32_t));
    s->out = xcalloc(B * L * H * D * sizeof(float));
    s->pool = xcalloc(B * (size_t)pps * (size_t)c->page * D * sizeof(float));
    if (!s->q || !s->kv || !s->ckv || !s->cgate || !s->cbias || !s->cnorm || !s->sinks ||
        (csa && (!s->ikv || !s->igate || !s->ibias || !s->inorm || !s->qI || !s->wI)) ||
        !s->page_table || !s->ref_comp || !s->ref_icomp || !s->comp || !s->icomp || !s->logits ||
        !s->sel || !s->seen || !s->out || !s->pool) {
        fprintf(stderr, "error: out of host memory for example 12's inputs and references\n");
        return 1;
    }
    for (size_t bb = 0; bb < B; ++bb) {
        v4_ref_compress(c, csa, c->D, s->ckv + bb * L * cw, s->cgate + bb * L * cw, s->cbias,
                        s->cnorm, c->L, s->ref_comp + bb * n * D);
        if (csa)
            v4_ref_compress(c, true, c->DI, s->ikv + bb * L * 2 * DI, s->igate + bb * L * 2 * DI,
                            s->ibias, s->inorm, c->L, s->ref_icomp + bb * n * DI);
    }
    v4_args *g = &s->args;
    memset(g, 0, sizeof *g);
    g->c = *c;
    g->p = &s->p;
    g->q = upload(s, s->q, B * L * H * D, true);
    g->kv = upload(s, s->kv, B * L * D, true);
    g->ckv = upload(s, s->ckv, B * L * cw, true);
    g->cgate = upload(s, s->cgate, B * L * cw, true);
    /* V4_PLANT=bias|sinks (tests: the checks must fail): the device gets the gate bias or the
     * sinks shifted by 1 while the reference keeps the originals */
    const char *plant = getenv("V4_PLANT");
    const float shift_bias = plant != NULL && strcmp(plant, "bias") == 0 ? 1.0f : 0.0f;
    const float shift_sink = plant != NULL && strcmp(plant, "sinks") == 0 ? 1.0f : 0.0f;
    for (size_t i = 0; i < cw; ++i)
        s->cbias[i] += shift_bias;
    g->cbias = upload(s, s->cbias, (size_t)c->m * cw, false);
    for (size_t i = 0; i < cw; ++i)
        s->cbias[i] -= shift_bias;
    for (size_t h = 0; h < H; ++h)
        s->sinks[h] += shift_sink;
    g->sinks = upload(s, s->sinks, H, false);
    for (size_t h = 0; h < H; ++h)
        s->sinks[h] -= shift_sink;
    g->cnorm = upload(s, s->cnorm, D, false);
    const size_t es = attn_dtype_size(p->dtype);
    g->comp = device_buffer(s, B * n * D * es);
    g->o = device_buffer(s, B * L * H * D * es);
    g->pool = device_buffer(s, B * (size_t)pps * (size_t)c->page * D * es);
    g->page_table = device_buffer(s, B * (size_t)pps * sizeof(int32_t));
    if (g->page_table != NULL &&
        attn_to_device((void *)g->page_table, s->page_table, B * (size_t)pps * sizeof(int32_t)))
        return 1;
    g->pages_per_seq = pps;
    const size_t ring = csa ? 2 * (size_t)c->m : (size_t)c->m;
    g->ring_kv = device_buffer(s, B * ring * cw * es);
    g->ring_gate = device_buffer(s, B * ring * cw * es);
    if (csa) {
        g->ikv = upload(s, s->ikv, B * L * 2 * DI, true);
        g->igate = upload(s, s->igate, B * L * 2 * DI, true);
        g->ibias = upload(s, s->ibias, (size_t)c->m * 2 * DI, false);
        g->inorm = upload(s, s->inorm, DI, false);
        g->qI = upload(s, s->qI, B * L * HI * DI, true);
        g->wI = upload(s, s->wI, B * L * HI, false);
        g->icomp = device_buffer(s, B * n * DI * es);
        g->logits = device_buffer(s, B * L * n * sizeof(float));
        g->sel = device_buffer(s, B * L * K * sizeof(int32_t));
        g->ring_ikv = device_buffer(s, B * ring * 2 * DI * es);
        g->ring_igate = device_buffer(s, B * ring * 2 * DI * es);
    }
    for (int i = 0; i < s->nd; ++i)
        if (s->d[i] == NULL) {
            fprintf(stderr, "error: out of device memory for example 12's buffers\n");
            return 1;
        }
    v4_index_args(s->ds, &s->dsp, g, (int)K);
    b->args = g;
    *chunks = 1;
    return 0;
}

void v4_release(void *state) {
    v4_state *s = of(state);
    for (int i = 0; i < s->nd; ++i)
        attn_device_free(s->d[i]);
    float *f[] = {s->q,     s->kv,    s->ckv,   s->cgate,  s->cbias, s->cnorm,
                  s->ikv,   s->igate, s->ibias, s->inorm,  s->qI,    s->wI,
                  s->sinks, s->comp,  s->icomp, s->logits, s->out,   s->pool};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; ++i)
        free(f[i]);
    free(s->page_table);
    free(s->ref_comp);
    free(s->ref_icomp);
    free(s->sel);
    free(s->seen);
}

/* FLOPs of kernel k, 2 per multiply-add: the weighted sums of the compressor, the indexer's scores
 * (every entry, the masked ones included), attention's scores and values over the keys each row
 * reads (the window and its entries); decode is all three, its indexer once per token. */
double v4_flops(void *state, const attn_kernel *k) {
    const v4_state *s = of(state);
    const v4_config *c = &s->c;
    const bool csa = c->kind == V4_CSA;
    const double n = s->n, slots = csa ? 2.0 * c->m : c->m;
    const double compress = 2.0 * c->B * n * slots * (c->D + (csa ? c->DI : 0));
    const double index = csa ? 2.0 * c->B * c->L * n * c->HI * c->DI : 0.0;
    double keys = 0.0;
    for (int t = 0; t < c->L; ++t) {
        const int vis = v4_ref_visible(c, t, s->n);
        keys += (t + 1 < c->window ? t + 1 : c->window) + (csa ? (vis < s->K ? vis : s->K) : vis);
    }
    const double attend = 4.0 * c->B * c->H * c->D * keys;
    switch (k->id) {
    case V4_K_COMPRESS:
        return compress;
    case V4_K_INDEX:
        return index;
    case V4_K_DECODE:
        return compress + index + attend;
    default:
        return attend;
    }
}

/* ---- checks -------------------------------------------------------------------------------- */

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

static int read_back(const v4_state *s, float *dst, const void *src, size_t n) {
    void *tmp = xcalloc(n * attn_dtype_size(s->p.dtype));
    if (tmp == NULL || attn_to_host(tmp, src, n * attn_dtype_size(s->p.dtype))) {
        free(tmp);
        return 1;
    }
    attn_unpack(dst, tmp, n, s->p.dtype);
    free(tmp);
    return 0;
}

int v4_clear_compress(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    v4_state *s = of(state);
    const size_t es = attn_dtype_size(s->p.dtype), n = (size_t)s->n * s->c.B;
    if (attn_device_fill_nan(s->args.comp, n * s->c.D * es))
        return 1;
    return s->c.kind == V4_CSA ? attn_device_fill_nan(s->args.icomp, n * s->c.DI * es) : 0;
}

int v4_check_compress(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    v4_state *s = of(state);
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
    v4_state *s = of(state);
    const size_t rows = (size_t)s->c.B * s->c.L, K = (size_t)(s->K > 0 ? s->K : 1);
    if (attn_device_fill_nan(s->args.logits, rows * s->n * sizeof(float) + 4))
        return 1;
    return attn_device_fill_nan(s->args.sel, rows * K * sizeof(int32_t));
}

int v4_check_index(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    v4_state *s = of(state);
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
    double *want = xcalloc((size_t)n * sizeof(double)), *keys = xcalloc((size_t)n * c->DI * 8);
    double *mag = xcalloc((size_t)n * sizeof(double));
    int32_t *kept = xcalloc((size_t)K * sizeof(int32_t));
    if (!want || !keys || !mag || !kept)
        return 1;
    out->max_err = 0.0;
    for (int b = 0; b < c->B; ++b) {
        for (size_t i = 0; i < (size_t)n * c->DI; ++i) /* the accepted index keys */
            keys[i] = s->icomp[(size_t)b * n * c->DI + i];
        for (int t = 0; t < c->L; ++t) {
            if (!checked(s, t))
                continue;
            const size_t row = (size_t)b * c->L + t;
            const float *qI = s->qI + row * c->HI * c->DI, *wI = s->wI + row * c->HI;
            v4_ref_index_scores(c, qI, wI, keys, n, want);
            for (int w = 0; w < n; ++w) { /* the scale of fp32's rounding: sum |w| |q| |k| */
                double m = 0.0;
                for (int h = 0; h < c->HI; ++h) {
                    double d = 0.0;
                    for (int i = 0; i < c->DI; ++i)
                        d += fabs((double)qI[h * c->DI + i] * keys[(size_t)w * c->DI + i]);
                    m += fabs(wI[h]) * d;
                }
                mag[w] = m;
            }
            const int vis = v4_ref_visible(c, t, n);
            const float *got = s->logits + row * n;
            for (int w = 0; w < n && out->pass; ++w) {
                const bool ok =
                    w < vis ? fabs(got[w] - want[w]) <= 1e-5 * mag[w] + 1e-30 : got[w] == -INFINITY;
                if (w < vis && fabs(got[w] - want[w]) > out->max_err)
                    out->max_err = fabs(got[w] - want[w]);
                if (!ok) {
                    out->pass = false;
                    snprintf(out->detail, sizeof out->detail,
                             "b=%d t=%d entry %d: score %.6g, want %.6g%s", b, t, w, got[w],
                             w < vis ? want[w] : -INFINITY, w < vis ? "" : " (not visible)");
                }
            }
            /* the selection among the visible entries (the rest were -inf: dropped) */
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
            out->rows++;
        }
    }
    out->bound = NAN;
    free(want);
    free(keys);
    free(mag);
    free(kept);
    return 0;
}

int v4_clear_attention(void *state, const attn_kernel *k, int chunk) {
    (void)chunk;
    v4_state *s = of(state);
    const size_t es = attn_dtype_size(s->p.dtype);
    if (k->id == V4_K_DECODE &&
        attn_device_fill_nan(s->args.pool,
                             (size_t)s->c.B * s->args.pages_per_seq * s->c.page * s->c.D * es))
        return 1;
    return attn_device_fill_nan(s->args.o, (size_t)s->c.B * s->c.L * s->c.H * s->c.D * es);
}

int v4_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    v4_state *s = of(state);
    const v4_config *c = &s->c;
    const size_t L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D, n = (size_t)s->n;
    const int K = s->K;
    if (read_back(s, s->out, s->args.o, (size_t)c->B * L * H * D))
        return 1;
    if (k->id == V4_K_DECODE && n > 0) { /* the paged pool holds the same entries */
        const size_t pool_n = (size_t)c->B * s->args.pages_per_seq * c->page;
        if (read_back(s, s->pool, s->args.pool, pool_n * D))
            return 1;
        float *lin = xcalloc((size_t)c->B * n * D * sizeof(float));
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
    }
    double *want = xcalloc(H * D * sizeof(double));
    int32_t *chosen = xcalloc((n + 1) * sizeof(int32_t));
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
