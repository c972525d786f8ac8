/* tensor.c — seeded inputs, dtype packing, NaN fills and the raw tensor file format. */
#include "attn/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/half.h"

/* ---- the random generator ------------------------------------------------------------------
 * A counter-based generator: element n of a stream is a pure function of (seed, stream, n), so
 * any element can be produced alone, in any order, by C or by Python, with identical bits.
 * All arithmetic is on uint64 (mod 2^64):
 *
 *   x = (seed ^ (stream * 0x9E3779B97F4A7C15)) + n * 0xBF58476D1CE4E5B9
 *   z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9        SplitMix64's output function
 *   z = (z ^ (z >> 27)) * 0x94D049BB133111EB        (the finaliser of Vigna's splitmix64)
 *   z =  z ^ (z >> 31)
 *   u = (float)(z >> 40) * 2^-23 - 1                the top 24 bits: k * 2^-23 - 1 in [-1, 1),
 *                                                   exact in fp32 (a 24-bit integer times 2^-23)
 * The same in Python:
 *   M = (1 << 64) - 1
 *   x = ((seed ^ ((stream * 0x9E3779B97F4A7C15) & M)) + n * 0xBF58476D1CE4E5B9) & M
 *   z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
 *   z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
 *   z ^= z >> 31
 *   u = numpy.float32((z >> 40) * 2.0**-23 - 1.0)
 * and an input element is numpy.float32(amplitude) * u (an fp32 product), then rounded to the
 * problem's dtype (round to nearest even). */
static uint64_t splitmix64_mix(uint64_t x) {
    uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float attn_uniform(uint64_t seed, uint64_t stream, uint64_t n) {
    uint64_t x = (seed ^ (stream * 0x9E3779B97F4A7C15ull)) + n * 0xBF58476D1CE4E5B9ull;
    uint64_t z = splitmix64_mix(x);
    return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

float attn_round_dtype(float f, attn_dtype t) {
    switch (t) {
    case ATTN_F16:
        return attn_round_f16(f);
    case ATTN_BF16:
        return attn_round_bf16(f);
    case ATTN_F32:
        break;
    }
    return f;
}

void attn_fill_uniform(float *dst, size_t count, uint64_t seed, uint64_t stream, float amplitude,
                       attn_dtype t) {
    for (size_t n = 0; n < count; ++n)
        dst[n] = attn_round_dtype(amplitude * attn_uniform(seed, stream, n), t);
}

/* ---- dtype conversion ------------------------------------------------------------------------ */

void attn_pack(void *dst, const float *src, size_t count, attn_dtype t) {
    if (t == ATTN_F32) {
        memcpy(dst, src, count * sizeof(float));
        return;
    }
    uint16_t *bits = (uint16_t *)dst;
    for (size_t n = 0; n < count; ++n)
        bits[n] = t == ATTN_F16 ? attn_f32_to_f16(src[n]) : attn_f32_to_bf16(src[n]);
}

void attn_unpack(float *dst, const void *src, size_t count, attn_dtype t) {
    if (t == ATTN_F32) {
        memcpy(dst, src, count * sizeof(float));
        return;
    }
    const uint16_t *bits = (const uint16_t *)src;
    for (size_t n = 0; n < count; ++n)
        dst[n] = t == ATTN_F16 ? attn_f16_to_f32(bits[n]) : attn_bf16_to_f32(bits[n]);
}

void *attn_host_alloc(size_t bytes, const char *what) {
    void *x = malloc(bytes ? bytes : 1);
    if (x == NULL)
        fprintf(stderr, "error: out of host memory for %s (%zu bytes)\n", what, bytes);
    return x;
}

int attn_host_grow(void **buf, size_t *cap, size_t bytes) {
    if (bytes <= *cap)
        return 0;
    free(*buf);
    *buf = malloc(bytes);
    *cap = *buf ? bytes : 0;
    return *buf == NULL;
}

void attn_fill_nan_host(void *dst, size_t bytes) { memset(dst, 0xFF, bytes); }

/* ---- inputs ---------------------------------------------------------------------------------- */

int attn_host_inputs_make(attn_host_inputs *in, const attn_problem *p, uint64_t seed,
                          float amplitude) {
    memset(in, 0, sizeof *in);
    if (attn_problem_validate(p, NULL, 0) != 0)
        return -1;
    in->q_elems = attn_problem_q_elems(p);
    in->k_elems = attn_problem_k_elems(p);
    in->q = (float *)malloc(in->q_elems * sizeof(float));
    in->k = (float *)malloc(in->k_elems * sizeof(float));
    in->v = (float *)malloc(in->k_elems * sizeof(float));
    if (in->q == NULL || in->k == NULL || in->v == NULL) {
        attn_host_inputs_free(in);
        return -1;
    }
    attn_fill_uniform(in->q, in->q_elems, seed, 0, amplitude, p->dtype);
    attn_fill_uniform(in->k, in->k_elems, seed, 1, amplitude, p->dtype);
    attn_fill_uniform(in->v, in->k_elems, seed, 2, amplitude, p->dtype);
    return 0;
}

void attn_inputs_apply(attn_inputs kind, float *q, size_t nq, float *k, size_t nk, float *v,
                       size_t nv) {
    if (kind != ATTN_INPUTS_OPPOSED)
        return;
    for (size_t n = 0; n < nq; ++n)
        q[n] = fabsf(q[n]);
    for (size_t n = 0; n < nk; ++n)
        k[n] = -fabsf(k[n]);
    for (size_t n = 0; n < nv; ++n)
        v[n] = fabsf(v[n]);
}

void attn_host_inputs_free(attn_host_inputs *in) {
    free(in->q);
    free(in->k);
    free(in->v);
    memset(in, 0, sizeof *in);
}

/* ---- files ----------------------------------------------------------------------------------- */

int attn_tensor_save(const char *path, const float *data, int ndim, const int64_t *dims) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t count = 1;
    fputs("attn-tensor v1 f32", f);
    for (int n = 0; n < ndim; ++n) {
        fprintf(f, " %lld", (long long)dims[n]);
        count *= (size_t)dims[n];
    }
    fputc('\n', f);
    /* Byte by byte, least significant first, so the file is little-endian on any host. */
    for (size_t n = 0; n < count; ++n) {
        uint32_t u = attn_f32_bits(data[n]);
        unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                               (unsigned char)(u >> 24)};
        fwrite(le, 1, sizeof le, f);
    }
    int failed = ferror(f);
    return (fclose(f) != 0 || failed) ? -1 : 0;
}

