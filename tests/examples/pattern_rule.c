/* pattern_rule.c — see pattern_rule.h. */
#include "pattern_rule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/reference.h"
#include "attn/sparse/patterns.h"

static int failures = 0, checks = 0;

void pattern_rule_expect(bool ok, const char *what) {
    ++checks;
    if (!ok) {
        ++failures;
        printf("FAIL  %s\n", what);
    }
}

int pattern_rule_summary(void) {
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}

void pattern_rule_check(const char *spec, pattern_rule_row rule, const void *ctx, int Lq, int Lk,
                        bool causal, bool is_union) {
    char what[640], err[256], name[200];
    snprintf(name, sizeof name, "%s Lq=%d Lk=%d%s", spec, Lq, Lk, causal ? " causal" : "");
    attn_pattern pat;
    if (attn_pattern_parse(spec, &pat, err, sizeof err) != 0) {
        snprintf(what, sizeof what, "%s: %s", name, err);
        pattern_rule_expect(false, what);
        return;
    }
    attn_problem p;
    attn_problem_init(&p, 1, 1, Lq, Lk, 64);
    p.causal = causal;
    attn_pattern_ctx pctx = {&pat, &p};
    attn_mask mask = attn_pattern_mask(&pctx);
    attn_block_mask m;
    attn_csr csr;
    unsigned char *want = calloc((size_t)Lq * Lk + 1, 1);
    if (want == NULL || attn_pattern_block_mask(&m, &pat, &p, ATTN_SPARSE_TILE, ATTN_SPARSE_TILE) ||
        attn_pattern_csr(&csr, &pat, &p, &m) != 0) {
        snprintf(what, sizeof what, "%s: out of memory", name);
        pattern_rule_expect(false, what);
        free(want);
        return;
    }
    for (int i = 0; i < Lq; ++i) { /* the rule, with causality on top */
        unsigned char *row = want + (size_t)i * Lk;
        rule(ctx, Lq, Lk, i, row);
        for (int j = 0; j < Lk; ++j)
            row[j] = row[j] && (!causal || j <= i + Lk - Lq);
    }
    bool pred_ok = true, csr_ok = true, tiles_ok = true;
    for (int i = 0; i < Lq; ++i) {
        int64_t at = csr.row_ptr[i];
        for (int j = 0; j < Lk; ++j) {
            bool w = want[(size_t)i * Lk + j] != 0;
            if (attn_entry_visible(&p, &mask, 0, 0, i, j) != w && pred_ok) {
                snprintf(what, sizeof what, "%s: predicate: entry (%d, %d) %s", name, i, j,
                         w ? "dropped" : "kept");
                pred_ok = false;
            }
            if (w && csr_ok && !(at < csr.row_ptr[i + 1] && csr.col_idx[at++] == j)) {
                snprintf(what, sizeof what, "%s: CSR: row %d lacks key %d", name, i, j);
                csr_ok = false;
            }
        }
        if (csr_ok && at != csr.row_ptr[i + 1]) {
            snprintf(what, sizeof what, "%s: CSR: row %d holds keys the rule drops", name, i);
            csr_ok = false;
        }
    }
    pattern_rule_expect(pred_ok, what);
    pattern_rule_expect(csr_ok, what);
    for (int qb = 0; qb < m.num_q_blocks && tiles_ok; ++qb)
        for (int kb = 0; kb < m.num_k_blocks && tiles_ok; ++kb) {
            int kept = 0, all = 0;
            for (int i = qb * 64; i < Lq && i < qb * 64 + 64; ++i)
                for (int j = kb * 64; j < Lk && j < kb * 64 + 64; ++j, ++all)
                    kept += want[(size_t)i * Lk + j];
            bool full = false, partial = false;
            for (int t = 0; t < m.full_kv_num_blocks[qb]; ++t)
                full |= m.full_kv_indices[(size_t)qb * m.num_k_blocks + t] == kb;
            for (int t = 0; t < m.kv_num_blocks[qb]; ++t)
                partial |= m.kv_indices[(size_t)qb * m.num_k_blocks + t] == kb;
            bool ok = full      ? kept > 0 && kept == all
                      : partial ? kept > 0 && (is_union || kept < all)
                                : kept == 0;
            if (!ok) {
                snprintf(what, sizeof what,
                         "%s: block mask: tile (%d, %d) listed %s, the rule keeps %d of its %d "
                         "entries",
                         name, qb, kb,
                         full      ? "full"
                         : partial ? "partial"
                                   : "nowhere",
                         kept, all);
                tiles_ok = false;
            }
        }
    pattern_rule_expect(tiles_ok, what);
    attn_csr_free(&csr);
    attn_block_mask_free(&m);
    free(want);
}
