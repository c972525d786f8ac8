/* patterns.c — sparse attention patterns on the host: spec parsing and formatting, the
 * reference's mask, the per-tile block mask builder, the CSR form, statistics.
 * Conventions and definitions: attn/sparse/patterns.h and device/patterns.cuh. */
#include "attn/sparse/patterns.h"

#include "../fail.h"
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"

/* Widths, strides and block sizes are at most this (2^28 tokens), so products stay in int. */
#define MAX_PARAM (1 << 28)

static const char *const kind_names[ATTN_PATTERN_KINDS] = {
    "window", "causal_window", "dilated", "strided", "fixed", "global", "bigbird"};

/* Parameters each kind takes, required ones first; the rest are optional. */
static const char *const kind_params[ATTN_PATTERN_KINDS] = {"w",   "w",   "w,d",     "l",
                                                            "l,c", "g|n", "b,r;seed"};

/* The kinds examples defined and registered, numbered ATTN_PATTERN_KINDS + n. */
static const attn_pattern_kind_def *own_kinds[ATTN_PATTERN_MAX_OWN];
static int n_own;

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* One line per kind for --help: the spec and the rule (delta = j - a, a the aligned query
 * position). */
static const char *const kind_usage[ATTN_PATTERN_KINDS] = {
    "window:w=W               |j - a| <= w (Longformer)",
    "causal_window:w=W        a - W < j <= a (Mistral)",
    "dilated:w=W,d=D          j = a + d*m, m in [-w, w] (Longformer, dilated)",
    "strided:l=L              j <= a and (a - j < l or (a - j) mod l = 0) (Sparse Transformer)",
    "fixed:l=L,c=C            same l-block, or j mod l >= l - c (Sparse Transformer)",
    "global:g=I,J-K | n=N     rows and columns of G dense (n=N: tokens 0..N-1)",
    "bigbird:b=B,r=R[,seed=S] blocks of b: |I - J| <= 1, first/last block, r random (BigBird)"};

void attn_pattern_usage(FILE *f, const struct attn_pattern_kind_def *const *kinds) {
    for (int k = 0; k < ATTN_PATTERN_KINDS; ++k)
        fprintf(f, "  %s\n", kind_usage[k]);
    for (int k = 0; kinds != NULL && kinds[k] != NULL; ++k)
        fprintf(f, "  %s\n", kinds[k]->usage);
}

int attn_pattern_register(const attn_pattern_kind_def *const *kinds) {
    for (int k = 0; kinds != NULL && kinds[k] != NULL; ++k) {
        bool known = false;
        for (int n = 0; n < n_own; ++n)
            known |= own_kinds[n] == kinds[k];
        for (int n = 0; n < ATTN_PATTERN_KINDS; ++n)
            if (strcmp(kind_names[n], kinds[k]->name) == 0)
                return -1;
        if (known)
            continue;
        for (int n = 0; n < n_own; ++n)
            if (strcmp(own_kinds[n]->name, kinds[k]->name) == 0)
                return -1;
        if (n_own == ATTN_PATTERN_MAX_OWN)
            return -1;
        own_kinds[n_own++] = kinds[k];
    }
    return 0;
}

const attn_pattern_kind_def *attn_pattern_own_kind(int kind) {
    int n = kind - ATTN_PATTERN_KINDS;
    return n >= 0 && n < n_own ? own_kinds[n] : NULL;
}

const char *attn_pattern_kind_name(int kind) {
    if (kind >= 0 && kind < ATTN_PATTERN_KINDS)
        return kind_names[kind];
    const attn_pattern_kind_def *def = attn_pattern_own_kind(kind);
    return def != NULL ? def->name : NULL;
}

int attn_pattern_keep_host(const attn_pattern *pat, int i, int j, int Lq, int Lk) {
    if (attn_pattern_keep(pat, i, j, Lq, Lk)) /* dense, or one of the chapter's kinds keeps it */
        return 1;
    for (int p = 0; p < pat->n_parts; ++p) { /* the parts of an example's own kinds */
        const attn_pattern_kind_def *def = attn_pattern_own_kind(pat->part[p].kind);
        if (def != NULL && def->keep(&pat->part[p], i + (Lk - Lq), j, Lk))
            return 1;
    }
    return 0;
}

unsigned attn_pattern_kinds(const attn_pattern *pat) {
    unsigned bits = 0;
    for (int p = 0; p < pat->n_parts; ++p)
        bits |= ATTN_PATTERN_BIT(pat->part[p].kind);
    return bits;
}

/* ---- parsing --------------------------------------------------------------------------------- */

