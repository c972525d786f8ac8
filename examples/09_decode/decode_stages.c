/* decode_stages.c — example 09's stages on the one driver (attn/example.h): its inputs
 * (a batch of caches, contiguous and paged, with the pages of each sequence out of order in the
 * pool), and what each stage is checked against. The kernels are in decode.cu, the reference in
 * decode_reference.c, the block table's checks and the split rules in decode_host.c, the flags in
 * decode_prepare.c, the counts, records and dump in decode_report.c.
 *
 *   stage      kernels                  checked against (every checked row)
 *   append     append                   the pools as a right append leaves them, byte for byte
 *                                       (the new tokens' slots, and that nothing else changed)
 *   attention  naive, split_kv, gqa,    dec_reference_row (double precision), FlashAttention's
 *              paged, latent            rule for fp16/bf16; paged also equal to gqa bit for bit
 *   indexer    indexer                  example 05's ds_index_scores_ref, fp32 rounding bound
 *   top-k      topk_radix, topk_bitonic example 05's tie rule on the indexer's own scores
 *   sparse     sparse                   dec_reference_row over the selection the top-k check
 *                                       accepted (never the device buffer read back later)
 * With --latent (decode.h, "latent") the data is MLA-shaped: q 576 wide, one latent pool (no V
 * pool, no contiguous cache, no index keys), o 512 wide; append and latent run, the rest skip.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/check.h"
#include "attn/device.h"
#include "attn/tensor.h"
#include "decode_stages.h"

/* The split count of each version (--splits): the rule's input is its blocks per split. */
static int splits_for(const dec_state *s, int sms, int blocks, int keys) {
    return s->splits_mode == 2   ? s->splits_fixed
           : s->splits_mode == 1 ? dec_splits_flash(sms, blocks, keys, s->D)
                                 : dec_splits_ours(sms, blocks, keys);
}

static void choose_splits(dec_state *s) {
    const int tiles_g = (s->H / s->H_kv + DEC_ROWS - 1) / DEC_ROWS, L = s->L_cap;
    int sms = 0; /* the device's SMs (132, an H100's, where it tells none) */
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms < 1)
        sms = 132;
    s->run.splits_split_kv = splits_for(s, sms, s->B * s->H, L);
    s->run.splits_tiled = splits_for(s, sms, dec_blocks_per_split(s->B, s->H, s->H_kv, s->Lq), L);
    s->run.splits_sparse = splits_for(s, sms, s->B * s->Lq * s->H_kv * tiles_g, s->k_eff);
}

void dec_banner(void *state, const attn_problem *p) {
    static const char *const rules[] = {"our rule", "FlashAttention-2's rule", "--splits"};
    dec_state *s = of(state);
    choose_splits(s);
    const int empty = s->B - s->tokens / s->Lq; /* a sequence with tokens has Lq new ones */
    printf("decode step: %d sequence%s (%d empty), cache up to %d tokens, %d new token%s each; "
           "%d query heads over %d key/value head%s (g = %d)\n",
           s->B, s->B > 1 ? "s" : "", empty, s->L_cap, s->Lq, s->Lq > 1 ? "s" : "", s->H, s->H_kv,
           s->H_kv > 1 ? "s" : "", s->H / s->H_kv);
    printf("paged cache: pages of %d tokens, %d of a pool of %d in use (handed out in shuffled "
           "order), block table %d x %d\n",
           s->P, s->num_pages - s->opt.spare_pages, s->num_pages, s->B, s->W);
    if (s->latent) /* the problem line's GFLOP is 4 D per (row, key); here V is D_v wide */
        printf("latent (MLA, FlashMLA's layout): q and K %d wide (%d latent + %d RoPE), V = the "
               "first %d of each K row, no V pool; scale %g; attention %.3g GFLOP (2 (D + D_v) "
               "per row and key)\n",
               s->D, s->Dv, s->D - s->Dv, s->Dv, (double)s->p.scale,
               2.0 * (s->D + s->Dv) * attn_problem_entries(p) * 1e-9);
    printf("split-KV (%s): split_kv %d, gqa/paged/latent %d, sparse %d splits; DSA: k = %d, "
           "indexer %d heads x %d\n",
           rules[s->splits_mode], s->run.splits_split_kv, s->run.splits_tiled, s->run.splits_sparse,
           s->k_eff, s->opt.index_heads, s->opt.index_dim);
    if (s->opt.fp8)
        printf("FP8 cache: %s, %d bytes per token (codes and scales, all heads), outlier channels "
               "x%g\n",
               s->latent ? "FlashMLA's latent rows" : "e4m3 K/V, a scale per token and K/V head",
               fp8_bytes_per_token(s), s->opt.outliers);
}

