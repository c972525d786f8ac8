/* test_tensor.c — the counter RNG (values fixed by an independent Python computation of the
 * formula in tensor.c), fills, dtype packing, NaN fills, inputs and the tensor file format; and
 * the device helpers of attn/device.h that modules share (varlen offsets, release). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/half.h"
#include "attn/tensor.h"
#include "unit_test.h"

/* Computed with Python integers from the formula documented in tensor.c. */
static void test_rng_known_values(void) {
    static const struct {
        uint64_t seed, stream, n;
        float value;
    } known[] = {
        {1234u, 0u, 0u, -0x1.9f5548p-1f},
        {1234u, 0u, 1u, 0x1.e4728p-2f},
        {1234u, 1u, 0u, 0x1.9faf48p-1f},
        {1234u, 2u, 7u, 0x1.646fbp-2f},
        {0u, 0u, 0u, -1.0f},
        {UINT64_MAX, 5u, 123456789u, -0x1.dd649p-2f},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; ++k)
        CHECK(attn_uniform(known[k].seed, known[k].stream, known[k].n) == known[k].value);
}

/* The documented formula written out again here, converting through double as the Python
 * reference does: both must give the same bits for every element. */
static void test_rng_formula(void) {
    int bad = 0;
    for (uint64_t n = 0; n < 1000; ++n) {
        uint64_t state = (42u ^ (3u * 0x9E3779B97F4A7C15ull)) + n * 0xBF58476D1CE4E5B9ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float want = (float)((double)(z >> 40) / 16777216.0 * 2.0 - 1.0);
        bad += attn_uniform(42u, 3u, n) != want;
    }
    CHECK_EQ(bad, 0);
}

static void test_rng_range_and_spread(void) {
    const int n = 1 << 20;
    double sum = 0.0, lo = 1.0, hi = -1.0;
    int out_of_range = 0, off_grid = 0;
    for (int k = 0; k < n; ++k) {
        float u = attn_uniform(7u, 1u, (uint64_t)k);
        out_of_range += !(u >= -1.0f && u < 1.0f);
        off_grid += (u + 1.0f) * 0x1p23f != floorf((u + 1.0f) * 0x1p23f); /* k * 2^-23 - 1 */
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK_EQ(out_of_range, 0);
    CHECK_EQ(off_grid, 0);
    CHECK_NEAR(sum / n, 0.0, 3e-3); /* sd of the mean: 0.577/sqrt(2^20) = 5.6e-4 */
    CHECK(lo < -0.9999 && hi > 0.9999);
    CHECK(attn_uniform(7u, 1u, 5u) == attn_uniform(7u, 1u, 5u));
    CHECK(attn_uniform(7u, 1u, 5u) != attn_uniform(7u, 2u, 5u));
    CHECK(attn_uniform(7u, 1u, 5u) != attn_uniform(8u, 1u, 5u));
}

static void test_fill(void) {
    float a[1000], b[1000];
    attn_fill_uniform(a, 1000, 9u, 0u, 10.0f, ATTN_F16);
    int bad = 0;
    for (int n = 0; n < 1000; ++n) {
        bad += attn_round_f16(a[n]) != a[n]; /* representable */
        bad += a[n] != attn_round_f16(10.0f * attn_uniform(9u, 0u, (uint64_t)n));
        bad += !(fabsf(a[n]) <= 10.0f);
    }
    CHECK_EQ(bad, 0);
    attn_fill_uniform(b, 1000, 9u, 0u, 10.0f, ATTN_F32);
    CHECK(b[17] == 10.0f * attn_uniform(9u, 0u, 17u));
    attn_fill_uniform(b, 1000, 9u, 0u, 10.0f, ATTN_BF16);
    CHECK(b[17] == attn_round_bf16(10.0f * attn_uniform(9u, 0u, 17u)));
    CHECK(attn_round_dtype(0.1f, ATTN_F32) == 0.1f);
    CHECK(attn_round_dtype(0.1f, ATTN_F16) == attn_round_f16(0.1f));
    CHECK(attn_round_dtype(0.1f, ATTN_BF16) == attn_round_bf16(0.1f));
}

static void test_pack_unpack(void) {
    float src[5] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f}, back[5];
    uint16_t bits[5];
    float f32[5];
    attn_pack(f32, src, 5, ATTN_F32);
    attn_unpack(back, f32, 5, ATTN_F32);
    CHECK(memcmp(back, src, sizeof src) == 0);
    attn_pack(bits, src, 5, ATTN_F16);
    CHECK_EQ(bits[0], 0x3c00);
    CHECK_EQ(bits[1], 0xc100);
    attn_unpack(back, bits, 5, ATTN_F16);
    CHECK(back[2] == attn_round_f16(0.1f) && back[3] == 65504.0f && back[4] == 0.0f);
    attn_pack(bits, src, 5, ATTN_BF16);
    CHECK_EQ(bits[0], 0x3f80);
    attn_unpack(back, bits, 5, ATTN_BF16);
    CHECK(back[1] == -2.5f && back[2] == attn_round_bf16(0.1f));
}

