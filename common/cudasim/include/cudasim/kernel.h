// cudasim/kernel.h — the CUDA kernel language for host C++: qualifiers, built-in variables,
// barriers, warp intrinsics and the launch that cudasim_rewrite substitutes for <<<...>>>.
//
// Included by cuda_runtime.h; not meant to be included directly.
#ifndef CUDASIM_KERNEL_H
#define CUDASIM_KERNEL_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda_runtime_api.h>
#include <vector_types.h>

// ---- qualifiers -------------------------------------------------------------------------------
// Host and device are the same machine here, so the execution-space qualifiers vanish.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
// Shared memory belongs to the block, and a block runs on one OS thread, so a per-OS-thread
// static is per block. ASan does not guard thread_local objects; its preset runs every block on
// one OS thread, where a plain static is per block too and gets redzones.
#if defined(CUDASIM_ASAN)
#define __shared__ static
#else
#define __shared__ static thread_local
#endif

// ---- built-in variables -----------------------------------------------------------------------
// Per OS thread; the scheduler refreshes threadIdx at every fiber switch and the others per block.
// Inline definitions with constant initialisers let the compiler access them directly (no TLS
// wrapper calls).
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

namespace cudasim {
namespace detail {
inline thread_local void *dynamic_smem;
} // namespace detail

// The current block's dynamic shared memory (what `extern __shared__ T name[];` names).
inline void *dynamic_shared_memory() { return detail::dynamic_smem; }

// A static `__shared__ T name[N]...;` array of a kernel, as the rewriter declares it
// (`__shared__ cudasim::shared_array<T[N]...> name__cudasim_array; auto &name =
// cudasim::shared_array_ref(name__cudasim_array, "name");`): the array itself, and in the
// checked build (sim-check) a guard of shared_guard_bytes after it that the array's first use
// makes known to memcheck, which then reports an access that runs past the array's end at that
// access, naming the array (without it, a write past the end lands in the next array and nothing
// is wrong until someone reads that one).
constexpr size_t shared_guard_bytes = 64;
void register_shared_array(const void *array, size_t bytes, const char *name);
#if defined(CUDASIM_CHECK)
template <class T> struct shared_array {
    T value;
    unsigned char guard[shared_guard_bytes];
};
template <class T> inline T &shared_array_ref(shared_array<T> &a, const char *name) {
    register_shared_array(&a.value, sizeof(T), name); // an address, not an access: not traced
    return a.value;
}
#else
template <class T> struct shared_array { T value; };
template <class T> inline T &shared_array_ref(shared_array<T> &a, const char *) { return a.value; }
#endif

namespace detail {

// ---- barriers and warp collectives (implemented in the runtime) --------------------------------
enum class collective : unsigned char {
    syncwarp,
    shfl,
    shfl_up,
    shfl_down,
    shfl_xor,
    ballot,
    any,
    all,
    allgather,
    reduce // __reduce_*_sync: param is a reduce_op
};
enum class reduce_op : unsigned char { add, min, max, min_signed, max_signed, and_, or_, xor_ };
enum class bar_reduce : unsigned char { count, all, any };

void syncthreads(const char *file, int line);
int syncthreads_reduce(bar_reduce op, int predicate, const char *file, int line);
unsigned long long warp_collective(collective kind, unsigned mask, unsigned long long value,
                                   int param, int width, const char *file, int line);
unsigned active_mask();
unsigned warp_reduce(reduce_op op, unsigned mask, unsigned value, const char *file, int line);
void warp_allgather(const void *mine, void *all, size_t bytes, const char *what, const char *file,
                    int line);
// The same collective, without the copy: the warp's 32 contributions where the simulator keeps
// them, valid until this lane's next warp collective (no lane of the warp can complete another
// before every lane arrived at it). For the simulator's own code only: in the checked build a
// kernel's reads of it would reach the checkers as accesses to memory the kernel never had.
const void *warp_allgather_view(const void *mine, size_t bytes, const char *what, const char *file,
                                int line);

template <typename T> unsigned long long to_bits(const T &v) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                  "cudasim: warp shuffles take trivially copyable values of at most 8 bytes");
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}
template <typename T> T from_bits(unsigned long long bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}

