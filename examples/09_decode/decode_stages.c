/* decode_stages.c — example 09's stages on the one driver (attn/example.h): its flags, its inputs
 * (a batch of caches, contiguous and paged, with the pages of each sequence out of order in the
 * pool), and what each stage is checked against. The kernels are in decode.cu, the reference in
 * decode_reference.c, the block table's checks and the split rules in decode_host.c.
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
#include "decode.h"

static dec_state *of(void *state) { return (dec_state *)state; }

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

static int64_t rows_of(const dec_state *s) { return (int64_t)s->B * s->Lq * s->H; }

/* Is output row n = (b * Lq + i) * H + h among the checked ones? */
static bool row_checked(const dec_state *s, int64_t n) { return n % s->stride == 0; }

/* Is new token (b, i) checked: one of its H rows is. */
static bool token_checked(const dec_state *s, int64_t token) {
    const int64_t first = token * s->H, next = (first + s->stride - 1) / s->stride * s->stride;
    return next < first + s->H;
}

/* Keys new token i of sequence b sees. */
static int visible(const dec_state *s, int b, int i) {
    const int L = s->lens[b];
    const int n = L - s->Lq + i + 1;
    return L == 0 || n < 0 ? 0 : n > L ? L : n;
}

/* ---- step 1: the flags ----------------------------------------------------------------------- */

/* --cache-lens: a comma-separated list of lengths >= 0 (at most 2^27 each). */
static int parse_lens(dec_state *s, const char *list, char *why, size_t len) {
    int count = 1;
    for (const char *c = list; *c; ++c)
        count += *c == ',';
    s->lens = (int *)xmalloc((size_t)count * sizeof(int));
    if (s->lens == NULL) {
        snprintf(why, len, "--cache-lens: out of host memory for %d lengths", count);
        return ATTN_EXIT_USAGE;
    }
    const char *item = list;
    for (int b = 0; b < count; ++b) {
        const size_t n = strcspn(item, ",");
        char text[16];
        long long v = -1;
        if (n > 0 && n < sizeof text && strspn(item, "0123456789") >= n) {
            memcpy(text, item, n);
            text[n] = '\0';
            v = atoll(text);
        }
        if (v < 0 || v > (1 << 27)) {
            snprintf(why, len,
                     "--cache-lens must list lengths from 0 to %d separated by commas (entry %d "
                     "is '%.*s')",
                     1 << 27, b + 1, (int)n, item);
            return ATTN_EXIT_USAGE;
        }
        s->lens[b] = (int)v;
        item += n + (item[n] == ',');
    }
    s->B = count;
    return 0;
}

/* The lengths, the grouping, the pool and its block table, k, the split rule: every refusal
 * before the device is touched. */
