// internal.h — declarations shared by the simulator's runtime sources: the state of one launch,
// the settings, error reporting, and the sanitizer hooks for happens-before edges.
#ifndef CUDASIM_INTERNAL_H
#define CUDASIM_INTERNAL_H

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include <cuda_runtime.h>
#include <cudasim.h>

#if CUDASIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace cudasim {
namespace detail {

// ThreadSanitizer sees the simulated threads as fibers that never synchronise by switching; these
// mark where CUDA does order them (barriers, warp collectives, block and launch boundaries).
inline void tsan_release(void *sync) {
#if CUDASIM_TSAN
    __tsan_release(sync);
#else
    (void)sync;
#endif
}
inline void tsan_acquire(void *sync) {
#if CUDASIM_TSAN
    __tsan_acquire(sync);
#else
    (void)sync;
#endif
}

#if CUDASIM_TSAN
extern "C" void __tsan_read_range(void *addr, unsigned long size);
extern "C" void __tsan_write_range(void *addr, unsigned long size);
#endif
// Accesses the runtime makes for a kernel (cp.async's copies): the runtime is not instrumented,
// so these tell ThreadSanitizer, which then sees them as the calling simulated thread's.
inline void tsan_read_range(const void *p, size_t n) {
#if CUDASIM_TSAN
    __tsan_read_range(const_cast<void *>(p), n);
#else
    (void)p, (void)n;
#endif
}
inline void tsan_write_range(void *p, size_t n) {
#if CUDASIM_TSAN
    __tsan_write_range(p, n);
#else
    (void)p, (void)n;
#endif
}

// One launch in flight: what every worker reads, and where the first failure is recorded.
struct launch_state {
    const launch_desc *desc = nullptr;
    uint64_t nblocks = 0;
    unsigned nthreads = 0; // per block
    uint64_t id = 0;       // distinguishes launches (per-launch setup of a worker)
    cudasim_order order = CUDASIM_ORDER_FORWARD;
    unsigned long long seed = 0;
    std::atomic<uint64_t> next_block{0};
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::string error;                         // the first failure's report
    cudaError_t code = cudaErrorLaunchFailure; // and what the launch returns for it
    char tsan_start = 0;

    void fail(const std::string &report, cudaError_t err = cudaErrorLaunchFailure) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error.empty()) {
            error = report;
            code = err;
        }
        failed = true;
    }
};

// scheduler.cpp: runs blocks of `ls` on the calling OS thread until none are left or one failed.
void run_blocks(launch_state &ls);
// True while the calling OS thread runs a simulated thread.
bool in_kernel();
// From inside a kernel: reports `what` against the current thread and ends its launch.
[[noreturn]] void fail_in_kernel(const std::string &what);
// The same in two statements, for a report built from temporaries: record it (they are freed at
// the end of that statement), then end the thread, which leaks nothing under LeakSanitizer.
void record_kernel_failure(const std::string &what);
[[noreturn]] void end_failed_thread();
// The watchdog (CUDASIM_WATCHDOG): ends a launch whose blocks stop making progress.
void start_watchdog();
// The watchdog ends a stalled or failed launch by signalling its worker, whose handler abandons
// the simulated thread it interrupts. Simulator code that takes a lock (naming a kernel, the
// loader's lock in dladdr, recording a failure) runs inside a no_interrupt section: a signal that
// arrives there is acted on when the section ends, never with the lock held (abandoned there, the
// lock would stay taken and the worker's own report would wait for it forever).
struct no_interrupt {
    no_interrupt();
    ~no_interrupt();
    no_interrupt(const no_interrupt &) = delete;
    no_interrupt &operator=(const no_interrupt &) = delete;
};
// Creates the calling OS thread's block runner now (its signal handlers, its alternate stack).
void prepare_runner();
// Inaccessible ranges a program guards its buffers with (cudasim_add_guard_region): a kernel's
// access there is reported as past the end of `name`.
int add_guard_region(const void *lo, size_t bytes, const void *data_end, const char *name);
void clear_guard_regions();
// launch.cpp: starts the worker threads that `threads` OS threads running blocks need.
void prepare_workers(unsigned threads);

// runtime.cpp
// The settings live alone in one page of their own: cudasim_lock_settings() makes it read-only.
struct settings_t {
    std::atomic<int> order{CUDASIM_ORDER_FORWARD};
    std::atomic<unsigned long long> seed{0};
    std::atomic<int> threads{1};
    size_t stack_bytes = 256 * 1024;
    std::atomic<double> watchdog_s{10.0}; // seconds without progress before a launch ends; 0: off
    std::atomic<int> checks{1};           // the sim-check build's checkers (CUDASIM_CHECK=0: off)
    bool locked = false;                  // cudasim_lock_settings(): the setters change nothing
};
settings_t &settings();
// Prints "cudasim: error: <message>" and keeps it for cudasim_last_error_message().
void report_error(const std::string &message);
// A launch failed: the error becomes sticky, as a device fault is on a GPU.
void set_sticky(cudaError_t err);
cudaError_t sticky_error();
// Records err as the calling thread's last error (cudaGetLastError) and returns it.
cudaError_t set_last_error(cudaError_t err);
// The largest dynamic shared memory a launch of fn may request (48 KiB unless raised).
size_t max_dynamic_smem(const void *fn);

// Properties of the virtual device.
constexpr size_t smem_default = 48 * 1024;
constexpr size_t smem_optin = 227 * 1024;
constexpr unsigned max_threads_per_block = 1024;

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// How messages name the kernel of a launch: 'name' as the launch wrote it, or, when it was
// launched through a pointer (`scores<<<...>>>` with `scores` a parameter), the function's own
// name from the executable's symbol table: 'scores_tiled' (launched as 'scores').
std::string kernel_label(const launch_desc &d);
// The function whose code contains `pc` (from the symbol table, demangled), or "" (also if pc
// is not in the same executable or library as `same_object_as`, e.g. in a sanitizer runtime).
std::string function_at(const void *pc, const void *same_object_as);
// The static data object (an array, a variable) that contains p, and its extent; "" if none.
std::string object_at(const void *p, uintptr_t *lo, uintptr_t *hi);
// True if p lies in a live cudaMalloc'd block or just past its end.
bool in_device_allocation(const void *p);

} // namespace detail
} // namespace cudasim

#endif // CUDASIM_INTERNAL_H
