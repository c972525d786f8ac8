/* flash3_fp8_main.c — Example 10's version 4 (FP8 e4m3 forward, flash3_fp8.cu) checked on its own:
 * seeded Q, K, V in f16 or bf16 (channels 7 and 37 of Q and K times --outliers F), the pre-pass
 * (Hadamard step unless --no-hadamard, per-block scales, e4m3 codes), then attention on the codes.
 *
 * Checks (one PASS/FAIL line each; exit status 1 if any fails):
 *   quantise     every scale is the reference's (fa3_fp8_scale_ref of the block's largest
 *                magnitude after the fp64 Hadamard step), and every code's value times its scale
 *                is within half an e4m3 step of the fp64 value (plus the fp32 transform's
 *                rounding, 2^-18 of the block's largest magnitude)
 *   dequantised  O against the fp64 attention of the dequantised inputs (the read-back codes
 *                times the REFERENCE's scales, so a wrong scale on the device shows): all that is
 *                left is P's rounding to e4m3, bounded below
 *   fp64         O against the fp64 attention of the unquantised inputs, within the bound below
 *   lse          the LSE against the dequantised inputs' (fp32 rounding only)
 *
 * The bounds, per output row and column d, from e4m3's precision (3 mantissa bits: rounding to
 * nearest moves a value by at most 2^-4 of it, or 2^-10 below the smallest normal 2^-6, in units
 * of the scale). A score is q.k with q, k the rotated rows (H_D / sqrt(D) is orthogonal: the
 * rotation changes no score); the quantised ones are q + dq, k + dk with |dq_c| <= the half step
 * of q_c at its block's scale, so a score moves by at most
 *     E = scale * max over the row's keys t of sum_c (|q_c| |dk_tc| + |dq_c| |k_tc| + |dq_c|
 * |dk_tc|) and every softmax weight w_t by a factor within e^(+-2E). The kernel stores 256 P as
 * e4m3: P(1 + eta) + zeta with |eta| <= 2^-4 and |zeta| <= 2^-18 (the subnormal step 2^-9 / 2 /
 * 256; the rescaling by alpha <= 1 only shrinks it), and divides by l = the sum of the unrounded P
 * (l >= 1). With V's values v + dv, n the keys the row sees:
 *     |o_d - o64_d| <= (e^(2E) - 1) max_t |v_td| + max_t |dv_td|
 *                      + 2^-4 e^(2E) sum_t w_t (|v_td| + |dv_td|) + 2^-18 n max_t (|v_td| +
 * |dv_td|) (fp64), and on the dequantised inputs (E = 0, dv = 0) the last two terms alone. Both add
 * the output's rounding to the dtype (half a unit: 2^-11 |o| f16, 2^-8 bf16) and 2^-16 max_t |v_td|
 * for fp32's sums and exp2. Worst cases: the program prints the largest error over its bound.
 *
 *   ./build/sim/examples/10_flash_attention_3/flash3_fp8_sim --lq 100 --lk 257 -D 128 --causal
 *   ./build/sim/examples/10_flash_attention_3/flash3_fp8_sim -L 256 --outliers 30 --no-hadamard
 * Also --v-tile-scale F: V's odd blocks of 128 keys times F, so that V's block scales differ
 * from tile to tile (O is kept in units of the current tile's V scale); --corrupt-scale F: V's
 * first scale multiplied by F on the device after the pre-pass (a planted wrong scale, which the
 * checks must catch); --check-rows N: the attention checks on the first N rows (in memory order:
 * head 0's first) only, for long runs on a GPU; --json FILE: one line of the errors.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "attn/bench.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/fp8.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "flash3_fp8.h"

typedef struct fp8_opts {
    int no_hadamard;
    const char *outliers, *corrupt, *v_tiles;
} fp8_opts;

static const attn_option fp8_options[] = {
    {"--no-hadamard", NULL, "quantise Q and K without the Hadamard step", ATTN_OPTION_SWITCH,
     offsetof(fp8_opts, no_hadamard), 0, 0, NULL, NULL, NULL},
    {"--outliers", "F", "channels 7 and 37 of Q and K times F (outlier features)", ATTN_OPTION_TEXT,
     offsetof(fp8_opts, outliers), 0, 0, NULL, "1", NULL},
    {"--v-tile-scale", "F", "V's odd blocks of 128 keys (1, 3, ...) times F: V's scales differ",
     ATTN_OPTION_TEXT, offsetof(fp8_opts, v_tiles), 0, 0, NULL, "1", NULL},
    {"--corrupt-scale", "F", "V's first block scale times F after the pre-pass (a planted bug)",
     ATTN_OPTION_TEXT, offsetof(fp8_opts, corrupt), 0, 0, NULL, "1", NULL},
};

static const attn_kernel fp8_kernel_info[] = {
    {ATTN_VERSION(4, "fa3_fp8",
                  "FP8 e4m3 forward (pre-pass: Hadamard, per-block scales; V^T in shared memory)"),
     .req = {.dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true}},
};
static const attn_example fp8_example = {
    .name = "10_flash_attention_3 (v4, FP8)",
    .summary = "FlashAttention-3's FP8 e4m3 forward, checked",
    ATTN_KERNELS(fp8_kernel_info),
    .defaults = {.gpu = {2, 16, 4096, 128}, .sim = {1, 1, 200, 64}},
};

static void *xcalloc(size_t n, size_t z) {
    void *p = calloc(n ? n : 1, z);
    if (p == NULL) {
        fprintf(stderr, "error: out of host memory (%zu x %zu bytes)\n", n, z);
        exit(1);
    }
    return p;
}

static void line(const char *check, bool pass, const char *fmt, double a, double b) {
    printf("fa3_fp8 %-12s %s  ", check, pass ? "PASS" : "FAIL");
    printf(fmt, a, b);
    printf("\n");
}

/* The rows (fp64, rotated when hadamard) of one tensor: x [BH, L, D] from the 16-bit values. */
static double *rotated(const float *x, int64_t rows, int D, bool hadamard) {
    double *y = xcalloc((size_t)(rows * D), sizeof(double));
    for (int64_t i = 0; i < rows * D; ++i)
        y[i] = x[i];
    if (hadamard)
        fa3_fp8_hadamard_ref(y, rows, D, y);
    return y;
}

