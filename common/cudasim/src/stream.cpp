// stream.cpp — the instrumented access stream: the hooks that clang's
// -fsanitize-coverage=trace-loads,trace-stores inserts before every load and store of a kernel
// source (sim-check build), the classification of each address (shared, global, local, ...), the
// device allocations with redzones that make "outside every allocation" visible, and the
// symbolisation of code addresses for reports.
//
// A hook returns at once unless the calling OS thread runs a simulated thread (host code of the
// same source is instrumented too) and an observer listens.
#include "access.h"
#include "check.h"
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cudasim {
namespace detail {

thread_local sim_context tl_sim;
sim_context &sim_ctx() { return tl_sim; }

namespace {

// Bytes of redzone on both sides of every device block in the sim-check build (a GPU allocates
// in 256-byte granules; an off-by-one or off-by-a-row access lands here).
constexpr size_t redzone = 256;

struct device_block {
    size_t size;
    uint8_t *written; // initcheck: one byte per byte of the block, 1 once written
};

// Device blocks by address. Changed by cudaMalloc/cudaFree between launches, read by the hooks
// during launches (launches are synchronous, so never both at once).
std::map<uintptr_t, device_block> &blocks() {
    static auto *m = new std::map<uintptr_t, device_block>();
    return *m;
}
std::map<uintptr_t, size_t> &freed_blocks() {
    static auto *m = new std::map<uintptr_t, size_t>();
    return *m;
}
std::mutex blocks_mutex; // between host threads calling cudaMalloc/cudaFree
std::atomic<uint64_t> blocks_generation{1};

struct range {
    uintptr_t lo, hi;
};
std::vector<range> image_ranges; // PT_LOAD segments of every loaded module
std::once_flag image_once;

int collect_image(struct dl_phdr_info *info, size_t, void *) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD)
            image_ranges.push_back(
                {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
    }
    return 0;
}

// This OS thread's static TLS of the main program: static __shared__ variables live there
// (`static thread_local`), next to the built-in variables.
struct tls_info {
    bool known = false;
    uintptr_t lo = 0, hi = 0;
    uintptr_t builtin[6];
};
thread_local tls_info tl_tls;

int find_tls(struct dl_phdr_info *info, size_t, void *data) {
    auto *t = static_cast<tls_info *>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        uintptr_t at = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
        uintptr_t b = t->builtin[0];
        if (ph.p_type == PT_TLS && at && b >= at && b < at + ph.p_memsz) {
            t->lo = at;
            t->hi = at + ph.p_memsz;
            return 1;
        }
    }
    return 0;
}

const tls_info &tls() {
    tls_info &t = tl_tls;
    if (!t.known) {
        t.builtin[0] = reinterpret_cast<uintptr_t>(&threadIdx);
        t.builtin[1] = reinterpret_cast<uintptr_t>(&blockIdx);
        t.builtin[2] = reinterpret_cast<uintptr_t>(&blockDim);
        t.builtin[3] = reinterpret_cast<uintptr_t>(&gridDim);
        t.builtin[4] = reinterpret_cast<uintptr_t>(&dynamic_smem);
        // The simulator's own per-OS-thread counter that atomics update (device_functions.h).
        t.builtin[5] = reinterpret_cast<uintptr_t>(&atomics_since_switch);
        dl_iterate_phdr(find_tls, &t);
        t.known = true;
    }
    return t;
}

bool is_builtin(const tls_info &t, uintptr_t a) {
    static const size_t sizes[6] = {sizeof(uint3), sizeof(uint3),  sizeof(dim3),
                                    sizeof(dim3),  sizeof(void *), sizeof(unsigned)};
    for (int i = 0; i < 6; ++i)
        if (a >= t.builtin[i] && a < t.builtin[i] + sizes[i])
            return true;
    return false;
}

// The static __shared__ arrays this OS thread's kernels declared (kernel.h, shared_array_ref):
// each array is followed by a guard of shared_guard_bytes. Few per program: a list.
struct shared_array_info {
    uintptr_t lo;
    size_t bytes;
    const char *name;
};
thread_local std::vector<shared_array_info> tl_shared_arrays;

void set(access_event &e, mem_space s, mem_object o, uintptr_t base, size_t size) {
    e.space = s;
    e.object = o;
    e.object_base = base;
    e.object_size = size;
}

} // namespace