int attn_dump_tensors(const char *dir, const attn_dump_tensor *t, int n) {
    char path[1024] = "";
    int rc = 0;
    for (int e = 0; rc == 0 && e < n; ++e) {
        if (t[e].data == NULL && t[e].ints == NULL)
            continue;
        size_t count = 1;
        for (int d = 0; d < t[e].ndim; ++d)
            count *= (size_t)t[e].dims[d];
        float *ints = NULL;
        if (t[e].data == NULL && (ints = malloc((count > 0 ? count : 1) * sizeof(float))) != NULL)
            for (size_t x = 0; x < count; ++x)
                ints[x] = (float)t[e].ints[x];
        snprintf(path, sizeof path, "%s/%s.bin", dir, t[e].name);
        const float *data = t[e].data != NULL ? t[e].data : ints;
        rc = data == NULL || attn_tensor_save(path, data, t[e].ndim, t[e].dims) != 0;
        free(ints);
    }
    if (rc)
        fprintf(stderr, "error: --dump: cannot write %s\n", path[0] ? path : dir);
    return rc;
}

int attn_tensor_load(const char *path, float **data, int *ndim, int64_t *dims, int max_dims,
                     char *why, size_t why_len) {
    *data = NULL;
    *ndim = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, why_len, "cannot open %s", path);
        return -1;
    }
    char header[256];
    size_t count = 1;
    int n = 0, ok = fgets(header, sizeof header, f) != NULL &&
                    strncmp(header, "attn-tensor v1 f32", 18) == 0 &&
                    header[strlen(header) - 1] == '\n';
    for (const char *s = header + 18; ok && *s != '\n';) {
        char *end;
        long long d = strtoll(s, &end, 10);
        ok = end != s && d >= 0 && n < max_dims && (*end == ' ' || *end == '\n');
        if (ok) {
            dims[n++] = d;
            count *= (size_t)d;
            s = end;
        }
    }
    if (!ok) {
        fclose(f);
        snprintf(why, why_len, "%s: not an attn-tensor v1 f32 file of at most %d dims", path,
                 max_dims);
        return -1;
    }
    float *values = (float *)malloc(count ? count * sizeof(float) : 1);
    size_t got = 0;
    unsigned char le[4];
    while (values != NULL && got < count && fread(le, 1, sizeof le, f) == sizeof le) {
        uint32_t u =
            (uint32_t)le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
        memcpy(&values[got++], &u, sizeof u);
    }
    fclose(f);
    if (values == NULL || got < count) {
        free(values);
        snprintf(why, why_len,
                 values == NULL ? "%s: out of host memory"
                                : "%s holds fewer values than its header's dims",
                 path);
        return -1;
    }
    *data = values;
    *ndim = n;
    return 0;
}
