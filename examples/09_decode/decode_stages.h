/* decode_stages.h — what example 09's stage files (decode_prepare.c: the flags and the problem;
 * decode_stages.c: the inputs and each stage's check; decode_fp8.c: the FP8 cache's;
 * decode_report.c: FLOPs, bytes, records and the dump) share about its state (decode.h,
 * dec_state). Private to those four files. */
#ifndef DECODE_STAGES_H
#define DECODE_STAGES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static inline dec_state *of(void *state) { return (dec_state *)state; }

/* n zeroed host bytes, released with s->mem (dec_release); NULL after reporting it, with
 * s->mem.failed set (a zero size allocates one byte: an empty batch allocates nothing real). */
static inline void *alloc_host(dec_state *s, size_t n) { return attn_allocs_host(&s->mem, n, 1); }

/* alloc_host's n bytes of 0xFF instead (NaN in every float dtype; an unused slot's in a pool). */
static inline void *alloc_nan(dec_state *s, size_t n) {
    void *p = alloc_host(s, n);
    return p != NULL ? memset(p, 0xFF, n) : NULL;
}

static inline int64_t rows_of(const dec_state *s) { return (int64_t)s->B * s->Lq * s->H; }

/* --fp8: the FP8 cache's bytes per token (all its heads: codes and scales). */
static inline int fp8_bytes_per_token(const dec_state *s) {
    return s->latent ? DEC_FP8_LATENT_BYTES : 2 * s->H_kv * (s->D + 4);
}

/* Is k the version of that name? */
static inline bool named(const attn_kernel *k, const char *name) {
    return strcmp(k->name, name) == 0;
}

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

/* Token t of sequence b: its slot in the pool. */
static inline int64_t slot_of(const dec_state *s, int b, int t) {
    return (int64_t)s->table[(size_t)b * s->W + t / s->P] * s->P + t % s->P;
}

/* decode_stages.c, for decode_fp8.c: a new pool of ps (its host buffers 0xFF; NULL after a
 * message), after the last (the list ends at a NULL name); the reference of the checked rows over
 * keys k and values v (NULL: latent) into r; the kernel's O and LSE read back against a reference.
 * 0, or 1 after a message (a runtime error). */
dec_pool *dec_add_pool(dec_state *s, dec_pool *ps, const char *name, size_t row);
int dec_reference(dec_state *s, const int32_t *sel, const float *k, const float *v,
                  attn_stage_reference *r);
int dec_compare(dec_state *s, const attn_stage_reference *r, double amplitude,
                attn_stage_check *out);
/* decode_fp8.c, for --fp8: the FP8 pools by the CPU quantiser (after K's outlier channels are
 * scaled), with K and V as the kernels dequantise them. 0, or 1 after a message. */
int dec_fp8_inputs(dec_state *s);

#endif /* DECODE_STAGES_H */