/* ---- step 3: inputs -------------------------------------------------------------------------- */

dec_pool *dec_add_pool(dec_state *s, dec_pool *ps, const char *name, size_t row) {
    const size_t bytes = (size_t)s->num_pages * s->P * row;
    while (ps->name != NULL)
        ++ps;
    *ps = (dec_pool){name, alloc_nan(s, bytes), alloc_nan(s, bytes), row, NULL};
    return s->mem.failed ? NULL : ps;
}

/* A new pool (dec_add_pool) as a right append leaves it: every token of every sequence in its slot
 * (rows: the tokens' values, width of them per token: H_kv * D, or D_I). 0, or 1 (reported). */
static int fill_pool(dec_state *s, const char *name, const float *rows, int width) {
    const dec_pool *pool = dec_add_pool(s, s->pools, name, (size_t)width * s->dsize);
    if (pool == NULL)
        return 1;
    for (int b = 0; b < s->B; ++b)
        for (int t = 0; t < s->lens[b]; ++t)
            attn_pack(pool->after + slot_of(s, b, t) * (int64_t)pool->row,
                      rows + ((int64_t)s->cu_k[b] + t) * width, (size_t)width, s->p.dtype);
    return 0;
}

/* Each pool of ps as it was before the step: as after it, but the new tokens' slots NaN. */
static void fill_before(const dec_state *s, const dec_pool *ps) {
    for (; ps->name != NULL; ++ps)
        for (int b = 0; b < s->B; ++b)
            for (int t = 0; t < s->lens[b] - s->Lq; ++t) { /* prefilled: in the pool already */
                const size_t at = (size_t)slot_of(s, b, t) * ps->row;
                memcpy(ps->before + at, ps->after + at, ps->row);
            }
}

/* The new tokens' rows, [B, Lq, width] (zeros for an empty sequence, whose are not read), packed
 * through the staging buffer into a new device buffer (NULL after a message). */
static void *upload_new(dec_state *s, const float *rows, int width) {
    const size_t row = (size_t)width * s->dsize;
    memset(s->staging, 0, (size_t)s->B * s->Lq * row);
    for (int b = 0; b < s->B; ++b)
        for (int i = 0; s->lens[b] > 0 && i < s->Lq; ++i)
            attn_pack(s->staging + ((size_t)b * s->Lq + i) * row,
                      rows + ((int64_t)s->cu_k[b] + s->lens[b] - s->Lq + i) * width, (size_t)width,
                      s->p.dtype);
    return attn_allocs_upload(&s->mem, s->staging, (size_t)s->B * s->Lq * row);
}

/* The inputs in fp32, seeded as the flags say (--fp8: then the FP8 pools). */
static int make_inputs(dec_state *s, const attn_cli *cli) {
    const int D = s->D, HI = s->opt.index_heads, DI = s->opt.index_dim, HkD = s->H_kv * D;
    const size_t total_k = (size_t)s->cu_k[s->B], rows = (size_t)rows_of(s);
    const size_t tok = (size_t)s->B * s->Lq;
    const bool lat = s->latent; /* one latent pool: no V, no contiguous cache, no index keys */
    s->q = alloc_host(s, rows * D * sizeof(float));
    s->k = alloc_host(s, total_k * HkD * sizeof(float));
    s->v = alloc_host(s, lat ? 0 : total_k * HkD * sizeof(float));
    s->qi = alloc_host(s, tok * HI * DI * sizeof(float));
    s->ki = alloc_host(s, total_k * DI * sizeof(float));
    s->w = alloc_host(s, tok * HI * sizeof(float));
    if (s->mem.failed)
        return 1;
    /* streams 0-2: Q, K, V (as the harness: --amplitude, --inputs); 3-5: q_I, k_I, w (as
     * example 05). The latent pool is K and V at once: opposed signs make it non-positive. */
    attn_fill_uniform(s->q, rows * D, cli->seed, 0, cli->amplitude, s->p.dtype);
    attn_fill_uniform(s->k, total_k * HkD, cli->seed, 1, cli->amplitude, s->p.dtype);
    if (!lat)
        attn_fill_uniform(s->v, total_k * HkD, cli->seed, 2, cli->amplitude, s->p.dtype);
    attn_inputs_apply(cli->inputs, s->q, rows * D, s->k, total_k * HkD, s->v,
                      lat ? 0 : total_k * HkD);
    attn_fill_uniform(s->qi, tok * HI * DI, cli->seed, 3, 1.0f, s->p.dtype);
    attn_fill_uniform(s->ki, total_k * DI, cli->seed, 4, 1.0f, s->p.dtype);
    attn_fill_uniform(s->w, tok * HI, cli->seed, 5, 1.0f / sqrtf((float)HI * DI), ATTN_F32);
    return s->opt.fp8 && dec_fp8_inputs(s); /* K's outlier channels scaled: before the pools */
}

