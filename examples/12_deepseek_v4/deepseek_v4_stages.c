/* deepseek_v4_stages.c — Example 12 on the one driver (attn/example.h): its flags, its seeded
 * inputs on the host and the device, the references that need no earlier stage, and its FLOPs.
 * The three stages' checks (compress, index, attention) are deepseek_v4_checks.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/tensor.h"
#include "deepseek_v4.h"

int v4_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
               attn_problem *p, char *why, size_t len) {
    (void)ex;
    v4_state *s = state;
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
    const v4_options *o = &s->opt;
    *c = (v4_config){.kind = o->kind == 0 ? V4_CSA : V4_HCA, .rope_theta = 160000.0, .eps = 1e-6};
    c->B = p->B, c->L = p->Lq, c->H = p->H, c->D = p->D, c->m = o->m, c->window = o->window;
    c->topk = o->topk, c->HI = o->index_heads, c->DI = o->index_dim, c->rope_dim = o->rope_dim;
    c->page = o->page;
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
    v4_state *s = state;
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
    const v4_state *s = state;
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

/* A zeroed host buffer of `bytes`, freed by v4_release (NULL when out of host memory). */
static void *host(v4_state *s, size_t bytes) {
    void *x = s->nh < V4_MAX_HOST ? calloc(bytes ? bytes : 1, 1) : NULL;
    if (x != NULL)
        s->h[s->nh++] = x;
    else
        s->out_of_memory = true;
    return x;
}

/* x (n values) into dst on the device: the dtype when lowp, else fp32 (nothing when x is NULL or
 * an earlier allocation or write failed). */
static void put(v4_state *s, const void *dst, const float *x, size_t n, bool lowp) {
    if (x != NULL && !s->failed && !s->out_of_memory &&
        (lowp ? attn_device_write((void *)dst, x, n, s->p.dtype, s->staging)
              : attn_to_device((void *)dst, x, n * sizeof(float))))
        s->failed = true;
}

/* n values amplitude * U[-1, 1) + offset, rounded to the storage type when lowp; also into dst
 * on the device unless dst is NULL (put). */
static float *make(v4_state *s, const void *dst, size_t n, float amp, float offset, bool lowp) {
    float *x = host(s, n * sizeof(float));
    for (size_t i = 0; x != NULL && i < n; ++i) {
        x[i] = amp * uniform(s) + offset;
        if (lowp)
            x[i] = attn_round_dtype(x[i], s->p.dtype);
    }
    if (dst != NULL)
        put(s, dst, x, n, lowp);
    return x;
}

/* V4_PLANT=<name> (tests: the checks must fail): the device gets x's first `shifted` values plus 1
 * while the reference keeps the originals. */
static void put_planted(v4_state *s, const void *dst, float *x, size_t n, size_t shifted,
                        const char *name) {
    const char *plant = getenv("V4_PLANT");
    const float by = plant != NULL && strcmp(plant, name) == 0 && x != NULL ? 1.0f : 0.0f;
    for (size_t i = 0; by != 0.0f && i < shifted; ++i)
        x[i] += by;
    put(s, dst, x, n, false);
    for (size_t i = 0; by != 0.0f && i < shifted; ++i)
        x[i] -= by;
}

/* The seeded inputs, in the order of the generator's draws, on the host and into the device
 * buffers (v4_args_alloc's). */
static void make_inputs(v4_state *s, const attn_cli *cli) {
    const v4_config *c = &s->c;
    const v4_args *g = &s->args;
    const size_t B = (size_t)c->B, L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D;
    const size_t cw = (c->kind == V4_CSA ? 2 : 1) * D, DI = (size_t)c->DI, HI = (size_t)c->HI;
    size_t widest = H * D > cw ? H * D : cw; /* a token's widest 16-bit input (HI >= 16) */
    widest = c->kind == V4_CSA && HI * DI > widest ? HI * DI : widest;
    s->staging = host(s, B * L * widest * attn_dtype_size(s->p.dtype));
    const float a = s->amplitude;
    s->q = make(s, NULL, B * L * H * D, a, 0.0f, true);
    s->kv = make(s, NULL, B * L * D, a, 0.0f, true);
    /* --inputs opposed: the queries' and the tokens' signs set as the harness sets them (the
     * tokens are keys and values at once) */
    if (s->q != NULL && s->kv != NULL)
        attn_inputs_apply(cli->inputs, s->q, B * L * H * D, s->kv, B * L * D, NULL, 0);
    put(s, g->q, s->q, B * L * H * D, true);
    put(s, g->kv, s->kv, B * L * D, true);
    s->ckv = make(s, g->ckv, B * L * cw, a, 0.0f, true);
    s->cgate = make(s, g->cgate, B * L * cw, 2.0f, 0.0f, true);
    s->cbias = make(s, NULL, (size_t)c->m * cw, 0.5f, 0.0f, false);
    put_planted(s, g->cbias, s->cbias, (size_t)c->m * cw, cw, "bias");
    s->cnorm = make(s, g->cnorm, D, 0.2f, 1.0f, false);
    s->sinks = make(s, NULL, H, 1.0f, 0.0f, false);
    put_planted(s, g->sinks, s->sinks, H, H, "sinks");
    if (c->kind == V4_CSA) {
        s->ikv = make(s, g->ikv, B * L * 2 * DI, a, 0.0f, true);
        s->igate = make(s, g->igate, B * L * 2 * DI, 2.0f, 0.0f, true);
        s->ibias = make(s, g->ibias, (size_t)c->m * 2 * DI, 0.5f, 0.0f, false);
        s->inorm = make(s, g->inorm, DI, 0.2f, 1.0f, false);
        s->qI = make(s, g->qI, B * L * HI * DI, s->ties ? 0.0f : a, 0.0f, true);
        s->wI = make(s, g->wI, B * L * HI, 1.0f / sqrtf((float)(HI * DI)), 0.0f, false);
    }
}