int dec_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                attn_problem *p, char *why, size_t len) {
    dec_state *s = of(state);
    s->opt = *(const dec_options *)opts;
    if (cli->pattern != NULL) {
        snprintf(why, len,
                 "--pattern: example 09 has no pattern (its sparse stage selects tokens "
                 "with the indexer: --topk)");
        return ATTN_EXIT_USAGE;
    }
    if (cli->cu_seqlens_q != NULL) {
        snprintf(why, len,
                 "--seqlens: example 09's cache lengths are --cache-lens L1,L2,... (and "
                 "its new tokens per sequence --queries N)");
        return ATTN_EXIT_USAGE;
    }
    if (cli->Lq != cli->Lk) {
        snprintf(why, len,
                 "--lq/--lk: example 09's cache length is -L and its new tokens per "
                 "sequence --queries N (1 to %d)",
                 DEC_MAX_QUERIES);
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.cache_lens != NULL) {
        if (cli->Lk != 0) {
            snprintf(why, len,
                     "-L cannot be combined with --cache-lens (the lengths come from "
                     "the list)");
            return ATTN_EXIT_USAGE;
        }
        if (parse_lens(s, s->opt.cache_lens, why, len) != 0)
            return ATTN_EXIT_USAGE;
        if (cli->B != 0 && cli->B != s->B) {
            snprintf(why, len, "-B %d contradicts --cache-lens, which lists %d sequences", cli->B,
                     s->B);
            return ATTN_EXIT_USAGE;
        }
    } else {
        if (p->Lk > 1 << 27) { /* the limit --cache-lens has for each length */
            snprintf(why, len, "-L %d: a cache length is at most %d", p->Lk, 1 << 27);
            return ATTN_EXIT_USAGE;
        }
        s->B = p->B;
        s->lens = (int *)xmalloc((size_t)s->B * sizeof(int));
        if (s->lens == NULL) {
            snprintf(why, len, "out of host memory for %d sequences", s->B);
            return ATTN_EXIT_USAGE;
        }
        for (int b = 0; b < s->B; ++b)
            s->lens[b] = p->Lk;
    }
    s->latent = s->opt.latent != 0;
    if (s->latent) {
        /* MLA's shape unless given: 576-wide rows; 16 heads on the simulator (DeepSeek-V3's 128
         * over 8-way tensor parallelism), its 128 on a GPU; bf16; the softmax scale of the
         * unabsorbed head, 1/sqrt(128 + 64) (README.md, "10. latent") */
        p->D = cli->D != 0 ? cli->D : DEC_LATENT_DK;
        p->H = cli->H != 0 ? cli->H : attn_on_simulator() ? 16 : 128;
        p->dtype = cli->dtype_set ? cli->dtype : ATTN_BF16;
        p->scale = cli->scale != 0.0f ? cli->scale : 1.0f / sqrtf(192.0f);
    }
    s->H = p->H, s->D = p->D, s->Lq = s->opt.queries;
    s->Dv = s->latent ? DEC_LATENT_DV : s->D;
    /* --kv-heads 0: the example's default grouping with its default heads, else none */
    const int def_kv = attn_on_simulator() ? 3 : 8;
    s->H_kv = s->opt.kv_heads > 0 ? s->opt.kv_heads : cli->H == 0 ? def_kv : s->H;
    if (s->latent) {
        s->H_kv = s->opt.kv_heads > 0 ? s->opt.kv_heads : 1;
        const char *bad = dec_latent_unsupported(s->H_kv, s->D, p->dtype);
        if (bad != NULL) {
            snprintf(why, len, "%s (got --kv-heads %d, D=%d, %s)", bad, s->H_kv, s->D,
                     attn_dtype_name(p->dtype));
            return ATTN_EXIT_USAGE;
        }
    }
    if (s->H % s->H_kv != 0) {
        snprintf(why, len,
                 "-H %d is not a multiple of --kv-heads %d: every key/value head serves the "
                 "same number of query heads",
                 s->H, s->H_kv);
        return ATTN_EXIT_USAGE;
    }
    const char *bad = dec_unsupported(s->H, s->H_kv, s->latent ? 64 : s->D, s->Lq,
                                      s->opt.index_heads, s->opt.index_dim); /* latent D: above */
    if (bad != NULL) {
        snprintf(why, len, "%s (got D=%d)", bad, s->D);
        return ATTN_EXIT_USAGE;
    }
    s->L_cap = 0;
    int64_t total = 0;
    for (int b = 0; b < s->B; ++b) {
        s->L_cap = s->lens[b] > s->L_cap ? s->lens[b] : s->L_cap;
        total += s->lens[b];
        if (s->lens[b] > 0 && s->lens[b] < s->Lq) {
            snprintf(why, len,
                     "sequence %d: a cache of %d tokens cannot hold its %d new tokens "
                     "(--queries)",
                     b, s->lens[b], s->Lq);
            return ATTN_EXIT_USAGE;
        }
    }
    if (s->L_cap == 0 || total > INT_MAX) { /* named by the flag that gave the lengths */
        snprintf(why, len, "%s: %s", s->opt.cache_lens != NULL ? "--cache-lens" : "-B x -L",
                 s->L_cap == 0 ? "every sequence is empty"
                               : "the caches add up to more than 2^31 tokens");
        return ATTN_EXIT_USAGE;
    }
    /* the paged cache: the pool, then each sequence's pages in the pool's shuffled order */
    s->P = s->opt.page_size;
    s->W = s->opt.table_pages > 0 ? s->opt.table_pages : dec_pages_for(s->L_cap, s->P);
    int64_t used = 0;
    for (int b = 0; b < s->B; ++b)
        used += dec_pages_for(s->lens[b], s->P);
    if (used + s->opt.spare_pages > INT_MAX || (int64_t)s->B * s->W > INT_MAX) {
        snprintf(why, len, "the pool or the block table would hold more than 2^31 entries");
        return ATTN_EXIT_USAGE;
    }
    s->num_pages = (int)used + s->opt.spare_pages;
    s->table = (int *)xmalloc((size_t)s->B * s->W * sizeof(int));
    int *perm = (int *)xmalloc((size_t)s->num_pages * sizeof(int));
    if (s->table == NULL || perm == NULL) {
        free(perm);
        snprintf(why, len, "out of host memory for a pool of %d pages", s->num_pages);
        return ATTN_EXIT_USAGE;
    }
    dec_shuffle(perm, s->num_pages, cli->seed ^ 0x5EEDull);
    int next = 0;
    for (int b = 0; b < s->B; ++b)
        for (int x = 0; x < s->W; ++x)
            s->table[(size_t)b * s->W + x] =
                x < dec_pages_for(s->lens[b], s->P) ? perm[next++] : -1;
    free(perm);
    if (s->opt.corrupt_table != NULL) {
        const char *t = s->opt.corrupt_table;
        int v = 0;
        if (attn_cli_parse_int("--corrupt-table", t[0] == '-' ? t + 1 : t, 0, &v, why, len) != 0) {
            snprintf(why, len, "--corrupt-table must be an integer (got '%s')", t);
            return ATTN_EXIT_USAGE;
        }
        s->table[0] = t[0] == '-' ? -v : v;
    }
    if (dec_check_block_table(s->table, s->B, s->W, s->lens, s->P, s->num_pages, why, len) != 0)
        return ATTN_EXIT_USAGE;
    /* DSA: k, the width of the selection */
    if (s->opt.topk > s->L_cap) {
        snprintf(why, len,
                 "--topk %d is larger than the longest cache (%d tokens): nothing to select",
                 s->opt.topk, s->L_cap);
        return ATTN_EXIT_USAGE;
    }
    const int auto_k = attn_on_simulator() ? 64 : 2048; /* DeepSeek's k on a GPU */
    s->k_eff = s->opt.topk > 0 ? s->opt.topk : s->L_cap < auto_k ? s->L_cap : auto_k;
    /* --splits */
    const char *sp = s->opt.splits;
    if (strcmp(sp, "auto") == 0)
        s->splits_mode = 0;
    else if (strcmp(sp, "fa") == 0)
        s->splits_mode = 1;
    else {
        s->splits_mode = 2;
        if (attn_cli_parse_int("--splits", sp, 1, &s->splits_fixed, why, len) != 0 ||
            s->splits_fixed > DEC_MAX_SPLITS) {
            snprintf(why, len,
                     "--splits must be auto, fa or a number of splits from 1 to %d "
                     "(got '%s')",
                     DEC_MAX_SPLITS, sp);
            return ATTN_EXIT_USAGE;
        }
    }
    /* the problem the driver and the checkers see: the varlen layout of decode.h */
    s->cu_q = (int *)xmalloc((size_t)(s->B + 1) * sizeof(int));
    s->cu_k = (int *)xmalloc((size_t)(s->B + 1) * sizeof(int));
    if (s->cu_q == NULL || s->cu_k == NULL) {
        snprintf(why, len, "out of host memory");
        return ATTN_EXIT_USAGE;
    }
    s->cu_q[0] = s->cu_k[0] = 0;
    s->tokens = 0;
    for (int b = 0; b < s->B; ++b) {
        s->cu_q[b + 1] = s->cu_q[b] + s->Lq;
        s->cu_k[b + 1] = s->cu_k[b] + s->lens[b];
        s->tokens += s->lens[b] > 0 ? s->Lq : 0;
    }
    p->B = s->B;
    p->Lq = s->Lq;
    p->Lk = s->L_cap;
    p->causal = true;
    p->cu_seqlens_q = s->cu_q;
    p->cu_seqlens_k = s->cu_k;
    s->p = *p;
    (void)ex;
    return 0;
}

attn_verdict dec_verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                         size_t len) {
    const bool latent_kernel = strcmp(k->name, "latent") == 0;
    if (of(state)->latent && !latent_kernel && k->stage != DEC_STAGE_APPEND) {
        snprintf(why, len, "not a latent kernel (--latent runs append and latent)");
        return ATTN_KERNEL_CANNOT;
    }
    if (!of(state)->latent && latent_kernel) {
        snprintf(why, len, "latent reads MLA's 576-wide latent cache: --latent");
        return ATTN_KERNEL_CANNOT;
    }
    if (of(state)->latent && !latent_kernel) /* append: the latent row, any width (16 bytes) */
        return ATTN_KERNEL_RUNS;
    if (strcmp(k->name, "topk_bitonic") == 0 && of(state)->L_cap > DS_BITONIC_MAX_KEYS) {
        snprintf(why, len,
                 "topk_bitonic sorts a whole cache in shared memory: at most %d tokens "
                 "(the longest is %d)",
                 DS_BITONIC_MAX_KEYS, of(state)->L_cap);
        return ATTN_KERNEL_CANNOT;
    }
    return attn_kernel_verdict(k, p, why, len);
}

