/* vector_types.h (cudasim) — CUDA's built-in vector types (float2, int4, ...), uint3 and dim3 with
 * the toolkit's names, layouts and alignments, for host C and C++. make_<type>() builds each one.
 */
#ifndef CUDASIM_VECTOR_TYPES_H
#define CUDASIM_VECTOR_TYPES_H

#define CUDASIM_ALIGN(n) __attribute__((aligned(n)))

typedef struct CUDASIM_ALIGN(1) char1 { signed char x; } char1;
typedef struct CUDASIM_ALIGN(2) char2 { signed char x; signed char y; } char2;
typedef struct CUDASIM_ALIGN(1) char3 { signed char x; signed char y; signed char z; } char3;
typedef struct CUDASIM_ALIGN(4) char4 { signed char x; signed char y; signed char z; signed char w; } char4;
typedef struct CUDASIM_ALIGN(1) uchar1 { unsigned char x; } uchar1;
typedef struct CUDASIM_ALIGN(2) uchar2 { unsigned char x; unsigned char y; } uchar2;
typedef struct CUDASIM_ALIGN(1) uchar3 { unsigned char x; unsigned char y; unsigned char z; } uchar3;
typedef struct CUDASIM_ALIGN(4) uchar4 { unsigned char x; unsigned char y; unsigned char z; unsigned char w; } uchar4;
typedef struct CUDASIM_ALIGN(2) short1 { short x; } short1;
typedef struct CUDASIM_ALIGN(4) short2 { short x; short y; } short2;
typedef struct CUDASIM_ALIGN(2) short3 { short x; short y; short z; } short3;
typedef struct CUDASIM_ALIGN(8) short4 { short x; short y; short z; short w; } short4;
typedef struct CUDASIM_ALIGN(2) ushort1 { unsigned short x; } ushort1;
typedef struct CUDASIM_ALIGN(4) ushort2 { unsigned short x; unsigned short y; } ushort2;
typedef struct CUDASIM_ALIGN(2) ushort3 { unsigned short x; unsigned short y; unsigned short z; } ushort3;
typedef struct CUDASIM_ALIGN(8) ushort4 { unsigned short x; unsigned short y; unsigned short z; unsigned short w; } ushort4;
typedef struct CUDASIM_ALIGN(4) int1 { int x; } int1;
typedef struct CUDASIM_ALIGN(8) int2 { int x; int y; } int2;
typedef struct CUDASIM_ALIGN(4) int3 { int x; int y; int z; } int3;
typedef struct CUDASIM_ALIGN(16) int4 { int x; int y; int z; int w; } int4;
typedef struct CUDASIM_ALIGN(4) uint1 { unsigned int x; } uint1;
typedef struct CUDASIM_ALIGN(8) uint2 { unsigned int x; unsigned int y; } uint2;
typedef struct CUDASIM_ALIGN(4) uint3 { unsigned int x; unsigned int y; unsigned int z; } uint3;
typedef struct CUDASIM_ALIGN(16) uint4 { unsigned int x; unsigned int y; unsigned int z; unsigned int w; } uint4;
typedef struct CUDASIM_ALIGN(8) long1 { long x; } long1;
typedef struct CUDASIM_ALIGN(16) long2 { long x; long y; } long2;
typedef struct CUDASIM_ALIGN(8) long3 { long x; long y; long z; } long3;
typedef struct CUDASIM_ALIGN(16) long4 { long x; long y; long z; long w; } long4;
typedef struct CUDASIM_ALIGN(8) ulong1 { unsigned long x; } ulong1;
typedef struct CUDASIM_ALIGN(16) ulong2 { unsigned long x; unsigned long y; } ulong2;
typedef struct CUDASIM_ALIGN(8) ulong3 { unsigned long x; unsigned long y; unsigned long z; } ulong3;
typedef struct CUDASIM_ALIGN(16) ulong4 { unsigned long x; unsigned long y; unsigned long z; unsigned long w; } ulong4;
typedef struct CUDASIM_ALIGN(8) longlong1 { long long x; } longlong1;
typedef struct CUDASIM_ALIGN(16) longlong2 { long long x; long long y; } longlong2;
typedef struct CUDASIM_ALIGN(8) longlong3 { long long x; long long y; long long z; } longlong3;
typedef struct CUDASIM_ALIGN(16) longlong4 { long long x; long long y; long long z; long long w; } longlong4;
typedef struct CUDASIM_ALIGN(8) ulonglong1 { unsigned long long x; } ulonglong1;
typedef struct CUDASIM_ALIGN(16) ulonglong2 { unsigned long long x; unsigned long long y; } ulonglong2;
typedef struct CUDASIM_ALIGN(8) ulonglong3 { unsigned long long x; unsigned long long y; unsigned long long z; } ulonglong3;
typedef struct CUDASIM_ALIGN(16) ulonglong4 { unsigned long long x; unsigned long long y; unsigned long long z; unsigned long long w; } ulonglong4;
typedef struct CUDASIM_ALIGN(4) float1 { float x; } float1;
typedef struct CUDASIM_ALIGN(8) float2 { float x; float y; } float2;
typedef struct CUDASIM_ALIGN(4) float3 { float x; float y; float z; } float3;
typedef struct CUDASIM_ALIGN(16) float4 { float x; float y; float z; float w; } float4;
typedef struct CUDASIM_ALIGN(8) double1 { double x; } double1;
typedef struct CUDASIM_ALIGN(16) double2 { double x; double y; } double2;
typedef struct CUDASIM_ALIGN(8) double3 { double x; double y; double z; } double3;
typedef struct CUDASIM_ALIGN(16) double4 { double x; double y; double z; double w; } double4;
static inline char1 make_char1(signed char x) { char1 v = {x}; return v; }
static inline char2 make_char2(signed char x, signed char y) { char2 v = {x, y}; return v; }
static inline char3 make_char3(signed char x, signed char y, signed char z) { char3 v = {x, y, z}; return v; }
static inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) { char4 v = {x, y, z, w}; return v; }
static inline uchar1 make_uchar1(unsigned char x) { uchar1 v = {x}; return v; }
static inline uchar2 make_uchar2(unsigned char x, unsigned char y) { uchar2 v = {x, y}; return v; }
static inline uchar3 make_uchar3(unsigned char x, unsigned char y, unsigned char z) { uchar3 v = {x, y, z}; return v; }
static inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { uchar4 v = {x, y, z, w}; return v; }
static inline short1 make_short1(short x) { short1 v = {x}; return v; }
static inline short2 make_short2(short x, short y) { short2 v = {x, y}; return v; }
static inline short3 make_short3(short x, short y, short z) { short3 v = {x, y, z}; return v; }
static inline short4 make_short4(short x, short y, short z, short w) { short4 v = {x, y, z, w}; return v; }
static inline ushort1 make_ushort1(unsigned short x) { ushort1 v = {x}; return v; }
static inline ushort2 make_ushort2(unsigned short x, unsigned short y) { ushort2 v = {x, y}; return v; }
static inline ushort3 make_ushort3(unsigned short x, unsigned short y, unsigned short z) { ushort3 v = {x, y, z}; return v; }
static inline ushort4 make_ushort4(unsigned short x, unsigned short y, unsigned short z, unsigned short w) { ushort4 v = {x, y, z, w}; return v; }
static inline int1 make_int1(int x) { int1 v = {x}; return v; }
static inline int2 make_int2(int x, int y) { int2 v = {x, y}; return v; }
static inline int3 make_int3(int x, int y, int z) { int3 v = {x, y, z}; return v; }
static inline int4 make_int4(int x, int y, int z, int w) { int4 v = {x, y, z, w}; return v; }
static inline uint1 make_uint1(unsigned int x) { uint1 v = {x}; return v; }
static inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 v = {x, y}; return v; }
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 v = {x, y, z}; return v; }
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { uint4 v = {x, y, z, w}; return v; }
static inline long1 make_long1(long x) { long1 v = {x}; return v; }
static inline long2 make_long2(long x, long y) { long2 v = {x, y}; return v; }
static inline long3 make_long3(long x, long y, long z) { long3 v = {x, y, z}; return v; }
static inline long4 make_long4(long x, long y, long z, long w) { long4 v = {x, y, z, w}; return v; }
static inline ulong1 make_ulong1(unsigned long x) { ulong1 v = {x}; return v; }
static inline ulong2 make_ulong2(unsigned long x, unsigned long y) { ulong2 v = {x, y}; return v; }
static inline ulong3 make_ulong3(unsigned long x, unsigned long y, unsigned long z) { ulong3 v = {x, y, z}; return v; }
static inline ulong4 make_ulong4(unsigned long x, unsigned long y, unsigned long z, unsigned long w) { ulong4 v = {x, y, z, w}; return v; }
static inline longlong1 make_longlong1(long long x) { longlong1 v = {x}; return v; }
static inline longlong2 make_longlong2(long long x, long long y) { longlong2 v = {x, y}; return v; }
static inline longlong3 make_longlong3(long long x, long long y, long long z) { longlong3 v = {x, y, z}; return v; }
static inline longlong4 make_longlong4(long long x, long long y, long long z, long long w) { longlong4 v = {x, y, z, w}; return v; }
static inline ulonglong1 make_ulonglong1(unsigned long long x) { ulonglong1 v = {x}; return v; }
static inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { ulonglong2 v = {x, y}; return v; }
static inline ulonglong3 make_ulonglong3(unsigned long long x, unsigned long long y, unsigned long long z) { ulonglong3 v = {x, y, z}; return v; }
static inline ulonglong4 make_ulonglong4(unsigned long long x, unsigned long long y, unsigned long long z, unsigned long long w) { ulonglong4 v = {x, y, z, w}; return v; }
static inline float1 make_float1(float x) { float1 v = {x}; return v; }
static inline float2 make_float2(float x, float y) { float2 v = {x, y}; return v; }
static inline float3 make_float3(float x, float y, float z) { float3 v = {x, y, z}; return v; }
static inline float4 make_float4(float x, float y, float z, float w) { float4 v = {x, y, z, w}; return v; }
static inline double1 make_double1(double x) { double1 v = {x}; return v; }
static inline double2 make_double2(double x, double y) { double2 v = {x, y}; return v; }
static inline double3 make_double3(double x, double y, double z) { double3 v = {x, y, z}; return v; }
static inline double4 make_double4(double x, double y, double z, double w) { double4 v = {x, y, z, w}; return v; }
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
