/* block_mask.c — the block mask of block-sparse kernels: allocation, statistics, the device copy.
 * The exact builder from a token-level mask and the checks of a builder's output are in
 * block_mask_exact.c (apart, so that a program that only stores and uploads block masks, such as
 * the grader's submission program, links no oracle). Conventions: attn/sparse/block_mask.h. */
#include "attn/sparse/block_mask.h"

#include <stdlib.h>
#include <string.h>

#include "attn/device.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t list_entries(const attn_block_mask *m) {
    return (size_t)m->batches * (size_t)m->num_q_blocks * (size_t)m->num_k_blocks;
}

static size_t count_entries(const attn_block_mask *m) {
    return (size_t)m->batches * (size_t)m->num_q_blocks;
}

int attn_block_mask_alloc(attn_block_mask *m, int batches, int Lq, int Lk, int block_q,
                          int block_k) {
    memset(m, 0, sizeof *m);
    if (batches <= 0 || Lq <= 0 || Lk <= 0 || block_q <= 0 || block_k <= 0)
        return -1;
    m->batches = batches;
    m->Lq = Lq;
    m->Lk = Lk;
    m->block_q = block_q;
    m->block_k = block_k;
    m->num_q_blocks = ceil_div(Lq, block_q);
    m->num_k_blocks = ceil_div(Lk, block_k);
    m->kv_num_blocks = calloc(count_entries(m), sizeof(int32_t));
    m->full_kv_num_blocks = calloc(count_entries(m), sizeof(int32_t));
    m->kv_indices = calloc(list_entries(m), sizeof(int32_t));
    m->full_kv_indices = calloc(list_entries(m), sizeof(int32_t));
    if (!m->kv_num_blocks || !m->full_kv_num_blocks || !m->kv_indices || !m->full_kv_indices) {
        attn_block_mask_free(m);
        return -1;
    }
    return 0;
}

/* Frees the four arrays of m with release (free, or attn_device_free for a device copy) and
 * zeroes m; m may be NULL. */
static void block_mask_release(attn_block_mask *m, void (*release)(void *)) {
    if (m == NULL)
        return;
    void *arrays[] = {m->kv_num_blocks, m->kv_indices, m->full_kv_num_blocks, m->full_kv_indices};
    for (int a = 0; a < 4; ++a)
        release(arrays[a]);
    memset(m, 0, sizeof *m);
}

void attn_block_mask_free(attn_block_mask *m) { block_mask_release(m, free); }

attn_block_mask_stats attn_block_mask_stats_of(const attn_block_mask *m) {
    attn_block_mask_stats s = {0};
    s.tiles = (int64_t)list_entries(m);
    for (size_t r = 0; r < count_entries(m); ++r) {
        s.full_blocks += m->full_kv_num_blocks[r];
        s.partial_blocks += m->kv_num_blocks[r];
    }
    s.block_density =
        s.tiles > 0 ? (double)(s.full_blocks + s.partial_blocks) / (double)s.tiles : 0.0;
    s.metadata_bytes = (2 * count_entries(m) + 2 * list_entries(m)) * sizeof(int32_t);
    return s;
}

int attn_block_mask_transpose(const attn_block_mask *m, attn_block_mask *t) {
    if (attn_block_mask_alloc(t, m->batches, m->Lk, m->Lq, m->block_k, m->block_q) != 0)
        return -1;
    /* Walking m's query blocks in ascending order appends each to its key blocks' lists in
     * ascending order: the transposed lists come out sorted. */
    for (int b = 0; b < m->batches; ++b)
        for (int qb = 0; qb < m->num_q_blocks; ++qb) {
            const size_t row = (size_t)b * m->num_q_blocks + (size_t)qb;
            const int32_t *src[2] = {m->full_kv_indices + row * m->num_k_blocks,
                                     m->kv_indices + row * m->num_k_blocks};
            const int counts[2] = {m->full_kv_num_blocks[row], m->kv_num_blocks[row]};
            int32_t *num[2] = {t->full_kv_num_blocks, t->kv_num_blocks};
            int32_t *dst[2] = {t->full_kv_indices, t->kv_indices};
            for (int l = 0; l < 2; ++l)
                for (int e = 0; e < counts[l]; ++e) {
                    const size_t trow = (size_t)b * t->num_q_blocks + (size_t)src[l][e];
                    dst[l][trow * t->num_k_blocks + (size_t)num[l][trow]++] = qb;
                }
        }
    return 0;
}

int attn_block_mask_to_device(const attn_block_mask *host, attn_block_mask *dev) {
    *dev = *host;
    dev->kv_num_blocks = dev->kv_indices = dev->full_kv_num_blocks = dev->full_kv_indices = NULL;
    size_t counts = count_entries(host) * sizeof(int32_t);
    size_t lists = list_entries(host) * sizeof(int32_t);
    int32_t **dst[4] = {&dev->kv_num_blocks, &dev->full_kv_num_blocks, &dev->kv_indices,
                        &dev->full_kv_indices};
    const int32_t *src[4] = {host->kv_num_blocks, host->full_kv_num_blocks, host->kv_indices,
                             host->full_kv_indices};
    for (int a = 0; a < 4; ++a) {
        size_t bytes = a < 2 ? counts : lists;
        *dst[a] = attn_device_alloc(bytes);
        if (*dst[a] == NULL || attn_to_device(*dst[a], src[a], bytes) != 0) {
            attn_block_mask_free_device(dev);
            return 1;
        }
    }
    return 0;
}

void attn_block_mask_free_device(attn_block_mask *dev) {
    block_mask_release(dev, attn_device_free);
}