/* The split count of each version (--splits): the rule's input is its blocks per split. */
static int sm_count(void) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || n < 1)
        n = 132;
    return n;
}

static int splits_for(const dec_state *s, int blocks, int keys) {
    if (s->splits_mode == 2)
        return s->splits_fixed;
    return s->splits_mode == 1 ? dec_splits_flash(sm_count(), blocks, keys, s->D)
                               : dec_splits_ours(sm_count(), blocks, keys);
}

static void choose_splits(dec_state *s) {
    const int tiles_g = (s->H / s->H_kv + DEC_ROWS - 1) / DEC_ROWS;
    s->run.splits_split_kv = splits_for(s, s->B * s->H, s->L_cap);
    s->run.splits_tiled = splits_for(s, dec_blocks_per_split(s->B, s->H, s->H_kv, s->Lq), s->L_cap);
    s->run.splits_sparse = splits_for(s, s->B * s->Lq * s->H_kv * tiles_g, s->k_eff);
}

void dec_banner(void *state, const attn_problem *p) {
    dec_state *s = of(state);
    choose_splits(s);
    int empty = 0, used = 0;
    for (int b = 0; b < s->B; ++b) {
        empty += s->lens[b] == 0;
        used += dec_pages_for(s->lens[b], s->P);
    }
    printf("decode step: %d sequence%s (%d empty), cache up to %d tokens, %d new token%s each; "
           "%d query heads over %d key/value head%s (g = %d)\n",
           s->B, s->B > 1 ? "s" : "", empty, s->L_cap, s->Lq, s->Lq > 1 ? "s" : "", s->H, s->H_kv,
           s->H_kv > 1 ? "s" : "", s->H / s->H_kv);
    printf("paged cache: pages of %d tokens, %d of a pool of %d in use (handed out in shuffled "
           "order), block table %d x %d\n",
           s->P, used, s->num_pages, s->B, s->W);
    if (s->latent) /* the problem line's GFLOP is 4 D per (row, key); here V is D_v wide */
        printf("latent (MLA, FlashMLA's layout): q and K %d wide (%d latent + %d RoPE), V = the "
               "first %d of each K row, no V pool; scale %g; attention %.3g GFLOP (2 (D + D_v) "
               "per row and key)\n",
               s->D, s->Dv, s->D - s->Dv, s->Dv, (double)s->p.scale,
               2.0 * (s->D + s->Dv) * attn_problem_entries(p) * 1e-9);
    printf("split-KV (%s): split_kv %d, gqa/paged/latent %d, sparse %d splits; DSA: k = %d, "
           "indexer %d heads x %d\n",
           s->splits_mode == 0   ? "our rule"
           : s->splits_mode == 1 ? "FlashAttention-2's rule"
                                 : "--splits",
           s->run.splits_split_kv, s->run.splits_tiled, s->run.splits_sparse, s->k_eff,
           s->opt.index_heads, s->opt.index_dim);
}

/* ---- step 3: inputs -------------------------------------------------------------------------- */

/* The packed bytes of count fp32 values in the dtype, into dst. */
static void pack(const dec_state *s, unsigned char *dst, const float *src, size_t count) {
    attn_pack(dst, src, count, s->p.dtype);
}

/* The pools as a right append leaves them: every token of every sequence in its slot, NaN
 * elsewhere; width: elements per token (H_kv * D, or D_I). */
static void fill_pool(const dec_state *s, unsigned char *pool, const float *rows, int width) {
    const size_t row = (size_t)width * s->dsize;
    memset(pool, 0xFF, (size_t)s->num_pages * s->P * row);
    for (int b = 0; b < s->B; ++b)
        for (int t = 0; t < s->lens[b]; ++t) {
            const int64_t slot = (int64_t)s->table[(size_t)b * s->W + t / s->P] * s->P + t % s->P;
            pack(s, pool + slot * row, rows + ((int64_t)s->cu_k[b] + t) * width, (size_t)width);
        }
}

/* The same pool before the append: the new tokens' slots NaN. */
static void clear_new_slots(const dec_state *s, unsigned char *pool, int width) {
    const size_t row = (size_t)width * s->dsize;
    for (int b = 0; b < s->B; ++b)
        for (int t = s->lens[b] - s->Lq; s->lens[b] > 0 && t < s->lens[b]; ++t) {
            const int64_t slot = (int64_t)s->table[(size_t)b * s->W + t / s->P] * s->P + t % s->P;
            memset(pool + slot * row, 0xFF, row);
        }
}

/* The new tokens' rows, [B, Lq, width] (zeros for an empty sequence, whose are not read). */
static void fill_new(const dec_state *s, unsigned char *dst, const float *rows, int width) {
    const size_t row = (size_t)width * s->dsize;
    memset(dst, 0, (size_t)s->B * s->Lq * row);
    for (int b = 0; b < s->B; ++b)
        for (int i = 0; s->lens[b] > 0 && i < s->Lq; ++i)
            pack(s, dst + ((size_t)b * s->Lq + i) * row,
                 rows + ((int64_t)s->cu_k[b] + s->lens[b] - s->Lq + i) * width, (size_t)width);
}

static int upload(void **dst, const void *src, size_t bytes) {
    *dst = attn_device_alloc(bytes ? bytes : 16);
    return *dst == NULL || (bytes > 0 && attn_to_device(*dst, src, bytes));
}

