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

/* ---- the run's data -------------------------------------------------------------------------- */

static ds_state *of(void *state) { return (ds_state *)state; }

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

/* Is query position i of sequence b among the checked ones? */
static bool checked(const ds_state *s, int b, int i) {
    return i % s->stride == 0 || i == attn_problem_seq_q(&s->p, b) - 1;
}

/* Uploads count fp32 values as the problem's dtype into a new device buffer. */
static int upload(ds_state *s, void **dst, const float *src, size_t count) {
    const size_t bytes = count * attn_dtype_size(s->p.dtype);
    *dst = attn_device_alloc(bytes ? bytes : 16);
    if (*dst == NULL)
        return 1;
    attn_pack(s->staging, src, count, s->p.dtype);
    return attn_to_device(*dst, s->staging, bytes);
}

/* ---- step 1: the flags --------------------------------------------------------------------- */

int ds_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
               attn_problem *p, char *why, size_t len) {
    (void)ex;
    ds_state *s = of(state);
    s->opt = *(const ds_options *)opts;
    if (cli->pattern != NULL) {
        snprintf(why, len, "--pattern: example 05 has no pattern: its selection is the indexer's");
        return ATTN_EXIT_USAGE;
    }
    const char *bad = ds_unsupported(p, s->opt.index_heads, s->opt.index_dim, s->opt.topk);
    if (bad != NULL) {
        snprintf(why, len, "%s (got dtype %s, D=%d, --index-heads %d, --index-dim %d)", bad,
                 attn_dtype_name(p->dtype), p->D, s->opt.index_heads, s->opt.index_dim);
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.corrupt_text != NULL &&
        attn_cli_parse_int("--corrupt-index",
                           s->opt.corrupt_text[0] == '-' ? s->opt.corrupt_text + 1
                                                         : s->opt.corrupt_text,
                           0, &s->corrupt_value, why, len) != 0) {
        snprintf(why, len, "--corrupt-index must be an integer (got '%s')", s->opt.corrupt_text);
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.corrupt_text != NULL && s->opt.corrupt_text[0] == '-')
        s->corrupt_value = -s->corrupt_value;
    s->corrupt_scale = 0.0f;
    if (s->opt.corrupt_scale_text != NULL) {
        char *end = NULL;
        const double f = strtod(s->opt.corrupt_scale_text, &end);
        if (end == s->opt.corrupt_scale_text || *end != '\0' || !isfinite(f) || f <= 0.0 ||
            f > 1e30) {
            snprintf(why, len, "--corrupt-scale must be a positive number (got '%s')",
                     s->opt.corrupt_scale_text);
            return ATTN_EXIT_USAGE;
        }
        s->corrupt_scale = (float)f;
    }
    /* k at or above every query's visible keys means "all of them": no wider selection needed */
    s->k_eff = s->opt.topk < p->Lk ? s->opt.topk : p->Lk;
    if (s->opt.chunk == 0) { /* logits of one chunk <= 1 GiB, a multiple of the indexer's 4 */
        int64_t c = ((int64_t)1 << 28) / ((int64_t)p->B * p->Lk);
        c = c < 4 ? 4 : c - c % 4;
        s->opt.chunk = (int)(c < p->Lq ? c : p->Lq);
    }
    s->opt.chunk = s->opt.chunk < p->Lq ? s->opt.chunk : p->Lq;
    return 0;
}

attn_verdict ds_verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                        size_t len) {
    if (strcmp(k->name, "end_to_end") == 0 && of(state)->opt.scores != DS_SCORES_INDEXER) {
        snprintf(why, len,
                 "end_to_end selects on the indexer's own scores, which --scores %s "
                 "replaces for the top-k stage only",
                 ds_score_kinds[of(state)->opt.scores]);
        return ATTN_KERNEL_CANNOT;
    }
    if (strcmp(k->name, "topk_bitonic") == 0 && p->Lk > DS_BITONIC_MAX_KEYS) {
        snprintf(why, len,
                 "topk_bitonic sorts a whole row in shared memory: at most %d keys (Lk=%d)",
                 DS_BITONIC_MAX_KEYS, p->Lk);
        return ATTN_KERNEL_CANNOT;
    }
    return attn_kernel_verdict(k, p, why, len);
}

