/* flex_attention.h (example 08) — what the kernels (flex_attention.cu) and the module that runs
 * them (flex_module.c, flex_spec.c, flex_reference.c: the flags, the inputs, the block mask,
 * the report) share. C11 and C++.
 *
 * The compiled modifications (--mod SPEC). Each is one kernel per dtype and head dimension,
 * specialised at compile time on its functors (flex_mods.cuh):
 *
 *   SPEC                 mask_mod                        score_mod
 *   causal               causal                          -
 *   sliding_window:w=W   causal and window(W)            -
 *   prefix_lm:p=P        causal or prefix(P)             -
 *   document             causal and same document        -
 *   alibi                causal                          ALiBi's head slopes (paper, authors' code)
 *   softcap:cap=C        causal                          C tanh(s / C)
 *   rel_bias:r=R         -                               bias[h][clamp(a - kv, -R, R) + R]
 */
#ifndef FLEX_ATTENTION_H
#define FLEX_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/sparse/block_mask.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The --mod kinds, numbered from 0 in this order (the index of their tables). */
typedef enum flex_kind {
    FLEX_CAUSAL,
    FLEX_SLIDING_WINDOW,
    FLEX_PREFIX_LM,
    FLEX_DOCUMENT,
    FLEX_ALIBI,
    FLEX_SOFTCAP,
    FLEX_REL_BIAS,
    FLEX_KINDS /* how many there are */
} flex_kind;

/* A parsed --mod SPEC: the kind and the parameters it takes. */
typedef struct flex_spec {
    flex_kind kind;
    int w;     /* sliding_window: keys per window, >= 1 */
    int p;     /* prefix_lm: prefix length, >= 0 */
    int r;     /* rel_bias: largest distance with a bias of its own, >= 0 */
    float cap; /* softcap: > 0 */
} flex_spec;

/* Parses SPEC ("document", "softcap:cap=30", ...). 0, or ATTN_EXIT_USAGE with a one-line reason
 * (naming the accepted specs) in why. */
int flex_parse_spec(const char *text, flex_spec *out, char *why, size_t len);
/* The spec as given back ("softcap:cap=30"). */
void flex_format_spec(const flex_spec *s, char *out, size_t len);
/* One line per compiled modification, for --help. */
void flex_spec_usage(FILE *f);

/* Everything the functors of one problem are made of; pointers in host memory for the reference,
 * in device memory for the kernels. */
typedef struct flex_setting {
    flex_spec spec;
    int H, Lq, Lk;
    const int *doc;      /* [Lk] document of each position (document), else NULL */
    const float *table;  /* [H][2r + 1] relative-position bias (rel_bias), else NULL */
    const float *slopes; /* [H] ALiBi's head slopes (alibi: flex_alibi_slopes), else NULL */
} flex_setting;

/* Storage for the reference's functor (the mask's ctx): a copy of the compiled modification. */
typedef struct flex_host_mod {
    double words[8]; /* 64 bytes, aligned for the pointers and ints of any modification */
} flex_host_mod;

/* The CPU reference's mask under setting s (host pointers): the same functors as the kernels,
 * called in double precision through attn_mask's keep and score callbacks (NULL where the
 * modification has no mask_mod or no score_mod). store must outlive the mask. */
attn_mask flex_reference_mask(const flex_setting *s, flex_host_mod *store);

/* ALiBi's slope of each of H heads (flex_alibi_slope, flex_mods.cuh, rounded to fp32): the table
 * that the reference and the kernels read. */
void flex_alibi_slopes(int H, float *slopes);

/* FlexAttention's create_block_mask on the device: every entry of every 64 x 64 tile evaluated by
 * the mask_mod once (setting s, device pointers; B sequences, all heads alike), the visible
 * entries of each tile counted into counts [B][nq][nk] (device), and the tiles sorted into the
 * lists of m (device arrays of m's shape, attn_block_mask_to_device): FULL (every in-range entry
 * visible), PARTIAL (some), EMPTY (none: in neither list). Synchronises. 0, or 1 after a message.
 */
int flex_create_block_mask(const flex_setting *s, int B, attn_block_mask *m, int32_t *counts);

/* Rotary position embedding, on the load of Q and K by the flex_rope kernel, and on the host by
 * the reference's own rotation (flex_reference.c): rotate-half pairs (c, c + D/2), angle
 * pos * inv_freq[c] (flex_mods.cuh). Positions: key j at offset + j, query i at
 * offset + i + (Lk - Lq). */
typedef struct flex_rope {
    int on;                /* 0: the kernel reads Q and K as they are */
    int offset;            /* position of key 0 */
    const float *inv_freq; /* [D/2] base^(-2c/D) as fp32 (device memory for a kernel) */
} flex_rope;

/* The kernels' arguments beyond attn_buffers (attn_buffers.args, made by flex_module.c). */
typedef struct flex_args {
    flex_setting dev;          /* the modification's setting, device pointers */
    attn_block_mask blocks;    /* the block mask from flex_create_block_mask (device arrays) */
    attn_block_mask partial;   /* every tile PARTIAL (device arrays): flex_no_block_mask's */
    flex_rope rope;            /* --rope: its offset and inv_freq (on is set per kernel) */
    const void *q_raw, *k_raw; /* --rope: Q and K before rotation (device), for flex_rope */
    /* The mask_mod evaluations of a launch: when count_kernel is a kernel's id, its next launch
     * adds into counters[4 * (id - 1) ..] (device) {FULL tiles, PARTIAL tiles, mask_mod calls in
     * FULL tiles, in PARTIAL tiles} and resets count_kernel to 0. */
    unsigned long long *counters;
    int count_kernel;
} flex_args;

#define FLEX_TILE 64 /* Br = Bc of every kernel here, and the block mask's tile */
#define FLEX_MAX_REL_DISTANCE (1 << 20) /* rel_bias:r at most this (a distance past any L) */
#define FLEX_MAX_REL_TABLE (1 << 26)    /* and its table, H x (2r + 1), at most this many biases */
#define FLEX_KERNELS 4

#ifdef __cplusplus
}
#endif
#endif /* FLEX_ATTENTION_H */
