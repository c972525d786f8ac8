/* test_fp8_cache_ref.c — the FP8 cache's CPU oracle (decode_fp8_reference.c) on hand-made inputs:
 *   dec_fp8_code_ref     equals the harness's converter (attn/fp8.h, itself checked bit for bit
 *                        against all 256 codes and CUDA's rules) on every code's value, every
 *                        midpoint between neighbours (the ties), just off them, and past 448;
 *                        a planted converter that truncates instead of rounding is caught
 *   dec_fp8_scale_ref    powers of two at and around the edges (amax 448, 449, 0, tiny)
 *   the 656-byte row     FlashMLA's offsets: 512 codes, the 4 fp32 scales at byte 512, the 64
 *                        RoPE values' bf16 bits at byte 528; unpack gives code * scale back
 * ./build/sim/tests/examples/09_decode/test_fp8_cache_ref_sim */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../05_deepseek_sparse/deepseek_sparse.h"
#include "../decode.h"
#include "attn/fp8.h"
#include "attn/half.h"

static int failures = 0;
static void expect(int ok, int line, const char *what) {
    if (!ok) {
        fprintf(stderr, "%s:%d: expected %s\n", __FILE__, line, what);
        ++failures;
    }
}
#define EXPECT(cond) expect((cond) != 0, __LINE__, #cond)

/* A wrong converter for the planted case: toward zero instead of to nearest. */
static uint8_t truncating_code(double x) {
    uint8_t best = 0;
    for (int c = 1; c <= 0x7e; ++c)
        if (ds_fp8_value((uint8_t)c) <= fabs(x))
            best = (uint8_t)c;
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

/* How many probe values code() converts differently from attn/fp8.h. */
static int mismatches(uint8_t (*code)(double)) {
    int bad = 0;
    for (int c = 0; c < 0x7e; ++c) {
        const double lo = ds_fp8_value((uint8_t)c), hi = ds_fp8_value((uint8_t)(c + 1));
        const double mid = 0.5 * (lo + hi),
                     probes[] = {lo, mid, nextafter(mid, 0.0), nextafter(mid, 1e9), hi};
        for (int x = 0; x < 5; ++x)
            for (int sign = -1; sign <= 1; sign += 2) {
                const double y = sign * probes[x];
                bad += code(y) != attn_fp8_from_f64(y, ATTN_FP8_E4M3, true);
            }
    }
    const double past[] = {448.0, 464.0, 480.0, 1e6};
    for (int x = 0; x < 4; ++x)
        bad += code(past[x]) != attn_fp8_from_f64(past[x], ATTN_FP8_E4M3, true);
    return bad;
}

int main(void) {
    EXPECT(mismatches(dec_fp8_code_ref) == 0);
    EXPECT(mismatches(truncating_code) > 0); /* the planted converter fails */

    EXPECT(dec_fp8_scale_ref(448.0f) == 1.0f);
    EXPECT(dec_fp8_scale_ref(449.0f) == 2.0f);
    EXPECT(dec_fp8_scale_ref(224.0f) == 0.5f);
    EXPECT(dec_fp8_scale_ref(1.0f) == ldexpf(1.0f, -8));  /* 1/448 in (2^-9, 2^-8] */
    EXPECT(dec_fp8_scale_ref(0.0f) == ldexpf(1.0f, -13)); /* 1e-4 in (2^-14, 2^-13] */

    /* a latent row: group g's values up to g + 1 (scale 2^ceil(log2((g + 1) / 448))) */
    float row[DEC_LATENT_DK], back[DEC_LATENT_DK];
    for (int c = 0; c < DEC_LATENT_DK; ++c)
        row[c] = attn_round_bf16((float)(c % 128 - 64) / 64.0f * (float)(c / 128 + 1));
    uint8_t packed[DEC_FP8_LATENT_BYTES];
    memset(packed, 0xAB, sizeof packed);
    dec_fp8_pack_latent_ref(row, ATTN_BF16, packed);
    for (int g = 0; g < 4; ++g) {
        float s;
        memcpy(&s, packed + 512 + 4 * g, 4);
        EXPECT(s == dec_fp8_scale_ref((float)(g + 1)));
        EXPECT(packed[128 * g] == dec_fp8_code_ref(-(double)(g + 1) / s)); /* column 0: -(g+1) */
    }
    for (int c = 0; c < 64; ++c) {
        uint16_t bits;
        memcpy(&bits, packed + 528 + 2 * c, 2);
        EXPECT(bits == attn_f32_to_bf16(row[512 + c]));
    }
    dec_fp8_unpack_latent_ref(packed, ATTN_BF16, back);
    for (int c = 0; c < DEC_LATENT_DK; ++c) {
        float s;
        memcpy(&s, packed + 512 + 4 * (c / 128 % 4), 4);
        const double want = c < 512 ? ds_fp8_value(packed[c]) * s : row[c];
        EXPECT(back[c] == (float)want);
        EXPECT(fabs(back[c] - row[c]) <= fabs(row[c]) / 16 + ldexp(s, -10) || c >= 512);
    }
    if (failures == 0)
        printf("PASS\n");
    return failures ? 1 : 0;
}