void ds_banner(void *state, const attn_problem *p) {
    const ds_state *s = of(state);
    printf("top-k %d", s->opt.topk);
    if (s->k_eff < s->opt.topk)
        printf(" (no query sees more than Lk=%d keys: every visible key is selected)", p->Lk);
    printf(", indexer %d heads x %d, query chunks of %d (%d chunk%s), scores: %s\n",
           s->opt.index_heads, s->opt.index_dim, s->opt.chunk,
           (p->Lq + s->opt.chunk - 1) / s->opt.chunk, p->Lq > s->opt.chunk ? "s" : "",
           ds_score_kinds[s->opt.scores]);
    printf("memory: logits of one chunk %.3g MiB (all L x L: %.3g MiB), selection %.3g MiB\n",
           (double)p->B * s->opt.chunk * p->Lk * 4 / 1048576.0,
           (double)p->B * p->Lq * p->Lk * 4 / 1048576.0,
           (double)attn_problem_q_rows(p) * s->k_eff * 4 / 1048576.0);
}

/* ---- step 3: inputs ------------------------------------------------------------------------ */

static int make_inputs(ds_state *s, uint64_t seed, float amplitude) {
    const attn_problem *p = &s->p;
    const int HI = s->opt.index_heads, DI = s->opt.index_dim, D = p->D;
    const size_t q_elems = attn_problem_q_elems(p), k1_elems = (size_t)s->rows_k * D;
    const size_t qi_elems = (size_t)s->rows_q * HI * DI, ki_elems = (size_t)s->rows_k * DI;
    const size_t kx_elems = attn_problem_k_elems(p);
    size_t most = q_elems > kx_elems ? q_elems : kx_elems;
    most = most > qi_elems ? most : qi_elems;
    s->q = xmalloc(q_elems * sizeof(float));
    s->k1 = xmalloc(k1_elems * sizeof(float));
    s->v1 = xmalloc(k1_elems * sizeof(float));
    s->kx = xmalloc(kx_elems * sizeof(float));
    s->vx = xmalloc(kx_elems * sizeof(float));
    s->qi = xmalloc(qi_elems * sizeof(float));
    s->ki = xmalloc(ki_elems * sizeof(float));
    s->w = xmalloc((size_t)s->rows_q * HI * sizeof(float));
    s->staging = xmalloc(most * 4 + 16);
    if (!s->q || !s->k1 || !s->v1 || !s->kx || !s->vx || !s->qi || !s->ki || !s->w || !s->staging)
        return 1;
    /* streams 0-2: Q, K, V (as the harness); 3-5: q_I, k_I, w */
    attn_fill_uniform(s->q, q_elems, seed, 0, amplitude, p->dtype);
    attn_fill_uniform(s->k1, k1_elems, seed, 1, amplitude, p->dtype);
    attn_fill_uniform(s->v1, k1_elems, seed, 2, amplitude, p->dtype);
    attn_inputs_apply(s->inputs, s->q, q_elems, s->k1, k1_elems, s->v1, k1_elems);
    attn_fill_uniform(s->qi, qi_elems, seed, 3, 1.0f, p->dtype);
    attn_fill_uniform(s->ki, ki_elems, seed, 4, 1.0f, p->dtype);
    /* DeepSeek scales the head weights by H_I^-1/2 (and the softmax scale D_I^-1/2) */
    attn_fill_uniform(s->w, (size_t)s->rows_q * HI, seed, 5, 1.0f / sqrtf((float)HI * DI),
                      ATTN_F32);
    for (int b = 0; b < p->B; ++b) /* the dense baseline's K and V: every head a copy */
        for (int h = 0; h < p->H; ++h)
            for (int t = 0; t < attn_problem_seq_k(p, b); ++t) {
                const int64_t x = attn_problem_row_offset(p, false, b, h, t);
                const int64_t y = ds_row_k(p, b, t) * D;
                memcpy(s->kx + x, s->k1 + y, (size_t)D * sizeof(float));
                memcpy(s->vx + x, s->v1 + y, (size_t)D * sizeof(float));
            }
    return 0;
}

