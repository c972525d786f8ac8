/* decode_prepare.c — example 09's flags turned into its problem (attn/example.h's prepare and
 * verdict hooks): the cache lengths, the grouping, the paged pool and its block table, k, the split
 * rule; every refusal is one line before the device is touched. The inputs and the checks are in
 * decode_stages.c, the counts and records in decode_report.c. */
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

/* ---- step 1: the flags ----------------------------------------------------------------------- */

/* A refusal of the flags, in a function reporting through (why, len): the one line into why,
 * returning the usage status (ATTN_EXIT_USAGE, 2). */
#define refuse(...) attn_reason(why, len, ATTN_EXIT_USAGE, __VA_ARGS__)

/* --cache-lens: a comma-separated list of lengths from 0 to 2^27 into s->lens and s->B. */
static int parse_lens(dec_state *s, const char *list, char *why, size_t len) {
    int n = 1;
    for (const char *c = list; *c; ++c)
        n += *c == ',';
    if ((s->lens = (int *)alloc_host(s, (size_t)n * sizeof(int))) == NULL)
        return refuse("--cache-lens: out of host memory for %d lengths", n);
    const char *item = list;
    for (int b = 0; b < n; ++b) {
        const size_t k = strcspn(item, ",");
        char text[16];
        snprintf(text, sizeof text, "%.*s", (int)(k < sizeof text ? k : 0), item);
        if (k >= sizeof text ||
            attn_cli_parse_int("--cache-lens", text, 0, &s->lens[b], why, len) ||
            s->lens[b] > (1 << 27))
            return refuse("--cache-lens must list lengths from 0 to %d separated by commas (entry "
                          "%d is '%.*s')",
                          1 << 27, b + 1, (int)k, item);
        item += k + (item[k] == ',');
    }
    s->B = n;
    return 0;
}

/* The flags example 09 does not take (its own name the lengths), then the cache lengths: from
 * --cache-lens or B x -L. */
static int prepare_lengths(dec_state *s, const attn_cli *cli, const attn_problem *p, char *why,
                           size_t len) {
    if (cli->pattern != NULL)
        return refuse("--pattern: example 09 has no pattern (its sparse stage selects tokens "
                      "with the indexer: --topk)");
    if (cli->cu_seqlens_q != NULL)
        return refuse("--seqlens: example 09's cache lengths are --cache-lens L1,L2,... (and "
                      "its new tokens per sequence --queries N)");
    if (cli->Lq != cli->Lk)
        return refuse("--lq/--lk: example 09's cache length is -L and its new tokens per "
                      "sequence --queries N (1 to %d)",
                      DEC_MAX_QUERIES);
    if (s->opt.cache_lens != NULL) {
        if (cli->Lk != 0)
            return refuse("-L cannot be combined with --cache-lens (the lengths come from "
                          "the list)");
        if (parse_lens(s, s->opt.cache_lens, why, len) != 0)
            return ATTN_EXIT_USAGE;
        if (cli->B != 0 && cli->B != s->B)
            return refuse("-B %d contradicts --cache-lens, which lists %d sequences", cli->B, s->B);
        return 0;
    }
    if (p->Lk > 1 << 27) /* the limit --cache-lens has for each length */
        return refuse("-L %d: a cache length is at most %d", p->Lk, 1 << 27);
    s->B = p->B;
    if ((s->lens = (int *)alloc_host(s, (size_t)s->B * sizeof(int))) == NULL)
        return refuse("out of host memory for %d sequences", s->B);
    for (int b = 0; b < s->B; ++b)
        s->lens[b] = p->Lk;
    return 0;
}

/* The heads and widths: MLA's latent shape (--latent), the key/value heads serving the query
 * heads, what the kernels support; then every sequence's cache must hold its new tokens. */
static int prepare_shape(dec_state *s, const attn_cli *cli, attn_problem *p, char *why,
                         size_t len) {
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
    /* --kv-heads 0: the example's default grouping with its default heads (latent: MLA's one
     * latent row), else none */
    const int def_kv = s->latent ? 1 : attn_on_simulator() ? 3 : 8;
    s->H_kv = s->opt.kv_heads > 0 ? s->opt.kv_heads : cli->H == 0 || s->latent ? def_kv : s->H;
    const char *bad = s->latent ? dec_latent_unsupported(s->H_kv, s->D, p->dtype) : NULL;
    if (bad != NULL)
        return refuse("%s (got --kv-heads %d, D=%d, %s)", bad, s->H_kv, s->D,
                      attn_dtype_name(p->dtype));
    if (s->H % s->H_kv != 0)
        return refuse("-H %d is not a multiple of --kv-heads %d: every key/value head serves the "
                      "same number of query heads",
                      s->H, s->H_kv);
    bad = dec_unsupported(s->H, s->H_kv, s->latent ? 64 : s->D, s->Lq, s->opt.index_heads,
                          s->opt.index_dim); /* the latent D: above */
    if (bad != NULL)
        return refuse("%s (got D=%d)", bad, s->D);
    int64_t total = 0;
    for (int b = 0; b < s->B; ++b) {
        s->L_cap = s->lens[b] > s->L_cap ? s->lens[b] : s->L_cap;
        total += s->lens[b];
        if (s->lens[b] > 0 && s->lens[b] < s->Lq)
            return refuse("sequence %d: a cache of %d tokens cannot hold its %d new tokens "
                          "(--queries)",
                          b, s->lens[b], s->Lq);
    }
    if (s->L_cap == 0 || total > INT_MAX) /* named by the flag that gave the lengths */
        return refuse("%s: %s", s->opt.cache_lens != NULL ? "--cache-lens" : "-B x -L",
                      s->L_cap == 0 ? "every sequence is empty"
                                    : "the caches add up to more than 2^31 tokens");
    return 0;
}

