// test_fp16.cu — __half/__nv_bfloat16 conversions and arithmetic against attn/half.h (the one
// implementation of the bit logic): every fp16 pattern, a sweep of fp32 patterns, and each
// intrinsic as "compute in fp32, round once". The arithmetic runs in a kernel, as students use it.
#include <cmath>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attn/half.h"
#include "sim_test.h"

static bool same_float(float a, float b) {
    return attn_f32_bits(a) == attn_f32_bits(b) || (std::isnan(a) && std::isnan(b));
}

static void check_conversions() {
    int bad = 0;
    for (uint32_t b = 0; b < 65536; ++b) {
        uint16_t u = static_cast<uint16_t>(b);
        bad += !same_float(__half2float(__ushort_as_half(u)), attn_f16_to_f32(u));
        bad += !same_float(__bfloat162float(__ushort_as_bfloat16(u)), attn_bf16_to_f32(u));
    }
    for (uint64_t x = 0; x < (1ull << 32); x += 65537) {
        float f = attn_bits_f32(static_cast<uint32_t>(x));
        bad += __half_as_ushort(__float2half(f)) != attn_f32_to_f16(f);
        bad += __half_as_ushort(__float2half_rn(f)) != attn_f32_to_f16(f);
        bad += __bfloat16_as_ushort(__float2bfloat16(f)) != attn_f32_to_bf16(f);
        bad += __bfloat16_as_ushort(__float2bfloat16_rn(f)) != attn_f32_to_bf16(f);
    }
    CHECK(bad == 0);
    CHECK(__half_as_ushort(__float2half(1.0f)) == 0x3c00);
    CHECK(__half_as_ushort(__float2half(65520.0f)) == 0x7c00); // rounds to infinity
    CHECK(__bfloat16_as_ushort(__float2bfloat16(1.0f)) == 0x3f80);
    __half2 h2 = __floats2half2_rn(1.5f, -2.25f);
    CHECK(__low2float(h2) == 1.5f && __high2float(h2) == -2.25f);
    float2 f2 = __half22float2(__float22half2_rn(make_float2(0.1f, 3.0f)));
    CHECK(f2.x == attn_round_f16(0.1f) && f2.y == 3.0f);
    CHECK(__low2float(__halves2half2(__float2half(4.0f), __float2half(5.0f))) == 4.0f);
    __nv_bfloat162 b2 = __floats2bfloat162_rn(0.1f, -7.0f);
    CHECK(__low2float(b2) == attn_round_bf16(0.1f) && __high2float(b2) == -7.0f);
    float2 g2 = __bfloat1622float2(__float22bfloat162_rn(make_float2(2.5f, 1e30f)));
    CHECK(g2.x == 2.5f && g2.y == attn_round_bf16(1e30f));
    CHECK(__high2float(__halves2bfloat162(__float2bfloat16(1.0f), __float2bfloat16(9.0f))) == 9.0f);
}

constexpr int n = 64;
constexpr int ops = 16;

// Each thread applies every operation to its pair of inputs; results as fp32.
__global__ void half_ops(const float *a, const float *b, float *out, float *bout) {
    int i = threadIdx.x;
    __half x = __float2half(a[i]), y = __float2half(b[i]), z = __float2half(0.75f);
    float *o = out + i * ops;
    o[0] = __half2float(__hadd(x, y));
    o[1] = __half2float(__hsub(x, y));
    o[2] = __half2float(__hmul(x, y));
    o[3] = __half2float(__hdiv(x, y));
    o[4] = __half2float(__hfma(x, y, z));
    o[5] = __half2float(x * y + z);
    o[6] = __half2float(__hneg(x)) + __half2float(__habs(y));
    o[7] = __half2float(__hmax(x, y)) - __half2float(__hmin(x, y));
    o[8] = (__hlt(x, y) ? 1.0f : 0.0f) + (__hgt(x, y) ? 2.0f : 0.0f) + (__heq(x, x) ? 4.0f : 0.0f);
    o[9] = __half2float(hexp(x));
    o[10] = __half2float(hexp2(y));
    o[11] = __half2float(hlog(__habs(x)));
    o[12] = __half2float(hsqrt(__habs(y)));
    o[13] = __half2float(hrsqrt(__habs(y)));
    o[14] = __half2float(hrcp(x));
    __half2 p = __hfma2(__halves2half2(x, y), __half2half2(z), __floats2half2_rn(1.0f, 2.0f));
    p = h2exp(__hmul2(p, __float2half2_rn(0.125f))) + __hadd2(p, p);
    o[15] = __low2float(p) + __high2float(p);
    __nv_bfloat16 bx = __float2bfloat16(a[i]), by = __float2bfloat16(b[i]);
    float *q = bout + i * 4;
    q[0] = __bfloat162float(__hadd(bx, by));
    q[1] = __bfloat162float(__hfma(bx, by, __float2bfloat16(0.75f)));
    q[2] = __bfloat162float(hexp(bx * by));
    __nv_bfloat162 bp = __hmul2(__halves2bfloat162(bx, by), __floats2bfloat162_rn(2.0f, 0.5f));
    q[3] = __low2float(bp) + __high2float(bp);
}

