/* decode_fp8.c — Example 09's FP8 cache (versions 11-13, decode.h "FP8 cache"), checked on its own
 * data: a decoding step whose new tokens the append kernel quantises into an e4m3 paged cache,
 * then attention reading it (dequantised on chip, fp32 accumulation).
 *
 *   11 append_fp8   the new tokens' K, V (or latent rows) quantised into their pages
 *   12 paged_fp8    version 5 over the e4m3 K/V cache, one scale per token and K/V head
 *   13 latent_fp8   version 10 over FlashMLA's 656-byte latent rows (--latent)
 *
 * Checks (each prints one PASS/FAIL line; the exit status is 1 if any fails):
 *   append     the pools and scales read back equal, byte for byte, what the CPU quantiser
 *              (decode_fp8_reference.c) makes of every token: the prefilled ones it wrote itself,
 *              the new ones the kernel wrote; the unused slots unchanged (0xFF)
 *   attention  the output and LSE against the double-precision reference (decode_reference.c)
 *              over the dequantised cache, by the rule of the 16-bit cache (FlashAttention's: 2x
 *              the error of the same-precision computation; fp32: check.c's bound)
 *   fp64       the output against the double-precision reference over the UNquantised cache,
 *              within the bound the format allows (below), plus the attention check's allowance
 * The fp64 bound, per output row and column d, from e4m3's rounding: a value x of a group with
 * scale s is stored with error |dx| <= 2^-4 |x| + 2^-10 s (3 mantissa bits: half a unit is 2^-4
 * of the value at most; below e4m3's smallest normal 2^-6 s the subnormal spacing 2^-9 s gives
 * 2^-10 s; fp16's rounding of code * s adds 2^-11 |x| + 2^-25). A score moves by at most
 * E = scale * max_t sum_d |q_d| |dk_td|, so every softmax weight changes by a factor within
 * e^(+-2E), and
 *     |o_d - o64_d| <= (e^(2E) - 1) max_t |v_td| + max_t |dv_td|
 * (a worst case: the errors measured sit well below it; the program prints the ratio).
 *
 * --outliers F multiplies channels 7 and 37 of every key head (and of the latent row) by F: the
 * outlier channels of real keys, which set a token's scale and leave its other values fewer
 * bits. --corrupt-scale F multiplies the scale of the first new token's K (latent: of its first
 * group) by F after the append: a planted wrong scale, which the append and attention checks must
 * catch. Bad input: one line, exit status 2.
 *
 *   ./build/sim/examples/09_decode/decode_fp8_sim --cache-lens 300,17,0,64 -H 9 --kv-heads 3
 *   ./build/sim/examples/09_decode/decode_fp8_sim --latent --cache-lens 100,1 -H 16
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/bench.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/report.h"
#include "attn/tensor.h"
#include "decode.h"

/* The program's own flags; the common ones it takes: -H -D --dtype --seed --reps --warmup
 * --check-only --check-rows --json (attn/cli.h). */
typedef struct fp8_opts {
    const char *cache_lens;
    int kv_heads, page_size, queries, splits, latent;
    double outliers, corrupt;
} fp8_opts;

static const attn_option fp8_options[] = {
    {"--cache-lens", "L1,L2,..", "each sequence's cache length (0: an empty slot)",
     ATTN_OPTION_TEXT, offsetof(fp8_opts, cache_lens), 0, 0, NULL, "300,17,0", NULL},
    {"--kv-heads", "N", "key/value heads (default 3; --latent: 1)", ATTN_OPTION_INT,
     offsetof(fp8_opts, kv_heads), 1, 256, NULL, NULL, NULL},
    {"--page-size", "P", "tokens per page", ATTN_OPTION_INT, offsetof(fp8_opts, page_size), 1,
     DEC_MAX_PAGE_SIZE, NULL, "16", NULL},
    {"--queries", "N", "new tokens per sequence", ATTN_OPTION_INT, offsetof(fp8_opts, queries), 1,
     DEC_MAX_QUERIES, NULL, "1", NULL},
    {"--splits", "N", "split-KV splits", ATTN_OPTION_INT, offsetof(fp8_opts, splits), 1,
     DEC_MAX_SPLITS, NULL, "1", NULL},
    {"--latent", NULL, "FlashMLA's 656-byte FP8 latent rows (versions 11 and 13)",
     ATTN_OPTION_SWITCH, offsetof(fp8_opts, latent), 0, 0, NULL, NULL, NULL},
    {"--outliers", "F", "channels 7 and 37 of every key row times F", ATTN_OPTION_FACTOR,
     offsetof(fp8_opts, outliers), 0, 0, NULL, "1", NULL},
    {"--corrupt-scale", "F", "the first new token's K scale times F after the append (a test)",
     ATTN_OPTION_FACTOR, offsetof(fp8_opts, corrupt), 0, 0, NULL, "1", NULL},
};