static int make_inputs(dec_state *s) {
    const int D = s->D, HI = s->opt.index_heads, DI = s->opt.index_dim, HkD = s->H_kv * D;
    const size_t total_k = (size_t)s->cu_k[s->B], rows = (size_t)rows_of(s);
    const size_t tok = (size_t)s->B * s->Lq;
    const bool lat = s->latent; /* one latent pool: no V, no contiguous cache, no index keys */
    s->q = xmalloc(rows * D * sizeof(float));
    s->k = xmalloc(total_k * HkD * sizeof(float));
    s->v = xmalloc(lat ? 0 : total_k * HkD * sizeof(float));
    s->qi = xmalloc(tok * HI * DI * sizeof(float));
    s->ki = xmalloc(total_k * DI * sizeof(float));
    s->w = xmalloc(tok * HI * sizeof(float));
    s->pool_bytes = (size_t)s->num_pages * s->P * HkD * s->dsize;
    s->pool_v_bytes = lat ? 0 : s->pool_bytes;
    s->pool_ki_bytes = lat ? 0 : (size_t)s->num_pages * s->P * DI * s->dsize;
    s->cache_bytes = lat ? 0 : (size_t)s->B * s->H_kv * s->L_cap * D * s->dsize;
    s->kp0 = xmalloc(s->pool_bytes), s->vp0 = xmalloc(s->pool_v_bytes);
    s->kp1 = xmalloc(s->pool_bytes), s->vp1 = xmalloc(s->pool_v_bytes);
    s->kip0 = xmalloc(s->pool_ki_bytes), s->kip1 = xmalloc(s->pool_ki_bytes);
    s->seen = xmalloc(s->pool_bytes > s->pool_ki_bytes ? s->pool_bytes : s->pool_ki_bytes);
    s->kc = xmalloc(s->cache_bytes), s->vc = xmalloc(s->cache_bytes);
    s->knew = xmalloc(tok * HkD * s->dsize), s->vnew = xmalloc(lat ? 0 : tok * HkD * s->dsize);
    s->kinew = xmalloc(tok * DI * s->dsize);
    s->qb = xmalloc(rows * D * s->dsize), s->qib = xmalloc(tok * HI * DI * s->dsize);
    if (!s->q || !s->k || !s->v || !s->qi || !s->ki || !s->w || !s->kp0 || !s->vp0 || !s->kp1 ||
        !s->vp1 || !s->kip0 || !s->kip1 || !s->seen || !s->kc || !s->vc || !s->knew || !s->vnew ||
        !s->kinew || !s->qb || !s->qib)
        return 1;
    /* streams 0-2: Q, K, V (as the harness: --amplitude, --inputs); 3-5: q_I, k_I, w (as
     * example 05). The latent pool is K and V at once: opposed signs make it non-positive. */
    attn_fill_uniform(s->q, rows * D, s->seed, 0, s->amplitude, s->p.dtype);
    attn_fill_uniform(s->k, total_k * HkD, s->seed, 1, s->amplitude, s->p.dtype);
    if (!lat)
        attn_fill_uniform(s->v, total_k * HkD, s->seed, 2, s->amplitude, s->p.dtype);
    attn_inputs_apply(s->inputs, s->q, rows * D, s->k, total_k * HkD, s->v,
                      lat ? 0 : total_k * HkD);
    attn_fill_uniform(s->qi, tok * HI * DI, s->seed, 3, 1.0f, s->p.dtype);
    attn_fill_uniform(s->ki, total_k * DI, s->seed, 4, 1.0f, s->p.dtype);
    attn_fill_uniform(s->w, tok * HI, s->seed, 5, 1.0f / sqrtf((float)HI * DI), ATTN_F32);
    fill_pool(s, s->kp1, s->k, HkD);
    memcpy(s->kp0, s->kp1, s->pool_bytes);
    clear_new_slots(s, s->kp0, HkD);
    fill_new(s, s->knew, s->k, HkD);
    pack(s, s->qb, s->q, rows * D);
    pack(s, s->qib, s->qi, tok * HI * DI);
    if (lat)
        return 0;
    fill_pool(s, s->vp1, s->v, HkD);
    fill_pool(s, s->kip1, s->ki, DI);
    memcpy(s->vp0, s->vp1, s->pool_bytes);
    memcpy(s->kip0, s->kip1, s->pool_ki_bytes);
    clear_new_slots(s, s->vp0, HkD);
    clear_new_slots(s, s->kip0, DI);
    /* the contiguous cache [B, H_kv, L_cap, D], NaN past each sequence's tokens */
    memset(s->kc, 0xFF, s->cache_bytes);
    memset(s->vc, 0xFF, s->cache_bytes);
    for (int b = 0; b < s->B; ++b)
        for (int hk = 0; hk < s->H_kv; ++hk)
            for (int t = 0; t < s->lens[b]; ++t) {
                const size_t dst = (((size_t)b * s->H_kv + hk) * s->L_cap + t) * D * s->dsize;
                const size_t src = (((size_t)s->cu_k[b] + t) * s->H_kv + hk) * D;
                pack(s, s->kc + dst, s->k + src, (size_t)D);
                pack(s, s->vc + dst, s->v + src, (size_t)D);
            }
    fill_new(s, s->vnew, s->v, HkD);
    fill_new(s, s->kinew, s->ki, DI);
    return 0;
}

static int make_device(dec_state *s) {
    const size_t rows = (size_t)rows_of(s), tok = (size_t)s->B * s->Lq;
    const int HkD = s->H_kv * s->D, HI = s->opt.index_heads, DI = s->opt.index_dim;
    if (upload(&s->d_q, s->qb, rows * s->D * s->dsize) || upload(&s->d_kc, s->kc, s->cache_bytes) ||
        upload(&s->d_vc, s->vc, s->cache_bytes) || upload(&s->d_kp, s->kp0, s->pool_bytes) ||
        upload(&s->d_vp, s->vp0, s->pool_v_bytes) || upload(&s->d_kip, s->kip0, s->pool_ki_bytes) ||
        upload(&s->d_knew, s->knew, tok * HkD * s->dsize) ||
        upload(&s->d_vnew, s->vnew, s->latent ? 0 : tok * HkD * s->dsize) ||
        upload(&s->d_kinew, s->kinew, tok * DI * s->dsize) ||
        upload(&s->d_qi, s->qib, tok * HI * DI * s->dsize) ||
        upload((void **)&s->d_w, s->w, tok * HI * sizeof(float)) ||
        upload((void **)&s->d_table, s->table, (size_t)s->B * s->W * sizeof(int)) ||
        upload((void **)&s->d_lens, s->lens, (size_t)s->B * sizeof(int)) ||
        upload((void **)&s->d_cu_q, s->cu_q, (size_t)(s->B + 1) * sizeof(int)) ||
        upload((void **)&s->d_cu_k, s->cu_k, (size_t)(s->B + 1) * sizeof(int)))
        return 1;
    s->d_o = attn_device_alloc(rows * s->Dv * s->dsize + 16);
    s->d_lse = (float *)attn_device_alloc(rows * sizeof(float) + 16);
    s->d_logits = (float *)attn_device_alloc(tok * s->L_cap * sizeof(float) + 16);
    s->d_sel = (int32_t *)attn_device_alloc(tok * s->k_eff * sizeof(int32_t) + 16);
    dec_args *a = &s->run.args;
    memset(a, 0, sizeof *a);
    a->B = s->B, a->H = s->H, a->H_kv = s->H_kv, a->Lq = s->Lq, a->D = s->D, a->L_cap = s->L_cap;
    a->latent = s->latent;
    a->dtype = s->p.dtype;
    a->scale = s->p.scale;
    int most = s->run.splits_split_kv;
    most = s->run.splits_tiled > most ? s->run.splits_tiled : most;
    most = s->run.splits_sparse > most ? s->run.splits_sparse : most;
    s->d_part = (float *)attn_device_alloc(dec_workspace_bytes(a, most) + 16);
    if (!s->d_o || !s->d_lse || !s->d_logits || !s->d_sel || !s->d_part)
        return 1;
    a->seqlens = s->d_lens;
    a->q = s->d_q, a->o = s->d_o, a->lse = s->d_lse;
    a->k_cache = s->d_kc, a->v_cache = s->d_vc;
    a->k_pages = s->d_kp, a->v_pages = s->d_vp, a->ki_pages = s->d_kip;
    a->block_table = s->d_table;
    a->table_width = s->W, a->page_size = s->P, a->num_pages = s->num_pages;
    a->k_new = s->d_knew, a->v_new = s->d_vnew, a->ki_new = s->d_kinew;
    if (s->latent) /* the latent pool alone: nothing else is read or written */
        a->v_pages = NULL, a->ki_pages = NULL, a->v_new = NULL, a->ki_new = NULL;
    a->q_index = s->d_qi, a->w = s->d_w;
    a->index_heads = HI, a->index_dim = DI;
    a->logits = s->d_logits, a->sel = s->d_sel, a->topk = s->k_eff;
    a->cu_q = s->d_cu_q, a->cu_k = s->d_cu_k;
    a->part = s->d_part;
    a->splits = 1;
    return 0;
}