static int make_device(ds_state *s) {
    const attn_problem *p = &s->p;
    const int HI = s->opt.index_heads, DI = s->opt.index_dim;
    const size_t q_elems = attn_problem_q_elems(p), k1_elems = (size_t)s->rows_k * p->D;
    const size_t lbytes = (size_t)p->B * s->opt.chunk * p->Lk * sizeof(float);
    if (upload(s, &s->d_q, s->q, q_elems) || upload(s, &s->d_k1, s->k1, k1_elems) ||
        upload(s, &s->d_v1, s->v1, k1_elems) ||
        upload(s, &s->d_qi, s->qi, (size_t)s->rows_q * HI * DI) ||
        upload(s, &s->d_ki, s->ki, (size_t)s->rows_k * DI) ||
        upload(s, &s->d_kx, s->kx, attn_problem_k_elems(p)) ||
        upload(s, &s->d_vx, s->vx, attn_problem_k_elems(p)))
        return 1;
    s->d_w = attn_device_alloc((size_t)s->rows_q * HI * sizeof(float) + 16);
    s->d_logits = attn_device_alloc(lbytes + 16);
    s->d_sel = attn_device_alloc((size_t)s->rows_q * s->k_eff * sizeof(int32_t) + 16);
    s->d_o = attn_device_alloc(q_elems * attn_dtype_size(p->dtype) + 16);
    s->d_lse = attn_device_alloc(attn_problem_lse_elems(p) * sizeof(float) + 16);
    if (!s->d_w || !s->d_logits || !s->d_sel || !s->d_o || !s->d_lse ||
        attn_to_device(s->d_w, s->w, (size_t)s->rows_q * HI * sizeof(float)))
        return 1;
    if (p->cu_seqlens_q) {
        const size_t n = (size_t)(p->B + 1) * sizeof(int);
        s->d_cu_q = attn_device_alloc(n);
        s->d_cu_k = attn_device_alloc(n);
        if (!s->d_cu_q || !s->d_cu_k || attn_to_device(s->d_cu_q, p->cu_seqlens_q, n) ||
            attn_to_device(s->d_cu_k, p->cu_seqlens_k, n))
            return 1;
    }
    s->args = (ds_args){&s->p,   HI,     DI,          s->k_eff,  s->opt.chunk, s->d_qi,
                        s->d_ki, s->d_w, s->d_logits, s->d_sel,  s->d_q,       s->d_k1,
                        s->d_v1, s->d_o, s->d_lse,    s->d_cu_q, s->d_cu_k,    &s->dense};
    /* indexer_fp8's codes and scales */
    s->d_qi8 = attn_device_alloc((size_t)s->rows_q * HI * DI + 16);
    s->d_ki8 = attn_device_alloc((size_t)s->rows_k * DI + 16);
    s->d_qscale = attn_device_alloc((size_t)s->rows_q * HI * sizeof(float) + 16);
    s->d_kscale = attn_device_alloc((size_t)s->rows_k * sizeof(float) + 16);
    if (!s->d_qi8 || !s->d_ki8 || !s->d_qscale || !s->d_kscale)
        return 1;
    s->args.q_index8 = s->d_qi8;
    s->args.k_index8 = s->d_ki8;
    s->args.q_scale = s->d_qscale;
    s->args.k_scale = s->d_kscale;
    s->args.corrupt_scale = s->corrupt_scale;
    /* the dense baseline's buffers: MHA with K and V copied into every head */
    memset(&s->dense, 0, sizeof s->dense);
    s->dense.q = s->d_q;
    s->dense.k = s->d_kx;
    s->dense.v = s->d_vx;
    s->dense.o = s->d_o;
    s->dense.lse = s->d_lse;
    s->dense.cu_seqlens_q = s->d_cu_q;
    s->dense.cu_seqlens_k = s->d_cu_k;
    return 0;
}

