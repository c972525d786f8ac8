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

#include "attn/reference.h"
#include "attn/sparse/patterns.h"
#include "ladder.h"

static int failures = 0, checks = 0;

static void check(bool ok, const char *what) {
    ++checks;
    if (!ok) {
        ++failures;
        printf("FAIL  %s\n", what);
    }
}

/* The README's rule, written out: blocks of b tokens, I = floor(a / b) with a = i + Lk - Lq, J =
 * floor(j / b), D = |I - J|; keep iff J < s, or D < w, or D is 0 or a power of two. */
static bool readme_keeps(int b, int s, int w, int Lq, int Lk, int i, int j) {
    int a = i + Lk - Lq;
    int I = a >= 0 ? a / b : -((-a + b - 1) / b), J = j / b;
    int D = I > J ? I - J : J - I;
    bool rung = D == 0;
    for (long p = 1; p <= D && !rung; p *= 2)
        rung = p == D;
    return J < s || D < w || rung;
}

static void check_case(int b, int s, int w, int Lq, int Lk, bool causal) {
    char spec[96], what[256], err[256];
    attn_pattern pat;
    snprintf(spec, sizeof spec, "ladder:b=%d,s=%d,w=%d", b, s, w);
    if (attn_pattern_parse(spec, &pat, err, sizeof err) != 0) {
        check(false, err);
        return;
    }
    attn_problem p;
    attn_problem_init(&p, 1, 1, Lq, Lk, 64);
    p.causal = causal;
    attn_pattern_ctx ctx = {&pat, &p};
    attn_mask mask = attn_pattern_mask(&ctx);
    attn_block_mask m;
    attn_csr csr;
    if (attn_pattern_block_mask(&m, &pat, &p, ATTN_SPARSE_TILE, ATTN_SPARSE_TILE) != 0 ||
        attn_pattern_csr(&csr, &pat, &p, &m) != 0) {
        check(false, "out of memory");
        return;
    }
    bool pred_ok = true, csr_ok = true, tiles_ok = true;
    for (int i = 0; i < Lq; ++i) {
        int64_t at = csr.row_ptr[i];
        for (int j = 0; j < Lk; ++j) {
            bool want = readme_keeps(b, s, w, Lq, Lk, i, j) && (!causal || j <= i + Lk - Lq);
            if (attn_entry_visible(&p, &mask, 0, 0, i, j) != want && pred_ok) {
                snprintf(what, sizeof what, "%s Lq=%d Lk=%d causal=%d: entry (%d, %d) %s", spec, Lq,
                         Lk, causal, i, j, want ? "dropped" : "kept");
                pred_ok = false;
            }
            if (want)
                csr_ok = csr_ok && at < csr.row_ptr[i + 1] && csr.col_idx[at++] == j;
        }
        csr_ok = csr_ok && at == csr.row_ptr[i + 1];
    }
    check(pred_ok, pred_ok ? "" : what);
    snprintf(what, sizeof what, "%s Lq=%d Lk=%d causal=%d: CSR", spec, Lq, Lk, causal);
    check(csr_ok, what);
    for (int qb = 0; qb < m.num_q_blocks; ++qb) /* each tile's class from the rule */
        for (int kb = 0; kb < m.num_k_blocks; ++kb) {
            int kept = 0, all = 0;
            for (int i = qb * 64; i < Lq && i < qb * 64 + 64; ++i)
                for (int j = kb * 64; j < Lk && j < kb * 64 + 64; ++j, ++all)
                    kept += readme_keeps(b, s, w, Lq, Lk, i, j) && (!causal || j <= i + Lk - Lq);
            bool full = false, partial = false;
            for (int t = 0; t < m.full_kv_num_blocks[qb]; ++t)
                full |= m.full_kv_indices[(size_t)qb * m.num_k_blocks + t] == kb;
            for (int t = 0; t < m.kv_num_blocks[qb]; ++t)
                partial |= m.kv_indices[(size_t)qb * m.num_k_blocks + t] == kb;
            tiles_ok = tiles_ok && full == (kept > 0 && kept == all) &&
                       partial == (kept > 0 && kept < all);
        }
    snprintf(what, sizeof what, "%s Lq=%d Lk=%d causal=%d: block mask classes", spec, Lq, Lk,
             causal);
    check(tiles_ok, what);
    attn_csr_free(&csr);
    attn_block_mask_free(&m);
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
            for (int causal = 0; causal < 2; ++causal)
                check_case(params[k][0], params[k][1], params[k][2], shapes[sh][0], shapes[sh][1],
                           causal);
    /* the spec: defaults, errors, one line each */
    attn_pattern pat;
    char err[256] = "";
    check(attn_pattern_parse("ladder:b=8,w=2", &pat, err, sizeof err) == 0 &&
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
        check(refused, what);
    }
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