int dec_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
              attn_buffers *b, int *chunks) {
    dec_state *s = of(state);
    s->p = *p;
    s->amplitude = cli->amplitude;
    s->inputs = cli->inputs;
    s->seed = cli->seed;
    s->dsize = attn_dtype_size(p->dtype);
    s->stride = check_rows > 0 ? (rows_of(s) + check_rows - 1) / check_rows : 1;
    s->paged_same = -1;
    choose_splits(s);
    const size_t rows = (size_t)rows_of(s), tok = (size_t)s->B * s->Lq;
    s->out = xmalloc(rows * s->Dv * sizeof(float));
    s->lse = xmalloc(rows * sizeof(float));
    s->logits = xmalloc(tok * s->L_cap * sizeof(float));
    s->sel = xmalloc(tok * s->k_eff * sizeof(int32_t));
    s->seen_sel = xmalloc(tok * s->k_eff * sizeof(int32_t));
    s->staging = xmalloc(rows * s->Dv * s->dsize + 16);
    if (!s->out || !s->lse || !s->logits || !s->sel || !s->seen_sel || !s->staging ||
        make_inputs(s) != 0) {
        fprintf(stderr, "error: out of host memory for example 09's inputs and references\n");
        return 1;
    }
    memset(s->sel, 0xFF, tok * s->k_eff * sizeof(int32_t)); /* -1 until a top-k check accepts */
    if (make_device(s) != 0)
        return 1;
    b->args = &s->run;
    *chunks = 1;
    return 0;
}

/* What make_inputs and dec_setup allocate on the host, for the driver's check before any of it
 * is: the inputs in fp32 and packed, the pools before and after the append and one read back, the
 * contiguous cache, the new tokens, the dense and sparse references (O, LSE, the same-precision
 * O), what is read back, gqa's copy; on the simulator, whose device memory is host memory, the
 * device's copies too (but the split partials, whose count the device decides). Latent: no V, no
 * contiguous cache, no index-key pools. */
double dec_host_bytes(void *state, const attn_problem *p) {
    const dec_state *s = of(state);
    const double dz = (double)attn_dtype_size(p->dtype), f = sizeof(float), lat = s->latent;
    const double total_k = s->cu_k[s->B], rows = (double)s->B * s->Lq * s->H;
    const double tok = (double)s->B * s->Lq, HkD = (double)s->H_kv * s->D, Dv = s->Dv;
    const double QI = tok * s->opt.index_heads * s->opt.index_dim, DI = s->opt.index_dim;
    const double slots = (double)s->num_pages * s->P;
    const double inputs = rows * s->D * (f + dz) + total_k * HkD * f * (2 - lat) + QI * (f + dz) +
                          total_k * DI * f + tok * s->opt.index_heads * f;
    const double pools = slots * HkD * dz * (5 - 2 * lat) + (1 - lat) * slots * DI * dz * 2;
    const double contiguous = (1 - lat) * 2.0 * s->B * s->H_kv * (double)s->L_cap * s->D * dz;
    const double fresh = tok * (HkD * (2 - lat) + DI) * dz;
    const double outputs = rows * Dv * (f + 2 * dz) + rows * f * 2 + tok * s->L_cap * f +
                           tok * s->k_eff * 8.0 + 2 * rows * (2 * Dv + 1) * f;
    const double device = slots * (HkD * (2 - lat) + (1 - lat) * DI) * dz + contiguous / 2 +
                          rows * (s->D + Dv) * dz + tok * s->L_cap * f;
    return inputs + pools + contiguous + fresh + outputs + (attn_on_simulator() ? device : 0.0);
}

/* ---- what each stage's kernels write, NaN-filled before they run ----------------------------- */

int dec_clear(void *state, const attn_kernel *k, int chunk) {
    (void)chunk;
    const dec_state *s = of(state);
    const size_t tokens = (size_t)s->B * s->Lq, rows = (size_t)rows_of(s);
    switch (k->stage) {
    case DEC_STAGE_APPEND: /* the pools as before the step: the new tokens' slots NaN */
        return attn_to_device(s->d_kp, s->kp0, s->pool_bytes) ||
               attn_to_device(s->d_vp, s->vp0, s->pool_v_bytes) ||
               attn_to_device(s->d_kip, s->kip0, s->pool_ki_bytes);
    case DEC_STAGE_INDEXER:
        return attn_device_fill_nan(s->d_logits, tokens * s->L_cap * sizeof(float));
    case DEC_STAGE_TOPK:
        return attn_device_fill_nan(s->d_sel, tokens * s->k_eff * sizeof(int32_t));
    default: /* attention, dense or sparse */
        return attn_device_fill_nan(s->d_o, rows * s->Dv * s->dsize) ||
               attn_device_fill_nan(s->d_lse, rows * sizeof(float));
    }
}

/* ---- the append stage ------------------------------------------------------------------------ */

/* The first slot where pool (read back from dev) differs from want, as "pool p page x slot y". */
static int compare_pool(dec_state *s, const char *name, const void *dev, const unsigned char *want,
                        size_t bytes, size_t row, attn_stage_check *out) {
    if (attn_to_host(s->seen, dev, bytes))
        return 1;
    for (size_t at = 0; at < bytes && out->pass; at += row)
        if (memcmp(s->seen + at, want + at, row) != 0) {
            const size_t slot = at / row;
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "%s pool: page %zu slot %zu differs from a right append", name,
                     slot / (size_t)s->P, slot % (size_t)s->P);
        }
    return 0;
}