void classify_address(access_event &e) {
    const sim_context &c = tl_sim;
    uintptr_t a = e.addr;
    if (a >= c.stack_lo && a < c.stack_hi)
        return set(e, mem_space::local, mem_object::stack, c.stack_lo, c.stack_hi - c.stack_lo);
    size_t smem = c.smem_hi - c.smem_lo;
    if (a >= c.smem_lo && a < c.smem_hi)
        return set(e, mem_space::shared, mem_object::dynamic_shared, c.smem_lo, smem);
    if (c.smem_lo && a + redzone >= c.smem_lo && a < c.smem_hi + redzone)
        return set(e, mem_space::other, mem_object::shared_redzone, c.smem_lo, smem);
    const tls_info &t = tls();
    if (a >= t.lo && a < t.hi) {
        if (is_builtin(t, a))
            return set(e, mem_space::local, mem_object::builtin, 0, 0);
        for (const shared_array_info &s : tl_shared_arrays) // an access that runs past an array
            if (a + e.size > s.lo + s.bytes && a < s.lo + s.bytes + shared_guard_bytes) {
                set(e, mem_space::other, mem_object::static_shared_guard, s.lo, s.bytes);
                e.object_name = s.name;
                return;
            }
        return set(e, mem_space::shared, mem_object::static_shared, t.lo, t.hi - t.lo);
    }
    auto &m = blocks();
    auto it = m.upper_bound(a);
    if (it != m.begin()) {
        --it;
        if (a < it->first + it->second.size)
            return set(e, mem_space::global, mem_object::allocation, it->first, it->second.size);
        if (a < it->first + it->second.size + redzone)
            return set(e, mem_space::other, mem_object::redzone, it->first, it->second.size);
        ++it;
    }
    if (it != m.end() && a + redzone >= it->first)
        return set(e, mem_space::other, mem_object::redzone, it->first, it->second.size);
    auto &f = freed_blocks();
    auto fit = f.upper_bound(a);
    if (fit != f.begin() && a < (--fit)->first + fit->second)
        return set(e, mem_space::other, mem_object::freed, fit->first, fit->second);
    std::call_once(image_once, [] { dl_iterate_phdr(collect_image, nullptr); });
    for (const range &r : image_ranges)
        if (a >= r.lo && a < r.hi)
            return set(e, mem_space::global, mem_object::static_image, r.lo, r.hi - r.lo);
    set(e, mem_space::other, mem_object::unknown, 0, 0);
}

namespace {

inline void hook(const void *p, uint32_t size, access_op op, const void *pc) {
    sim_context &c = tl_sim;
    if (!c.active || c.delivering || !have_access_observers())
        return;
    // A plain load or store of the thread's own stack (registers and local arrays on a GPU) is
    // not delivered: no observer has anything to count or check there, and in mma-heavy
    // kernels such accesses are most of the stream.
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if ((op == access_op::load || op == access_op::store) &&
        a - c.stack_lo < c.stack_hi - c.stack_lo)
        return;
    // Observers may themselves be instrumented code (a test's): their accesses are not the
    // kernel's.
    c.delivering = true;
    access_event e{};
    e.addr = reinterpret_cast<uintptr_t>(p);
    e.size = size;
    e.op = op;
    e.pc = pc;
    e.block = c.block;
    e.thread = c.thread;
    classify_address(e);
    deliver_access(e);
    c.delivering = false;
}

} // namespace

