/* cudasim/half_types.h — __half, __half2, __nv_bfloat16 and __nv_bfloat162 for the simulator,
 * with the toolkit's names: conversions, arithmetic operators and the h-prefixed intrinsics.
 *
 * The toolkit's cuda_fp16.h/cuda_bf16.h are never used: their arithmetic is device-only. Every
 * operation computes in fp32 and rounds once to 16 bits (round to nearest even) with the bit
 * logic of attn/half.h. For +, -, *, / and sqrt that is the correctly rounded result (fp32 has
 * more than twice the bits); fma and the transcendental functions round twice (through fp32).
 * Included by cuda_fp16.h and cuda_bf16.h.
 */
#ifndef CUDASIM_HALF_TYPES_H
#define CUDASIM_HALF_TYPES_H

#include "../../../include/attn/half.h"

#ifndef __cplusplus
/* C sees the storage layout only (as with the toolkit's headers in host C code). */
typedef struct __half {
    unsigned short __x;
} __half;
typedef struct __half2 {
    __half x, y;
} __half2;
typedef struct __nv_bfloat16 {
    unsigned short __x;
} __nv_bfloat16;
typedef struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
} __nv_bfloat162;
#else

#include <cmath>
#include <type_traits>

#include <vector_types.h>

struct __half_raw {
    unsigned short x;
};
struct __nv_bfloat16_raw {
    unsigned short x;
};

/* Both scalar types share their constructors; TO_BITS/FROM_BITS select the format. */
#define CUDASIM_LOWP_SCALAR(T, RAW, TO_BITS, FROM_BITS)                                            \
    struct T {                                                                                     \
        unsigned short __x;                                                                        \
        T() = default;                                                                             \
        constexpr T(RAW r) : __x(r.x) {}                                                           \
        T(float f) : __x(TO_BITS(f)) {}                                                            \
        T(double f) : __x(TO_BITS(static_cast<float>(f))) {}                                       \
        T(int i) : T(static_cast<float>(i)) {}                                                     \
        T(unsigned int i) : T(static_cast<float>(i)) {}                                            \
        T(short i) : T(static_cast<float>(i)) {}                                                   \
        T(unsigned short i) : T(static_cast<float>(i)) {}                                          \
        T(long i) : T(static_cast<float>(i)) {}                                                    \
        T(unsigned long i) : T(static_cast<float>(i)) {}                                           \
        T(long long i) : T(static_cast<float>(i)) {}                                               \
        T(unsigned long long i) : T(static_cast<float>(i)) {}                                      \
        operator float() const { return FROM_BITS(__x); }                                          \
        operator RAW() const { return RAW{__x}; }                                                  \
    }
CUDASIM_LOWP_SCALAR(__half, __half_raw, attn_f32_to_f16, attn_f16_to_f32);
CUDASIM_LOWP_SCALAR(__nv_bfloat16, __nv_bfloat16_raw, attn_f32_to_bf16, attn_bf16_to_f32);
#undef CUDASIM_LOWP_SCALAR