/* The caches as the device holds them (packed): the pools before and after a right append, the
 * contiguous cache [B, H_kv, L_cap, D] (NaN past each sequence's tokens). */
static int make_caches(dec_state *s) {
    const int D = s->D, HkD = s->H_kv * D;
    const bool lat = s->latent;
    s->cache_bytes = lat ? 0 : (size_t)s->B * s->H_kv * s->L_cap * D * s->dsize;
    s->kc = alloc_nan(s, s->cache_bytes), s->vc = alloc_nan(s, s->cache_bytes);
    if (s->mem.failed || fill_pool(s, "K", s->k, HkD) ||
        (!lat &&
         (fill_pool(s, "V", s->v, HkD) || fill_pool(s, "index-key", s->ki, s->opt.index_dim))))
        return 1;
    for (int b = 0; !lat && b < s->B; ++b) /* the contiguous cache (latent: none) */
        for (int hk = 0; hk < s->H_kv; ++hk)
            for (int t = 0; t < s->lens[b]; ++t) {
                const size_t dst = (((size_t)b * s->H_kv + hk) * s->L_cap + t) * D * s->dsize;
                const size_t src = (((size_t)s->cu_k[b] + t) * s->H_kv + hk) * D;
                attn_pack(s->kc + dst, s->k + src, (size_t)D, s->p.dtype);
                attn_pack(s->vc + dst, s->v + src, (size_t)D, s->p.dtype);
            }
    fill_before(s, s->pools);
    fill_before(s, s->pools8);
    return 0;
}

/* Every pool of ps as before the step onto the device: into new buffers (fresh), or into its
 * own (a stage's clear). 0, or 1 after a message. */
static int pools_before(dec_state *s, dec_pool *ps, bool fresh) {
    const size_t slots = (size_t)s->num_pages * s->P;
    for (dec_pool *pool = ps; pool->name != NULL; ++pool) {
        if (fresh)
            pool->dev = attn_allocs_upload(&s->mem, pool->before, slots * pool->row);
        else if (attn_to_device(pool->dev, pool->before, slots * pool->row))
            return 1;
    }
    return s->mem.failed;
}

