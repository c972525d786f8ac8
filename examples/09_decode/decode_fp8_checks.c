/* decode_fp8_checks.c — the checks of example 09's FP8 cache program (decode_fp8.c, whose header
 * states them and derives the fp64 bound): the append's pools against the CPU quantiser's, the
 * attention against the reference over the dequantised cache and against fp64 over the
 * unquantised one; then the timing (--reps) and the report (--json). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "attn/bench.h"
#include "attn/example.h"
#include "attn/report.h"
#include "attn/tensor.h"
#include "decode_fp8.h"

/* The scale of the group value c of a K or V row x belongs to (K/V: the head's D values; latent:
 * its 128; the latent RoPE part is not rounded: -1). */
static double group_scale(const run *r, const float *x, int c) {
    if (r->latent && c >= DEC_LATENT_DV)
        return -1.0;
    const int g0 = r->latent ? c / 128 * 128 : 0, gn = r->latent ? 128 : r->D;
    float amax = 0.0f;
    for (int y = g0; y < g0 + gn; ++y)
        amax = fabsf(x[y]) > amax ? fabsf(x[y]) : amax;
    return dec_fp8_scale_ref(amax);
}

/* The fp64 bound of the header for row n, every column d < Dv (over the unquantised K, V of its
 * keys), into bound[d]; vmax, dvmax: scratch of Dv doubles. */
static void fp64_bound(const run *r, int64_t n, double *bound, double *vmax, double *dvmax) {
    const int g = r->H / r->H_kv, h = (int)(n % r->H), hk = h / g, Dv = r->Dv;
    const int64_t token = n / r->H;
    const int b = (int)(token / r->Lq), i = (int)(token % r->Lq), L = r->lens[b];
    const int seen = L == 0 ? 0 : L - r->Lq + i + 1;
    const double rel = 1.0 / 16 + (r->dtype == ATTN_F16 ? 1.0 / 2048 : 0.0);
    const double abs16 = r->dtype == ATTN_F16 ? ldexp(1.0, -25) : 0.0;
    const float *q = r->q + n * r->D;
    memset(vmax, 0, (size_t)Dv * sizeof(double)), memset(dvmax, 0, (size_t)Dv * sizeof(double));
    double E = 0.0;
    for (int t = 0; t < seen; ++t) {
        const int64_t at = ((r->cu_k[b] + t) * (int64_t)r->H_kv + hk) * r->D;
        const float *kr = r->k + at, *vr = r->latent ? kr : r->v + at;
        double e = 0.0, s = 0.0;
        for (int c = 0; c < r->D; ++c) {
            if (c % 128 == 0 || c == DEC_LATENT_DV)
                s = group_scale(r, kr, c);
            e += s < 0 ? 0.0 : fabs(q[c]) * (rel * fabs(kr[c]) + ldexp(s, -10) + abs16);
        }
        E = r->scale * e > E ? r->scale * e : E;
        for (int d = 0; d < Dv; ++d) {
            if (d % 128 == 0)
                s = group_scale(r, vr, d);
            vmax[d] = fmax(vmax[d], fabs(vr[d]));
            dvmax[d] = fmax(dvmax[d], rel * fabs(vr[d]) + ldexp(s, -10) + abs16);
        }
    }
    for (int d = 0; d < Dv; ++d)
        bound[d] = expm1(2.0 * E) * vmax[d] + dvmax[d];
}

/* The planted wrong scale (--corrupt-scale): the first new token's (sequence 0's) K scale, or its
 * latent row's first, times the factor on the device. */
static int plant_scale(run *r) {
    if (r->corrupt == 1.0 || r->lens[0] == 0)
        return 0;
    const int64_t slot = slot_of(r, 0, r->lens[0] - r->Lq);
    float s, *at = r->latent ? (float *)(r->a.k8_pages + slot * r->row8 + DEC_LATENT_DV)
                             : r->a.k8_scales + slot * r->H_kv;
    if (attn_to_host(&s, at, 4))
        return 1;
    s = (float)(s * r->corrupt);
    return attn_to_device(at, &s, 4);
}

/* The first slot of n where a device array (read back into seen) differs from want's, or -1. */
static int64_t first_diff(const void *dev, const void *want, size_t n, size_t row, void *seen) {
    if (attn_to_host(seen, dev, n * row))
        return -2;
    for (size_t s = 0; s < n; ++s)
        if (memcmp((const char *)seen + s * row, (const char *)want + s * row, row) != 0)
            return (int64_t)s;
    return -1;
}