// ---- vector pointers
// ------------------------------------------------------------------------------ cudasim_rewrite
// turns `reinterpret_cast<V *>(x)` and `static_cast<V *>(x)`, V a vector type wider than its
// element (float4, int2, uint4, double2, ...; cv-qualified or not), into these, with the cast's
// file, line and type. In a kernel, a pointer that is not aligned for V is reported at once
// (kernel, block, thread, line): a GPU's vector load or store through it faults with a misaligned
// address, while the host would split it and go on. The checked and sanitizer builds check the load
// itself instead (-fsanitize=alignment), so these only cast there.
[[noreturn]] void misaligned_vector_pointer(const void *p, size_t align, const char *type,
                                            const char *file, int line);
bool in_kernel();
#if !defined(CUDASIM_CHECK) && !defined(CUDASIM_ASAN) && !defined(CUDASIM_TSAN)
template <typename T>
inline T checked_vector_pointer(T p, const char *type, const char *file, int line) {
    constexpr size_t align = alignof(std::remove_cv_t<std::remove_pointer_t<T>>);
    if (reinterpret_cast<uintptr_t>(p) % align != 0 && in_kernel())
        misaligned_vector_pointer(p, align, type, file, line);
    return p;
}
#else
template <typename T> inline T checked_vector_pointer(T p, const char *, const char *, int) {
    return p;
}
#endif
template <typename T, typename U>
inline T vector_reinterpret_cast(const char *file, int line, const char *type, U from) {
    return checked_vector_pointer(reinterpret_cast<T>(from), type, file, line);
}
template <typename T, typename U>
inline T vector_static_cast(const char *file, int line, const char *type, U from) {
    return checked_vector_pointer(static_cast<T>(from), type, file, line);
}

// ---- launch -------------------------------------------------------------------------------------
// One launch as the runtime sees it: the kernel's parameters are packed in a tuple that `invoke`
// (instantiated for the kernel's signature) unpacks into a call, once per simulated thread.
struct launch_desc {
    const char *kernel; // the callee as written, for messages
    const char *file;
    int line;
    const void *fn; // the kernel's address (cudaFuncSetAttribute's key)
    dim3 grid, block;
    size_t smem;
    void (*invoke)(const launch_desc &);
    const void *params;
    // The values of its first pointer parameters and their positions (1-based), which the launch
    // checks: a pointer to the host's own data faults on a GPU (src/launch.cpp).
    static constexpr int max_pointer_args = 16;
    int num_pointer_args;
    const void *pointer_args[max_pointer_args];
    int pointer_positions[max_pointer_args];
};

// A launch before its parameters are packed: the kernel, where it is launched, its configuration.
inline launch_desc describe_launch(const char *name, const char *file, int line, const void *fn,
                                   dim3 grid, dim3 block, size_t smem) {
    return launch_desc{name, file, line, fn, grid, block, smem, nullptr, nullptr, 0, {}, {}};
}

// Records the pointer arguments (object pointers, not functions) of a launch in d.
template <typename... P> void note_pointer_args(launch_desc &d, const P &...args) {
    int position = 0;
    d.num_pointer_args = 0;
    auto note = [&](const auto &a) {
        using A = std::decay_t<decltype(a)>;
        ++position;
        if constexpr (std::is_pointer_v<A> && !std::is_function_v<std::remove_pointer_t<A>>) {
            if (d.num_pointer_args < launch_desc::max_pointer_args) {
                d.pointer_args[d.num_pointer_args] =
                    const_cast<const void *>(static_cast<const volatile void *>(a));
                d.pointer_positions[d.num_pointer_args++] = position;
            }
        }
    };
    (note(args), ...);
}

cudaError_t launch_kernel(const launch_desc &d);

// In the sim-check build, unpacking the parameters (host memory) is not the kernel's access.
#if CUDASIM_CHECK
#define CUDASIM_NOT_INSTRUMENTED __attribute__((no_sanitize("coverage")))
#else
#define CUDASIM_NOT_INSTRUMENTED
#endif
template <typename... P> CUDASIM_NOT_INSTRUMENTED void invoke(const launch_desc &d) {
    auto fn = reinterpret_cast<void (*)(P...)>(const_cast<void *>(d.fn));
    std::apply(fn, *static_cast<const std::tuple<P...> *>(d.params));
}

template <typename... P> class launcher {
  public:
    launcher(const launch_desc &d) : d_(d) {}
    // Takes the kernel's own parameter types, so arguments convert as in a call of the kernel.
    cudaError_t operator()(P... args) const {
        std::tuple<P...> params(std::move(args)...);
        launch_desc d = d_;
        d.invoke = &invoke<P...>;
        d.params = &params;
        std::apply([&d](const auto &...a) { note_pointer_args(d, a...); }, params);
        return launch_kernel(d);
    }

  private:
    launch_desc d_;
};