/* The run: its shape, its data (host; token rows packed by cu_k: [total, H_kv, D]), the device's
 * (a), the results. Every buffer is in mem. */
typedef struct run {
    int *lens, B, H, H_kv, D, P, Lq, splits, latent, reps, warmup, W, num_pages, Dv, L_cap;
    int *cu_k, *cu_q, *table;
    attn_dtype dtype;
    double outliers, corrupt;
    uint64_t seed;
    const char *json;
    float scale;
    int64_t total, rows, checked; /* cache tokens; output rows; the rows checked */
    size_t dz, row8, HkD, slots;  /* bytes of an element; of a token's FP8 row (all its heads) */
    float *q, *k, *v;             /* the unquantised values (in dtype) */
    float *kd, *vd;               /* the dequantised cache, as the kernel holds it on chip */
    uint8_t *pool0, *pool1;       /* K (latent: the rows) before and after a right append */
    uint8_t *vpool0, *vpool1;     /* V codes (K/V only) */
    float *ks0, *ks1, *vs0, *vs1;
    void *staging;
    dec_args a;
    float *out, *lse, *ref, *ref_lse, *lowp, *ref64, *lse64, *lowp64;
    attn_allocs mem;
} run;

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "error: %s (got '%s')\n", msg, arg ? arg : "");
    return ATTN_EXIT_USAGE;
}

static const char usage_text[] =
    "usage: decode_fp8 [--cache-lens L1,L2,..] [-H N] [--kv-heads N] [-D 64|128]\n"
    "  [--page-size P] [--queries 1-8] [--splits N] [--dtype f32|f16|bf16]\n"
    "  [--latent] [--outliers F] [--corrupt-scale F] [--seed N] [--json FILE]\n"
    "  [--reps N [--warmup N]]  (time the attention kernel: N launches after 3 untimed)\n"
    "  [--check-rows N]  (check the first N output rows only)\n"
    "Example 09's FP8 cache (versions 11-13) checked on its own data (decode_fp8.c). Defaults:\n"
    "--cache-lens 300,17,0, H = 9 over 3 (--latent: 16 over 1), D = 64, bf16, pages of 16,\n"
    "seed 45. Exit status: 0 every check passed, 1 a failure, 2 usage, 77 no GPU.\n";

/* The shape's rules (one line and exit status 2 each). */
static int check_shape(const run *r, bool kv_given) {
    char b[64];
    if (r->H > 256)
        return snprintf(b, sizeof b, "%d", r->H), usage_error("-H takes 1 to 256 heads", b);
    if (!r->latent && r->D != 64 && r->D != 128)
        return snprintf(b, sizeof b, "%d", r->D), usage_error("-D takes 64 or 128", b);
    if (r->latent && kv_given && r->H_kv != 1) {
        snprintf(b, sizeof b, "--kv-heads %d", r->H_kv);
        return usage_error("--latent has one latent row per token: --kv-heads 1", b);
    }
    if (r->latent && r->dtype == ATTN_F32)
        return usage_error("--latent takes bf16 or f16 (FlashMLA's)", "f32");
    if (r->H % r->H_kv != 0) {
        snprintf(b, sizeof b, "-H %d --kv-heads %d", r->H, r->H_kv);
        return usage_error("-H must be a multiple of --kv-heads", b);
    }
    for (int x = 0; x < r->B; ++x)
        if (r->lens[x] != 0 && r->lens[x] < r->Lq) {
            snprintf(b, sizeof b, "length %d, --queries %d", r->lens[x], r->Lq);
            return usage_error("a cache shorter than its new tokens", b);
        }
    return 0;
}

