/* flash3_fp8_main.c — Example 10's version 4 (FP8 e4m3 forward, flash3_fp8.cu) checked on its own:
 * seeded Q, K, V in f16 or bf16 (channels 7 and 37 of Q and K times --outliers F), the pre-pass
 * (Hadamard step unless --no-hadamard, per-block scales, e4m3 codes), then attention on the codes,
 * read back and checked against fp64 (flash3_fp8_check.c: the four checks and their bounds; one
 * PASS/FAIL line each, exit status 1 if any fails). Worst cases: the program prints the largest
 * error over its bound.
 *
 *   ./build/sim/examples/10_flash_attention_3/flash3_fp8_sim --lq 100 --lk 257 -D 128 --causal
 *   ./build/sim/examples/10_flash_attention_3/flash3_fp8_sim -L 256 --outliers 30 --no-hadamard
 * Also --v-tile-scale F: V's odd blocks of 128 keys times F, so that V's block scales differ
 * from tile to tile (O is kept in units of the current tile's V scale); --corrupt-scale F: V's
 * first scale multiplied by F on the device after the pre-pass (a planted wrong scale, which the
 * checks must catch); --corrupt-lse X: X added to the first row's LSE on the device after the
 * attention (a planted wrong LSE with a right O: the LSE check alone must catch it); --check-rows
 * N: the attention checks on the first N rows (in memory order: head 0's first) only, for long runs
 * on a GPU; --json FILE: one line of the errors.
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
#include "attn/example.h"
#include "attn/tensor.h"
#include "flash3_fp8.h"

typedef struct fp8_opts {
    int no_hadamard;
    const char *outliers, *corrupt, *v_tiles, *corrupt_lse;
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
    {"--corrupt-lse", "X", "X added to the first row's LSE after the attention (a planted bug)",
     ATTN_OPTION_TEXT, offsetof(fp8_opts, corrupt_lse), 0, 0, NULL, "0", NULL},
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
                      const fa3_fp8_errors *e, int fails, double median_ms) {
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

/* One run: the flags, the problem, the inputs, the device buffers and what was read back. */
typedef struct fp8_run {
    attn_cli cli;
    fp8_opts fo;
    attn_problem p;
    double outliers, corrupt, v_tiles, corrupt_lse;
    bool hadamard, on_sim;
    attn_host_inputs in;
    fa3_fp8_args a; /* the device buffers */
    void *dq, *dk, *dv, *staging;
    uint8_t *q8, *k8, *v8;
    float *qs, *ks, *vs, *out, *lse;
} fp8_run;

static void usage(void) {
    printf("usage: flash3_fp8 [-B N] [-H N] [-L N | --lq N --lk N] [-D 64|128] [--causal]\n"
           "  [--dtype f16|bf16] [--scale X] [--amplitude X] [--seed N]\n"
           "  [--no-hadamard] [--outliers F] [--v-tile-scale F] [--corrupt-scale F]\n"
           "  [--corrupt-lse X]\n"
           "  [--check-only | --reps N] [--check-rows N] [--json FILE] [--quiet]\n"
           "Example 10's version 4 (FP8 e4m3 forward): the pre-pass and attention on the codes,\n"
           "checked against fp64 (flash3_fp8_check.c). --outliers F: channels 7 and 37 of Q and\n"
           "K times F; --v-tile-scale F: V's odd blocks of 128 keys times F; --corrupt-scale F:\n"
           "V's first block scale times F on the device (a planted bug); --corrupt-lse X: X\n"
           "added to the first row's LSE on the device (a planted bug); --check-rows N: the\n"
           "attention checks on the first N rows only. Defaults: B=1 H=1 L=200 D=64 f16 on the\n"
           "simulator, B=2 H=16 L=4096 D=128 on a GPU. Exit status: 0 every check passed, 1 a\n"
           "failure, 2 usage, 77 no GPU.\n");
}

