/* decode_fp8.c — example 09's FP8 cache (versions 11-13, decode.h "FP8 cache") on the one driver
 * (--fp8): a decoding step whose new tokens the append kernel quantises into an e4m3 paged cache,
 * then attention reading it (dequantised on chip, fp32 accumulation).
 *
 *   11 append_fp8   the new tokens' K, V (or latent rows) quantised into their pages
 *   12 paged_fp8    version 5 over the e4m3 K/V cache, one scale per token and K/V head
 *   13 latent_fp8   version 10 over FlashMLA's 656-byte latent rows (--fp8 --latent)
 *
 * Checks:
 *   append     the pools and scales read back equal, byte for byte, what the CPU quantiser
 *              (decode_fp8_reference.c) makes of every token: the prefilled ones it wrote itself,
 *              the new ones the kernel wrote; the unused slots unchanged (0xFF)
 *   attention  the output and LSE against the double-precision reference (decode_reference.c)
 *              over the dequantised cache, by the rule of the 16-bit cache (FlashAttention's: 2x
 *              the error of the same-precision computation; fp32: check.c's bound); then the
 *              output against the double-precision reference over the UNquantised cache, within
 *              the bound the format allows (below), plus the first check's allowance
 * The fp64 bound, per output row and column d, from e4m3's rounding: a value x of a group with
 * scale s is stored with error |dx| <= 2^-4 |x| + 2^-10 s (3 mantissa bits: half a unit is 2^-4
 * of the value at most; below e4m3's smallest normal 2^-6 s the subnormal spacing 2^-9 s gives
 * 2^-10 s; fp16's rounding of code * s adds 2^-11 |x| + 2^-25). A score moves by at most
 * E = scale * max_t sum_d |q_d| |dk_td|, so every softmax weight changes by a factor within
 * e^(+-2E), and
 *     |o_d - o64_d| <= (e^(2E) - 1) max_t |v_td| + max_t |dv_td|
 * (a worst case: the errors measured sit well below it; the --json record has the ratio).
 *
 * --outliers F multiplies channels 7 and 37 of every key head (and of the latent row) by F: the
 * outlier channels of real keys, which set a token's scale and leave its other values fewer
 * bits. --corrupt-scale F multiplies the scale of the first new token's K (latent: of its first
 * group) by F after the append: a planted wrong scale, which both checks must catch.
 *
 *   ./build/sim/examples/09_decode/decode_sim --fp8 --cache-lens 300,17,0,64 --dtype bf16
 *   ./build/sim/examples/09_decode/decode_sim --fp8 --latent --cache-lens 100,1
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/tensor.h"
#include "decode_stages.h"

/* Token tok (slot `slot`) of a K/V cache quantised by the CPU into the pools after the append
 * (K and V codes, their scales) and dequantised into kd, vd. */
static void quantise_token(dec_state *s, int64_t tok, int64_t slot) {
    float *ks = (float *)s->pools8[2].after, *vs = (float *)s->pools8[3].after;
    for (int hk = 0; hk < s->H_kv; ++hk) {
        const int64_t at = (tok * s->H_kv + hk) * s->D, x = slot * s->H_kv + hk;
        unsigned char *kc = s->pools8[0].after + x * s->D, *vc = s->pools8[1].after + x * s->D;
        ks[x] = dec_fp8_quantize_ref(s->k + at, s->D, kc);
        vs[x] = dec_fp8_quantize_ref(s->v + at, s->D, vc);
        for (int d = 0; d < s->D; ++d) {
            s->kd[at + d] = attn_round_dtype((float)(ds_fp8_value(kc[d]) * ks[x]), s->p.dtype);
            s->vd[at + d] = attn_round_dtype((float)(ds_fp8_value(vc[d]) * vs[x]), s->p.dtype);
        }
    }
}

