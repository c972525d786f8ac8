/* test_patterns.c — the sparse patterns (attn/sparse/patterns.h): spec parsing and its errors, the
 * predicate on hand-checked entries, BigBird's seeded random blocks, and every pattern's fast
 * block mask builder and CSR against the exact ones built from the predicate
 * (attn_block_mask_from_mask, attn_block_mask_validate), over tails, Lq != Lk, causal and varlen
 * problems and the edge cases (window 0, window >= L, stride > L, rows that see nothing).
 * An example's own kinds (attn_pattern_register) are exercised with two defined here: "band", a
 * kind on blocks (its rule on blocks drives the builder), and "every", a kind on entries (the
 * builder tests each entry of a tile). Example 06's ladder has its own test in its folder. */
#include <stdlib.h>
#include <string.h>

#include "attn/sparse/patterns.h"
#include "unit_test.h"

/* band:b=B[,r=R]: query block I keeps key block J iff |I - J| <= r (r = 1). */
static int band_block_keep(const attn_pattern_part *pt, int I, int J, int NB) {
    (void)NB;
    return abs(I - J) <= pt->x[1];
}
static int band_keep(const attn_pattern_part *pt, int a, int j, int Lk) {
    int b = pt->x[0];
    return band_block_keep(pt, attn_floor_div(a, b), j / b, (Lk + b - 1) / b);
}
/* every:m=M: key j iff (a - j) is a multiple of m (both signs). */
static int every_keep(const attn_pattern_part *pt, int a, int j, int Lk) {
    (void)Lk;
    return (a - j) % pt->x[0] == 0;
}
static const attn_pattern_kind_def band_def = {
    .name = "band",
    .usage = "band:b=B[,r=R]",
    .params = {{.name = "b", .required = true, .min = 1, .max = 1 << 20},
               {.name = "r", .def = 1, .max = 8}},
    .keep = band_keep,
    .block_param = 0,
    .block_keep = band_block_keep,
};
static const attn_pattern_kind_def every_def = {
    .name = "every",
    .usage = "every:m=M",
    .params = {{.name = "m", .required = true, .min = 1, .max = 1 << 20}},
    .keep = every_keep,
};
static const attn_pattern_kind_def *const own_kinds[] = {&band_def, &every_def, NULL};

static attn_pattern parse_ok(const char *spec) {
    attn_pattern pat;
    char err[256] = "";
    if (!unit_check(attn_pattern_parse(spec, &pat, err, sizeof err) == 0, __FILE__, __LINE__, spec))
        printf("    %s\n", err);
    return pat;
}

static void test_parse(void) {
    const char *round_trip[] = {"window:w=128",
                                "causal_window:w=4096",
                                "dilated:w=4,d=2",
                                "strided:l=64",
                                "fixed:l=64,c=8",
                                "global:g=0-2,7",
                                "bigbird:b=64,r=3,seed=1",
                                "band:b=64,r=2",
                                "every:m=3+window:w=1",
                                "window:w=3+global:g=0-1",
                                "none"};
    for (size_t n = 0; n < sizeof round_trip / sizeof round_trip[0]; ++n) {
        attn_pattern pat = parse_ok(round_trip[n]);
        char buf[256];
        attn_pattern_format(&pat, buf, sizeof buf);
        CHECK_CONTAINS(buf, round_trip[n]);
    }
    attn_pattern g = parse_ok("global:g=0,1,2,9,5-6,3");
    CHECK_EQ(g.part[0].n_ranges, 3); /* {0-3}, {5-6}, {9} */
    CHECK_EQ(g.part[0].hi[0], 4);
    CHECK_EQ(g.part[0].lo[2], 9);
    attn_pattern n = parse_ok("global:n=4");
    CHECK_EQ(n.part[0].hi[0], 4);
    CHECK_EQ(parse_ok("bigbird:b=16,r=2").part[0].seed, 0);
}