/* 11: the append, then the planted wrong scale if asked; the pools and scales against the CPU
 * quantiser's. 0 pass, 1 fail, -1 a runtime error. */
static int check_append(run *r, size_t bpt) {
    dec_launch_append_fp8(&r->a, 0);
    if (attn_cuda_report(cudaDeviceSynchronize(), "append_fp8", __FILE__, __LINE__) ||
        plant_scale(r))
        return -1;
    void *seen = attn_allocs_host(&r->mem, r->slots, r->row8);
    if (seen == NULL)
        return -1;
    const size_t sc = (size_t)r->H_kv * 4;
    int64_t bad = first_diff(r->a.k8_pages, r->pool1, r->slots, r->row8, seen);
    const char *what = r->latent ? "latent row" : "K codes";
    if (bad == -1 && !r->latent) {
        const void *dev[] = {r->a.v8_pages, r->a.k8_scales, r->a.v8_scales};
        const void *want[] = {r->vpool1, r->ks1, r->vs1};
        const char *name[] = {"V codes", "K scales", "V scales"};
        for (int x = 0; x < 3 && bad == -1; ++x)
            bad = first_diff(dev[x], want[x], r->slots, x ? sc : r->row8, seen), what = name[x];
    }
    if (bad < -1)
        return -1;
    if (bad >= 0)
        attn_check_line("append_fp8", "append", false,
                        "%s of page %lld slot %lld differ from the CPU quantiser's", what,
                        (long long)(bad / r->P), (long long)(bad % r->P));
    else
        attn_check_line("append_fp8", "append", true,
                        "%d new tokens: %zu bytes per token, pools equal the "
                        "CPU quantiser's byte for byte",
                        r->B * r->Lq, bpt);
    return bad >= 0;
}

/* 12 or 13: attention over the FP8 cache (its outputs NaN first), read back. */
static int attend(run *r) {
    const size_t on = (size_t)r->rows * r->Dv;
    if (attn_device_fill_nan(r->a.o, on * r->dz) ||
        attn_device_fill_nan(r->a.lse, (size_t)r->rows * 4))
        return 1;
    (r->latent ? dec_launch_latent_fp8 : dec_launch_paged_fp8)(&r->a, 0);
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    r->out = attn_allocs_host(&r->mem, on, 4), r->lse = attn_allocs_host(&r->mem, r->rows, 4);
    if (r->mem.failed || attn_to_host(r->staging, r->a.o, on * r->dz) ||
        attn_to_host(r->lse, r->a.lse, (size_t)r->rows * 4))
        return 1;
    attn_unpack(r->out, r->staging, on, r->dtype);
    return 0;
}

/* The references of the checked rows (NaN elsewhere: skipped): over the dequantised cache (ref,
 * its LSE, its same-precision row lowp) and over the unquantised one (ref64, lowp64). */
static int references(run *r) {
    attn_allocs *m = &r->mem;
    const size_t on = (size_t)r->rows * r->Dv;
    r->ref = attn_allocs_host(m, on, 4), r->ref_lse = attn_allocs_host(m, r->rows, 4);
    r->lowp = attn_allocs_host(m, on, 4), r->ref64 = attn_allocs_host(m, on, 4);
    r->lse64 = attn_allocs_host(m, r->rows, 4), r->lowp64 = attn_allocs_host(m, on, 4);
    if (m->failed)
        return 1;
    dec_ref_inputs in = {0}, in64;
    in.B = r->B, in.H = r->H, in.H_kv = r->H_kv, in.Lq = r->Lq, in.D = r->D, in.D_v = r->Dv;
    in.scale = r->scale, in.dtype = r->dtype, in.cu_k = r->cu_k, in.q = r->q;
    in.k = r->kd, in.v = r->latent ? NULL : r->vd;
    in64 = in;
    in64.k = r->k, in64.v = r->latent ? NULL : r->v;
    const size_t rest = (size_t)(r->rows - r->checked) * r->Dv * 4;
    attn_fill_nan_host(r->ref + r->checked * r->Dv, rest);
    attn_fill_nan_host(r->lowp + r->checked * r->Dv, rest);
    attn_fill_nan_host(r->ref_lse, (size_t)r->rows * 4);
    for (int64_t n = 0; n < r->checked; ++n)
        if (dec_reference_row(&in, n, r->ref + n * r->Dv,
                              r->ref_lse + n % r->H * (r->rows / r->H) + n / r->H,
                              r->lowp + n * r->Dv) ||
            dec_reference_row(&in64, n, r->ref64 + n * r->Dv, r->lse64, r->lowp64 + n * r->Dv))
            return 1;
    return 0;
}

