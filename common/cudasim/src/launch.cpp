// launch.cpp — a kernel launch: the checks a GPU makes on the configuration, then the grid's
// blocks spread over a pool of OS threads (the caller's thread is one of them). Synchronous:
// the launch returns when every block has finished or one has failed.
#include "access.h"
#include "check.h"
#include "internal.h"

#include <condition_variable>
#include <thread>
#include <vector>

namespace cudasim {
namespace detail {

namespace {

// Returns the error a GPU gives for this configuration (and why), or cudaSuccess.
cudaError_t check_config(const launch_desc &d, std::string &why) {
    const dim3 &b = d.block, &g = d.grid;
    uint64_t threads = static_cast<uint64_t>(b.x) * b.y * b.z;
    if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0) {
        why = format("grid (%u,%u,%u) or block (%u,%u,%u) has a zero dimension", g.x, g.y, g.z, b.x,
                     b.y, b.z);
        return cudaErrorInvalidConfiguration;
    }
    if (threads > max_threads_per_block) {
        why = format("block (%u,%u,%u) has %llu threads; the limit is %u", b.x, b.y, b.z,
                     static_cast<unsigned long long>(threads), max_threads_per_block);
        return cudaErrorInvalidConfiguration;
    }
    if (b.x > 1024 || b.y > 1024 || b.z > 64) {
        why = format("block (%u,%u,%u) exceeds the per-dimension limits (1024,1024,64)", b.x, b.y,
                     b.z);
        return cudaErrorInvalidConfiguration;
    }
    if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        why = format("grid (%u,%u,%u) exceeds the limits (2147483647,65535,65535)", g.x, g.y, g.z);
        return cudaErrorInvalidConfiguration;
    }
    size_t limit = max_dynamic_smem(d.fn);
    if (d.smem > limit) {
        why = format("%zu bytes of dynamic shared memory requested; the kernel may use %zu", d.smem,
                     limit);
        if (limit < smem_optin)
            why += format(" (opt in to more, up to %zu, with cudaFuncSetAttribute(kernel, "
                          "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))",
                          smem_optin);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

// OS threads that run blocks next to the launching thread. Never destroyed: a process may exit
// while they sleep, and must not wait for them.
class worker_pool {
  public:
    void run(launch_state &ls, unsigned workers) {
        if (workers <= 1) {
            run_blocks(ls);
            return;
        }
        start(workers);
        {
            std::lock_guard<std::mutex> lock(m_);
            job_ = &ls;
            wanted_ = workers - 1;
            pending_ = wanted_;
            ++generation_;
        }
        wake_.notify_all();
        run_blocks(ls);
        std::unique_lock<std::mutex> lock(m_);
        done_.wait(lock, [this] { return pending_ == 0; });
        job_ = nullptr;
    }

    // Starts the OS threads that `workers` need now rather than at a launch.
    void start(unsigned workers) {
        std::lock_guard<std::mutex> lock(m_);
        while (threads_ + 1 < workers)
            std::thread(&worker_pool::work, this, threads_++).detach();
    }

  private:
    void work(unsigned index) {
        prepare_runner(); // its signal handlers and alternate stack, before any job
        uint64_t seen = 0;
        for (;;) {
            launch_state *job;
            {
                std::unique_lock<std::mutex> lock(m_);
                wake_.wait(lock, [&] { return generation_ != seen; });
                seen = generation_;
                if (index >= wanted_)
                    continue;
                job = job_;
            }
            run_blocks(*job);
            std::lock_guard<std::mutex> lock(m_);
            if (--pending_ == 0)
                done_.notify_one();
        }
    }

    std::mutex m_;
    std::condition_variable wake_, done_;
    unsigned threads_ = 0, wanted_ = 0, pending_ = 0;
    uint64_t generation_ = 0;
    launch_state *job_ = nullptr;
};

worker_pool &pool() {
    static worker_pool *p = new worker_pool();
    return *p;
}

} // namespace

void prepare_workers(unsigned threads) { pool().start(threads); }

namespace {
// The pointer arguments of d into the host's static data: not in a cudaMalloc'd block, but in
// the program's image (a static array passed to a kernel, which works here and faults on a GPU).
std::vector<host_argument> host_static_arguments(const launch_desc &d) {
    std::vector<host_argument> found;
    for (int n = 0; n < d.num_pointer_args; ++n) {
        const void *p = d.pointer_args[n];
        uintptr_t a = reinterpret_cast<uintptr_t>(p);
        if (!p || in_device_allocation(p) || !in_static_image(a))
            continue;
        host_argument h{a, a, a + 1, d.pointer_positions[n], ""};
        uintptr_t lo = 0, hi = 0;
        h.name = object_at(p, &lo, &hi);
        if (!h.name.empty() && lo <= a && a < hi) {
            h.lo = lo;
            h.hi = hi;
        }
        found.push_back(h);
    }
    return found;
}
} // namespace

cudaError_t launch_kernel(const launch_desc &d) {
    if (in_kernel())
        fail_in_kernel(format("launch of kernel '%s' at %s:%d from device code: dynamic "
                              "parallelism is not supported by the simulator",
                              d.kernel, d.file, d.line));
    if (cudaError_t e = sticky_error())
        return set_last_error(e);
    std::string why;
    if (cudaError_t e = check_config(d, why)) {
        report_error(format("launch of kernel %s at %s:%d rejected: %s (%s)",
                            kernel_label(d).c_str(), d.file, d.line, why.c_str(),
                            cudaGetErrorName(e)));
        return set_last_error(e);
    }
    // A pointer to the host's static data: the checked build reports the kernel's first access
    // to it (memcheck: kernel, block, thread, line); a build that does not see accesses reports
    // it now, before any thread runs, as a GPU would fault at that access.
    std::vector<host_argument> hosts = host_static_arguments(d);
    if (!hosts.empty() && !checks_enabled()) {
        const host_argument &h = hosts.front();
        std::string what =
            h.name.empty() ? std::string("an object of the program") : "'" + h.name + "'";
        if (h.at != h.lo)
            what += format(" + %zu bytes", static_cast<size_t>(h.at - h.lo));
        report_error(format("kernel %s launched at %s:%d: argument %d points to the host's "
                            "static data (%s): a GPU kernel cannot reach host memory and faults "
                            "at its first access (copy it to cudaMalloc'd memory); reported at "
                            "the launch, since this build does not see the kernel's accesses "
                            "(the sim-check build names the access)",
                            kernel_label(d).c_str(), d.file, d.line, h.position, what.c_str()));
        set_sticky(cudaErrorIllegalAddress);
        return set_last_error(cudaErrorIllegalAddress);
    }
    set_host_arguments(std::move(hosts));
    static std::atomic<uint64_t> launches{0};
    launch_state ls;
    ls.desc = &d;
    ls.nblocks = static_cast<uint64_t>(d.grid.x) * d.grid.y * d.grid.z;
    ls.nthreads = d.block.x * d.block.y * d.block.z;
    ls.id = ++launches;
    ls.order = static_cast<cudasim_order>(settings().order.load());
    ls.seed = settings().seed;
    uint64_t workers = std::min<uint64_t>(static_cast<uint64_t>(settings().threads), ls.nblocks);
    // The host's writes (inputs, parameters) happen before every simulated thread.
    tsan_release(&ls.tsan_start);
    start_watchdog();
    install_checkers();
    std::string label = have_access_observers() ? kernel_label(d) : std::string();
    launch_info li{label.c_str(), ls.id, ls.nblocks, ls.nthreads, d.smem};
    const bool checking = checks_enabled();
    if (checking)
        checks_launch_begin(ls.nblocks, static_cast<unsigned>(workers));
    deliver_launch_begin(li);
    pool().run(ls, static_cast<unsigned>(workers));
    if (checking) { // racecheck of global memory decides when every block has run
        const unsigned grid[3] = {d.grid.x, d.grid.y, d.grid.z},
                       block[3] = {d.block.x, d.block.y, d.block.z};
        std::string race = checks_launch_end(kernel_label(d), grid, block, ls.failed);
        if (!race.empty())
            ls.fail(race);
    }
    deliver_launch_end(li, ls.failed);
    set_host_arguments({});
    if (ls.failed) {
        report_error(ls.error);
        set_sticky(ls.code);
        return set_last_error(ls.code);
    }
    return cudaSuccess;
}

} // namespace detail
} // namespace cudasim
