/* flex_module.c — example 08's module on the one driver (attn/example.h): its flags, what they
 * make of the problem, the block mask, RoPE's inputs, and the report of mask_mod evaluations. The
 * kernels and the functors' dispatch are in flex_attention.cu; --mod and the setting's flags are
 * parsed in flex_spec.c; the reference's own RoPE and ALiBi, and the inputs hook, are in
 * flex_reference.c; the build step (the block mask) is in flex_block_mask.c.
 *
 *   step        what happens here
 *   prepare     --mod SPEC parsed; documents, bias table and RoPE flags checked against the
 *               problem (one-line errors, exit 2)
 *   build       the setting's arrays on the host and the device; the block mask made on the
 *               device by the mask_mod (flex_create_block_mask) and compared with the brute-force
 *               classification on the host (every entry, attn_block_mask_from_mask); the
 *               all-PARTIAL mask of flex_no_block_mask; the reference's mask (the functors;
 *               ALiBi's score_mod its own, ref_alibi_score)
 *   inputs      --rope: Q and K kept as seeded for flex_rope, rotated in place for the reference
 *               and the other kernels (RoPE applied first) by the reference's own ref_rope_rows
 *   per kernel  its reference (the baseline: dense), FLOPs (visible entries), a counted launch
 *   after       the mask_mod calls per tile class, as counted on the device
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/profile.h"
#include "attn/tensor.h"
#include "flex_module.h"

static flex_state *of(void *state) { return (flex_state *)state; }

/* ---- step 1: the flags ----------------------------------------------------------------------- */

/* --rope, --rope-base and --rope-offset against each other and the problem. 0, or
 * ATTN_EXIT_USAGE with why. */
static int check_rope(flex_state *s, const attn_cli *cli, const attn_problem *p, char *why,
                      size_t len) {
    if (!s->opt.rope && (s->opt.rope_base || s->opt.rope_offset)) {
        snprintf(why, len, "%s: needs --rope", s->opt.rope_base ? "--rope-base" : "--rope-offset");
        return ATTN_EXIT_USAGE;
    }
    s->rope_base = 10000.0;
    if (s->opt.rope_base != NULL &&
        (attn_cli_parse_real("--rope-base", s->opt.rope_base, &s->rope_base, why, len) != 0 ||
         !(s->rope_base > 0.0))) {
        snprintf(why, len, "--rope-base must be a number > 0 (got '%s')", s->opt.rope_base);
        return ATTN_EXIT_USAGE;
    }
    /* positions are exact in fp32 below 2^24 (the angle is float(pos) * inv_freq): a length
     * alone beyond that is the length flag's fault, not --rope-offset's */
    const int last = p->Lq > p->Lk ? p->Lq : p->Lk;
    if (s->opt.rope && last > 1 << 24) {
        snprintf(why, len, "%s %d: --rope's positions must stay below 2^24",
                 cli->Lq == cli->Lk ? "-L"
                 : p->Lq > p->Lk    ? "--lq"
                                    : "--lk",
                 last);
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.rope && s->opt.rope_offset > (1 << 24) - last) {
        snprintf(why, len, "--rope-offset %d: positions must stay below 2^24 (Lq, Lk up to %d)",
                 s->opt.rope_offset, last);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

static int prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                   attn_problem *p, char *why, size_t len) {
    (void)ex;
    flex_state *s = of(state);
    s->opt = *(const flex_options *)opts;
    s->p = *p;
    s->seed = cli->seed;
    if (cli->causal) {
        snprintf(why, len,
                 "--causal: the mask is --mod's mask_mod (causal, sliding_window, "
                 "prefix_lm, document, alibi and softcap are causal)");
        return ATTN_EXIT_USAGE;
    }
    if (cli->pattern != NULL) {
        snprintf(why, len, "--pattern: example 08's masks are --mod's mask_mods");
        return ATTN_EXIT_USAGE;
    }
    if (attn_problem_is_varlen(p)) {
        snprintf(why, len,
                 "--seqlens: example 08 packs sequences with --mod document "
                 "(--doc-lens or --doc-ids) in one dense batch");
        return ATTN_EXIT_USAGE;
    }
    if (flex_parse_spec(s->opt.mod, &s->spec, why, len) != 0)
        return ATTN_EXIT_USAGE;
    const bool document = s->spec.kind == FLEX_DOCUMENT, rel = s->spec.kind == FLEX_REL_BIAS;
    if (!document && (s->opt.doc_lens || s->opt.doc_ids)) {
        snprintf(why, len, "%s: documents are --mod document's",
                 s->opt.doc_lens ? "--doc-lens" : "--doc-ids");
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.doc_lens && s->opt.doc_ids) {
        snprintf(why, len, "--doc-lens and --doc-ids: give the documents one way");
        return ATTN_EXIT_USAGE;
    }
    if (!rel && s->opt.bias_table) {
        snprintf(why, len, "--bias-table: the table is --mod rel_bias's");
        return ATTN_EXIT_USAGE;
    }
    if (check_rope(s, cli, p, why, len) != 0)
        return ATTN_EXIT_USAGE;
    if (document && flex_make_documents(s, why, len) != 0)
        return ATTN_EXIT_USAGE;
    if (rel && flex_make_table(s, why, len) != 0)
        return ATTN_EXIT_USAGE;
    if (s->spec.kind == FLEX_ALIBI) {
        s->slopes = (float *)malloc((size_t)p->H * sizeof(float));
        if (s->slopes == NULL) {
            snprintf(why, len, "out of host memory for ALiBi's slopes");
            return ATTN_EXIT_USAGE;
        }
        flex_alibi_slopes(p->H, s->slopes);
        s->ref_slopes = (double *)malloc((size_t)p->H * sizeof(double));
        if (s->ref_slopes == NULL) {
            snprintf(why, len, "out of host memory for ALiBi's slopes");
            return ATTN_EXIT_USAGE;
        }
        for (int h = 0; h < p->H; ++h)
            s->ref_slopes[h] = flex_ref_alibi_slope(h, p->H);
    }
    return 0;
}

static attn_verdict verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                            size_t len) {
    if (k->id == 4 && !of(state)->opt.rope) {
        snprintf(why, len, "flex_rope fuses RoPE into the kernel: give --rope");
        return ATTN_KERNEL_CANNOT;
    }
    return attn_kernel_verdict(k, p, why, len);
}