static void test_nan_fill(void) {
    float f[4];
    uint16_t h[4];
    attn_fill_nan_host(f, sizeof f);
    attn_fill_nan_host(h, sizeof h);
    CHECK(isnan(f[0]) && isnan(f[3]));
    CHECK(isnan(attn_f16_to_f32(h[2])) && isnan(attn_bf16_to_f32(h[2])));
}

static void test_inputs(void) {
    attn_problem p;
    attn_problem_init(&p, 2, 3, 5, 7, 4);
    p.dtype = ATTN_BF16;
    attn_host_inputs in;
    CHECK_EQ(attn_host_inputs_make(&in, &p, 77u, 2.0f), 0);
    CHECK_EQ(in.q_elems, 2 * 3 * 5 * 4);
    CHECK_EQ(in.k_elems, 2 * 3 * 7 * 4);
    CHECK(in.q[11] == attn_round_bf16(2.0f * attn_uniform(77u, 0u, 11u)));
    CHECK(in.k[11] == attn_round_bf16(2.0f * attn_uniform(77u, 1u, 11u)));
    CHECK(in.v[11] == attn_round_bf16(2.0f * attn_uniform(77u, 2u, 11u)));
    attn_host_inputs_free(&in);
    CHECK(in.q == NULL);
    p.D = 0;
    CHECK(attn_host_inputs_make(&in, &p, 77u, 2.0f) != 0);
    /* --inputs opposed: the same magnitudes, Q and V >= 0, K <= 0 (every score q . k <= 0) */
    float q[3] = {-0.5f, 0.25f, 0.0f}, k[2] = {0.75f, -1.0f}, v[2] = {-2.0f, 3.0f};
    attn_inputs_apply(ATTN_INPUTS_UNIFORM, q, 3, k, 2, v, 2);
    CHECK(q[0] == -0.5f && k[0] == 0.75f && v[0] == -2.0f);
    attn_inputs_apply(ATTN_INPUTS_OPPOSED, q, 3, k, 2, v, 2);
    CHECK(q[0] == 0.5f && q[1] == 0.25f && q[2] == 0.0f);
    CHECK(k[0] == -0.75f && k[1] == -1.0f && v[0] == 2.0f && v[1] == 3.0f);
}

static void test_save(void) {
    char path[] = "attn_unit_tensor.bin";
    float data[6] = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -0.25f};
    int64_t dims[2] = {2, 3};
    CHECK_EQ(attn_tensor_save(path, data, 2, dims), 0);
    FILE *f = fopen(path, "rb");
    char header[64] = "";
    unsigned char bytes[24] = {0};
    CHECK(f != NULL && fgets(header, sizeof header, f) != NULL);
    CHECK(strcmp(header, "attn-tensor v1 f32 2 3\n") == 0);
    CHECK(f != NULL && fread(bytes, 1, sizeof bytes, f) == sizeof bytes);
    CHECK(f != NULL && fgetc(f) == EOF);
    /* 1.0f = 0x3f800000, little-endian: 00 00 80 3f; -2.0f = 0xc0000000 */
    CHECK(bytes[0] == 0x00 && bytes[1] == 0x00 && bytes[2] == 0x80 && bytes[3] == 0x3f);
    CHECK(bytes[4] == 0x00 && bytes[7] == 0xc0);
    if (f != NULL)
        fclose(f);
    remove(path);
    CHECK(attn_tensor_save("/nonexistent-dir/x.bin", data, 2, dims) != 0);
}

/* attn_tensor_load reads back what attn_tensor_save wrote, and refuses a missing file, a file
 * of another format, more dims than asked for and a truncated file, with a reason. */
static void test_load(void) {
    char path[] = "attn_unit_tensor_load.bin";
    float data[6] = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -0.25f}, *back = NULL;
    int64_t dims[3] = {1, 2, 3}, got[3] = {0};
    int ndim = 0;
    char why[256] = "";
    CHECK_EQ(attn_tensor_save(path, data, 3, dims), 0);
    CHECK_EQ(attn_tensor_load(path, &back, &ndim, got, 3, why, sizeof why), 0);
    CHECK_EQ(ndim, 3);
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3);
    CHECK(back != NULL && memcmp(back, data, sizeof data) == 0);
    free(back);
    CHECK_EQ(attn_tensor_load(path, &back, &ndim, got, 2, why, sizeof why), -1);
    CHECK_CONTAINS(why, "at most 2 dims");
    CHECK(back == NULL);
    FILE *f = fopen(path, "wb"); /* the header promises 6 values, 2 follow */
    if (f != NULL) {
        fputs("attn-tensor v1 f32 2 3\n", f);
        fwrite(data, sizeof(float), 2, f);
        fclose(f);
    }
    CHECK_EQ(attn_tensor_load(path, &back, &ndim, got, 3, why, sizeof why), -1);
    CHECK_CONTAINS(why, "fewer values");
    f = fopen(path, "wb");
    if (f != NULL) {
        fputs("P6 2 3\n", f);
        fclose(f);
    }
    CHECK_EQ(attn_tensor_load(path, &back, &ndim, got, 3, why, sizeof why), -1);
    CHECK_CONTAINS(why, "not an attn-tensor");
    remove(path);
    CHECK_EQ(attn_tensor_load("/nonexistent-dir/x.bin", &back, &ndim, got, 3, why, sizeof why), -1);
    CHECK_CONTAINS(why, "cannot open");
}

