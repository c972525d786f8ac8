/* show_mask.c — Exercise 02's look at a pattern: densities and a heatmap of YOUR sparse_mask.cu
 * (README step 4). Host code only: no kernel runs.
 *
 *   sparse_mask_show_sim                     L = 4096, causal: the sizes the budgets are stated at
 *   sparse_mask_show_sim -L 256 --tokens     plus the token-level heatmap (L <= 256)
 *   sparse_mask_show_sim --lq 100 --lk 300 --non-causal --png build/mask.png   the mask as a PNG
 *
 * Tile heatmap: one character per 32x32 tile, F full, P partial, . skipped (a larger grid is
 * drawn at most 64 characters wide, each character the densest of the tiles it covers). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/sparse/block_mask.h"
#include "attn/sparse/mask_png.h"
#include "sparse_mask.h"

#define MAX_COLS 64
#define MAX_TOKEN_MAP 256

typedef struct options {
    int Lq, Lk;
    bool causal, tokens;
    const char *png;
} options;

static int usage_error(const char *prog, const char *what, const char *arg) {
    fprintf(stderr,
            "error: %s '%s' (usage: %s [-L N] [--lq N] [--lk N] [--non-causal] [--tokens] "
            "[--png FILE])\n",
            what, arg, prog);
    return ATTN_EXIT_USAGE;
}

static int parse_length(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse(options *o, int argc, char **argv) {
    *o = (options){4096, 4096, true, false, NULL};
    for (int a = 1; a < argc; ++a) {
        const char *f = argv[a];
        bool has_value = a + 1 < argc;
        if (strcmp(f, "--non-causal") == 0)
            o->causal = false;
        else if (strcmp(f, "--causal") == 0)
            o->causal = true;
        else if (strcmp(f, "--tokens") == 0)
            o->tokens = true;
        else if (strcmp(f, "--png") == 0 && has_value)
            o->png = argv[++a];
        else if ((strcmp(f, "-L") == 0 || strcmp(f, "--lq") == 0 || strcmp(f, "--lk") == 0) &&
                 has_value) {
            int v;
            if (parse_length(argv[++a], &v) != 0)
                return usage_error(argv[0], "bad length for", f);
            if (f[1] == 'L')
                o->Lq = o->Lk = v;
            else if (strcmp(f, "--lq") == 0)
                o->Lq = v;
            else
                o->Lk = v;
        } else {
            return usage_error(argv[0], "unknown or incomplete flag", f);
        }
    }
    if (o->tokens && (o->Lq > MAX_TOKEN_MAP || o->Lk > MAX_TOKEN_MAP))
        return usage_error(argv[0], "--tokens draws at most 256 x 256; got", "a larger L");
    return 0;
}

static bool visible(const attn_problem *p, int i, int j) {
    return attn_problem_row_keys(p, 0, i) > j && sparse_mask_keep(p->Lq, p->Lk, i, j) != 0;
}

static int keep_predicate(const void *ctx, int b, int h, int i, int j) {
    (void)b;
    (void)h;
    const attn_problem *p = ctx;
    return sparse_mask_keep(p->Lq, p->Lk, i, j) != 0;
}

/* Tile heatmap: '.' < 'P' < 'F' per tile; several tiles per character when the grid is wide. */
static void print_tiles(const attn_block_mask *m) {
    int step = (m->num_k_blocks + MAX_COLS - 1) / MAX_COLS;
    char *state = calloc((size_t)m->num_q_blocks * m->num_k_blocks, 1);
    if (state == NULL)
        return;
    for (int qb = 0; qb < m->num_q_blocks; ++qb) {
        const int32_t *full = m->full_kv_indices + (size_t)qb * m->num_k_blocks;
        const int32_t *part = m->kv_indices + (size_t)qb * m->num_k_blocks;
        for (int t = 0; t < m->full_kv_num_blocks[qb]; ++t)
            state[(size_t)qb * m->num_k_blocks + full[t]] = 2;
        for (int t = 0; t < m->kv_num_blocks[qb]; ++t)
            state[(size_t)qb * m->num_k_blocks + part[t]] = 1;
    }
    printf("tile heatmap (%dx%d tiles%s): F full, P partial, . skipped\n", m->block_q, m->block_k,
           step > 1 ? ", several per character" : "");
    for (int qb0 = 0; qb0 < m->num_q_blocks; qb0 += step) {
        for (int kb0 = 0; kb0 < m->num_k_blocks; kb0 += step) {
            int s = 0;
            for (int qb = qb0; qb < qb0 + step && qb < m->num_q_blocks; ++qb)
                for (int kb = kb0; kb < kb0 + step && kb < m->num_k_blocks; ++kb)
                    s = state[(size_t)qb * m->num_k_blocks + kb] > s
                            ? state[(size_t)qb * m->num_k_blocks + kb]
                            : s;
            putchar(".PF"[s]);
        }
        putchar('\n');
    }
    free(state);
}