int dec_fp8_inputs(dec_state *s) {
    const size_t kv = (size_t)s->cu_k[s->B] * s->H_kv * s->D, scales = (size_t)s->H_kv * 4;
    const size_t row8 = s->latent ? DEC_FP8_LATENT_BYTES : (size_t)s->H_kv * s->D; /* a token's */
    s->kd = alloc_host(s, kv * 4), s->vd = alloc_host(s, kv * 4);
    dec_add_pool(s, s->pools8, s->latent ? "latent" : "K code", row8);
    if (!s->latent) { /* V's codes, K's and V's scales */
        dec_add_pool(s, s->pools8, "V code", row8);
        dec_add_pool(s, s->pools8, "K scale", scales);
        dec_add_pool(s, s->pools8, "V scale", scales);
    }
    if (s->mem.failed)
        return 1;
    for (size_t x = 0; x < kv; ++x) /* outlier channels 7 and 37 of every row */
        if (x % s->D == 7 || x % s->D == 37)
            s->k[x] = attn_round_dtype((float)(s->k[x] * s->opt.outliers), s->p.dtype);
    for (int b = 0; b < s->B; ++b)
        for (int t = 0; t < s->lens[b]; ++t) {
            const int64_t tok = s->cu_k[b] + t, slot = slot_of(s, b, t);
            unsigned char *row = s->pools8[0].after + slot * row8;
            if (!s->latent) {
                quantise_token(s, tok, slot);
            } else {
                dec_fp8_pack_latent_ref(s->k + tok * s->D, s->p.dtype, row);
                dec_fp8_unpack_latent_ref(row, s->p.dtype, s->kd + tok * s->D);
            }
        }
    return 0;
}

/* ---- version 11: the append (checked as version 1: decode_stages.c) ------------------------- */

/* The planted wrong scale (--corrupt-scale): the first new token's (sequence 0's) K scale, or its
 * latent row's first, times the factor on the device. */
static int plant_scale(const dec_state *s) {
    if (s->opt.corrupt_scale == 1.0 || s->lens[0] == 0)
        return 0;
    const int64_t slot = slot_of(s, 0, s->lens[0] - s->Lq);
    const dec_args *a = &s->run.args;
    float v, *at = s->latent ? (float *)(a->k8_pages + slot * s->pools8[0].row + DEC_LATENT_DV)
                             : a->k8_scales + slot * s->H_kv;
    if (attn_to_host(&v, at, 4))
        return 1;
    v = (float)(v * s->opt.corrupt_scale);
    return attn_to_device(at, &v, 4);
}

/* The planted wrong scale first, then every pool against the CPU quantiser's. */
int dec_check_append_fp8(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    return plant_scale(of(state)) || dec_check_append(state, k, chunk, out);
}

/* ---- versions 12 and 13: attention ----------------------------------------------------------- */

/* The references: over the unquantised cache (the dense one's) and over the dequantised one. */
int dec_prepare_fp8(void *state, char *why, size_t len) {
    (void)why, (void)len;
    dec_state *s = of(state);
    return (s->ref.o == NULL && dec_reference(s, NULL, s->k, s->v, &s->ref)) ||
           dec_reference(s, NULL, s->kd, s->latent ? NULL : s->vd, &s->dref);
}

/* The scale of the group value c of a K or V row x belongs to (K/V: the head's D values; latent:
 * its 128; the latent RoPE part is not rounded: -1). */
static double group_scale(const dec_state *s, const float *x, int c) {
    if (s->latent && c >= DEC_LATENT_DV)
        return -1.0;
    const int g0 = s->latent ? c / 128 * 128 : 0, gn = s->latent ? 128 : s->D;
    float amax = 0.0f;
    for (int y = g0; y < g0 + gn; ++y)
        amax = fabsf(x[y]) > amax ? fabsf(x[y]) : amax;
    return dec_fp8_scale_ref(amax);
}

/* The fp64 bound of the header for row n, every column d < Dv (over the unquantised K, V of its
 * keys), into bound[d]; vmax, dvmax: scratch of Dv doubles. */
