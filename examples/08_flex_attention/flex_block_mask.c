/* flex_block_mask.c — example 08's module, step 3 (the module's build hook): the setting's
 * arrays on the device, the block mask made there by the mask_mod (flex_create_block_mask) and
 * compared with the brute-force classification on the host, the all-PARTIAL mask of
 * flex_no_block_mask, and the reference's mask.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/profile.h"
#include "attn/tensor.h"
#include "flex_module.h"

/* ---- step 3: the block mask, the reference's mask, the inputs ------------------------------- */

/* A new device copy of bytes host bytes (NULL after a reported error). */
void *flex_copy_to_device(const void *src, size_t bytes) {
    void *dst = NULL;
    if (attn_device_upload_bytes(&dst, src, bytes) != 0) {
        attn_device_free(dst);
        return NULL;
    }
    return dst;
}

/* The tiles of the two masks back on the host, and the brute-force check of the device's. */
static int check_block_mask(flex_state *s, const attn_problem *p) {
    attn_block_mask *m = &s->blocks, *d = &s->blocks_dev;
    const size_t rows = (size_t)m->batches * m->num_q_blocks, cells = rows * m->num_k_blocks;
    if (attn_to_host(m->kv_num_blocks, d->kv_num_blocks, rows * 4) ||
        attn_to_host(m->full_kv_num_blocks, d->full_kv_num_blocks, rows * 4) ||
        attn_to_host(m->kv_indices, d->kv_indices, cells * 4) ||
        attn_to_host(m->full_kv_indices, d->full_kv_indices, cells * 4) ||
        attn_to_host(s->counts, s->d_counts, cells * 4))
        return 1;
    s->entries = 0.0;
    for (size_t c = 0; c < cells; ++c)
        s->entries += s->counts[c];
    s->entries *= p->H;
    s->n_full = s->n_part = 0;
    for (size_t r = 0; r < rows; ++r) {
        s->n_full += m->full_kv_num_blocks[r];
        s->n_part += m->kv_num_blocks[r];
    }
    s->n_empty = (int64_t)cells - s->n_full - s->n_part;
    /* the brute force: every entry of every tile through the reference's mask on the host. Up to
     * 2e8 evaluations (about a second); the tests run it at every shape they check. */
    const double cost = (double)p->B * p->Lq * p->Lk;
    if (cost > 2e8) {
        s->compared = "not compared with the brute force here (B x Lq x Lk > 2e8; the tests do)";
        return 0;
    }
    attn_block_mask want;
    if (attn_block_mask_from_mask(&want, p, &s->mask, FLEX_TILE, FLEX_TILE) != 0) {
        fprintf(stderr, "error: out of host memory for the brute-force block mask\n");
        return 1;
    }
    int rc = 0;
    for (size_t r = 0; r < rows && rc == 0; ++r) {
        const int nf = want.full_kv_num_blocks[r], np = want.kv_num_blocks[r];
        const int32_t *wf = want.full_kv_indices + r * m->num_k_blocks;
        const int32_t *wp = want.kv_indices + r * m->num_k_blocks;
        const int32_t *gf = m->full_kv_indices + r * m->num_k_blocks;
        const int32_t *gp = m->kv_indices + r * m->num_k_blocks;
        rc = nf != m->full_kv_num_blocks[r] || np != m->kv_num_blocks[r] ||
             memcmp(wf, gf, (size_t)nf * 4) != 0 || memcmp(wp, gp, (size_t)np * 4) != 0;
        if (rc != 0)
            fprintf(stderr,
                    "error: the block mask made on the device differs from the brute-force "
                    "classification at sequence %d, query tile %d: FULL %d, PARTIAL %d tiles "
                    "(want %d, %d)\n",
                    (int)(r / m->num_q_blocks), (int)(r % m->num_q_blocks),
                    m->full_kv_num_blocks[r], m->kv_num_blocks[r], nf, np);
    }
    attn_block_mask_free(&want);
    s->compared = "equal to the brute-force classification on the host (every entry evaluated)";
    return rc;
}