/* The host buffers of the references and of what the checks read back, and the references of
 * the compressed entries (the main compressor's and, CSA, the indexer's). */
static int make_references(v4_state *s) {
    const v4_config *c = &s->c;
    const bool csa = c->kind == V4_CSA;
    const size_t B = (size_t)c->B, L = (size_t)c->L, H = (size_t)c->H, D = (size_t)c->D;
    const size_t cw = (csa ? 2 : 1) * D, DI = (size_t)c->DI, n = (size_t)s->n;
    const size_t K = (size_t)(s->K > 0 ? s->K : 1);
    const size_t pool = B * (size_t)s->args.pages_per_seq * (size_t)c->page;
    s->ref_comp = host(s, B * n * D * sizeof(double));
    s->ref_icomp = host(s, B * n * DI * sizeof(double));
    s->comp = host(s, B * n * D * sizeof(float));
    s->icomp = host(s, B * n * DI * sizeof(float));
    s->logits = host(s, B * L * n * sizeof(float));
    s->sel = host(s, B * L * K * sizeof(int32_t));
    s->seen = host(s, B * L * K * sizeof(int32_t));
    s->out = host(s, B * L * H * D * sizeof(float));
    s->pool = host(s, pool * D * sizeof(float));
    if (s->out_of_memory) /* here or in make_inputs */
        return 1;
    for (size_t bb = 0; bb < B; ++bb) {
        v4_ref_compress(c, csa, c->D, s->ckv + bb * L * cw, s->cgate + bb * L * cw, s->cbias,
                        s->cnorm, c->L, s->ref_comp + bb * n * D);
        if (csa)
            v4_ref_compress(c, true, c->DI, s->ikv + bb * L * 2 * DI, s->igate + bb * L * 2 * DI,
                            s->ibias, s->inorm, c->L, s->ref_icomp + bb * n * DI);
    }
    return 0;
}

/* The query rows checked: every row while the references cost <= 2e9 multiply-adds, else about
 * --check-rows (default 32) positions per sequence; the stride between them. */
static int check_stride(const v4_config *c, const attn_cli *cli) {
    const double cost = (double)c->B * c->L *
                        ((double)c->H * c->D * (c->window + c->topk) +
                         (c->kind == V4_CSA ? 2.0 * c->L / c->m * c->HI * c->DI : 0.0));
    const int want_rows = cli->check_rows >= 0 ? cli->check_rows : (cost <= 2e9 ? 0 : 32);
    return want_rows > 0 && want_rows < c->L ? (c->L + want_rows - 1) / want_rows : 1;
}

int v4_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
             attn_buffers *b, int *chunks) {
    (void)check_rows; /* example 12 samples query positions per sequence (check_stride) */
    v4_state *s = state;
    s->p = *p;
    s->stride = check_stride(&s->c, cli);
    v4_args *g = &s->args;
    *g = (v4_args){.c = s->c, .p = &s->p};
    const int K = s->K > 0 ? s->K : 1;
    const int rc_alloc = v4_args_alloc(g, p->dtype, K, s->d, &s->nd, &s->page_table);
    if (s->page_table != NULL) /* freed with the host buffers */
        s->h[s->nh++] = s->page_table;
    if (rc_alloc) {
        fprintf(stderr, "error: out of device memory for example 12's buffers\n");
        return 1;
    }
    make_inputs(s, cli);
    if (make_references(s)) {
        fprintf(stderr, "error: out of host memory for example 12's inputs and references\n");
        return 1;
    }
    if (s->failed)
        return 1;
    v4_index_args(s->ds, &s->dsp, g, K);
    b->args = g;
    *chunks = 1;
    return 0;
}

void v4_release(void *state) {
    v4_state *s = state;
    for (int i = 0; i < s->nd; ++i)
        attn_device_free(s->d[i]);
    for (int i = 0; i < s->nh; ++i)
        free(s->h[i]);
}

/* FLOPs of kernel k, 2 per multiply-add: the weighted sums of the compressor, the indexer's scores
 * (every entry, the masked ones included), attention's scores and values over the keys each row
 * reads (the window and its entries); decode is all three, its indexer once per token. */
double v4_flops(void *state, const attn_kernel *k) {
    const v4_state *s = state;
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