int ds_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
             attn_buffers *b, int *chunks) {
    (void)check_rows; /* example 05 samples query positions per sequence (below) */
    ds_state *s = of(state);
    s->p = *p;
    s->amplitude = cli->amplitude;
    s->inputs = cli->inputs;
    s->seed = cli->seed;
    s->rows_q = attn_problem_q_rows(p);
    s->rows_k = attn_problem_k_rows(p);
    /* rows to check: every one while the indexer's reference costs <= 2e9 multiply-adds (or with
     * --check-all), else about --check-rows (default 32) query positions per sequence */
    const double ref_cost = (double)s->rows_q * p->Lk * s->opt.index_heads * s->opt.index_dim;
    const int want = cli->check_rows >= 0 ? cli->check_rows : (ref_cost <= 2e9 ? 0 : 32);
    s->stride = want > 0 && want < p->Lq ? (p->Lq + want - 1) / want : 1;
    const size_t q_elems = attn_problem_q_elems(p), lse_elems = attn_problem_lse_elems(p);
    s->logits = xmalloc((size_t)p->B * s->opt.chunk * p->Lk * sizeof(float) + 16);
    s->sel = xmalloc((size_t)s->rows_q * s->k_eff * sizeof(int32_t) + 16);
    s->seen = xmalloc((size_t)s->rows_q * s->k_eff * sizeof(int32_t) + 16);
    s->out = xmalloc(q_elems * sizeof(float));
    s->lse = xmalloc(lse_elems * sizeof(float) + 16);
    s->ref = xmalloc(q_elems * sizeof(float));
    s->ref_lse = xmalloc(lse_elems * sizeof(float) + 16);
    s->lowp = xmalloc(q_elems * sizeof(float));
    if (!s->logits || !s->sel || !s->seen || !s->out || !s->lse || !s->ref || !s->ref_lse ||
        !s->lowp || make_inputs(s, cli->seed, cli->amplitude) != 0) {
        fprintf(stderr, "error: out of host memory for example 05's inputs and references\n");
        return 1;
    }
    /* -1 (no key) until a top-k check accepts a row: what the attention reference reads */
    memset(s->sel, 0xFF, (size_t)s->rows_q * s->k_eff * sizeof(int32_t));
    if (make_device(s) != 0)
        return 1;
    b->args = &s->args;
    *chunks = (p->Lq + s->opt.chunk - 1) / s->opt.chunk;
    return 0;
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

/* indexer_fp8's extra data for its check: its codes and scales read back, decoded. */
typedef struct fp8_view {
    uint8_t *q8, *k8;
    float *qs, *ks, *qv, *kv, *ws; /* scales; decoded values; w * q_scale in fp32 */
    double *exact, *mag, *bound;   /* per key: the unquantized inputs' score, its magnitudes,
                                    * ds_fp8_error_bound */
} fp8_view;

static int fp8_read_back(ds_state *s, fp8_view *v, int chunk, attn_stage_check *out) {
    const int HI = s->opt.index_heads, DI = s->opt.index_dim;
    const size_t nq = (size_t)s->rows_q * HI, nk = (size_t)s->rows_k, nl = (size_t)s->p.Lk + 1;
    v->q8 = xmalloc(nq * DI);
    v->k8 = xmalloc(nk * DI);
    v->qs = xmalloc(nq * sizeof(float));
    v->ks = xmalloc(nk * sizeof(float));
    v->qv = xmalloc(nq * DI * sizeof(float));
    v->kv = xmalloc(nk * DI * sizeof(float));
    v->ws = xmalloc(nq * sizeof(float));
    v->exact = xmalloc(nl * sizeof(double));
    v->mag = xmalloc(nl * sizeof(double));
    v->bound = xmalloc(nl * sizeof(double));
    if (!v->q8 || !v->k8 || !v->qs || !v->ks || !v->qv || !v->kv || !v->ws || !v->exact ||
        !v->mag || !v->bound)
        return 1;
    if (attn_to_host(v->q8, s->d_qi8, nq * DI) || attn_to_host(v->k8, s->d_ki8, nk * DI) ||
        attn_to_host(v->qs, s->d_qscale, nq * sizeof(float)) ||
        attn_to_host(v->ks, s->d_kscale, nk * sizeof(float)))
        return 1;
    ds_fp8_decode(v->q8, (int64_t)(nq * DI), v->qv);
    ds_fp8_decode(v->k8, (int64_t)(nk * DI), v->kv);
    for (size_t x = 0; x < nq; ++x)
        v->ws[x] = s->w[x] * v->qs[x]; /* as the kernel folds the q scale in */
    if (chunk == 0) {                  /* the measured agreement, over every chunk */
        s->fp8_worst = 0.0;
        s->fp8_recall = 1.0;
    }
    /* (1) the quantization, every row (once: every chunk quantizes the same rows) */
    if (chunk == 0 && out->pass &&
        (ds_fp8_check_rows(s->qi, v->q8, v->qs, (int64_t)nq, DI, "q_I", out->detail,
                           sizeof out->detail) ||
         ds_fp8_check_rows(s->ki, v->k8, v->ks, (int64_t)nk, DI, "k_I", out->detail,
                           sizeof out->detail)))
        out->pass = false;
    return 0;
}

static void fp8_release(fp8_view *v) {
    void *all[] = {v->q8, v->k8, v->qs, v->ks, v->qv, v->kv, v->ws, v->exact, v->mag, v->bound};
    for (size_t x = 0; x < sizeof all / sizeof all[0]; ++x)
        free(all[x]);
}

/* (3) query i's FP8 scores against the unquantized inputs' exact ones, within the derived bound;
 * and the top-k agreement with them. */
static void fp8_check_exact(ds_state *s, fp8_view *v, int b, int i, const float *got,
                            attn_stage_check *out) {
    const attn_problem *p = &s->p;
    const int HI = s->opt.index_heads, DI = s->opt.index_dim;
    const int n = ds_index_scores_ref(p, HI, DI, s->qi, s->ki, s->w, b, i, v->exact, v->mag);
    ds_fp8_error_bound(p, HI, DI, s->qi, s->ki, s->w, b, i, v->mag, v->bound);
    for (int t = 0; t < n; ++t) {
        const double err = fabs((double)got[t] - v->exact[t]);
        if (v->bound[t] > 0.0 && err / v->bound[t] > s->fp8_worst)
            s->fp8_worst = err / v->bound[t];
        if (!(err <= v->bound[t]) && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "b=%d i=%d key %d: %.9g, the unquantized inputs' score %.9g (FP8 bound %.3g)",
                     b, i, t, (double)got[t], v->exact[t], v->bound[t]);
        }
    }
    const double r = ds_fp8_set_recall(v->exact, got, n, s->k_eff);
    s->fp8_recall = r < s->fp8_recall ? r : s->fp8_recall;
}

