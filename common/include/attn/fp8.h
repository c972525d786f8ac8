/* attn/fp8.h — the two 8-bit floating-point formats of sm_89 and later (FP8, "OCP 8-bit
 * floating point"), to and from binary32/binary64 on the host, bit exact with CUDA's cuda_fp8.h.
 *
 *   e4m3  s eeee mmm   bias 7,  no infinities, NaN = s.1111.111 only, largest 448 (0x7e),
 *                      smallest normal 2^-6, smallest subnormal 2^-9
 *   e5m2  s eeeee mm   bias 15, IEEE-like: inf = s.11111.00, NaN = s.11111.{01,10,11},
 *                      largest 57344 (0x7b), smallest normal 2^-14, smallest subnormal 2^-16
 *
 * Encoding rounds to nearest even. A value past the largest finite one (after rounding; at the
 * tie e4m3 448 + 16 = 464 rounds down to 448, e5m2 61440 rounds up out of range) is the largest
 * finite value with the sign in SATFINITE mode (infinities too), and otherwise NaN (e4m3, which has
 * no infinity) or inf (e5m2). A NaN input gives NaN (0x7f with the sign for e4m3; e5m2 0x7e, its
 * last bit the second mantissa bit of the binary64 input); a binary32 NaN is first made the
 * positive NaN 0x7fffffff, as CUDA does, so it always gives 0x7f. These are the rules of
 * __nv_cvt_double_to_fp8 and __nv_cvt_float_to_fp8 (cuda_fp8.hpp of the CUDA toolkit); the
 * constructors of __nv_fp8_e4m3/__nv_fp8_e5m2 use SATFINITE.
 *
 * Decoding is exact (every fp8 value is a binary16 and a binary32 value); a NaN code decodes to
 * the binary16 NaN 0x7fff and the binary32 NaN 0x7fffffff, whatever its sign.
 *
 * Header-only (static inline), valid C11 and C++17: the simulator's cuda_fp8.h is built on it.
 * tests/cudasim/test_fp8.cu checks it against a table of all 256 codes of each format and of
 * rounding cases, which the gpu build checks against the CUDA toolkit's own cuda_fp8.h and
 * tests/python/test_fp8_table.py against PyTorch's float8 types.
 */
#ifndef ATTN_FP8_H
#define ATTN_FP8_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_FP8_E4M3 = 0, ATTN_FP8_E5M2 = 1 } attn_fp8_format;

/* The format's constants: mantissa bits, exponent bias, largest finite value. */
static inline int attn_fp8_mantissa_bits(attn_fp8_format f) { return f == ATTN_FP8_E5M2 ? 2 : 3; }
static inline int attn_fp8_bias(attn_fp8_format f) { return f == ATTN_FP8_E5M2 ? 15 : 7; }
static inline double attn_fp8_max(attn_fp8_format f) {
    return f == ATTN_FP8_E5M2 ? 57344.0 : 448.0;
}

static inline bool attn_fp8_is_nan(uint8_t code, attn_fp8_format f) {
    return f == ATTN_FP8_E5M2 ? (code & 0x7fu) > 0x7cu : (code & 0x7fu) == 0x7fu;
}

/* The exact value of a code (NaN codes: NAN). */
static inline double attn_fp8_value(uint8_t code, attn_fp8_format f) {
    int mbits = attn_fp8_mantissa_bits(f), ebits = 7 - mbits;
    int e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
    double sign = code & 0x80u ? -1.0 : 1.0;
    if (attn_fp8_is_nan(code, f))
        return NAN;
    if (f == ATTN_FP8_E5M2 && e == 31)
        return sign * INFINITY;
    if (e == 0) /* subnormal: m units of 2^(1 - bias - mbits) */
        return sign * ldexp((double)m, 1 - attn_fp8_bias(f) - mbits);
    return sign * ldexp((double)((1 << mbits) + m), e - attn_fp8_bias(f) - mbits);
}

/* Code -> binary32: exact; NaN codes give 0x7fffffff. Built from the bits (the simulator's mma
 * decodes every operand: no library call here). */
