// cudasim/device_functions.h — CUDA's device functions on the host: atomics, memory fences,
// fast-math intrinsics, bit reinterpretation and integer intrinsics, min/max overloads.
//
// Blocks run on parallel OS threads, so atomics are real (sequentially consistent) atomics;
// threads of one block are fibers on one OS thread and never interleave inside one.
// Included by cuda_runtime.h; not meant to be included directly.
#ifndef CUDASIM_DEVICE_FUNCTIONS_H
#define CUDASIM_DEVICE_FUNCTIONS_H

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

// ---- atomics ------------------------------------------------------------------------------------
namespace cudasim {
namespace detail {
constexpr int mo = __ATOMIC_SEQ_CST;

// A simulated thread runs until it waits, so a thread spinning on an atomic for a value that
// another thread of its block will write would never let that thread run. After this many
// atomics (or fences) with no switch to another thread, each one lets the others run first.
constexpr unsigned spin_atomics = 1024;
inline thread_local unsigned atomics_since_switch = 0; // reset by the scheduler at each switch
void spin_yield();
inline void note_atomic() {
    // Relaxed atomic accesses (plain moves on x86): the counter belongs to the OS thread, which
    // every fiber of the block shares, and TSan must not take that for a race between them.
    unsigned n = __atomic_load_n(&atomics_since_switch, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&atomics_since_switch, n, __ATOMIC_RELAXED);
    if (n > spin_atomics)
        spin_yield();
}
} // namespace detail
} // namespace cudasim

// In an instrumented kernel file (the sim-check build) every atomic tells the checkers its
// address, as an atomic access at the caller's line (racecheck does not take two atomics for a
// race, but does an atomic and a plain store); the functions are then always inlined, so that
// the call's return address lies in the kernel.
#if defined(CUDASIM_TRACE_COPIES)
extern "C" void cudasim_traced_atomic(const void *p, unsigned long bytes);
#define CUDASIM_ATOMIC_INLINE inline __attribute__((always_inline))
#define CUDASIM_NOTE_ATOMIC(p)                                                                     \
    (cudasim_traced_atomic((p), sizeof(*(p))), cudasim::detail::note_atomic())
#else
#define CUDASIM_ATOMIC_INLINE inline
#define CUDASIM_NOTE_ATOMIC(p) cudasim::detail::note_atomic()
#endif

namespace cudasim {
namespace detail {
// Read-modify-write through a compare-and-swap loop, for operations the builtins lack.
template <typename T, typename F> CUDASIM_ATOMIC_INLINE T atomic_update(T *address, F f) {
    CUDASIM_NOTE_ATOMIC(address);
    T old;
#if defined(CUDASIM_TRACE_COPIES)
    // The first value through a compare-and-swap (which writes back the same bytes when it
    // matches): an atomic load would reach the checkers as a plain one.
    std::memset(static_cast<void *>(&old), 0, sizeof old);
    __atomic_compare_exchange(address, &old, &old, false, mo, mo);
#else
    __atomic_load(address, &old, mo);
#endif
    T desired = f(old);
    while (!__atomic_compare_exchange(address, &old, &desired, false, mo, mo))
        desired = f(old);
    return old;
}
} // namespace detail
} // namespace cudasim

#define CUDASIM_ATOMIC_BUILTIN(name, builtin, T)                                                   \
    CUDASIM_ATOMIC_INLINE T name(T *address, T val) {                                              \
        CUDASIM_NOTE_ATOMIC(address);                                                              \
        return builtin(address, val, cudasim::detail::mo);                                         \
    }
// ... for int, unsigned int and unsigned long long (atomicSub: no unsigned long long in CUDA).
#define CUDASIM_ATOMIC_BUILTIN_INTS(name, builtin)                                                 \
    CUDASIM_ATOMIC_BUILTIN(name, builtin, int)                                                     \
    CUDASIM_ATOMIC_BUILTIN(name, builtin, unsigned int)                                            \
    CUDASIM_ATOMIC_BUILTIN(name, builtin, unsigned long long)
CUDASIM_ATOMIC_BUILTIN_INTS(atomicAdd, __atomic_fetch_add)
CUDASIM_ATOMIC_BUILTIN(atomicSub, __atomic_fetch_sub, int)
CUDASIM_ATOMIC_BUILTIN(atomicSub, __atomic_fetch_sub, unsigned int)
CUDASIM_ATOMIC_BUILTIN_INTS(atomicAnd, __atomic_fetch_and)
CUDASIM_ATOMIC_BUILTIN_INTS(atomicOr, __atomic_fetch_or)
CUDASIM_ATOMIC_BUILTIN_INTS(atomicXor, __atomic_fetch_xor)
CUDASIM_ATOMIC_BUILTIN_INTS(atomicExch, __atomic_exchange_n)
#undef CUDASIM_ATOMIC_BUILTIN_INTS
#undef CUDASIM_ATOMIC_BUILTIN

#define CUDASIM_ATOMIC_CAS_LOOP(name, T, expr)                                                     \
    CUDASIM_ATOMIC_INLINE T name(T *address, T val) {                                              \
        return cudasim::detail::atomic_update(address, [val](T old) -> T { return expr; });        \
    }
