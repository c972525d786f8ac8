/* cuda_fp8.h (cudasim) — the toolkit's FP8 types for the simulator: __nv_fp8_e4m3, __nv_fp8_e5m2,
 * their pairs (x2) and quads (x4), the storage types, and the __nv_cvt_* conversions, with the
 * toolkit's names and rounding, saturation and NaN rules (round to nearest even; the bit logic is
 * attn/fp8.h, which states the rules). Constructors saturate to the largest finite value
 * (__NV_SATFINITE), as the toolkit's do; the __nv_cvt_* functions take the mode.
 *
 * Not simulated (a compile error names the missing member): the integer conversion operators, the
 * e8m0 (scale) and fp6/fp4 types of sm_100, and fp8 arithmetic (the toolkit has none either: a
 * kernel converts to half or float). mma.sync m16n8k32 on e4m3/e5m2 is in cudasim/ptx.h.
 */
#ifndef CUDASIM_CUDA_FP8_H
#define CUDASIM_CUDA_FP8_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../../include/attn/fp8.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short int __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;

typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;

#ifdef __cplusplus

#include <vector_types.h>

namespace cudasim {
namespace detail {
inline attn_fp8_format fp8_format(__nv_fp8_interpretation_t i) {
    return i == __NV_E5M2 ? ATTN_FP8_E5M2 : ATTN_FP8_E4M3;
}
/* A pair's storage: .x in the low byte. */
inline __nv_fp8x2_storage_t fp8x2_pack(__nv_fp8_storage_t lo, __nv_fp8_storage_t hi) {
    return static_cast<__nv_fp8x2_storage_t>(lo | hi << 8);
}
} // namespace detail
} // namespace cudasim

/* ---- conversions ---------------------------------------------------------------------------- */
inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t s,
                                                 __nv_fp8_interpretation_t i) {
    return attn_fp8_from_f64(x, cudasim::detail::fp8_format(i), s == __NV_SATFINITE);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t s,
                                                __nv_fp8_interpretation_t i) {
    return attn_fp8_from_f32(x, cudasim::detail::fp8_format(i), s == __NV_SATFINITE);
}
/* half and bfloat16 convert exactly to float first (their NaNs become the float NaN). */
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t s,
                                                  __nv_fp8_interpretation_t i) {
    return __nv_cvt_float_to_fp8(attn_f16_to_f32(x.x), s, i);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t s,
                                                      __nv_fp8_interpretation_t i) {
    return __nv_cvt_float_to_fp8(attn_bf16_to_f32(x.x), s, i);
}
inline __nv_fp8x2_storage_t __nv_cvt_double2_to_fp8x2(double2 x, __nv_saturation_t s,
                                                      __nv_fp8_interpretation_t i) {
    return cudasim::detail::fp8x2_pack(__nv_cvt_double_to_fp8(x.x, s, i),
                                       __nv_cvt_double_to_fp8(x.y, s, i));
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t s,
                                                     __nv_fp8_interpretation_t i) {
    return cudasim::detail::fp8x2_pack(__nv_cvt_float_to_fp8(x.x, s, i),
                                       __nv_cvt_float_to_fp8(x.y, s, i));
}
inline __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(__half2_raw x, __nv_saturation_t s,
                                                       __nv_fp8_interpretation_t i) {
    return cudasim::detail::fp8x2_pack(__nv_cvt_halfraw_to_fp8(__half_raw{x.x}, s, i),
                                       __nv_cvt_halfraw_to_fp8(__half_raw{x.y}, s, i));
}
inline __nv_fp8x2_storage_t __nv_cvt_bfloat16raw2_to_fp8x2(__nv_bfloat162_raw x,
                                                           __nv_saturation_t s,
                                                           __nv_fp8_interpretation_t i) {
    return cudasim::detail::fp8x2_pack(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.x}, s, i),
                                       __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.y}, s, i));
}
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t i) {
    return __half_raw{attn_fp8_to_f16_bits(x, cudasim::detail::fp8_format(i))};
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t i) {
    return __half2_raw{__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x & 0xffu), i).x,
                       __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x >> 8), i).x};
}

/* ---- types ---------------------------------------------------------------------------------- */
/* One scalar type per format: constructors round with __NV_SATFINITE; conversions are exact. */
#define CUDASIM_FP8_SCALAR(T, FORMAT)                                                              \
    struct __attribute__((aligned(1))) T {                                                         \
        __nv_fp8_storage_t __x;                                                                    \
        T() = default;                                                                             \
        explicit T(double f) : __x(__nv_cvt_double_to_fp8(f, __NV_SATFINITE, FORMAT)) {}           \
        explicit T(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, FORMAT)) {}             \
        explicit T(__half f)                                                                       \
            : __x(__nv_cvt_halfraw_to_fp8(__half_raw(f), __NV_SATFINITE, FORMAT)) {}               \
        explicit T(__nv_bfloat16 f)                                                                \
            : __x(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw(f), __NV_SATFINITE, FORMAT)) {}    \
        explicit T(int v) : T(static_cast<float>(v)) {}                                            \
        explicit T(unsigned int v) : T(static_cast<float>(v)) {}                                   \
        explicit T(short v) : T(static_cast<float>(v)) {}                                          \
        explicit T(unsigned short v) : T(static_cast<float>(v)) {}                                 \
        explicit T(long v) : T(static_cast<float>(v)) {}                                           \
        explicit T(unsigned long v) : T(static_cast<float>(v)) {}                                  \
        explicit T(long long v) : T(static_cast<float>(v)) {}                                      \
        explicit T(unsigned long long v) : T(static_cast<float>(v)) {}                             \
        explicit operator __half() const { return __half(__nv_cvt_fp8_to_halfraw(__x, FORMAT)); }  \
        explicit operator float() const {                                                          \
            return attn_fp8_to_f32(__x, cudasim::detail::fp8_format(FORMAT));                      \
        }                                                                                          \
        explicit operator double() const { return static_cast<float>(*this); }                     \
        explicit operator __nv_bfloat16() const {                                                  \
            return __nv_bfloat16(static_cast<float>(*this));                                       \
        }                                                                                          \
    }
