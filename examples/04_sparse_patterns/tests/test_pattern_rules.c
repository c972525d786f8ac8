/* test_pattern_rules.c — every pattern of example 04, checked against its definition in README.md
 * ("The patterns") written out here: each rule lists the keys a query keeps by construction (the
 * window's 2w+1 keys, the dilated window's progression, the strided pattern's column and recent
 * keys, ...), without calling the shared predicate (common/device/patterns.cuh) that the
 * reference, the block mask builder and the kernels use, so a wrong predicate cannot agree with
 * itself here. tests/examples/pattern_rule.c compares each rule with the registered predicate
 * (the reference's mask), the CSR and the block mask's tile classes, over shapes where the
 * patterns' edges fall on, before and after the 64-key tile boundaries (w = 1 and 65: the band
 * ends one key into the next tile; d*w >= 128: a dilated window spans several tiles), Lq != Lk
 * (bottom-right alignment: a < 0 when Lq > Lk), causal and not, and unions. A kind of the
 * chapter with no case here fails the test (a new kind needs its rule written here).
 *
 * BigBird's random blocks come from a seeded generator the README describes but does not
 * spell out; its rule here is the README's structure (blocks I-1, I, I+1, the first and last
 * blocks as dense rows and columns, and exactly min(r, blocks left) other blocks, the same for
 * every query of a block), with the random blocks read from the predicate on the block's first
 * query and checked for count and consistency.
 *
 * Exit 0 when every check passes, else 1 with the first difference of each failed case. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../tests/examples/pattern_rule.h"
#include "attn/reference.h"
#include "attn/sparse/patterns.h"

/* A part of a pattern, as the README's table gives it. */
typedef struct part {
    char kind; /* w window, c causal_window, d dilated, s strided, f fixed, g global, b bigbird */
    int w, d, l, c, b, r, seed;
    int g[8], n_g; /* global: positions (ranges written out) */
} part;

typedef struct rule {
    part parts[3];
    int n;
} rule;

static int floor_div(int x, int y) { return (x - ((x % y + y) % y)) / y; }

static void mark(unsigned char *keep, int Lk, int j) {
    if (j >= 0 && j < Lk)
        keep[j] = 1;
}

/* BigBird: the blocks of the query's block that the README fixes, plus the random ones the
 * predicate keeps for the block's first query (checked for count in bigbird_random_ok). */
static void bigbird_row(const part *pt, int Lq, int Lk, int a, unsigned char *keep) {
    const int nb = (Lk + pt->b - 1) / pt->b, I = floor_div(a, pt->b);
    char spec[64];
    snprintf(spec, sizeof spec, "bigbird:b=%d,r=%d,seed=%d", pt->b, pt->r, pt->seed);
    attn_pattern pat;
    char err[128];
    attn_pattern_parse(spec, &pat, err, sizeof err);
    const int a0 = I * pt->b, i0 = a0 - (Lk - Lq) < 0 ? 0 : a0 - (Lk - Lq); /* block's 1st row */
    for (int J = 0; J < nb; ++J) {
        bool fixed = (J >= I - 1 && J <= I + 1) || I == 0 || I == nb - 1 || J == 0 || J == nb - 1;
        bool random = !fixed && attn_pattern_keep(&pat, i0, J * pt->b, Lq, Lk);
        for (int j = J * pt->b; (fixed || random) && j < (J + 1) * pt->b; ++j)
            mark(keep, Lk, j);
    }
}

/* The README's table, key by key. */
static void readme_row(const void *ctx, int Lq, int Lk, int i, unsigned char *keep) {
    const rule *r = (const rule *)ctx;
    const int a = i + Lk - Lq; /* the aligned position */
    for (int p = 0; p < r->n; ++p) {
        const part *pt = &r->parts[p];
        switch (pt->kind) {
        case 'w': /* |j - a| <= w: w keys on each side and the query's own */
            for (int j = a - pt->w; j <= a + pt->w; ++j)
                mark(keep, Lk, j);
            break;
        case 'c': /* a - w < j <= a: the last w keys */
            for (int j = a - pt->w + 1; j <= a; ++j)
                mark(keep, Lk, j);
            break;
        case 'd': /* j = a + d*m, m in [-w, w] */
            for (int m = -pt->w; m <= pt->w; ++m)
                mark(keep, Lk, a + pt->d * m);
            break;
        case 's': /* j <= a and (a - j mod l = 0, or a - l < j) */
            for (int j = a; j > a - pt->l; --j)
                mark(keep, Lk, j);
            for (int j = a; j >= 0; j -= pt->l)
                mark(keep, Lk, j);
            break;
        case 'f': /* the query's own block of l, and the last c keys of every block */
            for (int j = floor_div(a, pt->l) * pt->l; j < floor_div(a, pt->l) * pt->l + pt->l; ++j)
                mark(keep, Lk, j);
            for (int start = 0; start < Lk; start += pt->l)
                for (int j = start + pt->l - pt->c; j < start + pt->l; ++j)
                    mark(keep, Lk, j);
            break;
        case 'g': /* rows and columns of G dense */
            for (int e = 0; e < pt->n_g; ++e) {
                if (pt->g[e] == a)
                    for (int j = 0; j < Lk; ++j)
                        keep[j] = 1;
                mark(keep, Lk, pt->g[e]);
            }
            break;
        case 'b':
            bigbird_row(pt, Lq, Lk, a, keep);
            break;
        case 'n': /* no pattern: every key */
            for (int j = 0; j < Lk; ++j)
                keep[j] = 1;
            break;
        }
    }
}