struct __attribute__((aligned(4))) __half2_raw {
    unsigned short x, y;
};
struct __attribute__((aligned(4))) __nv_bfloat162_raw {
    unsigned short x, y;
};
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
    __half2() = default;
    constexpr __half2(__half a, __half b) : x(a), y(b) {}
    constexpr __half2(__half2_raw r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
    constexpr __nv_bfloat162(__nv_bfloat162_raw r)
        : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
    operator __nv_bfloat162_raw() const { return __nv_bfloat162_raw{x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

namespace cudasim {
namespace detail {
template <typename T> struct lowp { static constexpr bool scalar = false, pair = false; };
template <> struct lowp<__half> { static constexpr bool scalar = true, pair = false; };
template <> struct lowp<__nv_bfloat16> { static constexpr bool scalar = true, pair = false; };
template <> struct lowp<__half2> {
    static constexpr bool scalar = false, pair = true;
    using elem = __half;
};
template <> struct lowp<__nv_bfloat162> {
    static constexpr bool scalar = false, pair = true;
    using elem = __nv_bfloat16;
};
template <typename T, typename R = T> using if_scalar = std::enable_if_t<lowp<T>::scalar, R>;
template <typename T, typename R = T> using if_pair = std::enable_if_t<lowp<T>::pair, R>;
template <typename T, typename R = T>
using if_lowp = std::enable_if_t<lowp<T>::scalar || lowp<T>::pair, R>;

// Applies a float function to a scalar, or to each half of a pair, rounding each result.
template <typename T, typename F> inline if_scalar<T> map(T a, F f) { return T(f(float(a))); }
template <typename T, typename F> inline if_pair<T> map(T a, F f) {
    return T(map(a.x, f), map(a.y, f));
}
template <typename T, typename F> inline if_scalar<T> zip(T a, T b, F f) {
    return T(f(float(a), float(b)));
}
template <typename T, typename F> inline if_pair<T> zip(T a, T b, F f) {
    return T(zip(a.x, b.x, f), zip(a.y, b.y, f));
}
template <typename T> inline if_scalar<T> fma3(T a, T b, T c) {
    return T(fmaf(float(a), float(b), float(c)));
}
template <typename T> inline if_pair<T> fma3(T a, T b, T c) {
    return T(fma3(a.x, b.x, c.x), fma3(a.y, b.y, c.y));
}
} // namespace detail
} // namespace cudasim

/* ---- operators (scalars and pairs) ---- */
#define CUDASIM_LOWP_BINOP(OP)                                                                     \
    template <typename T> inline cudasim::detail::if_lowp<T> operator OP(T a, T b) {               \
        return cudasim::detail::zip(a, b, [](float u, float v) { return u OP v; });                \
    }                                                                                              \
    template <typename T> inline cudasim::detail::if_lowp<T, T &> operator OP##=(T &a, T b) {      \
        return a = a OP b;                                                                         \
    }
CUDASIM_LOWP_BINOP(+)
CUDASIM_LOWP_BINOP(-)
CUDASIM_LOWP_BINOP(*)
CUDASIM_LOWP_BINOP(/)
#undef CUDASIM_LOWP_BINOP
template <typename T> inline cudasim::detail::if_lowp<T> operator-(T a) {
    return cudasim::detail::map(a, [](float u) { return -u; });
}
template <typename T> inline cudasim::detail::if_lowp<T> operator+(T a) { return a; }

#define CUDASIM_LOWP_CMP(OP, NAME)                                                                 \
    template <typename T> inline cudasim::detail::if_scalar<T, bool> operator OP(T a, T b) {       \
        return float(a) OP float(b);                                                               \
    }                                                                                              \
    template <typename T> inline cudasim::detail::if_scalar<T, bool> NAME(T a, T b) {              \
        return float(a) OP float(b);                                                               \
    }
CUDASIM_LOWP_CMP(==, __heq)
CUDASIM_LOWP_CMP(!=, __hne)
CUDASIM_LOWP_CMP(<, __hlt)
CUDASIM_LOWP_CMP(<=, __hle)
CUDASIM_LOWP_CMP(>, __hgt)
CUDASIM_LOWP_CMP(>=, __hge)
#undef CUDASIM_LOWP_CMP

/* ---- named arithmetic: __hadd (scalars) and __hadd2 (pairs), for fp16 and bf16 alike ---- */
#define CUDASIM_LOWP_NAMED2(SCALAR, PAIR, EXPR)                                                    \
    template <typename T> inline cudasim::detail::if_scalar<T> SCALAR(T a, T b) {                  \
        return cudasim::detail::zip(a, b, [](float u, float v) { return EXPR; });                  \
    }                                                                                              \
    template <typename T> inline cudasim::detail::if_pair<T> PAIR(T a, T b) {                      \
        return cudasim::detail::zip(a, b, [](float u, float v) { return EXPR; });                  \
    }
CUDASIM_LOWP_NAMED2(__hadd, __hadd2, u + v)
CUDASIM_LOWP_NAMED2(__hsub, __hsub2, u - v)
CUDASIM_LOWP_NAMED2(__hmul, __hmul2, u *v)
CUDASIM_LOWP_NAMED2(__hdiv, __h2div, u / v)
CUDASIM_LOWP_NAMED2(__hmax, __hmax2, fmaxf(u, v))
CUDASIM_LOWP_NAMED2(__hmin, __hmin2, fminf(u, v))
#undef CUDASIM_LOWP_NAMED2

#define CUDASIM_LOWP_NAMED1(SCALAR, PAIR, EXPR)                                                    \
    template <typename T> inline cudasim::detail::if_scalar<T> SCALAR(T a) {                       \
        return cudasim::detail::map(a, [](float u) { return EXPR; });                              \
    }                                                                                              \
    template <typename T> inline cudasim::detail::if_pair<T> PAIR(T a) {                           \
        return cudasim::detail::map(a, [](float u) { return EXPR; });                              \
    }
CUDASIM_LOWP_NAMED1(__hneg, __hneg2, -u)
CUDASIM_LOWP_NAMED1(__habs, __habs2, fabsf(u))
CUDASIM_LOWP_NAMED1(hexp, h2exp, expf(u))
CUDASIM_LOWP_NAMED1(hexp2, h2exp2, exp2f(u))
CUDASIM_LOWP_NAMED1(hlog, h2log, logf(u))
CUDASIM_LOWP_NAMED1(hlog2, h2log2, log2f(u))
CUDASIM_LOWP_NAMED1(hsqrt, h2sqrt, sqrtf(u))
CUDASIM_LOWP_NAMED1(hrsqrt, h2rsqrt, 1.0f / sqrtf(u))
CUDASIM_LOWP_NAMED1(hrcp, h2rcp, 1.0f / u)
CUDASIM_LOWP_NAMED1(hceil, h2ceil, ceilf(u))
CUDASIM_LOWP_NAMED1(hfloor, h2floor, floorf(u))
CUDASIM_LOWP_NAMED1(htrunc, h2trunc, truncf(u))
CUDASIM_LOWP_NAMED1(hrint, h2rint, rintf(u))
#undef CUDASIM_LOWP_NAMED1

template <typename T> inline cudasim::detail::if_scalar<T> __hfma(T a, T b, T c) {
    return cudasim::detail::fma3(a, b, c);
}
template <typename T> inline cudasim::detail::if_pair<T> __hfma2(T a, T b, T c) {
    return cudasim::detail::fma3(a, b, c);
}
template <typename T> inline cudasim::detail::if_scalar<T, bool> __hisnan(T a) {
    return std::isnan(float(a));
}
template <typename T> inline cudasim::detail::if_scalar<T, int> __hisinf(T a) {
    float f = float(a);
    return std::isinf(f) ? (f > 0 ? 1 : -1) : 0;
}

/* ---- pair access, shared by fp16 and bf16 ---- */
template <typename P> inline cudasim::detail::if_pair<P, float> __low2float(P p) {
    return float(p.x);
}
template <typename P> inline cudasim::detail::if_pair<P, float> __high2float(P p) {
    return float(p.y);
}
template <typename P> inline cudasim::detail::if_pair<P> __lowhigh2highlow(P p) {
    return P(p.y, p.x);
}
template <typename P> inline cudasim::detail::if_pair<P> __lows2half2(P a, P b) {
    return P(a.x, b.x);
}
template <typename P> inline cudasim::detail::if_pair<P> __highs2half2(P a, P b) {
    return P(a.y, b.y);
}

/* ---- fp16 conversions ---- */
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __int2half_rn(int i) { return __half(static_cast<float>(i)); }
inline int __half2int_rz(__half h) { return static_cast<int>(float(h)); }
inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2(__half(lo), __half(hi)); }
inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
inline float2 __half22float2(__half2 h) { return make_float2(float(h.x), float(h.y)); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __halves2half2(__half lo, __half hi) { return __half2(lo, hi); }
inline __half2 __half2half2(__half h) { return __half2(h, h); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __short_as_half(short s) {
    return __half(__half_raw{static_cast<unsigned short>(s)});
}

/* ---- bf16 conversions ---- */
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
inline __nv_bfloat162 __float2bfloat162_rn(float f) {
    return __nv_bfloat162(__nv_bfloat16(f), __nv_bfloat16(f));
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    return __nv_bfloat162(__nv_bfloat16(lo), __nv_bfloat16(hi));
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) {
    return __nv_bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y));
}
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return make_float2(float(b.x), float(b.y)); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return __nv_bfloat162(lo, hi);
}
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 b) { return __nv_bfloat162(b, b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    return __nv_bfloat16(__nv_bfloat16_raw{u});
}

/* ---- atomicAdd on fp16/bf16 values and pairs: a compare-and-swap loop on their storage ---- */
#include "device_functions.h"
#define CUDASIM_LOWP_ATOMIC_ADD(T)                                                                 \
    CUDASIM_ATOMIC_INLINE T atomicAdd(T *address, T val) {                                         \
        return cudasim::detail::atomic_update(address, [val](T old) -> T { return old + val; });   \
    }
CUDASIM_LOWP_ATOMIC_ADD(__half)
CUDASIM_LOWP_ATOMIC_ADD(__half2)
CUDASIM_LOWP_ATOMIC_ADD(__nv_bfloat16)
CUDASIM_LOWP_ATOMIC_ADD(__nv_bfloat162)
#undef CUDASIM_LOWP_ATOMIC_ADD

#endif /* __cplusplus */
#endif /* CUDASIM_HALF_TYPES_H */
