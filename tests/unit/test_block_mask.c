/* test_block_mask.c — the block mask (attn/sparse/block_mask.h): the exact builder on hand-checked
 * cases (causal, a band, tails, Lq != Lk, varlen), the validator catching each kind of broken mask,
 * the statistics, and the device copy round trip. */
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/sparse/block_mask.h"
#include "unit_test.h"

static int32_t full_count(const attn_block_mask *m, int b, int qb) {
    return m->full_kv_num_blocks[b * m->num_q_blocks + qb];
}
static int32_t part_count(const attn_block_mask *m, int b, int qb) {
    return m->kv_num_blocks[b * m->num_q_blocks + qb];
}
static int32_t *full_list(const attn_block_mask *m, int b, int qb) {
    return m->full_kv_indices + ((size_t)b * m->num_q_blocks + qb) * m->num_k_blocks;
}
static int32_t *part_list(const attn_block_mask *m, int b, int qb) {
    return m->kv_indices + ((size_t)b * m->num_q_blocks + qb) * m->num_k_blocks;
}

/* |i - j| <= 3: a band that crosses tile borders. */
static int band3(const void *ctx, int b, int h, int i, int j) {
    (void)ctx, (void)b, (void)h;
    return abs(i - j) <= 3;
}

static void test_causal(void) {
    /* L = 10, tiles of 4: query blocks {0-3, 4-7, 8-9}. Causal: block (qb, qb) is partial
     * (diagonal) except the tail block (8-9) x (8-9), which is partial too (9 sees 8, 8 not 9). */
    attn_problem p;
    attn_problem_init(&p, 1, 1, 10, 10, 8);
    p.causal = true;
    attn_block_mask m;
    CHECK(attn_block_mask_from_mask(&m, &p, NULL, 4, 4) == 0);
    CHECK_EQ(m.num_q_blocks, 3);
    CHECK_EQ(m.num_k_blocks, 3);
    CHECK_EQ(full_count(&m, 0, 0), 0);
    CHECK_EQ(part_count(&m, 0, 0), 1);
    CHECK_EQ(part_list(&m, 0, 0)[0], 0);
    CHECK_EQ(full_count(&m, 0, 2), 2);
    CHECK_EQ(full_list(&m, 0, 2)[0], 0);
    CHECK_EQ(full_list(&m, 0, 2)[1], 1);
    CHECK_EQ(part_count(&m, 0, 2), 1);
    CHECK_EQ(part_list(&m, 0, 2)[0], 2);
    char why[256] = "";
    CHECK(attn_block_mask_validate(&m, &p, NULL, why, sizeof why) == 0);
    CHECK_EQ(attn_block_mask_count_empty(&m, &p, NULL), 0);
    attn_block_mask_stats s = attn_block_mask_stats_of(&m);
    CHECK_EQ(s.tiles, 9);
    CHECK_EQ(s.full_blocks, 3);
    CHECK_EQ(s.partial_blocks, 3);
    CHECK_NEAR(s.block_density, 6.0 / 9.0, 1e-12);
    CHECK_EQ(s.metadata_bytes, (2 * 3 + 2 * 9) * 4);
    attn_block_mask_free(&m);
    CHECK(m.kv_indices == NULL);
}

static void test_band_lq_ne_lk(void) {
    /* Lq = 6, Lk = 13, tiles 4 x 5, |i - j| <= 3: query block 0 (rows 0-3) sees keys 0-6, i.e.
     * key blocks 0 (partial: (0,4) masked) and 1 (partial); block 1 (rows 4-5) keys 1-8: blocks 0
     * and 1, both partial. Key block 2 (10-12) is never seen. */
    attn_problem p;
    attn_problem_init(&p, 1, 2, 6, 13, 8);
    attn_mask mask = {.kind = ATTN_MASK_PREDICATE, .keep = band3};
    attn_block_mask m;
    CHECK(attn_block_mask_from_mask(&m, &p, &mask, 4, 5) == 0);
    CHECK_EQ(m.num_q_blocks, 2);
    CHECK_EQ(m.num_k_blocks, 3);
    for (int qb = 0; qb < 2; ++qb) {
        CHECK_EQ(full_count(&m, 0, qb), 0);
        CHECK_EQ(part_count(&m, 0, qb), 2);
        CHECK_EQ(part_list(&m, 0, qb)[1], 1);
    }
    char why[256] = "";
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == 0);

    /* Each kind of broken mask is named. */
    part_list(&m, 0, 0)[1] = 0; /* {0, 0}: not ascending */
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "ascending");
    part_list(&m, 0, 0)[1] = 3; /* out of range */
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "outside");
    part_list(&m, 0, 0)[1] = 1;
    m.kv_num_blocks[0] = 1; /* key block 1 dropped: its visible entries would be skipped */
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "not listed");
    m.full_kv_num_blocks[0] = 1; /* key block 1 called full: (0, 5) is masked */
    full_list(&m, 0, 0)[0] = 1;
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "listed full");
    m.kv_num_blocks[0] = 2; /* and partial as well */
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "both full and partial");
    m.full_kv_num_blocks[0] = 0;
    part_list(&m, 0, 1)[2] = 2; /* key block 2 listed although nothing in it is visible */
    m.kv_num_blocks[1] = 3;
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == 0);
    CHECK_EQ(attn_block_mask_count_empty(&m, &p, &mask), 1);
    m.Lk = 12; /* shape mismatch */
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == -1);
    CHECK_CONTAINS(why, "does not match");
    m.Lk = 13;
    attn_block_mask_free(&m);
}