/* One tensor's quantisation checked: each block's scale against fa3_fp8_scale_ref of its largest
 * magnitude in x (fp64), each code against x; its dequantised values with the reference's scales
 * (deq) and each value's error bound (half a step at that scale, plus the fp32 transform's
 * rounding: hs). Returns the number of bad values and scales. */
static int64_t check_tensor(const double *x, int BH, int L, int D, int rows_per_block,
                            const uint8_t *codes, const float *scales, float *deq, double *hs) {
    const int blocks = (L + rows_per_block - 1) / rows_per_block;
    int64_t bad = 0;
    for (int bh = 0; bh < BH; ++bh)
        for (int blk = 0; blk < blocks; ++blk) {
            const int r0 = blk * rows_per_block,
                      r1 = r0 + rows_per_block < L ? r0 + rows_per_block : L;
            double amax = 0.0;
            for (int r = r0; r < r1; ++r)
                for (int d = 0; d < D; ++d)
                    amax = fmax(amax, fabs(x[((int64_t)bh * L + r) * D + d]));
            const double slack = ldexp(amax, -18), got = scales[(int64_t)bh * blocks + blk];
            double s = fa3_fp8_scale_ref(amax);
            /* where amax is within the fp32 transform's rounding of 448 times a power of two, the
             * kernel's maximum may land on either side of it: either scale is right */
            if (got != s && (got == fa3_fp8_scale_ref(amax * (1 + 1e-6)) ||
                             got == fa3_fp8_scale_ref(amax * (1 - 1e-6))))
                s = got;
            if (got != s)
                ++bad;
            for (int r = r0; r < r1; ++r)
                for (int d = 0; d < D; ++d) {
                    const int64_t i = ((int64_t)bh * L + r) * D + d;
                    const double v = attn_fp8_value(codes[i], ATTN_FP8_E4M3) * s;
                    hs[i] = fa3_fp8_half_spacing_ref(x[i] / s) * s + slack;
                    if (!(fabs(v - x[i]) <= hs[i]))
                        ++bad;
                    deq[i] = (float)v;
                }
        }
    return bad;
}

typedef struct errors {
    double max64, rms64, ratio64, maxdq, ratiodq, score_max, lse_max, ratio_lse;
    int64_t bad64, baddq, badlse;
} errors;

/* The bounds of the header for every row checked (the first `rows` in memory order) and the
 * errors of out against both references. */
