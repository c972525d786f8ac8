/* decode_host.c — the host side of example 09 that the program (decode_stages.c) and the model's
 * library (decode_api.c) share: the page pool's order, the block table's checks, and the two rules
 * that choose a split count (ours and FlashAttention-2's), compared in README.md, "How many
 * splits".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "decode.h"

int dec_pages_for(int n, int page_size) { return n <= 0 ? 0 : (n - 1) / page_size + 1; }

int dec_check_block_table(const int *table, int B, int width, const int *seqlens, int page_size,
                          int num_pages, char *why, size_t len) {
    unsigned char *owner = (unsigned char *)calloc((size_t)num_pages + 1, 1);
    if (owner == NULL)
        return attn_reason(why, len, 1, "out of host memory for the block table's check");
    int rc = 0;
    for (int b = 0; b < B && rc == 0; ++b) {
        const int need = dec_pages_for(seqlens[b], page_size);
        if (need > width)
            rc = attn_reason(why, len, 1,
                             "sequence %d: a context of %d tokens needs %d pages of %d but its "
                             "block table holds %d",
                             b, seqlens[b], need, page_size, width);
        for (int x = 0; x < need && rc == 0; ++x) {
            const int page = table[(size_t)b * width + x];
            if (page < 0 || page >= num_pages)
                rc = attn_reason(why, len, 1,
                                 "block table entry [%d][%d] = %d is outside the pool of %d pages",
                                 b, x, page, num_pages);
            else if (owner[page])
                rc = attn_reason(why, len, 1, "block table entry [%d][%d]: page %d is used twice",
                                 b, x, page);
            else
                owner[page] = 1;
        }
    }
    free(owner);
    return rc;
}

/* SplitMix64's output function (the harness's generator uses it too, attn/tensor.h). */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dec_shuffle(int *perm, int n, uint64_t seed) {
    for (int x = 0; x < n; ++x)
        perm[x] = x;
    for (int x = n - 1; x > 0; --x) { /* Fisher-Yates */
        const int y =
            (int)(mix(seed + 0x9E3779B97F4A7C15ull * (uint64_t)(x + 1)) % (uint64_t)(x + 1));
        const int t = perm[x];
        perm[x] = perm[y];
        perm[y] = t;
    }
}

int dec_fill_table(int *table, int B, int width, const int *seqlens, int page_size, int num_pages,
                   uint64_t seed) {
    int *perm = (int *)malloc((size_t)(num_pages > 0 ? num_pages : 1) * sizeof(int));
    if (perm == NULL)
        return 1;
    dec_shuffle(perm, num_pages, seed);
    int next = 0;
    for (int b = 0; b < B; ++b)
        for (int x = 0; x < width; ++x)
            table[(size_t)b * width + x] =
                x < dec_pages_for(seqlens[b], page_size) ? perm[next++] : -1;
    free(perm);
    return 0;
}

int dec_blocks_per_split(int B, int H, int H_kv, int Lq) {
    const int rows = Lq * (H / H_kv);
    return B * H_kv * ((rows + DEC_ROWS - 1) / DEC_ROWS);
}

/* Ours: every block resident at once (2 per SM), so no block waits for a second wave; no split
 * shorter than DEC_MIN_KEYS_PER_SPLIT keys, whose own reads would be small beside the partial
 * result it writes and the combine reads back. */
int dec_splits_ours(int sm_count, int blocks, int keys) {
    int s = blocks > 0 ? 2 * sm_count / blocks : 1;
    s = s < keys / DEC_MIN_KEYS_PER_SPLIT ? s : keys / DEC_MIN_KEYS_PER_SPLIT;
    s = s < DEC_MAX_SPLITS / 2 ? s : DEC_MAX_SPLITS / 2;
    return s < 1 ? 1 : s;
}

/* FlashAttention-2's num_splits_heuristic (flash_api.cpp), written from its description: the
 * blocks are (batch x heads x query blocks), the SM count doubled, key blocks of 256/128/64 keys
 * by head dimension, at most 128 splits. */
int dec_splits_flash(int sm_count, int blocks, int keys, int D) {
    const int slots = 2 * sm_count;
    if (blocks >= 0.8f * slots)
        return 1;
    const int block_n = D <= 64 ? 256 : D <= 128 ? 128 : 64;
    const int key_blocks = (keys + block_n - 1) / block_n;
    int most = 128;
    most = most < slots ? most : slots;
    most = most < key_blocks ? most : key_blocks;
    float eff[129], best = 0.0f;
    for (int s = 1; s <= most; ++s) {
        /* s splits give the same keys per split as s - 1: not a choice of its own */
        const bool same = s > 1 && (key_blocks + s - 1) / s == (key_blocks + s - 2) / (s - 1);
        const float waves = (float)blocks * s / slots;
        eff[s] = same ? 0.0f : waves / ceilf(waves);
        if (eff[s] > best)
            best = eff[s];
    }
    for (int s = 1; s <= most; ++s)
        if (eff[s] > 0.0f && eff[s] >= 0.85f * best)
            return s;
    return 1;
}