int ds_check_indexer(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    ds_state *s = of(state);
    const bool fp8 = k->id == DS_KERNEL_INDEXER_FP8;
    fp8_view v = {0};
    const attn_problem *p = &s->p;
    const int Lk = p->Lk, C = s->opt.chunk;
    const size_t lbytes = (size_t)p->B * C * Lk * sizeof(float);
    if (attn_to_host(s->logits, s->d_logits, lbytes))
        return 1;
    double *want = xmalloc((size_t)Lk * sizeof(double) + 8);
    double *bound = xmalloc((size_t)Lk * sizeof(double) + 8);
    out->max_err = 0.0;
    if (want == NULL || bound == NULL || (fp8 && fp8_read_back(s, &v, chunk, out) != 0)) {
        free(want);
        free(bound);
        fp8_release(&v);
        fprintf(stderr, "error: out of host memory, or the FP8 codes could not be read back\n");
        return 1;
    }
    for (int b = 0; b < p->B; ++b) {
        int i0, i1;
        chunk_rows(s, b, chunk, &i0, &i1);
        for (int i = i0; i < i1; ++i) {
            float *got = s->logits + ((size_t)b * C + (i - i0)) * Lk;
            if (checked(s, b, i)) {
                /* (2) FP8: the exact scores of the kernel's own codes and scales */
                const int n = fp8 ? ds_fp8_scores_ref(p, s->opt.index_heads, s->opt.index_dim, v.qv,
                                                      v.ws, v.kv, v.ks, b, i, want, bound)
                                  : ds_index_scores_ref(p, s->opt.index_heads, s->opt.index_dim,
                                                        s->qi, s->ki, s->w, b, i, want, bound);
                if (fp8)
                    fp8_check_exact(s, &v, b, i, got, out);
                out->rows++;
                double tol;
                const int t = ds_check_index_scores(got, want, bound, n, &out->max_err, &tol);
                if (t >= 0 && out->pass) {
                    out->pass = false;
                    snprintf(out->detail, sizeof out->detail,
                             "b=%d i=%d key %d: %.9g, want %.9g (tolerance %.3g)", b, i, t,
                             (double)got[t], want[t], tol);
                }
            }
            /* --scores: the top-k stage's input replaced, once the indexer's is checked */
            for (int t = 0;
                 s->opt.scores != DS_SCORES_INDEXER && t < attn_problem_row_keys(p, b, i); ++t)
                got[t] = synthetic_score(s->opt.scores, s->seed, ds_row_q(p, b, i), t);
        }
    }
    free(want);
    free(bound);
    if (fp8 && chunk == (p->Lq + C - 1) / C - 1) /* measured, beside the bound it is held to */
        printf("indexer_fp8 against the unquantized inputs' exact scores: the largest error is "
               "%.3g of its FP8 bound; top-%d set recall >= %.3f on every checked row\n",
               s->fp8_worst, s->k_eff, s->fp8_recall);
    fp8_release(&v);
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
        if (i1 > i0 && attn_device_fill_nan((int32_t *)s->d_sel + ds_row_q(&s->p, b, i0) * s->k_eff,
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
        int32_t *rows = s->seen + ds_row_q(p, b, i0) * K;
        if (attn_to_host(rows, (int32_t *)s->d_sel + ds_row_q(p, b, i0) * K,
                         (size_t)(i1 - i0) * K * sizeof(int32_t)))
            return 1;
        for (int i = i0; i < i1; ++i) {
            const int32_t *got = s->seen + ds_row_q(p, b, i) * K;
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
            memcpy(s->sel + ds_row_q(p, b, i) * K, got, (size_t)K * sizeof(int32_t));
        }
    }
    return 0;
}

/* ---- the attention stage ------------------------------------------------------------------- */

/* Query rows of the reference: the checked positions, every head. */
static uint8_t *checked_rows(const ds_state *s) {
    uint8_t *rows = xmalloc((size_t)attn_problem_row_count(&s->p) + 1);
    for (int64_t n = 0; rows != NULL && n < attn_problem_row_count(&s->p); ++n) {
        const attn_row row = attn_row_at(&s->p, n);
        rows[n] = checked(s, row.b, row.i);
    }
    return rows;
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
            const int32_t *row = s->seen + ds_row_q(p, b, i) * K;
            const int n = attn_problem_row_keys(p, b, i);
            for (int t = 0; t < K; ++t)
                if (row[t] < -1 || row[t] >= n || (row[t] >= 0 && t > 0 && row[t] <= row[t - 1])) {
                    snprintf(why, len,
                             "attention input: query (b=%d, i=%d) slot %d holds index %d, not -1 "
                             "nor an ascending key in [0, %d)",
                             b, i, t, row[t], n);
                    return ATTN_EXIT_USAGE;
                }
        }
    /* the reference: the selection the top-k checks accepted, as its CSR mask */
    const int64_t csr_rows = (int64_t)p->B * p->Lq;
    s->row_ptr = xmalloc((size_t)(csr_rows + 1) * sizeof(int64_t));
    s->col_idx = xmalloc((size_t)csr_rows * K * sizeof(int32_t) + 4);
    uint8_t *rows = checked_rows(s);
    if (s->row_ptr == NULL || s->col_idx == NULL || rows == NULL) {
        free(rows);
        fprintf(stderr, "error: out of host memory for the attention reference\n");
        return 1;
    }
    ds_selection_csr(p, K, s->sel, s->row_ptr, s->col_idx);
    attn_mask mask = {ATTN_MASK_CSR, NULL, NULL, s->row_ptr, s->col_idx};
    const int rc = attn_reference_rows(p, &mask, s->q, s->kx, s->vx, s->ref, s->ref_lse, rows) ||
                   attn_reference_lowp_rows(p, &mask, s->q, s->kx, s->vx, s->lowp, rows);
    free(rows);
    if (rc != 0) {
        fprintf(stderr, "error: the attention reference failed (out of host memory?)\n");
        return 1;
    }
    return 0;
}