static void compare(const attn_problem *p, int64_t rows, const double *q, const double *k,
                    const float *v, const float *qd, const float *kd, const float *vd,
                    const double *hq, const double *hk, const double *hv, const float *out,
                    const float *lse, const float *ref64, const float *refdq, const float *lse_dq,
                    errors *e) {
    const int D = p->D;
    const double u_out = p->dtype == ATTN_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
    double *w = xcalloc((size_t)p->Lk, sizeof(double)),
           *wd = xcalloc((size_t)p->Lk, sizeof(double));
    double sum2 = 0.0;
    int64_t n_el = 0;
    memset(e, 0, sizeof *e);
    for (int bh = 0; bh < p->B * p->H; ++bh)
        for (int i = 0; i < p->Lq; ++i) {
            const int n = attn_causal_keys(p, 0, i); /* dense: every sequence alike */
            const int64_t row = (int64_t)bh * p->Lq + i;
            if (row >= rows)
                break;
            const double *qr = q + row * D, *hqr = hq + row * D;
            const float *qdr = qd + row * D;
            double E = 0.0, Ed = 0.0, m = -INFINITY, md = -INFINITY, l = 0.0, ld = 0.0;
            for (int t = 0; t < n; ++t) {
                const int64_t kt = ((int64_t)bh * p->Lk + t) * D;
                const double *kr = k + kt, *hkr = hk + kt;
                double s = 0.0, sd = 0.0, et = 0.0, ed = 0.0;
                for (int c = 0; c < D; ++c) {
                    s += qr[c] * kr[c];
                    sd += (double)qdr[c] * kd[kt + c];
                    et += fabs(qr[c]) * hkr[c] + hqr[c] * fabs(kr[c]) + hqr[c] * hkr[c];
                    ed += fabs((double)qdr[c] * kd[kt + c]);
                }
                w[t] = s * p->scale, wd[t] = sd * p->scale;
                E = fmax(E, et * p->scale), Ed = fmax(Ed, ldexp(ed * p->scale, -16));
                m = fmax(m, w[t]), md = fmax(md, wd[t]);
            }
            for (int t = 0; t < n; ++t) {
                l += (w[t] = exp(w[t] - m));
                ld += (wd[t] = exp(wd[t] - md));
            }
            const double grow = exp(2.0 * E), grow_d = exp(2.0 * Ed);
            for (int d = 0; d < D; ++d) {
                double vmax = 0.0, dvmax = 0.0, vdmax = 0.0, wv = 0.0, wvd = 0.0;
                for (int t = 0; t < n; ++t) {
                    const int64_t at = ((int64_t)bh * p->Lk + t) * D + d;
                    const double av = fabs(v[at]);
                    vmax = fmax(vmax, av);
                    dvmax = fmax(dvmax, hv[at]);
                    vdmax = fmax(vdmax, fabs(vd[at]));
                    wv += w[t] / l * (av + hv[at]);
                    wvd += wd[t] / ld * fabs(vd[at]);
                }
                const double b64 = (grow - 1.0) * vmax + dvmax + ldexp(grow * wv, -4) +
                                   ldexp((double)n * (vmax + dvmax), -18) + ldexp(vmax, -16),
                             bdq = (grow_d - 1.0) * vdmax + ldexp(wvd, -4) +
                                   ldexp((double)n * vdmax, -18) + ldexp(vdmax, -16);
                const int64_t at = row * D + d;
                const double e64 = fabs((double)out[at] - ref64[at]),
                             edq = fabs((double)out[at] - refdq[at]);
                const double lim64 = b64 + u_out * (fabs(ref64[at]) + b64),
                             limdq = bdq + u_out * (fabs(refdq[at]) + bdq);
                if (!(e64 <= lim64))
                    ++e->bad64;
                if (!(edq <= limdq))
                    ++e->baddq;
                e->max64 = fmax(e->max64, e64);
                e->maxdq = fmax(e->maxdq, edq);
                e->ratio64 = fmax(e->ratio64, e64 / lim64);
                e->ratiodq = fmax(e->ratiodq, edq / limdq);
                sum2 += e64 * e64, ++n_el;
                if (isnan(e64) || isnan(edq))
                    e->max64 = e->maxdq = e->ratio64 = e->ratiodq = NAN;
            }
            /* LSE: fp32 sums of the scores and of exp2 (at most 2^-16 of 1 + |LSE|) */
            const double want = lse_dq[row], got = lse[row];
            if (n == 0 ? !(isinf(got) && got < 0)
                       : !(fabs(got - want) <= ldexp(1.0 + fabs(want), -16)))
                ++e->badlse;
            if (n > 0) {
                e->lse_max = fmax(e->lse_max, fabs(got - want));
                e->ratio_lse = fmax(e->ratio_lse, fabs(got - want) / ldexp(1.0 + fabs(want), -16));
            }
        }
    e->rms64 = n_el ? sqrt(sum2 / (double)n_el) : 0.0;
    free(w), free(wd);
}