static int make_device(dec_state *s) {
    attn_allocs *m = &s->mem;
    const size_t rows = (size_t)rows_of(s), tok = (size_t)s->B * s->Lq, B = (size_t)s->B;
    const size_t HkD = (size_t)s->H_kv * s->D, HI = s->opt.index_heads, DI = s->opt.index_dim;
    dec_args *a = &s->run.args;
    memset(a, 0, sizeof *a);
    a->B = s->B, a->H = s->H, a->H_kv = s->H_kv, a->Lq = s->Lq, a->D = s->D, a->L_cap = s->L_cap;
    a->latent = s->latent, a->dtype = s->p.dtype, a->scale = s->p.scale, a->splits = 1;
    a->table_width = s->W, a->page_size = s->P, a->num_pages = s->num_pages;
    a->index_heads = (int)HI, a->index_dim = (int)DI, a->topk = s->k_eff;
    if (pools_before(s, s->pools, true) || pools_before(s, s->pools8, true))
        return 1;
    a->k_pages = s->pools[0].dev, a->v_pages = s->pools[1].dev, a->ki_pages = s->pools[2].dev;
    a->k8_pages = s->pools8[0].dev, a->v8_pages = s->pools8[1].dev; /* --fp8's, else NULL */
    a->k8_scales = s->pools8[2].dev, a->v8_scales = s->pools8[3].dev;
    a->q = attn_allocs_upload_as(m, s->q, rows * s->D, s->p.dtype, s->staging);
    a->k_cache = attn_allocs_upload(m, s->kc, s->cache_bytes);
    a->v_cache = attn_allocs_upload(m, s->vc, s->cache_bytes);
    a->k_new = upload_new(s, s->k, (int)HkD);
    if (!s->latent) { /* the latent pool alone: nothing else is read or written */
        a->v_new = upload_new(s, s->v, (int)HkD);
        a->ki_new = upload_new(s, s->ki, (int)DI);
    }
    a->q_index = attn_allocs_upload_as(m, s->qi, tok * HI * DI, s->p.dtype, s->staging);
    a->w = attn_allocs_upload(m, s->w, tok * HI * sizeof(float));
    a->block_table = attn_allocs_upload(m, s->table, B * s->W * sizeof(int));
    a->seqlens = attn_allocs_upload(m, s->lens, B * sizeof(int));
    a->cu_q = attn_allocs_upload(m, s->cu_q, (B + 1) * sizeof(int));
    a->cu_k = attn_allocs_upload(m, s->cu_k, (B + 1) * sizeof(int));
    a->o = attn_allocs_device(m, rows * s->Dv * s->dsize + 16);
    a->lse = attn_allocs_device(m, rows * sizeof(float) + 16);
    a->logits = attn_allocs_device(m, tok * s->L_cap * sizeof(float) + 16);
    a->sel = attn_allocs_device(m, tok * s->k_eff * sizeof(int32_t) + 16);
    int most = s->run.splits_split_kv;
    most = s->run.splits_tiled > most ? s->run.splits_tiled : most;
    most = s->run.splits_sparse > most ? s->run.splits_sparse : most;
    a->part = attn_allocs_device(m, dec_workspace_bytes(a, most) + 16);
    return m->failed;
}

int dec_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
              attn_buffers *b, int *chunks) {
    dec_state *s = of(state);
    s->p = *p;
    s->amplitude = cli->amplitude;
    s->dsize = attn_dtype_size(p->dtype);
    s->stride = check_rows > 0 ? (rows_of(s) + check_rows - 1) / check_rows : 1;
    s->paged_same = -1;
    choose_splits(s);
    const size_t rows = (size_t)rows_of(s), tok = (size_t)s->B * s->Lq;
    /* the staging buffer: Q, q_I and the new tokens' rows up, O and a pool's slots back */
    const size_t HkD = (size_t)s->H_kv * s->D, DI = s->opt.index_dim;
    const size_t qi = tok * s->opt.index_heads * DI, up = (rows * s->D > qi ? rows * s->D : qi);
    const size_t back = (size_t)s->num_pages * s->P * (HkD > DI ? HkD : DI);
    s->out = alloc_host(s, rows * s->Dv * sizeof(float));
    s->lse = alloc_host(s, rows * sizeof(float));
    s->logits = alloc_host(s, tok * s->L_cap * sizeof(float));
    s->sel = alloc_nan(s, tok * s->k_eff * sizeof(int32_t)); /* -1 until a top-k check accepts */
    s->seen_sel = alloc_host(s, tok * s->k_eff * sizeof(int32_t));
    s->gqa_bits = alloc_host(s, rows * s->Dv * s->dsize), s->gqa_lse = alloc_host(s, rows * 4);
    s->staging = alloc_host(s, (up > back ? up : back) * s->dsize + 16);
    if (s->mem.failed || make_inputs(s, cli) || make_caches(s) || make_device(s))
        return 1;
    b->args = &s->run;
    *chunks = 1;
    return 0;
}

/* ---- what each stage's kernels write, NaN-filled before they run ----------------------------- */

