// test_fp8.cu — cuda_fp8.h's conversions, bit for bit, against a committed table (fp8_table.txt):
// all 256 codes of e4m3 and e5m2 decoded to half and float; encodings from double and float of
// every fp8 value, every midpoint between neighbours and the numbers one ulp either side of it,
// the overflow and underflow thresholds, infinities, NaNs and signed zeros, in both saturation
// modes; and a hash of the codes of all 65,536 half and bfloat16 inputs (both formats, both
// modes). The class constructors must equal the __NV_SATFINITE conversions, and the x2/x4 types
// must pack .x into the lowest byte.
//
// Host code only, so it runs without a GPU on both backends: the sim build checks the simulator's
// cuda_fp8.h (attn/fp8.h), the gpu build the CUDA toolkit's own cuda_fp8.h, against the same table,
// which the toolkit's header wrote (`cudasim_test_fp8_gpu --write fp8_table.txt`);
// tests/python/test_fp8_table.py checks its decodings and finite encodings against PyTorch's
// float8_e4m3fn and float8_e5m2.
//   ./build/sim/tests/cudasim/cudasim_test_fp8_sim tests/cudasim/fp8_table.txt
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "sim_test.h"

static const char *fmt_name(__nv_fp8_interpretation_t f) {
    return f == __NV_E5M2 ? "e5m2" : "e4m3";
}
static const __nv_fp8_interpretation_t formats[2] = {__NV_E4M3, __NV_E5M2};

static uint64_t bits64(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static double from_bits64(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static uint32_t bits32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

// The exact value of a code, decoded here from the format's definition (not from the header
// under test): e4m3 bias 7, e5m2 bias 15; NaN codes give NaN.
static double code_value(unsigned code, __nv_fp8_interpretation_t f) {
    int mbits = f == __NV_E5M2 ? 2 : 3, bias = f == __NV_E5M2 ? 15 : 7;
    int e = (code & 0x7f) >> mbits, m = code & ((1 << mbits) - 1);
    bool nan = f == __NV_E5M2 ? (code & 0x7f) > 0x7c : (code & 0x7f) == 0x7f;
    if (nan)
        return NAN;
    double v = f == __NV_E5M2 && e == 31 ? INFINITY
               : e == 0                  ? std::ldexp(m, 1 - bias - mbits)
                                         : std::ldexp((1 << mbits) + m, e - bias - mbits);
    return code & 0x80 ? -v : v;
}

// The inputs of the encoding rows: every finite value, midpoints and their neighbours, the
// thresholds, the specials.
static std::vector<double> encode_inputs(__nv_fp8_interpretation_t f) {
    std::vector<double> finite, in;
    for (unsigned c = 0; c < 128; ++c) {
        double v = code_value(c, f);
        if (std::isfinite(v))
            finite.push_back(v);
    }
    double max = finite.back(), top_step = max - finite[finite.size() - 2];
    finite.push_back(max + top_step); // the next value past the largest (its midpoint: overflow)
    for (size_t i = 0; i < finite.size(); ++i) {
        in.push_back(finite[i]);
        if (i + 1 < finite.size()) {
            double mid = (finite[i] + finite[i + 1]) / 2;
            in.push_back(mid);
            in.push_back(std::nextafter(mid, 0.0));
            in.push_back(std::nextafter(mid, INFINITY));
            in.push_back(std::nextafter(static_cast<float>(mid), 0.0f));
            in.push_back(std::nextafter(static_cast<float>(mid), INFINITY));
        }
    }
    for (double x : {1e6, 1e30, 1e-30, 1e-300, 3.0e38, 7.0e38, 1.0e-45})
        in.push_back(x);
    in.push_back(INFINITY);
    size_t n = in.size();
    for (size_t i = 0; i < n; ++i)
        in.push_back(-in[i]);
    in.push_back(0.0);
    in.push_back(-0.0);
    in.push_back(from_bits64(0x7ff8000000000000ull)); // quiet NaN, bit 50 clear
    in.push_back(from_bits64(0x7ffc000000000000ull)); // bit 50 set
    in.push_back(from_bits64(0xfff8000000000000ull)); // negative
    in.push_back(from_bits64(0x7ff0000000000001ull)); // signalling
    return in;
}

// FNV-1a over the codes of every 16-bit input (half or bfloat16), both formats and modes.
static uint64_t fnv(uint64_t h, unsigned byte) { return (h ^ byte) * 0x100000001b3ull; }
static uint64_t hash_16bit_inputs(bool bf16) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned u = 0; u < 65536; ++u)
        for (__nv_fp8_interpretation_t f : formats)
            for (__nv_saturation_t s : {__NV_NOSAT, __NV_SATFINITE}) {
                __nv_fp8_storage_t c;
                if (bf16) {
                    __nv_bfloat16_raw r;
                    r.x = static_cast<unsigned short>(u);
                    c = __nv_cvt_bfloat16raw_to_fp8(r, s, f);
                } else {
                    __half_raw r;
                    r.x = static_cast<unsigned short>(u);
                    c = __nv_cvt_halfraw_to_fp8(r, s, f);
                }
                h = fnv(h, c);
            }
    return h;
}