// What `callee<<<grid, block, smem, stream>>>` becomes (see cudasim_rewrite); streams are ignored
// because every launch runs to completion before returning.
template <typename... P>
launcher<P...> launch(const char *file, int line, const char *name, void (*fn)(P...), dim3 grid,
                      dim3 block, size_t smem = 0, cudaStream_t = nullptr) {
    return launcher<P...>(
        describe_launch(name, file, line, reinterpret_cast<const void *>(fn), grid, block, smem));
}

template <typename... P, size_t... I>
cudaError_t launch_packed(const launch_desc &d, void **args, std::index_sequence<I...>) {
    std::tuple<P...> params(*static_cast<std::remove_reference_t<P> *>(args[I])...);
    launch_desc copy = d;
    copy.invoke = &invoke<P...>;
    copy.params = &params;
    std::apply([&copy](const auto &...a) { note_pointer_args(copy, a...); }, params);
    return launch_kernel(copy);
}

} // namespace detail

// The largest contribution of one lane to warp_allgather: an mma operand or an ldmatrix row fits.
constexpr size_t warp_allgather_max_bytes = 64;

// A warp collective for emulating warp-wide instructions (mma.sync, ldmatrix): every lane of the
// warp publishes `bytes` (1 to 64) from `mine`, and each receives all 32 contributions in
// `all[lane * bytes]` (32 * bytes). One arrival per lane, like __shfl_sync with a full mask: all
// 32 lanes must call it, with the same size and `what` (the name used in error reports); the
// same checks and ThreadSanitizer release/acquire apply.
inline void warp_allgather(const void *mine, void *all, size_t bytes,
                           const char *what = "cudasim::warp_allgather()",
                           const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    detail::warp_allgather(mine, all, bytes, what, file, line);
}
} // namespace cudasim

// ---- runtime API templates of the toolkit's cuda_runtime.h ------------------------------------
template <typename... P>
cudaError_t cudaLaunchKernel(void (*fn)(P...), dim3 grid, dim3 block, void **args, size_t smem = 0,
                             cudaStream_t = nullptr, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
    cudasim::detail::launch_desc d =
        cudasim::detail::describe_launch("(kernel passed to cudaLaunchKernel)", file, line,
                                         reinterpret_cast<const void *>(fn), grid, block, smem);
    return cudasim::detail::launch_packed<P...>(d, args, std::index_sequence_for<P...>{});
}

template <typename T> cudaError_t cudaMalloc(T **ptr, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
template <typename T>
cudaError_t cudaMallocManaged(T **ptr, size_t bytes, unsigned int flags = cudaMemAttachGlobal) {
    return cudaMallocManaged(reinterpret_cast<void **>(ptr), bytes, flags);
}
template <typename T>
cudaError_t cudaMallocPitch(T **ptr, size_t *pitch, size_t width, size_t height) {
    return cudaMallocPitch(reinterpret_cast<void **>(ptr), pitch, width, height);
}
template <typename T> cudaError_t cudaMallocHost(T **ptr, size_t bytes) {
    return cudaMallocHost(reinterpret_cast<void **>(ptr), bytes);
}

template <typename T>
cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}

template <typename T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, T *func, int block_size,
                                                          size_t dynamic_smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks, reinterpret_cast<const void *>(func), block_size, dynamic_smem);
}
// The block size (a multiple of 32, at most block_size_limit or 1024) with the most resident
// threads per SM, the largest such; min_grid_size: the grid that fills all 132 SMs with it.
template <typename T>
cudaError_t cudaOccupancyMaxPotentialBlockSize(int *min_grid_size, int *block_size, T *func,
                                               size_t dynamic_smem = 0, int block_size_limit = 0) {
    if (!min_grid_size || !block_size)
        return cudaErrorInvalidValue;
    int limit = block_size_limit > 0 && block_size_limit < 1024 ? block_size_limit : 1024;
    int best = 0, best_blocks = 0;
    for (int b = limit < 32 ? limit : 32; b <= limit; b += 32) {
        int n = 0;
        if (cudaError_t e =
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, func, b, dynamic_smem))
            return e;
        if (n * b >= best * best_blocks) {
            best = b;
            best_blocks = n;
        }
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    *block_size = best;
    *min_grid_size = best_blocks * prop.multiProcessorCount;
    return cudaSuccess;
}

