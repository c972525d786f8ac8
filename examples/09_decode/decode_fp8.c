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
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/bench.h"
#include "attn/check.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/tensor.h"
#include "decode.h"

#define MAX_B 64
#define EXIT_USAGE 2

typedef struct opts {
    int lens[MAX_B], B, H, H_kv, D, P, Lq, splits, latent, reps, check_rows;
    attn_dtype dtype;
    float outliers, corrupt;
    uint64_t seed;
    const char *json;
} opts;

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "error: %s (got '%s')\n", msg, arg ? arg : "");
    return EXIT_USAGE;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return 1;
    *out = (int)v;
    return 0;
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.B = 3,
                .lens = {300, 17, 0},
                .H = 9,
                .H_kv = 3,
                .D = 64,
                .P = 16,
                .Lq = 1,
                .splits = 1,
                .dtype = ATTN_BF16,
                .outliers = 1.0f,
                .corrupt = 1.0f,
                .seed = 45};
    bool h_given = false, hkv_given = false;
    for (int i = 1; i < argc; ++i) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(f, "--latent") == 0) {
            o->latent = 1;
            continue;
        }
        if (strcmp(f, "--help") == 0) {
            printf("usage: decode_fp8 [--cache-lens L1,L2,..] [-H N] [--kv-heads N] [-D 64|128]\n"
                   "  [--page-size P] [--queries 1-8] [--splits N] [--dtype f32|f16|bf16]\n"
                   "  [--latent] [--outliers F] [--corrupt-scale F] [--seed N] [--json FILE]\n"
                   "  [--reps N]  (time the attention kernel: N launches after 3 untimed)\n"
                   "  [--check-rows N]  (check the first N output rows only)\n");
            exit(0);
        }
        if (v == NULL)
            return usage_error("this flag takes a value", f);
        ++i;
        if (strcmp(f, "--cache-lens") == 0) {
            o->B = 0;
            char buf[512];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t != NULL; t = strtok(NULL, ","))
                if (o->B == MAX_B || parse_int(t, 0, 1 << 20, &o->lens[o->B++]))
                    return usage_error("--cache-lens takes up to 64 lengths of 0 to 2^20", v);
            if (o->B == 0)
                return usage_error("--cache-lens takes up to 64 lengths of 0 to 2^20", v);
        } else if (strcmp(f, "-H") == 0) {
            if (parse_int(v, 1, 256, &o->H))
                return usage_error("-H takes 1 to 256 heads", v);
            h_given = true;
        } else if (strcmp(f, "--kv-heads") == 0) {
            if (parse_int(v, 1, 256, &o->H_kv))
                return usage_error("--kv-heads takes 1 to 256 heads", v);
            hkv_given = true;
        } else if (strcmp(f, "-D") == 0) {
            if (parse_int(v, 64, 128, &o->D) || (o->D != 64 && o->D != 128))
                return usage_error("-D takes 64 or 128", v);
        } else if (strcmp(f, "--page-size") == 0) {
            if (parse_int(v, 1, DEC_MAX_PAGE_SIZE, &o->P))
                return usage_error("--page-size takes 1 to 4096 tokens", v);
        } else if (strcmp(f, "--queries") == 0) {
            if (parse_int(v, 1, DEC_MAX_QUERIES, &o->Lq))
                return usage_error("--queries takes 1 to 8 new tokens", v);
        } else if (strcmp(f, "--splits") == 0) {
            if (parse_int(v, 1, DEC_MAX_SPLITS, &o->splits))
                return usage_error("--splits takes 1 to 256", v);
        } else if (strcmp(f, "--dtype") == 0) {
            if (attn_dtype_parse(v, &o->dtype))
                return usage_error("--dtype takes f32, f16 or bf16", v);
        } else if (strcmp(f, "--outliers") == 0 || strcmp(f, "--corrupt-scale") == 0) {
            char *end;
            const float x = strtof(v, &end);
            if (*end != '\0' || !(x > 0.0f) || !(x <= 1e4f))
                return usage_error(f[2] == 'o' ? "--outliers takes a factor in (0, 1e4]"
                                               : "--corrupt-scale takes a factor in (0, 1e4]",
                                   v);
            *(f[2] == 'o' ? &o->outliers : &o->corrupt) = x;
        } else if (strcmp(f, "--check-rows") == 0) {
            if (parse_int(v, 1, 1 << 30, &o->check_rows))
                return usage_error("--check-rows takes 1 to 2^30 rows", v);
        } else if (strcmp(f, "--reps") == 0) {
            if (parse_int(v, 0, 10000, &o->reps))
                return usage_error("--reps takes 0 to 10000 timed launches", v);
        } else if (strcmp(f, "--seed") == 0) {
            int s;
            if (parse_int(v, 0, 1 << 30, &s))
                return usage_error("--seed takes 0 to 2^30", v);
            o->seed = (uint64_t)s;
        } else if (strcmp(f, "--json") == 0) {
            o->json = v;
        } else {
            return usage_error("unknown flag (see --help)", f);
        }
    }
    if (o->latent) {
        if (!h_given)
            o->H = 16;
        if (hkv_given && o->H_kv != 1) {
            char b[32];
            snprintf(b, sizeof b, "--kv-heads %d", o->H_kv);
            return usage_error("--latent has one latent row per token: --kv-heads 1", b);
        }
        if (o->dtype == ATTN_F32)
            return usage_error("--latent takes bf16 or f16 (FlashMLA's)", "f32");
        o->H_kv = 1;
        o->D = DEC_LATENT_DK;
    }
    if (o->H % o->H_kv != 0) {
        char b[64];
        snprintf(b, sizeof b, "-H %d --kv-heads %d", o->H, o->H_kv);
        return usage_error("-H must be a multiple of --kv-heads", b);
    }
    for (int b = 0; b < o->B; ++b)
        if (o->lens[b] != 0 && o->lens[b] < o->Lq) {
            char s[64];
            snprintf(s, sizeof s, "length %d, --queries %d", o->lens[b], o->Lq);
            return usage_error("a cache shorter than its new tokens", s);
        }
    return 0;
}