static void test_parse_errors(void) {
    struct {
        const char *spec, *needle;
    } bad[] = {
        {"windw:w=3", "unknown pattern 'windw:w=3'"},
        {"window:x=3", "unknown parameter 'x' (window takes w)"},
        {"window", "missing parameter w"},
        {"dilated:w=2", "missing parameter d"},
        {"dilated:w=2,d=0", "d must be an integer in [1,"},
        {"window:w=-1", "w must be an integer"},
        {"window:w=3x", "w must be an integer"},
        {"fixed:l=8,c=9", "c must be at most l"},
        {"bigbird:b=64,r=17", "r must be an integer in [0, 16]"},
        {"bigbird:b=64", "missing parameter r"},
        {"band:b=0", "b must be an integer in [1,"},
        {"band:r=2", "missing parameter b"},
        {"band:b=4,q=1", "unknown parameter 'q' (band takes b,r (optional))"},
        {"band:b=4,b=5", "b is given twice"},
        {"window:w=3,w=4", "w is given twice"},
        {"global:g=5-2", "N or N-M"},
        {"global:g=0,2,4,6,8,10,12,14,16", "more than 8 separate global ranges"},
        {"window:w=1+", "empty part"},
        {"window:w=1+window:w=2+window:w=3+window:w=4+window:w=5", "more than 4 parts"},
        {"window:w=1,2", "expected name=value"},
        {"window: w=1", "contains a space"},
        {"", "empty pattern"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        attn_pattern pat;
        char err[256] = "";
        CHECK(attn_pattern_parse(bad[k].spec, &pat, err, sizeof err) == -1);
        CHECK_CONTAINS(err, bad[k].needle);
        CHECK(strchr(err, '\n') == NULL);
        CHECK_EQ(pat.n_parts, 0);
    }
}

static void test_predicate(void) {
    attn_pattern w = parse_ok("window:w=2"), cw = parse_ok("causal_window:w=3");
    attn_pattern dil = parse_ok("dilated:w=2,d=3"), st = parse_ok("strided:l=4");
    attn_pattern fx = parse_ok("fixed:l=4,c=1"), gl = parse_ok("global:g=1");
    CHECK(attn_pattern_keep(&w, 10, 8, 20, 20) && attn_pattern_keep(&w, 10, 12, 20, 20));
    CHECK(!attn_pattern_keep(&w, 10, 13, 20, 20) && !attn_pattern_keep(&w, 10, 7, 20, 20));
    CHECK(attn_pattern_keep(&cw, 10, 8, 20, 20) && attn_pattern_keep(&cw, 10, 10, 20, 20));
    CHECK(!attn_pattern_keep(&cw, 10, 7, 20, 20) && !attn_pattern_keep(&cw, 10, 11, 20, 20));
    /* Lq = 1, Lk = 20: the one query sits at aligned position 19. */
    CHECK(attn_pattern_keep(&cw, 0, 17, 1, 20) && !attn_pattern_keep(&cw, 0, 16, 1, 20));
    CHECK(attn_pattern_keep(&dil, 10, 4, 20, 20) && attn_pattern_keep(&dil, 10, 16, 20, 20));
    CHECK(!attn_pattern_keep(&dil, 10, 11, 20, 20) && !attn_pattern_keep(&dil, 10, 19, 20, 20));
    CHECK(attn_pattern_keep(&st, 10, 2, 20, 20) && attn_pattern_keep(&st, 10, 7, 20, 20));
    CHECK(!attn_pattern_keep(&st, 10, 5, 20, 20) && !attn_pattern_keep(&st, 10, 14, 20, 20));
    CHECK(attn_pattern_keep(&fx, 10, 8, 20, 20) && attn_pattern_keep(&fx, 10, 11, 20, 20));
    CHECK(attn_pattern_keep(&fx, 10, 3, 20, 20) && !attn_pattern_keep(&fx, 10, 4, 20, 20));
    CHECK(attn_pattern_keep(&gl, 1, 19, 20, 20) && attn_pattern_keep(&gl, 15, 1, 20, 20));
    CHECK(!attn_pattern_keep(&gl, 15, 2, 20, 20));
}

static void test_bigbird_random(void) {
    attn_pattern a = parse_ok("bigbird:b=4,r=3,seed=7"), b = parse_ok("bigbird:b=4,r=3,seed=8");
    int differ = 0;
    for (int I = 0; I < 20; ++I) {
        int ra[ATTN_PATTERN_MAX_RANDOM], rb[ATTN_PATTERN_MAX_RANDOM],
            again[ATTN_PATTERN_MAX_RANDOM];
        int n = attn_bigbird_random(&a.part[0], I, 20, ra);
        CHECK_EQ(n, 3);
        CHECK_EQ(attn_bigbird_random(&a.part[0], I, 20, again), 3);
        CHECK(memcmp(ra, again, sizeof(int) * 3) == 0); /* reproducible */
        attn_bigbird_random(&b.part[0], I, 20, rb);
        differ += memcmp(ra, rb, sizeof(int) * 3) != 0;
        for (int e = 0; e < n; ++e) { /* distinct, in range, not a window or global block */
            CHECK(ra[e] > 0 && ra[e] < 19 && abs(ra[e] - I) > 1);
            for (int f = 0; f < e; ++f)
                CHECK(ra[e] != ra[f]);
        }
    }
    CHECK(differ > 10); /* another seed, other blocks */
    /* NB = 6, query block 2 keeps 0, 1, 2, 3, 5: only block 4 is left for r = 3. */
    int r[ATTN_PATTERN_MAX_RANDOM];
    CHECK_EQ(attn_bigbird_random(&a.part[0], 2, 6, r), 1);
    CHECK_EQ(r[0], 4);
}

/* ---- the builders against the exact block mask ----------------------------------------------- */

static bool same_list(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0;
}

/* Builds pat's block mask on p and compares: exact for one part; for unions the listed tiles
 * equal and every tile listed full is full. Then the CSR against the predicate. */
static void check_builders(const char *spec, const attn_problem *p, int bq, int bk) {
    attn_pattern pat = parse_ok(spec);
    attn_pattern_ctx ctx = {&pat, p};
    attn_mask mask = attn_pattern_mask(&ctx);
    attn_block_mask fast, exact;
    char why[256] = "";
    CHECK(attn_pattern_block_mask(&fast, &pat, p, bq, bk) == 0);
    CHECK(attn_block_mask_from_mask(&exact, p, &mask, bq, bk) == 0);
    bool ok = attn_block_mask_validate(&fast, p, &mask, why, sizeof why) == 0;
    ok = ok && attn_block_mask_count_empty(&fast, p, &mask) == 0;
    for (int r = 0; ok && r < fast.batches * fast.num_q_blocks; ++r) {
        size_t off = (size_t)r * fast.num_k_blocks;
        int ff = fast.full_kv_num_blocks[r], fp = fast.kv_num_blocks[r];
        int ef = exact.full_kv_num_blocks[r], ep = exact.kv_num_blocks[r];
        if (pat.n_parts <= 1)
            ok = same_list(fast.full_kv_indices + off, ff, exact.full_kv_indices + off, ef) &&
                 same_list(fast.kv_indices + off, fp, exact.kv_indices + off, ep);
        else
            ok = ff + fp == ef + ep && ff <= ef;
    }
    attn_csr csr;
    CHECK(attn_pattern_csr(&csr, &pat, p, &fast) == 0);
    int64_t nnz = 0;
    for (int b = 0; ok && b < p->B; ++b)
        for (int i = 0; ok && i < p->Lq; ++i) {
            int64_t r = (int64_t)b * p->Lq + i, at = csr.row_ptr[r];
            bool in_seq = i < attn_problem_seq_q(p, b);
            for (int j = 0; ok && in_seq && j < attn_problem_seq_k(p, b); ++j)
                if (attn_entry_visible(p, &mask, b, 0, i, j))
                    ok = at < csr.row_ptr[r + 1] && csr.col_idx[at++] == j, ++nnz;
            ok = ok && at == csr.row_ptr[r + 1];
        }
    attn_pattern_stats s = attn_pattern_stats_of(&pat, p, &fast);
    ok = ok && csr.nnz == nnz && s.entries == (double)nnz;
    if (!unit_check(ok, __FILE__, __LINE__, "fast builder and CSR match the exact masks"))
        printf("    pattern %s, B=%d Lq=%d Lk=%d causal=%d varlen=%d, tiles %dx%d: %s\n", spec,
               p->B, p->Lq, p->Lk, p->causal, attn_problem_is_varlen(p), bq, bk, why);
    attn_csr_free(&csr);
    attn_block_mask_free(&fast);
    attn_block_mask_free(&exact);
}

static const char *const specs[] = {
    "none", "window:w=0", "window:w=5", "window:w=1000", "causal_window:w=0", "causal_window:w=1",
    "causal_window:w=9", "dilated:w=3,d=1", "dilated:w=3,d=4", "dilated:w=100,d=7", "strided:l=1",
    "strided:l=6", "strided:l=500", "fixed:l=8,c=2", "fixed:l=5,c=0", "fixed:l=7,c=7",
    "global:g=0,3-5,40", "global:n=1",
    /* ranges across tile edges (tiles of 8 and 16) */
    "global:g=6-9", "global:g=12-20,30-33", "global:g=15-16,23-25", "bigbird:b=8,r=2,seed=3",
    "bigbird:b=5,r=1", "bigbird:b=16,r=16,seed=9", "window:w=3+global:g=0-1",
    "causal_window:w=4+strided:l=5", "dilated:w=2,d=3+window:w=1+fixed:l=9,c=1",
    /* an example's own kinds: on blocks smaller than, equal to and larger than the tiles, and on
     * entries */
    "band:b=3", "band:b=8,r=0", "band:b=16,r=2", "band:b=5+causal_window:w=2", "every:m=1",
    "every:m=7", "every:m=4+global:n=1"};

static void test_builders(void) {
    /* {B, Lq, Lk, causal} dense problems, tiles of 8 x 16 and 16 x 8 */
    const int shapes[][4] = {{1, 1, 1, 0},   {1, 17, 17, 1}, {2, 40, 40, 0}, {1, 41, 41, 1},
                             {1, 13, 50, 1}, {1, 50, 13, 0}, {1, 50, 13, 1}};
    for (size_t sp = 0; sp < sizeof specs / sizeof specs[0]; ++sp)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh) {
            attn_problem p;
            attn_problem_init(&p, shapes[sh][0], 1, shapes[sh][1], shapes[sh][2], 8);
            p.causal = shapes[sh][3];
            check_builders(specs[sp], &p, 8, 16);
            check_builders(specs[sp], &p, 16, 8);
        }
    /* varlen: sequences of 0, 21 and 37 queries (keys 5, 21, 44) */
    static const int cu_q[] = {0, 0, 21, 58}, cu_k[] = {0, 5, 26, 70};
    for (size_t sp = 0; sp < sizeof specs / sizeof specs[0]; ++sp)
        for (int causal = 0; causal < 2; ++causal) {
            attn_problem p = unit_varlen_problem(3, 2, 37, 44, 8, cu_q, cu_k);
            p.causal = causal;
            check_builders(specs[sp], &p, 8, 8);
        }
}