static void banner(void *state, const attn_problem *p) {
    const flex_state *s = of(state);
    char spec[64];
    flex_format_spec(&s->spec, spec, sizeof spec);
    printf("modification: %s (%s)\n", spec, flex_spec_what(s->spec.kind));
    if (s->spec.kind == FLEX_DOCUMENT) {
        printf("documents: %d over Lk = %d keys, lengths ", s->n_docs, p->Lk);
        for (int d = 0, j = 0, shown = 0; d < s->n_docs && shown < 16; ++d, ++shown) {
            int n = 0;
            while (j < p->Lk && s->doc[j] == d)
                ++j, ++n;
            printf("%s%d", d ? "," : "", n);
        }
        printf("%s\n", s->n_docs > 16 ? ",..." : "");
    }
    if (s->spec.kind == FLEX_REL_BIAS)
        printf("bias table: H=%d x %d values (%s)\n", p->H, 2 * s->spec.r + 1,
               s->opt.bias_table ? "--bias-table" : "seeded, uniform in [-1, 1)");
    if (s->opt.rope)
        printf("RoPE: rotate-half, base %g, key j at position %d + j; flex_rope rotates Q and K on "
               "load, the other kernels read them rotated beforehand\n",
               s->rope_base, s->opt.rope_offset);
}

/* ---- step 3: the inputs kept for flex_rope (the block mask: flex_block_mask.c) ------------- */

/* Packs fp32 values to the dtype and uploads them (NULL after a reported error). */
static void *upload_dtype(const float *x, size_t count, attn_dtype t) {
    void *staging = attn_host_alloc(count * attn_dtype_size(t) + 16, "the upload's staging");
    void *d = NULL;
    if (staging != NULL && attn_device_upload(&d, x, count, t, staging) != 0) {
        attn_device_free(d);
        d = NULL;
    }
    free(staging);
    return d;
}

static void buffers(void *state, attn_buffers *b) {
    flex_state *s = of(state);
    if (s->opt.rope) {
        const attn_problem *p = &s->p;
        s->d_inv_freq = (float *)flex_copy_to_device(s->inv_freq, (size_t)p->D / 2 * sizeof(float));
        s->d_q_raw = upload_dtype(s->q_raw, attn_problem_q_elems(p), p->dtype);
        s->d_k_raw = upload_dtype(s->k_raw, attn_problem_k_elems(p), p->dtype);
        s->args.rope = (flex_rope){0, s->opt.rope_offset, s->d_inv_freq};
        s->args.q_raw = s->d_q_raw;
        s->args.k_raw = s->d_k_raw;
    }
    b->args = &s->args;
}