/* The run's data (host). Token rows are packed by cu_k: [total_k, H_kv, D]. */
typedef struct run {
    opts o;
    int cu_k[MAX_B + 1], cu_q[MAX_B + 1], W, num_pages, *table, Dv, L_cap;
    size_t dz, row8;          /* bytes of an element; of a token's FP8 row (all its heads) */
    float *q, *k, *v;         /* the unquantised values (in dtype) */
    float *kd, *vd;           /* the dequantised cache, as the kernel holds it on chip */
    uint8_t *pool0, *pool1;   /* K (latent: the rows) before and after a right append */
    uint8_t *vpool0, *vpool1; /* V codes (K/V only) */
    float *ks0, *ks1, *vs0, *vs1;
} run;

static void *xcalloc(size_t n, size_t z) {
    void *p = calloc(n ? n : 1, z);
    if (p == NULL) {
        fprintf(stderr, "error: out of host memory\n");
        exit(1);
    }
    return p;
}

/* Token t of sequence b: its slot in the pool. */
static int64_t slot_of(const run *r, int b, int t) {
    return (int64_t)r->table[b * r->W + t / r->o.P] * r->o.P + t % r->o.P;
}

/* Inputs, the page pool, and what a right append leaves (by the CPU quantiser). */
static void build(run *r) {
    const opts *o = &r->o;
    const int HkD = o->H_kv * o->D;
    r->dz = attn_dtype_size(o->dtype);
    r->Dv = o->latent ? DEC_LATENT_DV : o->D;
    r->row8 = o->latent ? DEC_FP8_LATENT_BYTES : (size_t)HkD;
    int pages = 0;
    r->L_cap = 1;
    for (int b = 0; b < o->B; ++b) {
        r->cu_k[b + 1] = r->cu_k[b] + o->lens[b];
        r->cu_q[b + 1] = r->cu_q[b] + o->Lq;
        pages += dec_pages_for(o->lens[b], o->P);
        const int w = dec_pages_for(o->lens[b], o->P);
        r->W = w > r->W ? w : r->W;
        r->L_cap = o->lens[b] > r->L_cap ? o->lens[b] : r->L_cap;
    }
    r->W = r->W ? r->W : 1;
    r->num_pages = pages + 2; /* two spare pages: never written */
    int *perm = xcalloc((size_t)r->num_pages, sizeof(int));
    dec_shuffle(perm, r->num_pages, o->seed);
    r->table = xcalloc((size_t)o->B * r->W, sizeof(int));
    int next = 0;
    for (int b = 0; b < o->B; ++b)
        for (int x = 0; x < dec_pages_for(o->lens[b], o->P); ++x)
            r->table[b * r->W + x] = perm[next++];
    free(perm);

    const int64_t total = r->cu_k[o->B], rows = (int64_t)o->B * o->Lq * o->H;
    r->q = xcalloc((size_t)rows * o->D, sizeof(float));
    r->k = xcalloc((size_t)total * HkD, sizeof(float));
    r->v = xcalloc((size_t)total * HkD, sizeof(float));
    r->kd = xcalloc((size_t)total * HkD, sizeof(float));
    r->vd = xcalloc((size_t)total * HkD, sizeof(float));
    attn_fill_uniform(r->q, (size_t)rows * o->D, o->seed, 0, 1.0f, o->dtype);
    attn_fill_uniform(r->k, (size_t)total * HkD, o->seed, 1, 1.0f, o->dtype);
    attn_fill_uniform(r->v, (size_t)total * HkD, o->seed, 2, 1.0f, o->dtype);
    for (int64_t x = 0; x < total * HkD; ++x) /* outlier channels 7 and 37 of every row */
        if (x % o->D == 7 || x % o->D == 37)
            r->k[x] = attn_round_dtype(r->k[x] * o->outliers, o->dtype);

    const size_t slots = (size_t)r->num_pages * o->P;
    r->pool0 = xcalloc(slots, r->row8), r->pool1 = xcalloc(slots, r->row8);
    memset(r->pool0, 0xFF, slots * r->row8), memset(r->pool1, 0xFF, slots * r->row8);
    if (!o->latent) {
        r->vpool0 = xcalloc(slots, r->row8), r->vpool1 = xcalloc(slots, r->row8);
        memset(r->vpool0, 0xFF, slots * r->row8), memset(r->vpool1, 0xFF, slots * r->row8);
        r->ks0 = xcalloc(slots * o->H_kv, 4), r->ks1 = xcalloc(slots * o->H_kv, 4);
        r->vs0 = xcalloc(slots * o->H_kv, 4), r->vs1 = xcalloc(slots * o->H_kv, 4);
        attn_fill_nan_host(r->ks0, slots * o->H_kv * 4),
            attn_fill_nan_host(r->ks1, slots * o->H_kv * 4);
        attn_fill_nan_host(r->vs0, slots * o->H_kv * 4),
            attn_fill_nan_host(r->vs1, slots * o->H_kv * 4);
    }
    for (int b = 0; b < o->B; ++b)
        for (int t = 0; t < o->lens[b]; ++t) {
            const int64_t tok = r->cu_k[b] + t, slot = slot_of(r, b, t);
            const bool old = t < o->lens[b] - o->Lq; /* prefilled: in the pool before the step */
            if (o->latent) {
                uint8_t *row = r->pool1 + slot * r->row8;
                dec_fp8_pack_latent_ref(r->k + tok * o->D, o->dtype, row);
                dec_fp8_unpack_latent_ref(row, o->dtype, r->kd + tok * o->D);
                if (old)
                    memcpy(r->pool0 + slot * r->row8, row, r->row8);
                continue;
            }
            for (int hk = 0; hk < o->H_kv; ++hk) {
                const int64_t at = (tok * o->H_kv + hk) * o->D, s = slot * o->H_kv + hk;
                uint8_t *kc = r->pool1 + s * o->D, *vc = r->vpool1 + s * o->D;
                r->ks1[s] = dec_fp8_quantize_ref(r->k + at, o->D, kc);
                r->vs1[s] = dec_fp8_quantize_ref(r->v + at, o->D, vc);
                for (int d = 0; d < o->D; ++d) {
                    r->kd[at + d] =
                        attn_round_dtype((float)(ds_fp8_value(kc[d]) * r->ks1[s]), o->dtype);
                    r->vd[at + d] =
                        attn_round_dtype((float)(ds_fp8_value(vc[d]) * r->vs1[s]), o->dtype);
                }
                if (old) {
                    memcpy(r->pool0 + s * o->D, kc, (size_t)o->D);
                    memcpy(r->vpool0 + s * o->D, vc, (size_t)o->D);
                    r->ks0[s] = r->ks1[s], r->vs0[s] = r->vs1[s];
                }
            }
        }
}