// The assignment of a wide vector in an instrumented kernel file (vector_types.h): one load
// and one store of the whole vector, at the kernel's line (the call's return address).
extern "C" __attribute__((noinline)) void cudasim_traced_copy(void *dst, const void *src,
                                                              unsigned long bytes) {
    const void *pc = __builtin_return_address(0);
    hook(src, static_cast<uint32_t>(bytes), access_op::load, pc);
    hook(dst, static_cast<uint32_t>(bytes), access_op::store, pc);
    std::memmove(dst, src, bytes);
}

// An atomic of an instrumented kernel file (device_functions.h): one atomic access at the
// kernel's line (the atomics are inlined there).
extern "C" __attribute__((noinline)) void cudasim_traced_atomic(const void *p,
                                                                unsigned long bytes) {
    hook(p, static_cast<uint32_t>(bytes), access_op::atomic, __builtin_return_address(0));
}

// Called by the PTX emulation (ldmatrix rows, cp.async) and the atomics, which the compiler's
// instrumentation does not see as plain loads and stores.
void deliver_explicit(const void *p, uint32_t size, access_op op, const void *pc) {
    hook(p, size, op, pc);
}

bool access_stream_available() {
#if CUDASIM_CHECK
    return true;
#else
    return false;
#endif
}

bool checks_enabled() {
#if CUDASIM_CHECK
    // CUDASIM_CHECK=0 or cudasim_set_checks(0); read at every use, so that a program that fixes
    // the settings (cudasim_lock_settings) decides, whatever ran before it.
    return settings().checks.load(std::memory_order_relaxed) != 0;
#else
    return false;
#endif
}

namespace {
std::mutex symbol_mutex;
std::unordered_map<const void *, std::string> &symbol_cache() {
    static auto *cache = new std::unordered_map<const void *, std::string>();
    return *cache;
}

// The object file holding code address pc and pc's offset in it (pc is a return address: the
// call is the instruction before it). False when dladdr does not know pc.
bool object_of(const void *pc, std::string *path, unsigned long long *off) {
    Dl_info info;
    if (!pc || !dladdr(pc, &info) || !info.dli_fname)
        return false;
    *off = reinterpret_cast<uintptr_t>(pc) - 1 - reinterpret_cast<uintptr_t>(info.dli_fbase);
    *path = info.dli_fname;
    if (path->empty() || path->find('\'') != std::string::npos) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        *path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
    }
    return !path->empty();
}

// The kernel's line among the frames of one address (innermost first, "file:line:column ..."):
// the first frame outside the simulator's headers and the PTX wrappers.
std::string kernel_line(const std::vector<std::string> &frames) {
    std::string where = "?";
    bool first = true;
    for (std::string s : frames) {
        s = s.substr(0, s.find_first_of(" \n"));
        // file:line:column -> file:line
        size_t c2 = s.rfind(':');
        size_t c1 = c2 == std::string::npos || c2 == 0 ? c2 : s.rfind(':', c2 - 1);
        if (c1 != std::string::npos && c1 != c2 && s.find_first_not_of("0123456789", c1 + 1) == c2)
            s = s.substr(0, c2);
        if (s.empty() || s[0] == '?')
            continue;
        bool wrapper = s.find("/cudasim/include/") != std::string::npos ||
                       s.find("/device/mma.cuh:") != std::string::npos;
        if (first || !wrapper)
            where = s;
        first = false;
        if (!wrapper)
            break;
    }
    return where;
}

// A running llvm-symbolizer (cudasim_set_symbolizer): its stdin and stdout, or -1.
int symbolizer_to = -1, symbolizer_from = -1;

// One line read from fd (without its newline); false at the end of the stream.
bool read_line(int fd, std::string &line) {
    line.clear();
    char c;
    for (;;) {
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        if (c == '\n')
            return true;
        line += c;
    }
}

