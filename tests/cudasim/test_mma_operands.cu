// test_mma_operands.cu — the mma emulation's element conversions (common/cudasim/src/ptx.cpp),
// bit for bit, against attn/half.h and attn/fp8.h: all 65,536 fp16 values (attn_f16_to_f32) and
// all 256 codes of e4m3 and e5m2 (attn_fp8_to_f32). The emulation converts fp16 without branches
// and FP8 by table; a wrong bit there changes every tensor-core result it touches.
//   ./build/sim/tests/cudasim/cudasim_test_mma_operands_sim
//   ./build/sim/tests/cudasim/cudasim_test_mma_operands_sim --plant   one fp16 value changed in
//       the reference (the smallest subnormal, 2^-24, taken as 2^-23): must be reported
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cudasim/ptx.h>

static uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

int main(int argc, char **argv) {
    bool plant = argc > 1 && std::strcmp(argv[1], "--plant") == 0;
    if (argc > 2 || (argc == 2 && !plant)) {
        std::fprintf(stderr, "usage: %s [--plant]\n", argv[0]);
        return 2;
    }
    unsigned bad = 0, n = 0;
    for (uint32_t h = 0; h < (1u << 16); ++h, ++n) {
        float want = attn_f16_to_f32(static_cast<uint16_t>(h));
        if (plant && h == 0x0001u)
            want = 0x1p-23f;
        float got = cudasim::detail::mma_f16_to_f32(static_cast<uint16_t>(h));
        if (bits(got) != bits(want) && bad++ < 8)
            std::printf("fp16 0x%04x: got 0x%08x, attn_f16_to_f32 gives 0x%08x\n", h, bits(got),
                        bits(want));
    }
    for (attn_fp8_format f : {ATTN_FP8_E4M3, ATTN_FP8_E5M2})
        for (uint32_t c = 0; c < 256; ++c, ++n) {
            float want = attn_fp8_to_f32(static_cast<uint8_t>(c), f);
            float got = cudasim::detail::mma_fp8_to_f32(static_cast<uint8_t>(c), f);
            if (bits(got) != bits(want) && bad++ < 8)
                std::printf("%s 0x%02x: got 0x%08x, attn_fp8_to_f32 gives 0x%08x\n",
                            f == ATTN_FP8_E4M3 ? "e4m3" : "e5m2", c, bits(got), bits(want));
        }
    if (bad) {
        std::printf("%u of %u values differ\n", bad, n);
        return 1;
    }
    std::printf("PASS: %u values (fp16, e4m3, e5m2) converted as attn/half.h and attn/fp8.h do\n",
                n);
    return 0;
}