/* ---- per kernel ------------------------------------------------------------------------------ */

static void kernel_options(void *state, const attn_kernel *k, const attn_problem *p,
                           attn_run_opts *opts, char *why, size_t len) {
    flex_state *s = of(state);
    const bool baseline = (k->serves & ATTN_SERVES_BASELINE) != 0;
    opts->refusal = NULL;
    opts->dense_reference = baseline;
    /* FLOPs of the entries a query sees (4 D per entry: QK^T and PV), as causal attention counts
     * its own; the baseline computes every entry */
    opts->flops = baseline ? 0.0 : 4.0 * p->D * s->entries;
    if (verdict(state, k, p, why, len) == ATTN_KERNEL_CANNOT && k->id == 4) {
        opts->refusal = why;
        return;
    }
    if (!baseline && s->d_counters != NULL) { /* count its checked launch */
        static const unsigned long long zero[4] = {0, 0, 0, 0};
        if (attn_to_device(s->d_counters + 4 * (k->id - 1), zero, sizeof zero) == 0) {
            s->args.count_kernel = k->id;
            s->counted[k->id - 1] = true;
        }
    }
}

/* The counters of kernel k's counted launch, read after its run; its record's members. */
static void record_json(void *state, const attn_kernel *k, char *out, size_t len) {
    flex_state *s = of(state);
    char spec[64];
    flex_format_spec(&s->spec, spec, sizeof spec);
    int n = snprintf(out, len, "\"mod\":\"%s\",\"rope\":%s,\"visible_entries\":%.0f", spec,
                     s->opt.rope ? "true" : "false", s->entries);
    unsigned long long *c = s->calls[k->id - 1];
    if (!s->counted[k->id - 1] || s->args.count_kernel == k->id || n < 0 || (size_t)n >= len ||
        attn_to_host(c, s->d_counters + 4 * (k->id - 1), sizeof s->calls[0]) != 0) {
        s->counted[k->id - 1] = false; /* it did not run (skipped), or the counters are lost */
        s->args.count_kernel = 0;
        return;
    }
    snprintf(out + n, len - (size_t)n,
             ",\"tiles_full\":%llu,\"tiles_partial\":%llu,\"mask_calls_full\":%llu,"
             "\"mask_calls_partial\":%llu",
             c[0], c[1], c[2], c[3]);
}

static void after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    flex_state *s = of(state);
    bool any = false;
    for (int r = 0; r < n; ++r) {
        const int id = recs[r].kernel_id;
        if (id < 2 || id > FLEX_KERNELS || !s->counted[id - 1])
            continue;
        if (!any)
            printf("\ntiles visited and mask_mod calls, counted on the device in each kernel's "
                   "checked launch (all "
                   "(sequence, head) blocks; a tile is 64 x 64 entries):\n");
        any = true;
        const unsigned long long *c = s->calls[id - 1];
        const attn_kernel *k = attn_example_find(ex, id);
        printf("  %-19s FULL tiles %llu visited, %llu calls | PARTIAL tiles %llu visited, %llu "
               "calls (%.0f per tile) | EMPTY tiles %llu never loaded",
               k->name, c[0], c[2], c[1], c[3], c[1] ? (double)c[3] / (double)c[1] : 0.0,
               (unsigned long long)((s->n_full + s->n_part + s->n_empty) * s->p.H) - c[0] - c[1]);
        if (recs[r].timed) /* the count beside the time it took */
            printf(" | median %.4g ms", recs[r].time.median_ms);
        printf("\n");
    }
    if (any && strcmp(attn_backend_name(), "sim") == 0)
        printf("The counts are the work each kernel did; the simulator's times are wall time on "
               "this machine's CPU,\nwhich another process's load can reorder "
               "(examples/08_flex_attention/README.md, \"Counts, not CPU time\").\n");
}

/* ---- --dump ---------------------------------------------------------------------------------- */

/* doc_ids [Lk], bias_table [H, 2r+1], alibi_slopes [H], the block mask (FlexAttention's four
 * arrays, [B, nq] and [B, nq, nk], and the visible entries per tile), and with --rope the inputs
 * before rotation (q_raw, k_raw [rows, D]) and inv_freq [D/2]. */