static void test_edges_and_stats(void) {
    attn_problem p;
    attn_problem_init(&p, 1, 1, 64, 64, 8);
    attn_block_mask m;
    /* Window >= L is dense: every tile full; stride > L under causality is the causal band. */
    attn_pattern wide = parse_ok("window:w=64");
    CHECK(attn_pattern_block_mask(&m, &wide, &p, 16, 16) == 0);
    attn_pattern_stats s = attn_pattern_stats_of(&wide, &p, &m);
    CHECK_EQ(s.blocks.full_blocks, 16);
    CHECK_EQ(s.blocks.partial_blocks, 0);
    CHECK_NEAR(s.density, 1.0, 0);
    CHECK_NEAR(s.block_fill, 1.0, 0);
    attn_block_mask_free(&m);
    attn_pattern far = parse_ok("strided:l=1000");
    CHECK(attn_pattern_block_mask(&m, &far, &p, 16, 16) == 0);
    s = attn_pattern_stats_of(&far, &p, &m);
    CHECK_NEAR(s.entries, 64.0 * 65.0 / 2.0, 0);
    CHECK_EQ(s.blocks.full_blocks, 6);
    CHECK_EQ(s.blocks.partial_blocks, 4);
    attn_block_mask_free(&m);
    /* causal_window:w=0 keeps nothing: every list empty, no entries. */
    attn_pattern none = parse_ok("causal_window:w=0");
    CHECK(attn_pattern_block_mask(&m, &none, &p, 16, 16) == 0);
    s = attn_pattern_stats_of(&none, &p, &m);
    CHECK_NEAR(s.entries, 0.0, 0);
    CHECK_EQ(s.blocks.full_blocks + s.blocks.partial_blocks, 0);
    attn_block_mask_free(&m);
    /* window:w=0 is the diagonal: density 1/L, the 4 diagonal tiles partial. */
    attn_pattern diag = parse_ok("window:w=0");
    CHECK(attn_pattern_block_mask(&m, &diag, &p, 16, 16) == 0);
    s = attn_pattern_stats_of(&diag, &p, &m);
    CHECK_NEAR(s.density, 1.0 / 64.0, 1e-15);
    CHECK_NEAR(s.speedup_bound, 64.0, 1e-12);
    CHECK_EQ(s.blocks.partial_blocks, 4);
    CHECK_NEAR(s.block_fill, 64.0 / (4.0 * 256.0), 1e-15);
    CHECK_EQ(s.blocks.metadata_bytes, (2 * 4 + 2 * 16) * 4);
    attn_block_mask_free(&m);
    CHECK(attn_pattern_kinds(&diag) == ATTN_PATTERN_BIT(ATTN_PATTERN_WINDOW));
    CHECK(strcmp(attn_pattern_kind_name(ATTN_PATTERN_BIGBIRD), "bigbird") == 0);
}