// The running symbolizer's answer for each offset of the object at path (the chain of inlined
// calls, innermost first); empty if it does not answer. Called with symbol_mutex held.
std::vector<std::vector<std::string>> ask_symbolizer(const std::string &path,
                                                     const std::vector<unsigned long long> &offs) {
    std::string q;
    for (unsigned long long off : offs)
        q += format("\"%s\" 0x%llx\n", path.c_str(), off);
    for (size_t done = 0; done < q.size();) {
        ssize_t n = write(symbolizer_to, q.data() + done, q.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return {};
        done += static_cast<size_t>(n);
    }
    std::vector<std::vector<std::string>> answers(offs.size());
    std::string line;
    for (auto &a : answers)
        while (read_line(symbolizer_from, line) && !line.empty())
            a.push_back(line);
    return answers;
}

// The output lines of a shell command.
std::vector<std::string> command_lines(const std::string &cmd) {
    std::vector<std::string> out;
    if (FILE *f = popen(cmd.c_str(), "r")) {
        char line[4096];
        while (std::fgets(line, sizeof line, f)) {
            std::string s = line;
            if (!s.empty() && s.back() == '\n')
                s.pop_back();
            out.push_back(s);
        }
        pclose(f);
    }
    return out;
}
} // namespace

void symbolize_pcs(const std::vector<const void *> &pcs) {
    // One llvm-symbolizer per object file and up to 256 addresses: its answer for each address
    // is the chain of inlined calls (innermost first), then an empty line. It reads clang's
    // DWARF 5 line tables right; where it is missing, symbolize_pc falls back to addr2line.
    std::map<std::string, std::vector<std::pair<const void *, unsigned long long>>> by_object;
    {
        std::lock_guard<std::mutex> lock(symbol_mutex);
        for (const void *pc : pcs) {
            std::string path;
            unsigned long long off = 0;
            if (!symbol_cache().count(pc) && object_of(pc, &path, &off))
                by_object[path].emplace_back(pc, off);
        }
    }
    for (auto &kv : by_object)
        for (size_t from = 0; from < kv.second.size(); from += 256) {
            size_t to = std::min(kv.second.size(), from + 256);
            if (symbolizer_to >= 0) {
                std::lock_guard<std::mutex> lock(symbol_mutex);
                std::vector<unsigned long long> offs;
                for (size_t i = from; i < to; ++i)
                    offs.push_back(kv.second[i].second);
                std::vector<std::vector<std::string>> answers = ask_symbolizer(kv.first, offs);
                for (size_t i = from; i < to && answers.size() == offs.size(); ++i)
                    symbol_cache()[kv.second[i].first] = kernel_line(answers[i - from]);
                continue;
            }
            std::string cmd =
                format("llvm-symbolizer-14 --functions=none --obj='%s'", kv.first.c_str());
            for (size_t i = from; i < to; ++i)
                cmd += format(" 0x%llx", kv.second[i].second);
            std::vector<std::string> out = command_lines(cmd + " </dev/null 2>/dev/null");
            std::vector<std::vector<std::string>> answers(1);
            for (const std::string &l : out)
                if (l.empty())
                    answers.emplace_back();
                else
                    answers.back().push_back(l);
            while (!answers.empty() && answers.back().empty())
                answers.pop_back();
            if (answers.size() != to - from)
                continue; // not the expected answer: symbolize_pc asks one by one
            std::lock_guard<std::mutex> lock(symbol_mutex);
            for (size_t i = from; i < to; ++i)
                symbol_cache()[kv.second[i].first] = kernel_line(answers[i - from]);
        }
}

std::string symbolize_pc(const void *pc) {
    std::lock_guard<std::mutex> lock(symbol_mutex);
    auto it = symbol_cache().find(pc);
    if (it != symbol_cache().end())
        return it->second;
    std::string where = "?", path;
    unsigned long long off = 0;
    if (object_of(pc, &path, &off) && symbolizer_to >= 0) {
        std::vector<std::vector<std::string>> answers = ask_symbolizer(path, {off});
        if (answers.size() == 1)
            where = kernel_line(answers[0]);
    } else if (object_of(pc, &path, &off)) {
        std::string cmd =
            format("llvm-symbolizer-14 --functions=none --obj='%s' 0x%llx </dev/null 2>/dev/null"
                   " || addr2line -i -e '%s' 0x%llx </dev/null 2>/dev/null",
                   path.c_str(), off, path.c_str(), off);
        where = kernel_line(command_lines(cmd));
    }
    symbol_cache()[pc] = where;
    return where;
}

