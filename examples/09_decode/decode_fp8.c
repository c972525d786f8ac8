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

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/tensor.h"
#include "decode_fp8.h"

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

static void banner(const run *r) {
    printf("decode_fp8 (%s): %s cache, B = %d (lengths", attn_backend_name(),
           r->latent ? "FP8 latent (656 B/token)" : "FP8 e4m3 K/V", r->B);
    for (int b = 0; b < r->B; ++b)
        printf("%s%d", b ? "," : " ", r->lens[b]);
    printf(
        "), H = %d over %d, D = %d, %s, pages of %d, %d new token(s), %d split(s), outliers x%g\n",
        r->H, r->H_kv, r->D, attn_dtype_name(r->dtype), r->P, r->Lq, r->splits, r->outliers);
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
    int rc = layout(&r) || build(&r) || setup_device(&r) ? 1 : fp8_run_checks(&r);
    attn_allocs_free(&r.mem);
    free(r.lens);
    return rc;
}