/* The largest score error the quantised Q, K make: |scale (q' . k' - q . k)| over every key of
 * the rows checked. */
static double score_error(const attn_problem *p, int64_t rows, const double *q, const double *k,
                          const float *qd, const float *kd) {
    double worst = 0.0;
    for (int bh = 0; bh < p->B * p->H; ++bh)
        for (int i = 0; i < p->Lq && (int64_t)bh * p->Lq + i < rows; ++i)
            for (int t = 0; t < p->Lk; ++t) {
                const int64_t a = ((int64_t)bh * p->Lq + i) * p->D,
                              b = ((int64_t)bh * p->Lk + t) * p->D;
                double s = 0.0, sd = 0.0;
                for (int c = 0; c < p->D; ++c) {
                    s += q[a + c] * k[b + c];
                    sd += (double)qd[a + c] * kd[b + c];
                }
                worst = fmax(worst, fabs(sd - s) * p->scale);
            }
    return worst;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x)                                                                                     \
            return 1;                                                                              \
    } while (0)

/* --outliers: channels 7 and 37 of Q and K times F; --v-tile-scale: V's odd blocks of
 * FA3_FP8_BN keys times F; each value rounded to the dtype again. */
static void shape_inputs(attn_host_inputs *in, const attn_problem *p, double outliers,
                         double v_tiles) {
    const int D = p->D;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    static const int outlier_channels[2] = {7, 37};
    for (int c = 0; c < 2; ++c) {
        for (size_t r = 0; r < qn / D; ++r) {
            float *x = &in->q[r * D + outlier_channels[c]];
            *x = attn_round_dtype((float)(*x * outliers), p->dtype);
        }
        for (size_t r = 0; r < kn / D; ++r) {
            float *x = &in->k[r * D + outlier_channels[c]];
            *x = attn_round_dtype((float)(*x * outliers), p->dtype);
        }
    }
    for (int64_t r = 0; r < (int64_t)(kn / D); ++r)
        if (r % p->Lk / FA3_FP8_BN % 2 == 1)
            for (int d = 0; d < D; ++d)
                in->v[r * D + d] = attn_round_dtype((float)(in->v[r * D + d] * v_tiles), p->dtype);
}

/* --json FILE (appended; - for stdout): one record of the run, errors and (timed) speed. */
static int write_json(const char *path, const attn_problem *p, bool hadamard, double outliers,
                      const errors *e, int fails, double median_ms) {
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "a");
    if (f == NULL) {
        fprintf(stderr, "error: cannot open %s\n", path);
        return 1;
    }
    fprintf(f,
            "{\"kernel\": \"fa3_fp8\", \"backend\": \"%s\", \"B\": %d, \"H\": %d, \"Lq\": %d, "
            "\"Lk\": %d, \"D\": %d, \"dtype\": \"%s\", \"causal\": %s, \"hadamard\": %s, "
            "\"outliers\": %g, \"err_fp64\": %.6g, \"rms_fp64\": %.6g, \"err_over_bound\": "
            "%.6g, \"err_dequantised\": %.6g, \"score_err\": %.6g, \"pass\": %s",
            attn_backend_name(), p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
            p->causal ? "true" : "false", hadamard ? "true" : "false", outliers, e->max64, e->rms64,
            e->ratio64, e->maxdq, e->score_max, fails ? "false" : "true");
    if (!isnan(median_ms))
        fprintf(f, ", \"median_ms\": %.6g, \"tflops\": %.6g", median_ms,
                attn_problem_flops(p) / (median_ms * 1e-3) * 1e-12);
    fprintf(f, "}\n");
    if (f != stdout)
        fclose(f);
    return 0;
}

static void launch_attention(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    fa3_fp8_attention((const fa3_fp8_args *)b->args, s);
}