int dec_clear(void *state, const attn_kernel *k, int chunk) {
    (void)chunk;
    dec_state *s = of(state);
    const dec_args *a = &s->run.args;
    const size_t tokens = (size_t)s->B * s->Lq, rows = (size_t)rows_of(s);
    switch (k->stage) {
    case DEC_STAGE_APPEND: /* the pools as before the step: the new tokens' slots NaN */
        return pools_before(s, s->pools, false);
    case DEC_STAGE_APPEND_FP8:
        return pools_before(s, s->pools8, false);
    case DEC_STAGE_INDEXER:
        return attn_device_fill_nan(a->logits, tokens * s->L_cap * sizeof(float));
    case DEC_STAGE_TOPK:
        return attn_device_fill_nan(a->sel, tokens * s->k_eff * sizeof(int32_t));
    default: /* attention, dense or sparse */
        return attn_device_fill_nan(a->o, rows * s->Dv * s->dsize) ||
               attn_device_fill_nan(a->lse, rows * sizeof(float));
    }
}

/* ---- the append stages (versions 1 and 11) --------------------------------------------------- */

/* Each pool the stage of k wrote, read back, against a right append's: the first slot that
 * differs, as "<name> pool: page x slot y". */
int dec_check_append(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    dec_state *s = of(state);
    const dec_pool *pool = k->stage == DEC_STAGE_APPEND ? s->pools : s->pools8;
    const size_t slots = (size_t)s->num_pages * s->P;
    out->rows = s->tokens;
    for (; pool->name != NULL; ++pool) {
        if (attn_to_host(s->staging, pool->dev, slots * pool->row))
            return 1;
        for (size_t slot = 0; slot < slots && out->pass; ++slot)
            if (memcmp(s->staging + slot * pool->row, pool->after + slot * pool->row, pool->row))
                out->pass = attn_reason(out->detail, sizeof out->detail, false, /* false, why */
                                        "%s pool: page %zu slot %zu differs from a right append",
                                        pool->name, slot / (size_t)s->P, slot % (size_t)s->P);
    }
    return 0;
}

/* ---- the attention stages -------------------------------------------------------------------- */

/* The reference of the checked rows (NaN elsewhere: the checkers skip those), over every key a
 * row sees (sel NULL) or over a selection. */
int dec_reference(dec_state *s, const int32_t *sel, const float *k, const float *v,
                  attn_stage_reference *r) {
    const int64_t rows = rows_of(s);
    const int D = s->Dv; /* the output row's width */
    r->o = alloc_nan(s, (size_t)rows * D * sizeof(float));
    r->lse = alloc_nan(s, (size_t)rows * sizeof(float));
    r->lowp = alloc_nan(s, (size_t)rows * D * sizeof(float));
    if (s->mem.failed)
        return 1;
    dec_ref_inputs in = {0};
    in.B = s->B, in.H = s->H, in.H_kv = s->H_kv, in.Lq = s->Lq, in.D = s->D, in.D_v = s->Dv;
    in.scale = s->p.scale, in.dtype = s->p.dtype, in.cu_k = s->cu_k, in.q = s->q, in.k = k;
    in.v = s->latent ? NULL : v, in.sel = sel, in.topk = s->k_eff;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(| : failed)
    for (int64_t n = 0; n < rows; n += s->stride) /* the checked rows; LSE [H, B * Lq] */
        failed |= dec_reference_row(&in, n, r->o + n * D,
                                    r->lse + n % s->H * (rows / s->H) + n / s->H, r->lowp + n * D);
    if (failed)
        fprintf(stderr, "error: out of host memory in the reference\n");
    return failed;
}

/* Reads the kernel's O and LSE back and compares them with a reference. */
int dec_compare(dec_state *s, const attn_stage_reference *r, double amplitude,
                attn_stage_check *out) {
    attn_problem po = s->p; /* O's rows are D_v wide (latent: 512 of the 576) */
    po.D = s->Dv;
    return attn_stage_check_output(&po, s->run.args.o, s->run.args.lse, s->staging, s->out, s->lse,
                                   r, amplitude, out);
}