static inline float attn_fp8_to_f32(uint8_t code, attn_fp8_format f) {
    int mbits = attn_fp8_mantissa_bits(f), bias = attn_fp8_bias(f);
    uint32_t e = (uint32_t)(code & 0x7fu) >> mbits, m = code & ((1u << mbits) - 1u);
    uint32_t sign = (uint32_t)(code & 0x80u) << 24, bits;
    if (attn_fp8_is_nan(code, f))
        bits = 0x7fffffffu;
    else if (f == ATTN_FP8_E5M2 && e == 31)
        bits = sign | 0x7f800000u;
    else if (e == 0) { /* subnormal: m units of 2^(1 - bias - mbits), exact in float */
        float v = (float)m * (f == ATTN_FP8_E5M2 ? 0x1p-16f : 0x1p-9f);
        memcpy(&bits, &v, sizeof bits);
        bits |= sign;
    } else
        bits = sign | (e - (uint32_t)bias + 127u) << 23 | m << (23 - mbits);
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

/* Code -> binary16 bits: exact; NaN codes give 0x7fff. */
static inline uint16_t attn_fp8_to_f16_bits(uint8_t code, attn_fp8_format f) {
    if (attn_fp8_is_nan(code, f))
        return 0x7fffu;
    if (f == ATTN_FP8_E5M2) /* e5m2 is the upper byte of a binary16 */
        return (uint16_t)(code << 8);
    double v = fabs(attn_fp8_value(code, f));
    uint16_t sign = code & 0x80u ? 0x8000u : 0u;
    if (v == 0.0)
        return sign;
    int e;
    double frac = frexp(v, &e); /* v = frac 2^e, frac in [0.5, 1): every e4m3 value is normal */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                      (uint16_t)((frac * 2.0 - 1.0) * 1024.0));
}

/* binary64 -> code, round to nearest even; satfinite: out of range gives the largest finite. */
static inline uint8_t attn_fp8_from_f64(double x, attn_fp8_format f, bool satfinite) {
    int mbits = attn_fp8_mantissa_bits(f), bias = attn_fp8_bias(f);
    uint8_t sign = signbit(x) ? 0x80u : 0u;
    uint8_t max_code = f == ATTN_FP8_E5M2 ? 0x7bu : 0x7eu;
    uint8_t overflow_code = f == ATTN_FP8_E5M2 ? 0x7cu : 0x7fu; /* inf, or e4m3's NaN */
    if (isnan(x)) {
        if (f == ATTN_FP8_E4M3)
            return sign | 0x7fu;
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        return (uint8_t)(sign | 0x7eu | ((bits >> 50) & 1u));
    }
    double a = fabs(x);
    if (isinf(a))
        return sign | (satfinite ? max_code : overflow_code);
    if (a == 0.0)
        return sign;
    /* The grid spacing where a lies: 2^(e - mbits) for a in [2^e, 2^(e+1)), never finer than
     * the subnormals' 2^(1 - bias - mbits). a / q is exact (a power-of-two scaling), and rint
     * rounds to nearest even in the default rounding mode. */
    int e;
    frexp(a, &e);
    int ex = e - 1 < 1 - bias ? 1 - bias : e - 1;
    double q = ldexp(1.0, ex - mbits);
    double n = rint(a / q);
    double r = n * q;
    if (r > attn_fp8_max(f))
        return sign | (satfinite ? max_code : overflow_code);
    if (r == 0.0)
        return sign;
    if (r < ldexp(1.0, 1 - bias)) /* subnormal: n units of the smallest subnormal */
        return (uint8_t)(sign | (uint8_t)n);
    frexp(r, &e); /* rounding may have carried into the next binade */
    int mant = (int)ldexp(r, mbits - (e - 1)) - (1 << mbits);
    return (uint8_t)(sign | (uint8_t)((e - 1 + bias) << mbits) | (uint8_t)mant);
}

/* binary32 -> code: a NaN is made 0x7fffffff first (so it gives 0x7f), then as binary64. */
static inline uint8_t attn_fp8_from_f32(float x, attn_fp8_format f, bool satfinite) {
    if (isnan(x))
        return 0x7fu;
    return attn_fp8_from_f64((double)x, f, satfinite);
}

#ifdef __cplusplus
}
#endif

#endif /* ATTN_FP8_H */
