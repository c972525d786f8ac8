// ptx.cpp — the out-of-line part of the mma and ldmatrix emulation (include/cudasim/ptx.h): one
// lane's rows of A and columns of B, picked from the warp's gathered registers and converted to
// fp32, and one lane's ldmatrix registers, picked from the gathered rows. They read the gathered
// values in place (warp_allgather_view): copying them out to each lane was a fifth of an mma.
//
// The bit-by-bit conversion of attn/half.h (attn_f16_to_f32: branches for zeros, subnormals,
// infinities) was most of an mma's time: a warp's 32 lanes convert 2,048 operands per m16n8k16,
// each of A's rows by four lanes and each of B's columns by eight. Here fp16 is converted without
// branches (f16_to_f32 below), the FP8 codes by table (256 each, made at start-up by
// attn_fp8_to_f32); every value bit for bit what attn/half.h and attn/fp8.h give, all 65,536 fp16
// values and all 512 codes (tests cudasim.mma_operand_conversions and its planted twin,
// tests/cudasim/test_mma_operands.cu).
//
// Out of line, in the simulator's library, because the checked build (sim-check) instruments the
// kernel's own translation unit: a read there of the FP8 table or of the gathered values would
// reach the checkers and the profile as a load the kernel never made.
#include <cudasim/ptx.h>

#include <cstring>

namespace cudasim {
namespace detail {
namespace {

inline float from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}

// fp16 -> fp32, exact. With em the bits below the sign: a normal value (exponent field 1..30) is
// em << 13 with the exponent rebased by 127 - 15 = 112; a subnormal one (or zero) is em units of
// 2^-24, exact as a float product of normal operands (no subnormal arithmetic, slow on some
// CPUs); infinities and NaNs (exponent 31) keep the mantissa, a NaN made quiet. The selects
// compile to conditional moves.
inline float f16_to_f32(uint16_t h) {
    uint32_t em = h & 0x7fffu, sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    float normal = from_bits((em << 13) + (112u << 23));
    float subnormal = static_cast<float>(em) * 0x1p-24f;
    uint32_t bits;
    float v = em < 0x400u ? subnormal : normal;
    std::memcpy(&bits, &v, sizeof bits);
    uint32_t m = em & 0x3ffu;
    uint32_t special = 0x7f800000u | m << 13 | (m ? 0x400000u : 0u);
    return from_bits(sign | (em >= 0x7c00u ? special : bits));
}

inline float f16_or_bf16(uint16_t bits, bool bf16) {
    return bf16 ? attn_bf16_to_f32(bits) : f16_to_f32(bits);
}

struct fp8_tables {
    float e4m3[256], e5m2[256];
    fp8_tables() {
        for (uint32_t c = 0; c < 256; ++c) {
            e4m3[c] = attn_fp8_to_f32(static_cast<uint8_t>(c), ATTN_FP8_E4M3);
            e5m2[c] = attn_fp8_to_f32(static_cast<uint8_t>(c), ATTN_FP8_E5M2);
        }
    }
};
const fp8_tables fp8; // filled before main(): no kernel runs earlier

inline const float *fp8_table(attn_fp8_format f) {
    return f == ATTN_FP8_E5M2 ? fp8.e5m2 : fp8.e4m3;
}

inline uint8_t byte_of(uint32_t reg, unsigned k) {
    return static_cast<uint8_t>(reg >> 8 * (k % 4));
}

} // namespace

float mma_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
float mma_fp8_to_f32(uint8_t code, attn_fp8_format f) { return fp8_table(f)[code]; }

// m16n8k16: A[row][k] is in lane (row % 8) * 4 + (k % 8) / 2, register row / 8 + 2 * (k / 8);
// B[k][col] in lane col * 4 + (k % 8) / 2, register 4 + k / 8 (of `regs`); the half is k % 2 in
// both. This lane's rows of A are g + 8h and its columns of B 2t + h (h = 0, 1), where
// lane = 4g + t: with kb = k / 8 and j = (k % 8) / 2, one register holds k = 8kb + 2j and the
// next k.
void mma_operands_16(const uint32_t (*regs)[6], unsigned lane, bool bf16, float (&arow)[2][16],
                     float (&bcol)[2][16]) {
    unsigned g = lane / 4, t = lane % 4;
    for (unsigned h = 0; h < 2; ++h)
        for (unsigned kb = 0; kb < 2; ++kb)
            for (unsigned j = 0; j < 4; ++j) {
                uint32_t a = regs[g * 4 + j][h + 2 * kb], b = regs[(2 * t + h) * 4 + j][4 + kb];
                unsigned k = 8 * kb + 2 * j;
                arow[h][k] = f16_or_bf16(static_cast<uint16_t>(a & 0xffffu), bf16);
                arow[h][k + 1] = f16_or_bf16(static_cast<uint16_t>(a >> 16), bf16);
                bcol[h][k] = f16_or_bf16(static_cast<uint16_t>(b & 0xffffu), bf16);
                bcol[h][k + 1] = f16_or_bf16(static_cast<uint16_t>(b >> 16), bf16);
            }
}

// m16n8k32 (FP8): A[row][k] is byte k % 4 of register row / 8 + 2 (k / 16) in lane (row % 8) * 4 +
// (k % 16) / 4; B[k][col] byte k % 4 of register 4 + k / 16 (of `regs`) in lane col * 4 +
// (k % 16) / 4.
void mma_operands_fp8(const uint32_t (*regs)[6], unsigned lane, attn_fp8_format fa,
                      attn_fp8_format fb, float (&arow)[2][32], float (&bcol)[2][32]) {
    unsigned g = lane / 4, t = lane % 4;
    const float *ta = fp8_table(fa), *tb = fp8_table(fb);
    for (unsigned h = 0; h < 2; ++h)
        for (unsigned k = 0; k < 32; ++k) {
            arow[h][k] = ta[byte_of(regs[g * 4 + (k % 16) / 4][h + 2 * (k / 16)], k)];
            bcol[h][k] = tb[byte_of(regs[(2 * t + h) * 4 + (k % 16) / 4][4 + k / 16], k)];
        }
}

// ldmatrix .m8n8: lane 4g + t holds, of matrix i, row g's elements 2t and 2t + 1 (.trans: column
// g's, rows 2t and 2t + 1), low half first.
void ldmatrix_fragments(const uint16_t (*rows)[8], unsigned lane, int num, bool trans,
                        uint32_t *r) {
    unsigned g = lane / 4, t = lane % 4;
    for (int i = 0; i < num; ++i) {
        const uint16_t(*m)[8] = rows + 8 * i;
        uint16_t lo = trans ? m[2 * t][g] : m[g][2 * t];
        uint16_t hi = trans ? m[2 * t + 1][g] : m[g][2 * t + 1];
        r[i] = lo | static_cast<uint32_t>(hi) << 16;
    }
}

} // namespace detail
} // namespace cudasim