void set_symbolizer(int to_fd, int from_fd) {
    std::lock_guard<std::mutex> lock(symbol_mutex);
    symbolizer_to = to_fd;
    symbolizer_from = from_fd;
}

bool in_static_image(uintptr_t a) {
    std::call_once(image_once, [] { dl_iterate_phdr(collect_image, nullptr); });
    for (const range &r : image_ranges)
        if (a >= r.lo && a < r.hi)
            return true;
    return false;
}

namespace {
std::vector<host_argument> running_host_arguments;
} // namespace

void set_host_arguments(std::vector<host_argument> args) {
    running_host_arguments = std::move(args);
}

const host_argument *host_argument_at(uintptr_t a) {
    for (const host_argument &h : running_host_arguments)
        if (a >= h.lo && a < h.hi)
            return &h;
    return nullptr;
}

// ---- device memory ------------------------------------------------------------------------------

void *device_alloc(size_t bytes) {
    if (!access_stream_available())
        return std::malloc(bytes);
    size_t rounded = (bytes + 255) / 256 * 256;
    char *base = static_cast<char *>(std::aligned_alloc(256, redzone + rounded + redzone));
    if (!base)
        return nullptr;
    uintptr_t p = reinterpret_cast<uintptr_t>(base + redzone);
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto &f = freed_blocks();
    // The new block (and its redzones) may reuse freed memory: forget what it overlaps.
    for (auto it = f.lower_bound(p - redzone); it != f.end();) {
        if (it->first >= p + rounded + redzone)
            break;
        it = f.erase(it);
    }
    auto it = f.upper_bound(p);
    if (it != f.begin() && (--it)->first + it->second > p - redzone)
        f.erase(it);
    blocks()[p] = device_block{bytes, static_cast<uint8_t *>(std::calloc(bytes, 1))};
    ++blocks_generation;
    return base + redzone;
}

void device_release(void *ptr) {
    if (!access_stream_available())
        return std::free(ptr);
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto it = blocks().find(p);
    if (it == blocks().end())
        return;
    std::free(it->second.written);
    freed_blocks()[p] = it->second.size;
    blocks().erase(it);
    ++blocks_generation;
    std::free(static_cast<char *>(ptr) - redzone);
}

uint64_t device_blocks_generation() { return blocks_generation.load(std::memory_order_relaxed); }

uint8_t *written_shadow(uintptr_t base) {
    auto it = blocks().find(base);
    return it == blocks().end() ? nullptr : it->second.written;
}

void note_device_written(const void *p, size_t bytes) {
    if (!access_stream_available())
        return;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto &m = blocks();
    auto it = m.upper_bound(a);
    if (it == m.begin())
        return;
    --it;
    if (a + bytes > it->first + it->second.size)
        return;
    std::memset(it->second.written + (a - it->first), 1, bytes);
}

} // namespace detail

void register_shared_array(const void *array, size_t bytes, const char *name) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(array);
    for (const detail::shared_array_info &s : detail::tl_shared_arrays)
        if (s.lo == lo)
            return;
    detail::tl_shared_arrays.push_back({lo, bytes, name});
}

} // namespace cudasim

// ---- the hooks
// ------------------------------------------------------------------------------------ Called by
// code compiled with -fsanitize-coverage=func,trace-loads,trace-stores before each load and store
// (the sim-check build compiles only the rewritten kernel sources so).
#define CUDASIM_HOOKS(n, T)                                                                        \
    extern "C" void __sanitizer_cov_load##n(T *p) {                                                \
        cudasim::detail::deliver_explicit(p, n, cudasim::detail::access_op::load,                  \
                                          __builtin_return_address(0));                            \
    }                                                                                              \
    extern "C" void __sanitizer_cov_store##n(T *p) {                                               \
        cudasim::detail::deliver_explicit(p, n, cudasim::detail::access_op::store,                 \
                                          __builtin_return_address(0));                            \
    }