// Every line of the table, as this backend's cuda_fp8.h computes it.
static std::vector<std::string> table_lines() {
    std::vector<std::string> lines;
    char buf[160];
    for (__nv_fp8_interpretation_t f : formats)
        for (unsigned c = 0; c < 256; ++c) {
            __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), f);
            __nv_fp8_e4m3 e4;
            __nv_fp8_e5m2 e5;
            e4.__x = e5.__x = static_cast<__nv_fp8_storage_t>(c);
            float v = f == __NV_E5M2 ? static_cast<float>(e5) : static_cast<float>(e4);
            std::snprintf(buf, sizeof buf, "decode %s 0x%02x 0x%04x 0x%08x", fmt_name(f), c, h.x,
                          bits32(v));
            lines.push_back(buf);
        }
    for (__nv_fp8_interpretation_t f : formats)
        for (double x : encode_inputs(f))
            for (__nv_saturation_t s : {__NV_NOSAT, __NV_SATFINITE}) {
                const char *mode = s == __NV_SATFINITE ? "satfinite" : "nosat";
                std::snprintf(buf, sizeof buf, "encode_f64 %s %s 0x%016llx 0x%02x", fmt_name(f),
                              mode, (unsigned long long)bits64(x), __nv_cvt_double_to_fp8(x, s, f));
                lines.push_back(buf);
                float xf = static_cast<float>(x);
                std::snprintf(buf, sizeof buf, "encode_f32 %s %s 0x%08x 0x%02x", fmt_name(f), mode,
                              bits32(xf), __nv_cvt_float_to_fp8(xf, s, f));
                lines.push_back(buf);
            }
    for (int bf16 = 0; bf16 < 2; ++bf16) {
        std::snprintf(buf, sizeof buf, "hash_all_%s 0x%016llx", bf16 ? "bf16" : "f16",
                      (unsigned long long)hash_16bit_inputs(bf16));
        lines.push_back(buf);
    }
    return lines;
}

// The types: constructors are the SATFINITE conversions; pairs and quads pack .x lowest.
static void check_types() {
    const float xs[] = {0.3f, -1.7f, 500.0f, -70000.0f, 1e-3f, NAN};
    for (float x : xs) {
        CHECK(__nv_fp8_e4m3(x).__x == __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
        CHECK(__nv_fp8_e5m2(x).__x == __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2));
        CHECK(__nv_fp8_e4m3(static_cast<double>(x)).__x ==
              __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
        CHECK(__nv_fp8_e4m3(__float2half(x)).__x ==
              __nv_cvt_float_to_fp8(__half2float(__float2half(x)), __NV_SATFINITE, __NV_E4M3));
    }
    __nv_fp8x2_e4m3 pair(make_float2(1.0f, -2.0f));
    CHECK(pair.__x == (__nv_cvt_float_to_fp8(1.0f, __NV_SATFINITE, __NV_E4M3) |
                       __nv_cvt_float_to_fp8(-2.0f, __NV_SATFINITE, __NV_E4M3) << 8));
    float2 back = static_cast<float2>(pair);
    CHECK(back.x == 1.0f && back.y == -2.0f);
    __nv_fp8x4_e5m2 quad(make_float4(1.0f, 2.0f, 3.0f, -4.0f));
    float4 q = static_cast<float4>(quad);
    CHECK(q.x == 1.0f && q.y == 2.0f && q.z == 3.0f && q.w == -4.0f);
    CHECK((quad.__x & 0xffu) == __nv_cvt_float_to_fp8(1.0f, __NV_SATFINITE, __NV_E5M2));
    CHECK((quad.__x >> 24) == __nv_cvt_float_to_fp8(-4.0f, __NV_SATFINITE, __NV_E5M2));
}

int main(int argc, char **argv) {
    bool write = argc == 3 && std::strcmp(argv[1], "--write") == 0;
    if (argc != 2 && !write) {
        std::fprintf(stderr, "usage: %s TABLE | --write TABLE\n", argv[0]);
        return 2;
    }
    const char *path = argv[argc - 1];
    std::vector<std::string> lines = table_lines();
    if (write) {
        FILE *out = std::fopen(path, "w");
        if (!out) {
            std::fprintf(stderr, "error: cannot write %s\n", path);
            return 2;
        }
        std::fprintf(out, "# FP8 conversions as the CUDA toolkit's cuda_fp8.h computes them (host\n"
                          "# code), written by `cudasim_test_fp8_gpu --write`; tests/cudasim/"
                          "test_fp8.cu says what each line is.\n");
        for (const std::string &l : lines)
            std::fprintf(out, "%s\n", l.c_str());
        std::fclose(out);
        std::printf("wrote %zu lines to %s\n", lines.size(), path);
        return 0;
    }
    FILE *in = std::fopen(path, "r");
    if (!in) {
        std::fprintf(stderr, "error: cannot read %s\n", path);
        return 2;
    }
    std::vector<std::string> want;
    char buf[256];
    while (std::fgets(buf, sizeof buf, in)) {
        std::string l(buf);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r'))
            l.pop_back();
        if (!l.empty() && l[0] != '#')
            want.push_back(l);
    }
    std::fclose(in);
    CHECK(want.size() == lines.size());
    int bad = 0;
    for (size_t i = 0; i < want.size() && i < lines.size(); ++i)
        if (want[i] != lines[i] && ++bad <= 10)
            std::fprintf(stderr, "line %zu: got '%s', the table has '%s'\n", i + 1,
                         lines[i].c_str(), want[i].c_str());
    if (bad)
        std::fprintf(stderr, "%d of %zu lines differ\n", bad, want.size());
    CHECK(bad == 0);
    check_types();
    std::printf("checked %zu conversions\n", lines.size());
    return sim_test_result("test_fp8");
}
