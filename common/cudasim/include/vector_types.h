/* vector_types.h (cudasim) — CUDA's built-in vector types (float2, int4, ...), uint3 and dim3 with
 * the toolkit's names, layouts and alignments, for host C and C++. make_<type>() builds each one.
 */
#ifndef CUDASIM_VECTOR_TYPES_H
#define CUDASIM_VECTOR_TYPES_H

#define CUDASIM_ALIGN(n) __attribute__((aligned(n)))

/* In an instrumented kernel file (the sim-check preset defines CUDASIM_TRACE_COPIES there), an
 * assignment of a vector wider than 8 bytes (uint4, float4, int3, double2, ...) is one traced
 * load and one traced store of the whole vector: the compiler would turn it into a memcpy, which
 * the instrumentation does not see (common/cudasim/README.md, "The profile"). Vectors of 8 bytes
 * or less are copied by plain loads and stores, which it does see, and stay trivially copyable
 * (warp shuffles take them). */
/* Their copy constructor is made non-trivial too, by an empty member that takes no room: the
 * initialisation `float4 v = *p` then binds a reference to *p, which -fsanitize=alignment checks
 * (a trivial copy is an unchecked memcpy), so a misaligned vector load is reported there as a GPU
 * would fault on it. */
#if defined(__cplusplus) && defined(CUDASIM_TRACE_COPIES)
extern "C" void cudasim_traced_copy(void *dst, const void *src, unsigned long bytes);
struct cudasim_copy_probe {
    cudasim_copy_probe() = default;
    cudasim_copy_probe(const cudasim_copy_probe &) {}
    cudasim_copy_probe &operator=(const cudasim_copy_probe &) = default;
};
#define CUDASIM_WIDE_ASSIGN(type)                                                                  \
    [[no_unique_address]] cudasim_copy_probe cudasim_probe_;                                       \
    type &operator=(const type &o) {                                                               \
        cudasim_traced_copy(this, &o, sizeof(type));                                               \
        return *this;                                                                              \
    }
#else
#define CUDASIM_WIDE_ASSIGN(type)
#endif
#define CUDASIM_NARROW(type)

/* <name>1..4 of element type T; A2 and A4: the alignments of the 2- and 4-vectors (the 1- and
 * 3-vectors have the element's); C2 and C34: CUDASIM_WIDE_ASSIGN for the 2-, and the 3- and
 * 4-vectors wider than 8 bytes, else CUDASIM_NARROW. */
#define CUDASIM_VECTOR_TYPES(T, name, A2, A4, C2, C34)                                             \
    typedef struct CUDASIM_ALIGN(sizeof(T)) name##1 {                                              \
        T x;                                                                                       \
    }                                                                                              \
    name##1;                                                                                       \
    typedef struct CUDASIM_ALIGN(A2) name##2 {                                                     \
        T x, y;                                                                                    \
        C2(name##2)                                                                                \
    }                                                                                              \
    name##2;                                                                                       \
    typedef struct name##3 {                                                                       \
        T x, y, z;                                                                                 \
        C34(name##3)                                                                               \
    }                                                                                              \
    name##3;                                                                                       \
    typedef struct CUDASIM_ALIGN(A4) name##4 {                                                     \
        T x, y, z, w;                                                                              \
        C34(name##4)                                                                               \
    }                                                                                              \
    name##4;                                                                                       \
    static inline name##1 make_##name##1(T x) {                                                    \
        name##1 v = {x};                                                                           \
        return v;                                                                                  \
    }                                                                                              \
    static inline name##2 make_##name##2(T x, T y) {                                               \
        name##2 v = {x, y};                                                                        \
        return v;                                                                                  \
    }                                                                                              \
    static inline name##3 make_##name##3(T x, T y, T z) {                                          \
        name##3 v = {x, y, z};                                                                     \
        return v;                                                                                  \
    }                                                                                              \
    static inline name##4 make_##name##4(T x, T y, T z, T w) {                                     \
        name##4 v = {x, y, z, w};                                                                  \
        return v;                                                                                  \
    }

#if defined(__cplusplus) && defined(CUDASIM_TRACE_COPIES) && defined(__clang__)
/* The implicit copy constructor stays (a plain copy; only assignments are traced). */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-copy-with-user-provided-copy"
#endif
CUDASIM_VECTOR_TYPES(signed char, char, 2, 4, CUDASIM_NARROW, CUDASIM_NARROW)
CUDASIM_VECTOR_TYPES(unsigned char, uchar, 2, 4, CUDASIM_NARROW, CUDASIM_NARROW)
CUDASIM_VECTOR_TYPES(short, short, 4, 8, CUDASIM_NARROW, CUDASIM_NARROW)
CUDASIM_VECTOR_TYPES(unsigned short, ushort, 4, 8, CUDASIM_NARROW, CUDASIM_NARROW)
CUDASIM_VECTOR_TYPES(int, int, 8, 16, CUDASIM_NARROW, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(unsigned int, uint, 8, 16, CUDASIM_NARROW, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(long, long, 16, 16, CUDASIM_WIDE_ASSIGN, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(unsigned long, ulong, 16, 16, CUDASIM_WIDE_ASSIGN, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(long long, longlong, 16, 16, CUDASIM_WIDE_ASSIGN, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(unsigned long long, ulonglong, 16, 16, CUDASIM_WIDE_ASSIGN,
                     CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(float, float, 8, 16, CUDASIM_NARROW, CUDASIM_WIDE_ASSIGN)
CUDASIM_VECTOR_TYPES(double, double, 16, 16, CUDASIM_WIDE_ASSIGN, CUDASIM_WIDE_ASSIGN)
#if defined(__cplusplus) && defined(CUDASIM_TRACE_COPIES) && defined(__clang__)
#pragma clang diagnostic pop
#endif
#undef CUDASIM_VECTOR_TYPES
#undef CUDASIM_WIDE_ASSIGN
#undef CUDASIM_NARROW

#ifdef __cplusplus
/* dim3: a uint3 whose unspecified components default to 1, convertible from an integer. */
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
#else
typedef struct dim3 {
    unsigned int x, y, z;
} dim3;
#endif

#endif /* CUDASIM_VECTOR_TYPES_H */