static void test_varlen(void) {
    /* Two sequences of 3 and 9 tokens, causal, tiles of 4: slice 0 has one query block, slice 1
     * three; query blocks past a sequence's end have empty lists. */
    static const int cu[3] = {0, 3, 12};
    attn_problem p = unit_varlen_problem(2, 1, 9, 9, 8, cu, cu);
    p.causal = true;
    attn_block_mask m;
    CHECK(attn_block_mask_from_mask(&m, &p, NULL, 4, 4) == 0);
    CHECK_EQ(m.batches, 2);
    CHECK_EQ(part_count(&m, 0, 0), 1);
    CHECK_EQ(part_count(&m, 0, 1) + full_count(&m, 0, 1), 0);
    CHECK_EQ(part_count(&m, 0, 2) + full_count(&m, 0, 2), 0);
    /* Row 8 sees keys 0-8: key blocks 0 and 1 whole, and key block 2, whose only in-range entry
     * (8, 8) is visible, so it is full too. Rows 4-7 see keys 0-7: block 1 is the diagonal. */
    CHECK_EQ(full_count(&m, 1, 2), 3);
    CHECK_EQ(part_count(&m, 1, 2), 0);
    CHECK_EQ(full_count(&m, 1, 1), 1);
    CHECK_EQ(part_count(&m, 1, 1), 1);
    char why[256] = "";
    CHECK(attn_block_mask_validate(&m, &p, NULL, why, sizeof why) == 0);
    attn_block_mask_free(&m);
}
/* A hand-built layout read back as a token mask (attn_block_mask_as_mask): exactly the entries
 * of the listed tiles, full or partial, in the slice they are listed for. */
static void test_listed_tiles_mask(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 1, 10, 9, 8); /* tiles of 4: 3 query blocks x 3 key blocks */
    attn_block_mask m;
    CHECK(attn_block_mask_alloc(&m, 2, 10, 9, 4, 4) == 0);
    m.full_kv_num_blocks[0 * 3 + 1] = 1; /* slice 0, query block 1: full {2}, partial {0} */
    full_list(&m, 0, 1)[0] = 2;
    m.kv_num_blocks[0 * 3 + 1] = 1;
    part_list(&m, 0, 1)[0] = 0;
    m.kv_num_blocks[1 * 3 + 2] = 1; /* slice 1, query block 2 (the tail rows 8-9): partial {1} */
    part_list(&m, 1, 2)[0] = 1;
    attn_mask mask = attn_block_mask_as_mask(&m);
    int kept = 0;
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 10; ++i)
            for (int j = 0; j < 9; ++j) {
                bool want = (b == 0 && i / 4 == 1 && (j / 4 == 2 || j / 4 == 0)) ||
                            (b == 1 && i / 4 == 2 && j / 4 == 1);
                kept += want;
                CHECK_EQ(attn_entry_visible(&p, &mask, b, 0, i, j), want);
            }
    CHECK_EQ(kept, 4 * 5 + 2 * 4);
    CHECK(!attn_block_mask_lists(&m, 2, 4, 0));  /* no slice 2 */
    CHECK(!attn_block_mask_lists(&m, 0, 12, 0)); /* past the last query block */
    char why[256] = "";
    CHECK(attn_block_mask_validate(&m, &p, &mask, why, sizeof why) == 0);
    attn_block_mask_free(&m);
}

/* The transposed view: for every key block, the query blocks that list it, ascending and in the
 * same kind (full or partial); reading it with keys and queries exchanged lists the same tiles.
 * A band with Lq != Lk, tiles of 4 x 3 (not square), two varlen slices of different lengths. */
