/* flex_spec.c — example 08's flags that describe the setting: --mod SPEC (the modification and
 * its one parameter), the documents of --mod document (--doc-lens, --doc-ids) and the bias table of
 * --mod rel_bias (--bias-table), each checked against the problem with a one-line error.
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

const char *flex_spec_what(flex_kind k) { return specs[k].what; }

/* ---- the setting's arrays from the flags ------------------------------------------------------
 */

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
int flex_make_documents(flex_state *s, char *why, size_t len) {
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
int flex_make_table(flex_state *s, char *why, size_t len) {
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
