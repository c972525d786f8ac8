// device/sm90.cuh — Hopper's (sm_90a) asynchronous building blocks for example 10
// (FlashAttention-3): mbarriers, named barriers, setmaxnreg, TMA copies (cp.async.bulk.tensor
// with a CUtensorMap, and the plain bulk copy) and wgmma (warpgroup MMA, m64nNk16 on f16/bf16 and
// m64nNk32 on e4m3 and e5m2, f32 accumulators, N = 64 or 128).
//
// Each function is one PTX instruction (or a short fixed sequence) on a GPU compiled for sm_90a;
// compiled for another GPU it traps (such a kernel must not be launched there). Under the
// simulator (CUDASIM) each calls the simulator's version (common/cudasim/include/cudasim/sm90.h),
// which checks the protocol these instructions rely on: see that header for what it reports.
//
// ---- the pieces, and who calls them ----------------------------------------------------------
// mbarrier (a 64-bit object in shared memory): mbarrier_init by one thread (count = arrivals
// per phase), then fence_barrier_init and __syncthreads before others use it. A phase completes
// when `count` arrivals happened and the transaction count (bytes announced by
// mbarrier_arrive_expect_tx, less bytes delivered by TMA copies naming the barrier) is zero.
// mbarrier_wait(bar, parity) returns once the phase of that parity completed: a consumer of a
// circular buffer waits with parity (iteration / stages) % 2 on stage iteration % stages.
//
// TMA: tma_load_Nd(dst, map, bar, c0, c1, ...) copies the box of the tensor map at coordinates
// (c0 innermost) into shared memory at dst (128-byte aligned; its swizzle as the map says) and
// delivers its bytes to bar; elements outside the tensor are zeros. One thread issues it.
//
// wgmma: the 128 threads of a warpgroup (4 consecutive warps) issue it together. D (64 x N) is
// spread over the warpgroup, N / 2 floats per thread: thread t holds, in register i,
//     row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2),   column 8 (i / 4) + 2 (t % 4) + i % 2
// (warp w owns rows 16w..16w+15, and within them the layout of mma.sync's C fragment, repeated
// along N). A comes from shared memory (a descriptor) or from registers (4 words per thread, the
// layout of mma.sync m16n8k16's A fragment for the warp's 16 rows); B from shared memory. The
// descriptor (wgmma_desc) holds the start address, the leading and stride byte offsets and the
// swizzle mode of a canonical layout (drawn in the simulator's sm90.h, operand_address). The
// sequence is:
//     wgmma_fence();                       // registers written before are visible to wgmma
//     wgmma_ss_f16<N>(d, a_desc, b_desc, scale_d);   ... (several, same accumulator)
//     wgmma_commit_group();
//     wgmma_wait_group<0>();               // d is valid only after this
// The layouts are the PTX ISA's (sections on wgmma's register fragments, "Matrix Descriptor
// Format", "Shared Memory Matrix Layout"); tests/cudasim/test_sm90.cu checks them.
#ifndef ATTN_SM90_CUH
#define ATTN_SM90_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifdef CUDASIM
#include <cudasim/sm90.h>
#define ATTN_SM90_SITE , const char *file = __builtin_FILE(), int line = __builtin_LINE()
#define ATTN_SM90_SITE_ONLY const char *file = __builtin_FILE(), int line = __builtin_LINE()
#else
#define ATTN_SM90_SITE
#define ATTN_SM90_SITE_ONLY
#endif

// ---- the host's tensor maps
// attn_encode_tensor_map: cuTensorMapEncodeTiled (same arguments). On a GPU build the driver's
// function is looked up through the runtime (cudaGetDriverEntryPointByVersion, CUDA 12.0's
// signature), so that the program does not link libcuda: on a machine without a GPU driver it
// starts and says so (exit 77) instead of failing to load. On the simulator it is cuda.h's.
static inline CUresult attn_encode_tensor_map(CUtensorMap *map, CUtensorMapDataType type,
                                              cuuint32_t rank, void *address, const cuuint64_t *dim,
                                              const cuuint64_t *strides, const cuuint32_t *box,
                                              const cuuint32_t *elem_strides,
                                              CUtensorMapInterleave interleave,
                                              CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                              CUtensorMapFloatOOBfill oob) {
#ifdef CUDASIM
    return cuTensorMapEncodeTiled(map, type, rank, address, dim, strides, box, elem_strides,
                                  interleave, swizzle, l2, oob);
#else
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    static encode_fn encode = nullptr;
    if (encode == nullptr) {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || fn == nullptr)
            return CUDA_ERROR_NOT_FOUND;
        encode = reinterpret_cast<encode_fn>(fn);
    }
    return encode(map, type, rank, address, dim, strides, box, elem_strides, interleave, swizzle,
                  l2, oob);