static int parse_factor(const char *flag, const char *s, double *out) {
    char err[256];
    if (attn_cli_parse_real(flag, s, out, err, sizeof err) || !(*out > 0.0) || !(*out <= 1e4)) {
        fprintf(stderr, "error: %s takes a factor in (0, 1e4] (got '%s')\n", flag, s);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv) {
    attn_cli cli;
    fp8_opts fo = {0, NULL, NULL, NULL};
    char err[512];
    int rc = attn_cli_parse_options(&cli, argc, argv, fp8_options,
                                    (int)(sizeof fp8_options / sizeof fp8_options[0]), &fo, err,
                                    sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    if (cli.help) {
        printf(
            "usage: flash3_fp8 [-B N] [-H N] [-L N | --lq N --lk N] [-D 64|128] [--causal]\n"
            "  [--dtype f16|bf16] [--scale X] [--amplitude X] [--seed N]\n"
            "  [--no-hadamard] [--outliers F] [--v-tile-scale F] [--corrupt-scale F]\n"
            "  [--check-only | --reps N] [--check-rows N] [--json FILE] [--quiet]\n"
            "Example 10's version 4 (FP8 e4m3 forward): the pre-pass and attention on the codes,\n"
            "checked against fp64 (flash3_fp8_main.c). --outliers F: channels 7 and 37 of Q and\n"
            "K times F; --v-tile-scale F: V's odd blocks of 128 keys times F; --corrupt-scale F:\n"
            "V's first block scale times F on the device (a planted bug); --check-rows N: the\n"
            "attention checks on the first N rows only. Defaults: B=1 H=1 L=200 D=64 f16 on the\n"
            "simulator, B=2 H=16 L=4096 D=128 on a GPU. Exit status: 0 every check passed, 1 a\n"
            "failure, 2 usage, 77 no GPU.\n");
        return 0;
    }
    if (cli.cu_seqlens_q != NULL || cli.pattern != NULL || cli.profile || cli.dump_dir != NULL ||
        cli.csv_path != NULL || (cli.kernel != 0 && cli.kernel != 4)) {
        fprintf(stderr,
                "error: flash3_fp8 takes the dense layout and none of --seqlens, --pattern, "
                "--profile, --dump, --csv, --kernel other than 4 (see --help)\n");
        return ATTN_EXIT_USAGE;
    }
    double outliers, corrupt, v_tiles;
    if ((rc = parse_factor("--outliers", fo.outliers, &outliers)) ||
        (rc = parse_factor("--corrupt-scale", fo.corrupt, &corrupt)) ||
        (rc = parse_factor("--v-tile-scale", fo.v_tiles, &v_tiles)))
        return rc;
    const bool on_sim = attn_on_simulator();
    const int *def = on_sim ? fp8_example.defaults.sim : fp8_example.defaults.gpu;
    attn_problem p;
    attn_problem_init(&p, cli.B ? cli.B : def[0], cli.H ? cli.H : def[1], cli.Lq ? cli.Lq : def[2],
                      cli.Lk ? cli.Lk : def[2], cli.D ? cli.D : def[3]);
    p.dtype = cli.dtype_set ? cli.dtype : ATTN_F16;
    p.causal = cli.causal;
    if (cli.scale > 0.0f)
        p.scale = cli.scale;
    if (attn_kernel_supports(&fp8_kernel_info[0], &p, true, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return ATTN_EXIT_USAGE;
    }
    attn_device_info info;
    if ((rc = attn_device_init_reported(&info)))
        return rc;
    const bool hadamard = !fo.no_hadamard;
    const int D = p.D, BH = p.B * p.H;
    const int qb = fa3_fp8_q_blocks(p.Lq), kb = fa3_fp8_kv_blocks(p.Lk);
    const size_t qn = attn_problem_q_elems(&p), kn = attn_problem_k_elems(&p);
    if (!cli.quiet)
        printf("flash3_fp8 (%s): B = %d, H = %d, Lq = %d, Lk = %d, D = %d, %s%s, Hadamard %s, "
               "outlier channels x%g\n",
               attn_backend_name(), p.B, p.H, p.Lq, p.Lk, D, attn_dtype_name(p.dtype),
               p.causal ? ", causal" : "", hadamard ? "on" : "off", outliers);
    if (!cli.quiet && v_tiles != 1.0)
        printf("V's odd blocks of %d keys x%g\n", FA3_FP8_BN, v_tiles);

    /* inputs: seeded, channels 7 and 37 of Q and K scaled, rounded to the dtype */
    attn_host_inputs in;
    TRY(attn_host_inputs_make(&in, &p, cli.seed, cli.amplitude > 0 ? cli.amplitude : 1.0f));
    shape_inputs(&in, &p, outliers, v_tiles);

    /* device buffers and the pre-pass */
    void *staging = xcalloc(qn > kn ? qn : kn, 4);
    fa3_fp8_args a = {.B = p.B,
                      .H = p.H,
                      .Lq = p.Lq,
                      .Lk = p.Lk,
                      .D = D,
                      .causal = p.causal,
                      .scale = p.scale,
                      .dtype = p.dtype,
                      .hadamard = hadamard};
    void *dq, *dk, *dv;
    TRY(attn_device_upload(&dq, in.q, qn, p.dtype, staging));
    TRY(attn_device_upload(&dk, in.k, kn, p.dtype, staging));
    TRY(attn_device_upload(&dv, in.v, kn, p.dtype, staging));
    a.q = dq, a.k = dk, a.v = dv;
    a.q8 = attn_device_alloc(qn), a.k8 = attn_device_alloc(kn), a.v8 = attn_device_alloc(kn);
    a.q_scale = attn_device_alloc((size_t)BH * qb * 4);
    a.k_scale = attn_device_alloc((size_t)BH * kb * 4);
    a.v_scale = attn_device_alloc((size_t)BH * kb * 4);
    a.o = attn_device_alloc(qn * attn_dtype_size(p.dtype));
    a.lse = attn_device_alloc((size_t)BH * p.Lq * 4);
    if (!a.q8 || !a.k8 || !a.v8 || !a.q_scale || !a.k_scale || !a.v_scale || !a.o || !a.lse)
        return 1;
    TRY(attn_device_fill_nan(a.o, qn * attn_dtype_size(p.dtype)));
    TRY(attn_device_fill_nan(a.lse, (size_t)BH * p.Lq * 4));
    attn_device_label_launches("10_flash_attention_3", "fa3_fp8_quantize");
    fa3_fp8_quantize(&a, 0);
    ATTN_CUDA_TRY(cudaGetLastError());
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    if (corrupt != 1.0) {
        float s0;
        TRY(attn_to_host(&s0, a.v_scale, 4));
        s0 = (float)(s0 * corrupt);
        TRY(attn_to_device(a.v_scale, &s0, 4));
    }
    attn_device_label_launches("10_flash_attention_3", "fa3_fp8");
    fa3_fp8_attention(&a, 0);
    ATTN_CUDA_TRY(cudaGetLastError());
    ATTN_CUDA_TRY(cudaDeviceSynchronize());

    /* read back */
    uint8_t *q8 = xcalloc(qn, 1), *k8 = xcalloc(kn, 1), *v8 = xcalloc(kn, 1);
    float *qs = xcalloc((size_t)BH * qb, 4), *ks = xcalloc((size_t)BH * kb, 4),
          *vs = xcalloc((size_t)BH * kb, 4), *out = xcalloc(qn, 4),
          *lse = xcalloc((size_t)BH * p.Lq, 4);
    TRY(attn_to_host(q8, a.q8, qn) || attn_to_host(k8, a.k8, kn) || attn_to_host(v8, a.v8, kn));
    TRY(attn_to_host(qs, a.q_scale, (size_t)BH * qb * 4) ||
        attn_to_host(ks, a.k_scale, (size_t)BH * kb * 4) ||
        attn_to_host(vs, a.v_scale, (size_t)BH * kb * 4));
    TRY(attn_to_host(staging, a.o, qn * attn_dtype_size(p.dtype)));
    attn_unpack(out, staging, qn, p.dtype);
    TRY(attn_to_host(lse, a.lse, (size_t)BH * p.Lq * 4));

    /* the quantisation against the fp64 values */
    double *xq = rotated(in.q, (int64_t)(qn / D), D, hadamard),
           *xk = rotated(in.k, (int64_t)(kn / D), D, hadamard),
           *xv = rotated(in.v, (int64_t)(kn / D), D, false);
    float *qd = xcalloc(qn, 4), *kd = xcalloc(kn, 4), *vd = xcalloc(kn, 4);
    double *hq = xcalloc(qn, 8), *hk = xcalloc(kn, 8), *hv = xcalloc(kn, 8);
    const int64_t bad = check_tensor(xq, BH, p.Lq, D, FA3_FP8_BM, q8, qs, qd, hq) +
                        check_tensor(xk, BH, p.Lk, D, FA3_FP8_BN, k8, ks, kd, hk) +
                        check_tensor(xv, BH, p.Lk, D, FA3_FP8_BN, v8, vs, vd, hv);

    /* the references: fp64 attention on the unquantised inputs, and on the dequantised ones */
    float *ref64 = xcalloc(qn, 4), *lse64 = xcalloc((size_t)BH * p.Lq, 4), *refdq = xcalloc(qn, 4),
          *lsedq = xcalloc((size_t)BH * p.Lq, 4);
    attn_problem pf = p;
    pf.dtype = ATTN_F32;
    /* --check-rows N: the first N rows in memory order (a GPU's long runs); else every row */
    const int64_t all_rows = (int64_t)BH * p.Lq,
                  rows =
                      cli.check_rows > 0 && cli.check_rows < all_rows ? cli.check_rows : all_rows;
    uint8_t *sel = xcalloc((size_t)all_rows, 1);
    memset(sel, 1, (size_t)rows);
    if (attn_reference_rows(&pf, NULL, in.q, in.k, in.v, ref64, lse64, sel) ||
        attn_reference_rows(&pf, NULL, qd, kd, vd, refdq, lsedq, sel)) {
        fprintf(stderr, "error: out of host memory for the reference\n");
        return 1;
    }
    errors e;
    compare(&p, rows, xq, xk, in.v, qd, kd, vd, hq, hk, hv, out, lse, ref64, refdq, lsedq, &e);
    e.score_max = score_error(&p, rows, xq, xk, qd, kd);

    int fails = 0;
    line("quantise", bad == 0, "%.0f bad codes or scales of %.0f values", (double)bad,
         (double)(qn + 2 * kn));
    line("dequantised", e.baddq == 0, "max |O - O64(dequantised)| %.3g, %.3g of its bound", e.maxdq,
         e.ratiodq);
    line("fp64", e.bad64 == 0, "max |O - O64| %.3g, %.3g of its bound", e.max64, e.ratio64);
    line("lse", e.badlse == 0, "max |LSE - LSE64(dequantised)| %.3g, %.3g of its bound", e.lse_max,
         e.ratio_lse);
    fails = (bad != 0) + (e.baddq != 0) + (e.bad64 != 0) + (e.badlse != 0);
    if (!cli.quiet)
        printf("fa3_fp8 errors vs fp64: max %.4g, rms %.4g; largest score error %.4g\n", e.max64,
               e.rms64, e.score_max);

    double median_ms = NAN;
    if (!cli.check_only && cli.reps != 0) {
        const attn_kernel k = {.id = 4, .name = "fa3_fp8", .launch = launch_attention};
        const attn_buffers buf = {.args = &a};
        const int reps = cli.reps > 0 ? cli.reps : (on_sim ? 2 : 20);
        const attn_timing_opts t = {.warmup = on_sim ? 0 : 5, .reps = reps, .flush_l2 = 1};
        attn_stats st;
        TRY(attn_time_kernel(&k, &p, &buf, &t, &st));
        median_ms = st.median_ms;
        printf("fa3_fp8: median %.4g ms over %d launches, %.4g TFLOP/s%s\n", st.median_ms, st.reps,
               attn_problem_flops(&p) / (st.median_ms * 1e-3) * 1e-12,
               on_sim ? " (simulator: CPU time, not GPU performance)" : "");
    }
    if (cli.json_path != NULL &&
        write_json(cli.json_path, &p, hadamard, outliers, &e, fails, median_ms) != 0)
        return 1;
    void *dev[] = {dq, dk, dv, a.q8, a.k8, a.v8, a.q_scale, a.k_scale, a.v_scale, a.o, a.lse};
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
    void *host[] = {staging, q8, k8, v8, qs, ks, vs,    out,   lse,   xq,    xk, xv,
                    qd,      kd, vd, hq, hk, hv, ref64, lse64, refdq, lsedq, sel};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    attn_host_inputs_free(&in);
    attn_cli_free(&cli);
    return fails ? 1 : 0;
}