/* Decimal digits only, value <= max. */
static bool parse_number(const char *s, size_t n, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t k = 0; k < n; ++k) {
        if (s[k] < '0' || s[k] > '9')
            return false;
        unsigned digit = (unsigned)(s[k] - '0');
        if (v > (max - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

/* Adds [lo, hi) to the ranges of a global part, keeping them sorted and merged (ranges that
 * overlap or touch become one). -1 when more than ATTN_PATTERN_MAX_RANGES remain. */
static int add_range(attn_pattern_part *pt, int lo, int hi) {
    int los[ATTN_PATTERN_MAX_RANGES + 1], his[ATTN_PATTERN_MAX_RANGES + 1], n = pt->n_ranges;
    memcpy(los, pt->lo, sizeof(int) * (size_t)n);
    memcpy(his, pt->hi, sizeof(int) * (size_t)n);
    int at = n++;
    for (; at > 0 && los[at - 1] > lo; --at) { /* insertion by start */
        los[at] = los[at - 1];
        his[at] = his[at - 1];
    }
    los[at] = lo, his[at] = hi;
    int m = 0;
    for (int k = 0; k < n; ++k) {
        if (m > 0 && los[k] <= his[m - 1])
            his[m - 1] = imax(his[m - 1], his[k]);
        else
            los[m] = los[k], his[m] = his[k], ++m;
    }
    if (m > ATTN_PATTERN_MAX_RANGES)
        return -1;
    pt->n_ranges = m;
    memcpy(pt->lo, los, sizeof(int) * (size_t)m);
    memcpy(pt->hi, his, sizeof(int) * (size_t)m);
    return 0;
}

/* One global item: "N" or "N-M" (inclusive). */
static int parse_global_item(attn_pattern_part *pt, const char *s, size_t n, const char *part,
                             char *err, size_t len) {
    const char *dash = memchr(s, '-', n);
    uint64_t lo = 0, hi = 0;
    bool ok = dash ? parse_number(s, (size_t)(dash - s), MAX_PARAM, &lo) &&
                         parse_number(dash + 1, n - (size_t)(dash - s) - 1, MAX_PARAM, &hi)
                   : parse_number(s, n, MAX_PARAM, &lo);
    if (!dash)
        hi = lo;
    if (!ok || hi < lo)
        return attn_fail(err, len,
                         "pattern part '%s': global positions must be N or N-M with N <= M "
                         "(got '%.*s')",
                         part, (int)n, s);
    if (add_range(pt, (int)lo, (int)hi + 1) != 0)
        return attn_fail(err, len, "pattern part '%s': more than %d separate global ranges", part,
                         ATTN_PATTERN_MAX_RANGES);
    return 0;
}

/* Sets parameter name=value of part pt; a global list may continue (continuation). */
/* "w, d" or "b, w; s": the parameters of an example's own kind, for messages. */
static void own_params(const attn_pattern_kind_def *def, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < ATTN_PATTERN_MAX_PARAMS && def->params[k].name != NULL && used < len; ++k)
        used += (size_t)snprintf(buf + used, len - used, "%s%s%s", k ? "," : "",
                                 def->params[k].name, def->params[k].required ? "" : " (optional)");
}

/* Sets parameter name=value of a part of an example's own kind. */
static int set_own_param(attn_pattern_part *pt, const attn_pattern_kind_def *def, const char *name,
                         size_t name_len, const char *v, size_t n, const char *part, char *err,
                         size_t len) {
    for (int k = 0; k < ATTN_PATTERN_MAX_PARAMS && def->params[k].name != NULL; ++k) {
        uint64_t x = 0;
        if (name_len != strlen(def->params[k].name) ||
            strncmp(name, def->params[k].name, name_len) != 0)
            continue;
        if (!parse_number(v, n, (uint64_t)def->params[k].max, &x) || (int)x < def->params[k].min)
            return attn_fail(
                err, len, "pattern part '%s': %.*s must be an integer in [%d, %d] (got '%.*s')",
                part, (int)name_len, name, def->params[k].min, def->params[k].max, (int)n, v);
        pt->x[k] = (int)x;
        return 0;
    }
    char names[64];
    own_params(def, names, sizeof names);
    return attn_fail(err, len, "pattern part '%s': unknown parameter '%.*s' (%s takes %s)", part,
                     (int)name_len, name, def->name, names);
}

static int set_param(attn_pattern_part *pt, const char *name, size_t name_len, const char *v,
                     size_t n, const char *part, char *err, size_t len) {
    const attn_pattern_kind_def *def = attn_pattern_own_kind(pt->kind);
    if (def != NULL)
        return set_own_param(pt, def, name, name_len, v, n, part, err, len);
    const char *kind = kind_names[pt->kind];
#define IS(s) (name_len == strlen(s) && strncmp(name, s, name_len) == 0)
    if (pt->kind == ATTN_PATTERN_GLOBAL && IS("g"))
        return parse_global_item(pt, v, n, part, err, len);
    uint64_t x = 0;
    if (pt->kind == ATTN_PATTERN_BIGBIRD && IS("seed")) {
        if (!parse_number(v, n, UINT64_MAX, &x))
            return attn_fail(err, len, "pattern part '%s': seed must be an integer (got '%.*s')",
                             part, (int)n, v);
        pt->seed = x;
        return 0;
    }
    int *field = NULL, min = 0, max = MAX_PARAM;
    switch (pt->kind) {
    case ATTN_PATTERN_WINDOW:
    case ATTN_PATTERN_CAUSAL_WINDOW:
        field = IS("w") ? &pt->w : NULL;
        break;
    case ATTN_PATTERN_DILATED:
        field = IS("w") ? &pt->w : IS("d") ? &pt->d : NULL;
        min = IS("d") ? 1 : 0;
        break;
    case ATTN_PATTERN_STRIDED:
    case ATTN_PATTERN_FIXED:
        field = IS("l") ? &pt->l : IS("c") && pt->kind == ATTN_PATTERN_FIXED ? &pt->c : NULL;
        min = IS("l") ? 1 : 0;
        break;
    case ATTN_PATTERN_GLOBAL:
        field = IS("n") ? &pt->w : NULL; /* n=K: the first K tokens, stored as [0, K) below */
        min = 1;
        break;
    case ATTN_PATTERN_BIGBIRD:
        field = IS("b") ? &pt->b : IS("r") ? &pt->r : NULL;
        min = IS("b") ? 1 : 0;
        max = IS("r") ? ATTN_PATTERN_MAX_RANDOM : MAX_PARAM;
        break;
    }
#undef IS
    if (field == NULL)
        return attn_fail(err, len, "pattern part '%s': unknown parameter '%.*s' (%s takes %s)",
                         part, (int)name_len, name, kind, kind_params[pt->kind]);
    if (!parse_number(v, n, (uint64_t)max, &x) || (int)x < min)
        return attn_fail(err, len,
                         "pattern part '%s': %.*s must be an integer in [%d, %d] (got '%.*s')",
                         part, (int)name_len, name, min, max, (int)n, v);
    *field = (int)x;
    if (pt->kind == ATTN_PATTERN_GLOBAL && add_range(pt, 0, (int)x) != 0)
        return attn_fail(err, len, "pattern part '%s': more than %d separate global ranges", part,
                         ATTN_PATTERN_MAX_RANGES);
    return 0;
}

/* One part "kind:a=1,b=2" (text[0..n)). */
static int parse_part(const char *text, size_t n, attn_pattern_part *pt, char *err, size_t len) {
    char part[128];
    snprintf(part, sizeof part, "%.*s", (int)n, text);
    const char *colon = memchr(text, ':', n);
    size_t kind_len = colon ? (size_t)(colon - text) : n;
    memset(pt, 0, sizeof *pt);
    pt->kind = -1;
    for (int k = 0; k < ATTN_PATTERN_KINDS + n_own; ++k) {
        const char *name = attn_pattern_kind_name(k);
        if (kind_len == strlen(name) && strncmp(text, name, kind_len) == 0)
            pt->kind = k;
    }
    if (pt->kind < 0) {
        char kinds[256] = "";
        for (int k = 0; k < ATTN_PATTERN_KINDS + n_own; ++k)
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s, ",
                     attn_pattern_kind_name(k));
        return attn_fail(err, len, "unknown pattern '%s' (kinds: %snone)", part, kinds);
    }
    pt->w = pt->d = pt->l = pt->c = pt->b = pt->r = -1; /* -1: not given */
    for (int k = 0; k < ATTN_PATTERN_MAX_PARAMS; ++k)
        pt->x[k] = -1;
    const char *seen[16]; /* the parameter names given, so that one given twice is refused */
    size_t seen_len[16];
    int n_seen = 0;
    int given_g = 0;
    const char *cur = colon ? colon + 1 : text + n, *end = text + n;
    const char *name = NULL;
    size_t name_len = 0;
    while (cur < end) {
        const char *comma = memchr(cur, ',', (size_t)(end - cur));
        const char *tok_end = comma ? comma : end;
        const char *eq = memchr(cur, '=', (size_t)(tok_end - cur));
        const char *value = cur;
        if (eq != NULL) {
            name = cur, name_len = (size_t)(eq - cur), value = eq + 1;
            for (int s = 0; s < n_seen; ++s)
                if (seen_len[s] == name_len && strncmp(seen[s], name, name_len) == 0)
                    return attn_fail(err, len, "pattern part '%s': %.*s is given twice", part,
                                     (int)name_len, name);
            if (n_seen < 16)
                seen[n_seen] = name, seen_len[n_seen++] = name_len;
        } else if (name == NULL ||
                   !(pt->kind == ATTN_PATTERN_GLOBAL && name_len == 1 && name[0] == 'g')) {
            return attn_fail(err, len, "pattern part '%s': expected name=value, got '%.*s'", part,
                             (int)(tok_end - cur), cur);
        }
        given_g |= pt->kind == ATTN_PATTERN_GLOBAL && name_len == 1 && name[0] == 'g';
        if (set_param(pt, name, name_len, value, (size_t)(tok_end - value), part, err, len) != 0)
            return -1;
        cur = comma ? comma + 1 : end;
    }
    /* Required parameters; an example's own kind: its defaults for the optional ones. */
    const char *missing = NULL;
    const attn_pattern_kind_def *def = attn_pattern_own_kind(pt->kind);
    for (int k = 0; def != NULL && k < ATTN_PATTERN_MAX_PARAMS && def->params[k].name != NULL;
         ++k) {
        if (pt->x[k] < 0 && def->params[k].required && missing == NULL)
            missing = def->params[k].name;
        pt->x[k] = pt->x[k] < 0 ? def->params[k].def : pt->x[k];
    }
    if (def != NULL) {
        char names[64];
        own_params(def, names, sizeof names);
        if (missing != NULL)
            return attn_fail(err, len, "pattern part '%s': missing parameter %s (%s takes %s)",
                             part, missing, def->name, names);
        return 0;
    }
    switch (pt->kind) {
    case ATTN_PATTERN_WINDOW:
    case ATTN_PATTERN_CAUSAL_WINDOW:
        missing = pt->w < 0 ? "w" : NULL;
        break;
    case ATTN_PATTERN_DILATED:
        missing = pt->w < 0 ? "w" : pt->d < 0 ? "d" : NULL;
        if (!missing && (int64_t)pt->w * pt->d > MAX_PARAM)
            return attn_fail(err, len, "pattern part '%s': w*d must be at most %d", part,
                             MAX_PARAM);
        break;
    case ATTN_PATTERN_STRIDED:
        missing = pt->l < 0 ? "l" : NULL;
        break;
    case ATTN_PATTERN_FIXED:
        missing = pt->l < 0 ? "l" : pt->c < 0 ? "c" : NULL;
        if (!missing && pt->c > pt->l)
            return attn_fail(err, len, "pattern part '%s': c must be at most l (got c=%d, l=%d)",
                             part, pt->c, pt->l);
        break;
    case ATTN_PATTERN_GLOBAL:
        missing = pt->n_ranges == 0 && !given_g ? "g (or n)" : NULL;
        break;
    case ATTN_PATTERN_BIGBIRD:
        missing = pt->b < 0 ? "b" : pt->r < 0 ? "r" : NULL;
        break;
    }
    if (missing != NULL)
        return attn_fail(err, len, "pattern part '%s': missing parameter %s (%s takes %s)", part,
                         missing, kind_names[pt->kind], kind_params[pt->kind]);
    return 0;
}

static int parse_spec(const char *spec, attn_pattern *out, char *err, size_t err_len) {
    if (spec == NULL || strcmp(spec, "none") == 0 || strcmp(spec, "dense") == 0)
        return 0;
    if (spec[0] == '\0')
        return attn_fail(err, err_len, "empty pattern (use 'none' for dense attention)");
    for (const char *s = spec; *s; ++s)
        if (isspace((unsigned char)*s))
            return attn_fail(err, err_len, "pattern '%s' contains a space", spec);
    const char *cur = spec;
    for (;;) {
        const char *plus = strchr(cur, '+');
        size_t n = plus ? (size_t)(plus - cur) : strlen(cur);
        if (n == 0)
            return attn_fail(err, err_len, "pattern '%s' has an empty part", spec);
        if (out->n_parts == ATTN_PATTERN_MAX_PARTS)
            return attn_fail(err, err_len, "pattern '%s' has more than %d parts", spec,
                             ATTN_PATTERN_MAX_PARTS);
        if (parse_part(cur, n, &out->part[out->n_parts], err, err_len) != 0)
            return -1;
        out->n_parts++;
        if (plus == NULL)
            return 0;
        cur = plus + 1;
    }
}

int attn_pattern_parse(const char *spec, attn_pattern *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    if (parse_spec(spec, out, err, err_len) == 0)
        return 0;
    memset(out, 0, sizeof *out); /* no half-parsed pattern */
    return -1;
}

void attn_pattern_format(const attn_pattern *pat, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    if (pat->n_parts == 0)
        snprintf(buf, len, "none");
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (used < len)                                                                            \
            used += (size_t)snprintf(buf + used, len - used, __VA_ARGS__);                         \
    } while (0)
    for (int p = 0; p < pat->n_parts; ++p) {
        const attn_pattern_part *pt = &pat->part[p];
        const attn_pattern_kind_def *def = attn_pattern_own_kind(pt->kind);
        PUT("%s%s:", p ? "+" : "", attn_pattern_kind_name(pt->kind));
        for (int k = 0; def != NULL && k < ATTN_PATTERN_MAX_PARAMS && def->params[k].name != NULL;
             ++k)
            PUT("%s%s=%d", k ? "," : "", def->params[k].name, pt->x[k]);
        switch (pt->kind) {
        case ATTN_PATTERN_WINDOW:
        case ATTN_PATTERN_CAUSAL_WINDOW:
            PUT("w=%d", pt->w);
            break;
        case ATTN_PATTERN_DILATED:
            PUT("w=%d,d=%d", pt->w, pt->d);
            break;
        case ATTN_PATTERN_STRIDED:
            PUT("l=%d", pt->l);
            break;
        case ATTN_PATTERN_FIXED:
            PUT("l=%d,c=%d", pt->l, pt->c);
            break;
        case ATTN_PATTERN_GLOBAL:
            PUT("g=");
            for (int k = 0; k < pt->n_ranges; ++k) {
                if (pt->hi[k] - pt->lo[k] == 1)
                    PUT("%s%d", k ? "," : "", pt->lo[k]);
                else
                    PUT("%s%d-%d", k ? "," : "", pt->lo[k], pt->hi[k] - 1);
            }
            break;
        case ATTN_PATTERN_BIGBIRD:
            PUT("b=%d,r=%d,seed=%llu", pt->b, pt->r, (unsigned long long)pt->seed);
            break;
        }
    }
#undef PUT
}