int ds_clear_output(void *state, const attn_kernel *k, int chunk) {
    (void)k, (void)chunk;
    const ds_state *s = of(state);
    return attn_device_fill_nan_output(&s->p, s->d_o, s->d_lse);
}

/* The dense reference of the baseline, on the checked rows (made on its first check). */
static int dense_reference(ds_state *s) {
    const attn_problem *p = &s->p;
    const size_t q_elems = attn_problem_q_elems(p), lse_elems = attn_problem_lse_elems(p);
    if (s->dense_ref != NULL)
        return 0;
    s->dense_ref = xmalloc(q_elems * sizeof(float));
    s->dense_ref_lse = xmalloc(lse_elems * sizeof(float) + 16);
    s->dense_lowp = xmalloc(q_elems * sizeof(float));
    uint8_t *rows = checked_rows(s);
    const int rc =
        !s->dense_ref || !s->dense_ref_lse || !s->dense_lowp || !rows ||
        attn_reference_rows(p, NULL, s->q, s->kx, s->vx, s->dense_ref, s->dense_ref_lse, rows) ||
        attn_reference_lowp_rows(p, NULL, s->q, s->kx, s->vx, s->dense_lowp, rows);
    free(rows);
    if (rc)
        fprintf(stderr, "error: the dense reference failed (out of host memory?)\n");
    return rc;
}

