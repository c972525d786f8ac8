/* decode_fp8.h — what decode_fp8.c (the FP8 cache's program: its flags, data and buffers) and
 * decode_fp8_checks.c (its checks, timing and report) share: the run. Private to those two. */
#ifndef DECODE_FP8_H
#define DECODE_FP8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/device.h"
#include "decode.h"

/* The run: its shape, its data (host; token rows packed by cu_k: [total, H_kv, D]), the device's
 * (a), the results. Every buffer is in mem. */
typedef struct run {
    int *lens, B, H, H_kv, D, P, Lq, splits, latent, reps, warmup, W, num_pages, Dv, L_cap;
    int *cu_k, *cu_q, *table;
    attn_dtype dtype;
    double outliers, corrupt;
    uint64_t seed;
    const char *json;
    float scale;
    int64_t total, rows, checked; /* cache tokens; output rows; the rows checked */
    size_t dz, row8, HkD, slots;  /* bytes of an element; of a token's FP8 row (all its heads) */
    float *q, *k, *v;             /* the unquantised values (in dtype) */
    float *kd, *vd;               /* the dequantised cache, as the kernel holds it on chip */
    uint8_t *pool0, *pool1;       /* K (latent: the rows) before and after a right append */
    uint8_t *vpool0, *vpool1;     /* V codes (K/V only) */
    float *ks0, *ks1, *vs0, *vs1;
    void *staging;
    dec_args a;
    float *out, *lse, *ref, *ref_lse, *lowp, *ref64, *lse64, *lowp64;
    attn_allocs mem;
} run;

/* Token t of sequence b: its slot in the pool. */
static inline int64_t slot_of(const run *r, int b, int t) {
    return (int64_t)r->table[b * r->W + t / r->P] * r->P + t % r->P;
}

/* The checks in order (append, attention, fp64), the timing (--reps) and the report (--json):
 * 0 every check passed, 1 a failure or a runtime error (decode_fp8_checks.c). */
int fp8_run_checks(run *r);

#endif /* DECODE_FP8_H */