static void test_own_kinds(void) {
    attn_pattern pat = parse_ok("band:b=4");
    CHECK_EQ(pat.part[0].kind, ATTN_PATTERN_KINDS);     /* the first kind registered */
    CHECK_EQ(pat.part[0].x[1], 1);                      /* r's default */
    CHECK(attn_pattern_keep_host(&pat, 9, 4, 20, 20));  /* blocks 2 and 1 */
    CHECK(!attn_pattern_keep_host(&pat, 9, 3, 20, 20)); /* blocks 2 and 0 */
    CHECK(!attn_pattern_keep(&pat, 9, 4, 20, 20));      /* the device's predicate alone: no */
    CHECK(strcmp(attn_pattern_kind_name(ATTN_PATTERN_KINDS + 1), "every") == 0);
    CHECK(attn_pattern_register(own_kinds) == 0); /* again: the same numbers */
    CHECK_EQ(parse_ok("every:m=2").part[0].kind, ATTN_PATTERN_KINDS + 1);
    static const attn_pattern_kind_def clash = {
        .name = "window",
        .usage = "",
        .params = {{.name = "w", .required = true, .max = 9}},
        .keep = every_keep};
    static const attn_pattern_kind_def *const bad[] = {&clash, NULL};
    CHECK(attn_pattern_register(bad) == -1); /* a name the chapter uses */
}

int main(void) {
    CHECK(attn_pattern_register(own_kinds) == 0);
    test_own_kinds();
    test_parse();
    test_parse_errors();
    test_predicate();
    test_bigbird_random();
    test_builders();
    test_edges_and_stats();
    return unit_finish();
}
