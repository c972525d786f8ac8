/* block_mask_exact.c — the exact block mask of a token-level mask (attn_block_mask_from_mask),
 * and the checks of any builder's output against it: validation, empty tiles, the listed tiles as
 * a mask. Storage and the device copy: block_mask.c. Conventions: attn/sparse/block_mask.h. */
#include "attn/sparse/block_mask.h"

#include "../fail.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Visible and in-range entries of tile (qb, kb) of slice b. */
typedef struct tile_count {
    int64_t visible, in_range;
    int first_hidden_i, first_hidden_j; /* an in-range entry that is not visible, or -1 */
} tile_count;

static tile_count count_tile(const attn_problem *p, const attn_mask *mask, int b, int qb, int kb,
                             int block_q, int block_k) {
    tile_count c = {0, 0, -1, -1};
    int seq_q = attn_problem_seq_q(p, b), seq_k = attn_problem_seq_k(p, b);
    int i_end = (qb + 1) * block_q < seq_q ? (qb + 1) * block_q : seq_q;
    int j_end = (kb + 1) * block_k < seq_k ? (kb + 1) * block_k : seq_k;
    for (int i = qb * block_q; i < i_end; ++i) {
        for (int j = kb * block_k; j < j_end; ++j) {
            c.in_range++;
            if (attn_entry_visible(p, mask, b, 0, i, j)) {
                c.visible++;
            } else if (c.first_hidden_i < 0) {
                c.first_hidden_i = i;
                c.first_hidden_j = j;
            }
        }
    }
    return c;
}

int attn_block_mask_from_mask(attn_block_mask *m, const attn_problem *p, const attn_mask *mask,
                              int block_q, int block_k) {
    if (attn_problem_validate(p, NULL, 0) != 0 ||
        attn_block_mask_alloc(m, p->B, p->Lq, p->Lk, block_q, block_k) != 0)
        return -1;
    for (int b = 0; b < m->batches; ++b) {
        for (int qb = 0; qb < m->num_q_blocks; ++qb) {
            size_t row = (size_t)b * m->num_q_blocks + qb;
            int32_t *full = m->full_kv_indices + row * m->num_k_blocks;
            int32_t *part = m->kv_indices + row * m->num_k_blocks;
            int n_full = 0, n_part = 0;
            for (int kb = 0; kb < m->num_k_blocks; ++kb) {
                tile_count c = count_tile(p, mask, b, qb, kb, block_q, block_k);
                if (c.visible == 0)
                    continue;
                if (c.visible == c.in_range)
                    full[n_full++] = kb;
                else
                    part[n_part++] = kb;
            }
            m->full_kv_num_blocks[row] = n_full;
            m->kv_num_blocks[row] = n_part;
        }
    }
    return 0;
}

/* Checks one list (count + indices) of row (b, qb) and marks its tiles in `listed` (1 partial,
 * 2 full). */
static int check_list(const int32_t *counts, const int32_t *indices, const attn_block_mask *m,
                      int b, int qb, char kind, uint8_t *listed, char *why, size_t why_len) {
    const char *name = kind == 2 ? "full_kv" : "kv";
    size_t row = (size_t)b * m->num_q_blocks + qb;
    int n = counts[row];
    if (n < 0 || n > m->num_k_blocks)
        return attn_fail(why, why_len,
                         "slice %d, query block %d: %s_num_blocks = %d is outside [0, %d]", b, qb,
                         name, n, m->num_k_blocks);
    const int32_t *idx = indices + row * m->num_k_blocks;
    for (int t = 0; t < n; ++t) {
        int kb = idx[t];
        if (kb < 0 || kb >= m->num_k_blocks)
            return attn_fail(why, why_len,
                             "slice %d, query block %d: %s_indices[%d] = %d is outside [0, %d)", b,
                             qb, name, t, kb, m->num_k_blocks);
        if (t > 0 && kb <= idx[t - 1])
            return attn_fail(
                why, why_len,
                "slice %d, query block %d: %s_indices not strictly ascending (%d after %d)", b, qb,
                name, kb, idx[t - 1]);
        if (listed[kb] != 0)
            return attn_fail(
                why, why_len,
                "slice %d, query block %d: key block %d is listed both full and partial", b, qb,
                kb);
        listed[kb] = (uint8_t)kind;
    }
    return 0;
}