/* The attention check's rule (FlashAttention's) over the dequantised cache. */
static void check_dequantised(const run *r, const char *version, attn_stage_check *chk) {
    double amp = 0.0;
    for (int64_t x = 0; x < r->total * (int64_t)r->HkD; ++x)
        amp = fmax(amp, fmax(fabs(r->kd[x]), r->latent ? 0.0 : fabs(r->vd[x])));
    attn_problem p;
    attn_problem_init(&p, r->B, r->H, r->Lq, r->L_cap, r->Dv);
    p.dtype = r->dtype, p.causal = true, p.scale = r->scale;
    p.cu_seqlens_q = r->cu_q, p.cu_seqlens_k = r->cu_k;
    *chk = (attn_stage_check){.pass = true};
    attn_stage_check_attention(&p, r->out, r->lse, r->ref, r->ref_lse, r->lowp, amp, chk);
    attn_check_line(version, "attention", chk->pass,
                    "%lld rows vs fp64 over the dequantised cache: max error %.3g "
                    "(held to %.3g)%s%s",
                    (long long)chk->rows, chk->max_err, chk->bound, chk->pass ? "" : ": ",
                    chk->detail);
}

/* What the fp64 check measures (and the JSON line reports). */
typedef struct fp64_errors {
    double worst, err_max, bound_at, err16; /* err16: the 16-bit cache's, unquantised */
    bool pass;
} fp64_errors;

/* Against fp64 over the unquantised cache: the format's bound plus the attention check's
 * allowance (FlashAttention's form). */
static fp64_errors check_fp64(run *r, const char *version) {
    fp64_errors e = {0.0, 0.0, 0.0, 0.0, true};
    const int Dv = r->Dv;
    double *bounds = attn_allocs_host(&r->mem, (size_t)3 * Dv, sizeof(double));
    const double rel = r->dtype == ATTN_BF16  ? ldexp(1.0, -7)
                       : r->dtype == ATTN_F16 ? ldexp(1.0, -10)
                                              : ldexp(1.0, -20);
    for (int64_t n = 0; bounds != NULL && n < r->checked; ++n) {
        if (r->lens[n / r->H / r->Lq] == 0)
            continue;
        const float *ref = r->ref + n * Dv, *lowp = r->lowp + n * Dv;
        double arith = 0.0, omax = 0.0;
        for (int d = 0; d < Dv; ++d) {
            arith = fmax(arith, 2.0 * fabs((double)lowp[d] - ref[d]));
            omax = fmax(omax, fabs(ref[d]));
        }
        arith += omax * rel;
        fp64_bound(r, n, bounds, bounds + Dv, bounds + 2 * Dv);
        for (int d = 0; d < Dv; ++d) {
            const double err = fabs((double)r->out[n * Dv + d] - r->ref64[n * Dv + d]);
            const double bound = bounds[d] + arith;
            e.pass = e.pass && err <= bound;
            if (err / bound > e.worst)
                e.worst = err / bound, e.bound_at = bound;
            e.err_max = fmax(e.err_max, err);
            e.err16 = fmax(e.err16, fabs((double)r->lowp64[n * Dv + d] - r->ref64[n * Dv + d]));
        }
    }
    e.pass = e.pass && bounds != NULL;
    attn_check_line(version, "fp64", e.pass,
                    "vs fp64 over the unquantised cache: max error %.3g; "
                    "largest error / bound %.3g (bound there %.3g)%s",
                    e.err_max, e.worst, e.bound_at, e.pass ? "" : ": over its bound");
    return e;
}

/* The FP8 attention as a harness kernel, for attn_time_kernel (its args: the dec_args). */
static void launch_paged_fp8(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    dec_launch_paged_fp8((const dec_args *)b->args, s);
}
static void launch_latent_fp8(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    dec_launch_latent_fp8((const dec_args *)b->args, s);
}