#endif
}

// The instructions exist on sm_90a only: elsewhere on a GPU a call traps.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_SM90_PTX 1
#else
#define ATTN_SM90_PTX 0
#endif
#if defined(__CUDA_ARCH__) && !ATTN_SM90_PTX
#define ATTN_SM90_UNSUPPORTED() __trap()
#else
#define ATTN_SM90_UNSUPPORTED()
#endif

// Shared-memory swizzle modes, numbered as the descriptor's bits 62-63 (and CuTe's LayoutType).
enum attn_smem_layout : unsigned {
    ATTN_SMEM_INTERLEAVE = 0,
    ATTN_SMEM_SW128 = 1,
    ATTN_SMEM_SW64 = 2,
    ATTN_SMEM_SW32 = 3
};

// The shared-window address of p (on the simulator: its offset in dynamic shared memory).
__device__ __forceinline__ uint32_t smem_address(const void *p ATTN_SM90_SITE) {
#ifdef CUDASIM
    return cudasim::sm90::shared_address(p, "smem_address()", file, line);
#else
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

// The matrix descriptor of an operand at `smem`: bits 0-13 start address / 16, 16-29 leading
// byte offset / 16, 32-45 stride byte offset / 16, 49-51 base offset (0), 62-63 layout.
__device__ __forceinline__ uint64_t wgmma_desc(const void *smem, uint32_t lbo_bytes,
                                               uint32_t sbo_bytes, unsigned layout ATTN_SM90_SITE) {
#ifdef CUDASIM
    uint32_t a = cudasim::sm90::shared_address(smem, "wgmma_desc()", file, line);
#else
    uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
#endif
    return static_cast<uint64_t>((a >> 4) & 0x3fff) |
           static_cast<uint64_t>((lbo_bytes >> 4) & 0x3fff) << 16 |
           static_cast<uint64_t>((sbo_bytes >> 4) & 0x3fff) << 32 |
           static_cast<uint64_t>(layout & 3) << 62;
}

// ---- mbarrier
// ------------------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(uint64_t *bar, unsigned count ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::mbarrier_init(bar, count, file, line);
#elif ATTN_SM90_PTX
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count)
                 : "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}

// Makes the initialised mbarriers visible to the async proxy (the TMA unit).
__device__ __forceinline__ void fence_barrier_init() {
#if !defined(CUDASIM) && ATTN_SM90_PTX
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Orders this thread's generic-proxy accesses of shared memory before later async-proxy ones.
__device__ __forceinline__ void fence_proxy_async() {
#if !defined(CUDASIM) && ATTN_SM90_PTX
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::mbarrier_arrive(bar, 1, 0, file, line);
#elif ATTN_SM90_PTX
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                     smem_address(bar))
                 : "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}

// Announces `bytes` more of transactions in the current phase, and arrives.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar,
                                                          uint32_t bytes ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::mbarrier_arrive(bar, 1, bytes, file, line);
#elif ATTN_SM90_PTX
    asm volatile(
        "{\n.reg .b64 state;\n"
        "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(smem_address(bar)),
        "r"(bytes)
        : "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}

// True once the phase of parity `parity` has completed (a single test, may return false).
__device__ __forceinline__ bool mbarrier_try_wait(uint64_t *bar, unsigned parity ATTN_SM90_SITE) {
#ifdef CUDASIM
    return cudasim::sm90::mbarrier_try_wait(bar, parity, false, file, line);
#elif ATTN_SM90_PTX
    uint32_t done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_address(bar)), "r"(parity)
                 : "memory");
    return done != 0;
#else
    ATTN_SM90_UNSUPPORTED();
    return true;
#endif
}

// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, unsigned parity ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::mbarrier_try_wait(bar, parity, true, file, line);
#else
    while (!mbarrier_try_wait(bar, parity)) {
    }
#endif
}

// ---- named barriers (bar.sync / bar.arrive id, count): count threads, whole warps ------------
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned count ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::named_barrier(id, count, true, file, line);
#else
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned count ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::named_barrier(id, count, false, file, line);
#else
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#endif
}