int flex_build(void *state, const attn_example *ex, const bool *selected, const attn_problem *p,
               bool quiet, const attn_mask **mask, bool *dense_too) {
    flex_state *s = (flex_state *)state;
    for (int n = 0; n < ex->num_kernels; ++n)
        *dense_too |= selected[n] && (ex->kernels[n].serves & ATTN_SERVES_BASELINE);
    s->host = (flex_setting){s->spec, p->H, p->Lq, p->Lk, s->doc, s->table, s->slopes};
    s->mask = flex_reference_mask(&s->host, &s->store);
    if (s->spec.kind == FLEX_ALIBI) { /* the reference's own score_mod (above) */
        s->mask.score = flex_ref_alibi_score;
        s->mask.score_ctx = s;
    }
    *mask = &s->mask;
    /* the setting's arrays on the device */
    flex_setting dev = s->host;
    if (s->doc != NULL && (dev.doc = s->d_doc = (int *)flex_copy_to_device(
                               s->doc, (size_t)p->Lk * sizeof(int))) == NULL)
        return 1;
    if (s->table != NULL &&
        (dev.table = s->d_table = (float *)flex_copy_to_device(
             s->table, (size_t)p->H * (2 * s->spec.r + 1) * sizeof(float))) == NULL)
        return 1;
    if (s->slopes != NULL && (dev.slopes = s->d_slopes = (float *)flex_copy_to_device(
                                  s->slopes, (size_t)p->H * sizeof(float))) == NULL)
        return 1;
    /* the block mask, on the device from the mask_mod */
    if (attn_block_mask_alloc(&s->blocks, p->B, p->Lq, p->Lk, FLEX_TILE, FLEX_TILE) != 0 ||
        attn_block_mask_alloc(&s->partial, p->B, p->Lq, p->Lk, FLEX_TILE, FLEX_TILE) != 0) {
        fprintf(stderr, "error: out of host memory for the block masks\n");
        return 1;
    }
    const size_t rows = (size_t)p->B * s->blocks.num_q_blocks;
    const size_t cells = rows * s->blocks.num_k_blocks;
    s->counts = (int32_t *)malloc(cells * sizeof(int32_t));
    s->d_counts = (int32_t *)attn_device_alloc(cells * sizeof(int32_t));
    if (s->counts == NULL || s->d_counts == NULL ||
        attn_block_mask_to_device(&s->blocks, &s->blocks_dev) != 0 ||
        flex_create_block_mask(&dev, p->B, &s->blocks_dev, s->d_counts) != 0 ||
        check_block_mask(s, p) != 0)
        return 1;
    /* --profile: create_block_mask's launches are not a kernel's; shown on their own */
    attn_profile made;
    if (attn_profile_collect(NULL, &made) > 0 && !quiet)
        printf("profile of create_block_mask (%llu launches): %llu global requests, %.3g MB from "
               "DRAM, the mask_mod on %.0f entries\n",
               made.launches, made.global_requests, made.dram_bytes * 1e-6,
               (double)p->B * p->Lq * p->Lk);
    /* flex_no_block_mask's: every tile of every row PARTIAL */
    for (size_t r = 0; r < rows; ++r) {
        s->partial.kv_num_blocks[r] = s->partial.num_k_blocks;
        for (int kb = 0; kb < s->partial.num_k_blocks; ++kb)
            s->partial.kv_indices[r * s->partial.num_k_blocks + kb] = kb;
    }
    if (attn_block_mask_to_device(&s->partial, &s->partial_dev) != 0)
        return 1;
    s->d_counters = (unsigned long long *)attn_device_alloc(FLEX_KERNELS * 4 * 8);
    if (s->d_counters == NULL)
        return 1;
    s->args.dev = dev;
    s->args.blocks = s->blocks_dev;
    s->args.partial = s->partial_dev;
    s->args.counters = s->d_counters;
    if (!quiet)
        printf("block mask (%d x %d tiles, FlexAttention's layout, all heads alike): %d x %d "
               "tiles per sequence; FULL %lld, PARTIAL %lld, EMPTY %lld over the %d sequences; "
               "made on the device by the mask_mod, %s\n",
               FLEX_TILE, FLEX_TILE, s->blocks.num_q_blocks, s->blocks.num_k_blocks,
               (long long)s->n_full, (long long)s->n_part, (long long)s->n_empty, p->B,
               s->compared);
    return 0;
}
