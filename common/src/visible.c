/* visible.c — which entries a query row sees: causality and a mask (attn_entry_visible,
 * declared in attn/reference.h), and how many keys a causal row sees (attn_causal_keys,
 * attn/problem.h). Apart from the reference (reference.c), so that the block-mask
 * code and programs that must not link the oracle (the grader's submission program) can use it.
 */
#include <stdint.h>

#include "attn/reference.h"

/* CSR row r holds a sorted key list: binary search for j. */
static bool csr_contains(const attn_mask *mask, int64_t r, int j) {
    int64_t lo = mask->row_ptr[r], hi = mask->row_ptr[r + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mask->col_idx[mid] == j)
            return true;
        if (mask->col_idx[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool attn_entry_visible(const attn_problem *p, const attn_mask *mask, int b, int h, int i, int j) {
    /* Bottom-right causal alignment: the last query sees the last key. */
    if (p->causal && j > i + attn_problem_seq_k(p, b) - attn_problem_seq_q(p, b))
        return false;
    if (mask == NULL)
        return true;
    switch (mask->kind) {
    case ATTN_MASK_NONE:
        return true;
    case ATTN_MASK_PREDICATE:
        return mask->keep(mask->ctx, b, h, i, j) != 0;
    case ATTN_MASK_CSR:
        return csr_contains(mask, (int64_t)b * p->Lq + i, j);
    }
    return false;
}

int attn_causal_keys(const attn_problem *p, int b, int i) {
    const int Lk = attn_problem_seq_k(p, b);
    if (!p->causal)
        return Lk;
    const int n = Lk - attn_problem_seq_q(p, b) + i + 1;
    return n < 0 ? 0 : n > Lk ? Lk : n;
}