/* ---- the reference's mask -------------------------------------------------------------------- */

static int pattern_keep(const void *ctx, int b, int h, int i, int j) {
    (void)h;
    const attn_pattern_ctx *c = (const attn_pattern_ctx *)ctx;
    return attn_pattern_keep_host(c->pattern, i, j, attn_problem_seq_q(c->problem, b),
                                  attn_problem_seq_k(c->problem, b));
}

attn_mask attn_pattern_mask(const attn_pattern_ctx *ctx) {
    attn_mask m = {ATTN_MASK_PREDICATE, pattern_keep, ctx, NULL, NULL};
    return m;
}

/* ---- block mask: one tile at a time ---------------------------------------------------------- */

typedef enum tile_class { TILE_NONE = 0, TILE_PARTIAL = 1, TILE_FULL = 2 } tile_class;

/* A tile of one sequence: aligned query positions a0..a1 and keys j0..j1 (in range, non-empty),
 * Lk keys in the sequence, causal (key j visible only if j <= a). */
typedef struct tile {
    int a0, a1, j0, j1, Lk;
    bool causal;
} tile;

/* A set of deltas (delta = j - a): the band [blo, bhi] and the multiples of m in [plo, phi]
 * (m = 0: none). Every pattern that depends on delta only is one of these. */