int ds_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    ds_state *s = of(state);
    const attn_problem *p = &s->p;
    const bool dense = (k->serves & ATTN_SERVES_BASELINE) != 0;
    const size_t q_elems = attn_problem_q_elems(p), nl = attn_problem_lse_elems(p);
    if ((dense && dense_reference(s) != 0) ||
        attn_to_host(s->staging, s->d_o, q_elems * attn_dtype_size(p->dtype)) ||
        attn_to_host(s->lse, s->d_lse, nl * sizeof(float)))
        return 1;
    attn_unpack(s->out, s->staging, q_elems, p->dtype);
    const attn_check_result co = attn_check_output(p, s->out, dense ? s->dense_ref : s->ref,
                                                   dense ? s->dense_lowp : s->lowp, s->amplitude);
    const attn_check_result cl =
        attn_check_lse_at(p, s->lse, dense ? s->dense_ref_lse : s->ref_lse, s->amplitude);
    out->pass = co.pass && cl.pass;
    out->rows = (int64_t)(co.checked / (size_t)(p->D > 0 ? p->D : 1));
    out->max_err = co.nonfinite ? INFINITY : co.max_abs_err;
    out->bound = co.bound;
    if (!co.pass && co.num_reported > 0)
        snprintf(out->detail, sizeof out->detail,
                 "%zu of %zu elements wrong; first (b=%d h=%d i=%d d=%d): %.6g, want %.6g", co.bad,
                 co.checked, co.first[0].b, co.first[0].h, co.first[0].i, co.first[0].d,
                 co.first[0].got, co.first[0].want);
    else if (!cl.pass && cl.num_reported > 0)
        snprintf(out->detail, sizeof out->detail, "LSE (b=%d h=%d i=%d): %.6g, want %.6g",
                 cl.first[0].b, cl.first[0].h, cl.first[0].i, cl.first[0].got, cl.first[0].want);
    return 0;
}

/* ---- FLOPs, records, dump, the table's last line -------------------------------------------- */

/* Entries (query, key) the indexer scores and attention computes: visible keys, capped at k. */
static double entries(const ds_state *s, bool capped) {
    double n = 0.0;
    for (int b = 0; b < s->p.B; ++b)
        for (int i = 0; i < attn_problem_seq_q(&s->p, b); ++i) {
            const int keys = attn_problem_row_keys(&s->p, b, i);
            n += capped && keys > s->k_eff ? s->k_eff : keys;
        }
    return n;
}

double ds_flops(void *state, const attn_kernel *k) {
    const ds_state *s = of(state);
    if (strcmp(k->name, "indexer") == 0) /* H_I dot products of D_I per (query, key) */
        return 2.0 * entries(s, false) * s->opt.index_heads * s->opt.index_dim;
    if (strcmp(k->name, "sparse_mma") == 0 || strcmp(k->name, "sparse_gather") == 0)
        /* FlashMLA's convention: 2 * Lq * k * H * (D_qk + D_v), with the keys each query really
         * attends to */
        return 2.0 * entries(s, true) * s->p.H * (2.0 * s->p.D);
    if (k->serves & ATTN_SERVES_BASELINE)
        return attn_problem_flops(&s->p);
    return 0.0;
}