/* The flags: 0, -1 after --help, or ATTN_EXIT_USAGE after one line. */
static int parse(int argc, char **argv, run *r) {
    attn_cli cli;
    fp8_opts fo;
    char err[512];
    memset(&fo, 0, sizeof fo);
    int rc = attn_cli_parse_options(&cli, argc, argv, fp8_options,
                                    (int)(sizeof fp8_options / sizeof fp8_options[0]), &fo, err,
                                    sizeof err);
    if (rc)
        return fprintf(stderr, "%s\n", err), rc;
    const bool other = cli.B || cli.Lq || cli.Lk || cli.cu_seqlens_q || cli.pattern || cli.causal ||
                       cli.scale != 0.0f || cli.amplitude != 1.0f ||
                       cli.inputs != ATTN_INPUTS_UNIFORM || cli.kernel || cli.list || cli.profile ||
                       cli.dump_dir || cli.csv_path;
    r->latent = fo.latent, r->P = fo.page_size, r->Lq = fo.queries, r->splits = fo.splits;
    r->outliers = fo.outliers, r->corrupt = fo.corrupt, r->json = cli.json_path;
    r->dtype = cli.dtype_set ? cli.dtype : ATTN_BF16;
    r->seed = cli.seed_set ? cli.seed : 45;
    r->reps = cli.check_only || cli.reps < 0 ? 0 : cli.reps;
    r->warmup = cli.warmup >= 0 ? cli.warmup : 3;
    r->checked = cli.check_rows > 0 ? cli.check_rows : 0;
    r->H = cli.H ? cli.H : r->latent ? 16 : 9;
    r->H_kv = r->latent ? 1 : fo.kv_heads ? fo.kv_heads : 3;
    r->D = r->latent ? DEC_LATENT_DK : cli.D ? cli.D : 64;
    const bool help = cli.help;
    attn_cli_free(&cli);
    if (help)
        return fputs(usage_text, stdout), -1;
    if (other) {
        fputs("error: decode_fp8 takes none of -B, -L, --lq, --lk, --seqlens, --pattern, --causal, "
              "--scale, --amplitude, --inputs, --kernel, --list, --profile, --dump, --csv (see "
              "--help)\n",
              stderr);
        return ATTN_EXIT_USAGE;
    }
    if (dec_parse_lens(fo.cache_lens, &r->lens, &r->B, err, sizeof err))
        return fprintf(stderr, "error: %s\n", err), ATTN_EXIT_USAGE;
    r->H_kv = r->latent && fo.kv_heads ? fo.kv_heads : r->H_kv;
    return check_shape(r, fo.kv_heads != 0);
}

/* Token t of sequence b: its slot in the pool. */
static int64_t slot_of(const run *r, int b, int t) {
    return (int64_t)r->table[b * r->W + t / r->P] * r->P + t % r->P;
}

/* The sizes, the block table of a shuffled pool (two spare pages: never written). */
static int layout(run *r) {
    attn_allocs *m = &r->mem;
    r->dz = attn_dtype_size(r->dtype);
    r->Dv = r->latent ? DEC_LATENT_DV : r->D;
    r->HkD = (size_t)r->H_kv * r->D;
    r->row8 = r->latent ? DEC_FP8_LATENT_BYTES : r->HkD;
    r->scale = r->latent ? 1.0f / sqrtf(192.0f) : 1.0f / sqrtf((float)r->D);
    r->cu_k = attn_allocs_host(m, (size_t)r->B + 1, sizeof(int));
    r->cu_q = attn_allocs_host(m, (size_t)r->B + 1, sizeof(int));
    if (m->failed)
        return 1;
    int pages = 0;
    r->L_cap = 1, r->W = 1;
    for (int b = 0; b < r->B; ++b) {
        r->cu_k[b + 1] = r->cu_k[b] + r->lens[b];
        r->cu_q[b + 1] = r->cu_q[b] + r->Lq;
        const int w = dec_pages_for(r->lens[b], r->P);
        pages += w;
        r->W = w > r->W ? w : r->W;
        r->L_cap = r->lens[b] > r->L_cap ? r->lens[b] : r->L_cap;
    }
    r->num_pages = pages + 2;
    r->slots = (size_t)r->num_pages * r->P;
    r->total = r->cu_k[r->B], r->rows = (int64_t)r->B * r->Lq * r->H;
    r->checked = r->checked > 0 && r->checked < r->rows ? r->checked : r->rows;
    r->table = attn_allocs_host(m, (size_t)r->B * r->W, sizeof(int));
    return m->failed ||
           dec_fill_table(r->table, r->B, r->W, r->lens, r->P, r->num_pages, r->seed) != 0;
}