int dec_check_append(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    const size_t row = (size_t)s->H_kv * s->D * s->dsize;
    out->rows = s->tokens;
    if (compare_pool(s, "K", s->d_kp, s->kp1, s->pool_bytes, row, out) ||
        compare_pool(s, "V", s->d_vp, s->vp1, s->pool_v_bytes, row, out) ||
        compare_pool(s, "index-key", s->d_kip, s->kip1, s->pool_ki_bytes,
                     (size_t)s->opt.index_dim * s->dsize, out))
        return 1;
    return 0;
}

/* ---- the attention stages -------------------------------------------------------------------- */

/* The reference of the checked rows (NaN elsewhere: the checkers skip those), over every key a
 * row sees (sel NULL) or over a selection. */
static int reference(dec_state *s, const int32_t *sel, float **ref, float **ref_lse, float **lowp) {
    const int64_t rows = rows_of(s);
    const int D = s->Dv; /* the output row's width */
    *ref = xmalloc((size_t)rows * D * sizeof(float));
    *ref_lse = xmalloc((size_t)rows * sizeof(float));
    *lowp = xmalloc((size_t)rows * D * sizeof(float));
    if (*ref == NULL || *ref_lse == NULL || *lowp == NULL) {
        fprintf(stderr, "error: out of host memory for the reference\n");
        return 1;
    }
    const dec_ref_inputs in = {s->B,
                               s->H,
                               s->H_kv,
                               s->Lq,
                               s->D,
                               s->p.scale,
                               s->p.dtype,
                               s->cu_k,
                               s->q,
                               s->k,
                               s->latent ? NULL : s->v,
                               sel,
                               s->k_eff,
                               s->Dv};
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(| : failed)
    for (int64_t n = 0; n < rows; ++n) {
        float *lse = *ref_lse + n % s->H * (rows / s->H) + n / s->H; /* [H, B * Lq] */
        if (row_checked(s, n))
            failed |= dec_reference_row(&in, n, *ref + n * D, lse, *lowp + n * D);
        else {
            attn_fill_nan_host(*ref + n * D, (size_t)D * sizeof(float));
            attn_fill_nan_host(*lowp + n * D, (size_t)D * sizeof(float));
            attn_fill_nan_host(lse, sizeof(float));
        }
    }
    if (failed)
        fprintf(stderr, "error: out of host memory in the reference\n");
    return failed;
}

/* Reads the kernel's O and LSE back and compares them with a reference. */
static int compare(dec_state *s, const float *ref, const float *ref_lse, const float *lowp,
                   attn_stage_check *out) {
    const size_t elems = (size_t)rows_of(s) * s->Dv;
    if (attn_to_host(s->staging, s->d_o, elems * s->dsize) ||
        attn_to_host(s->lse, s->d_lse, (size_t)rows_of(s) * sizeof(float)))
        return 1;
    attn_unpack(s->out, s->staging, elems, s->p.dtype);
    attn_problem po = s->p; /* O's rows are D_v wide (latent: 512 of the 576) */
    po.D = s->Dv;
    attn_stage_check_attention(&po, s->out, s->lse, ref, ref_lse, lowp, s->amplitude, out);
    return 0;
}

int dec_check_attention(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)chunk;
    dec_state *s = of(state);
    if (s->ref == NULL && reference(s, NULL, &s->ref, &s->ref_lse, &s->lowp) != 0)
        return 1;
    if (compare(s, s->ref, s->ref_lse, s->lowp, out) != 0)
        return 1;
    const size_t obytes = (size_t)rows_of(s) * s->Dv * s->dsize, lbytes = (size_t)rows_of(s) * 4;
    if (strcmp(k->name, "gqa") == 0) { /* kept for paged's bit-for-bit comparison */
        s->gqa_bits = s->gqa_bits ? s->gqa_bits : xmalloc(obytes);
        s->gqa_lse = s->gqa_lse ? s->gqa_lse : xmalloc(lbytes);
        if (s->gqa_bits == NULL || s->gqa_lse == NULL)
            return 1;
        memcpy(s->gqa_bits, s->staging, obytes);
        memcpy(s->gqa_lse, s->lse, lbytes);
    } else if (strcmp(k->name, "paged") == 0 && s->gqa_bits != NULL) {
        s->paged_same =
            memcmp(s->gqa_bits, s->staging, obytes) == 0 && memcmp(s->gqa_lse, s->lse, lbytes) == 0;
        if (!s->paged_same && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "its output is not bit-identical to gqa's on the contiguous cache (same "
                     "splits, same arithmetic)");
        }
    }
    return 0;
}

/* ---- the indexer and top-k stages ------------------------------------------------------------ */

int dec_check_indexer(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    const int64_t tokens = (int64_t)s->B * s->Lq;
    if (attn_to_host(s->logits, s->d_logits, (size_t)tokens * s->L_cap * sizeof(float)))
        return 1;
    double *want = xmalloc(((size_t)s->L_cap + 1) * sizeof(double));
    double *bound = xmalloc(((size_t)s->L_cap + 1) * sizeof(double));
    if (want == NULL || bound == NULL) {
        free(want), free(bound);
        fprintf(stderr, "error: out of host memory\n");
        return 1;
    }
    out->max_err = 0.0;
    for (int64_t token = 0; token < tokens; ++token) {
        const int b = (int)(token / s->Lq), i = (int)(token % s->Lq);
        if (!token_checked(s, token))
            continue;
        const int n = ds_index_scores_ref(&s->p, s->opt.index_heads, s->opt.index_dim, s->qi, s->ki,
                                          s->w, b, i, want, bound);
        const float *got = s->logits + token * s->L_cap;
        out->rows++;
        double tol; /* example 05's bound: fp32 rounding of the heads' sums */
        const int t = ds_check_index_scores(got, want, bound, n, &out->max_err, &tol);
        if (t >= 0 && out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail,
                     "b=%d i=%d token %d: %.9g, want %.9g (tolerance %.3g)", b, i, t,
                     (double)got[t], want[t], tol);
        }
    }
    free(want), free(bound);
    return 0;
}

/* The selection on the device, read back into seen_sel. */
static int read_selection(dec_state *s) {
    return attn_to_host(s->seen_sel, s->d_sel, (size_t)s->B * s->Lq * s->k_eff * sizeof(int32_t));
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
            out->pass) {
            out->pass = false;
            snprintf(out->detail, sizeof out->detail, "b=%d i=%d: %s", b, i, why);
        }
        /* the accepted rows are what the sparse stage's reference reads */
        memcpy(s->sel + token * K, got, (size_t)K * sizeof(int32_t));
    }
    return 0;
}

/* ---- the sparse stage ------------------------------------------------------------------------ */