// __constant__ and __device__ variables are ordinary globals here.
template <typename T>
cudaError_t cudaMemcpyToSymbol(T &symbol, const void *src, size_t bytes, size_t offset = 0,
                               cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + bytes > sizeof(T))
        return cudaErrorInvalidValue;
    std::memcpy(reinterpret_cast<char *>(&symbol) + offset, src, bytes);
    return cudaSuccess;
}
template <typename T>
cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t bytes, size_t offset = 0,
                                 cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    if (offset + bytes > sizeof(T))
        return cudaErrorInvalidValue;
    std::memcpy(dst, reinterpret_cast<const char *>(&symbol) + offset, bytes);
    return cudaSuccess;
}

// ---- barriers -----------------------------------------------------------------------------------
// The default arguments record the call site, which the runtime compares across the threads of a
// block (barrier divergence) and names in its reports.
inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    cudasim::detail::syncthreads(file, line);
}
inline int __syncthreads_count(int predicate, const char *file = __builtin_FILE(),
                               int line = __builtin_LINE()) {
    return cudasim::detail::syncthreads_reduce(cudasim::detail::bar_reduce::count, predicate, file,
                                               line);
}
inline int __syncthreads_and(int predicate, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
    return cudasim::detail::syncthreads_reduce(cudasim::detail::bar_reduce::all, predicate, file,
                                               line);
}
inline int __syncthreads_or(int predicate, const char *file = __builtin_FILE(),
                            int line = __builtin_LINE()) {
    return cudasim::detail::syncthreads_reduce(cudasim::detail::bar_reduce::any, predicate, file,
                                               line);
}

// ---- warp intrinsics ----------------------------------------------------------------------------
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
    cudasim::detail::warp_collective(cudasim::detail::collective::syncwarp, mask, 0, 0, warpSize,
                                     file, line);
}
inline unsigned __activemask() { return cudasim::detail::active_mask(); }

// The shuffles: var's bits from another lane; arg is the source lane, the delta or the lane mask.
#define CUDASIM_SHUFFLE(name, kind, Arg)                                                           \
    template <typename T>                                                                          \
    T name(unsigned mask, T var, Arg arg, int width = warpSize,                                    \
           const char *file = __builtin_FILE(), int line = __builtin_LINE()) {                     \
        using namespace cudasim::detail;                                                           \
        return from_bits<T>(warp_collective(collective::kind, mask, to_bits(var),                  \
                                            static_cast<int>(arg), width, file, line));            \
    }
CUDASIM_SHUFFLE(__shfl_sync, shfl, int)
CUDASIM_SHUFFLE(__shfl_up_sync, shfl_up, unsigned)
CUDASIM_SHUFFLE(__shfl_down_sync, shfl_down, unsigned)
CUDASIM_SHUFFLE(__shfl_xor_sync, shfl_xor, int)
#undef CUDASIM_SHUFFLE
inline unsigned __ballot_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
    using namespace cudasim::detail;
    return static_cast<unsigned>(
        warp_collective(collective::ballot, mask, predicate != 0, 0, warpSize, file, line));
}
inline int __any_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
    using namespace cudasim::detail;
    return static_cast<int>(
        warp_collective(collective::any, mask, predicate != 0, 0, warpSize, file, line));
}
inline int __all_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
    using namespace cudasim::detail;
    return static_cast<int>(
        warp_collective(collective::all, mask, predicate != 0, 0, warpSize, file, line));
}

// __reduce_*_sync (sm_80 and later): every lane named in the mask gets the reduction of their
// values. A warp collective like the shuffles, with the same checks.
#define CUDASIM_REDUCE(name, T, op)                                                                \
    inline T name(unsigned mask, T value, const char *file = __builtin_FILE(),                     \
                  int line = __builtin_LINE()) {                                                   \
        using namespace cudasim::detail;                                                           \
        return static_cast<T>(                                                                     \
            warp_reduce(reduce_op::op, mask, static_cast<unsigned>(value), file, line));           \
    }
CUDASIM_REDUCE(__reduce_add_sync, unsigned, add)
CUDASIM_REDUCE(__reduce_add_sync, int, add)
CUDASIM_REDUCE(__reduce_min_sync, unsigned, min)
CUDASIM_REDUCE(__reduce_min_sync, int, min_signed)
CUDASIM_REDUCE(__reduce_max_sync, unsigned, max)
CUDASIM_REDUCE(__reduce_max_sync, int, max_signed)
CUDASIM_REDUCE(__reduce_and_sync, unsigned, and_)
CUDASIM_REDUCE(__reduce_or_sync, unsigned, or_)
CUDASIM_REDUCE(__reduce_xor_sync, unsigned, xor_)
#undef CUDASIM_REDUCE

#endif // CUDASIM_KERNEL_H