static float r16(float f) { return attn_round_f16(f); }
static float rb(float f) { return attn_round_bf16(f); }

static void check_arithmetic() {
    float ha[n], hb[n];
    for (int i = 0; i < n; ++i) {
        ha[i] = r16(std::sin(0.37f * i) * 3.0f + 0.01f);
        hb[i] = r16(std::cos(0.91f * i) * 2.0f - 0.5f);
    }
    float *a = nullptr, *b = nullptr, *out = nullptr, *bout = nullptr;
    CHECK_CUDA(cudaMalloc(&a, sizeof ha));
    CHECK_CUDA(cudaMalloc(&b, sizeof hb));
    CHECK_CUDA(cudaMalloc(&out, n * ops * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&bout, n * 4 * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    half_ops<<<1, n>>>(a, b, out, bout);
    CHECK_CUDA(cudaGetLastError());
    float h[n * ops], hbo[n * 4];
    CHECK_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hbo, bout, sizeof hbo, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        float x = ha[i], y = hb[i], z = 0.75f;
        float want[ops] = {
            r16(x + y),
            r16(x - y),
            r16(x * y),
            r16(x / y),
            r16(std::fma(x, y, z)),
            r16(r16(x * y) + z),
            -x + std::fabs(y),
            std::fmax(x, y) - std::fmin(x, y),
            (x < y ? 1.0f : 0.0f) + (x > y ? 2.0f : 0.0f) + 4.0f,
            r16(std::exp(x)),
            r16(std::exp2(y)),
            r16(std::log(std::fabs(x))),
            r16(std::sqrt(std::fabs(y))),
            r16(1.0f / std::sqrt(std::fabs(y))),
            r16(1.0f / x),
            0.0f,
        };
        float p0 = r16(std::fma(x, z, 1.0f)), p1 = r16(std::fma(y, z, 2.0f));
        want[15] = r16(r16(std::exp(r16(p0 * 0.125f))) + r16(p0 + p0)) +
                   r16(r16(std::exp(r16(p1 * 0.125f))) + r16(p1 + p1));
        for (int k = 0; k < ops; ++k)
            if (!same_float(h[i * ops + k], want[k])) {
                if (bad++ < 10)
                    std::fprintf(stderr, "fp16 op %d input %d: got %.9g want %.9g\n", k, i,
                                 h[i * ops + k], want[k]);
            }
        float bx = rb(ha[i]), by = rb(hb[i]);
        float bwant[4] = {rb(bx + by), rb(std::fma(bx, by, 0.75f)), rb(std::exp(rb(bx * by))),
                          rb(bx * 2.0f) + rb(by * 0.5f)};
        for (int k = 0; k < 4; ++k)
            if (!same_float(hbo[i * 4 + k], bwant[k])) {
                if (bad++ < 10)
                    std::fprintf(stderr, "bf16 op %d input %d: got %.9g want %.9g\n", k, i,
                                 hbo[i * 4 + k], bwant[k]);
            }
    }
    CHECK(bad == 0);
    for (float *p : {a, b, out, bout})
        CHECK_CUDA(cudaFree(p));
}

int main() {
    check_conversions();
    check_arithmetic();
    return sim_test_result("fp16");
}
