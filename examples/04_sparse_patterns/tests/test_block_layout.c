/* test_block_layout.c — example 04's block_sparse kernel (version 2) on block layouts built by
 * hand, not from a pattern: any block layout a user supplies (example 04 README, "Your own block
 * layout").
 *
 * A user's layout is an attn_block_mask (attn/sparse/block_mask.h, 64 x 64 tiles) with no token
 * predicate (attn_buffers.sparse->pattern NULL). The kernel then computes every entry of every
 * listed tile, full or partial, with the problem's causality on top (examples/04_sparse_patterns/
 * README.md, "Your own block layout"); attn_block_mask_as_mask is that set of entries as a
 * reference mask, and the harness's runner (attn/runner.h) checks the kernel against the CPU
 * reference under it, output and log-sum-exp.
 *
 * Each case writes its layout as a spec: query-block rows separated by ';', slices (sequences)
 * by '/', each row a list of key tiles "fK" (full) or "pK" (partial). The cases cover arbitrary
 * full tiles, non-contiguous lists, a query tile with no tiles (rows output 0, LSE -inf), tail
 * tiles (L not a multiple of 64), Lq != Lk, fp16 and bf16, D = 64 and 128, causal on top
 * (including full tiles that cross the diagonal and tiles causality hides entirely), and a
 * varlen batch (an empty sequence, tiles past a short sequence's end). The last case hands the
 * kernel a layout with one tile fewer than the reference's: it must FAIL, which shows the check
 * sees a skipped tile.
 *
 * Exit status: 0 when every case ends as expected, 1 otherwise, 77 on a gpu build without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/runner.h"
#include "attn/sparse/block_mask.h"
#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_example.h"

extern const attn_example sparse_patterns_example; /* sparse_patterns.cu */

typedef struct layout_case {
    const char *name;
    int B, H, Lq, Lk, D; /* Lq/Lk: maxima when varlen */
    attn_dtype dtype;
    bool causal;
    const int *cu_q, *cu_k; /* [B+1] or NULL */
    const char *layout;     /* what the kernel gets */
    const char *ref_layout; /* what the reference computes; NULL: the same */
    bool expect_fail;
} layout_case;

/* Fills m (allocated, lists empty) from spec; returns 0, or -1 naming the bad token. */
static int parse_layout(attn_block_mask *m, const char *spec) {
    int b = 0, qb = 0;
    for (const char *c = spec; *c != '\0';) {
        char *end = (char *)c + 1;
        long kb = *c == 'f' || *c == 'p' ? strtol(c + 1, &end, 10) : -1;
        if (*c == ' ') {
            ++c;
        } else if (*c == ';' || *c == '/') {
            b += *c == '/';
            qb = *c == '/' ? 0 : qb + 1;
            ++c;
        } else if (end > c + 1 && kb >= 0 && kb < m->num_k_blocks && b < m->batches &&
                   qb < m->num_q_blocks) {
            size_t row = (size_t)b * m->num_q_blocks + qb;
            int32_t *count = *c == 'f' ? &m->full_kv_num_blocks[row] : &m->kv_num_blocks[row];
            int32_t *list =
                (*c == 'f' ? m->full_kv_indices : m->kv_indices) + row * m->num_k_blocks;
            list[(*count)++] = (int32_t)kb;
            c = end;
        } else {
            fprintf(stderr, "error: bad layout at '%s' in '%s'\n", c, spec);
            return -1;
        }
    }
    return 0;
}