int dec_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    dec_state *s = of(state);
    if ((s->ref.o == NULL && dec_reference(s, NULL, s->k, s->v, &s->ref)) ||
        dec_compare(s, &s->ref, s->amplitude, out) != 0)
        return 1;
    const size_t obytes = (size_t)rows_of(s) * s->Dv * s->dsize, lbytes = (size_t)rows_of(s) * 4;
    if (named(k, "gqa")) { /* kept for paged's bit-for-bit comparison */
        memcpy(s->gqa_bits, s->staging, obytes);
        memcpy(s->gqa_lse, s->lse, lbytes);
        s->paged_same = -2;
    } else if (named(k, "paged") && s->paged_same == -2) { /* gqa's output kept */
        s->paged_same =
            memcmp(s->gqa_bits, s->staging, obytes) == 0 && memcmp(s->gqa_lse, s->lse, lbytes) == 0;
        if (!s->paged_same && out->pass)
            out->pass = attn_reason(out->detail, sizeof out->detail, false,
                                    "its output is not bit-identical to gqa's on the contiguous "
                                    "cache (same splits, same arithmetic)");
    }
    return 0;
}

/* ---- the indexer and top-k stages ------------------------------------------------------------ */

int dec_check_indexer(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    const int64_t tokens = (int64_t)s->B * s->Lq;
    if (attn_to_host(s->logits, s->run.args.logits, (size_t)tokens * s->L_cap * sizeof(float)))
        return 1;
    /* the reference's scores and bounds in the staging buffer (free here; at least L_cap x 128
     * bytes: a slot per key of the longest cache, a K/V row of at least 64 2-byte values each) */
    double *want = (double *)(void *)s->staging, *bound = want + s->L_cap + 1;
    out->max_err = 0.0;
    for (int64_t token = 0; token < tokens; ++token) {
        const int b = (int)(token / s->Lq), i = (int)(token % s->Lq);
        if (!token_checked(s, token))
            continue;
        const int n = ds_index_scores_ref(&s->p, s->opt.index_heads, s->opt.index_dim, s->qi, s->ki,
                                          s->w, b, i, want, bound);
        /* example 05's bound: fp32 rounding of the heads' sums */
        ds_check_index_scores(s->logits + token * s->L_cap, want, bound, n, b, i, out);
    }
    return 0;
}

/* The selection on the device, read back into seen_sel. */
static int read_selection(dec_state *s) {
    return attn_to_host(s->seen_sel, s->run.args.sel,
                        (size_t)s->B * s->Lq * s->k_eff * sizeof(int32_t));
}

int dec_check_topk(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    const int64_t tokens = (int64_t)s->B * s->Lq;
    const int K = s->k_eff;
    if (read_selection(s))
        return 1;
    for (int64_t token = 0; token < tokens; ++token) {
        const int b = (int)(token / s->Lq), i = (int)(token % s->Lq);
        const int32_t *got = s->seen_sel + token * K;
        char why[200];
        if (!token_checked(s, token))
            continue;
        out->rows++;
        if (ds_check_selection(s->logits + token * s->L_cap, visible(s, b, i), K, got, why,
                               sizeof why) != 0 &&
            out->pass) /* the first failure: pass false, why in detail */
            out->pass =
                attn_reason(out->detail, sizeof out->detail, false, "b=%d i=%d: %s", b, i, why);
        /* the accepted rows are what the sparse stage's reference reads */
        memcpy(s->sel + token * K, got, (size_t)K * sizeof(int32_t));
    }
    return 0;
}

/* ---- the sparse stage ------------------------------------------------------------------------ */

int dec_prepare_sparse(void *state, char *why, size_t len) {
    dec_state *s = of(state);
    /* what the sparse kernel will read: the selection on the device, validated (it addresses
     * pages through it) */
    if (read_selection(s))
        return 1;
    char bad[160];
    for (int64_t t = 0; t < (int64_t)s->B * s->Lq; ++t) {
        const int b = (int)(t / s->Lq), i = (int)(t % s->Lq);
        if (ds_check_selection_row(s->seen_sel + t * s->k_eff, s->k_eff, visible(s, b, i), bad,
                                   sizeof bad))
            return attn_reason(why, len, ATTN_EXIT_USAGE, "sparse input: token (b=%d, i=%d) %s", b,
                               i, bad);
    }
    return dec_reference(s, s->sel, s->k, s->v, &s->sref);
}

int dec_check_sparse(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    return dec_compare(s, &s->sref, s->amplitude, out);
}