CUDASIM_FP8_SCALAR(__nv_fp8_e4m3, __NV_E4M3);
CUDASIM_FP8_SCALAR(__nv_fp8_e5m2, __NV_E5M2);
#undef CUDASIM_FP8_SCALAR

/* Pairs (.x in the low byte) and quads (.x in the lowest byte). */
#define CUDASIM_FP8_PAIR(T, FORMAT)                                                                \
    struct __attribute__((aligned(2))) T {                                                         \
        __nv_fp8x2_storage_t __x;                                                                  \
        T() = default;                                                                             \
        explicit T(double2 f) : __x(__nv_cvt_double2_to_fp8x2(f, __NV_SATFINITE, FORMAT)) {}       \
        explicit T(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, FORMAT)) {}         \
        explicit T(__half2 f) : __x(__nv_cvt_halfraw2_to_fp8x2(f, __NV_SATFINITE, FORMAT)) {}      \
        explicit T(__nv_bfloat162 f)                                                               \
            : __x(__nv_cvt_bfloat16raw2_to_fp8x2(f, __NV_SATFINITE, FORMAT)) {}                    \
        explicit operator __half2() const {                                                        \
            return __half2(__nv_cvt_fp8x2_to_halfraw2(__x, FORMAT));                               \
        }                                                                                          \
        explicit operator float2() const {                                                         \
            attn_fp8_format f = cudasim::detail::fp8_format(FORMAT);                               \
            return make_float2(attn_fp8_to_f32(static_cast<uint8_t>(__x & 0xffu), f),              \
                               attn_fp8_to_f32(static_cast<uint8_t>(__x >> 8), f));                \
        }                                                                                          \
    }
CUDASIM_FP8_PAIR(__nv_fp8x2_e4m3, __NV_E4M3);
CUDASIM_FP8_PAIR(__nv_fp8x2_e5m2, __NV_E5M2);
#undef CUDASIM_FP8_PAIR

#define CUDASIM_FP8_QUAD(T, FORMAT)                                                                \
    struct __attribute__((aligned(4))) T {                                                         \
        __nv_fp8x4_storage_t __x;                                                                  \
        T() = default;                                                                             \
        explicit T(float4 f)                                                                       \
            : __x(__nv_cvt_float2_to_fp8x2(make_float2(f.x, f.y), __NV_SATFINITE, FORMAT) |        \
                  static_cast<__nv_fp8x4_storage_t>(                                               \
                      __nv_cvt_float2_to_fp8x2(make_float2(f.z, f.w), __NV_SATFINITE, FORMAT))     \
                      << 16) {}                                                                    \
        explicit T(double4 f)                                                                      \
            : __x(__nv_cvt_double2_to_fp8x2(make_double2(f.x, f.y), __NV_SATFINITE, FORMAT) |      \
                  static_cast<__nv_fp8x4_storage_t>(                                               \
                      __nv_cvt_double2_to_fp8x2(make_double2(f.z, f.w), __NV_SATFINITE, FORMAT))   \
                      << 16) {}                                                                    \
        explicit T(__half2 lo, __half2 hi)                                                         \
            : __x(__nv_cvt_halfraw2_to_fp8x2(lo, __NV_SATFINITE, FORMAT) |                         \
                  static_cast<__nv_fp8x4_storage_t>(                                               \
                      __nv_cvt_halfraw2_to_fp8x2(hi, __NV_SATFINITE, FORMAT))                      \
                      << 16) {}                                                                    \
        explicit operator float4() const {                                                         \
            attn_fp8_format f = cudasim::detail::fp8_format(FORMAT);                               \
            return make_float4(attn_fp8_to_f32(static_cast<uint8_t>(__x), f),                      \
                               attn_fp8_to_f32(static_cast<uint8_t>(__x >> 8), f),                 \
                               attn_fp8_to_f32(static_cast<uint8_t>(__x >> 16), f),                \
                               attn_fp8_to_f32(static_cast<uint8_t>(__x >> 24), f));               \
        }                                                                                          \
    }
CUDASIM_FP8_QUAD(__nv_fp8x4_e4m3, __NV_E4M3);
CUDASIM_FP8_QUAD(__nv_fp8x4_e5m2, __NV_E5M2);
#undef CUDASIM_FP8_QUAD

#endif /* __cplusplus */

#endif /* CUDASIM_CUDA_FP8_H */