/* Two copies of a pool of n bytes (before, after the append), unused bytes 0xFF. */
static void pools(run *r, uint8_t **p0, uint8_t **p1, size_t n) {
    *p0 = attn_allocs_host(&r->mem, n, 1), *p1 = attn_allocs_host(&r->mem, n, 1);
    if (*p0 != NULL && *p1 != NULL)
        memset(*p0, 0xFF, n), memset(*p1, 0xFF, n);
}

/* Two copies of a scale array of n floats, NaN. */
static void scales(run *r, float **s0, float **s1, size_t n) {
    *s0 = attn_allocs_host(&r->mem, n, 4), *s1 = attn_allocs_host(&r->mem, n, 4);
    if (*s0 != NULL && *s1 != NULL)
        attn_fill_nan_host(*s0, n * 4), attn_fill_nan_host(*s1, n * 4);
}

/* Token tok (slot `slot`) of a K/V cache quantised by the CPU into pool1 and scales s1 and
 * dequantised into kd, vd; a prefilled token (old) also into pool0 and s0. */
static void quantise_token(run *r, int64_t tok, int64_t slot, bool old) {
    for (int hk = 0; hk < r->H_kv; ++hk) {
        const int64_t at = (tok * r->H_kv + hk) * r->D, s = slot * r->H_kv + hk;
        uint8_t *kc = r->pool1 + s * r->D, *vc = r->vpool1 + s * r->D;
        r->ks1[s] = dec_fp8_quantize_ref(r->k + at, r->D, kc);
        r->vs1[s] = dec_fp8_quantize_ref(r->v + at, r->D, vc);
        for (int d = 0; d < r->D; ++d) {
            r->kd[at + d] = attn_round_dtype((float)(ds_fp8_value(kc[d]) * r->ks1[s]), r->dtype);
            r->vd[at + d] = attn_round_dtype((float)(ds_fp8_value(vc[d]) * r->vs1[s]), r->dtype);
        }
        if (old) {
            memcpy(r->pool0 + s * r->D, kc, (size_t)r->D);
            memcpy(r->vpool0 + s * r->D, vc, (size_t)r->D);
            r->ks0[s] = r->ks1[s], r->vs0[s] = r->vs1[s];
        }
    }
}

/* Inputs, the page pool, and what a right append leaves (by the CPU quantiser). */
static int build(run *r) {
    attn_allocs *m = &r->mem;
    const size_t kv = (size_t)r->total * r->HkD, nq = (size_t)r->rows * r->D;
    r->q = attn_allocs_host(m, nq, 4), r->k = attn_allocs_host(m, kv, 4);
    r->v = attn_allocs_host(m, kv, 4), r->kd = attn_allocs_host(m, kv, 4);
    r->vd = attn_allocs_host(m, kv, 4);
    pools(r, &r->pool0, &r->pool1, r->slots * r->row8);
    if (!r->latent) {
        pools(r, &r->vpool0, &r->vpool1, r->slots * r->row8);
        scales(r, &r->ks0, &r->ks1, r->slots * r->H_kv);
        scales(r, &r->vs0, &r->vs1, r->slots * r->H_kv);
    }
    if (m->failed)
        return 1;
    attn_fill_uniform(r->q, nq, r->seed, 0, 1.0f, r->dtype);
    attn_fill_uniform(r->k, kv, r->seed, 1, 1.0f, r->dtype);
    attn_fill_uniform(r->v, kv, r->seed, 2, 1.0f, r->dtype);
    for (size_t x = 0; x < kv; ++x) /* outlier channels 7 and 37 of every row */
        if (x % r->D == 7 || x % r->D == 37)
            r->k[x] = attn_round_dtype((float)(r->k[x] * r->outliers), r->dtype);
    for (int b = 0; b < r->B; ++b)
        for (int t = 0; t < r->lens[b]; ++t) {
            const int64_t tok = r->cu_k[b] + t, slot = slot_of(r, b, t);
            const bool old = t < r->lens[b] - r->Lq; /* prefilled: in the pool before the step */
            if (!r->latent) {
                quantise_token(r, tok, slot, old);
                continue;
            }
            uint8_t *row = r->pool1 + slot * r->row8;
            dec_fp8_pack_latent_ref(r->k + tok * r->D, r->dtype, row);
            dec_fp8_unpack_latent_ref(row, r->dtype, r->kd + tok * r->D);
            if (old)
                memcpy(r->pool0 + slot * r->row8, row, r->row8);
        }
    return 0;
}

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

