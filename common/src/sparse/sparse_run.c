/* sparse_run.c — running a sparse example's kernels under a pattern (see
 * attn/sparse/sparse_run.h).
 */
#include "attn/sparse/sparse_run.h"

#include "attn/device.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* every kind's bit: the chapter's and the examples' own */
#define KIND_BITS (ATTN_PATTERN_BIT(ATTN_PATTERN_KINDS + ATTN_PATTERN_MAX_OWN) - 1u)

int attn_sparse_prepare(attn_sparse_run *st, const attn_sparse_config *cfg, const char *spec,
                        char *why, size_t len) {
    memset(st, 0, sizeof *st);
    st->cfg = cfg;
    if (cfg == NULL) {
        if (spec == NULL)
            return 0;
        snprintf(why, len,
                 "--pattern: the kernels of this example compute dense attention (sparse "
                 "patterns start with example 04)");
        return ATTN_EXIT_USAGE;
    }
    if (spec == NULL)
        spec = cfg->default_pattern;
    if (attn_pattern_register(cfg->kinds) != 0) { /* the example's own kinds: its registry's bug */
        snprintf(why, len, "--pattern: cannot register this example's own pattern kinds");
        return ATTN_EXIT_USAGE;
    }
    char reason[224];
    if (attn_pattern_parse(spec, &st->pattern, reason, sizeof reason) != 0) {
        snprintf(why, len, "--pattern: %s", reason); /* the default: checked by tests */
        return ATTN_EXIT_USAGE;
    }
    st->has_pattern = st->pattern.n_parts > 0;
    return 0;
}

/* What k serves (attn_kernel.serves); a dense example's kernels serve no pattern. */
static unsigned kernel_flags(const attn_sparse_run *st, const attn_kernel *k) {
    return st->cfg != NULL ? k->serves : 0u;
}

/* "window, causal_window": the kinds in bits. */
static void kind_list(unsigned bits, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < ATTN_PATTERN_KINDS + ATTN_PATTERN_MAX_OWN && used < len; ++k)
        if ((bits & ATTN_PATTERN_BIT(k)) && attn_pattern_kind_name(k) != NULL)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     attn_pattern_kind_name(k));
}

static int refuses(const attn_sparse_run *st, const attn_kernel *k, char *why, size_t len) {
    unsigned flags = kernel_flags(st, k), kinds = flags & KIND_BITS;
    char list[128];
    kind_list(kinds, list, sizeof list);
    if (flags & ATTN_SERVES_BASELINE)
        return 0;
    if (!st->has_pattern) {
        if (flags == 0 || (flags & ATTN_SERVES_DENSE))
            return 0;
        snprintf(why, len, "kernel '%s' needs a --pattern made of %s", k->name, list);
        return -1;
    }
    unsigned used = attn_pattern_kinds(&st->pattern);
    if (kinds != 0 && (used & ~kinds) == 0)
        return 0;
    char spec[256];
    attn_pattern_format(&st->pattern, spec, sizeof spec);
    if (kinds == 0)
        snprintf(why, len, "kernel '%s' computes dense attention; it cannot serve --pattern %s",
                 k->name, spec);
    else
        snprintf(why, len, "kernel '%s' serves patterns made of %s, not %s", k->name, list, spec);
    return -1;
}

static const attn_mask *mask_for(const attn_sparse_run *st, const attn_kernel *k) {
    if (!st->has_pattern || (kernel_flags(st, k) & ATTN_SERVES_BASELINE))
        return NULL;
    return &st->mask;
}