/* The scale of the group value c of a K or V row x belongs to (K/V: the head's D values; latent:
 * its 128; the latent RoPE part is not rounded: -1). */
static double group_scale(const run *r, const float *x, int c) {
    if (r->o.latent && c >= DEC_LATENT_DV)
        return -1.0;
    const int g0 = r->o.latent ? c / 128 * 128 : 0, gn = r->o.latent ? 128 : r->o.D;
    float amax = 0.0f;
    for (int y = g0; y < g0 + gn; ++y)
        amax = fabsf(x[y]) > amax ? fabsf(x[y]) : amax;
    return dec_fp8_scale_ref(amax);
}

/* The fp64 bound of the header for row n, every column d < Dv (over the unquantised K, V of its
 * keys), into bound[d]. */
static void fp64_bound(const run *r, int64_t n, double scale, double *bound) {
    const opts *o = &r->o;
    const int g = o->H / o->H_kv, h = (int)(n % o->H), hk = h / g, Dv = r->Dv;
    const int64_t token = n / o->H;
    const int b = (int)(token / o->Lq), i = (int)(token % o->Lq), L = o->lens[b];
    const int seen = L == 0 ? 0 : L - o->Lq + i + 1;
    const double rel = 1.0 / 16 + (o->dtype == ATTN_F16 ? 1.0 / 2048 : 0.0);
    const double abs16 = o->dtype == ATTN_F16 ? ldexp(1.0, -25) : 0.0;
    const float *q = r->q + n * o->D;
    double *vmax = xcalloc((size_t)Dv, sizeof(double)),
           *dvmax = xcalloc((size_t)Dv, sizeof(double));
    double E = 0.0;
    for (int t = 0; t < seen; ++t) {
        const int64_t at = ((r->cu_k[b] + t) * (int64_t)o->H_kv + hk) * o->D;
        const float *kr = r->k + at, *vr = o->latent ? kr : r->v + at;
        double e = 0.0, s = 0.0;
        for (int c = 0; c < o->D; ++c) {
            if (c % 128 == 0 || c == DEC_LATENT_DV)
                s = group_scale(r, kr, c);
            e += s < 0 ? 0.0 : fabs(q[c]) * (rel * fabs(kr[c]) + ldexp(s, -10) + abs16);
        }
        E = scale * e > E ? scale * e : E;
        for (int d = 0; d < Dv; ++d) {
            if (d % 128 == 0)
                s = group_scale(r, vr, d);
            vmax[d] = fmax(vmax[d], fabs(vr[d]));
            dvmax[d] = fmax(dvmax[d], rel * fabs(vr[d]) + ldexp(s, -10) + abs16);
        }
    }
    for (int d = 0; d < Dv; ++d)
        bound[d] = expm1(2.0 * E) * vmax[d] + dvmax[d];
    free(vmax), free(dvmax);
}