/* The device's buffers and what the kernels read (a): the queries, the new tokens (packed
 * [B, Lq, H_kv, D]), the pools as before the step, the table. */
static int setup_device(run *r) {
    attn_allocs *m = &r->mem;
    const size_t nn = (size_t)r->B * r->Lq * r->HkD, sc = r->slots * r->H_kv * 4;
    float *knew = attn_allocs_host(m, nn, 4), *vnew = attn_allocs_host(m, nn, 4);
    r->staging = attn_allocs_host(m, (size_t)r->rows * r->D + nn + 16, 4);
    if (m->failed)
        return 1;
    for (int b = 0; b < r->B; ++b)
        for (int i = 0; i < r->Lq && r->lens[b] > 0; ++i) {
            const int64_t tok = r->cu_k[b] + r->lens[b] - r->Lq + i, dst = (int64_t)b * r->Lq + i;
            memcpy(knew + dst * r->HkD, r->k + tok * r->HkD, r->HkD * 4);
            memcpy(vnew + dst * r->HkD, r->v + tok * r->HkD, r->HkD * 4);
        }
    dec_args *a = &r->a;
    memset(a, 0, sizeof *a);
    a->B = r->B, a->H = r->H, a->H_kv = r->H_kv, a->Lq = r->Lq, a->D = r->D, a->L_cap = r->L_cap;
    a->latent = r->latent, a->dtype = r->dtype, a->scale = r->scale, a->splits = r->splits;
    a->table_width = r->W, a->page_size = r->P, a->num_pages = r->num_pages;
    a->q = attn_allocs_upload_as(m, r->q, (size_t)r->rows * r->D, r->dtype, r->staging);
    a->k_new = attn_allocs_upload_as(m, knew, nn, r->dtype, r->staging);
    a->k8_pages = attn_allocs_upload(m, r->pool0, r->slots * r->row8);
    a->block_table = attn_allocs_upload(m, r->table, (size_t)r->B * r->W * 4);
    a->seqlens = attn_allocs_upload(m, r->lens, (size_t)r->B * 4);
    a->o = attn_allocs_device(m, (size_t)r->rows * r->Dv * r->dz);
    a->lse = attn_allocs_device(m, (size_t)r->rows * 4);
    if (!r->latent) {
        a->v_new = attn_allocs_upload_as(m, vnew, nn, r->dtype, r->staging);
        a->v8_pages = attn_allocs_upload(m, r->vpool0, r->slots * r->row8);
        a->k8_scales = attn_allocs_upload(m, r->ks0, sc);
        a->v8_scales = attn_allocs_upload(m, r->vs0, sc);
    }
    if (r->splits > 1 && !m->failed)
        a->part = attn_allocs_device(m, dec_workspace_bytes(a, r->splits));
    return m->failed;
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
    const dec_ref_inputs in = {r->B,
                               r->H,
                               r->H_kv,
                               r->Lq,
                               r->D,
                               r->scale,
                               r->dtype,
                               r->cu_k,
                               r->q,
                               r->kd,
                               r->latent ? NULL : r->vd,
                               NULL,
                               0,
                               r->Dv};
    dec_ref_inputs in64 = in;
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

static void banner(const run *r) {
    printf("decode_fp8 (%s): %s cache, B = %d (lengths", attn_backend_name(),
           r->latent ? "FP8 latent (656 B/token)" : "FP8 e4m3 K/V", r->B);
    for (int b = 0; b < r->B; ++b)
        printf("%s%d", b ? "," : " ", r->lens[b]);
    printf(
        "), H = %d over %d, D = %d, %s, pages of %d, %d new token(s), %d split(s), outliers x%g\n",
        r->H, r->H_kv, r->D, attn_dtype_name(r->dtype), r->P, r->Lq, r->splits, r->outliers);
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
static int run_checks(run *r) {
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

int main(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    const int bad = parse(argc, argv, &r);
    if (bad)
        return free(r.lens), bad < 0 ? 0 : bad;
    attn_device_info info;
    const int dev = attn_device_init_reported(&info);
    if (dev)
        return free(r.lens), dev;
    banner(&r);
    int rc = layout(&r) || build(&r) || setup_device(&r) ? 1 : run_checks(&r);
    attn_allocs_free(&r.mem);
    free(r.lens);
    return rc;
}