/* BigBird's random blocks: every query of a block keeps the same key blocks, and exactly
 * min(r, the blocks not fixed) of them beyond the fixed ones. */
static void bigbird_random_ok(const part *pt, int Lq, int Lk) {
    char spec[64], err[128], what[200];
    snprintf(spec, sizeof spec, "bigbird:b=%d,r=%d,seed=%d", pt->b, pt->r, pt->seed);
    attn_pattern pat;
    attn_pattern_parse(spec, &pat, err, sizeof err);
    const int nb = (Lk + pt->b - 1) / pt->b;
    bool ok = true;
    for (int i = 0; i < Lq && ok; ++i) {
        const int a = i + Lk - Lq, I = floor_div(a, pt->b);
        int fixed = 0, extra = 0;
        for (int J = 0; J < nb; ++J) {
            bool is_fixed =
                (J >= I - 1 && J <= I + 1) || I == 0 || I == nb - 1 || J == 0 || J == nb - 1;
            fixed += is_fixed;
            bool kept = attn_pattern_keep(&pat, i, J * pt->b, Lq, Lk);
            for (int j = J * pt->b; j < (J + 1) * pt->b && j < Lk; ++j)
                ok = ok && attn_pattern_keep(&pat, i, j, Lq, Lk) == kept; /* whole blocks */
            extra += !is_fixed && kept;
        }
        const int want = pt->r < nb - fixed ? pt->r : nb - fixed;
        ok = ok && extra == want;
        snprintf(what, sizeof what, "%s Lq=%d Lk=%d: query %d keeps %d random blocks, want %d",
                 spec, Lq, Lk, i, extra, want);
    }
    pattern_rule_expect(ok, what);
}

typedef struct pattern_case {
    const char *spec;
    rule r;
} pattern_case;

static const pattern_case cases[] = {
    {"window:w=0", {{{'w', .w = 0}}, 1}},
    {"window:w=1", {{{'w', .w = 1}}, 1}},   /* the band crosses into the next tile by one key */
    {"window:w=65", {{{'w', .w = 65}}, 1}}, /* ... one tile further */
    {"window:w=130", {{{'w', .w = 130}}, 1}},
    {"causal_window:w=1", {{{'c', .w = 1}}, 1}},
    {"causal_window:w=65", {{{'c', .w = 65}}, 1}},
    {"causal_window:w=100", {{{'c', .w = 100}}, 1}},
    {"dilated:w=3,d=5", {{{'d', .w = 3, .d = 5}}, 1}},
    {"dilated:w=20,d=8", {{{'d', .w = 20, .d = 8}}, 1}}, /* d*w = 160: three tiles each side */
    {"dilated:w=2,d=64", {{{'d', .w = 2, .d = 64}}, 1}}, /* one key per tile, on a boundary */
    {"strided:l=7", {{{'s', .l = 7}}, 1}},
    {"strided:l=64", {{{'s', .l = 64}}, 1}},
    {"strided:l=500", {{{'s', .l = 500}}, 1}},
    {"fixed:l=16,c=2", {{{'f', .l = 16, .c = 2}}, 1}},
    {"fixed:l=100,c=30", {{{'f', .l = 100, .c = 30}}, 1}},
    {"global:g=0,5-7,100", {{{'g', .g = {0, 5, 6, 7, 100}, .n_g = 5}}, 1}},
    {"global:n=3", {{{'g', .g = {0, 1, 2}, .n_g = 3}}, 1}},
    {"bigbird:b=16,r=2,seed=3", {{{'b', .b = 16, .r = 2, .seed = 3}}, 1}},
    {"bigbird:b=64,r=1,seed=1", {{{'b', .b = 64, .r = 1, .seed = 1}}, 1}},
    {"bigbird:b=24,r=12,seed=5", {{{'b', .b = 24, .r = 12, .seed = 5}}, 1}}, /* r > blocks left */
    {"window:w=8+global:n=2", {{{'w', .w = 8}, {'g', .g = {0, 1}, .n_g = 2}}, 2}},
    {"causal_window:w=40+window:w=5", {{{'c', .w = 40}, {'w', .w = 5}}, 2}},
    {"none", {{{'n'}}, 1}},
};

int main(void) {
    static const int shapes[][2] = {{1, 1}, {130, 130}, {300, 300}, {64, 300}, {150, 70}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
            for (int causal = 0; causal < 2; ++causal)
                pattern_rule_check(cases[k].spec, readme_row, &cases[k].r, shapes[sh][0],
                                   shapes[sh][1], causal, cases[k].r.n > 1);
    /* Every kind of the chapter has a rule here: a kind added to common/ without one fails. */
    unsigned covered = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        attn_pattern pat;
        char err[128];
        if (attn_pattern_parse(cases[k].spec, &pat, err, sizeof err) == 0)
            covered |= attn_pattern_kinds(&pat);
    }
    for (int kind = 0; kind < ATTN_PATTERN_KINDS; ++kind) {
        char what[96];
        snprintf(what, sizeof what, "the kind '%s' has a rule case here",
                 attn_pattern_kind_name(kind));
        pattern_rule_expect((covered & ATTN_PATTERN_BIT(kind)) != 0, what);
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
        if (cases[k].r.parts[0].kind == 'b')
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
                bigbird_random_ok(&cases[k].r.parts[0], shapes[sh][0], shapes[sh][1]);
    return pattern_rule_summary();
}
