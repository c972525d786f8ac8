/* deepseek_run.c — example 05's run on the one driver (attn/example.h): its flags, its inputs
 * on the host and the device, and what the driver asks of a module besides the stages (FLOPs,
 * --json members, --dump, the table's last line, the release). The stages and their checks are
 * in deepseek_stages.c, the kernels in deepseek_sparse.cu.
 */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h"

static ds_state *of(void *state) { return (ds_state *)state; }

/* Uploads count fp32 values as the problem's dtype into a new device buffer. */
static int upload(ds_state *s, void **dst, const float *src, size_t count) {
    return attn_device_upload(dst, src, count, s->p.dtype, s->staging);
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
    s->q = attn_host_alloc(q_elems * sizeof(float), "example 05's inputs");
    s->k1 = attn_host_alloc(k1_elems * sizeof(float), "example 05's inputs");
    s->v1 = attn_host_alloc(k1_elems * sizeof(float), "example 05's inputs");
    s->kx = attn_host_alloc(kx_elems * sizeof(float), "example 05's inputs");
    s->vx = attn_host_alloc(kx_elems * sizeof(float), "example 05's inputs");
    s->qi = attn_host_alloc(qi_elems * sizeof(float), "example 05's inputs");
    s->ki = attn_host_alloc(ki_elems * sizeof(float), "example 05's inputs");
    s->w = attn_host_alloc((size_t)s->rows_q * HI * sizeof(float), "example 05's inputs");
    s->staging = attn_host_alloc(most * 4 + 16, "example 05's inputs");
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
                const int64_t y = attn_problem_token_index(p, false, b, t) * D;
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
    if (attn_device_upload_seqlens(p, &s->d_cu_q, &s->d_cu_k))
        return 1;
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
    s->logits = attn_host_alloc((size_t)p->B * s->opt.chunk * p->Lk * sizeof(float) + 16,
                                "example 05's inputs");
    s->sel =
        attn_host_alloc((size_t)s->rows_q * s->k_eff * sizeof(int32_t) + 16, "example 05's inputs");
    s->seen =
        attn_host_alloc((size_t)s->rows_q * s->k_eff * sizeof(int32_t) + 16, "example 05's inputs");
    s->out = attn_host_alloc(q_elems * sizeof(float), "example 05's inputs");
    s->lse = attn_host_alloc(lse_elems * sizeof(float) + 16, "example 05's inputs");
    if (!s->logits || !s->sel || !s->seen || !s->out || !s->lse ||
        make_inputs(s, cli->seed, cli->amplitude) != 0)
        return 1;
    if (cli->dump_dir != NULL) { /* indexer_fp8's scores, for --dump (a PyTorch check) */
        const size_t n = (size_t)s->rows_q * p->Lk;
        s->fp8_scores = attn_host_alloc(n * sizeof(float) + 16, "--dump");
        if (s->fp8_scores == NULL)
            return 1;
        for (size_t x = 0; x < n; ++x)
            s->fp8_scores[x] = NAN;
    }
    /* -1 (no key) until a top-k check accepts a row: what the attention reference reads */
    memset(s->sel, 0xFF, (size_t)s->rows_q * s->k_eff * sizeof(int32_t));
    if (make_device(s) != 0)
        return 1;
    b->args = &s->args;
    *chunks = (p->Lq + s->opt.chunk - 1) / s->opt.chunk;
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

/* indexer_fp8's tensors after its checked run: its codes (as the values they stand for) and
 * scales read back from the device, and its scores of every row (fp8_scores.bin, [rows_q, Lk]) */
static int dump_fp8(const ds_state *s, const char *dir, char *path, size_t len) {
    const int64_t HI = s->opt.index_heads, DI = s->opt.index_dim;
    const int64_t nq = s->rows_q * HI, nk = s->rows_k;
    uint8_t *codes = attn_host_alloc((size_t)(nq > nk ? nq : nk) * DI + 16, "--dump");
    float *values =
        attn_host_alloc((size_t)(nq > nk ? nq : nk) * DI * sizeof(float) + 16, "--dump");
    int rc = codes == NULL || values == NULL;
    const struct {
        const char *name;
        const void *dev;
        int64_t d0, d1, d2; /* d2 > 1: e4m3 codes, decoded */
    } t[] = {
        {"q_index8", s->d_qi8, s->rows_q, HI, DI},
        {"k_index8", s->d_ki8, nk, DI, 0},
        {"q_scale", s->d_qscale, s->rows_q, HI, 1},
        {"k_scale", s->d_kscale, nk, 1, 1},
    };
    for (size_t n = 0; rc == 0 && n < sizeof t / sizeof t[0]; ++n) {
        const bool fp8 = n < 2;
        const int64_t elems = t[n].d0 * t[n].d1 * (t[n].d2 > 1 ? t[n].d2 : 1);
        int64_t d[3] = {t[n].d0, t[n].d1, t[n].d2};
        snprintf(path, len, "%s/%s.bin", dir, t[n].name);
        rc = fp8 ? attn_to_host(codes, t[n].dev, (size_t)elems)
                 : attn_to_host(values, t[n].dev, (size_t)elems * sizeof(float));
        if (rc == 0 && fp8)
            ds_fp8_decode(codes, elems, values);
        if (rc == 0)
            rc = attn_tensor_save(path, values, t[n].d2 > 1 ? 3 : 2, d);
    }
    if (rc == 0) {
        int64_t d[2] = {s->rows_q, s->p.Lk};
        snprintf(path, len, "%s/fp8_scores.bin", dir);
        rc = attn_tensor_save(path, s->fp8_scores, 2, d);
    }
    free(codes);
    free(values);
    return rc;
}

int ds_dump(void *state, const char *dir) {
    const ds_state *s = of(state);
    const attn_problem *p = &s->p;
    const int64_t HI = s->opt.index_heads, DI = s->opt.index_dim;
    const int64_t rq = (int64_t)attn_problem_q_elems(p) / p->D;
    const attn_dump_tensor t[] = {
        {"sel", NULL, s->sel, 2, {s->rows_q, s->k_eff}},
        {"q_index", s->qi, NULL, DI > 1 ? 3 : 2, {s->rows_q, HI, DI}},
        {"k_index", s->ki, NULL, 2, {s->rows_k, DI}},
        {"weights", s->w, NULL, 2, {s->rows_q, HI}},
        {"q", s->q, NULL, 2, {rq, p->D}},
        {"k", s->k1, NULL, 2, {s->rows_k, p->D}},
        {"v", s->v1, NULL, 2, {s->rows_k, p->D}},
        {"o_ref", s->ref.o, NULL, 2, {rq, p->D}},
    };
    char path[1024];
    int rc = attn_dump_tensors(dir, t, (int)(sizeof t / sizeof t[0]));
    if (rc == 0 && s->fp8_checked && (rc = dump_fp8(s, dir, path, sizeof path)) != 0)
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
    void *host[] = {s->q,    s->k1,      s->v1,      s->kx,      s->vx,        s->qi,
                    s->ki,   s->w,       s->logits,  s->out,     s->lse,       s->sel,
                    s->seen, s->row_ptr, s->col_idx, s->staging, s->fp8_scores};
    void *dev[] = {s->d_q,    s->d_k1,   s->d_v1,  s->d_kx,     s->d_vx,     s->d_qi,
                   s->d_ki,   s->d_o,    s->d_w,   s->d_logits, s->d_lse,    s->d_sel,
                   s->d_cu_q, s->d_cu_k, s->d_qi8, s->d_ki8,    s->d_qscale, s->d_kscale};
    attn_free_buffers(host, ATTN_COUNT(host), dev, ATTN_COUNT(dev));
    attn_stage_reference_free(&s->ref);
    attn_stage_reference_free(&s->dense_ref);
}

/* ---- the module ------------------------------------------------------------------------------ */

static const attn_stage ds_stages[] = {
    [DS_STAGE_INDEXER] = {.name = "indexer",
                          .chunked = true,
                          .clear = ds_clear_logits,
                          .check = ds_check_indexer},
    [DS_STAGE_TOPK] = {.name = "top-k",
                       .chunked = true,
                       .clear = ds_clear_selection,
                       .check = ds_check_topk},
    [DS_STAGE_ATTENTION] = {.name = "attention",
                            .prepare = ds_prepare_attention,
                            .clear = ds_clear_output,
                            .check = ds_check_attention},
};

#define OPT(field) offsetof(ds_options, field)
static const attn_option ds_option_table[] = {
    {"--topk", "K", "keys kept per query (k >= the keys a query sees: all of them)",
     ATTN_OPTION_INT, OPT(topk), 1, INT_MAX, NULL, "64", "2048"},
    {"--index-heads", "N", "indexer heads H_I: 16, 32, 48 or 64", ATTN_OPTION_INT, OPT(index_heads),
     16, DS_MAX_INDEX_HEADS, NULL, "16", "64"},
    {"--index-dim", "N", "indexer head dimension D_I: 64 or 128", ATTN_OPTION_INT, OPT(index_dim),
     64, 128, NULL, "64", "128"},
    {"--chunk", "N", "query positions per indexer chunk (0: as many as 1 GiB of logits holds)",
     ATTN_OPTION_INT, OPT(chunk), 0, INT_MAX, NULL, "0", NULL},
    {"--scores", "KIND",
     "top-k input: the indexer's scores, or synthetic rows: equal (all 1), neginf (all -inf), "
     "large (+-3e38), ties (4 distinct values)",
     ATTN_OPTION_CHOICE, OPT(scores), 0, 0, "indexer|equal|neginf|large|ties", "indexer", NULL},
    {"--corrupt-scale", "F",
     "multiply the first key's FP8 scale by F after indexer_fp8's quantization (a test: its "
     "checks must fail)",
     ATTN_OPTION_TEXT, OPT(corrupt_scale_text), 0, 0, NULL, NULL, NULL},
    {"--corrupt-index", "V",
     "write V into the first slot of query 0's selection on the device after the top-k stage "
     "(a test: attention must refuse an invalid index, and fail on a valid wrong one)",
     ATTN_OPTION_TEXT, OPT(corrupt_text), 0, 0, NULL, NULL, NULL},
};
#undef OPT

const attn_module ds_module = {
    ATTN_MODULE_OPTIONS(ds_option_table, ds_options),
    .state_size = sizeof(ds_state),
    .prepare = ds_prepare,
    .verdict = ds_verdict,
    .banner = ds_banner,
    ATTN_STAGES(ds_stages),
    .setup = ds_setup,
    .flops = ds_flops,
    .record_json = ds_record_json,
    .dump = ds_dump,
    .after_table = ds_after_table,
    .release = ds_release,
};
