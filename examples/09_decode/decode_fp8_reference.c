/* decode_fp8_reference.c — Example 09's CPU oracle of the FP8 cache (decode.h, "FP8 cache"): the
 * e4m3 format and the quantisation written from their definitions, sharing nothing with the
 * kernels (which use cuda_fp8.h's conversions) nor with the harness's attn/fp8.h.
 *
 *   value  example 05's oracle (ds_fp8_value: s eeee mmm, bias 7, e = 0 subnormal m 2^-9)
 *   code   the nearest value, ties to the even code (the one whose last mantissa bit is 0), and
 *          anything at or past 448 the largest (satfinite): a bisection over the 127 codes
 *   scale  FlashMLA's rule (tests/quant.py): the smallest power of two s >= max(amax / 448, 1e-4),
 *          found by doubling and halving (example 05's indexer clamps amax at 1e-4 before the
 *          division, DeepSeek's act_quant: ds_fp8_row_scale; the two differ only below 1e-4)
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/tensor.h"
#include "decode.h"

uint8_t dec_fp8_code_ref(double x) {
    if (isnan(x))
        return 0x7f;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const double a = fabs(x);
    if (a >= DEC_FP8_MAX)
        return sign | 0x7e;
    /* the codes 0 .. 0x7e increase with their value: the last one at or below a, by bisection */
    int lo = 0, hi = 0x7e;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (ds_fp8_value((uint8_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    int best = lo; /* then the nearer of it and the next, a tie to the even code */
    if (lo < 0x7e) {
        const double below = a - ds_fp8_value((uint8_t)lo),
                     above = ds_fp8_value((uint8_t)(lo + 1)) - a;
        if (above < below || (above == below && ((lo + 1) & 1) == 0))
            best = lo + 1;
    }
    return sign | (uint8_t)best;
}

float dec_fp8_scale_ref(float amax) {
    float r = amax / (float)DEC_FP8_MAX;
    if (!(r >= 1e-4f))
        r = 1e-4f;
    float s = 1.0f;
    while (s < r)
        s *= 2.0f;
    while (s / 2.0f >= r)
        s /= 2.0f;
    return s;
}

float dec_fp8_quantize_ref(const float *x, int n, uint8_t *codes) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float s = dec_fp8_scale_ref(amax);
    for (int i = 0; i < n; ++i)
        codes[i] = dec_fp8_code_ref((double)x[i] / s);
    return s;
}

void dec_fp8_pack_latent_ref(const float *row, attn_dtype dtype, uint8_t *out) {
    for (int grp = 0; grp < DEC_LATENT_DV / 128; ++grp) {
        const float s = dec_fp8_quantize_ref(row + 128 * grp, 128, out + 128 * grp);
        memcpy(out + DEC_LATENT_DV + 4 * grp, &s, sizeof s);
    }
    attn_pack(out + DEC_LATENT_DV + 16, row + DEC_LATENT_DV, DEC_LATENT_DK - DEC_LATENT_DV, dtype);
}

void dec_fp8_unpack_latent_ref(const uint8_t *in, attn_dtype dtype, float *row) {
    for (int c = 0; c < DEC_LATENT_DV; ++c) {
        float s;
        memcpy(&s, in + DEC_LATENT_DV + 4 * (c / 128), sizeof s);
        row[c] = attn_round_dtype((float)(ds_fp8_value(in[c]) * s), dtype);
    }
    attn_unpack(row + DEC_LATENT_DV, in + DEC_LATENT_DV + 16, DEC_LATENT_DK - DEC_LATENT_DV, dtype);
}