static int visible_pixel(const void *ctx, int i, int j) { return visible(ctx, i, j); }

/* The mask as a black-and-white PNG: row i is query i, column j key j, black where visible. */
static int write_png(const char *path, const attn_problem *p) {
    if (attn_mask_png_write(path, p->Lk, p->Lq, visible_pixel, p) != 0) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("wrote %s (PNG, %d x %d, black = visible)\n", path, p->Lk, p->Lq);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    int status = parse(&o, argc, argv);
    if (status != 0)
        return status;
    if (sparse_mask_keep(1, 1, 0, 0) == SPARSE_MASK_NOT_IMPLEMENTED) {
        fprintf(stderr, "sparse_mask_keep: TODO not implemented (README step 1)\n");
        return 1;
    }
    attn_problem p;
    attn_problem_init(&p, 1, 1, o.Lq, o.Lk, 64);
    p.causal = o.causal;

    double seen = 0.0;
    for (int i = 0; i < p.Lq; ++i)
        for (int j = 0; j < p.Lk; ++j)
            seen += visible(&p, i, j);
    printf("pattern: Lq=%d Lk=%d %s\n", p.Lq, p.Lk, p.causal ? "causal" : "non-causal");
    printf("token density: %.0f of %.0f %s entries = %.2f%%, %.1f keys per query\n", seen,
           attn_problem_entries(&p), p.causal ? "causal" : "",
           100.0 * seen / attn_problem_entries(&p), seen / p.Lq);
    if (o.tokens) {
        printf("token heatmap: # visible, . not\n");
        for (int i = 0; i < p.Lq; ++i) {
            for (int j = 0; j < p.Lk; ++j)
                putchar(visible(&p, i, j) ? '#' : '.');
            putchar('\n');
        }
    }

    attn_block_mask m;
    int rc = sparse_mask_build_block_mask(&m, &p, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K);
    if (rc != 0) {
        fprintf(stderr, "sparse_mask_build_block_mask: %s\n",
                rc == SPARSE_MASK_NOT_IMPLEMENTED ? "TODO not implemented (README step 2)"
                                                  : "failed");
        return 1;
    }
    attn_mask mask = {ATTN_MASK_PREDICATE, keep_predicate, &p, NULL, NULL};
    char why[300];
    if (attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == 0)
        printf("block mask: exact for the pattern\n");
    else
        printf("block mask: WRONG: %s\n", why);
    attn_block_mask_stats s = attn_block_mask_stats_of(&m);
    printf("block mask: %lld full + %lld partial of %lld tiles = block density %.2f%%, "
           "metadata %zu bytes\n",
           (long long)s.full_blocks, (long long)s.partial_blocks, (long long)s.tiles,
           100.0 * s.block_density, s.metadata_bytes);
    /* The density budget counts tiles against those holding a causal (or any) entry. */
    attn_block_mask all;
    if (attn_block_mask_from_mask(&all, &p, NULL, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K) == 0) {
        attn_block_mask_stats a = attn_block_mask_stats_of(&all);
        printf("tile density: %.2f%% of the %lld tiles holding a%s entry (budget 40%% at L=4096, "
               "causal; token budget 10%%)\n",
               100.0 * (double)(s.full_blocks + s.partial_blocks) /
                   (double)(a.full_blocks + a.partial_blocks),
               (long long)(a.full_blocks + a.partial_blocks), p.causal ? " causal" : "n");
        attn_block_mask_free(&all);
    }
    print_tiles(&m);
    attn_block_mask_free(&m);
    return o.png ? write_png(o.png, &p) : 0;
}
