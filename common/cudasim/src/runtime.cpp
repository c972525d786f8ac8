// runtime.cpp — the CUDA runtime API of cuda_runtime_api.h on the CPU (memory, errors, the
// virtual device, streams, events, function attributes) and the controls of cudasim.h.
#include "access.h"
#include "check.h"
#include "internal.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fstream>
#include <map>
#include <new>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

struct CUstream_st {
    int unused;
};
struct CUevent_st {
    std::chrono::steady_clock::time_point when;
    bool recorded;
};

namespace cudasim {
namespace detail {

namespace {

struct device_state {
    std::mutex m;
    std::map<const char *, size_t> allocations; // cudaMalloc'd block -> size
    size_t allocated = 0;
    std::unordered_map<const void *, size_t> max_smem; // cudaFuncSetAttribute opt-ins
    std::string last_message;
};

device_state &dev() {
    static device_state *d = new device_state(); // never destroyed: usable during exit
    return *d;
}

std::atomic<int> sticky{cudaSuccess};
thread_local cudaError_t last_error = cudaSuccess;

size_t total_memory() {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page)
                                 : size_t(16) << 30;
}

// Checks that [p, p + bytes) lies inside one cudaMalloc'd block. Caller holds dev().m.
bool in_device_block(const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    auto &a = dev().allocations;
    auto it = a.upper_bound(c);
    if (it == a.begin())
        return false;
    --it;
    return c >= it->first && bytes <= it->second &&
           c - it->first <= static_cast<ptrdiff_t>(it->second - bytes);
}

cudaError_t fail_call(cudaError_t err, const std::string &why) {
    std::lock_guard<std::mutex> lock(dev().m);
    dev().last_message = why;
    return set_last_error(err);
}

cudaError_t check_range(const void *p, size_t bytes, const char *call, const char *role) {
    std::lock_guard<std::mutex> lock(dev().m);
    if (in_device_block(p, bytes))
        return cudaSuccess;
    dev().last_message =
        format("%s: %s %p (%zu bytes) is not inside one cudaMalloc'd block", call, role, p, bytes);
    return set_last_error(cudaErrorInvalidValue);
}

int env_int(const char *name, int fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

} // namespace

settings_t &settings() {
    static settings_t *s = [] {
        // A page of its own (see settings_t), mapped before any kernel runs.
        size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void *mem = mmap(nullptr, std::max(page, sizeof(settings_t)), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        auto *st = mem != MAP_FAILED ? new (mem) settings_t() : new settings_t();
        if (const char *o = std::getenv("CUDASIM_ORDER")) {
            if (!std::strcmp(o, "reverse"))
                st->order = CUDASIM_ORDER_REVERSE;
            else if (!std::strcmp(o, "shuffle"))
                st->order = CUDASIM_ORDER_SHUFFLE;
            else if (std::strcmp(o, "forward") != 0 && *o)
                std::fprintf(stderr, "cudasim: warning: CUDASIM_ORDER=%s unknown; using forward\n",
                             o);
        }
        if (const char *seed = std::getenv("CUDASIM_SEED"))
            st->seed = std::strtoull(seed, nullptr, 0);
        int hw = static_cast<int>(std::thread::hardware_concurrency());
        st->threads = std::max(1, env_int("CUDASIM_THREADS", hw > 0 ? hw : 1));
#if CUDASIM_ASAN
        st->threads = 1; // __shared__ is a plain static under ASan: one block at a time
#endif
        if (const char *w = std::getenv("CUDASIM_WATCHDOG"); w && *w)
            st->watchdog_s = std::max(0.0, std::strtod(w, nullptr));
        if (const char *c = std::getenv("CUDASIM_CHECK"); c && !std::strcmp(c, "0"))
            st->checks = 0;
        int kb = env_int("CUDASIM_STACK_KB", 256);
        st->stack_bytes = static_cast<size_t>(std::max(kb, 16)) * 1024;
        return st;
    }();
    return *s;
}

std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    std::vsnprintf(&s[0], s.size() + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void report_error(const std::string &message) {
    {
        std::lock_guard<std::mutex> lock(dev().m);
        dev().last_message = message;
    }
    std::fprintf(stderr, "cudasim: error: %s\n", message.c_str());
    std::fflush(stderr);
}

// The name of the function at `fn` (or, with `containing`, whose code contains fn; with
// `object`, the data object that contains it, whose extent goes to *lo, *hi) from the ELF symbol
// table of the file that holds it (static functions and arrays are not in the dynamic table, so
// dladdr alone cannot name them); "" if not found.
static std::string function_name(const void *fn, bool containing = false, bool object = false,
                                 uintptr_t *lo = nullptr, uintptr_t *hi = nullptr) {
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname)
        return "";
    std::ifstream f(info.dli_fname[0] ? info.dli_fname : "/proc/self/exe", std::ios::binary);
    std::string elf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (elf.size() < sizeof(Elf64_Ehdr) || elf.compare(0, 4, ELFMAG) != 0)
        return "";
    auto eh = reinterpret_cast<const Elf64_Ehdr *>(elf.data());
    uintptr_t target = reinterpret_cast<uintptr_t>(fn) -
                       (eh->e_type == ET_DYN ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0);
    if (eh->e_shoff + size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > elf.size())
        return "";
    auto sh = reinterpret_cast<const Elf64_Shdr *>(elf.data() + eh->e_shoff);
    for (int s = 0; s < eh->e_shnum; ++s) {
        if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum ||
            sh[s].sh_offset + sh[s].sh_size > elf.size())
            continue;
        const Elf64_Shdr &strtab = sh[sh[s].sh_link];
        auto sym = reinterpret_cast<const Elf64_Sym *>(elf.data() + sh[s].sh_offset);
        for (size_t n = 0; n < sh[s].sh_size / sizeof(Elf64_Sym); ++n) {
            bool hit =
                containing ? target - sym[n].st_value < sym[n].st_size : sym[n].st_value == target;
            if (ELF64_ST_TYPE(sym[n].st_info) != (object ? STT_OBJECT : STT_FUNC) || !hit ||
                strtab.sh_offset + sym[n].st_name >= elf.size())
                continue;
            const char *mangled = elf.data() + strtab.sh_offset + sym[n].st_name;
            if (lo && hi) {
                *lo = reinterpret_cast<uintptr_t>(fn) - (target - sym[n].st_value);
                *hi = *lo + sym[n].st_size;
            }
            int status = 0;
            char *plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
            std::string name = status == 0 && plain ? plain : mangled;
            std::free(plain);
            name = name.substr(0, name.find('(')); // no parameter list
            size_t lt = name.find('<'), sp = name.rfind(' ', lt);
            return sp == std::string::npos ? name : name.substr(sp + 1); // no return type
        }
    }
    return "";
}

std::string object_at(const void *p, uintptr_t *lo, uintptr_t *hi) {
    return function_name(p, true, true, lo, hi);
}

bool in_device_allocation(const void *p) {
    const char *c = static_cast<const char *>(p);
    std::lock_guard<std::mutex> lock(dev().m);
    auto it = dev().allocations.upper_bound(c);
    if (it == dev().allocations.begin())
        return false;
    --it;
    return c >= it->first && c <= it->first + it->second; // one past the end included
}

std::string function_at(const void *pc, const void *same_object_as) {
    no_interrupt quiet; // dladdr takes the loader's lock
    Dl_info a, b;
    if (!pc || !dladdr(pc, &a) || !dladdr(same_object_as, &b) || a.dli_fbase != b.dli_fbase)
        return "";
    return function_name(pc, true);
}

std::string kernel_label(const launch_desc &d) {
    static std::mutex m;
    static std::unordered_map<const void *, std::string> names; // looked up once per kernel
    std::string name;
    {
        no_interrupt quiet; // the lock, and dladdr's
        std::lock_guard<std::mutex> lock(m);
        auto it = names.find(d.fn);
        name = it != names.end() ? it->second : (names[d.fn] = function_name(d.fn));
    }
    std::string written = d.kernel;
    if (name.empty() || name == written || name.compare(0, written.size() + 1, written + "<") == 0)
        return "'" + written + "'";
    return "'" + name + "' (launched as '" + written + "')";
}

void set_sticky(cudaError_t err) { sticky = err; }
cudaError_t sticky_error() { return static_cast<cudaError_t>(sticky.load()); }

cudaError_t set_last_error(cudaError_t err) {
    if (err != cudaSuccess)
        last_error = err;
    return err;
}

size_t max_dynamic_smem(const void *fn) {
    std::lock_guard<std::mutex> lock(dev().m);
    auto it = dev().max_smem.find(fn);
    return it == dev().max_smem.end() ? smem_default : it->second;
}

} // namespace detail
} // namespace cudasim