CUDASIM_ATOMIC_CAS_LOOP(atomicAdd, float, old + val)
CUDASIM_ATOMIC_CAS_LOOP(atomicAdd, double, old + val)
CUDASIM_ATOMIC_CAS_LOOP(atomicSub, float, old - val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMax, int, old > val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMax, unsigned int, old > val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMax, long long, old > val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMax, unsigned long long, old > val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMin, int, old < val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMin, unsigned int, old < val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMin, long long, old < val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicMin, unsigned long long, old < val ? old : val)
CUDASIM_ATOMIC_CAS_LOOP(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUDASIM_ATOMIC_CAS_LOOP(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUDASIM_ATOMIC_CAS_LOOP

CUDASIM_ATOMIC_INLINE float atomicExch(float *address, float val) {
    CUDASIM_NOTE_ATOMIC(address);
    float old;
    __atomic_exchange(address, &val, &old, cudasim::detail::mo);
    return old;
}

#define CUDASIM_ATOMIC_CAS(T)                                                                      \
    CUDASIM_ATOMIC_INLINE T atomicCAS(T *address, T compare, T val) {                              \
        CUDASIM_NOTE_ATOMIC(address);                                                              \
        __atomic_compare_exchange_n(address, &compare, val, false, cudasim::detail::mo,            \
                                    cudasim::detail::mo);                                          \
        return compare;                                                                            \
    }
CUDASIM_ATOMIC_CAS(int)
CUDASIM_ATOMIC_CAS(unsigned int)
CUDASIM_ATOMIC_CAS(unsigned long long)
CUDASIM_ATOMIC_CAS(unsigned short)
#undef CUDASIM_ATOMIC_CAS

// Under TSan the fence is left out: TSan does not model fences, and the atomics above are
// sequentially consistent read-modify-writes, which already order the accesses around them.
#if defined(CUDASIM_TSAN)
inline void __threadfence() { cudasim::detail::note_atomic(); }
#else
inline void __threadfence() {
    cudasim::detail::note_atomic();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif
inline void __threadfence_block() { __threadfence(); }
inline void __threadfence_system() { __threadfence(); }

// Nanoseconds of wall clock: monotonic like the GPU's cycle counter, not comparable to it.
inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

template <typename T> inline T __ldg(const T *p) { return *p; }
// Loads and stores with cache hints (streaming, global-only, all levels, last use, volatile;
// write-back, write-through): the hint changes caching only, so each is a plain access here.
template <typename T> inline T __ldcs(const T *p) { return *p; }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline T __ldca(const T *p) { return *p; }
template <typename T> inline T __ldlu(const T *p) { return *p; }
template <typename T> inline T __ldcv(const T *p) { return *p; }
template <typename T> inline void __stcs(T *p, T v) { *p = v; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }
template <typename T> inline void __stwb(T *p, T v) { *p = v; }
template <typename T> inline void __stwt(T *p, T v) { *p = v; }

namespace cudasim {
namespace detail {
void nanosleep_yield(const char *file, int line);
} // namespace detail
} // namespace cudasim
// A thread that sleeps lets the other threads of its block run (the simulator runs them one at
// a time): a spin-wait on a flag set by another warp of the block ends, as on a GPU.
inline void __nanosleep(unsigned ns, const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    (void)ns;
    cudasim::detail::nanosleep_yield(file, line);
}

// ---- float intrinsics: the host's correctly rounded functions stand in for the fast ones --------
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline void __sincosf(float x, float *s, float *c) {
    *s = sinf(x);
    *c = cosf(x);
}
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(nearbyintf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }

// ---- bit reinterpretation ---------------------------------------------------------------------
namespace cudasim {
namespace detail {
template <typename To, typename From> inline To bit_cast(From v) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
    To out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
} // namespace detail
} // namespace cudasim
inline float __int_as_float(int x) { return cudasim::detail::bit_cast<float>(x); }
inline int __float_as_int(float x) { return cudasim::detail::bit_cast<int>(x); }
inline float __uint_as_float(unsigned x) { return cudasim::detail::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return cudasim::detail::bit_cast<unsigned>(x); }
inline double __longlong_as_double(long long x) { return cudasim::detail::bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return cudasim::detail::bit_cast<long long>(x); }

// ---- integer intrinsics -------------------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i, x >>= 1)
        r = (r << 1) | (x & 1u);
    return r;
}
inline int __mul24(int x, int y) { return x * y; }
inline unsigned __umul24(unsigned x, unsigned y) { return x * y; }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
    return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}

// ---- min / max: CUDA's overloads, which the host lacks in the global namespace -----------------
#define CUDASIM_MINMAX(R, A, B)                                                                    \
    inline R min(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? a : b; }               \
    inline R max(A a, B b) { return static_cast<R>(a) > static_cast<R>(b) ? a : b; }
CUDASIM_MINMAX(int, int, int)
CUDASIM_MINMAX(unsigned int, unsigned int, unsigned int)
CUDASIM_MINMAX(unsigned int, int, unsigned int)
CUDASIM_MINMAX(unsigned int, unsigned int, int)
CUDASIM_MINMAX(long, long, long)
CUDASIM_MINMAX(unsigned long, unsigned long, unsigned long)
CUDASIM_MINMAX(unsigned long, long, unsigned long)
CUDASIM_MINMAX(unsigned long, unsigned long, long)
CUDASIM_MINMAX(long long, long long, long long)
CUDASIM_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUDASIM_MINMAX(unsigned long long, long long, unsigned long long)
CUDASIM_MINMAX(unsigned long long, unsigned long long, long long)
#undef CUDASIM_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

#endif // CUDASIM_DEVICE_FUNCTIONS_H
