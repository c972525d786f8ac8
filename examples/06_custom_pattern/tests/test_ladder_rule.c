/* test_ladder_rule.c — example 06's ladder, checked against its definition in README.md ("The
 * pattern") enumerated here independently: none of ladder.h's functions is called to decide what
 * the ladder keeps. What is checked is what the rest of the chapter uses: the registered kind's
 * predicate (the CPU reference's mask), the block mask the harness builds for the kernels (every
 * tile listed exactly when it holds a kept entry, listed full exactly when all its entries are
 * kept) and the CSR, over block sizes smaller than, equal to and larger than the 64 x 64 tiles,
 * Lq != Lk (bottom-right alignment), causal and not. Then the spec's errors. Exit 0 when every
 * check passes, else 1 with the first difference of each failed case. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../../../tests/examples/pattern_rule.h"
#include "attn/sparse/patterns.h"
#include "ladder.h"

/* The README's rule, written out: blocks of b tokens, I = floor(a / b) with a = i + Lk - Lq, J =
 * floor(j / b), D = |I - J|; keep iff J < s, or D < w, or D is 0 or a power of two. */
typedef struct ladder {
    int b, s, w;
} ladder;

static void readme_row(const void *rule, int Lq, int Lk, int i, unsigned char *keep) {
    const ladder *l = (const ladder *)rule;
    int a = i + Lk - Lq;
    int I = a >= 0 ? a / l->b : -((-a + l->b - 1) / l->b);
    for (int j = 0; j < Lk; ++j) {
        int J = j / l->b, D = I > J ? I - J : J - I;
        bool rung = D == 0;
        for (long p = 1; p <= D && !rung; p *= 2)
            rung = p == D;
        keep[j] = J < l->s || D < l->w || rung;
    }
}

int main(void) {
    static const attn_pattern_kind_def *const kinds[] = {&ladder_kind_def, NULL};
    if (attn_pattern_register(kinds) != 0) {
        printf("FAIL  the ladder cannot be registered\n");
        return 1;
    }
    /* {b, s, w}: blocks below, at and above the tile; no sinks; wide windows; every rung */
    static const int params[][3] = {{1, 4, 3},  {3, 1, 1},  {8, 0, 2},   {16, 2, 1}, {24, 2, 2},
                                    {64, 1, 1}, {64, 1, 4}, {100, 0, 1}, {7, 3, 40}};
    static const int shapes[][2] = {{1, 1}, {130, 130}, {300, 300}, {64, 300}, {129, 17}};
    for (size_t k = 0; k < sizeof params / sizeof params[0]; ++k)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
            for (int causal = 0; causal < 2; ++causal) {
                const ladder l = {params[k][0], params[k][1], params[k][2]};
                char spec[96];
                snprintf(spec, sizeof spec, "ladder:b=%d,s=%d,w=%d", l.b, l.s, l.w);
                pattern_rule_check(spec, readme_row, &l, shapes[sh][0], shapes[sh][1], causal,
                                   false);
            }
    /* the spec: defaults, errors, one line each */
    attn_pattern pat;
    char err[256] = "";
    pattern_rule_expect(attn_pattern_parse("ladder:b=8,w=2", &pat, err, sizeof err) == 0 &&
                            pat.part[0].x[LADDER_S] == 1,
                        "s defaults to one sink block");
    static const struct {
        const char *spec, *needle;
    } bad[] = {{"ladder:b=64,w=0", "w must be an integer in [1,"},
               {"ladder:b=0,w=2", "b must be an integer in [1,"},
               {"ladder:w=2", "missing parameter b"},
               {"ladder:b=64", "missing parameter w"},
               {"ladder:b=64,w=2,r=1", "unknown parameter 'r'"},
               {"ladder:b=64,w=2,w=3", "w is given twice"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        char what[256];
        bool refused = attn_pattern_parse(bad[k].spec, &pat, err, sizeof err) == -1 &&
                       strstr(err, bad[k].needle) != NULL && strchr(err, '\n') == NULL;
        snprintf(what, sizeof what, "%s refused with '%s' (got '%s')", bad[k].spec, bad[k].needle,
                 err);
        pattern_rule_expect(refused, what);
    }
    return pattern_rule_summary();
}