// ---- setmaxnreg: a warpgroup gives registers back (dec) or takes more (inc) -------------------
template <unsigned REGS> __device__ __forceinline__ void setmaxnreg_inc(ATTN_SM90_SITE_ONLY) {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg: 24..256, by 8");
#ifdef CUDASIM
    cudasim::sm90::setmaxnreg(REGS, true, file, line);
#elif ATTN_SM90_PTX
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}
template <unsigned REGS> __device__ __forceinline__ void setmaxnreg_dec(ATTN_SM90_SITE_ONLY) {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg: 24..256, by 8");
#ifdef CUDASIM
    cudasim::sm90::setmaxnreg(REGS, false, file, line);
#elif ATTN_SM90_PTX
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}

// ---- TMA
// ------------------------------------------------------------------------------------------
#ifdef CUDASIM
#define ATTN_TMA_BODY(DIMS, PTX_COORDS, ...)                                                       \
    const int32_t c[] = {__VA_ARGS__};                                                             \
    cudasim::sm90::tma_load(dst, map, bar, DIMS, c, file, line);
#elif ATTN_SM90_PTX
#define ATTN_TMA_BODY(DIMS, PTX_COORDS, ...)                                                       \
    asm volatile("cp.async.bulk.tensor." #DIMS "d.shared::cluster.global.mbarrier::complete_tx"    \
                 "::bytes [%0], [%1, {" PTX_COORDS "}], [%2];\n" ::"r"(smem_address(dst)),         \
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)),                     \
                 ATTN_TMA_R(__VA_ARGS__)                                                           \
                 : "memory");
#else
#define ATTN_TMA_BODY(DIMS, PTX_COORDS, ...) ATTN_SM90_UNSUPPORTED();
#endif
#define ATTN_TMA_R(...) ATTN_TMA_R_N(__VA_ARGS__, 5, 4, 3, 2, 1)
#define ATTN_TMA_R_N(a, b, c, d, e, n, ...) ATTN_TMA_R##n(a, b, c, d, e)
#define ATTN_TMA_R2(a, b, ...) "r"(a), "r"(b)
#define ATTN_TMA_R3(a, b, c, ...) "r"(a), "r"(b), "r"(c)
#define ATTN_TMA_R4(a, b, c, d, ...) "r"(a), "r"(b), "r"(c), "r"(d)
#define ATTN_TMA_R5(a, b, c, d, e) "r"(a), "r"(b), "r"(c), "r"(d), "r"(e)
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                            int c0, int c1 ATTN_SM90_SITE){
    ATTN_TMA_BODY(2, "%3, %4", c0, c1)} __device__ __forceinline__
    void tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1,
                     int c2 ATTN_SM90_SITE){
        ATTN_TMA_BODY(3, "%3, %4, %5", c0, c1, c2)} __device__ __forceinline__
    void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, int c2,
                     int c3 ATTN_SM90_SITE){
        ATTN_TMA_BODY(4, "%3, %4, %5, %6", c0, c1, c2, c3)} __device__ __forceinline__
    void tma_load_5d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, int c2,
                     int c3, int c4 ATTN_SM90_SITE) {
    ATTN_TMA_BODY(5, "%3, %4, %5, %6, %7", c0, c1, c2, c3, c4)
}
#undef ATTN_TMA_BODY

// The plain bulk copy: `bytes` (a multiple of 16) from global memory to shared memory, both
// 16-byte aligned, delivered to bar.
__device__ __forceinline__ void bulk_copy_g2s(void *dst, const void *src, uint32_t bytes,
                                              uint64_t *bar ATTN_SM90_SITE) {
#ifdef CUDASIM
    cudasim::sm90::bulk_copy(dst, src, bytes, bar, file, line);
#elif ATTN_SM90_PTX
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];\n" ::"r"(smem_address(dst)),
                 "l"(src), "r"(bytes), "r"(smem_address(bar))
                 : "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}

// ---- wgmma
// ----------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence(ATTN_SM90_SITE_ONLY) {
#ifdef CUDASIM
    cudasim::sm90::wgmma_fence(file, line);
#elif ATTN_SM90_PTX
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}
__device__ __forceinline__ void wgmma_commit_group(ATTN_SM90_SITE_ONLY) {
#ifdef CUDASIM
    cudasim::sm90::wgmma_commit(file, line);
#elif ATTN_SM90_PTX
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}
// Waits until at most N of this warpgroup's committed wgmma groups are in flight.
template <int N> __device__ __forceinline__ void wgmma_wait_group(ATTN_SM90_SITE_ONLY) {
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group N: 0..7");
#ifdef CUDASIM
    cudasim::sm90::wgmma_wait(N, file, line);
#elif ATTN_SM90_PTX
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    ATTN_SM90_UNSUPPORTED();
#endif
}
// After wgmma_wait_group, the compiler must not move reads of the accumulator above it: the
// registers are "+f" operands of the wait's neighbours on a GPU. (The simulator needs nothing.)
template <int R> __device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#if !defined(CUDASIM)
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
#else
    (void)d;
