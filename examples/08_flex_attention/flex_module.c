/* flex_module.c — example 08's module on the one driver (attn/example.h): its flags, what they
 * make of the problem, the block mask, RoPE's inputs, and the report of mask_mod evaluations. The
 * kernels and the functors' dispatch are in flex_attention.cu.
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
#include "flex_attention.h"

/* ---- --mod SPEC ------------------------------------------------------------------------------ */

typedef struct spec_info {
    const char *name;
    const char *param; /* its one parameter ("w", "p", "cap", "r"), or NULL */
    const char *what;  /* for --help and the banner */
} spec_info;

static const spec_info specs[FLEX_KINDS] = {
    {"causal", NULL, "mask_mod causal (key at or before the query's position)"},
    {"sliding_window", "w", "mask_mod causal and window: the w most recent keys (Mistral)"},
    {"prefix_lm", "p", "mask_mod causal or prefix: the first p keys seen by every query"},
    {"document", NULL, "mask_mod causal and same document (--doc-lens / --doc-ids)"},
    {"alibi", NULL, "mask_mod causal, score_mod ALiBi: s + slope(h) * (kv - q), paper slopes"},
    {"softcap", "cap", "mask_mod causal, score_mod soft-cap: cap * tanh(s / cap) (Gemma 2)"},
    {"rel_bias", "r", "no mask_mod, score_mod s + bias[h][clamp(q - kv, -r, r)] (--bias-table)"},
};

void flex_spec_usage(FILE *f) {
    fprintf(f, "\n--mod SPEC: the compiled modifications (one kernel each per dtype and D):\n");
    for (int k = 0; k < FLEX_KINDS; ++k) {
        char name[48];
        static const char *value[FLEX_KINDS] = {"", "=W", "=P", "", "", "=C", "=R"};
        snprintf(name, sizeof name, "%s%s%s%s", specs[k].name, specs[k].param ? ":" : "",
                 specs[k].param ? specs[k].param : "", value[k]);
        fprintf(f, "  %-20s %s\n", name, specs[k].what);
    }
}

void flex_format_spec(const flex_spec *s, char *out, size_t len) {
    const spec_info *in = &specs[s->kind];
    switch (s->kind) {
    case FLEX_SLIDING_WINDOW:
        snprintf(out, len, "%s:w=%d", in->name, s->w);
        break;
    case FLEX_PREFIX_LM:
        snprintf(out, len, "%s:p=%d", in->name, s->p);
        break;
    case FLEX_SOFTCAP:
        snprintf(out, len, "%s:cap=%g", in->name, (double)s->cap);
        break;
    case FLEX_REL_BIAS:
        snprintf(out, len, "%s:r=%d", in->name, s->r);
        break;
    default:
        snprintf(out, len, "%s", in->name);
    }
}

static int usage_error(char *why, size_t len, const char *fmt, const char *a, const char *b) {
    snprintf(why, len, fmt, a, b);
    return ATTN_EXIT_USAGE;
}