static int dump(void *state, const char *dir) {
    flex_state *s = of(state);
    const attn_problem *p = &s->p;
    const attn_block_mask *m = &s->blocks;
    const int nq = m->num_q_blocks, nk = m->num_k_blocks;
    const int64_t D = p->D, qr = (int64_t)attn_problem_q_elems(p) / D;
    const int64_t kr = (int64_t)attn_problem_k_elems(p) / D;
    const bool rope = s->opt.rope;
    float slopes[1024];
    if (p->H <= 1024)
        flex_alibi_slopes(p->H, slopes);
    const attn_dump_tensor t[] = {
        {"doc_ids", NULL, s->doc, 1, {p->Lk}},
        {"bias_table", s->table, NULL, 2, {p->H, 2 * s->spec.r + 1}},
        {"alibi_slopes", p->H <= 1024 ? slopes : NULL, NULL, 1, {p->H}},
        {"kv_num_blocks", NULL, m->kv_num_blocks, 2, {p->B, nq}},
        {"kv_indices", NULL, m->kv_indices, 3, {p->B, nq, nk}},
        {"full_kv_num_blocks", NULL, m->full_kv_num_blocks, 2, {p->B, nq}},
        {"full_kv_indices", NULL, m->full_kv_indices, 3, {p->B, nq, nk}},
        {"tile_counts", NULL, s->counts, 3, {p->B, nq, nk}},
        {"q_raw", rope ? s->q_raw : NULL, NULL, 2, {qr, D}},
        {"k_raw", rope ? s->k_raw : NULL, NULL, 2, {kr, D}},
        {"inv_freq", rope ? s->inv_freq : NULL, NULL, 1, {D / 2}},
    };
    return attn_dump_tensors(dir, t, (int)(sizeof t / sizeof t[0]));
}

static void release(void *state) {
    flex_state *s = of(state);
    free(s->doc);
    free(s->table);
    free(s->slopes);
    free(s->ref_slopes);
    free(s->q_raw);
    free(s->k_raw);
    free(s->counts);
    attn_device_free(s->d_doc);
    attn_device_free(s->d_table);
    attn_device_free(s->d_slopes);
    attn_device_free(s->d_inv_freq);
    attn_device_free(s->d_q_raw);
    attn_device_free(s->d_k_raw);
    attn_device_free(s->d_counts);
    attn_device_free(s->d_counters);
    attn_block_mask_free(&s->blocks);
    attn_block_mask_free(&s->partial);
    attn_block_mask_free_device(&s->blocks_dev);
    attn_block_mask_free_device(&s->partial_dev);
}

static void usage(const attn_example *ex, FILE *f) {
    (void)ex;
    flex_spec_usage(f);
}

/* ---- the module ------------------------------------------------------------------------------ */

#define OPT(field) offsetof(flex_options, field)
static const attn_option flex_option_table[] = {
    {"--mod", "SPEC", "the modification (list below)", ATTN_OPTION_TEXT, OPT(mod), 0, 0, NULL,
     "causal", NULL},
    {"--doc-lens", "N1,N2,..",
     "document: lengths of the packed documents, adding up to Lk (0 "
     "allowed); default 8 of equal length",
     ATTN_OPTION_TEXT, OPT(doc_lens), 0, 0, NULL, NULL, NULL},
    {"--doc-ids", "I1,I2,..", "document: the document of each of the Lk keys, non-decreasing",
     ATTN_OPTION_TEXT, OPT(doc_ids), 0, 0, NULL, NULL, NULL},
    {"--bias-table", "V1,V2,..",
     "rel_bias: the H x (2r+1) biases, table[h][d + r]; default "
     "seeded in [-1, 1)",
     ATTN_OPTION_TEXT, OPT(bias_table), 0, 0, NULL, NULL, NULL},
    {"--rope", NULL, "rotary position embeddings on Q and K (rotate-half); flex_rope fuses them",
     ATTN_OPTION_SWITCH, OPT(rope), 0, 0, NULL, NULL, NULL},
    {"--rope-base", "X", "RoPE's base theta (default 10000)", ATTN_OPTION_TEXT, OPT(rope_base), 0,
     0, NULL, NULL, NULL},
    {"--rope-offset", "N", "RoPE: position of key 0 (a KV cache's start)", ATTN_OPTION_INT,
     OPT(rope_offset), 0, 1 << 24, NULL, "0", NULL},
};
#undef OPT

const attn_module flex_module = {
    ATTN_MODULE_OPTIONS(flex_option_table, flex_options),
    .usage = usage,
    .state_size = sizeof(flex_state),
    .prepare = prepare,
    .verdict = verdict,
    .banner = banner,
    .build = flex_build,
    .inputs = flex_rope_inputs,
    .buffers = buffers,
    .kernel_options = kernel_options,
    .record_json = record_json,
    .dump = dump,
    .after_table = after_table,
    .release = release,
};