/* The paged cache: the pool, then each sequence's pages in the pool's shuffled order; a planted
 * wrong entry (--corrupt-table) before the block table's own check. */
static int prepare_pool(dec_state *s, const attn_cli *cli, char *why, size_t len) {
    s->P = s->opt.page_size;
    s->W = s->opt.table_pages > 0 ? s->opt.table_pages : dec_pages_for(s->L_cap, s->P);
    int64_t used = 0;
    for (int b = 0; b < s->B; ++b)
        used += dec_pages_for(s->lens[b], s->P);
    if (used + s->opt.spare_pages > INT_MAX || (int64_t)s->B * s->W > INT_MAX)
        return refuse("the pool or the block table would hold more than 2^31 entries");
    s->num_pages = (int)used + s->opt.spare_pages;
    s->table = (int *)alloc_host(s, (size_t)s->B * s->W * sizeof(int));
    if (s->table == NULL ||
        dec_fill_table(s->table, s->B, s->W, s->lens, s->P, s->num_pages, cli->seed ^ 0x5EEDull))
        return refuse("out of host memory for a pool of %d pages", s->num_pages);
    if (s->opt.corrupt_table != NULL) {
        const char *t = s->opt.corrupt_table;
        int v = 0;
        if (attn_cli_parse_int("--corrupt-table", t[0] == '-' ? t + 1 : t, 0, &v, why, len) != 0)
            return refuse("--corrupt-table must be an integer (got '%s')", t);
        s->table[0] = t[0] == '-' ? -v : v;
    }
    return dec_check_block_table(s->table, s->B, s->W, s->lens, s->P, s->num_pages, why, len);
}

/* DSA's k (the width of the selection) and the split rule (--splits). */
static int prepare_topk_splits(dec_state *s, char *why, size_t len) {
    if (s->opt.topk > s->L_cap)
        return refuse("--topk %d is larger than the longest cache (%d tokens): nothing to select",
                      s->opt.topk, s->L_cap);
    const int auto_k = attn_on_simulator() ? 64 : 2048; /* DeepSeek's k on a GPU */
    s->k_eff = s->opt.topk > 0 ? s->opt.topk : s->L_cap < auto_k ? s->L_cap : auto_k;
    const char *sp = s->opt.splits;
    s->splits_mode = strcmp(sp, "auto") == 0 ? 0 : strcmp(sp, "fa") == 0 ? 1 : 2;
    if (s->splits_mode == 2 && (attn_cli_parse_int("--splits", sp, 1, &s->splits_fixed, why, len) ||
                                s->splits_fixed > DEC_MAX_SPLITS))
        return refuse("--splits must be auto, fa or a number of splits from 1 to %d (got '%s')",
                      DEC_MAX_SPLITS, sp);
    return 0;
}

/* The problem the driver and the checkers see: the varlen layout of decode.h (Lq new tokens per
 * sequence, cu_seqlens_k the cache lengths), bottom-right causal. */
static int prepare_problem(dec_state *s, attn_problem *p, char *why, size_t len) {
    s->cu_q = (int *)alloc_host(s, (size_t)(s->B + 1) * sizeof(int));
    s->cu_k = (int *)alloc_host(s, (size_t)(s->B + 1) * sizeof(int));
    if (s->cu_q == NULL || s->cu_k == NULL)
        return refuse("out of host memory");
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
    return 0;
}

/* The lengths, the grouping, the pool and its block table, k, the split rule: every refusal
 * before the device is touched. */
int dec_prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                attn_problem *p, char *why, size_t len) {
    (void)ex;
    dec_state *s = of(state);
    s->opt = *(const dec_options *)opts;
    if (!s->opt.fp8 && (s->opt.outliers != 1.0 || s->opt.corrupt_scale != 1.0))
        return refuse("--outliers and --corrupt-scale shape the FP8 cache: --fp8");
    const bool refused = prepare_lengths(s, cli, p, why, len) ||
                         prepare_shape(s, cli, p, why, len) || prepare_pool(s, cli, why, len) ||
                         prepare_topk_splits(s, why, len) || prepare_problem(s, p, why, len);
    return refused ? ATTN_EXIT_USAGE : 0; /* the reason in why */
}

/* A version the flags exclude (or that cannot serve them): the reason into why. */
#define cannot(...) (attn_verdict) attn_reason(why, len, ATTN_KERNEL_CANNOT, __VA_ARGS__)

attn_verdict dec_verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                         size_t len) {
    const dec_state *s = of(state);
    const bool latent_kernel = strncmp(k->name, "latent", 6) == 0;
    const bool append = k->stage == DEC_STAGE_APPEND || k->stage == DEC_STAGE_APPEND_FP8;
    if (s->opt.fp8 != (k->stage >= DEC_STAGE_APPEND_FP8))
        return cannot("%s", s->opt.fp8 ? "not a version of the FP8 cache (--fp8 runs 11-13)"
                                       : "a version of the FP8 cache: --fp8");
    if (s->latent && !latent_kernel && !append)
        return cannot("not a latent kernel (--latent runs append and latent)");
    if (!s->latent && latent_kernel)
        return cannot("%s reads MLA's 576-wide latent cache: --latent", k->name);
    if (s->latent && !latent_kernel) /* append: the latent row, any width (16 bytes) */
        return ATTN_KERNEL_RUNS;
    if (named(k, "topk_bitonic") && s->L_cap > DS_BITONIC_MAX_KEYS)
        return cannot("topk_bitonic sorts a whole cache in shared memory: at most %d tokens (the "
                      "longest is %d)",
                      DS_BITONIC_MAX_KEYS, s->L_cap);
    return attn_kernel_verdict(k, p, why, len);
}
