/* decode_stages.h — what example 09's stage files (decode_prepare.c: the flags and the problem;
 * decode_stages.c: the inputs and each stage's check; decode_report.c: FLOPs, bytes, records and
 * the dump) share about its state (decode.h, dec_state). Private to those three files. */
#ifndef DECODE_STAGES_H
#define DECODE_STAGES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "decode.h"

static inline dec_state *of(void *state) { return (dec_state *)state; }

/* malloc that never returns NULL for a zero size (an empty batch allocates nothing real). */
static inline void *xmalloc(size_t n) { return malloc(n ? n : 1); }

static inline int64_t rows_of(const dec_state *s) { return (int64_t)s->B * s->Lq * s->H; }

/* Is output row n = (b * Lq + i) * H + h among the checked ones? */
static inline bool row_checked(const dec_state *s, int64_t n) { return n % s->stride == 0; }

/* Is new token (b, i) checked: one of its H rows is. */
static inline bool token_checked(const dec_state *s, int64_t token) {
    const int64_t first = token * s->H, next = (first + s->stride - 1) / s->stride * s->stride;
    return next < first + s->H;
}

/* Keys new token i of sequence b sees: the harness's bottom-right causal rule over the problem
 * dec_prepare made (its cu_seqlens_k are the cache lengths). */
static inline int visible(const dec_state *s, int b, int i) {
    return attn_causal_keys(&s->p, b, i);
}

#endif /* DECODE_STAGES_H */
