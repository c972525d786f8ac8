// access.h — the stream of memory accesses of an instrumented kernel, and who listens to it.
//
// In an instrumented build (the sim-check preset) every global and shared load and store of
// kernel code reaches the simulator with its address, size and code address; the simulator
// classifies it (global, shared, local, ...) and hands it to every registered observer (all but
// plain loads and stores of the simulated thread's own stack, which no observer counts). The
// checkers (memcheck, racecheck, initcheck) and the profile are observers of this one stream.
//
// Concurrency: blocks of one launch run on several OS threads at once, so `access` may be called
// concurrently from different OS threads (never concurrently for the same block). An observer
// keeps per-OS-thread or per-block state, or locks. launch_begin/launch_end are called on the
// launching thread with no block running.
#ifndef CUDASIM_ACCESS_H
#define CUDASIM_ACCESS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cudasim {
namespace detail {

enum class mem_space : uint8_t {
    global, // inside a live cudaMalloc'd block (or a __device__/__managed__ variable)
    shared, // inside the block's static or dynamic shared memory
    local,  // the simulated thread's own stack (registers and local arrays on a GPU)
    other   // none of these: host memory, a freed block, a redzone (memcheck reports it)
};

enum class access_op : uint8_t {
    load,
    store,
    atomic,       // read-modify-write
    ldmatrix_row, // one 16-byte row read by ldmatrix (a phase of 8 rows is one shared wavefront)
    cp_async_src, // the global side of a cp.async
    cp_async_dst  // the shared side of a cp.async
};

// What an address lies in, in more detail than mem_space (memcheck names it in its reports).
enum class mem_object : uint8_t {
    allocation,          // a live cudaMalloc/cudaMallocHost block: base, size
    static_image,        // the program's static data (__device__, __constant__ variables, literals)
    dynamic_shared,      // the launch's dynamic shared memory: base, size
    static_shared,       // a __shared__ variable: base and size of all static shared memory
    static_shared_guard, // past the end of a static __shared__ array (base, size, name: it)
    stack,               // the simulated thread's stack
    builtin,             // threadIdx, blockIdx, blockDim, gridDim
    redzone,             // just before or after a cudaMalloc block (base, size: that block)
    shared_redzone,      // just before or after the dynamic shared memory (base, size: it)
    freed,               // a cudaFree'd block (base, size: that block)
    unknown              // anything else (host memory)
};

struct access_event {
    uintptr_t addr;
    uint32_t size; // bytes
    access_op op;
    mem_space space;
    const void *pc;  // code address of the access (symbolise with symbolize_pc)
    uint64_t block;  // linear block index: x + y*gx + z*gx*gy
    uint32_t thread; // linear thread index in the block; warp = thread / 32, lane = thread % 32
    mem_object object = mem_object::unknown;
    uintptr_t object_base = 0; // the object the address lies in (or next to), where known
    size_t object_size = 0;
    const char *object_name = nullptr; // a static __shared__ array's name (static_shared_guard)
};

struct launch_info {
    const char *kernel; // as reports name it
    uint64_t launch_id;
    uint64_t nblocks;
    unsigned nthreads; // per block
    size_t dyn_smem;   // bytes of dynamic shared memory
};

class access_observer {
  public:
    virtual ~access_observer() = default;
    virtual void launch_begin(const launch_info &) {}
    virtual void access(const access_event &e) = 0;
    // A tensor-core instruction issued by one warp (m16n8k16: 2*16*8*16 = 4096 FLOPs).
    // file:line: the call site the PTX wrapper was given.
    virtual void mma(uint64_t /*block*/, uint32_t /*warp*/, uint64_t /*flops*/,
                     const char * /*file*/, int /*line*/) {}
    virtual void launch_end(const launch_info &, bool /*failed*/) {}
};

// Registration (not thread-safe against running launches: register between launches).
void add_access_observer(access_observer *o);
void remove_access_observer(access_observer *o);
// True when kernels of this program were compiled instrumented (accesses do reach observers).
bool access_stream_available();
// "file:line" of a code address in instrumented code (cached), or "?" when unknown.
std::string symbolize_pc(const void *pc);
// Fills symbolize_pc's cache for many code addresses at once (one symbolizer run per object).
void symbolize_pcs(const std::vector<const void *> &pcs);
// Both ask a running llvm-symbolizer on these pipes instead (cudasim_set_symbolizer; -1: not).
void set_symbolizer(int to_fd, int from_fd);

// True if a lies in the static data or code of a loaded module (its PT_LOAD segments).
bool in_static_image(uintptr_t a);
// A pointer argument of the running launch into the host's static data (an array or variable of
// the program): a GPU kernel cannot reach it. memcheck reports the kernel's accesses to it.
struct host_argument {
    uintptr_t at;     // the pointer
    uintptr_t lo, hi; // the object it points into ([at, at + 1) if unnamed)
    int position;     // 1-based
    std::string name; // the object's name, or ""
};
// Set by the launch before its blocks run, cleared after it (launches are synchronous).
void set_host_arguments(std::vector<host_argument> args);
const host_argument *host_argument_at(uintptr_t a);

// Delivery, called by the simulator (the instrumentation hooks, the PTX emulation, the launch).
// Each is one relaxed load when no observer is registered.
bool have_access_observers();
void deliver_access(const access_event &e);
void deliver_mma(uint64_t block, uint32_t warp, uint64_t flops, const char *file, int line);
void deliver_launch_begin(const launch_info &li);
void deliver_launch_end(const launch_info &li, bool failed);

} // namespace detail
} // namespace cudasim

#endif // CUDASIM_ACCESS_H