typedef struct delta_set {
    int blo, bhi;
    int m, plo, phi;
} delta_set;

static bool has_multiple(int lo, int hi, int m) {
    return lo <= hi && attn_floor_div(hi, m) * (int64_t)m >= lo;
}

/* Some delta of [x, y] is in s. */
static bool delta_any(const delta_set *s, int x, int y) {
    if (x > y)
        return false;
    if (imax(x, s->blo) <= imin(y, s->bhi))
        return true;
    return s->m > 0 && has_multiple(imax(x, s->plo), imin(y, s->phi), s->m);
}

/* Every delta of [u, v] (non-empty) is in the progression of s. */
static bool in_progression(const delta_set *s, int u, int v) {
    if (s->m == 0 || u < s->plo || v > s->phi)
        return false;
    return s->m == 1 || (u == v && u % s->m == 0);
}

/* Every delta of [x, y] is in s: the parts outside the band must lie in the progression. */
static bool delta_all(const delta_set *s, int x, int y) {
    int u1 = x, v1 = imin(y, s->blo - 1), u2 = imax(x, s->bhi + 1), v2 = y;
    return (u1 > v1 || in_progression(s, u1, v1)) && (u2 > v2 || in_progression(s, u2, v2));
}

static tile_class classify_delta(const delta_set *s, const tile *t) {
    int x = t->j0 - t->a1, y = t->j1 - t->a0; /* every delta in [x, y] occurs in the tile */
    if (!delta_any(s, x, t->causal ? imin(y, 0) : y))
        return TILE_NONE;
    return (!t->causal || y <= 0) && delta_all(s, x, y) ? TILE_FULL : TILE_PARTIAL;
}

