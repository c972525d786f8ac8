/* flex_module.h — what example 08's module files share (flex_module.c, the module; flex_spec.c,
 * --mod and the setting's flags; flex_reference.c, the reference's own RoPE and ALiBi;
 * flex_block_mask.c, the block mask): the options, the run's state, and the functions one file
 * gives another. Not the kernels' interface (flex_attention.h).
 */
#ifndef FLEX_MODULE_H
#define FLEX_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/example.h"
#include "attn/sparse/block_mask.h"
#include "flex_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flex_options {
    const char *mod;        /* --mod */
    const char *doc_lens;   /* --doc-lens */
    const char *doc_ids;    /* --doc-ids */
    const char *bias_table; /* --bias-table */
    int rope;               /* --rope */
    const char *rope_base;  /* --rope-base */
    int rope_offset;        /* --rope-offset */
} flex_options;

typedef struct flex_state {
    flex_options opt;
    flex_spec spec;
    attn_problem p;
    uint64_t seed;
    /* the setting on the host (the reference) and its arrays */
    flex_setting host;
    int *doc;           /* [Lk] */
    float *table;       /* [H][2r + 1] */
    float *slopes;      /* [H] ALiBi's, the kernels' table (flex_alibi_slopes) */
    double *ref_slopes; /* [H] ALiBi's, the reference's own (ref_alibi_slope) */
    int n_docs;         /* documents (empty ones included) */
    flex_host_mod store;
    attn_mask mask;
    /* RoPE */
    double rope_base;
    float inv_freq[64];
    float *q_raw, *k_raw; /* host copies of the inputs before rotation */
    /* the device */
    int *d_doc;
    float *d_table, *d_slopes, *d_inv_freq;
    void *d_q_raw, *d_k_raw;
    int32_t *d_counts;
    unsigned long long *d_counters;
    attn_block_mask blocks, blocks_dev, partial, partial_dev;
    int32_t *counts;                 /* [B][nq][nk] visible entries per tile, from the device */
    double entries;                  /* visible entries over all sequences and heads */
    int64_t n_full, n_part, n_empty; /* tiles of each class over the sequences */
    const char *compared;            /* how the block mask was checked, for the banner line */
    flex_args args;
    bool counted[FLEX_KERNELS];
    unsigned long long calls[FLEX_KERNELS][4];
} flex_state;

/* flex_spec.c: what --mod's kind is, in words (--help and the banner); the document of every
 * key (--doc-ids, --doc-lens or 8 documents) into s->doc; the bias table (--bias-table or seeded)
 * into s->table. 0, or ATTN_EXIT_USAGE with why. */
const char *flex_spec_what(flex_kind k);
int flex_make_documents(flex_state *s, char *why, size_t len);
int flex_make_table(flex_state *s, char *why, size_t len);

/* flex_reference.c: ALiBi's slope of head h of H and its score_mod (ctx: the flex_state), both
 * the reference's own; the module's inputs hook (--rope: the seeded Q and K kept for flex_rope,
 * rotated in place for the reference and the other kernels). */
double flex_ref_alibi_slope(int h, int H);
double flex_ref_alibi_score(const void *ctx, int b, int h, int i, int j, double s);
int flex_rope_inputs(void *state, const attn_problem *p, attn_host_inputs *in);

/* flex_block_mask.c: the module's build hook (attn/example.h), and a new device copy of bytes
 * host bytes (NULL after a reported error). */
int flex_build(void *state, const attn_example *ex, const bool *selected, const attn_problem *p,
               bool quiet, const attn_mask **mask, bool *dense_too);
void *flex_copy_to_device(const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* FLEX_MODULE_H */