int flex_parse_spec(const char *text, flex_spec *out, char *why, size_t len) {
    static const char *accepted = "causal, sliding_window:w=W, prefix_lm:p=P, document, alibi, "
                                  "softcap:cap=C, rel_bias:r=R";
    memset(out, 0, sizeof *out);
    const char *colon = strchr(text, ':');
    const size_t n = colon ? (size_t)(colon - text) : strlen(text);
    int kind = -1;
    for (int k = 0; k < FLEX_KINDS; ++k)
        if (strlen(specs[k].name) == n && strncmp(text, specs[k].name, n) == 0)
            kind = k;
    if (kind < 0) {
        char what[256];
        snprintf(what, sizeof what, "--mod: unknown modification '%.*s' (compiled: %%s)", (int)n,
                 text);
        return usage_error(why, len, what, accepted, NULL);
    }
    out->kind = (flex_kind)kind;
    const char *param = specs[kind].param;
    if (param == NULL) {
        if (colon != NULL)
            return usage_error(why, len, "--mod: %s takes no parameter (got '%s')",
                               specs[kind].name, text);
        return 0;
    }
    /* exactly one parameter: "<name>:<param>=<value>" */
    const size_t pn = strlen(param);
    if (colon == NULL || strncmp(colon + 1, param, pn) != 0 || colon[1 + pn] != '=')
        return usage_error(why, len, "--mod: %s needs its parameter, e.g. %s", specs[kind].name,
                           kind == FLEX_SLIDING_WINDOW ? "sliding_window:w=256"
                           : kind == FLEX_PREFIX_LM    ? "prefix_lm:p=64"
                           : kind == FLEX_SOFTCAP      ? "softcap:cap=30"
                                                       : "rel_bias:r=16");
    const char *value = colon + 2 + pn;
    char flag[48];
    snprintf(flag, sizeof flag, "--mod %s", specs[kind].name);
    if (kind == FLEX_SOFTCAP) {
        double cap = 0.0;
        if (attn_cli_parse_real(flag, value, &cap, why, len) != 0 || !(cap > 0.0) || cap > 1e30) {
            snprintf(why, len, "--mod softcap: cap must be a number > 0 (got '%s')", value);
            return ATTN_EXIT_USAGE;
        }
        out->cap = (float)cap;
        return 0;
    }
    int v = 0;
    const int min = kind == FLEX_SLIDING_WINDOW ? 1 : 0;
    if (attn_cli_parse_int(flag, value, min, &v, why, len) != 0) {
        snprintf(why, len, "--mod %s: %s must be an integer >= %d (got '%s')", specs[kind].name,
                 param, min, value);
        return ATTN_EXIT_USAGE;
    }
    if (kind == FLEX_REL_BIAS && v > FLEX_MAX_REL_DISTANCE) {
        /* the table holds H x (2r + 1) biases: a distance past any sequence's is never read */
        snprintf(why, len, "--mod rel_bias: r must be at most %d (got %d)", FLEX_MAX_REL_DISTANCE,
                 v);
        return ATTN_EXIT_USAGE;
    }
    if (kind == FLEX_SLIDING_WINDOW)
        out->w = v;
    else if (kind == FLEX_PREFIX_LM)
        out->p = v;
    else
        out->r = v;
    return 0;
}

/* ---- the module's state ---------------------------------------------------------------------- */

typedef struct flex_options {
    const char *mod;        /* --mod */
    const char *doc_lens;   /* --doc-lens */
    const char *doc_ids;    /* --doc-ids */
    const char *bias_table; /* --bias-table */
    int rope;               /* --rope */
    const char *rope_base;  /* --rope-base */
    int rope_offset;        /* --rope-offset */
} flex_options;

typedef struct flex_state {
    flex_options opt;
    flex_spec spec;
    attn_problem p;
    uint64_t seed;
    /* the setting on the host (the reference) and its arrays */
    flex_setting host;
    int *doc;           /* [Lk] */
    float *table;       /* [H][2r + 1] */
    float *slopes;      /* [H] ALiBi's, the kernels' table (flex_alibi_slopes) */
    double *ref_slopes; /* [H] ALiBi's, the reference's own (ref_alibi_slope) */
    int n_docs;         /* documents (empty ones included) */
    flex_host_mod store;
    attn_mask mask;
    /* RoPE */
    double rope_base;
    float inv_freq[64];
    float *q_raw, *k_raw; /* host copies of the inputs before rotation */
    /* the device */
    int *d_doc;
    float *d_table, *d_slopes, *d_inv_freq;
    void *d_q_raw, *d_k_raw;
    int32_t *d_counts;
    unsigned long long *d_counters;
    attn_block_mask blocks, blocks_dev, partial, partial_dev;
    int32_t *counts;                 /* [B][nq][nk] visible entries per tile, from the device */
    double entries;                  /* visible entries over all sequences and heads */
    int64_t n_full, n_part, n_empty; /* tiles of each class over the sequences */
    const char *compared;            /* how the block mask was checked, for the banner line */
    flex_args args;
    bool counted[FLEX_KERNELS];
    unsigned long long calls[FLEX_KERNELS][4];
} flex_state;