/* Largest position of G in [lo, hi], or INT_MIN; smallest, or INT_MAX. An empty interval
 * (lo > hi: a causal tile whose rows all precede its keys) holds none. */
static int global_max_in(const attn_pattern_part *pt, int lo, int hi) {
    int best = INT_MIN;
    if (lo > hi)
        return best;
    for (int k = 0; k < pt->n_ranges; ++k)
        if (pt->lo[k] <= hi && pt->hi[k] - 1 >= lo)
            best = imax(best, imin(hi, pt->hi[k] - 1));
    return best;
}
static int global_min_in(const attn_pattern_part *pt, int lo, int hi) {
    int best = INT_MAX;
    if (lo > hi)
        return best;
    for (int k = 0; k < pt->n_ranges; ++k)
        if (pt->lo[k] <= hi && pt->hi[k] - 1 >= lo)
            best = imin(best, imax(lo, pt->lo[k]));
    return best;
}
static bool global_covers(const attn_pattern_part *pt, int lo, int hi) {
    for (int k = 0; k < pt->n_ranges; ++k) /* ranges are merged: one must hold [lo, hi] */
        if (pt->lo[k] <= lo && hi < pt->hi[k])
            return true;
    return false;
}

static tile_class classify_global(const attn_pattern_part *pt, const tile *t) {
    /* A global row a sees some key of the tile (causal: j0 <= a); a global column j is seen by
     * some row (causal: j <= a1). */
    bool row = global_max_in(pt, t->causal ? imax(t->a0, t->j0) : t->a0, t->a1) != INT_MIN;
    bool col = global_min_in(pt, t->j0, t->causal ? imin(t->j1, t->a1) : t->j1) != INT_MAX;
    if (!row && !col)
        return TILE_NONE;
    /* Full iff every row or every column is global (else a non-global row meets a non-global
     * column), and causality hides nothing. */
    bool all = global_covers(pt, t->a0, t->a1) || global_covers(pt, t->j0, t->j1);
    return all && (!t->causal || t->j1 <= t->a0) ? TILE_FULL : TILE_PARTIAL;
}