void ds_record_json(void *state, const attn_kernel *k, char *out, size_t len) {
    (void)k;
    const ds_state *s = of(state);
    snprintf(out, len,
             "\"topk\":%d,\"index_heads\":%d,\"index_dim\":%d,\"chunk\":%d,"
             "\"device_mem_bytes\":%.0f",
             s->opt.topk, s->opt.index_heads, s->opt.index_dim, s->opt.chunk,
             (double)attn_device_mem_used());
}

int ds_dump(void *state, const char *dir) {
    const ds_state *s = of(state);
    const attn_problem *p = &s->p;
    char path[1024];
    int64_t dims[3] = {s->rows_q, s->k_eff, 0};
    float *selection = xmalloc((size_t)s->rows_q * s->k_eff * sizeof(float) + 4);
    if (selection == NULL)
        return 1;
    for (int64_t x = 0; x < s->rows_q * s->k_eff; ++x)
        selection[x] = (float)s->sel[x];
    snprintf(path, sizeof path, "%s/sel.bin", dir);
    int rc = attn_tensor_save(path, selection, 2, dims);
    free(selection);
    const struct {
        const char *name;
        const float *data;
        int64_t d0, d1, d2;
    } t[] = {
        {"q_index", s->qi, s->rows_q, s->opt.index_heads, s->opt.index_dim},
        {"k_index", s->ki, s->rows_k, s->opt.index_dim, 1},
        {"weights", s->w, s->rows_q, s->opt.index_heads, 1},
        {"q", s->q, (int64_t)attn_problem_q_elems(p) / p->D, p->D, 1},
        {"k", s->k1, s->rows_k, p->D, 1},
        {"v", s->v1, s->rows_k, p->D, 1},
        {"o_ref", s->ref, (int64_t)attn_problem_q_elems(p) / p->D, p->D, 1},
    };
    for (size_t n = 0; rc == 0 && n < sizeof t / sizeof t[0]; ++n) {
        int64_t d[3] = {t[n].d0, t[n].d1, t[n].d2};
        snprintf(path, sizeof path, "%s/%s.bin", dir, t[n].name);
        rc = attn_tensor_save(path, t[n].data, t[n].d2 > 1 ? 3 : 2, d);
    }
    if (rc)
        fprintf(stderr, "error: --dump: cannot write %s\n", path);
    return rc;
}

void ds_after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    (void)state, (void)ex;
    double e2e = 0.0, dense = 0.0;
    for (int r = 0; r < n; ++r) {
        if (!recs[r].timed)
            continue;
        if (strcmp(recs[r].kernel, "end_to_end") == 0)
            e2e = recs[r].time.median_ms;
        if (strcmp(recs[r].kernel, "dense_fa2") == 0)
            dense = recs[r].time.median_ms;
    }
    if (e2e > 0.0 && dense > 0.0)
        printf("\nend to end vs dense FA2: %.2fx%s\n", dense / e2e,
               attn_on_simulator() ? " (CPU simulator timings, not GPU performance)" : "");
}

void ds_release(void *state) {
    ds_state *s = of(state);
    float *host[] = {
        s->q,         s->k1,  s->v1,  s->kx,  s->vx,      s->qi,   s->ki,        s->w,
        s->logits,    s->out, s->lse, s->ref, s->ref_lse, s->lowp, s->dense_ref, s->dense_ref_lse,
        s->dense_lowp};
    void *dev[] = {s->d_q,    s->d_k1,   s->d_v1,  s->d_kx,     s->d_vx,     s->d_qi,
                   s->d_ki,   s->d_o,    s->d_w,   s->d_logits, s->d_lse,    s->d_sel,
                   s->d_cu_q, s->d_cu_k, s->d_qi8, s->d_ki8,    s->d_qscale, s->d_kscale};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
    free(s->sel);
    free(s->seen);
    free(s->row_ptr);
    free(s->col_idx);
    free(s->staging);
}