/* The flags into r (*help: --help printed). 0, or ATTN_EXIT_USAGE after the reason on stderr. */
static int parse(fp8_run *r, int argc, char **argv, bool *help) {
    char err[512];
    int rc = attn_cli_parse_options(&r->cli, argc, argv, fp8_options, ATTN_COUNT(fp8_options),
                                    &r->fo, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    const attn_cli *cli = &r->cli;
    if ((*help = cli->help)) {
        usage();
        return 0;
    }
    if (cli->cu_seqlens_q != NULL || cli->pattern != NULL || cli->profile ||
        cli->dump_dir != NULL || cli->csv_path != NULL || (cli->kernel != 0 && cli->kernel != 4)) {
        fprintf(stderr,
                "error: flash3_fp8 takes the dense layout and none of --seqlens, --pattern, "
                "--profile, --dump, --csv, --kernel other than 4 (see --help)\n");
        return ATTN_EXIT_USAGE;
    }
    if ((rc = parse_factor("--outliers", r->fo.outliers, &r->outliers)) ||
        (rc = parse_factor("--corrupt-scale", r->fo.corrupt, &r->corrupt)) ||
        (rc = parse_factor("--v-tile-scale", r->fo.v_tiles, &r->v_tiles)))
        return rc;
    if (attn_cli_parse_real("--corrupt-lse", r->fo.corrupt_lse, &r->corrupt_lse, err, sizeof err) ||
        !isfinite(r->corrupt_lse)) {
        fprintf(stderr, "error: --corrupt-lse takes a finite number (got '%s')\n",
                r->fo.corrupt_lse);
        return ATTN_EXIT_USAGE;
    }
    r->hadamard = !r->fo.no_hadamard;
    return 0;
}

/* The problem from the flags and the defaults of the backend: 0, or ATTN_EXIT_USAGE. */
static int make_problem(fp8_run *r) {
    const attn_cli *cli = &r->cli;
    const int *def = r->on_sim ? fp8_example.defaults.sim : fp8_example.defaults.gpu;
    attn_problem *p = &r->p;
    attn_problem_init(p, cli->B ? cli->B : def[0], cli->H ? cli->H : def[1],
                      cli->Lq ? cli->Lq : def[2], cli->Lk ? cli->Lk : def[2],
                      cli->D ? cli->D : def[3]);
    p->dtype = cli->dtype_set ? cli->dtype : ATTN_F16;
    p->causal = cli->causal;
    if (cli->scale > 0.0f)
        p->scale = cli->scale;
    char err[512];
    if (attn_kernel_supports(&fp8_kernel_info[0], p, true, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

static void banner(const fp8_run *r) {
    const attn_problem *p = &r->p;
    printf("flash3_fp8 (%s): B = %d, H = %d, Lq = %d, Lk = %d, D = %d, %s%s, Hadamard %s, "
           "outlier channels x%g\n",
           attn_backend_name(), p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
           p->causal ? ", causal" : "", r->hadamard ? "on" : "off", r->outliers);
    if (r->v_tiles != 1.0)
        printf("V's odd blocks of %d keys x%g\n", FA3_FP8_BN, r->v_tiles);
}

/* Q, K, V uploaded and the kernels' buffers (fa3_fp8_args) allocated, O and the LSE NaN-filled. */
static int device_buffers(fp8_run *r) {
    const attn_problem *p = &r->p;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t BH = (size_t)p->B * p->H, qb = (size_t)fa3_fp8_q_blocks(p->Lq),
                 kb = (size_t)fa3_fp8_kv_blocks(p->Lk), o_bytes = qn * attn_dtype_size(p->dtype);
    fa3_fp8_args *a = &r->a;
    *a = (fa3_fp8_args){.B = p->B,
                        .H = p->H,
                        .Lq = p->Lq,
                        .Lk = p->Lk,
                        .D = p->D,
                        .causal = p->causal,
                        .scale = p->scale,
                        .dtype = p->dtype,
                        .hadamard = r->hadamard};
    if ((r->staging = attn_host_alloc((qn > kn ? qn : kn) * 4, "the staging buffer")) == NULL)
        return 1;
    TRY(attn_device_upload(&r->dq, r->in.q, qn, p->dtype, r->staging));
    TRY(attn_device_upload(&r->dk, r->in.k, kn, p->dtype, r->staging));
    TRY(attn_device_upload(&r->dv, r->in.v, kn, p->dtype, r->staging));
    a->q = r->dq, a->k = r->dk, a->v = r->dv;
    a->q8 = attn_device_alloc(qn), a->k8 = attn_device_alloc(kn), a->v8 = attn_device_alloc(kn);
    a->q_scale = attn_device_alloc(BH * qb * 4);
    a->k_scale = attn_device_alloc(BH * kb * 4);
    a->v_scale = attn_device_alloc(BH * kb * 4);
    a->o = attn_device_alloc(o_bytes);
    a->lse = attn_device_alloc(BH * p->Lq * 4);
    if (!a->q8 || !a->k8 || !a->v8 || !a->q_scale || !a->k_scale || !a->v_scale || !a->o || !a->lse)
        return 1;
    return attn_device_fill_nan_output(p, a->o, a->lse);
}

/* A planted bug: the first float of the device buffer dev made x * mul + add. */
static int plant_first(void *dev, double mul, double add) {
    float x;
    TRY(attn_to_host(&x, dev, 4));
    x = (float)(x * mul + add);
    return attn_to_device(dev, &x, 4);
}

/* The pre-pass, --corrupt-scale's planted scale, attention on the codes, then --corrupt-lse's
 * planted LSE. */
static int run_kernels(fp8_run *r) {
    fa3_fp8_args *a = &r->a;
    attn_device_label_launches("10_flash_attention_3", "fa3_fp8_quantize");
    fa3_fp8_quantize(a, 0);
    ATTN_CUDA_TRY(cudaGetLastError());
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    if (r->corrupt != 1.0)
        TRY(plant_first(a->v_scale, r->corrupt, 0.0));
    attn_device_label_launches("10_flash_attention_3", "fa3_fp8");
    fa3_fp8_attention(a, 0);
    ATTN_CUDA_TRY(cudaGetLastError());
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    if (r->corrupt_lse != 0.0)
        TRY(plant_first(a->lse, 1.0, r->corrupt_lse));
    return 0;
}

/* The codes, the scales, O and the LSE back on the host. */
static int read_back(fp8_run *r) {
    const attn_problem *p = &r->p;
    const fa3_fp8_args *a = &r->a;
    const size_t qn = attn_problem_q_elems(p), kn = attn_problem_k_elems(p);
    const size_t BH = (size_t)p->B * p->H, qb = (size_t)fa3_fp8_q_blocks(p->Lq) * BH * 4,
                 kb = (size_t)fa3_fp8_kv_blocks(p->Lk) * BH * 4;
    void **bufs[] = {(void **)&r->q8, (void **)&r->k8, (void **)&r->v8,  (void **)&r->qs,
                     (void **)&r->ks, (void **)&r->vs, (void **)&r->out, (void **)&r->lse};
    const void *from[] = {a->q8, a->k8, a->v8, a->q_scale, a->k_scale, a->v_scale};
    const size_t bytes[] = {qn, kn, kn, qb, kb, kb, qn * 4, BH * p->Lq * 4};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i)
        if ((*bufs[i] = attn_host_alloc(bytes[i], "the read-back outputs")) == NULL ||
            (i < 6 && attn_to_host(*bufs[i], from[i], bytes[i])))
            return 1;
    return attn_stage_read_output(p, a->o, a->lse, r->staging, r->out, r->lse);
}

/* Unless --check-only: version 4 timed (the pre-pass not), its median into *median_ms. */
static int time_attention(fp8_run *r, double *median_ms) {
    *median_ms = NAN;
    if (r->cli.check_only || r->cli.reps == 0)
        return 0;
    const attn_kernel k = {.id = 4, .name = "fa3_fp8", .launch = launch_attention};
    const attn_buffers buf = {.args = &r->a};
    const int reps = r->cli.reps > 0 ? r->cli.reps : (r->on_sim ? 2 : 20);
    const attn_timing_opts t = {.warmup = r->on_sim ? 0 : 5, .reps = reps, .flush_l2 = 1};
    attn_stats st;
    TRY(attn_time_kernel(&k, &r->p, &buf, &t, &st));
    *median_ms = st.median_ms;
    printf("fa3_fp8: median %.4g ms over %d launches, %.4g TFLOP/s%s\n", st.median_ms, st.reps,
           attn_problem_flops(&r->p) / (st.median_ms * 1e-3) * 1e-12,
           r->on_sim ? " (simulator: CPU time, not GPU performance)" : "");
    return 0;
}

static void release(fp8_run *r) {
    const fa3_fp8_args *a = &r->a;
    void *dev[] = {r->dq,      r->dk,      r->dv,      a->q8, a->k8, a->v8,
                   a->q_scale, a->k_scale, a->v_scale, a->o,  a->lse};
    for (size_t n = 0; n < sizeof dev / sizeof dev[0]; ++n)
        attn_device_free(dev[n]);
    void *host[] = {r->staging, r->q8, r->k8, r->v8, r->qs, r->ks, r->vs, r->out, r->lse};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    attn_host_inputs_free(&r->in);
    attn_cli_free(&r->cli);
}

/* Inputs, kernels, read-back, checks, timing and the JSON record: the number of failed checks
 * (0 or more), or -1 after a runtime error. */
static int run(fp8_run *r) {
    const attn_cli *cli = &r->cli;
    if (attn_host_inputs_make(&r->in, &r->p, cli->seed, cli->amplitude > 0 ? cli->amplitude : 1.0f))
        return -1;
    shape_inputs(&r->in, &r->p, r->outliers, r->v_tiles);
    if (device_buffers(r) || run_kernels(r) || read_back(r))
        return -1;
    /* --check-rows N: the first N rows in memory order (a GPU's long runs); else every row */
    const int64_t all_rows = (int64_t)r->p.B * r->p.H * r->p.Lq,
                  rows = cli->check_rows > 0 && cli->check_rows < all_rows ? cli->check_rows
                                                                           : all_rows;
    const fa3_fp8_result got = {r->q8, r->k8, r->v8, r->qs, r->ks, r->vs, r->out, r->lse};
    fa3_fp8_errors e;
    const int fails = fa3_fp8_check(&r->p, r->hadamard, rows, &r->in, &got, &e);
    if (fails < 0)
        return -1;
    if (!cli->quiet)
        printf("fa3_fp8 errors vs fp64: max %.4g, rms %.4g; largest score error %.4g\n", e.max64,
               e.rms64, e.score_max);
    double median_ms;
    if (time_attention(r, &median_ms) ||
        (cli->json_path != NULL &&
         write_json(cli->json_path, &r->p, r->hadamard, r->outliers, &e, fails, median_ms)))
        return -1;
    return fails;
}

int main(int argc, char **argv) {
    fp8_run r;
    memset(&r, 0, sizeof r);
    bool help = false;
    int rc = parse(&r, argc, argv, &help);
    if (rc || help)
        return rc;
    r.on_sim = attn_on_simulator();
    if ((rc = make_problem(&r)))
        return rc;
    attn_device_info info;
    if ((rc = attn_device_init_reported(&info)))
        return rc;
    if (!r.cli.quiet)
        banner(&r);
    const int fails = run(&r);
    release(&r);
    return fails != 0 ? 1 : 0;
}