static void fp64_bound(const dec_state *s, int64_t n, double *bound, double *vmax, double *dvmax) {
    const int g = s->H / s->H_kv, h = (int)(n % s->H), hk = h / g, Dv = s->Dv;
    const int64_t token = n / s->H;
    const int b = (int)(token / s->Lq), seen = visible(s, b, (int)(token % s->Lq));
    const double rel = 1.0 / 16 + (s->p.dtype == ATTN_F16 ? 1.0 / 2048 : 0.0);
    const double abs16 = s->p.dtype == ATTN_F16 ? ldexp(1.0, -25) : 0.0;
    const float *q = s->q + n * s->D;
    memset(vmax, 0, (size_t)Dv * sizeof(double)), memset(dvmax, 0, (size_t)Dv * sizeof(double));
    double E = 0.0;
    for (int t = 0; t < seen; ++t) {
        const int64_t at = ((s->cu_k[b] + t) * (int64_t)s->H_kv + hk) * s->D;
        const float *kr = s->k + at, *vr = s->latent ? kr : s->v + at;
        double e = 0.0, sc = 0.0;
        for (int c = 0; c < s->D; ++c) {
            if (c % 128 == 0 || c == DEC_LATENT_DV)
                sc = group_scale(s, kr, c);
            e += sc < 0 ? 0.0 : fabs(q[c]) * (rel * fabs(kr[c]) + ldexp(sc, -10) + abs16);
        }
        E = s->p.scale * e > E ? s->p.scale * e : E;
        for (int d = 0; d < Dv; ++d) {
            if (d % 128 == 0)
                sc = group_scale(s, vr, d);
            vmax[d] = fmax(vmax[d], fabs(vr[d]));
            dvmax[d] = fmax(dvmax[d], rel * fabs(vr[d]) + ldexp(sc, -10) + abs16);
        }
    }
    for (int d = 0; d < Dv; ++d)
        bound[d] = expm1(2.0 * E) * vmax[d] + dvmax[d];
}

/* Against fp64 over the unquantised cache (the output read back by the first check): the format's
 * bound plus the first check's allowance (FlashAttention's form), every checked row. */
static int check_fp64(dec_state *s, attn_stage_check *out) {
    const int Dv = s->Dv;
    double *bounds = attn_allocs_host(&s->mem, (size_t)3 * Dv, sizeof(double));
    const double rel = s->p.dtype == ATTN_BF16  ? ldexp(1.0, -7)
                       : s->p.dtype == ATTN_F16 ? ldexp(1.0, -10)
                                                : ldexp(1.0, -20);
    s->err_fp64 = s->err_over_bound = s->err16 = 0.0;
    char first[160] = ""; /* the first element over its bound */
    for (int64_t n = 0; bounds != NULL && n < rows_of(s); n += s->stride) { /* the checked rows */
        if (s->lens[n / s->H / s->Lq] == 0)
            continue;
        const float *ref = s->dref.o + n * Dv, *lowp = s->dref.lowp + n * Dv;
        double arith = 0.0, omax = 0.0;
        for (int d = 0; d < Dv; ++d) {
            arith = fmax(arith, 2.0 * fabs((double)lowp[d] - ref[d]));
            omax = fmax(omax, fabs(ref[d]));
        }
        arith += omax * rel;
        fp64_bound(s, n, bounds, bounds + Dv, bounds + 2 * Dv);
        for (int d = 0; d < Dv; ++d) {
            const double err = fabs((double)s->out[n * Dv + d] - s->ref.o[n * Dv + d]);
            const double bound = bounds[d] + arith;
            if (err > bound && first[0] == '\0')
                snprintf(first, sizeof first,
                         "vs fp64 over the unquantised cache, row %lld column %d: %.3g over its "
                         "bound %.3g",
                         (long long)n, d, err, bound);
            s->err_over_bound = fmax(s->err_over_bound, err / bound);
            s->err_fp64 = fmax(s->err_fp64, err);
            s->err16 = fmax(s->err16, fabs((double)s->ref.lowp[n * Dv + d] - s->ref.o[n * Dv + d]));
        }
    }
    if (first[0] != '\0') { /* after the first check's failure, if any */
        const size_t used = out->pass ? 0 : strlen(out->detail);
        snprintf(out->detail + used, sizeof out->detail - used, "%s%s", used ? "; " : "", first);
        out->pass = false;
    }
    return bounds == NULL;
}

int dec_check_fp8(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)k, (void)chunk;
    dec_state *s = of(state);
    const int64_t kv = (int64_t)s->cu_k[s->B] * s->H_kv * s->D;
    double amp = 0.0;
    s->k_err = s->k_max = 0.0;
    for (int64_t x = 0; x < kv; ++x) {
        amp = fmax(amp, fmax(fabs(s->kd[x]), s->latent ? 0.0 : fabs(s->vd[x])));
        if (!s->latent || x % s->D < DEC_LATENT_DV)
            s->k_err = fmax(s->k_err, fabs((double)s->kd[x] - s->k[x])),
            s->k_max = fmax(s->k_max, fabs(s->k[x]));
    }
    if (dec_compare(s, &s->dref, amp, out))
        return 1;
    s->err_dequant = out->max_err;
    return check_fp64(s, out);
}