#endif
}

// Register lists of the accumulator (the inline assembly's operands %0.. and d[0..]).
#define ATTN_WG_R32                                                                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "                                           \
    "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "                                 \
    "%24, %25, %26, %27, %28, %29, %30, %31"
#define ATTN_WG_R64                                                                                \
    ATTN_WG_R32 ", "                                                                               \
                "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "                     \
                "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "                     \
                "%56, %57, %58, %59, %60, %61, %62, %63"
#define ATTN_WG_D32                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define ATTN_WG_D64                                                                                \
    ATTN_WG_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),     \
        "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), \
        "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), \
        "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), \
        "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// wgmma_ss_<type><N, TA, TB>(d, a_desc, b_desc, scale_d): D = A * B + (scale_d ? D : 0), A and B
// from shared memory; TA / TB = 1: that operand is MN-major (f16 / bf16 only). d: N / 2 floats.
// wgmma_rs_<type><N, TB>(d, a, b_desc, scale_d): A from registers (4 words per thread).
#ifdef CUDASIM
#define ATTN_WGMMA_SS(NAME, T)                                                                     \
    template <int N, int TA = 0, int TB = 0>                                                       \
    __device__ __forceinline__ void NAME(float *d, uint64_t a_desc, uint64_t b_desc,               \
                                         bool scale_d ATTN_SM90_SITE) {                            \
        static_assert(N == 64 || N == 128, #NAME ": N = 64 or 128");                               \
        cudasim::sm90::wgmma(d, N, cudasim::sm90::wg_type::T, nullptr, a_desc, b_desc, scale_d,    \
                             TA, TB, file, line);                                                  \
    }
#define ATTN_WGMMA_RS(NAME, T)                                                                     \
    template <int N, int TB = 0>                                                                   \
    __device__ __forceinline__ void NAME(float *d, const uint32_t *a, uint64_t b_desc,             \
                                         bool scale_d ATTN_SM90_SITE) {                            \
        static_assert(N == 64 || N == 128, #NAME ": N = 64 or 128");                               \
        cudasim::sm90::wgmma(d, N, cudasim::sm90::wg_type::T, a, 0, b_desc, scale_d, false, TB,    \
                             file, line);                                                          \
    }
#elif ATTN_SM90_PTX
#define ATTN_WGMMA_SS(NAME, T)                                                                     \
    template <int N, int TA = 0, int TB = 0>                                                       \
    __device__ __forceinline__ void NAME(float *d, uint64_t a_desc, uint64_t b_desc,               \
                                         bool scale_d) {                                           \
        static_assert(N == 64 || N == 128, #NAME ": N = 64 or 128");                               \
        if constexpr (N == 64)                                                                     \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." #T "." #T " "               \
                         "{" ATTN_WG_R32 "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                    \
                         : ATTN_WG_D32                                                             \
                         : "l"(a_desc), "l"(b_desc), "r"(int(scale_d)), "n"(TA), "n"(TB));         \
        else                                                                                       \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." #T "." #T " "              \
                         "{" ATTN_WG_R64 "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                    \
                         : ATTN_WG_D64                                                             \
                         : "l"(a_desc), "l"(b_desc), "r"(int(scale_d)), "n"(TA), "n"(TB));         \
    }
#define ATTN_WGMMA_RS(NAME, T)                                                                     \
    template <int N, int TB = 0>                                                                   \
    __device__ __forceinline__ void NAME(float *d, const uint32_t *a, uint64_t b_desc,             \
                                         bool scale_d) {                                           \
        static_assert(N == 64 || N == 128, #NAME ": N = 64 or 128");                               \
        if constexpr (N == 64)                                                                     \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." #T "." #T " "               \
                         "{" ATTN_WG_R32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"        \
                         : ATTN_WG_D32                                                             \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc),                \
                           "r"(int(scale_d)), "n"(TB));                                            \
        else                                                                                       \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." #T "." #T " "              \
                         "{" ATTN_WG_R64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"        \
                         : ATTN_WG_D64                                                             \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc),                \
                           "r"(int(scale_d)), "n"(TB));                                            \
    }
#else
#define ATTN_WGMMA_SS(NAME, T)                                                                     \
    template <int N, int TA = 0, int TB = 0>                                                       \
    __device__ __forceinline__ void NAME(float *, uint64_t, uint64_t, bool) {                      \
        ATTN_SM90_UNSUPPORTED();                                                                   \
    }
#define ATTN_WGMMA_RS(NAME, T)                                                                     \
    template <int N, int TB = 0>                                                                   \
    __device__ __forceinline__ void NAME(float *, const uint32_t *, uint64_t, bool) {              \
        ATTN_SM90_UNSUPPORTED();                                                                   \
    }
#endif
ATTN_WGMMA_SS(wgmma_ss_f16, f16)
ATTN_WGMMA_SS(wgmma_ss_bf16, bf16)
ATTN_WGMMA_RS(wgmma_rs_f16, f16)
ATTN_WGMMA_RS(wgmma_rs_bf16, bf16)
#undef ATTN_WGMMA_SS
#undef ATTN_WGMMA_RS

// FP8 (e4m3 or e5m2, both operands the same), m64nNk32: the same with 32 values of K per call,
// K-major operands only (no transpose flags).
#ifdef CUDASIM
#define ATTN_WGMMA_FP8(T)                                                                          \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_ss_##T(float *d, uint64_t a_desc, uint64_t b_desc,       \
                                                 bool scale_d ATTN_SM90_SITE) {                    \
        static_assert(N == 64 || N == 128, "wgmma_ss_" #T ": N = 64 or 128");                      \
        cudasim::sm90::wgmma(d, N, cudasim::sm90::wg_type::T, nullptr, a_desc, b_desc, scale_d,    \
                             false, false, file, line);                                            \
    }                                                                                              \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_rs_##T(float *d, const uint32_t *a, uint64_t b_desc,     \
                                                 bool scale_d ATTN_SM90_SITE) {                    \
        static_assert(N == 64 || N == 128, "wgmma_rs_" #T ": N = 64 or 128");                      \
        cudasim::sm90::wgmma(d, N, cudasim::sm90::wg_type::T, a, 0, b_desc, scale_d, false, false, \
                             file, line);                                                          \
    }
#elif ATTN_SM90_PTX
#define ATTN_WGMMA_FP8(T)                                                                          \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_ss_##T(float *d, uint64_t a_desc, uint64_t b_desc,       \
                                                 bool scale_d) {                                   \
        static_assert(N == 64 || N == 128, "wgmma_ss_" #T ": N = 64 or 128");                      \
        if constexpr (N == 64)                                                                     \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n64k32.f32." #T "." #T " "               \
                         "{" ATTN_WG_R32 "}, %32, %33, p, 1, 1;\n}\n"                              \
                         : ATTN_WG_D32                                                             \
                         : "l"(a_desc), "l"(b_desc), "r"(int(scale_d)));                           \
        else                                                                                       \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n128k32.f32." #T "." #T " "              \
                         "{" ATTN_WG_R64 "}, %64, %65, p, 1, 1;\n}\n"                              \
                         : ATTN_WG_D64                                                             \
                         : "l"(a_desc), "l"(b_desc), "r"(int(scale_d)));                           \
    }                                                                                              \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_rs_##T(float *d, const uint32_t *a, uint64_t b_desc,     \
                                                 bool scale_d) {                                   \
        static_assert(N == 64 || N == 128, "wgmma_rs_" #T ": N = 64 or 128");                      \
        if constexpr (N == 64)                                                                     \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n64k32.f32." #T "." #T " "               \
                         "{" ATTN_WG_R32 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"             \
                         : ATTN_WG_D32                                                             \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc),                \
                           "r"(int(scale_d)));                                                     \
        else                                                                                       \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n128k32.f32." #T "." #T " "              \
                         "{" ATTN_WG_R64 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"             \
                         : ATTN_WG_D64                                                             \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc),                \
                           "r"(int(scale_d)));                                                     \
    }
#else
#define ATTN_WGMMA_FP8(T)                                                                          \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_ss_##T(float *, uint64_t, uint64_t, bool) {              \
        ATTN_SM90_UNSUPPORTED();                                                                   \
    }                                                                                              \
    template <int N>                                                                               \
    __device__ __forceinline__ void wgmma_rs_##T(float *, const uint32_t *, uint64_t, bool) {      \
        ATTN_SM90_UNSUPPORTED();                                                                   \
    }
#endif
ATTN_WGMMA_FP8(e4m3)
ATTN_WGMMA_FP8(e5m2)
#undef ATTN_WGMMA_FP8

#undef ATTN_WG_R32
#undef ATTN_WG_R64
#undef ATTN_WG_D32
#undef ATTN_WG_D64
#undef ATTN_SM90_SITE
#undef ATTN_SM90_SITE_ONLY
#endif // ATTN_SM90_CUH