static flex_state *of(void *state) { return (flex_state *)state; }

/* ---- step 1: the flags ----------------------------------------------------------------------- */

/* A comma-separated list of at most max integers >= 0 into out; *n of them. */
static int parse_int_list(const char *flag, const char *s, int *out, int max, int *n, char *why,
                          size_t len) {
    *n = 0;
    for (const char *c = s;;) {
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno != 0 || v < 0 || v > INT_MAX || (*end != ',' && *end != '\0')) {
            snprintf(why, len, "%s: entry %d is not an integer >= 0 (in '%.40s')", flag, *n + 1, s);
            return ATTN_EXIT_USAGE;
        }
        if (*n == max) {
            snprintf(why, len, "%s: more than %d entries", flag, max);
            return ATTN_EXIT_USAGE;
        }
        out[(*n)++] = (int)v;
        if (*end == '\0')
            return 0;
        c = end + 1;
    }
}

/* The document of every key position, from --doc-ids, --doc-lens or 8 documents of (nearly)
 * equal length. Empty documents are allowed: an id may skip values, a length may be 0. */
static int make_documents(flex_state *s, char *why, size_t len) {
    const int Lk = s->p.Lk;
    s->doc = (int *)malloc((size_t)Lk * sizeof(int));
    if (s->doc == NULL) {
        snprintf(why, len, "out of host memory for the document ids");
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.doc_ids != NULL) {
        int n = 0;
        if (parse_int_list("--doc-ids", s->opt.doc_ids, s->doc, Lk, &n, why, len) != 0)
            return ATTN_EXIT_USAGE;
        if (n != Lk) {
            snprintf(why, len, "--doc-ids: %d ids, but the Lk = %d keys need one each", n, Lk);
            return ATTN_EXIT_USAGE;
        }
        for (int j = 1; j < Lk; ++j)
            if (s->doc[j] < s->doc[j - 1]) {
                snprintf(why, len,
                         "--doc-ids: not non-decreasing at position %d (%d then %d): packed "
                         "documents are contiguous",
                         j, s->doc[j - 1], s->doc[j]);
                return ATTN_EXIT_USAGE;
            }
        s->n_docs = s->doc[Lk - 1] + 1;
        return 0;
    }
    int n = 8, *lens = (int *)malloc((size_t)(Lk + 8) * sizeof(int));
    if (lens == NULL) {
        snprintf(why, len, "out of host memory for the document lengths");
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.doc_lens != NULL) {
        int rc = parse_int_list("--doc-lens", s->opt.doc_lens, lens, Lk + 8, &n, why, len);
        long long sum = 0;
        for (int d = 0; rc == 0 && d < n; ++d)
            sum += lens[d];
        if (rc == 0 && sum != Lk) {
            snprintf(why, len, "--doc-lens: the lengths add up to %lld, not Lk = %d", sum, Lk);
            rc = ATTN_EXIT_USAGE;
        }
        if (rc != 0) {
            free(lens);
            return rc;
        }
    } else {
        for (int d = 0; d < n; ++d) /* 8 documents, lengths differing by at most 1 */
            lens[d] = (int)((int64_t)Lk * (d + 1) / n - (int64_t)Lk * d / n);
    }
    for (int d = 0, j = 0; d < n; ++d)
        for (int e = 0; e < lens[d]; ++e)
            s->doc[j++] = d;
    s->n_docs = n;
    free(lens);
    return 0;
}

/* The relative-position bias table [H][2r + 1]: --bias-table, or seeded values in [-1, 1) (the
 * harness's generator, stream 7). */