int dec_prepare_sparse(void *state, char *why, size_t len) {
    dec_state *s = of(state);
    const int64_t tokens = (int64_t)s->B * s->Lq;
    const int K = s->k_eff;
    /* what the sparse kernel will read: the selection on the device, validated (it addresses
     * pages through it) */
    if (read_selection(s))
        return 1;
    for (int64_t token = 0; token < tokens; ++token) {
        const int b = (int)(token / s->Lq), i = (int)(token % s->Lq), n = visible(s, b, i);
        const int32_t *row = s->seen_sel + token * K;
        for (int x = 0; x < K; ++x)
            if (row[x] < -1 || row[x] >= n || (row[x] >= 0 && x > 0 && row[x] <= row[x - 1])) {
                snprintf(why, len,
                         "sparse input: token (b=%d, i=%d) slot %d holds %d, not -1 nor an "
                         "ascending position in [0, %d)",
                         b, i, x, row[x], n);
                return ATTN_EXIT_USAGE;
            }
    }
    return reference(s, s->sel, &s->sref, &s->sref_lse, &s->slowp);
}

int dec_check_sparse(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    return compare(s, s->sref, s->sref_lse, s->slowp, out);
}

/* ---- FLOPs, bytes, records, dump, the lines after the table ---------------------------------- */

/* Sum over the new tokens of what each sees, capped at cap (0: no cap). */
static double seen_keys(const dec_state *s, int cap) {
    double n = 0.0;
    for (int b = 0; b < s->B; ++b)
        for (int i = 0; i < s->Lq; ++i) {
            const int v = visible(s, b, i);
            n += cap > 0 && v > cap ? cap : v;
        }
    return n;
}

double dec_flops(void *state, const attn_kernel *k) {
    const dec_state *s = of(state);
    switch (k->stage) {
    case DEC_STAGE_ATTENTION: /* QK^T and PV: 2 D + 2 D_v flops per (row, key) */
        return 2.0 * seen_keys(s, 0) * s->H * (s->D + s->Dv);
    case DEC_STAGE_SPARSE:
        return 4.0 * seen_keys(s, s->k_eff) * s->H * s->D;
    case DEC_STAGE_INDEXER: /* H_I dot products of D_I per (token, key) */
        return 2.0 * seen_keys(s, 0) * s->opt.index_heads * s->opt.index_dim;
    default:
        return 0.0;
    }
}

/* README.md, "Bytes per decoded token": what each version must move, counted from its loops
 * (requests to global memory, as the simulator's profile counts them). */
double dec_model_bytes(void *state, const attn_kernel *k) {
    const dec_state *s = of(state);
    const double dz = (double)s->dsize, D = s->D, Dv = s->Dv, rows = (double)rows_of(s);
    const int g = s->H / s->H_kv, tiles = (s->Lq * g + DEC_ROWS - 1) / DEC_ROWS;
    const int tiles_g = (g + DEC_ROWS - 1) / DEC_ROWS, HI = s->opt.index_heads;
    const int DI = s->opt.index_dim;
    /* q read by every split's block, O written once, the LSE; split partials written and read */
    double qo = 0.0, kv = 0.0;
    int S = 1;
    if (strcmp(k->name, "naive") == 0 || strcmp(k->name, "split_kv") == 0) {
        S = strcmp(k->name, "naive") == 0 ? 1 : s->run.splits_split_kv;
        kv = seen_keys(s, 0) * s->H * 2.0 * D * dz; /* every query head reads K and V itself */
    } else if (strcmp(k->name, "gqa") == 0 || strcmp(k->name, "paged") == 0) {
        S = s->run.splits_tiled;
        /* paged: the block-table entries a warp's 32 keys fall in (lanes reading the same entry
         * make one request of it) */
        const double table =
            strcmp(k->name, "paged") == 0 ? 4.0 * ((32 + s->P - 1) / s->P) / 32.0 : 0.0;
        for (int b = 0; b < s->B; ++b) /* once per K/V head and row tile: the most a row sees */
            kv += (double)visible(s, b, s->Lq - 1) * s->H_kv * tiles * (2.0 * D * dz + table);
    } else if (strcmp(k->name, "latent") == 0) {
        S = s->run.splits_tiled;
        /* the latent row (D = 576) once per row tile for all its heads: K and V are one read;
         * one table entry per warp's keys as paged */
        const double table = 4.0 * ((32 + s->P - 1) / s->P) / 32.0;
        for (int b = 0; b < s->B; ++b)
            kv += (double)visible(s, b, s->Lq - 1) * tiles * (D * dz + table);
    } else if (strcmp(k->name, "sparse") == 0) {
        S = s->run.splits_sparse;
        kv = seen_keys(s, s->k_eff) * s->H_kv * tiles_g * (2.0 * D * dz + 4.0 + 4.0);
    } else if (strcmp(k->name, "append") == 0) { /* latent: the one latent row */
        const double row = s->latent ? s->H_kv * D : 2.0 * s->H_kv * D + DI;
        return s->tokens * (row * dz * 2.0 + 4.0);
    } else if (strcmp(k->name, "indexer") == 0) {
        return seen_keys(s, 0) * (DI * dz + 4.0 + 4.0) + s->tokens * HI * (DI * dz + 4.0);
    } else if (strcmp(k->name, "topk_radix") == 0 || strcmp(k->name, "topk_bitonic") == 0) {
        /* radix: the row read 3 times (the histogram and candidates pass, the output pass; the
         * later passes read the candidates in shared memory), bitonic once; k indices written;
         * each of the block's 8 warps reads its sequence's bounds (4 ints) */
        const double passes = strcmp(k->name, "topk_radix") == 0 ? 3.0 : 1.0;
        double bytes = 0.0;
        for (int b = 0; b < s->B; ++b)
            for (int i = 0; i < s->Lq; ++i) {
                const int n = visible(s, b, i);
                bytes += (n > s->k_eff ? passes * n * 4.0 : 0.0) + s->k_eff * 4.0 + 8 * 16.0;
            }
        return bytes;
    }
    qo = rows * (D * dz * S + Dv * dz + 4.0);
    const double part = S > 1 ? S * rows * (2.0 * Dv * 4.0 + 3.0 * 4.0) : 0.0;
    return kv + qo + part;
}

void dec_record_json(void *state, const attn_kernel *k, char *out, size_t len) {
    dec_state *s = of(state);
    const int splits = strcmp(k->name, "split_kv") == 0 ? s->run.splits_split_kv
                       : strcmp(k->name, "gqa") == 0 || strcmp(k->name, "paged") == 0 ||
                               strcmp(k->name, "latent") == 0
                           ? s->run.splits_tiled
                       : strcmp(k->name, "sparse") == 0 ? s->run.splits_sparse
                                                        : 1;
    snprintf(out, len,
             "\"kv_heads\":%d,\"queries\":%d,\"page_size\":%d,\"splits\":%d,\"topk\":%d,"
             "\"index_heads\":%d,\"index_dim\":%d,\"decoded_tokens\":%d,\"model_bytes\":%.0f,"
             "\"latent\":%s,\"d_v\":%d",
             s->H_kv, s->Lq, s->P, splits, s->k_eff, s->opt.index_heads, s->opt.index_dim,
             s->tokens, dec_model_bytes(state, k), s->latent ? "true" : "false", s->Dv);
}