int attn_block_mask_validate(const attn_block_mask *m, const attn_problem *p, const attn_mask *mask,
                             char *why, size_t why_len) {
    if (attn_problem_validate(p, why, why_len) != 0)
        return -1;
    if (m->batches != p->B || m->Lq != p->Lq || m->Lk != p->Lk || m->block_q <= 0 ||
        m->block_k <= 0 || m->num_q_blocks != ceil_div(p->Lq, m->block_q) ||
        m->num_k_blocks != ceil_div(p->Lk, m->block_k))
        return attn_fail(
            why, why_len,
            "mask shape (batches %d, Lq %d, Lk %d, blocks %dx%d of %dx%d) does not match "
            "the problem (B %d, Lq %d, Lk %d)",
            m->batches, m->Lq, m->Lk, m->num_q_blocks, m->num_k_blocks, m->block_q, m->block_k,
            p->B, p->Lq, p->Lk);
    if (!m->kv_num_blocks || !m->kv_indices || !m->full_kv_num_blocks || !m->full_kv_indices)
        return attn_fail(why, why_len, "mask arrays not allocated");
    uint8_t *listed = malloc((size_t)m->num_k_blocks);
    if (listed == NULL)
        return attn_fail(why, why_len, "out of memory");
    int rc = 0;
    for (int b = 0; b < m->batches && rc == 0; ++b) {
        for (int qb = 0; qb < m->num_q_blocks && rc == 0; ++qb) {
            memset(listed, 0, (size_t)m->num_k_blocks);
            rc = check_list(m->full_kv_num_blocks, m->full_kv_indices, m, b, qb, 2, listed, why,
                            why_len);
            if (rc == 0)
                rc = check_list(m->kv_num_blocks, m->kv_indices, m, b, qb, 1, listed, why, why_len);
            for (int kb = 0; kb < m->num_k_blocks && rc == 0; ++kb) {
                tile_count c = count_tile(p, mask, b, qb, kb, m->block_q, m->block_k);
                if (listed[kb] == 2 && c.first_hidden_i >= 0)
                    rc =
                        attn_fail(why, why_len,
                                  "slice %d, query block %d: key block %d is listed full but entry "
                                  "(i=%d, j=%d) is masked",
                                  b, qb, kb, c.first_hidden_i, c.first_hidden_j);
                else if (listed[kb] == 0 && c.visible > 0)
                    rc =
                        attn_fail(why, why_len,
                                  "slice %d, query block %d: key block %d has %lld visible entries "
                                  "but is not listed (they would be skipped)",
                                  b, qb, kb, (long long)c.visible);
            }
        }
    }
    free(listed);
    return rc;
}

int64_t attn_block_mask_count_empty(const attn_block_mask *m, const attn_problem *p,
                                    const attn_mask *mask) {
    int64_t empty = 0;
    for (int b = 0; b < m->batches; ++b) {
        for (int qb = 0; qb < m->num_q_blocks; ++qb) {
            size_t row = (size_t)b * m->num_q_blocks + qb;
            const int32_t *lists[2] = {m->full_kv_indices + row * m->num_k_blocks,
                                       m->kv_indices + row * m->num_k_blocks};
            int counts[2] = {m->full_kv_num_blocks[row], m->kv_num_blocks[row]};
            for (int l = 0; l < 2; ++l)
                for (int t = 0; t < counts[l]; ++t)
                    empty +=
                        count_tile(p, mask, b, qb, lists[l][t], m->block_q, m->block_k).visible ==
                        0;
        }
    }
    return empty;
}

bool attn_block_mask_lists(const attn_block_mask *m, int b, int i, int j) {
    if (b < 0 || b >= m->batches || i < 0 || j < 0 || i / m->block_q >= m->num_q_blocks ||
        j / m->block_k >= m->num_k_blocks)
        return false;
    const size_t row = (size_t)b * m->num_q_blocks + (size_t)(i / m->block_q);
    const int32_t *lists[2] = {m->full_kv_indices + row * m->num_k_blocks,
                               m->kv_indices + row * m->num_k_blocks};
    const int counts[2] = {m->full_kv_num_blocks[row], m->kv_num_blocks[row]};
    for (int l = 0; l < 2; ++l)
        for (int t = 0; t < counts[l]; ++t)
            if (lists[l][t] == j / m->block_k)
                return true;
    return false;
}

static int listed_keep(const void *ctx, int b, int h, int i, int j) {
    (void)h; /* every head shares the mask */
    return attn_block_mask_lists((const attn_block_mask *)ctx, b, i, j);
}

attn_mask attn_block_mask_as_mask(const attn_block_mask *m) {
    attn_mask mask = {ATTN_MASK_PREDICATE, listed_keep, m, NULL, NULL};
    return mask;
}