static int make_table(flex_state *s, char *why, size_t len) {
    const int H = s->p.H, r = s->spec.r;
    if ((int64_t)H * (2 * r + 1) > FLEX_MAX_REL_TABLE) {
        snprintf(why, len, "--mod rel_bias:r=%d with -H %d: a table of %lld biases (at most %d)", r,
                 H, (long long)H * (2 * r + 1), FLEX_MAX_REL_TABLE);
        return ATTN_EXIT_USAGE;
    }
    const int need = H * (2 * r + 1);
    s->table = (float *)malloc((size_t)need * sizeof(float));
    if (s->table == NULL) {
        snprintf(why, len, "out of host memory for the bias table");
        return ATTN_EXIT_USAGE;
    }
    if (s->opt.bias_table == NULL) {
        attn_fill_uniform(s->table, (size_t)need, s->seed, 7, 1.0f, ATTN_F32);
        return 0;
    }
    int n = 0;
    for (const char *c = s->opt.bias_table;;) {
        char *end;
        errno = 0;
        double v = strtod(c, &end);
        if (end == c || errno != 0 || !isfinite(v) || (*end != ',' && *end != '\0')) {
            snprintf(why, len, "--bias-table: value %d is not a finite number", n + 1);
            return ATTN_EXIT_USAGE;
        }
        if (n < need)
            s->table[n] = (float)v;
        n++;
        if (*end == '\0')
            break;
        c = end + 1;
    }
    if (n != need) {
        snprintf(why, len,
                 "--bias-table: %d values, but rel_bias:r=%d with H=%d needs H x (2r+1) = %d "
                 "(table[h][d + r], d = q - kv clamped to [-r, r])",
                 n, r, H, need);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

/* ---- the reference's own RoPE and ALiBi --------------------------------------------------------
 * Written here from their published definitions, not with the functors the kernels inline
 * (flex_mods.cuh): a wrong sign in the kernels' rotation or a slope given to the wrong head is
 * then a difference the check sees, where a reference calling the same functors would agree with
 * it. */

/* ALiBi's slope of head h of H (Press, Smith, Lewis, "Train Short, Test Long", 2022): for H a
 * power of two the geometric sequence that starts at 2^(-8/H) and has that ratio, so head h has
 * (2^(-8/H))^(h+1): 1/2, 1/4, ..., 1/256 for 8 heads. For other H the authors' code takes the
 * n = 2^floor(log2 H) slopes of n heads, then the 1st, 3rd, 5th, ... slopes of 2n heads, H - n
 * of them. */
static double ref_alibi_slope(int h, int H) {
    int n = 1;
    while (2 * n <= H)
        n *= 2;
    if (h < n)
        return pow(pow(2.0, -8.0 / n), h + 1);
    return pow(pow(2.0, -8.0 / (2 * n)), 2 * (h - n) + 1); /* index 2(h - n) of 2n heads' */
}

/* ALiBi's score_mod: the distance penalty m_h (kv - q) on the aligned positions (query i at
 * i + Lk - Lq), in double with the exact slope. */
static double ref_alibi_score(const void *ctx, int b, int h, int i, int j, double s) {
    (void)b;
    const flex_state *st = (const flex_state *)ctx;
    return s + st->ref_slopes[h] * (double)(j - (i + st->host.Lk - st->host.Lq));
}

/* RoPE, rotate-half convention (GPT-NeoX, Llama): elements c and c + D/2 of a row at position pos
 * are the real and imaginary parts of one complex number, multiplied by e^(i pos theta_c); the
 * angle is formed in fp32, float(pos) * inv_freq[c] (the convention the kernels and PyTorch's
 * implementations share), the product in double, each value rounded to the dtype. */
static void ref_rope_rows(float *x, int64_t n, int D, int pos0, const float *inv_freq,
                          attn_dtype t) {
    for (int64_t r = 0; r < n; ++r) {
        float *row = x + r * D;
        for (int c = 0; c < D / 2; ++c) {
            const double angle = (double)((float)(pos0 + (int)r) * inv_freq[c]);
            const double re = row[c], im = row[c + D / 2], wr = cos(angle), wi = sin(angle);
            row[c] = attn_round_dtype((float)(re * wr - im * wi), t);
            row[c + D / 2] = attn_round_dtype((float)(re * wi + im * wr), t);
        }
    }
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
    if (document && make_documents(s, why, len) != 0)
        return ATTN_EXIT_USAGE;
    if (rel && make_table(s, why, len) != 0)
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
            s->ref_slopes[h] = ref_alibi_slope(h, p->H);
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
    printf("modification: %s (%s)\n", spec, specs[s->spec.kind].what);
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

/* ---- step 3: the block mask, the reference's mask, the inputs ------------------------------- */

static void *copy_to_device(const void *src, size_t bytes) {
    void *dst = attn_device_alloc(bytes ? bytes : 16);
    if (dst != NULL && bytes > 0 && attn_to_device(dst, src, bytes) != 0) {
        attn_device_free(dst);
        return NULL;
    }
    return dst;
}

/* The tiles of the two masks back on the host, and the brute-force check of the device's. */
static int check_block_mask(flex_state *s, const attn_problem *p) {
    attn_block_mask *m = &s->blocks, *d = &s->blocks_dev;
    const size_t rows = (size_t)m->batches * m->num_q_blocks, cells = rows * m->num_k_blocks;
    if (attn_to_host(m->kv_num_blocks, d->kv_num_blocks, rows * 4) ||
        attn_to_host(m->full_kv_num_blocks, d->full_kv_num_blocks, rows * 4) ||
        attn_to_host(m->kv_indices, d->kv_indices, cells * 4) ||
        attn_to_host(m->full_kv_indices, d->full_kv_indices, cells * 4) ||
        attn_to_host(s->counts, s->d_counts, cells * 4))
        return 1;
    s->entries = 0.0;
    for (size_t c = 0; c < cells; ++c)
        s->entries += s->counts[c];
    s->entries *= p->H;
    s->n_full = s->n_part = 0;
    for (size_t r = 0; r < rows; ++r) {
        s->n_full += m->full_kv_num_blocks[r];
        s->n_part += m->kv_num_blocks[r];
    }
    s->n_empty = (int64_t)cells - s->n_full - s->n_part;
    /* the brute force: every entry of every tile through the reference's mask on the host. Up to
     * 2e8 evaluations (about a second); the tests run it at every shape they check. */
    const double cost = (double)p->B * p->Lq * p->Lk;
    if (cost > 2e8) {
        s->compared = "not compared with the brute force here (B x Lq x Lk > 2e8; the tests do)";
        return 0;
    }
    attn_block_mask want;
    if (attn_block_mask_from_mask(&want, p, &s->mask, FLEX_TILE, FLEX_TILE) != 0) {
        fprintf(stderr, "error: out of host memory for the brute-force block mask\n");
        return 1;
    }
    int rc = 0;
    for (size_t r = 0; r < rows && rc == 0; ++r) {
        const int nf = want.full_kv_num_blocks[r], np = want.kv_num_blocks[r];
        const int32_t *wf = want.full_kv_indices + r * m->num_k_blocks;
        const int32_t *wp = want.kv_indices + r * m->num_k_blocks;
        const int32_t *gf = m->full_kv_indices + r * m->num_k_blocks;
        const int32_t *gp = m->kv_indices + r * m->num_k_blocks;
        rc = nf != m->full_kv_num_blocks[r] || np != m->kv_num_blocks[r] ||
             memcmp(wf, gf, (size_t)nf * 4) != 0 || memcmp(wp, gp, (size_t)np * 4) != 0;
        if (rc != 0)
            fprintf(stderr,
                    "error: the block mask made on the device differs from the brute-force "
                    "classification at sequence %d, query tile %d: FULL %d, PARTIAL %d tiles "
                    "(want %d, %d)\n",
                    (int)(r / m->num_q_blocks), (int)(r % m->num_q_blocks),
                    m->full_kv_num_blocks[r], m->kv_num_blocks[r], nf, np);
    }
    attn_block_mask_free(&want);
    s->compared = "equal to the brute-force classification on the host (every entry evaluated)";
    return rc;
}

static int build(void *state, const attn_example *ex, const bool *selected, const attn_problem *p,
                 bool quiet, const attn_mask **mask, bool *dense_too) {
    flex_state *s = of(state);
    for (int n = 0; n < ex->num_kernels; ++n)
        *dense_too |= selected[n] && (ex->kernels[n].serves & ATTN_SERVES_BASELINE);
    s->host = (flex_setting){s->spec, p->H, p->Lq, p->Lk, s->doc, s->table, s->slopes};
    s->mask = flex_reference_mask(&s->host, &s->store);
    if (s->spec.kind == FLEX_ALIBI) { /* the reference's own score_mod (above) */
        s->mask.score = ref_alibi_score;
        s->mask.score_ctx = s;
    }
    *mask = &s->mask;
    /* the setting's arrays on the device */
    flex_setting dev = s->host;
    if (s->doc != NULL &&
        (dev.doc = s->d_doc = (int *)copy_to_device(s->doc, (size_t)p->Lk * sizeof(int))) == NULL)
        return 1;
    if (s->table != NULL &&
        (dev.table = s->d_table = (float *)copy_to_device(
             s->table, (size_t)p->H * (2 * s->spec.r + 1) * sizeof(float))) == NULL)
        return 1;
    if (s->slopes != NULL && (dev.slopes = s->d_slopes = (float *)copy_to_device(
                                  s->slopes, (size_t)p->H * sizeof(float))) == NULL)
        return 1;
    /* the block mask, on the device from the mask_mod */
    if (attn_block_mask_alloc(&s->blocks, p->B, p->Lq, p->Lk, FLEX_TILE, FLEX_TILE) != 0 ||
        attn_block_mask_alloc(&s->partial, p->B, p->Lq, p->Lk, FLEX_TILE, FLEX_TILE) != 0) {
        fprintf(stderr, "error: out of host memory for the block masks\n");
        return 1;
    }
    const size_t rows = (size_t)p->B * s->blocks.num_q_blocks;
    const size_t cells = rows * s->blocks.num_k_blocks;
    s->counts = (int32_t *)malloc(cells * sizeof(int32_t));
    s->d_counts = (int32_t *)attn_device_alloc(cells * sizeof(int32_t));
    if (s->counts == NULL || s->d_counts == NULL ||
        attn_block_mask_to_device(&s->blocks, &s->blocks_dev) != 0 ||
        flex_create_block_mask(&dev, p->B, &s->blocks_dev, s->d_counts) != 0 ||
        check_block_mask(s, p) != 0)
        return 1;
    /* --profile: create_block_mask's launches are not a kernel's; shown on their own */
    attn_profile made;
    if (attn_profile_collect(NULL, &made) > 0 && !quiet)
        printf("profile of create_block_mask (%llu launches): %llu global requests, %.3g MB from "
               "DRAM, the mask_mod on %.0f entries\n",
               made.launches, made.global_requests, made.dram_bytes * 1e-6,
               (double)p->B * p->Lq * p->Lk);
    /* flex_no_block_mask's: every tile of every row PARTIAL */
    for (size_t r = 0; r < rows; ++r) {
        s->partial.kv_num_blocks[r] = s->partial.num_k_blocks;
        for (int kb = 0; kb < s->partial.num_k_blocks; ++kb)
            s->partial.kv_indices[r * s->partial.num_k_blocks + kb] = kb;
    }
    if (attn_block_mask_to_device(&s->partial, &s->partial_dev) != 0)
        return 1;
    s->d_counters = (unsigned long long *)attn_device_alloc(FLEX_KERNELS * 4 * 8);
    if (s->d_counters == NULL)
        return 1;
    s->args.dev = dev;
    s->args.blocks = s->blocks_dev;
    s->args.partial = s->partial_dev;
    s->args.counters = s->d_counters;
    if (!quiet)
        printf("block mask (%d x %d tiles, FlexAttention's layout, all heads alike): %d x %d "
               "tiles per sequence; FULL %lld, PARTIAL %lld, EMPTY %lld over the %d sequences; "
               "made on the device by the mask_mod, %s\n",
               FLEX_TILE, FLEX_TILE, s->blocks.num_q_blocks, s->blocks.num_k_blocks,
               (long long)s->n_full, (long long)s->n_part, (long long)s->n_empty, p->B,
               s->compared);
    return 0;
}

/* flex_rope rotates Q and K itself (in fp32, rounding each value to the dtype) where the reference
 * rotates them in double: the two roundings of one value may land one unit apart, and a unit is at
 * most 2u |x| + s (u: the dtype's unit roundoff, s: its smallest subnormal step). A score moves by
 * at most |scale| sum_d (|dq||k| + |q||dk| + |dq||dk|) <= |scale| ((4u + 4u^2) |q| |k| + ...) by
 * Cauchy-Schwarz with the largest row norms, and the LSE (1-Lipschitz in the scores) no more. */
static double rope_lse_allowance(const attn_problem *p, const attn_host_inputs *in) {
    const double u = p->dtype == ATTN_F32 ? 0x1p-24 : p->dtype == ATTN_BF16 ? 0x1p-8 : 0x1p-11;
    const double step = p->dtype == ATTN_F32    ? 0x1p-149
                        : p->dtype == ATTN_BF16 ? 0x1p-133
                                                : 0x1p-24;
    double qn = 0.0, kn = 0.0; /* the largest row norms */
    for (size_t r = 0; r < in->q_elems / p->D; ++r) {
        double n2 = 0.0;
        for (int d = 0; d < p->D; ++d)
            n2 += (double)in->q[r * p->D + d] * in->q[r * p->D + d];
        qn = n2 > qn ? n2 : qn;
    }
    for (size_t r = 0; r < in->k_elems / p->D; ++r) {
        double n2 = 0.0;
        for (int d = 0; d < p->D; ++d)
            n2 += (double)in->k[r * p->D + d] * in->k[r * p->D + d];
        kn = n2 > kn ? n2 : kn;
    }
    qn = sqrt(qn);
    kn = sqrt(kn);
    const double dq = 2.0 * u * qn + step * sqrt((double)p->D),
                 dk = 2.0 * u * kn + step * sqrt((double)p->D);
    return fabs((double)p->scale) * (dq * kn + qn * dk + dq * dk);
}

/* --rope: the seeded Q and K kept for flex_rope, then rotated in place (key j at offset + j,
 * query i at offset + i + Lk - Lq) for the reference and the kernels that read them rotated. */
static int inputs(void *state, const attn_problem *p, attn_host_inputs *in) {
    flex_state *s = of(state);
    if (!s->opt.rope)
        return 0;
    const int D = p->D;
    for (int c = 0; c < D / 2; ++c)
        s->inv_freq[c] = (float)pow(s->rope_base, -2.0 * c / D);
    s->q_raw = (float *)malloc(in->q_elems * sizeof(float));
    s->k_raw = (float *)malloc(in->k_elems * sizeof(float));
    if (s->q_raw == NULL || s->k_raw == NULL) {
        fprintf(stderr, "error: out of host memory for the inputs before rotation\n");
        return 1;
    }
    memcpy(s->q_raw, in->q, in->q_elems * sizeof(float));
    memcpy(s->k_raw, in->k, in->k_elems * sizeof(float));
    for (int bh = 0; bh < p->B * p->H; ++bh) {
        ref_rope_rows(in->q + (size_t)bh * p->Lq * D, p->Lq, D, s->opt.rope_offset + p->Lk - p->Lq,
                      s->inv_freq, p->dtype);
        ref_rope_rows(in->k + (size_t)bh * p->Lk * D, p->Lk, D, s->opt.rope_offset, s->inv_freq,
                      p->dtype);
    }
    in->lse_allowance = rope_lse_allowance(p, in);
    return 0;
}

/* Packs fp32 values to the dtype and uploads them. */
static void *upload_dtype(const float *x, size_t count, attn_dtype t) {
    void *staging = malloc(count * attn_dtype_size(t) + 16);
    void *d = NULL;
    if (staging != NULL) {
        attn_pack(staging, x, count, t);
        d = copy_to_device(staging, count * attn_dtype_size(t));
    }
    free(staging);
    return d;
}

static void buffers(void *state, attn_buffers *b) {
    flex_state *s = of(state);
    if (s->opt.rope) {
        const attn_problem *p = &s->p;
        s->d_inv_freq = (float *)copy_to_device(s->inv_freq, (size_t)p->D / 2 * sizeof(float));
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

static int save(const char *dir, const char *name, const float *x, int ndim, int64_t d0, int64_t d1,
                int64_t d2) {
    char path[1024];
    const int64_t dims[3] = {d0, d1, d2};
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    if (attn_tensor_save(path, x, ndim, dims) != 0) {
        fprintf(stderr, "error: --dump: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* An int array as a float tensor (exact below 2^24). */
static int save_ints(const char *dir, const char *name, const int32_t *x, int ndim, int64_t d0,
                     int64_t d1, int64_t d2) {
    const int64_t n = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    float *f = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (f == NULL)
        return 1;
    for (int64_t e = 0; e < n; ++e)
        f[e] = (float)x[e];
    int rc = save(dir, name, f, ndim, d0, d1, d2);
    free(f);
    return rc;
}

/* doc_ids [Lk], bias_table [H, 2r+1], alibi_slopes [H], the block mask (FlexAttention's four
 * arrays, [B, nq] and [B, nq, nk], and the visible entries per tile), and with --rope the inputs
 * before rotation (q_raw, k_raw [rows, D]) and inv_freq [D/2]. */
static int dump(void *state, const char *dir) {
    flex_state *s = of(state);
    const attn_problem *p = &s->p;
    const attn_block_mask *m = &s->blocks;
    const int nq = m->num_q_blocks, nk = m->num_k_blocks;
    float slopes[1024];
    int rc = 0;
    if (s->doc != NULL)
        rc |= save_ints(dir, "doc_ids", s->doc, 1, p->Lk, 0, 0);
    if (s->table != NULL)
        rc |= save(dir, "bias_table", s->table, 2, p->H, 2 * s->spec.r + 1, 0);
    if (p->H <= 1024) {
        flex_alibi_slopes(p->H, slopes);
        rc |= save(dir, "alibi_slopes", slopes, 1, p->H, 0, 0);
    }
    rc |= save_ints(dir, "kv_num_blocks", m->kv_num_blocks, 2, p->B, nq, 0);
    rc |= save_ints(dir, "kv_indices", m->kv_indices, 3, p->B, nq, nk);
    rc |= save_ints(dir, "full_kv_num_blocks", m->full_kv_num_blocks, 2, p->B, nq, 0);
    rc |= save_ints(dir, "full_kv_indices", m->full_kv_indices, 3, p->B, nq, nk);
    rc |= save_ints(dir, "tile_counts", s->counts, 3, p->B, nq, nk);
    if (s->opt.rope) {
        rc |= save(dir, "q_raw", s->q_raw, 2, (int64_t)attn_problem_q_elems(p) / p->D, p->D, 0);
        rc |= save(dir, "k_raw", s->k_raw, 2, (int64_t)attn_problem_k_elems(p) / p->D, p->D, 0);
        rc |= save(dir, "inv_freq", s->inv_freq, 1, p->D / 2, 0, 0);
    }
    return rc != 0;
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
    flex_option_table,
    (int)(sizeof flex_option_table / sizeof flex_option_table[0]),
    sizeof(flex_options),
    usage,
    sizeof(flex_state),
    prepare,
    verdict,
    banner,
    build,
    buffers,
    kernel_options,
    NULL, /* stages, num_stages, setup, flops: a staged example's */
    0,
    NULL,
    NULL,
    record_json,
    dump,
    after_table,
    release,
    inputs,
};