/* Runs one case; returns true when it ends as expected. */
static bool run_case(const layout_case *c, const attn_kernel *k, const char *device) {
    attn_problem p;
    attn_problem_init(&p, c->B, c->H, c->Lq, c->Lk, c->D);
    p.dtype = c->dtype;
    p.causal = c->causal;
    p.cu_seqlens_q = c->cu_q;
    p.cu_seqlens_k = c->cu_k;
    attn_block_mask given, ref, given_dev = {0};
    attn_problem_data d;
    memset(&d, 0, sizeof d);
    bool ok = false;
    if (attn_block_mask_alloc(&given, p.B, p.Lq, p.Lk, ATTN_SPARSE_TILE, ATTN_SPARSE_TILE) != 0 ||
        attn_block_mask_alloc(&ref, p.B, p.Lq, p.Lk, ATTN_SPARSE_TILE, ATTN_SPARSE_TILE) != 0 ||
        parse_layout(&given, c->layout) != 0 ||
        parse_layout(&ref, c->ref_layout ? c->ref_layout : c->layout) != 0) {
        printf("ERROR %s: cannot build the layout\n", c->name);
        goto done;
    }
    attn_mask mask = attn_block_mask_as_mask(&ref);
    if (attn_problem_data_make(&d, &p, &mask, false, 1, 1.0f, 0, true) != 0 ||
        attn_block_mask_to_device(&given, &given_dev) != 0) {
        printf("ERROR %s: no memory for the problem\n", c->name);
        goto done;
    }
    /* the user's layout, no pattern */
    attn_sparse_inputs inputs = {&given_dev, NULL, NULL};
    d.dev.sparse = &inputs;
    attn_outcome o;
    attn_outcome_init(&o, &sparse_patterns_example, k, &p, device);
    attn_run_opts opts = {0};
    opts.quiet = true;
    attn_run_kernel(&d, k, &opts, &o);
    ok = strcmp(o.rec.status, c->expect_fail ? "FAIL" : "PASS") == 0;
    printf("%s %s: %s (max error %.2e)%s  %s\n", ok ? "ok " : "BAD", c->name, o.rec.status,
           o.rec.max_abs_err, c->expect_fail ? ", a FAIL expected" : "", o.note);
done:
    attn_block_mask_free_device(&given_dev);
    attn_problem_data_free(&d);
    attn_block_mask_free(&given);
    attn_block_mask_free(&ref);
    return ok;
}

/* varlen: sequences of 100, 0 and 37 queries over 30, 130 and 65 keys (Lq 100, Lk 130: 2 query
 * blocks x 3 key blocks per slice). */
static const int cu_q[] = {0, 100, 100, 137};
static const int cu_k[] = {0, 30, 160, 225};

static const layout_case cases[] = {
    /* L = 200: tiles 0-2 of 64 keys and the tail tile 3 (8 keys); query block 1 lists nothing. */
    {"f16_noncontiguous", 1, 2, 200, 200, 64, ATTN_F16, false, NULL, NULL,
     "f0 f2 p3; ; f3 p1; f0 f3 p1 p2", NULL, false},
    /* Lq < Lk, causal (query i sees j <= i + 120): query block 0 lists the full tile 2 across its
     * diagonal and tile 3 that causality hides whole; slice 1 has another layout. */
    {"bf16_D128_causal_lq130_lk250", 2, 1, 130, 250, 128, ATTN_BF16, true, NULL, NULL,
     "f0 f2 f3; p1 f3; f1/p0 p3; ; f0 f1 f2 f3", NULL, false},
    /* Lq > Lk: key tile 1 is a 6-key tail listed as full. */
    {"f16_lq150_lk70", 1, 1, 150, 70, 64, ATTN_F16, false, NULL, NULL, "p1; f0; f0 f1", NULL,
     false},
    {"bf16_lq1_lk300_causal", 1, 2, 1, 300, 64, ATTN_BF16, true, NULL, NULL, "f1 f4 p2", NULL,
     false},
    /* varlen, causal: slice 0 lists key tile 2, past its 30 keys; the empty slice 1 lists tiles
     * that no block visits; slice 2's full tile 0 crosses its diagonal (j <= i + 28). */
    {"f16_varlen_causal", 3, 2, 100, 130, 64, ATTN_F16, true, cu_q, cu_k,
     "f0 p2; p0/f0 f1; f2/f0 f1", NULL, false},
    {"bf16_varlen_D128", 3, 1, 100, 130, 128, ATTN_BF16, false, cu_q, cu_k, "f0; f0 p2/ ; f1/f1 p2",
     NULL, false},
    /* The kernel gets tile 2 of query block 0 less than the reference: the check must FAIL. */
    {"check_sees_a_skipped_tile", 1, 1, 200, 200, 64, ATTN_F16, false, NULL, NULL, "f0; f1",
     "f0 f2; f1", true},
};

int main(void) {
    attn_device_info dev;
    int rc = attn_device_init_reported(&dev);
    if (rc != 0)
        return rc;
    const attn_kernel *k = attn_example_find(&sparse_patterns_example, 2);
    if (k == NULL || strcmp(k->name, "block_sparse") != 0) {
        printf("BAD: example 04 has no kernel 2 'block_sparse'\n");
        return 1;
    }
    int bad = 0, n = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n; ++c)
        bad += !run_case(&cases[c], k, dev.name);
    printf("%d of %d cases as expected\n", n - bad, n);
    return bad == 0 ? 0 : 1;
}