static tile_class classify_fixed(const attn_pattern_part *pt, const tile *t) {
    int64_t visible = 0;
    for (int j = t->j0; j <= t->j1; ++j) { /* the rows that see key j form one interval */
        int lo = t->a0, hi = t->a1;
        if (j % pt->l < pt->l - pt->c) { /* not a summary column: rows of j's own l-block */
            int blk = attn_floor_div(j, pt->l) * pt->l;
            lo = imax(lo, blk), hi = imin(hi, blk + pt->l - 1);
        }
        if (t->causal)
            lo = imax(lo, j);
        visible += hi >= lo ? hi - lo + 1 : 0;
    }
    int64_t entries = (int64_t)(t->a1 - t->a0 + 1) * (t->j1 - t->j0 + 1);
    return visible == 0 ? TILE_NONE : visible == entries ? TILE_FULL : TILE_PARTIAL;
}

/* The patterns defined on blocks of b tokens (bigbird, an example's own block kinds): every
 * (query block, key block) pair the tile touches, by the kind's rule on blocks. */
static tile_class classify_blocks(const attn_pattern_part *pt, const tile *t, int b,
                                  int (*block_keep)(const attn_pattern_part *, int, int, int)) {
    int nb = (t->Lk + b - 1) / b;
    bool any = false, all = true;
    for (int I = attn_floor_div(t->a0, b); I <= attn_floor_div(t->a1, b); ++I) {
        int ahi = imin(t->a1, I * b + b - 1);
        for (int J = t->j0 / b; J <= t->j1 / b; ++J) {
            bool keep = block_keep(pt, I, J, nb) != 0;
            all = all && keep;
            any = any || (keep && (!t->causal || imax(t->j0, J * b) <= ahi));
        }
    }
    if (!any)
        return TILE_NONE;
    return all && (!t->causal || t->j1 <= t->a0) ? TILE_FULL : TILE_PARTIAL;
}

/* An example's own kind without a rule on blocks: every entry of the tile, by its rule. */
static tile_class classify_entries(const attn_pattern_part *pt, const attn_pattern_kind_def *def,
                                   const tile *t) {
    int64_t kept = 0, entries = 0;
    for (int a = t->a0; a <= t->a1; ++a)
        for (int j = t->j0; j <= t->j1; ++j) {
            ++entries;
            kept += (!t->causal || j <= a) && def->keep(pt, a, j, t->Lk);
        }
    return kept == 0 ? TILE_NONE : kept == entries ? TILE_FULL : TILE_PARTIAL;
}

