/* pattern_rule.h — a sparse pattern checked against its definition written out by a test: the
 * examples' rule tests (examples/04_sparse_patterns/tests/test_pattern_rules.c for the chapter's
 * kinds, examples/06_custom_pattern/tests/test_ladder_rule.c for the ladder) each enumerate the
 * keys a query keeps from the README's formula, without calling the shared predicate, and hand
 * that enumeration to pattern_rule_check, which compares it with what the rest of the chapter
 * uses:
 *   - the registered predicate (attn_pattern_mask: the CPU reference's mask), entry by entry;
 *   - the CSR (attn_pattern_csr: the gather kernels' lists), key by key, in order;
 *   - the block mask (attn_pattern_block_mask: the tile kernels' lists) in 64 x 64 tiles: a tile
 *     is listed exactly when it holds a kept entry, and listed full exactly when all its entries
 *     are kept (a union may list a full tile as partial: its parts fill it only together).
 * Causality on top: an entry is computed iff the rule keeps it and, causal, j <= i + Lk - Lq.
 */
#ifndef PATTERN_RULE_H
#define PATTERN_RULE_H

#include <stdbool.h>

/* The test's rule: keep[j] = 1 for every key j in [0, Lk) that query i (of Lq queries) keeps,
 * causality not applied; keep[] arrives zeroed. */
typedef void (*pattern_rule_row)(const void *rule, int Lq, int Lk, int i, unsigned char *keep);

/* Checks the pattern of `spec` on one sequence of Lq queries and Lk keys against the rule; union:
 * the spec joins parts with '+' (a full tile may then be listed partial). Prints "FAIL  ..." for
 * each form that differs, with the first difference. */
void pattern_rule_check(const char *spec, pattern_rule_row rule, const void *ctx, int Lq, int Lk,
                        bool causal, bool is_union);

/* A check of its own (e.g. the spec's errors): counted like the others, "FAIL  what" if !ok. */
void pattern_rule_expect(bool ok, const char *what);

/* "N passed, M failed"; the exit status: 0 when nothing failed. */
int pattern_rule_summary(void);

#endif /* PATTERN_RULE_H */