static void test_transpose(void) {
    static const int cu_q[3] = {0, 10, 17}, cu_k[3] = {0, 13, 15};
    attn_problem p = unit_varlen_problem(2, 1, 10, 13, 8, cu_q, cu_k);
    p.causal = true;
    attn_mask mask = {ATTN_MASK_PREDICATE, band3, NULL, NULL, NULL};
    attn_block_mask m, t;
    CHECK(attn_block_mask_from_mask(&m, &p, &mask, 4, 3) == 0);
    CHECK(attn_block_mask_transpose(&m, &t) == 0);
    CHECK_EQ(t.Lq, 13);
    CHECK_EQ(t.Lk, 10);
    CHECK_EQ(t.block_q, 3);
    CHECK_EQ(t.block_k, 4);
    CHECK_EQ(t.num_q_blocks, m.num_k_blocks);
    CHECK_EQ(t.num_k_blocks, m.num_q_blocks);
    int agree = 0, listed = 0, kinds = 0, sorted = 1;
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 12; ++i)
            for (int j = 0; j < 15; ++j) {
                bool in_m = attn_block_mask_lists(&m, b, i, j);
                agree += in_m == attn_block_mask_lists(&t, b, j, i);
                listed += in_m;
            }
    for (int b = 0; b < 2; ++b)
        for (int kb = 0; kb < t.num_q_blocks; ++kb) {
            const int row = b * t.num_q_blocks + kb;
            for (int l = 0; l < 2; ++l) {
                const int32_t *list = (l ? t.kv_indices : t.full_kv_indices) + row * t.num_k_blocks;
                const int n = (l ? t.kv_num_blocks : t.full_kv_num_blocks)[row];
                for (int e = 0; e < n; ++e) {
                    sorted &= e == 0 || list[e] > list[e - 1];
                    /* the same tile in m, in the same kind of list */
                    const int mrow = b * m.num_q_blocks + list[e];
                    const int32_t *ml =
                        (l ? m.kv_indices : m.full_kv_indices) + mrow * m.num_k_blocks;
                    const int mn = (l ? m.kv_num_blocks : m.full_kv_num_blocks)[mrow];
                    int found = 0;
                    for (int x = 0; x < mn; ++x)
                        found |= ml[x] == kb;
                    kinds += found;
                }
            }
        }
    CHECK_EQ(agree, 2 * 12 * 15);
    CHECK(listed > 0);
    CHECK(sorted);
    attn_block_mask_stats sm = attn_block_mask_stats_of(&m), st = attn_block_mask_stats_of(&t);
    CHECK_EQ(st.full_blocks, sm.full_blocks);
    CHECK_EQ(st.partial_blocks, sm.partial_blocks);
    CHECK_EQ(kinds, (int)(sm.full_blocks + sm.partial_blocks));
    attn_block_mask_free(&t);
    attn_block_mask_free(&m);
}

static void test_bad_sizes_and_device(void) {
    attn_block_mask m;
    CHECK(attn_block_mask_alloc(&m, 1, 0, 4, 4, 4) == -1);
    CHECK(attn_block_mask_alloc(&m, 1, 4, 4, 0, 4) == -1);
    CHECK(m.kv_indices == NULL);

    attn_device_info info;
    char why[256];
    if (attn_device_init(&info, why, sizeof why) != 0)
        return; /* gpu build without a GPU: the host parts above still ran */
    attn_problem p;
    attn_problem_init(&p, 1, 1, 70, 50, 8);
    p.causal = true;
    CHECK(attn_block_mask_from_mask(&m, &p, NULL, 16, 16) == 0);
    attn_block_mask dev, back;
    CHECK(attn_block_mask_to_device(&m, &dev) == 0);
    CHECK(attn_block_mask_alloc(&back, 1, 70, 50, 16, 16) == 0);
    size_t counts = (size_t)m.num_q_blocks * sizeof(int32_t);
    size_t lists = counts * (size_t)m.num_k_blocks;
    CHECK(attn_to_host(back.kv_num_blocks, dev.kv_num_blocks, counts) == 0);
    CHECK(attn_to_host(back.full_kv_num_blocks, dev.full_kv_num_blocks, counts) == 0);
    CHECK(attn_to_host(back.kv_indices, dev.kv_indices, lists) == 0);
    CHECK(attn_to_host(back.full_kv_indices, dev.full_kv_indices, lists) == 0);
    CHECK(memcmp(back.kv_indices, m.kv_indices, lists) == 0);
    CHECK(memcmp(back.full_kv_num_blocks, m.full_kv_num_blocks, counts) == 0);
    attn_block_mask_free_device(&dev);
    CHECK(dev.kv_indices == NULL);
    attn_block_mask_free(&back);
    attn_block_mask_free(&m);
}

int main(void) {
    test_causal();
    test_band_lq_ne_lk();
    test_varlen();
    test_listed_tiles_mask();
    test_transpose();
    test_bad_sizes_and_device();
    return unit_finish();
}