static tile_class classify_part(const attn_pattern_part *pt, const tile *t) {
    delta_set s = {1, 0, 0, 1, 0}; /* empty */
    const attn_pattern_kind_def *def = attn_pattern_own_kind(pt->kind);
    if (def != NULL)
        return def->block_keep != NULL
                   ? classify_blocks(pt, t, pt->x[def->block_param], def->block_keep)
                   : classify_entries(pt, def, t);
    switch (pt->kind) {
    case ATTN_PATTERN_WINDOW:
        s.blo = -pt->w, s.bhi = pt->w;
        return classify_delta(&s, t);
    case ATTN_PATTERN_CAUSAL_WINDOW:
        s.blo = 1 - pt->w, s.bhi = 0;
        return classify_delta(&s, t);
    case ATTN_PATTERN_DILATED:
        s.m = pt->d, s.plo = -pt->d * pt->w, s.phi = pt->d * pt->w;
        return classify_delta(&s, t);
    case ATTN_PATTERN_STRIDED:
        s.blo = 1 - pt->l, s.bhi = 0, s.m = pt->l, s.plo = INT_MIN / 2, s.phi = 0;
        return classify_delta(&s, t);
    case ATTN_PATTERN_FIXED:
        return classify_fixed(pt, t);
    case ATTN_PATTERN_GLOBAL:
        return classify_global(pt, t);
    case ATTN_PATTERN_BIGBIRD:
        return classify_blocks(pt, t, pt->b, attn_bigbird_block_keep);
    }
    return TILE_NONE;
}

static tile_class classify(const attn_pattern *pat, const tile *t) {
    if (pat->n_parts == 0) { /* dense: only causality */
        if (t->causal && t->j0 > t->a1)
            return TILE_NONE;
        return !t->causal || t->j1 <= t->a0 ? TILE_FULL : TILE_PARTIAL;
    }
    tile_class best = TILE_NONE;
    for (int p = 0; p < pat->n_parts && best != TILE_FULL; ++p) {
        tile_class c = classify_part(&pat->part[p], t);
        best = c > best ? c : best;
    }
    return best;
}

int attn_pattern_block_mask(attn_block_mask *m, const attn_pattern *pat, const attn_problem *p,
                            int block_q, int block_k) {
    if (attn_problem_validate(p, NULL, 0) != 0 ||
        attn_block_mask_alloc(m, p->B, p->Lq, p->Lk, block_q, block_k) != 0)
        return -1;
    for (int b = 0; b < p->B; ++b) {
        int seq_q = attn_problem_seq_q(p, b), seq_k = attn_problem_seq_k(p, b);
        for (int qb = 0; qb < m->num_q_blocks; ++qb) {
            size_t row = (size_t)b * m->num_q_blocks + qb;
            int32_t *full = m->full_kv_indices + row * m->num_k_blocks;
            int32_t *part = m->kv_indices + row * m->num_k_blocks;
            int n_full = 0, n_part = 0;
            int i0 = qb * block_q, i1 = imin(i0 + block_q, seq_q) - 1;
            for (int kb = 0; kb < m->num_k_blocks && i0 <= i1; ++kb) {
                tile t = {i0 + seq_k - seq_q,
                          i1 + seq_k - seq_q,
                          kb * block_k,
                          imin(kb * block_k + block_k, seq_k) - 1,
                          seq_k,
                          p->causal};
                if (t.j0 > t.j1)
                    break;
                tile_class c = classify(pat, &t);
                if (c == TILE_FULL)
                    full[n_full++] = kb;
                else if (c == TILE_PARTIAL)
                    part[n_part++] = kb;
            }
            m->full_kv_num_blocks[row] = n_full;
            m->kv_num_blocks[row] = n_part;
        }
    }
    return 0;
}

/* ---- CSR ------------------------------------------------------------------------------------- */

/* Keys of query i of sequence b: walks the listed tiles of its query block in ascending order
 * (the full and partial lists merged), writing them to cols when not NULL. Returns the count. */
static int64_t row_keys(const attn_pattern *pat, const attn_problem *p, const attn_block_mask *m,
                        int b, int i, int32_t *cols) {
    int seq_q = attn_problem_seq_q(p, b), seq_k = attn_problem_seq_k(p, b);
    int a = i + seq_k - seq_q, qb = i / m->block_q;
    size_t row = (size_t)b * m->num_q_blocks + qb;
    const int32_t *full = m->full_kv_indices + row * m->num_k_blocks;
    const int32_t *part = m->kv_indices + row * m->num_k_blocks;
    int nf = m->full_kv_num_blocks[row], np = m->kv_num_blocks[row], f = 0, q = 0;
    int64_t n = 0;
    while (f < nf || q < np) {
        bool is_full = q >= np || (f < nf && full[f] < part[q]);
        int kb = is_full ? full[f++] : part[q++];
        int j1 = imin(kb * m->block_k + m->block_k, seq_k);
        for (int j = kb * m->block_k; j < j1; ++j) {
            if (!is_full &&
                ((p->causal && j > a) || !attn_pattern_keep_host(pat, i, j, seq_q, seq_k)))
                continue;
            if (cols != NULL)
                cols[n] = j;
            ++n;
        }
    }
    return n;
}