/* --reps N: the attention kernel timed (its cache's codes and scales: cache_bytes). */
static int time_attention(run *r, const char *version, double cache_bytes, attn_stats *st) {
    if (r->reps <= 0)
        return 0;
    const attn_kernel k = {.id = r->latent ? 13 : 12,
                           .name = version,
                           .launch = r->latent ? launch_latent_fp8 : launch_paged_fp8};
    const attn_buffers buf = {.args = &r->a};
    const attn_timing_opts t = {.warmup = r->warmup, .reps = r->reps, .flush_l2 = 1};
    if (attn_time_kernel(&k, NULL, &buf, &t, st))
        return 1;
    printf("%s: median %.4g ms over %d launches; the cache's codes and scales %.4g MB: %.4g "
           "GB/s%s\n",
           version, st->median_ms, st->reps, cache_bytes * 1e-6,
           cache_bytes / (st->median_ms * 1e-3) * 1e-9,
           attn_on_simulator() ? " (simulator: CPU time, not GPU performance)" : "");
    return 0;
}

/* The K quantisation's error line; the JSON line (--json). */
static int report(const run *r, const char *version, const attn_stage_check *chk,
                  const fp64_errors *e, size_t bpt, double cache_bytes, double median_ms,
                  bool failed) {
    double kerr = 0.0, kmax = 0.0;
    for (int64_t x = 0; x < r->total * (int64_t)r->HkD; ++x)
        if (!r->latent || x % r->D < DEC_LATENT_DV)
            kerr = fmax(kerr, fabs((double)r->kd[x] - r->k[x])), kmax = fmax(kmax, fabs(r->k[x]));
    printf("K quantisation: max |k8 - k| %.3g over max |k| %.3g; the %s cache unquantised, "
           "computed in its precision: max error %.3g vs fp64\n",
           kerr, kmax, attn_dtype_name(r->dtype), e->err16);
    if (r->json == NULL)
        return 0;
    return attn_json_append(
        r->json,
        "{\"version\": \"%s\", \"dtype\": \"%s\", \"outliers\": %g, \"H\": %d, \"H_kv\": %d, "
        "\"D\": %d, \"err_fp64\": %.6g, \"err_over_bound\": %.6g, \"err_dequant\": %.6g, "
        "\"k_err\": %.6g, \"k_max\": %.6g, \"err_unquantised\": %.6g, \"L\": %d, "
        "\"bytes_per_token\": %zu, \"B\": %d, \"Lq\": %d, \"splits\": %d, \"median_ms\": %.6g, "
        "\"cache_bytes\": %.0f, \"backend\": \"%s\", \"pass\": %s}\n",
        version, attn_dtype_name(r->dtype), r->outliers, r->H, r->H_kv, r->D, e->err_max, e->worst,
        chk->max_err, kerr, kmax, e->err16, r->lens[0], bpt, r->B, r->Lq, r->splits, median_ms,
        cache_bytes, attn_backend_name(), failed ? "false" : "true");
}

/* The checks in order (append, attention, fp64), the timing and the report: 0 every check
 * passed, 1 a failure or a runtime error. */
int fp8_run_checks(run *r) {
    const char *version = r->latent ? "latent_fp8" : "paged_fp8";
    /* the cache's bytes per token (all its heads): codes and scales */
    const size_t bpt = r->latent ? r->row8 : 2 * (r->row8 + 4 * (size_t)r->H_kv);
    double cache_bytes = 0.0; /* the codes and scales the attention reads, once per row tile */
    for (int b = 0; b < r->B; ++b)
        cache_bytes += (double)r->lens[b] * (double)bpt *
                       ((r->Lq * (r->H / r->H_kv) + DEC_ROWS - 1) / DEC_ROWS);
    const int append = check_append(r, bpt);
    if (append < 0 || attend(r) || references(r))
        return 1;
    attn_stats st = {0};
    attn_stage_check chk;
    check_dequantised(r, version, &chk);
    const fp64_errors e = check_fp64(r, version);
    const bool failed = append || !chk.pass || !e.pass;
    if (time_attention(r, version, cache_bytes, &st) ||
        report(r, version, &chk, &e, bpt, cache_bytes, st.median_ms, failed))
        return 1;
    return failed;
}