using namespace cudasim::detail;

// A call made after a launch failure returns that failure, as on a GPU after a device fault.
#define CUDASIM_RETURN_IF_STICKY()                                                                 \
    do {                                                                                           \
        if (cudaError_t sticky_err = sticky_error())                                               \
            return set_last_error(sticky_err);                                                     \
    } while (0)

extern "C" {

const char *cudaGetErrorName(cudaError_t err) {
    switch (err) {
#define CUDASIM_NAME(name, value, message)                                                         \
    case name:                                                                                     \
        return #name;
        CUDASIM_ERRORS(CUDASIM_NAME)
#undef CUDASIM_NAME
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t err) {
    switch (err) {
#define CUDASIM_MESSAGE(name, value, message)                                                      \
    case name:                                                                                     \
        return message;
        CUDASIM_ERRORS(CUDASIM_MESSAGE)
#undef CUDASIM_MESSAGE
    }
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = sticky_error() ? sticky_error() : last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return sticky_error() ? sticky_error() : last_error; }

// ---- device
// --------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count)
        return set_last_error(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : set_last_error(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *device) {
    if (!device)
        return set_last_error(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    if (!prop)
        return set_last_error(cudaErrorInvalidValue);
    if (device != 0)
        return set_last_error(cudaErrorInvalidDevice);
    // An H100-like virtual device: the limits kernels are written against.
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "cudasim (CPU simulator)");
    prop->totalGlobalMem = total_memory();
    prop->sharedMemPerBlock = smem_default;
    prop->sharedMemPerBlockOptin = smem_optin;
    prop->sharedMemPerMultiprocessor = 228 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = static_cast<int>(max_threads_per_block);
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->clockRate = 1980000;
    prop->multiProcessorCount = 132;
    prop->l2CacheSize = 50 * 1024 * 1024;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->major = 9;
    prop->minor = 0;
    prop->memoryClockRate = 2619000;
    prop->memoryBusWidth = 5120;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (!value)
        return set_last_error(cudaErrorInvalidValue);
    cudaDeviceProp p;
    if (cudaError_t e = cudaGetDeviceProperties(&p, device))
        return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        *value = p.maxThreadsPerBlock;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = static_cast<int>(p.sharedMemPerBlock);
        break;
    case cudaDevAttrWarpSize:
        *value = p.warpSize;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = p.multiProcessorCount;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = p.major;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = p.minor;
        break;
    case cudaDevAttrL2CacheSize:
        *value = p.l2CacheSize;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = static_cast<int>(p.sharedMemPerBlockOptin);
        break;
    default:
        return set_last_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    CUDASIM_RETURN_IF_STICKY();
    return cudaSuccess;
}

// Like a GPU context reset: frees every device allocation and clears every error.
cudaError_t cudaDeviceReset(void) {
    std::lock_guard<std::mutex> lock(dev().m);
    for (auto &a : dev().allocations)
        std::free(const_cast<char *>(a.first));
    dev().allocations.clear();
    dev().allocated = 0;
    dev().max_smem.clear();
    dev().last_message.clear();
    sticky = cudaSuccess;
    last_error = cudaSuccess;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version)
        return set_last_error(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) { return cudaRuntimeGetVersion(version); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    CUDASIM_RETURN_IF_STICKY();
    if (!free_bytes || !total_bytes)
        return set_last_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(dev().m);
    *total_bytes = total_memory();
    *free_bytes = *total_bytes > dev().allocated ? *total_bytes - dev().allocated : 0;
    return cudaSuccess;
}

// ---- memory
// -------------------------------------------------------------------------------------- Device
// memory is host memory of exactly the size asked (malloc: ASan's redzones guard its ends).
cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    CUDASIM_RETURN_IF_STICKY();
    if (!ptr)
        return set_last_error(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    std::lock_guard<std::mutex> lock(dev().m);
    void *p = bytes <= total_memory() - std::min(total_memory(), dev().allocated)
                  ? device_alloc(bytes)
                  : nullptr;
    if (!p) {
        dev().last_message = format("cudaMalloc: cannot allocate %zu bytes", bytes);
        return set_last_error(cudaErrorMemoryAllocation);
    }
    dev().allocations[static_cast<char *>(p)] = bytes;
    dev().allocated += bytes;
    // NaN in fp32/fp16/bf16, -1 in integers: a read of memory never written shows (a GPU's
    // fresh allocation holds whatever was there).
    std::memset(p, 0xff, bytes);
    *ptr = p;
    return cudaSuccess;
}

// Managed memory is device memory that the host may also touch: here all memory is both.
cudaError_t cudaMallocManaged(void **ptr, size_t bytes, unsigned int flags) {
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
        return fail_call(cudaErrorInvalidValue,
                         format("cudaMallocManaged: flags 0x%x are not cudaMemAttachGlobal or "
                                "cudaMemAttachHost",
                                flags));
    cudaError_t e = cudaMalloc(ptr, bytes);
    // The host may write it at any time, unseen by initcheck: it counts as written.
    if (e == cudaSuccess && *ptr)
        note_device_written(*ptr, bytes);
    return e;
}

// Rows of `width` bytes padded to a multiple of 512 bytes (the toolkit's usual pitch).
cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
    if (!pitch)
        return set_last_error(cudaErrorInvalidValue);
    *pitch = (width + 511) / 512 * 512;
    return cudaMalloc(ptr, *pitch * height);
}

cudaError_t cudaFree(void *ptr) {
    CUDASIM_RETURN_IF_STICKY();
    if (!ptr)
        return cudaSuccess;
    std::lock_guard<std::mutex> lock(dev().m);
    auto it = dev().allocations.find(static_cast<char *>(ptr));
    if (it == dev().allocations.end()) {
        dev().last_message = format("cudaFree: %p was not returned by cudaMalloc", ptr);
        return set_last_error(cudaErrorInvalidValue);
    }
    dev().allocated -= it->second;
    dev().allocations.erase(it);
    device_release(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
    CUDASIM_RETURN_IF_STICKY();
    if (!ptr)
        return set_last_error(cudaErrorInvalidValue);
    *ptr = std::malloc(bytes ? bytes : 1);
    return *ptr ? cudaSuccess : set_last_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *ptr) {
    CUDASIM_RETURN_IF_STICKY();
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    CUDASIM_RETURN_IF_STICKY();
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return fail_call(cudaErrorInvalidMemcpyDirection,
                         format("cudaMemcpy: %d is not a cudaMemcpyKind", static_cast<int>(kind)));
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return fail_call(cudaErrorInvalidValue, "cudaMemcpy: null pointer");
    // The direction says which side is device memory: check it, as a swapped direction is a bug.
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
        if (cudaError_t e = check_range(dst, bytes, "cudaMemcpy", "destination"))
            return e;
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
        if (cudaError_t e = check_range(src, bytes, "cudaMemcpy", "source"))
            return e;
    std::memcpy(dst, src, bytes);
    note_device_written(dst, bytes);
    return cudaSuccess;
}

// `height` rows of `width` bytes; each row must lie inside one cudaMalloc'd block.
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
    CUDASIM_RETURN_IF_STICKY();
    if (width > dpitch || width > spitch) // the runtime's error for it, seen on an H200
        return fail_call(cudaErrorInvalidPitchValue,
                         format("cudaMemcpy2D: width %zu exceeds the pitch (dpitch %zu, spitch "
                                "%zu)",
                                width, dpitch, spitch));
    for (size_t r = 0; r < height; ++r)
        if (cudaError_t e = cudaMemcpy(static_cast<char *>(dst) + r * dpitch,
                                       static_cast<const char *>(src) + r * spitch, width, kind))
            return e;
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
    CUDASIM_RETURN_IF_STICKY();
    if (bytes == 0)
        return cudaSuccess;
    if (cudaError_t e = check_range(ptr, bytes, "cudaMemset", "destination"))
        return e;
    std::memset(ptr, value, bytes);
    note_device_written(ptr, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t) {
    return cudaMemset(ptr, value, bytes);
}

// ---- streams and events: launches are synchronous, so streams only need to exist -------------
cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    CUDASIM_RETURN_IF_STICKY();
    if (!stream)
        return set_last_error(cudaErrorInvalidValue);
    *stream = new CUstream_st{0};
    return cudaSuccess;
}

// Every launch is synchronous, so a non-blocking stream behaves as any other.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    if (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)
        return fail_call(cudaErrorInvalidValue,
                         format("cudaStreamCreateWithFlags: flags 0x%x are not "
                                "cudaStreamDefault or cudaStreamNonBlocking",
                                flags));
    return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (!stream)
        return set_last_error(cudaErrorInvalidResourceHandle);
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) {
    CUDASIM_RETURN_IF_STICKY();
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
    CUDASIM_RETURN_IF_STICKY();
    if (!event)
        return set_last_error(cudaErrorInvalidValue);
    *event = new CUevent_st{{}, false};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (!event)
        return set_last_error(cudaErrorInvalidResourceHandle);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    CUDASIM_RETURN_IF_STICKY();
    if (!event)
        return set_last_error(cudaErrorInvalidResourceHandle);
    event->when = std::chrono::steady_clock::now();
    event->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    CUDASIM_RETURN_IF_STICKY();
    return event ? cudaSuccess : set_last_error(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    CUDASIM_RETURN_IF_STICKY();
    if (!ms)
        return set_last_error(cudaErrorInvalidValue);
    if (!start || !end || !start->recorded || !end->recorded)
        return set_last_error(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    CUDASIM_RETURN_IF_STICKY();
    if (!func)
        return set_last_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
        return value >= -1 && value <= 100 ? cudaSuccess : set_last_error(cudaErrorInvalidValue);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return set_last_error(cudaErrorInvalidValue);
    if (value < 0 || static_cast<size_t>(value) > smem_optin)
        return fail_call(cudaErrorInvalidValue,
                         format("cudaFuncSetAttribute: %d bytes of dynamic shared memory; the "
                                "device allows at most %zu",
                                value, smem_optin));
    std::lock_guard<std::mutex> lock(dev().m);
    dev().max_smem[func] = static_cast<size_t>(value);
    return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func,
                                                          int block_size, size_t dynamic_smem) {
    CUDASIM_RETURN_IF_STICKY();
    if (!blocks || block_size <= 0)
        return set_last_error(cudaErrorInvalidValue);
    if (!func)
        return set_last_error(cudaErrorInvalidDeviceFunction);
    // The virtual device's SM: 2048 threads in whole warps, 32 blocks, 228 KiB of shared memory
    // of which each block also takes 1 KiB reserved by the system.
    if (block_size > static_cast<int>(max_threads_per_block) ||
        dynamic_smem > max_dynamic_smem(func)) {
        *blocks = 0;
        return cudaSuccess;
    }
    size_t warps = (static_cast<size_t>(block_size) + 31) / 32;
    size_t by_threads = 2048 / (warps * 32);
    size_t by_smem = (228 * 1024) / (dynamic_smem + 1024);
    *blocks = static_cast<int>(std::min({by_threads, by_smem, size_t(32)}));
    return cudaSuccess;
}

// ---- cudasim.h
// -----------------------------------------------------------------------------------
void cudasim_set_order(cudasim_order order, unsigned long long seed) {
    if (settings().locked)
        return;
    settings().order = order;
    settings().seed = seed;
}

cudasim_order cudasim_get_order(void) {
    return static_cast<cudasim_order>(settings().order.load());
}

int cudasim_set_threads(int threads) {
#if !CUDASIM_ASAN
    if (!settings().locked)
        settings().threads = std::max(1, threads);
#else
    (void)threads;
#endif
    return settings().threads;
}

int cudasim_get_threads(void) { return settings().threads; }

double cudasim_set_watchdog(double seconds) {
    if (seconds >= 0 && !settings().locked)
        settings().watchdog_s = seconds;
    return settings().watchdog_s;
}

int cudasim_set_checks(int on) {
    if (!settings().locked)
        settings().checks = on != 0;
    return cudasim_get_checks();
}

int cudasim_get_checks(void) { return access_stream_available() && settings().checks != 0; }

unsigned long long cudasim_get_seed(void) { return settings().seed; }

int cudasim_lock_settings(void) {
    settings_t &s = settings();
    s.locked = true;
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    uintptr_t at = reinterpret_cast<uintptr_t>(&s);
    if (at % page != 0) // not in its own page (mmap failed at the start): locked, not protected
        return -1;
    return mprotect(&s, std::max(page, sizeof(settings_t)), PROT_READ) == 0 ? 0 : -1;
}

int cudasim_add_guard_region(const void *lo, size_t bytes, const void *data_end, const char *name) {
    return cudasim::detail::add_guard_region(lo, bytes, data_end, name);
}

void cudasim_clear_guard_regions(void) { cudasim::detail::clear_guard_regions(); }

void cudasim_set_symbolizer(int to_fd, int from_fd) {
    cudasim::detail::set_symbolizer(to_fd, from_fd);
}

void cudasim_prepare(void) {
    using namespace cudasim::detail;
    prepare_runner();
    prepare_workers(static_cast<unsigned>(settings().threads));
    start_watchdog();
}

const char *cudasim_last_error_message(void) {
    static thread_local std::string copy;
    std::lock_guard<std::mutex> lock(dev().m);
    copy = dev().last_message;
    return copy.c_str();
}

} // extern "C"
