/* attn/half.h — IEEE binary16 and bfloat16 <-> binary32 conversion on the host, bit exact.
 *
 * Header-only (static inline) and valid C11 and C++17, because two places need the same bits:
 * the harness (fills, checks, reference rounding) and the simulator's cuda_fp16.h/cuda_bf16.h.
 * Rounding is round-to-nearest-even, the default of __float2half/__float2bfloat16; NaN stays NaN
 * (quiet), overflow goes to infinity, subnormals are handled.
 */
#ifndef ATTN_HALF_H
#define ATTN_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t attn_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float attn_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary32 -> binary16, round to nearest even. */
static inline uint16_t attn_f32_to_f16(float f);
/* binary16 -> binary32, exact. */
static inline float attn_f16_to_f32(uint16_t h);
/* binary32 -> bfloat16, round to nearest even. */
static inline uint16_t attn_f32_to_bf16(float f);
/* bfloat16 -> binary32, exact (the upper 16 bits). */
static inline float attn_bf16_to_f32(uint16_t b);

/* Round-trips: the value a float takes once stored in 16 bits. */
static inline float attn_round_f16(float f) { return attn_f16_to_f32(attn_f32_to_f16(f)); }
static inline float attn_round_bf16(float f) { return attn_bf16_to_f32(attn_f32_to_bf16(f)); }

/* ---- implementations ---- */

static inline uint16_t attn_f32_to_f16(float f) {
    uint32_t x = attn_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u |
                          (absx > 0x7f800000u ? 0x0200u | ((absx >> 13) & 0x3ffu) : 0u));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absx < 0x38800000u) {   /* below 2^-14: subnormal half or zero */
        if (absx < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself ties to even 0) */
            return (uint16_t)sign;
        uint32_t e = absx >> 23; /* 102 .. 112 */
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 .. 24: bits dropped to land on 2^-24 units */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent 127 -> 15, keep 10 mantissa bits, round to nearest even */
    uint32_t h = ((absx - 0x38000000u) >> 13);
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static inline float attn_f16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu) /* inf / NaN */
        return attn_bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) {
        if (m == 0)
            return attn_bits_f32(sign);
        /* subnormal: value m * 2^-24, normalise */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        m &= 0x3ffu;
        return attn_bits_f32(sign | (e << 23) | (m << 13));
    }
    return attn_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t attn_f32_to_bf16(float f) {
    uint32_t x = attn_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, force quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

static inline float attn_bf16_to_f32(uint16_t b) { return attn_bits_f32((uint32_t)b << 16); }

#ifdef __cplusplus
}
#endif
#endif /* ATTN_HALF_H */