/* attn_dump_tensors writes each present tensor as dir/name.bin (ints as fp32 values), skips an
 * entry with neither data nor ints, and refuses a folder it cannot write into. */
static void test_dump_tensors(void) {
    const float data[3] = {0.5f, -1.0f, 2.0f};
    const int32_t ints[4] = {-1, 0, 7, 1 << 20};
    const attn_dump_tensor t[] = {
        {"attn_unit_dump_f", data, NULL, 1, {3}},
        {"attn_unit_dump_absent", NULL, NULL, 1, {3}},
        {"attn_unit_dump_i", NULL, ints, 2, {2, 2}},
    };
    CHECK_EQ(attn_dump_tensors(".", t, 3), 0);
    float *back = NULL;
    int64_t got[2] = {0};
    int ndim = 0;
    char why[256] = "";
    CHECK_EQ(attn_tensor_load("./attn_unit_dump_f.bin", &back, &ndim, got, 2, why, sizeof why), 0);
    CHECK(ndim == 1 && got[0] == 3 && back != NULL && memcmp(back, data, sizeof data) == 0);
    free(back);
    back = NULL;
    CHECK_EQ(attn_tensor_load("./attn_unit_dump_i.bin", &back, &ndim, got, 2, why, sizeof why), 0);
    CHECK(ndim == 2 && got[0] == 2 && got[1] == 2 && back != NULL);
    CHECK(back != NULL && back[0] == -1.0f && back[2] == 7.0f && back[3] == 1048576.0f);
    free(back);
    FILE *f = fopen("./attn_unit_dump_absent.bin", "rb");
    CHECK(f == NULL);
    if (f != NULL)
        fclose(f);
    remove("./attn_unit_dump_f.bin");
    remove("./attn_unit_dump_i.bin");
    CHECK(attn_dump_tensors("/nonexistent-dir", t, 3) != 0);
}

/* A varlen problem's offsets reach the device unchanged (a wrong copy, or q and k swapped, fails
 * the comparison); a dense problem gets no buffers; attn_free_buffers releases both kinds. */
static void test_device_seqlens(void) {
    attn_device_info info;
    char why[256];
    if (attn_device_init(&info, why, sizeof why) != 0)
        return; /* gpu build without a GPU */
    attn_problem p;
    attn_problem_init(&p, 1, 1, 8, 8, 8);
    int *cu_q = &p.B, *cu_k = &p.B; /* not NULL: the call must set them */
    CHECK(attn_device_upload_seqlens(&p, &cu_q, &cu_k) == 0);
    CHECK(cu_q == NULL && cu_k == NULL);

    const int offs_q[] = {0, 3, 8, 9}, offs_k[] = {0, 5, 6, 12};
    attn_problem_init(&p, 3, 1, 5, 6, 8);
    p.cu_seqlens_q = offs_q, p.cu_seqlens_k = offs_k;
    CHECK(attn_device_upload_seqlens(&p, &cu_q, &cu_k) == 0);
    int back_q[4] = {0}, back_k[4] = {0};
    CHECK(cu_q != NULL && attn_to_host(back_q, cu_q, sizeof back_q) == 0);
    CHECK(cu_k != NULL && attn_to_host(back_k, cu_k, sizeof back_k) == 0);
    CHECK(memcmp(back_q, offs_q, sizeof back_q) == 0);
    CHECK(memcmp(back_k, offs_k, sizeof back_k) == 0);

    void *host[] = {malloc(16), NULL}, *dev[] = {cu_q, cu_k, NULL};
    attn_free_buffers(host, ATTN_COUNT(host), dev, ATTN_COUNT(dev));
}

/* attn_allocs' host buffers: zeroed, kept, freed together; past ATTN_ALLOCS_MAX, NULL and failed.
 */
static void test_allocs(void) {
    attn_allocs a = {0};
    int *x = attn_allocs_host(&a, 10, sizeof(int));
    CHECK(x != NULL && x[0] == 0 && x[9] == 0 && a.n_host == 1 && !a.failed);
    CHECK(attn_allocs_host(&a, 0, 4) != NULL); /* an empty one is not a failure */
    for (int n = 2; n < ATTN_ALLOCS_MAX; ++n)
        attn_allocs_host(&a, 1, 1);
    CHECK(!a.failed && a.n_host == ATTN_ALLOCS_MAX);
    CHECK(attn_allocs_host(&a, 1, 1) == NULL && a.failed);
    attn_allocs_free(&a);
    CHECK(a.n_host == 0 && a.n_dev == 0);
}

int main(void) {
    test_allocs();
    test_rng_known_values();
    test_rng_formula();
    test_rng_range_and_spread();
    test_fill();
    test_pack_unpack();
    test_nan_fill();
    test_inputs();
    test_save();
    test_load();
    test_dump_tensors();
    test_device_seqlens();
    return unit_finish();
}