static void line(const char *version, const char *check, bool pass, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void line(const char *version, const char *check, bool pass, const char *fmt, ...) {
    va_list ap;
    printf("%-11s %-10s %s  ", version, check, pass ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (x)                                                                                     \
            return 1;                                                                              \
    } while (0)

/* The FP8 attention as a harness kernel, for attn_time_kernel (its args: the dec_args). */
static void launch_paged_fp8(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    dec_launch_paged_fp8((const dec_args *)b->args, s);
}
static void launch_latent_fp8(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    dec_launch_latent_fp8((const dec_args *)b->args, s);
}

int main(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    const int bad = parse(argc, argv, &r.o);
    if (bad)
        return bad;
    const opts *o = &r.o;
    attn_device_info info;
    const int dev = attn_device_init_reported(&info);
    if (dev)
        return dev;
    build(&r);
    const int64_t total = r.cu_k[o->B], rows = (int64_t)o->B * o->Lq * o->H;
    const size_t slots = (size_t)r.num_pages * o->P, HkD = (size_t)o->H_kv * o->D;
    const float scale = o->latent ? 1.0f / sqrtf(192.0f) : 1.0f / sqrtf((float)o->D);
    printf("decode_fp8 (%s): %s cache, B = %d (lengths", attn_backend_name(),
           o->latent ? "FP8 latent (656 B/token)" : "FP8 e4m3 K/V", o->B);
    for (int b = 0; b < o->B; ++b)
        printf("%s%d", b ? "," : " ", o->lens[b]);
    printf(
        "), H = %d over %d, D = %d, %s, pages of %d, %d new token(s), %d split(s), outliers x%g\n",
        o->H, o->H_kv, o->D, attn_dtype_name(o->dtype), o->P, o->Lq, o->splits,
        (double)o->outliers);

    /* the new tokens, packed [B, Lq, H_kv, D], and the queries */
    float *knew = xcalloc((size_t)o->B * o->Lq * HkD, 4),
          *vnew = xcalloc((size_t)o->B * o->Lq * HkD, 4);
    for (int b = 0; b < o->B; ++b)
        for (int i = 0; i < o->Lq && o->lens[b] > 0; ++i) {
            const int64_t tok = r.cu_k[b] + o->lens[b] - o->Lq + i, dst = (int64_t)b * o->Lq + i;
            memcpy(knew + dst * HkD, r.k + tok * HkD, HkD * 4);
            memcpy(vnew + dst * HkD, r.v + tok * HkD, HkD * 4);
        }
    void *staging = xcalloc((size_t)(rows * o->D + o->B * o->Lq * HkD) + 16, 4);
    void *d_q, *d_kn, *d_vn = NULL, *d_o;
    uint8_t *d_k8 = attn_device_alloc(slots * r.row8), *d_v8 = NULL;
    float *d_ks = NULL, *d_vs = NULL, *d_lse = attn_device_alloc((size_t)rows * 4), *d_part = NULL;
    int *d_table = attn_device_alloc((size_t)o->B * r.W * 4), *d_lens = attn_device_alloc(o->B * 4);
    TRY(attn_device_upload(&d_q, r.q, (size_t)rows * o->D, o->dtype, staging));
    TRY(attn_device_upload(&d_kn, knew, (size_t)o->B * o->Lq * HkD, o->dtype, staging));
    if (!o->latent) {
        TRY(attn_device_upload(&d_vn, vnew, (size_t)o->B * o->Lq * HkD, o->dtype, staging));
        d_v8 = attn_device_alloc(slots * r.row8);
        d_ks = attn_device_alloc(slots * o->H_kv * 4),
        d_vs = attn_device_alloc(slots * o->H_kv * 4);
        TRY(d_v8 == NULL || d_ks == NULL || d_vs == NULL);
        TRY(attn_to_device(d_v8, r.vpool0, slots * r.row8));
        TRY(attn_to_device(d_ks, r.ks0, slots * o->H_kv * 4));
        TRY(attn_to_device(d_vs, r.vs0, slots * o->H_kv * 4));
    }
    d_o = attn_device_alloc((size_t)rows * r.Dv * r.dz);
    TRY(d_k8 == NULL || d_lse == NULL || d_table == NULL || d_lens == NULL || d_o == NULL);
    TRY(attn_to_device(d_k8, r.pool0, slots * r.row8));
    TRY(attn_to_device(d_table, r.table, (size_t)o->B * r.W * 4));
    TRY(attn_to_device(d_lens, o->lens, (size_t)o->B * 4));
    dec_args a;
    memset(&a, 0, sizeof a);
    a.B = o->B, a.H = o->H, a.H_kv = o->H_kv, a.Lq = o->Lq, a.D = o->D, a.L_cap = r.L_cap;
    a.latent = o->latent, a.dtype = o->dtype, a.scale = scale, a.seqlens = d_lens;
    a.q = d_q, a.o = d_o, a.lse = d_lse, a.block_table = d_table, a.table_width = r.W;
    a.page_size = o->P, a.num_pages = r.num_pages, a.k_new = d_kn, a.v_new = d_vn;
    a.k8_pages = d_k8, a.v8_pages = d_v8, a.k8_scales = d_ks, a.v8_scales = d_vs;
    a.splits = o->splits;
    if (o->splits > 1) {
        d_part = attn_device_alloc(dec_workspace_bytes(&a, o->splits));
        TRY(d_part == NULL);
        a.part = d_part;
    }
    int failed = 0;
    /* the cache's bytes per token (all its heads): codes and scales */
    const size_t bpt = o->latent ? r.row8 : 2 * (r.row8 + 4 * (size_t)o->H_kv);

    /* 11: the append, then the planted wrong scale if asked */
    dec_launch_append_fp8(&a, 0);
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    const int b0 = o->lens[0] > 0 ? 0 : -1; /* the first new token: sequence 0's */
    if (o->corrupt != 1.0f && b0 == 0) {
        const int64_t slot = slot_of(&r, 0, o->lens[0] - o->Lq);
        float s;
        float *at =
            o->latent ? (float *)(d_k8 + slot * r.row8 + DEC_LATENT_DV) : d_ks + slot * o->H_kv;
        TRY(attn_to_host(&s, at, 4));
        s *= o->corrupt;
        TRY(attn_to_device(at, &s, 4));
    }
    {
        uint8_t *seen = xcalloc(slots, r.row8);
        float *seen_s = xcalloc(slots * o->H_kv, 4);
        int64_t bad_slot = -1;
        const char *what = "";
        TRY(attn_to_host(seen, d_k8, slots * r.row8));
        for (size_t s = 0; s < slots && bad_slot < 0; ++s)
            if (memcmp(seen + s * r.row8, r.pool1 + s * r.row8, r.row8) != 0)
                bad_slot = (int64_t)s, what = o->latent ? "latent row" : "K codes";
        if (!o->latent) {
            TRY(attn_to_host(seen, d_v8, slots * r.row8));
            for (size_t s = 0; s < slots && bad_slot < 0; ++s)
                if (memcmp(seen + s * r.row8, r.vpool1 + s * r.row8, r.row8) != 0)
                    bad_slot = (int64_t)s, what = "V codes";
            TRY(attn_to_host(seen_s, d_ks, slots * o->H_kv * 4));
            for (size_t s = 0; s < slots && bad_slot < 0; ++s)
                if (memcmp(seen_s + s * o->H_kv, r.ks1 + s * o->H_kv, o->H_kv * 4) != 0)
                    bad_slot = (int64_t)s, what = "K scales";
            TRY(attn_to_host(seen_s, d_vs, slots * o->H_kv * 4));
            for (size_t s = 0; s < slots && bad_slot < 0; ++s)
                if (memcmp(seen_s + s * o->H_kv, r.vs1 + s * o->H_kv, o->H_kv * 4) != 0)
                    bad_slot = (int64_t)s, what = "V scales";
        }
        if (bad_slot >= 0)
            line("append_fp8", "append", false,
                 "%s of page %lld slot %lld differ from the CPU quantiser's", what,
                 (long long)(bad_slot / o->P), (long long)(bad_slot % o->P));
        else
            line("append_fp8", "append", true,
                 "%d new tokens: %zu bytes per token, pools equal the "
                 "CPU quantiser's byte for byte",
                 o->B * o->Lq, bpt);
        failed |= bad_slot >= 0;
        free(seen), free(seen_s);
    }

    /* 12 or 13: attention over the FP8 cache */
    TRY(attn_device_fill_nan(d_o, (size_t)rows * r.Dv * r.dz) ||
        attn_device_fill_nan(d_lse, (size_t)rows * 4));
    (o->latent ? dec_launch_latent_fp8 : dec_launch_paged_fp8)(&a, 0);
    ATTN_CUDA_TRY(cudaDeviceSynchronize());
    float *out = xcalloc((size_t)rows * r.Dv, 4), *lse = xcalloc((size_t)rows, 4);
    TRY(attn_to_host(staging, d_o, (size_t)rows * r.Dv * r.dz));
    attn_unpack(out, staging, (size_t)rows * r.Dv, o->dtype);
    TRY(attn_to_host(lse, d_lse, (size_t)rows * 4));
    float *ref = xcalloc((size_t)rows * r.Dv, 4), *ref_lse = xcalloc((size_t)rows, 4);
    float *lowp = xcalloc((size_t)rows * r.Dv, 4), *ref64 = xcalloc((size_t)rows * r.Dv, 4);
    float *lse64 = xcalloc((size_t)rows, 4), *lowp64 = xcalloc((size_t)rows * r.Dv, 4);
    dec_ref_inputs in = {o->B,
                         o->H,
                         o->H_kv,
                         o->Lq,
                         o->D,
                         scale,
                         o->dtype,
                         r.cu_k,
                         r.q,
                         r.kd,
                         o->latent ? NULL : r.vd,
                         NULL,
                         0,
                         r.Dv};
    dec_ref_inputs in64 = in;
    in64.k = r.k, in64.v = o->latent ? NULL : r.v;
    double amp = 0.0;
    for (int64_t x = 0; x < total * (int64_t)HkD; ++x)
        amp = fmax(amp, fmax(fabs(r.kd[x]), o->latent ? 0.0 : fabs(r.vd[x])));
    const int64_t checked = o->check_rows > 0 && o->check_rows < rows ? o->check_rows : rows;
    attn_fill_nan_host(ref + checked * r.Dv, (size_t)(rows - checked) * r.Dv * 4);
    attn_fill_nan_host(lowp + checked * r.Dv, (size_t)(rows - checked) * r.Dv * 4);
    attn_fill_nan_host(ref_lse, (size_t)rows * 4); /* rows not checked stay NaN: skipped */
    for (int64_t n = 0; n < checked; ++n) {
        TRY(dec_reference_row(&in, n, ref + n * r.Dv, ref_lse + n % o->H * (rows / o->H) + n / o->H,
                              lowp + n * r.Dv));
        TRY(dec_reference_row(&in64, n, ref64 + n * r.Dv, lse64, lowp64 + n * r.Dv));
    }
    const char *version = o->latent ? "latent_fp8" : "paged_fp8";
    attn_stats st = {0};
    double cache_bytes = 0.0; /* the codes and scales the attention reads, once per row tile */
    for (int b = 0; b < o->B; ++b)
        cache_bytes += (double)o->lens[b] * (double)bpt *
                       ((o->Lq * (o->H / o->H_kv) + DEC_ROWS - 1) / DEC_ROWS);
    if (o->reps > 0) {
        const attn_kernel k = {.id = o->latent ? 13 : 12,
                               .name = version,
                               .launch = o->latent ? launch_latent_fp8 : launch_paged_fp8};
        const attn_buffers buf = {.args = &a};
        const attn_timing_opts t = {.warmup = 3, .reps = o->reps, .flush_l2 = 1};
        TRY(attn_time_kernel(&k, NULL, &buf, &t, &st));
        printf("%s: median %.4g ms over %d launches; the cache's codes and scales %.4g MB: %.4g "
               "GB/s%s\n",
               version, st.median_ms, st.reps, cache_bytes * 1e-6,
               cache_bytes / (st.median_ms * 1e-3) * 1e-9,
               attn_on_simulator() ? " (simulator: CPU time, not GPU performance)" : "");
    }
    attn_problem p;
    attn_problem_init(&p, o->B, o->H, o->Lq, r.L_cap, r.Dv);
    p.dtype = o->dtype, p.causal = true, p.scale = scale;
    p.cu_seqlens_q = r.cu_q, p.cu_seqlens_k = r.cu_k;
    attn_stage_check chk = {.pass = true};
    attn_stage_check_attention(&p, out, lse, ref, ref_lse, lowp, amp, &chk);
    line(version, "attention", chk.pass,
         "%lld rows vs fp64 over the dequantised cache: max error %.3g "
         "(held to %.3g)%s%s",
         (long long)chk.rows, chk.max_err, chk.bound, chk.pass ? "" : ": ", chk.detail);
    failed |= !chk.pass;

    /* against fp64 over the unquantised cache: the format's bound plus the kernel's allowance */
    double worst = 0.0, err_max = 0.0, bound_at = 0.0;
    double err16 = 0.0; /* the same-precision computation over the unquantised (16-bit) cache */
    int64_t bad_row = -1;
    double *bounds = xcalloc((size_t)r.Dv, sizeof(double));
    for (int64_t n = 0; n < checked; ++n) {
        const int b = (int)(n / o->H / o->Lq);
        if (o->lens[b] == 0)
            continue;
        double arith = 0.0, omax = 0.0; /* the attention check's allowance, FlashAttention's form */
        for (int d = 0; d < r.Dv; ++d) {
            arith = fmax(arith, 2.0 * fabs((double)lowp[n * r.Dv + d] - ref[n * r.Dv + d]));
            omax = fmax(omax, fabs(ref[n * r.Dv + d]));
        }
        arith += omax * (o->dtype == ATTN_BF16  ? ldexp(1.0, -7)
                         : o->dtype == ATTN_F16 ? ldexp(1.0, -10)
                                                : ldexp(1.0, -20));
        fp64_bound(&r, n, scale, bounds);
        for (int d = 0; d < r.Dv; ++d) {
            const double err = fabs((double)out[n * r.Dv + d] - ref64[n * r.Dv + d]);
            const double bound = bounds[d] + arith;
            if (!(err <= bound) && bad_row < 0)
                bad_row = n;
            if (err / bound > worst)
                worst = err / bound, bound_at = bound;
            err_max = fmax(err_max, err);
            err16 = fmax(err16, fabs((double)lowp64[n * r.Dv + d] - ref64[n * r.Dv + d]));
        }
    }
    line(version, "fp64", bad_row < 0,
         "vs fp64 over the unquantised cache: max error %.3g; "
         "largest error / bound %.3g (bound there %.3g)%s",
         err_max, worst, bound_at, bad_row < 0 ? "" : ": over its bound");
    failed |= bad_row >= 0;
    double kerr = 0.0, kmax = 0.0;
    for (int64_t x = 0; x < total * (int64_t)HkD; ++x)
        if (!o->latent || x % o->D < DEC_LATENT_DV)
            kerr = fmax(kerr, fabs((double)r.kd[x] - r.k[x])), kmax = fmax(kmax, fabs(r.k[x]));
    printf("K quantisation: max |k8 - k| %.3g over max |k| %.3g; the %s cache unquantised, "
           "computed in its precision: max error %.3g vs fp64\n",
           kerr, kmax, attn_dtype_name(o->dtype), err16);
    if (o->json != NULL) {
        FILE *f = fopen(o->json, "a");
        if (f == NULL) {
            fprintf(stderr, "error: cannot open %s\n", o->json);
            return 1;
        }
        fprintf(
            f,
            "{\"version\": \"%s\", \"dtype\": \"%s\", \"outliers\": %g, \"H\": %d, \"H_kv\": %d, "
            "\"D\": %d, \"err_fp64\": %.6g, \"err_over_bound\": %.6g, \"err_dequant\": %.6g, "
            "\"k_err\": %.6g, \"k_max\": %.6g, \"err_unquantised\": %.6g, \"L\": %d, "
            "\"bytes_per_token\": %zu, \"B\": %d, \"Lq\": %d, \"splits\": %d, \"median_ms\": %.6g, "
            "\"cache_bytes\": %.0f, \"backend\": \"%s\", \"pass\": %s}\n",
            version, attn_dtype_name(o->dtype), (double)o->outliers, o->H, o->H_kv, o->D, err_max,
            worst, chk.max_err, kerr, kmax, err16, o->lens[0], bpt, o->B, o->Lq, o->splits,
            st.median_ms, cache_bytes, attn_backend_name(), failed ? "false" : "true");
        fclose(f);
    }
    free(bounds), free(out), free(lse), free(ref), free(ref_lse), free(lowp), free(ref64);
    free(lse64), free(lowp64), free(knew), free(vnew), free(staging);
    free(r.table), free(r.q), free(r.k), free(r.v), free(r.kd), free(r.vd), free(r.pool0);
    free(r.pool1), free(r.vpool0), free(r.vpool1), free(r.ks0), free(r.ks1), free(r.vs0);
    free(r.vs1);
    void *bufs[] = {d_q, d_kn, d_vn, d_o, d_k8, d_v8, d_ks, d_vs, d_lse, d_part, d_table, d_lens};
    for (size_t x = 0; x < sizeof bufs / sizeof bufs[0]; ++x)
        if (bufs[x] != NULL)
            attn_device_free(bufs[x]);
    return failed ? 1 : 0;
}