/* --dump DIR: the inputs in the paged layout, the block table, the references and the selection
 * (attn tensor files, fp32), for decode.py's checks (tests/test_decode.py). */
int dec_dump(void *state, const char *dir) {
    const dec_state *s = of(state);
    const int64_t slots = (int64_t)s->num_pages * s->P, tokens = (int64_t)s->B * s->Lq;
    const size_t pool_elems = (size_t)slots * s->H_kv * s->D;
    const bool lat = s->latent; /* the latent pool alone (its V: the first D_v columns of K) */
    float *kp = xmalloc(pool_elems * sizeof(float));
    float *vp = lat ? NULL : xmalloc(pool_elems * sizeof(float));
    float *kip = lat ? NULL : xmalloc((size_t)slots * s->opt.index_dim * sizeof(float));
    float *table = xmalloc((size_t)s->B * s->W * sizeof(float));
    float *lens = xmalloc((size_t)s->B * sizeof(float));
    float *sel = xmalloc((size_t)tokens * s->k_eff * sizeof(float));
    int rc = !kp || (!lat && (!vp || !kip)) || !table || !lens || !sel;
    if (!rc) {
        attn_unpack(kp, s->kp1, pool_elems, s->p.dtype);
        if (!lat) {
            attn_unpack(vp, s->vp1, pool_elems, s->p.dtype);
            attn_unpack(kip, s->kip1, (size_t)slots * s->opt.index_dim, s->p.dtype);
        }
        for (int64_t x = 0; x < (int64_t)s->B * s->W; ++x)
            table[x] = (float)s->table[x];
        for (int b = 0; b < s->B; ++b)
            lens[b] = (float)s->lens[b];
        for (int64_t x = 0; x < tokens * s->k_eff; ++x)
            sel[x] = (float)s->sel[x];
    }
    const struct {
        const char *name;
        const float *data;
        int ndim;
        int64_t d0, d1, d2, d3;
    } t[] = {
        {"q", s->q, 4, s->B, s->Lq, s->H, s->D},
        {"k_pages", kp, 4, s->num_pages, s->P, s->H_kv, s->D},
        {"v_pages", vp, 4, s->num_pages, s->P, s->H_kv, s->D},
        {"block_table", table, 2, s->B, s->W, 0, 0},
        {"cache_seqlens", lens, 1, s->B, 0, 0, 0},
        {"o_ref", s->ref, 4, s->B, s->Lq, s->H, s->Dv},
        {"q_index", lat ? NULL : s->qi, 4, s->B, s->Lq, s->opt.index_heads, s->opt.index_dim},
        {"ki_pages", kip, 3, s->num_pages, s->P, s->opt.index_dim, 0},
        {"weights", lat ? NULL : s->w, 3, s->B, s->Lq, s->opt.index_heads, 0},
        {"sel", lat ? NULL : sel, 3, s->B, s->Lq, s->k_eff, 0},
        {"o_sparse_ref", s->sref, 4, s->B, s->Lq, s->H, s->D},
    };
    char path[1024] = "";
    for (size_t n = 0; rc == 0 && n < sizeof t / sizeof t[0]; ++n) {
        if (t[n].data == NULL) /* a stage that did not run */
            continue;
        const int64_t dims[4] = {t[n].d0, t[n].d1, t[n].d2, t[n].d3};
        snprintf(path, sizeof path, "%s/%s.bin", dir, t[n].name);
        rc = attn_tensor_save(path, t[n].data, t[n].ndim, dims);
    }
    if (rc)
        fprintf(stderr, "error: --dump: cannot write %s\n", path[0] ? path : dir);
    free(kp), free(vp), free(kip), free(table), free(lens), free(sel);
    return rc;
}

void dec_after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    (void)ex;
    dec_state *s = of(state);
    if (s->paged_same >= 0)
        printf("\npaged vs gqa (contiguous cache), %d split%s: %s\n", s->run.splits_tiled,
               s->run.splits_tiled > 1 ? "s" : "",
               s->paged_same ? "bit-identical (same arithmetic in the same order)"
                             : "NOT bit-identical");
    double paged = 0.0, sparse = 0.0;
    printf("\nbytes per decoded token (model, README.md \"Bytes per decoded token\"; %d new "
           "token%s in the step):\n",
           s->tokens, s->tokens > 1 ? "s" : "");
    for (int r = 0; r < n; ++r) {
        const attn_kernel *k = NULL;
        for (int x = 0; x < ex->num_kernels; ++x)
            if (strcmp(ex->kernels[x].name, recs[r].kernel) == 0)
                k = &ex->kernels[x];
        if (k == NULL || strcmp(recs[r].status, "SKIP") == 0)
            continue;
        printf("  %-13s %12.0f\n", k->name,
               dec_model_bytes(state, k) / (s->tokens ? s->tokens : 1));
        if (recs[r].timed && strcmp(k->name, "paged") == 0)
            paged = recs[r].time.median_ms;
        if (recs[r].timed && strcmp(k->name, "sparse") == 0)
            sparse = recs[r].time.median_ms;
    }
    if (paged > 0.0 && sparse > 0.0)
        printf("\nDSA sparse (k = %d) vs dense paged: %.2fx%s\n", s->k_eff, paged / sparse,
               attn_on_simulator() ? " (CPU simulator timings, not GPU performance)" : "");
}

void dec_release(void *state) {
    dec_state *s = of(state);
    void *host[] = {s->lens,     s->cu_q,    s->cu_k,   s->q,   s->k,       s->v,    s->qi,
                    s->ki,       s->w,       s->table,  s->kp0, s->vp0,     s->kip0, s->kp1,
                    s->vp1,      s->kip1,    s->kc,     s->vc,  s->knew,    s->vnew, s->kinew,
                    s->qb,       s->qib,     s->seen,   s->ref, s->ref_lse, s->lowp, s->sref,
                    s->sref_lse, s->slowp,   s->out,    s->lse, s->logits,  s->sel,  s->seen_sel,
                    s->gqa_bits, s->gqa_lse, s->staging};
    void *dev[] = {s->d_q,    s->d_o,     s->d_kc,    s->d_vc,   s->d_kp,   s->d_vp,  s->d_kip,
                   s->d_knew, s->d_vnew,  s->d_kinew, s->d_qi,   s->d_w,    s->d_lse, s->d_logits,
                   s->d_part, s->d_table, s->d_lens,  s->d_cu_q, s->d_cu_k, s->d_sel};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
}