int attn_pattern_csr(attn_csr *csr, const attn_pattern *pat, const attn_problem *p,
                     const attn_block_mask *m) {
    memset(csr, 0, sizeof *csr);
    csr->rows = (int64_t)p->B * p->Lq;
    csr->row_ptr = malloc(((size_t)csr->rows + 1) * sizeof(int64_t));
    if (csr->row_ptr == NULL)
        return -1;
    csr->row_ptr[0] = 0;
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < p->Lq; ++i) {
            int64_t r = (int64_t)b * p->Lq + i;
            int64_t n = i < attn_problem_seq_q(p, b) ? row_keys(pat, p, m, b, i, NULL) : 0;
            csr->row_ptr[r + 1] = csr->row_ptr[r] + n;
        }
    csr->nnz = csr->row_ptr[csr->rows];
    csr->col_idx = malloc((size_t)(csr->nnz > 0 ? csr->nnz : 1) * sizeof(int32_t));
    if (csr->col_idx == NULL) {
        attn_csr_free(csr);
        return -1;
    }
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i)
            row_keys(pat, p, m, b, i, csr->col_idx + csr->row_ptr[(int64_t)b * p->Lq + i]);
    return 0;
}

/* Frees csr's two arrays with release (free, or attn_device_free for a device copy) and zeroes
 * csr; csr may be NULL. */
static void csr_release(attn_csr *csr, void (*release)(void *)) {
    if (csr == NULL)
        return;
    release(csr->row_ptr);
    release(csr->col_idx);
    memset(csr, 0, sizeof *csr);
}

void attn_csr_free(attn_csr *csr) { csr_release(csr, free); }

attn_mask attn_csr_mask(const attn_csr *csr) {
    attn_mask m = {ATTN_MASK_CSR, NULL, NULL, csr->row_ptr, csr->col_idx};
    return m;
}

size_t attn_csr_bytes(const attn_csr *csr) {
    return ((size_t)csr->rows + 1) * sizeof(int64_t) + (size_t)csr->nnz * sizeof(int32_t);
}

int attn_csr_to_device(const attn_csr *host, attn_csr *dev) {
    *dev = *host;
    size_t ptr_bytes = ((size_t)host->rows + 1) * sizeof(int64_t);
    size_t idx_bytes = (size_t)(host->nnz > 0 ? host->nnz : 1) * sizeof(int32_t);
    dev->row_ptr = attn_device_alloc(ptr_bytes);
    dev->col_idx = attn_device_alloc(idx_bytes);
    if (dev->row_ptr == NULL || dev->col_idx == NULL ||
        attn_to_device(dev->row_ptr, host->row_ptr, ptr_bytes) != 0 ||
        (host->nnz > 0 &&
         attn_to_device(dev->col_idx, host->col_idx, (size_t)host->nnz * sizeof(int32_t)) != 0)) {
        attn_csr_free_device(dev);
        return 1;
    }
    return 0;
}

void attn_csr_free_device(attn_csr *dev) { csr_release(dev, attn_device_free); }

/* ---- statistics ------------------------------------------------------------------------------ */

attn_pattern_stats attn_pattern_stats_of(const attn_pattern *pat, const attn_problem *p,
                                         const attn_block_mask *m) {
    attn_pattern_stats s;
    memset(&s, 0, sizeof s);
    double all = 0.0, listed = 0.0;
    for (int b = 0; b < p->B; ++b) {
        int seq_q = attn_problem_seq_q(p, b), seq_k = attn_problem_seq_k(p, b);
        all += (double)seq_q * seq_k;
        for (int i = 0; i < seq_q; ++i)
            s.entries += (double)row_keys(pat, p, m, b, i, NULL);
        for (int qb = 0; qb < m->num_q_blocks; ++qb) {
            size_t row = (size_t)b * m->num_q_blocks + qb;
            int rows = imin(qb * m->block_q + m->block_q, seq_q) - qb * m->block_q;
            const int32_t *lists[2] = {m->full_kv_indices + row * m->num_k_blocks,
                                       m->kv_indices + row * m->num_k_blocks};
            int counts[2] = {m->full_kv_num_blocks[row], m->kv_num_blocks[row]};
            for (int l = 0; l < 2; ++l)
                for (int t = 0; t < counts[l]; ++t) {
                    int kb = lists[l][t];
                    listed += (double)rows *
                              (imin(kb * m->block_k + m->block_k, seq_k) - kb * m->block_k);
                }
        }
    }
    s.dense_entries = attn_problem_entries(p) / p->H; /* per head, as entries */
    s.density = all > 0.0 ? s.entries / all : 0.0;
    s.speedup_bound = s.entries > 0.0 ? s.dense_entries / s.entries : INFINITY;
    s.blocks = attn_block_mask_stats_of(m);
    s.block_fill = listed > 0.0 ? s.entries / listed : 0.0;
    return s;
}