int attn_sparse_build(attn_sparse_run *st, const attn_problem *p, bool need_csr, bool quiet) {
    if (st->cfg == NULL)
        return 0;
    st->ctx.pattern = &st->pattern;
    st->ctx.problem = p;
    st->mask = attn_pattern_mask(&st->ctx);
    if (attn_pattern_block_mask(&st->blocks, &st->pattern, p, ATTN_SPARSE_TILE, ATTN_SPARSE_TILE) !=
            0 ||
        (need_csr && attn_pattern_csr(&st->csr, &st->pattern, p, &st->blocks) != 0)) {
        fprintf(stderr, "error: out of host memory for the block mask or the CSR\n");
        return 1;
    }
    if (attn_block_mask_to_device(&st->blocks, &st->blocks_dev) != 0 ||
        (need_csr && attn_csr_to_device(&st->csr, &st->csr_dev) != 0))
        return 1;
    st->stats = attn_pattern_stats_of(&st->pattern, p, &st->blocks);
    if (!quiet) {
        const attn_pattern_stats *s = &st->stats;
        char spec[256];
        attn_pattern_format(&st->pattern, spec, sizeof spec);
        printf("pattern: %s: density %.2f%% (%.0f of %.0f entries per head%s), theoretical "
               "speedup over dense%s %.2fx\n",
               spec, 100.0 * s->density, s->entries, s->dense_entries,
               p->causal ? " under causality" : "", p->causal ? " causal" : "", s->speedup_bound);
        printf("block mask %dx%d: %lld full + %lld partial of %lld tiles (%.1f%% visited, "
               "%.1f%% of their entries kept), metadata %zu bytes",
               ATTN_SPARSE_TILE, ATTN_SPARSE_TILE, (long long)s->blocks.full_blocks,
               (long long)s->blocks.partial_blocks, (long long)s->blocks.tiles,
               100.0 * s->blocks.block_density, 100.0 * s->block_fill, s->blocks.metadata_bytes);
        if (need_csr)
            printf("; CSR %lld keys, %zu bytes", (long long)st->csr.nnz, attn_csr_bytes(&st->csr));
        putchar('\n');
    }
    return 0;
}

void attn_sparse_buffers(attn_sparse_run *st, attn_buffers *b) {
    if (st->cfg == NULL)
        return;
    st->inputs.block_mask = &st->blocks_dev;
    st->inputs.pattern = st->has_pattern ? &st->pattern : NULL;
    st->inputs.csr = st->csr_dev.row_ptr != NULL ? &st->csr_dev : NULL;
    b->sparse = &st->inputs;
}

static double kernel_flops(const attn_sparse_run *st, const attn_kernel *k, const attn_problem *p) {
    double dense = attn_problem_flops(p);
    if (st->cfg == NULL || !st->has_pattern || (kernel_flags(st, k) & ATTN_SERVES_BASELINE) ||
        st->stats.dense_entries <= 0)
        return dense;
    return dense * st->stats.entries / st->stats.dense_entries;
}

void attn_sparse_print_speedups(const attn_sparse_run *st, const attn_example *ex,
                                const attn_run_record *recs, int n) {
    if (st->cfg == NULL)
        return;
    const attn_run_record *base = NULL;
    for (int r = 0; r < n && base == NULL; ++r) {
        const attn_kernel *k = attn_example_find(ex, recs[r].kernel_id);
        if (recs[r].timed && (kernel_flags(st, k) & ATTN_SERVES_BASELINE))
            base = &recs[r];
    }
    if (base == NULL)
        return;
    printf("\nspeedup over %s (%.3f ms)%s: theoretical %.2fx (dense entries / computed entries)\n",
           base->kernel, base->time.median_ms,
           strcmp(base->backend, "sim") == 0 ? " on the CPU simulator, not GPU performance" : "",
           st->stats.speedup_bound);
    for (int r = 0; r < n; ++r)
        if (&recs[r] != base && recs[r].timed)
            printf("  %-14s %8.3f ms  measured %.2fx\n", recs[r].kernel, recs[r].time.median_ms,
                   base->time.median_ms / recs[r].time.median_ms);
}

attn_verdict attn_sparse_verdict(const attn_sparse_run *st, const attn_kernel *k,
                                 const attn_problem *p, char *why, size_t len) {
    if (refuses(st, k, why, len) != 0)
        return ATTN_KERNEL_CANNOT;
    return attn_kernel_verdict(k, p, why, len);
}

void attn_sparse_needs(const attn_sparse_run *st, const attn_kernel *k, bool *csr, bool *dense) {
    *csr |= (kernel_flags(st, k) & ATTN_SERVES_CSR) != 0;
    *dense |= st->has_pattern && mask_for(st, k) == NULL;
}

void attn_sparse_kernel_options(const attn_sparse_run *st, const attn_kernel *k,
                                const attn_problem *p, attn_run_opts *opts, char *why, size_t len) {
    opts->refusal = refuses(st, k, why, len) != 0 ? why : NULL;
    opts->dense_reference = mask_for(st, k) == NULL;
    opts->flops = kernel_flops(st, k, p);
}

void attn_sparse_free(attn_sparse_run *st) {
    attn_block_mask_free(&st->blocks);
    attn_block_mask_free_device(&st->blocks_dev);
    attn_csr_free(&st->csr);
    attn_csr_free_device(&st->csr_dev);
}
