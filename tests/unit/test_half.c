/* test_half.c — attn/half.h: exact fp16/bf16 <-> fp32 conversions, checked exhaustively over all
 * 65536 bit patterns of each format and against independently computed values. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "attn/half.h"
#include "unit_test.h"

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
static bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

/* The value of an fp16 pattern from its definition, with ldexp (independent of half.h). */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double mag = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -mag : mag;
}

static void test_f16_exhaustive(void) {
    int bad_value = 0, bad_roundtrip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        float f = attn_f16_to_f32((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            uint16_t back = attn_f32_to_f16(f);
            bad_nan += !isnan(f) || !f16_is_nan(back) || (back & 0x8000) != (h & 0x8000);
            continue;
        }
        bool inf = ((h >> 10) & 0x1f) == 0x1f;
        bad_value += inf ? !(isinf(f) && (f < 0) == ((h & 0x8000) != 0)) : f != f16_value(h);
        bad_roundtrip += attn_f32_to_f16(f) != h;
    }
    CHECK_EQ(bad_value, 0);
    CHECK_EQ(bad_roundtrip, 0);
    CHECK_EQ(bad_nan, 0);
}

/* Between every two adjacent finite fp16 values: the midpoint goes to the even one (round to
 * nearest even), anything strictly inside goes to the nearer one. */
static void test_f16_rounding_exhaustive(void) {
    int bad = 0;
    for (uint16_t h = 0; h < 0x7bff; ++h) {
        float lo = attn_f16_to_f32(h), hi = attn_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 12 significant bits */
        uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : h;
        bad += attn_f32_to_f16(mid) != even;
        bad += attn_f32_to_f16(nextafterf(mid, 0.0f)) != h;
        bad += attn_f32_to_f16(nextafterf(mid, INFINITY)) != h + 1;
        bad += attn_f32_to_f16(-mid) != (even | 0x8000u);
    }
    CHECK_EQ(bad, 0);
}

static void test_f16_cases(void) {
    /* ties to even between 1 and 1 + 2^-10 (0x3c00, 0x3c01), 1 + 2^-10 and 1 + 2^-9 */
    CHECK_EQ(attn_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    CHECK_EQ(attn_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    CHECK_EQ(attn_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    /* subnormals: 2^-24 is the smallest; 2^-25 ties to even (0); 3 * 2^-25 ties to 2 * 2^-24 */
    CHECK_EQ(attn_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ(attn_f32_to_f16(0x1p-25f), 0x0000);
    CHECK_EQ(attn_f32_to_f16(0x1p-25f * 1.0001f), 0x0001);
    CHECK_EQ(attn_f32_to_f16(3 * 0x1p-25f), 0x0002);
    CHECK_EQ(attn_f32_to_f16(-0x1p-24f), 0x8001);
    CHECK_EQ(attn_f32_to_f16(0x1p-14f), 0x0400);            /* smallest normal */
    CHECK_EQ(attn_f32_to_f16(0x1p-14f - 0x1p-24f), 0x03ff); /* largest subnormal */
    CHECK(attn_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK_EQ(attn_f32_to_f16(1e-10f), 0x0000);
    CHECK_EQ(attn_f32_to_f16(-0.0f), 0x8000);
    /* overflow: 65504 is the largest; 65520 (the midpoint to 2^16) and above go to infinity */
    CHECK_EQ(attn_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ(attn_f32_to_f16(65519.99f), 0x7bff);
    CHECK_EQ(attn_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ(attn_f32_to_f16(1e6f), 0x7c00);
    CHECK_EQ(attn_f32_to_f16(-1e6f), 0xfc00);
    CHECK_EQ(attn_f32_to_f16(INFINITY), 0x7c00);
    CHECK_EQ(attn_f32_to_f16(-INFINITY), 0xfc00);
    CHECK(f16_is_nan(attn_f32_to_f16(NAN)));
    CHECK(f16_is_nan(attn_f32_to_f16(attn_bits_f32(0x7f800001u)))); /* payload in low bits only */
    CHECK(isnan(attn_round_f16(NAN)));
    CHECK(attn_round_f16(0.1f) == (float)f16_value(0x2e66));
}

static void test_bf16_exhaustive(void) {
    int bad_value = 0, bad_roundtrip = 0, bad_nan = 0, bad_rounding = 0;
    for (uint32_t b = 0; b < 65536; ++b) {
        float f = attn_bf16_to_f32((uint16_t)b);
        bad_value += attn_f32_bits(f) != b << 16;
        if (bf16_is_nan((uint16_t)b)) {
            bad_nan += !bf16_is_nan(attn_f32_to_bf16(f));
            continue;
        }
        bad_roundtrip += attn_f32_to_bf16(f) != b;
        /* midpoint to the next pattern (same sign, finite, not the last before infinity) */
        if ((b & 0x7fffu) < 0x7f7fu) {
            uint32_t mid = (b << 16) | 0x8000u;
            uint16_t even = (b & 1u) ? (uint16_t)(b + 1) : (uint16_t)b;
            bad_rounding += attn_f32_to_bf16(attn_bits_f32(mid)) != even;
            bad_rounding += attn_f32_to_bf16(attn_bits_f32(mid - 1)) != b;
            bad_rounding += attn_f32_to_bf16(attn_bits_f32(mid + 1)) != b + 1;
        }
    }
    CHECK_EQ(bad_value, 0);
    CHECK_EQ(bad_roundtrip, 0);
    CHECK_EQ(bad_nan, 0);
    CHECK_EQ(bad_rounding, 0);
}

static void test_bf16_cases(void) {
    CHECK_EQ(attn_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(attn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie to even */
    CHECK_EQ(attn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie to even, upwards */
    CHECK_EQ(attn_f32_to_bf16(FLT_MAX), 0x7f80);            /* rounds past the largest: inf */
    CHECK_EQ(attn_f32_to_bf16(-INFINITY), 0xff80);
    CHECK_EQ(attn_f32_to_bf16(0x1p-133f), 0x0001); /* fp32 subnormals keep their top bits */
    CHECK(bf16_is_nan(attn_f32_to_bf16(NAN)));
    CHECK(bf16_is_nan(attn_f32_to_bf16(attn_bits_f32(0x7f800001u)))); /* would truncate to inf */
    CHECK(attn_round_bf16(3.14159265f) == 3.140625f);
}

int main(void) {
    test_f16_exhaustive();
    test_f16_rounding_exhaustive();
    test_f16_cases();
    test_bf16_exhaustive();
    test_bf16_cases();
    return unit_finish();
}