CUDASIM_HOOKS(1, uint8_t)
CUDASIM_HOOKS(2, uint16_t)
CUDASIM_HOOKS(4, uint32_t)
CUDASIM_HOOKS(8, uint64_t)
CUDASIM_HOOKS(16, __int128)

// ---- typed alignment --------------------------------------------------------------------------
// The kernel sources are also compiled with -fsanitize=alignment (sim-check, sim-tsan; sim-asan
// has all of -fsanitize=undefined), whose checks call this handler when a pointer to T is
// dereferenced at an address not aligned for T: a float4 load a GPU makes in one 16-byte access
// may be split into four 4-byte ones on the host, so the hooks alone cannot see it. In sim-check
// and sim-tsan the UBSan runtime is not linked (this is the only definition); in sim-asan (GCC:
// its runtime is a shared library, which these definitions come before) what is not a
// misaligned access of a kernel goes on to UBSan's own handler.
namespace {
struct ubsan_location {
    const char *file;
    uint32_t line, column;
};
struct ubsan_type {
    uint16_t kind, info;
    char name[1];
};
struct ubsan_mismatch {
    ubsan_location loc;
    const ubsan_type *type;
    unsigned char log_alignment;
    unsigned char check_kind;
};
// True (and reported, the launch ended) for a kernel's misaligned access.
bool misaligned(const ubsan_mismatch *d, uintptr_t ptr) {
    using namespace cudasim::detail;
#if CUDASIM_CHECK
    if (!tl_sim.active || !checks_enabled() || !ptr)
        return false;
#else
    if (!in_kernel() || !ptr || ptr % (uintptr_t{1} << d->log_alignment) == 0)
        return false;
#endif
    static const char *const kinds[] = {"read",
                                        "write",
                                        "reference binding",
                                        "member access",
                                        "member call",
                                        "constructor call",
                                        "downcast",
                                        "downcast",
                                        "upcast",
                                        "cast to virtual base",
                                        "nonnull binding",
                                        "dynamic operation"};
    const char *kind = d->check_kind < 12 ? kinds[d->check_kind] : "access";
    record_kernel_failure(current_where() +
                          format(" at %s:%u: memcheck: misaligned %s of type %s at %p: it needs "
                                 "a %u-byte aligned address",
                                 d->loc.file, d->loc.line, kind, d->type->name,
                                 reinterpret_cast<void *>(ptr), 1u << d->log_alignment));
    end_failed_thread();
}

#if CUDASIM_ASAN
// UBSan's own handler of that name (the next definition after this program's).
void ubsan_next(const char *name, const ubsan_mismatch *d, uintptr_t ptr) {
    using handler = void (*)(const void *, void *);
    if (auto next = reinterpret_cast<handler>(dlsym(RTLD_NEXT, name)))
        next(d, reinterpret_cast<void *>(ptr));
}
#endif
} // namespace

// (void *, void *): the parameters GCC declares them with when it sanitizes this file too.
extern "C" void __ubsan_handle_type_mismatch_v1(void *data, void *pointer) {
    auto d = static_cast<const ubsan_mismatch *>(data);
    auto ptr = reinterpret_cast<uintptr_t>(pointer);
    if (misaligned(d, ptr))
        return;
#if CUDASIM_ASAN
    ubsan_next("__ubsan_handle_type_mismatch_v1", d, ptr);
#endif
}
extern "C" void __ubsan_handle_type_mismatch_v1_abort(void *data, void *pointer) {
    auto d = static_cast<const ubsan_mismatch *>(data);
    auto ptr = reinterpret_cast<uintptr_t>(pointer);
    if (!misaligned(d, ptr)) {
#if CUDASIM_ASAN
        ubsan_next("__ubsan_handle_type_mismatch_v1_abort", d, ptr);
#endif
    }
    std::abort(); /* "abort": it does not return (misaligned() ends the thread when true) */
}
