/* ladder.h — Example 06's pattern, the ladder, defined once for the host (C: the pattern's
 * registration, the CPU reference's mask, the block mask builder) and the device (C++: the
 * kernel specialised on it). README.md, "The pattern", states the rule:
 *
 *   blocks of b tokens; query block I = floor(a/b) (a = i + Lk - Lq), key block J = floor(j/b),
 *   D = |I - J|: keep iff J < s (sink blocks), or D < w (local blocks), or D a power of two
 *   (the rungs: 1, 2, 4, 8, ... blocks back; D = 0 counts, a block always sees itself)
 *
 * Spec: ladder:b=B,s=S,w=W (s may be left out: 1 sink block), parameters stored in
 * attn_pattern_part.x in the order b, s, w.
 */
#ifndef LADDER_H
#define LADDER_H

#include "attn/sparse/patterns.h"

#define LADDER_B 0 /* attn_pattern_part.x[LADDER_B]: block size b */
#define LADDER_S 1 /* sink blocks s */
#define LADDER_W 2 /* local blocks w */

/* Query block I keeps key block J (J >= 0; I < 0 when Lq > Lk). */
ATTN_HD int ladder_block_keep(const attn_pattern_part *pt, int I, int J, int NB) {
    (void)NB;
    int D = I > J ? I - J : J - I;
    return J < pt->x[LADDER_S] || D < pt->x[LADDER_W] || (D & (D - 1)) == 0;
}

/* The query at aligned position a keeps key j. */
ATTN_HD int ladder_keep(const attn_pattern_part *pt, int a, int j, int Lk) {
    int b = pt->x[LADDER_B];
    return ladder_block_keep(pt, attn_floor_div(a, b), j / b, (Lk + b - 1) / b);
}

#ifdef __cplusplus
/* The ladder as the Own kinds of a kernel (attn_pattern_keep_with, device/patterns.cuh): this
 * example's only kind. */
struct ladder_kind {
    ATTN_HD static int keep(const attn_pattern_part *pt, int a, int j, int Lk) {
        return ladder_keep(pt, a, j, Lk);
    }
};
extern "C" {
#endif

/* The kind's definition (custom_pattern.cu), registered by the sparse module for this example. */
extern const attn_pattern_kind_def ladder_kind_def;

#ifdef __cplusplus
}
#endif
#endif /* LADDER_H */
