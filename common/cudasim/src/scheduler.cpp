// scheduler.cpp — runs the blocks of a launch: the threads of a block as fibers on one OS thread,
// barriers, warp collectives, and the reports of the bugs they expose (barrier divergence, exit
// before a barrier, deadlock, bad warp masks, fiber stack overflow, device assert) and the
// watchdog that ends a block making no progress (a spin-wait that nothing ends).
//
// A fiber runs until it waits (barrier, warp collective) or exits; then the next runnable fiber
// in the run queue runs. Releases push the waiting fibers onto the queue in the configured order
// (forward, reverse, shuffled), so that order is the order in which they resume. If the queue
// runs dry while threads still wait, nothing can ever wake them: a deadlock.
#include "access.h"
#include "check.h"
#include "fiber.h"
#include "internal.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <pthread.h>
#include <random>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#if CUDASIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace cudasim {
namespace detail {

namespace {

constexpr unsigned full_mask = 0xffffffffu;

// named: at a named barrier (bar.sync id, count); mbarrier: blocked in mbarrier_wait.
enum class wait_kind : unsigned char { running, barrier, warp, named, mbarrier, exited };

struct sim_thread : fiber_base {
    uint3 tid{};
    unsigned linear = 0;
    wait_kind wait = wait_kind::exited;
    bool started = false;   // its context was entered since the last prepare
    bool abandoned = false; // left mid-run by a failed launch
    const char *file = "";  // where it waits
    int line = 0;
    unsigned bar_phase = 0;     // the barrier generation it waits in
    unsigned named_id = 0;      // the named barrier it waits at
    const void *mbar = nullptr; // the mbarrier it waits on
};

// One lane's part in a warp collective.
struct lane_slot {
    collective kind;
    const char *name; // as reports name it: the intrinsic, or what an allgather emulates
    unsigned mask;
    int param; // source lane, delta or xor mask; the size of an allgather's contribution
    int width;
    unsigned long long value, result; // an allgather's value is the address of its contribution
    unsigned done_phase;              // which tsan_done object its completion released
    char tsan_sync;
};

struct warp_state {
    unsigned present = 0; // lanes that exist in the block (the last warp may be partial)
    unsigned exited = 0;
    unsigned arrived = 0; // lanes waiting in a collective
    unsigned completions = 0;
    lane_slot lane[32];
    char tsan_done[2];
    // The contributions of the warp's last allgather, copied here by the last lane to arrive (the
    // others' may live on their stacks only until they resume) and read by every lane before it
    // arrives at its next collective (warp_allgather copies them out; the mma and ldmatrix
    // emulation reads them in place, warp_allgather_view). One buffer is enough: the next
    // allgather completes only after every lane arrived at it, so after every lane read this.
    alignas(16) unsigned char gathered[32 * warp_allgather_max_bytes]; // read in place as any type
};

const char *collective_name(collective k) {
    switch (k) {
    case collective::syncwarp:
        return "__syncwarp()";
    case collective::shfl:
        return "__shfl_sync()";
    case collective::shfl_up:
        return "__shfl_up_sync()";
    case collective::shfl_down:
        return "__shfl_down_sync()";
    case collective::shfl_xor:
        return "__shfl_xor_sync()";
    case collective::ballot:
        return "__ballot_sync()";
    case collective::any:
        return "__any_sync()";
    case collective::all:
        return "__all_sync()";
    case collective::allgather:
        return "cudasim::warp_allgather()";
    case collective::reduce:
        return "__reduce_*_sync()";
    }
    return "warp collective";
}

bool is_shuffle(collective k) {
    return k == collective::shfl || k == collective::shfl_up || k == collective::shfl_down ||
           k == collective::shfl_xor;
}

bool same_site(const char *f1, int l1, const char *f2, int l2) {
    return l1 == l2 && (f1 == f2 || std::strcmp(f1, f2) == 0);
}

std::string fmt3(const uint3 &v) { return format("(%u,%u,%u)", v.x, v.y, v.z); }

// Lanes of a mask as "16-31" or "3, 5, 7-9".
std::string lane_list(unsigned mask) {
    std::string s;
    for (unsigned l = 0; l < 32;) {
        if (!(mask >> l & 1u)) {
            ++l;
            continue;
        }
        unsigned e = l;
        while (e + 1 < 32 && (mask >> (e + 1) & 1u))
            ++e;
        s += (s.empty() ? "" : ", ") + (e == l ? format("%u", l) : format("%u-%u", l, e));
        l = e + 1;
    }
    return s;
}

class block_runner;
thread_local block_runner *tl_runner; // set while this OS thread runs blocks

// Fails the launch from a method of block_runner with the report built by the arguments. The
// report's temporaries are destroyed at the end of the first statement, before the thread is
// abandoned: on an abandoned stack they would never be freed (LeakSanitizer reports them).
#define CUDASIM_FAIL(...)                                                                          \
    do {                                                                                           \
        {                                                                                          \
            no_interrupt quiet_;                                                                   \
            record_failure(__VA_ARGS__);                                                           \
        }                                                                                          \
        abandon();                                                                                 \
    } while (0)

// no_interrupt (internal.h): sections nest; the watchdog's signal inside one is remembered here.
thread_local volatile sig_atomic_t tl_no_interrupt = 0;
thread_local volatile sig_atomic_t tl_interrupt_pending = 0;
thread_local const void *volatile tl_interrupt_pc = nullptr;

void on_fault(int sig, siginfo_t *info, void *uctx);
void on_watchdog(int sig, siginfo_t *info, void *uctx);
struct sigaction previous_segv;
// The watchdog interrupts a worker with this signal (ignored by default, unused by sanitizers).
constexpr int watchdog_signal = SIGURG;

#if CUDASIM_ASAN
void on_asan_report(const char *report);
#endif

void install_fault_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
#if CUDASIM_ASAN
        __asan_set_error_report_callback(on_asan_report);
#endif
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &previous_segv);
        // Runs on the interrupted fiber's stack; when it abandons the fiber it never returns, and
        // the signal stays blocked until run_block unblocks it on the OS thread's own stack.
        sa.sa_sigaction = on_watchdog;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(watchdog_signal, &sa, nullptr);
    });
}

// What the watchdog thread knows of each OS thread that runs blocks.
struct watch_entry {
    pthread_t thread;
    std::atomic<launch_state *> launch{nullptr}; // while it runs blocks of a launch
    std::atomic<uint64_t> progress{0};           // bumped whenever its block makes progress
    std::atomic<bool> expired{false};            // set by the watchdog before it signals
};
std::mutex watch_mutex;
std::vector<watch_entry *> &watch_list() {
    static auto *v = new std::vector<watch_entry *>(); // never destroyed: usable during exit
    return *v;
}

class block_runner {
  public:
    block_runner() : threads_(new sim_thread[max_threads_per_block]) {
        fiber_init_main(main_);
        watch_.thread = pthread_self();
        {
            std::lock_guard<std::mutex> lock(watch_mutex);
            watch_list().push_back(&watch_);
        }
        queue_.resize(max_threads_per_block);
        // The overflow handler needs a stack of its own: the faulting one is exhausted. Keep an
        // alternate stack someone (a sanitizer) already installed.
        stack_t old;
        if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
            altstack_.resize(64 * 1024);
            stack_t ss{};
            ss.ss_sp = altstack_.data();
            ss.ss_size = altstack_.size();
            sigaltstack(&ss, nullptr);
        }
        install_fault_handler();
    }

    ~block_runner() {
        // exit() called from a kernel runs this on a fiber stack: leave everything mapped then.
        if (cur_)
            return;
        {
            std::lock_guard<std::mutex> lock(watch_mutex);
            auto &v = watch_list();
            v.erase(std::remove(v.begin(), v.end(), &watch_), v.end());
        }
        if (!altstack_.empty()) {
            stack_t ss{};
            ss.ss_flags = SS_DISABLE;
            sigaltstack(&ss, nullptr);
        }
        for (unsigned i = 0; i < max_threads_per_block; ++i)
            fiber_release(threads_[i]);
        release_smem();
    }

    void begin_launch(launch_state &ls);
    void run_block(uint64_t block);

    // The kernel-facing operations (current thread = cur_).
    int barrier(const char *file, int line, bar_reduce op, int predicate);
    unsigned long long collective_op(collective kind, unsigned mask, unsigned long long value,
                                     int param, int width, const char *file, int line,
                                     const char *name);
    const void *allgather_view(const void *mine, size_t bytes, const char *what, const char *file,
                               int line);
    // __nanosleep: the thread goes to the back of the run queue.
    void pause(const char *file, int line) {
        if (file) { // a spinning atomic keeps the last place the thread waited or slept
            cur_->file = file;
            cur_->line = line;
        }
        tsan_release(&pause_sync_);
        push(*cur_);
        yield();
    }
    void named_barrier(unsigned id, unsigned count, bool wait, const char *file, int line);
    // mbarrier_wait: the current thread waits until wake_mbarrier(bar); the caller checks again.
    void block_on_mbarrier(const void *bar, const char *file, int line) {
        cur_->wait = wait_kind::mbarrier;
        cur_->mbar = bar;
        cur_->file = file;
        cur_->line = line;
        tsan_release(&pause_sync_);
        yield();
        tsan_acquire(&pause_sync_);
    }
    void wake_mbarrier(const void *bar) {
        progress();
        for (unsigned i : order_)
            if (threads_[i].wait == wait_kind::mbarrier && threads_[i].mbar == bar)
                push(threads_[i]);
    }
    unsigned active_mask() const {
        const warp_state &w = warps_[cur_->linear / 32];
        return w.present & ~w.exited;
    }
    [[noreturn]] void fail(const std::string &what, cudaError_t code = cudaErrorLaunchFailure);
    // The two halves of fail(), for CUDASIM_FAIL: records the report, then leaves the current
    // thread for good.
    void record_failure(const std::string &what, cudaError_t code = cudaErrorLaunchFailure) {
        ls_->fail(what, code);
        failed_ = true;
    }
    [[noreturn]] void abandon();
    bool running() const { return cur_ != nullptr; }
    std::string where_current() const { return where(*cur_); }
    std::string where_block() const {
        return format("kernel %s block %s", kernel_label(*ls_->desc).c_str(),
                      fmt3(blockIdx).c_str());
    }
    std::string coords(uint32_t linear) const { return fmt3(threads_[linear].tid); }
    [[noreturn]] void assert_failed(const char *expr, const char *file, unsigned line,
                                    const char *function);
    // In the watchdog's signal handler, on the worker: ends the block if the watchdog expired it
    // or another block already failed the launch. `pc`: where the running thread was.
    void interrupted(const void *pc);
    std::string stall_report() const;
    watch_entry watch_;
    bool fault_report(const void *addr, char *buf, size_t len) const;
    // In the SIGSEGV handler: a fault at `addr` in the guard pages around dynamic shared memory
    // ends the block (never returns); otherwise returns.
    void smem_fault(const void *addr, const void *pc, bool write);
#if CUDASIM_ASAN
    bool current_thread(char *buf, size_t len) const;
#endif

  private:
    static void fiber_main();
    [[noreturn]] void thread_exit();

    std::string where(const sim_thread &t) const {
        return format("kernel %s block %s thread %s", kernel_label(*ls_->desc).c_str(),
                      fmt3(blockIdx).c_str(), fmt3(t.tid).c_str());
    }
    std::string where_at(const sim_thread &t, const char *file, int line) const {
        return where(t) + format(" at %s:%d", file, line);
    }
    sim_thread &lane_thread(const warp_state &w, unsigned lane) {
        return threads_[static_cast<unsigned>(&w - warps_.data()) * 32 + lane];
    }

    void push(sim_thread &t) {
        t.wait = wait_kind::running;
        queue_[(q_head_ + q_size_++) % max_threads_per_block] = &t;
    }
    sim_thread *pop() {
        if (q_size_ == 0)
            return nullptr;
        sim_thread *t = queue_[q_head_];
        q_head_ = (q_head_ + 1) % max_threads_per_block;
        --q_size_;
        return t;
    }
    void switch_to(fiber_base &from, sim_thread *to, bool from_finished) {
        cur_ = to;
        atomics_since_switch = 0;
        sim_context &c = sim_ctx();
        c.active = to != nullptr;
        c.delivering = false; // a checker that failed the thread left mid-delivery
        if (to) {
            threadIdx = to->tid;
            c.thread = to->linear;
            c.stack_lo = reinterpret_cast<uintptr_t>(to->stack_lo);
            c.stack_hi = c.stack_lo + to->stack_size;
        }
        fiber_switch(from, to ? static_cast<fiber_base &>(*to) : main_, from_finished);
    }
    // The current thread has stopped running (its wait is set): run the next one.
    void yield() {
        sim_thread *self = cur_;
        sim_thread *next = pop();
        if (next != self)
            switch_to(*self, next, false);
    }
    void fill_order(uint64_t block);
    void release_lanes(warp_state &w, unsigned mask);
    void complete_collective(warp_state &w, unsigned mask);
    unsigned long long reduce_lanes(const warp_state &w, unsigned mask) const;
    struct thread_group {
        const char *what; // the barrier or collective they wait at; null: running or runnable
        const char *file;
        int line;
        std::vector<unsigned> ids;
    };
    std::vector<thread_group> group_threads() const;
    std::string describe(const std::vector<thread_group> &groups) const;
    std::string deadlock_report() const;
    void progress() { watch_.progress.fetch_add(1, std::memory_order_relaxed); }

    fiber_base main_;
    std::unique_ptr<sim_thread[]> threads_;
    std::vector<char> altstack_;
    launch_state *ls_ = nullptr;
    uint64_t launch_id_ = 0;
    unsigned n_ = 0; // threads per block
    std::vector<warp_state> warps_;
    std::vector<uint32_t> warp_gen_; // completed collectives per warp (the checkers' sync epochs)
    std::vector<unsigned> order_;
    std::vector<sim_thread *> queue_;
    unsigned q_head_ = 0, q_size_ = 0;
    std::mt19937_64 rng_;
    sim_thread *cur_ = nullptr;
    bool failed_ = false;
    void *smem_ = nullptr; // the allocation (with redzones in the sim-check build)
    size_t smem_size_ = 0;
    size_t smem_redzone_ = 0;
    char *smem_map_ = nullptr; // the guarded mapping around smem_ (not under ASan)
    size_t smem_map_bytes_ = 0;
    void release_smem() {
#if CUDASIM_ASAN
        std::free(smem_);
#else
        if (smem_map_)
            munmap(smem_map_, smem_map_bytes_);
        smem_map_ = nullptr;
#endif
        smem_ = nullptr;
    }
    // A fault in a simulated thread outside its stack: the thread, the address, whether it wrote.
    const sim_thread *faulted_ = nullptr;
    const void *fault_addr_ = nullptr;
    const void *fault_pc_ = nullptr;
    bool fault_write_ = false;
    std::string fault_report_text() const;

    unsigned live_ = 0;
    sim_thread *first_exited_ = nullptr;
    // The block barrier: threads arrived in the current generation, its call site, and the
    // results of __syncthreads_count/and/or per generation parity.
    unsigned bar_arrived_ = 0, bar_phase_ = 0;
    const sim_thread *bar_first_ = nullptr;
    int bar_count_ = 0;
    int bar_result_[2] = {0, 0};
    unsigned bar_participants_[2] = {0, 0};
    char bar_sync_[2];
    // Named barriers 1..15 (bar.sync / bar.arrive id, count): arrivals in the current generation,
    // the count the first arrival passed, and where.
    static constexpr unsigned named_barriers = 16;
    unsigned nb_arrived_[named_barriers] = {}, nb_count_[named_barriers] = {};
    const sim_thread *nb_first_[named_barriers] = {};
    const char *nb_file_[named_barriers] = {};
    int nb_line_[named_barriers] = {};
    char nb_sync_[named_barriers] = {};
    char block_start_sync_ = 0, block_end_sync_ = 0;
    char abandon_sync_ = 0, pause_sync_ = 0;
    // The thread the watchdog interrupted, where, and whether its block timed out (or only
    // stopped because another block failed the launch).
    const sim_thread *stalled_ = nullptr;
    const void *stall_pc_ = nullptr;
    bool stall_expired_ = false;
};

void block_runner::begin_launch(launch_state &ls) {
    ls_ = &ls;
    if (launch_id_ == ls.id)
        return;
    launch_id_ = ls.id;
    const launch_desc &d = *ls.desc;
    n_ = ls.nthreads;
    blockDim = d.block;
    gridDim = d.grid;
    release_smem();
    smem_size_ = d.smem;
#if CUDASIM_ASAN
    // Exactly the launch's size, from malloc: ASan's redzones catch an access past its end.
    // (The sim-check build, which adds redzones of its own, is never an ASan build.)
    smem_redzone_ = 0;
    if (posix_memalign(&smem_, 128, smem_size_) != 0)
        smem_ = nullptr;
#else
    // Pages with an inaccessible page on each side; the buffer ends where the upper one starts
    // (less up to 127 bytes, to keep it 128-byte aligned, and less the redzone), so an access
    // past its end faults and is reported (on_fault), as is any access when the launch asked for
    // none. The sim-check build puts redzones of its own on both sides, which memcheck knows.
    smem_redzone_ = access_stream_available() ? 256 : 0;
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t aligned = (smem_size_ + 127) / 128 * 128;
    size_t data = (aligned + 2 * smem_redzone_ + page - 1) / page * page;
    void *m = mmap(nullptr, data + 2 * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) {
        smem_map_ = static_cast<char *>(m);
        smem_map_bytes_ = data + 2 * page;
        mprotect(smem_map_, page, PROT_NONE);
        mprotect(smem_map_ + page + data, page, PROT_NONE);
        smem_ = smem_map_ + page + data - aligned - smem_redzone_;
    }
#endif
    dynamic_smem = smem_;
    sim_ctx().smem_lo = reinterpret_cast<uintptr_t>(dynamic_smem);
    sim_ctx().smem_hi = sim_ctx().smem_lo + (smem_ ? smem_size_ : 0);
    sim_ctx().nthreads = n_;
    for (unsigned i = 0; i < n_; ++i) {
        sim_thread &t = threads_[i];
        t.linear = i;
        t.tid = uint3{i % d.block.x, (i / d.block.x) % d.block.y, i / (d.block.x * d.block.y)};
        if (!t.mapping && !fiber_alloc_stack(t, settings().stack_bytes)) {
            ls.fail(
                format("kernel '%s': cannot map the stacks of %u simulated threads", d.kernel, n_));
            return;
        }
    }
    warps_.assign((n_ + 31) / 32, warp_state{});
    warp_gen_.resize(warps_.size());
    sim_ctx().warp_gen = warp_gen_.data();
    for (unsigned w = 0; w < warps_.size(); ++w) {
        unsigned lanes = std::min(32u, n_ - w * 32);
        warps_[w].present = lanes == 32 ? full_mask : (1u << lanes) - 1u;
    }
    order_.resize(n_);
}

void block_runner::fill_order(uint64_t block) {
    for (unsigned i = 0; i < n_; ++i)
        order_[i] = ls_->order == CUDASIM_ORDER_REVERSE ? n_ - 1 - i : i;
    if (ls_->order == CUDASIM_ORDER_SHUFFLE) {
        // Reproducible per (seed, launch, block), whichever OS thread runs the block.
        rng_.seed(ls_->seed ^ (block * 0x9e3779b97f4a7c15ull) ^ (ls_->id << 40));
        std::shuffle(order_.begin(), order_.end(), rng_);
    }
}

void block_runner::run_block(uint64_t b) {
    const launch_desc &d = *ls_->desc;
    blockIdx =
        uint3{static_cast<unsigned>(b % d.grid.x), static_cast<unsigned>(b / d.grid.x % d.grid.y),
              static_cast<unsigned>(b / (static_cast<uint64_t>(d.grid.x) * d.grid.y))};
    live_ = n_;
    first_exited_ = nullptr;
    bar_arrived_ = 0;
    for (unsigned &a : nb_arrived_)
        a = 0;
    failed_ = false;
    for (warp_state &w : warps_)
        w.exited = w.arrived = 0;
    // Blocks on this OS thread reuse shared memory and stacks: the previous block's threads
    // happen before this fill, which happens before this block's threads. Two objects, so that
    // a thread that exits early does not order itself before threads of its own block.
    tsan_acquire(&block_end_sync_);
    if (smem_)
        std::memset(dynamic_smem, 0xff, smem_size_); // NaN in fp32/fp16/bf16: uninitialised reads
    sim_ctx().block = b;
    sim_ctx().block_epoch = ++sim_ctx().epoch;
    if (checks_enabled())
        checks_block_start();
    cp_async_reset_block(n_);
    sm90_block_start(n_);
    tsan_release(&block_start_sync_);
    fill_order(b);
    progress();
    q_head_ = q_size_ = 0;
    for (unsigned i : order_) {
        sim_thread &t = threads_[i];
        fiber_prepare(t, fiber_main, t.abandoned);
#if CUDASIM_TSAN
        // ThreadSanitizer's reports then name the CUDA thread ("Thread T3 'block (1,0,0) ...'").
        char name[80];
        std::snprintf(name, sizeof name, "block (%u,%u,%u) thread (%u,%u,%u)", blockIdx.x,
                      blockIdx.y, blockIdx.z, t.tid.x, t.tid.y, t.tid.z);
        __tsan_set_fiber_name(t.tsan, name);
#endif
        t.started = t.abandoned = false;
        t.file = "";
        t.line = 0;
        push(t);
    }
    switch_to(main_, pop(), false);
    // Back on the OS thread's own stack: every thread exited, or the block cannot go on.
    if (stalled_) {
        ls_->fail(stall_expired_ ? stall_report() : std::string(), cudaErrorLaunchTimeout);
        stalled_ = nullptr;
    }
    if (faulted_) {
        ls_->fail(fault_report_text(), cudaErrorIllegalAddress);
        faulted_ = nullptr;
    }
    if (!failed_ && live_ > 0) {
        ls_->fail(deadlock_report() + sm90_deadlock_note());
        failed_ = true;
    }
    if (!failed_) {
        // (Arrivals left at a named barrier are not a fault: a ping-pong's last bar.arrive has
        // no partner, on a GPU as here. A missing one shows as a deadlock.)
        std::string left = sm90_block_end();
        if (!left.empty()) {
            ls_->fail(left);
            failed_ = true;
        }
    }
    if (!failed_ && checks_enabled()) {
        std::string late = checks_epoch_end();
        if (!late.empty()) {
            ls_->fail(late);
            failed_ = true;
        }
    }
    if (failed_) {
        // What the block's threads did before they stopped (each released one of these when it
        // last stopped) happens before the next block on this OS thread.
        tsan_acquire(&block_end_sync_);
        tsan_acquire(&abandon_sync_);
        tsan_acquire(&pause_sync_);
        tsan_acquire(&bar_sync_[0]);
        tsan_acquire(&bar_sync_[1]);
        for (warp_state &w : warps_)
            for (lane_slot &l : w.lane)
                tsan_acquire(&l.tsan_sync);
        tsan_release(&block_end_sync_);
        sigset_t watchdog_set;
        sigemptyset(&watchdog_set);
        sigaddset(&watchdog_set, watchdog_signal);
        sigaddset(&watchdog_set, SIGSEGV);
        pthread_sigmask(SIG_UNBLOCK, &watchdog_set, nullptr); // blocked if its handler abandoned
        for (unsigned i = 0; i < n_; ++i)
            threads_[i].abandoned = threads_[i].started && threads_[i].wait != wait_kind::exited;
        return;
    }
    tsan_acquire(&block_end_sync_);
}

void block_runner::fiber_main() {
    block_runner &r = *tl_runner;
    r.cur_->started = true;
    tsan_acquire(&r.ls_->tsan_start);
    tsan_acquire(&r.block_start_sync_);
    r.ls_->desc->invoke(*r.ls_->desc);
    r.thread_exit();
}

void block_runner::thread_exit() {
    sim_thread &t = *cur_;
    t.wait = wait_kind::exited;
    --live_;
    progress();
    if (!first_exited_)
        first_exited_ = &t;
    warp_state &w = warps_[t.linear / 32];
    unsigned bit = 1u << (t.linear % 32);
    w.exited |= bit;
    if (bar_arrived_ > 0)
        CUDASIM_FAIL(where(t) +
                     format(": exited while %u other thread%s of its block wait%s at "
                            "__syncthreads() at %s:%d (thread %s is one); every thread of a "
                            "block must reach every __syncthreads()",
                            bar_arrived_, bar_arrived_ == 1 ? "" : "s",
                            bar_arrived_ == 1 ? "s" : "", bar_first_->file, bar_first_->line,
                            fmt3(bar_first_->tid).c_str()));
    for (unsigned waiting = w.arrived; waiting; waiting &= waiting - 1) {
        unsigned l = static_cast<unsigned>(__builtin_ctz(waiting));
        const lane_slot &s = w.lane[l];
        if (s.mask & bit) {
            const sim_thread &waiter = lane_thread(w, l);
            CUDASIM_FAIL(where_at(waiter, waiter.file, waiter.line) +
                         format(": %s mask 0x%08x names lane %u (thread %s), which exited without "
                                "taking part",
                                s.name, s.mask, t.linear % 32, fmt3(t.tid).c_str()));
        }
    }
    tsan_release(&block_end_sync_);
    sim_thread *next = pop();
    switch_to(t, next, true);
    __builtin_unreachable();
}

void block_runner::fail(const std::string &what, cudaError_t code) {
    {
        no_interrupt quiet;
        record_failure(what, code);
    }
    abandon();
}

void block_runner::abandon() {
    // The report (and whatever the thread wrote) happens before the OS thread reads it.
    tsan_release(&abandon_sync_);
    switch_to(*cur_, nullptr, true);
    __builtin_unreachable();
}

int block_runner::barrier(const char *file, int line, bar_reduce op, int predicate) {
    sim_thread &t = *cur_;
    if (first_exited_)
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": __syncthreads() reached after thread %s of the block exited; every "
                            "thread of a block must reach every __syncthreads()",
                            fmt3(first_exited_->tid).c_str()));
    if (bar_arrived_ == 0) {
        bar_first_ = &t;
        bar_count_ = 0;
    } else if (!same_site(file, line, bar_first_->file, bar_first_->line)) {
        CUDASIM_FAIL(
            where_at(t, file, line) +
            format(": barrier divergence: this __syncthreads() is not the one thread %s waits at "
                   "(%s:%d); all threads of a block must reach the same __syncthreads()",
                   fmt3(bar_first_->tid).c_str(), bar_first_->file, bar_first_->line));
    }
    unsigned phase = bar_phase_;
    t.wait = wait_kind::barrier;
    t.file = file;
    t.line = line;
    t.bar_phase = phase;
    bar_count_ += predicate != 0;
    tsan_release(&bar_sync_[phase & 1]);
    if (++bar_arrived_ == live_) {
        progress();
        bar_result_[phase & 1] = bar_count_;
        bar_participants_[phase & 1] = live_;
        bar_arrived_ = 0;
        ++bar_phase_;
        if (checks_enabled()) {
            std::string late = checks_epoch_end();
            if (!late.empty())
                fail(late);
            checks_barrier(file, line);
        }
        ++sim_ctx().epoch; // what threads did before this barrier is ordered before what follows
        if (ls_->order == CUDASIM_ORDER_SHUFFLE)
            std::shuffle(order_.begin(), order_.end(), rng_);
        for (unsigned i : order_)
            if (threads_[i].wait == wait_kind::barrier)
                push(threads_[i]);
    }
    yield();
    tsan_acquire(&bar_sync_[phase & 1]);
    int count = bar_result_[phase & 1];
    switch (op) {
    case bar_reduce::count:
        return count;
    case bar_reduce::all:
        return count == static_cast<int>(bar_participants_[phase & 1]);
    case bar_reduce::any:
        return count > 0;
    }
    return count;
}

unsigned long long block_runner::collective_op(collective kind, unsigned mask,
                                               unsigned long long value, int param, int width,
                                               const char *file, int line, const char *name) {
    sim_thread &t = *cur_;
    unsigned lane = t.linear % 32, wi = t.linear / 32, bit = 1u << lane;
    warp_state &w = warps_[wi];
    if (!(mask & bit))
        CUDASIM_FAIL(
            where_at(t, file, line) +
            format(": %s mask 0x%08x does not include the calling lane %u", name, mask, lane));
    if (unsigned absent = mask & ~w.present)
        CUDASIM_FAIL(
            where_at(t, file, line) +
            format(": %s mask 0x%08x names lane%s %s of warp %u, which do%s not exist: the "
                   "block has %u threads, so its last warp is partial",
                   name, mask, (absent & (absent - 1)) ? "s" : "", lane_list(absent).c_str(), wi,
                   (absent & (absent - 1)) ? "" : "es", n_));
    if (unsigned gone = mask & w.exited) {
        unsigned l = static_cast<unsigned>(__builtin_ctz(gone));
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": %s mask 0x%08x names lane %u (thread %s), which "
                            "has exited",
                            name, mask, l, fmt3(lane_thread(w, l).tid).c_str()));
    }
    if (is_shuffle(kind) && (width < 1 || width > 32 || (width & (width - 1))))
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": %s width %d is not a power of two from 1 to 32", name, width));
    lane_slot &s = w.lane[lane];
    s.kind = kind;
    s.name = name;
    s.mask = mask;
    s.param = param;
    s.width = width;
    s.value = value;
    t.file = file;
    t.line = line;
    w.arrived |= bit;
    tsan_release(&s.tsan_sync);
    if (unsigned others = w.arrived & mask & ~bit) {
        unsigned l = static_cast<unsigned>(__builtin_ctz(others));
        const lane_slot &o = w.lane[l];
        const sim_thread &ot = lane_thread(w, l);
        if (o.kind != kind || o.mask != mask || (o.name != name && std::strcmp(o.name, name) != 0))
            CUDASIM_FAIL(
                where_at(t, file, line) +
                format(": %s with mask 0x%08x meets %s with mask 0x%08x of thread %s at %s:%d; "
                       "the lanes of a warp collective must call the same intrinsic with the "
                       "same mask",
                       name, mask, o.name, o.mask, fmt3(ot.tid).c_str(), ot.file, ot.line));
        if (o.param != param && kind == collective::reduce)
            CUDASIM_FAIL(
                where_at(t, file, line) +
                format(": %s meets %s of thread %s at %s:%d; the lanes of a warp collective "
                       "must call the same intrinsic with the same mask",
                       name, o.name, fmt3(ot.tid).c_str(), ot.file, ot.line));
        if (o.param != param && kind == collective::allgather)
            CUDASIM_FAIL(
                where_at(t, file, line) +
                format(": %s of %d bytes meets %s of %d bytes of thread %s at %s:%d; every lane "
                       "must contribute the same size",
                       name, param, o.name, o.param, fmt3(ot.tid).c_str(), ot.file, ot.line));
    }
    if ((w.arrived & mask) == mask) {
        complete_collective(w, mask);
    } else {
        t.wait = wait_kind::warp;
        yield();
    }
    tsan_acquire(&w.tsan_done[s.done_phase & 1]);
    return s.result;
}

// Called by the last lane to arrive: computes every lane's result and queues the lanes.
void block_runner::complete_collective(warp_state &w, unsigned mask) {
    unsigned ballot = 0;
    // Every lane's arrival first: a lane may still have read the buffer of the last allgather
    // (in place, warp_allgather_view) just before it arrived, whatever its slot.
    for (unsigned m = mask; m; m &= m - 1)
        tsan_acquire(&w.lane[__builtin_ctz(m)].tsan_sync);
    for (unsigned m = mask; m; m &= m - 1) {
        unsigned l = static_cast<unsigned>(__builtin_ctz(m));
        lane_slot &s = w.lane[l];
        if (s.kind == collective::allgather) {
            size_t bytes = static_cast<size_t>(s.param);
            std::memcpy(w.gathered + l * bytes, reinterpret_cast<const void *>(s.value), bytes);
        } else if (s.value) {
            ballot |= 1u << l;
        }
    }
    progress();
    unsigned long long reduced = reduce_lanes(w, mask);
    unsigned phase = w.completions++;
    ++warp_gen_[static_cast<size_t>(&w - warps_.data())]; // the lanes of the mask are synchronised
    tsan_release(&w.tsan_done[phase & 1]);
    for (unsigned m = mask; m; m &= m - 1) {
        unsigned l = static_cast<unsigned>(__builtin_ctz(m));
        lane_slot &s = w.lane[l];
        unsigned seg = static_cast<unsigned>(s.width) - 1u; // lane bits within the segment
        unsigned p = static_cast<unsigned>(s.param);
        unsigned src = l;
        switch (s.kind) {
        case collective::shfl:
            src = (l & ~seg) | (p & seg);
            break;
        case collective::shfl_up:
            if ((l & seg) >= p)
                src = l - p;
            break;
        case collective::shfl_down:
            if ((l & seg) + p <= seg)
                src = l + p;
            break;
        case collective::shfl_xor:
            // Lanes may read earlier segments but not later ones (then they keep their value).
            if ((l ^ p) <= (l | seg))
                src = l ^ p;
            break;
        default:
            break;
        }
        switch (s.kind) {
        case collective::ballot:
            s.result = ballot;
            break;
        case collective::any:
            s.result = ballot != 0;
            break;
        case collective::all:
            s.result = ballot == mask;
            break;
        case collective::reduce:
            s.result = reduced;
            break;
        case collective::syncwarp:
        case collective::allgather:
            s.result = 0;
            break;
        default:
            // A source lane outside the mask has no defined value: keep the caller's own.
            s.result = (src < 32 && (mask >> src & 1u)) ? w.lane[src].value : s.value;
            break;
        }
        s.done_phase = phase;
    }
    w.arrived &= ~mask;
    release_lanes(w, mask);
    yield();
}

// The result of a __reduce_*_sync over the lanes of `mask` (0 for other collectives).
unsigned long long block_runner::reduce_lanes(const warp_state &w, unsigned mask) const {
    unsigned first = static_cast<unsigned>(__builtin_ctz(mask));
    if (w.lane[first].kind != collective::reduce)
        return 0;
    auto op = static_cast<reduce_op>(w.lane[first].param);
    unsigned r = static_cast<unsigned>(w.lane[first].value);
    for (unsigned m = mask & (mask - 1); m; m &= m - 1) {
        unsigned v = static_cast<unsigned>(w.lane[__builtin_ctz(m)].value);
        int sr = static_cast<int>(r), sv = static_cast<int>(v);
        switch (op) {
        case reduce_op::add:
            r += v;
            break;
        case reduce_op::min:
            r = std::min(r, v);
            break;
        case reduce_op::max:
            r = std::max(r, v);
            break;
        case reduce_op::min_signed:
            r = static_cast<unsigned>(std::min(sr, sv));
            break;
        case reduce_op::max_signed:
            r = static_cast<unsigned>(std::max(sr, sv));
            break;
        case reduce_op::and_:
            r &= v;
            break;
        case reduce_op::or_:
            r |= v;
            break;
        case reduce_op::xor_:
            r ^= v;
            break;
        }
    }
    return r;
}

const void *block_runner::allgather_view(const void *mine, size_t bytes, const char *what,
                                         const char *file, int line) {
    if (bytes == 0 || bytes > warp_allgather_max_bytes)
        CUDASIM_FAIL(where_at(*cur_, file, line) +
                     format(": %s contributes %zu bytes per lane; the limit is %zu", what, bytes,
                            warp_allgather_max_bytes));
    const warp_state &w = warps_[cur_->linear / 32];
    collective_op(collective::allgather, full_mask, reinterpret_cast<uintptr_t>(mine),
                  static_cast<int>(bytes), warpSize, file, line, what);
    return w.gathered;
}

void block_runner::release_lanes(warp_state &w, unsigned mask) {
    bool descending = ls_->order == CUDASIM_ORDER_REVERSE ||
                      (ls_->order == CUDASIM_ORDER_SHUFFLE && (rng_() & 1u));
    for (unsigned i = 0; i < 32; ++i) {
        unsigned l = descending ? 31 - i : i;
        if (mask >> l & 1u)
            push(lane_thread(w, l));
    }
}

const char *const named_names[16] = {
    "named barrier 0",  "named barrier 1",  "named barrier 2",  "named barrier 3",
    "named barrier 4",  "named barrier 5",  "named barrier 6",  "named barrier 7",
    "named barrier 8",  "named barrier 9",  "named barrier 10", "named barrier 11",
    "named barrier 12", "named barrier 13", "named barrier 14", "named barrier 15"};

// bar.sync / bar.arrive id, count: `count` threads (a multiple of 32) must arrive, in whole warps,
// before the waiting ones go on. Barrier 0 is __syncthreads()'s.
void block_runner::named_barrier(unsigned id, unsigned count, bool wait, const char *file,
                                 int line) {
    sim_thread &t = *cur_;
    const char *op = wait ? "bar.sync" : "bar.arrive";
    if (id == 0 || id >= named_barriers)
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": %s %u: named barriers are 1..15 (0 is __syncthreads()'s)", op, id));
    if (count == 0 || count % 32 != 0 || count > n_)
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": %s %u, %u: a named barrier's thread count must be a positive "
                            "multiple of 32 (whole warps) and at most the block's %u threads",
                            op, id, count, n_));
    if (nb_arrived_[id] == 0) {
        nb_count_[id] = count;
        nb_first_[id] = &t;
        nb_file_[id] = file;
        nb_line_[id] = line;
    } else if (nb_count_[id] != count) {
        CUDASIM_FAIL(where_at(t, file, line) +
                     format(": %s %u with a thread count of %u, but thread %s arrived at it "
                            "with %u (at %s:%d): every thread of one named barrier must pass "
                            "the same count",
                            op, id, count, fmt3(nb_first_[id]->tid).c_str(), nb_count_[id],
                            nb_file_[id], nb_line_[id]));
    }
    tsan_release(&nb_sync_[id]);
    if (wait) {
        t.wait = wait_kind::named;
        t.named_id = id;
        t.file = file;
        t.line = line;
    }
    if (++nb_arrived_[id] == count) {
        nb_arrived_[id] = 0;
        progress();
        ++sim_ctx().epoch; // the participants' accesses before it are ordered before theirs after
        for (unsigned i : order_)
            if (threads_[i].wait == wait_kind::named && threads_[i].named_id == id)
                push(threads_[i]);
    }
    if (wait) {
        yield();
        tsan_acquire(&nb_sync_[id]);
    }
}

std::vector<block_runner::thread_group> block_runner::group_threads() const {
    std::vector<thread_group> groups;
    for (unsigned i = 0; i < n_; ++i) {
        const sim_thread &t = threads_[i];
        if (t.wait == wait_kind::exited)
            continue;
        const char *what = t.wait == wait_kind::barrier    ? "__syncthreads()"
                           : t.wait == wait_kind::warp     ? warps_[i / 32].lane[i % 32].name
                           : t.wait == wait_kind::named    ? named_names[t.named_id]
                           : t.wait == wait_kind::mbarrier ? "mbarrier_wait()"
                                                           : nullptr;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const thread_group &x) {
            return (x.what == what || (x.what && what && std::strcmp(x.what, what) == 0)) &&
                   same_site(x.file, x.line, t.file, t.line);
        });
        if (g == groups.end()) {
            groups.push_back(thread_group{what, t.file, t.line, {}});
            g = groups.end() - 1;
        }
        g->ids.push_back(i);
    }
    return groups;
}

// One line per group: "\ncudasim:   63 threads wait at __syncthreads() at k.cu:36: (0,0,0)-..."
// (`what` null: threads that run or may run, with the last place they waited or paused).
std::string block_runner::describe(const std::vector<thread_group> &groups) const {
    std::string r;
    for (const thread_group &g : groups) {
        bool one = g.ids.size() == 1;
        if (g.what)
            r += format("\ncudasim:   %zu thread%s wait%s at %s at %s:%d:", g.ids.size(),
                        one ? "" : "s", one ? "s" : "", g.what, g.file, g.line);
        else if (*g.file)
            r += format("\ncudasim:   %zu thread%s run%s (last seen at %s:%d):", g.ids.size(),
                        one ? "" : "s", one ? "s" : "", g.file, g.line);
        else
            r += format("\ncudasim:   %zu thread%s run%s:", g.ids.size(), one ? "" : "s",
                        one ? "s" : "");
        size_t ranges = 0;
        for (size_t k = 0; k < g.ids.size(); ++k) {
            size_t e = k;
            while (e + 1 < g.ids.size() && g.ids[e + 1] == g.ids[e] + 1)
                ++e;
            if (++ranges > 8) {
                r += " ...";
                break;
            }
            r += " " + fmt3(threads_[g.ids[k]].tid);
            if (e > k)
                r += "-" + fmt3(threads_[g.ids[e]].tid);
            k = e;
        }
    }
    return r;
}

std::string block_runner::deadlock_report() const {
    std::vector<thread_group> groups = group_threads();
    // The smallest group is the likeliest culprit: name its first thread.
    const thread_group &culprit = *std::min_element(
        groups.begin(), groups.end(),
        [](const thread_group &a, const thread_group &b) { return a.ids.size() < b.ids.size(); });
    return where_at(threads_[culprit.ids[0]], culprit.file, culprit.line) +
           ": deadlock: no thread of the block can proceed" + describe(groups);
}

void block_runner::assert_failed(const char *expr, const char *file, unsigned line,
                                 const char *function) {
    CUDASIM_FAIL(where_at(*cur_, file, static_cast<int>(line)) +
                     format(": device-side assertion failed: %s (in %s)", expr, function),
                 cudaErrorAssert);
}

void block_runner::interrupted(const void *pc) {
    if (!cur_)
        return; // between blocks: the worker sees a failed launch by itself
    bool expired = watch_.expired.exchange(false);
    if (!expired && !ls_->failed)
        return;
    // In a signal handler: no allocation here (the report is written on the OS thread's stack,
    // in run_block). Without `expired`, another block's failure ended the launch.
    stalled_ = cur_;
    stall_pc_ = expired ? pc : nullptr;
    stall_expired_ = expired;
    failed_ = true;
    abandon();
}

std::string block_runner::stall_report() const {
    const sim_thread &t = *stalled_;
    const void *pc = stall_pc_;
    std::string fn = function_at(pc, ls_->desc->fn);
    if (fn.compare(0, 9, "cudasim::") == 0)
        fn.clear(); // inside the simulator (a __nanosleep): the kernel's line is the last seen
    std::string last = *t.file ? format(", last seen at %s:%d", t.file, t.line) : "";
    return where(t) +
           format(": no progress for %g s: no barrier or warp collective completed and no thread "
                  "exited in the block; this thread was running%s%s. A spin-wait for a value "
                  "that no running thread will write? (Blocks run in no guaranteed order, and not "
                  "all at once.) Watchdog: CUDASIM_WATCHDOG=seconds, 0 turns it off",
                  settings().watchdog_s.load(), fn.empty() ? "" : (" in " + fn).c_str(),
                  last.c_str()) +
           describe(group_threads());
}

#if CUDASIM_ASAN
// "kernel 'k' block (x,y,z) thread (x,y,z)" of the running simulated thread; false if none.
bool block_runner::current_thread(char *buf, size_t len) const {
    if (!cur_ || !ls_)
        return false;
    std::snprintf(buf, len, "kernel '%s' block (%u,%u,%u) thread (%u,%u,%u)", ls_->desc->kernel,
                  blockIdx.x, blockIdx.y, blockIdx.z, cur_->tid.x, cur_->tid.y, cur_->tid.z);
    return true;
}
#endif

namespace {
// Guard regions a program registered (cudasim_add_guard_region): read in the fault handler, so a
// fixed table of plain values, changed between launches only.
struct guard_region {
    const char *lo, *hi, *end; // the inaccessible range; the end of the data it guards
    char name[64];
};
constexpr int max_guard_regions = 16; // the grader: 5 buffers + 8 extra ones (grader_rpc.h)
guard_region guard_regions[max_guard_regions];
int num_guard_regions = 0;

const guard_region *guard_region_at(const void *addr) {
    const char *a = static_cast<const char *>(addr);
    for (int i = 0; i < num_guard_regions; ++i)
        if (a >= guard_regions[i].lo && a < guard_regions[i].hi)
            return &guard_regions[i];
    return nullptr;
}
} // namespace

void block_runner::smem_fault(const void *addr, const void *pc, bool write) {
    const char *a = static_cast<const char *>(addr);
    bool smem = smem_map_ && a >= smem_map_ && a < smem_map_ + smem_map_bytes_;
    if (!cur_ || (!smem && !guard_region_at(addr)))
        return;
    // In a signal handler: no allocation here; run_block writes the report.
    faulted_ = cur_;
    fault_addr_ = addr;
    fault_pc_ = pc;
    fault_write_ = write;
    failed_ = true;
    abandon();
}

std::string block_runner::fault_report_text() const {
    const char *a = static_cast<const char *>(fault_addr_), *lo = static_cast<const char *>(smem_);
    std::string fn = function_at(fault_pc_, ls_->desc->fn);
    if (const guard_region *g = guard_region_at(fault_addr_)) {
        // The line where the checked build can name it (its kernels are symbolized).
        std::string line = access_stream_available() ? symbolize_pc(fault_pc_) : "?";
        return where(*faulted_) + (line != "?" ? " at " + line : std::string()) +
               format(": out-of-bounds %s past the end of %s (byte +%zu after its last "
                      "element)%s",
                      fault_write_ ? "write" : "read", g->name, static_cast<size_t>(a - g->end),
                      line == "?" && !fn.empty() ? (" in " + fn).c_str() : "");
    }
    std::string where_rel =
        a >= lo + smem_size_
            ? format("%zu bytes past the end of", static_cast<size_t>(a - (lo + smem_size_)))
            : format("%zu bytes before the start of", static_cast<size_t>(lo - a));
    return where(*faulted_) +
           format(": out-of-bounds %s of dynamic shared memory%s: the address is %s the "
                  "launch's %zu bytes (the third <<<>>> argument sizes every extern __shared__ "
                  "array)",
                  fault_write_ ? "write" : "read", fn.empty() ? "" : (" in " + fn).c_str(),
                  where_rel.c_str(), smem_size_);
}

bool block_runner::fault_report(const void *addr, char *buf, size_t len) const {
    if (!ls_)
        return false;
    for (unsigned i = 0; i < n_; ++i) {
        const sim_thread &t = threads_[i];
        if (fiber_guard_hit(t, addr)) {
            std::snprintf(buf, len,
                          "cudasim: error: kernel '%s' block (%u,%u,%u) thread (%u,%u,%u): fiber "
                          "stack overflow (the stack of a simulated thread is %zu KiB; set "
                          "CUDASIM_STACK_KB to raise it, or use less recursion and smaller local "
                          "arrays)\n",
                          ls_->desc->kernel, blockIdx.x, blockIdx.y, blockIdx.z, t.tid.x, t.tid.y,
                          t.tid.z, t.stack_size / 1024);
            return true;
        }
    }
    return false;
}

// SIGSEGV in a guard page is a fiber's stack overflow: report it and end the process (the fiber
// cannot continue, and its block holds no consistent state). Other faults go to the previous
// handler (the default, or a sanitizer's).
void on_fault(int sig, siginfo_t *info, void *uctx) {
    char buf[1024];
    block_runner *r = tl_runner;
    if (r && r->fault_report(info->si_addr, buf, sizeof buf)) {
        ssize_t ignored = write(STDERR_FILENO, buf, std::strlen(buf));
        (void)ignored;
        _exit(1);
    }
    if (r) {
        const void *pc = nullptr;
        bool wrote = false;
#if defined(__x86_64__)
        const ucontext_t *uc = static_cast<const ucontext_t *>(uctx);
        pc = reinterpret_cast<const void *>(uc->uc_mcontext.gregs[REG_RIP]);
        wrote = uc->uc_mcontext.gregs[REG_ERR] & 2; // the page-fault error code's write bit
#endif
        r->smem_fault(info->si_addr, pc, wrote);
    }
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, info, uctx);
        return;
    }
    // Default or ignored: restore it and let the faulting instruction fault again.
    sigaction(SIGSEGV, &previous_segv, nullptr);
}

#if CUDASIM_ASAN
// Called by AddressSanitizer at the end of a report: names the simulated thread it happened in.
void on_asan_report(const char *) {
    char buf[256];
    if (tl_runner && tl_runner->current_thread(buf, sizeof buf))
        std::fprintf(stderr, "cudasim: the AddressSanitizer report above is from %s\n", buf);
}
#endif

// The watchdog's signal: handled on the worker that runs the stalled block, on the stack of the
// interrupted simulated thread, which the handler abandons (it never returns there).
void on_watchdog(int, siginfo_t *, void *uctx) {
    int saved_errno = errno;
    const void *pc = nullptr;
#if defined(__x86_64__)
    pc =
        reinterpret_cast<const void *>(static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
    pc = reinterpret_cast<const void *>(static_cast<ucontext_t *>(uctx)->uc_mcontext.pc);
#else
    (void)uctx;
#endif
    if (tl_no_interrupt > 0) { // in simulator code holding a lock: act when the section ends
        tl_interrupt_pc = pc;
        tl_interrupt_pending = 1;
    } else if (block_runner *r = tl_runner) {
        r->interrupted(pc);
    }
    errno = saved_errno;
}

// Checks every few milliseconds that each worker's block progresses. A worker whose block made
// no progress for the watchdog's time is signalled (its running thread then reports); once a
// launch has failed, the workers still stalled in its blocks are signalled at once.
void watchdog_main() {
    struct seen {
        launch_state *launch;
        uint64_t progress;
        std::chrono::steady_clock::time_point since;
    };
    std::vector<std::pair<watch_entry *, seen>> last;
    for (;;) {
        double limit = settings().watchdog_s;
        std::this_thread::sleep_for(std::chrono::milliseconds(
            limit > 0 && limit < 1 ? std::max(1, static_cast<int>(limit * 100)) : 100));
        auto now = std::chrono::steady_clock::now();
        std::lock_guard<std::mutex> lock(watch_mutex);
        for (watch_entry *e : watch_list()) {
            launch_state *ls = e->launch.load();
            uint64_t p = e->progress.load(std::memory_order_relaxed);
            auto it =
                std::find_if(last.begin(), last.end(),
                             [&](const std::pair<watch_entry *, seen> &x) { return x.first == e; });
            if (it == last.end()) {
                last.push_back({e, seen{ls, p, now}});
                continue;
            }
            seen &s = it->second;
            if (!ls || s.launch != ls || s.progress != p) {
                s = seen{ls, p, now};
                continue;
            }
            if (ls->failed) {
                pthread_kill(e->thread, watchdog_signal);
            } else if (limit > 0 && std::chrono::duration<double>(now - s.since).count() >= limit) {
                e->expired = true;
                pthread_kill(e->thread, watchdog_signal);
                s.since = now;
            }
        }
    }
}

block_runner *current_runner(const char *what, const char *file, int line) {
    block_runner *r = tl_runner;
    if (!r || !r->running()) {
        std::fprintf(stderr, "cudasim: error: %s called outside a kernel at %s:%d\n", what, file,
                     line);
        std::abort();
    }
    return r;
}

} // namespace

namespace {
// The calling OS thread's runner, made at its first use. Never destroyed while a fiber runs (see
// ~block_runner); one per OS thread.
block_runner *this_thread_runner() {
    static thread_local std::unique_ptr<block_runner> runner;
    if (!runner)
        runner.reset(new block_runner());
    return runner.get();
}
} // namespace

void prepare_runner() { this_thread_runner(); }

int add_guard_region(const void *lo, size_t bytes, const void *data_end, const char *name) {
    if (num_guard_regions == max_guard_regions)
        return -1;
    guard_region &g = guard_regions[num_guard_regions];
    g.lo = static_cast<const char *>(lo);
    g.hi = g.lo + bytes;
    g.end = static_cast<const char *>(data_end);
    std::snprintf(g.name, sizeof g.name, "%s", name ? name : "a buffer");
    ++num_guard_regions;
    return 0;
}

void clear_guard_regions() { num_guard_regions = 0; }

void run_blocks(launch_state &ls) {
    block_runner *runner = this_thread_runner();
    runner->begin_launch(ls);
    if (ls.failed)
        return;
    tl_runner = runner;
    runner->watch_.launch = &ls;
    uint64_t b;
    while (!ls.failed && (b = ls.next_block++) < ls.nblocks)
        runner->run_block(b);
    runner->watch_.launch = nullptr;
    runner->watch_.expired = false;
    tl_runner = nullptr;
}

void start_watchdog() {
    if (settings().watchdog_s <= 0)
        return;
    static std::once_flag once;
    std::call_once(once, [] { std::thread(watchdog_main).detach(); });
}

no_interrupt::no_interrupt() { tl_no_interrupt = tl_no_interrupt + 1; }

no_interrupt::~no_interrupt() {
    tl_no_interrupt = tl_no_interrupt - 1;
    if (tl_no_interrupt == 0 && tl_interrupt_pending) {
        tl_interrupt_pending = 0;
        if (tl_runner)
            tl_runner->interrupted(tl_interrupt_pc); // may abandon the thread: nothing is held now
    }
}

bool in_kernel() { return tl_runner && tl_runner->running(); }

std::string current_where(bool with_thread) {
    if (!tl_runner)
        return "host";
    return with_thread && in_kernel() ? tl_runner->where_current() : tl_runner->where_block();
}

std::string thread_coords(uint32_t linear) {
    return tl_runner ? tl_runner->coords(linear) : format("%u", linear);
}

void fail_in_kernel(const std::string &what) {
    if (in_kernel())
        tl_runner->fail(what);
    report_error(what);
    std::abort();
}

void record_kernel_failure(const std::string &what) {
    no_interrupt quiet;
    if (in_kernel())
        tl_runner->record_failure(what);
    else
        report_error(what);
}

void end_failed_thread() {
    if (in_kernel())
        tl_runner->abandon();
    std::abort();
}

void misaligned_vector_pointer(const void *p, size_t align, const char *type, const char *file,
                               int line) {
    record_kernel_failure(current_where() +
                          format(" at %s:%d: memcheck: misaligned vector pointer: %s of %p, which "
                                 "is not %zu-byte aligned: a GPU's vector load or store through "
                                 "it faults (misaligned address)",
                                 file, line, type, p, align));
    end_failed_thread();
}

void syncthreads(const char *file, int line) {
    current_runner("__syncthreads()", file, line)->barrier(file, line, bar_reduce::count, 0);
}

int syncthreads_reduce(bar_reduce op, int predicate, const char *file, int line) {
    return current_runner("__syncthreads_count/and/or()", file, line)
        ->barrier(file, line, op, predicate);
}

unsigned long long warp_collective(collective kind, unsigned mask, unsigned long long value,
                                   int param, int width, const char *file, int line) {
    const char *name = collective_name(kind);
    return current_runner(name, file, line)
        ->collective_op(kind, mask, value, param, width, file, line, name);
}

const void *warp_allgather_view(const void *mine, size_t bytes, const char *what, const char *file,
                                int line) {
    return current_runner(what, file, line)->allgather_view(mine, bytes, what, file, line);
}

void warp_allgather(const void *mine, void *all, size_t bytes, const char *what, const char *file,
                    int line) {
    std::memcpy(all, warp_allgather_view(mine, bytes, what, file, line), 32 * bytes);
}

unsigned warp_reduce(reduce_op op, unsigned mask, unsigned value, const char *file, int line) {
    static const char *const names[] = {
        "__reduce_add_sync()", "__reduce_min_sync()", "__reduce_max_sync()", "__reduce_min_sync()",
        "__reduce_max_sync()", "__reduce_and_sync()", "__reduce_or_sync()",  "__reduce_xor_sync()"};
    const char *name = names[static_cast<unsigned>(op)];
    return static_cast<unsigned>(current_runner(name, file, line)
                                     ->collective_op(collective::reduce, mask, value,
                                                     static_cast<int>(op), warpSize, file, line,
                                                     name));
}

void named_barrier(unsigned id, unsigned count, bool wait, const char *file, int line) {
    current_runner(wait ? "bar.sync" : "bar.arrive", file, line)
        ->named_barrier(id, count, wait, file, line);
}
void mbarrier_block(const void *bar, const char *file, int line) {
    current_runner("mbarrier_wait()", file, line)->block_on_mbarrier(bar, file, line);
}
void mbarrier_wake(const void *bar) {
    if (in_kernel())
        tl_runner->wake_mbarrier(bar);
}

void spin_yield() {
    if (in_kernel())
        tl_runner->pause(nullptr, 0);
}

void nanosleep_yield(const char *file, int line) {
    current_runner("__nanosleep()", file, line)->pause(file, line);
}

unsigned active_mask() { return current_runner("__activemask()", "?", 0)->active_mask(); }

} // namespace detail
} // namespace cudasim

// A failed `assert` calls this (glibc). In a kernel it ends the launch with a report naming the
// block, thread and line, and the launch returns cudaErrorAssert; elsewhere it does what glibc's
// does.
extern "C" void __assert_fail(const char *expr, const char *file, unsigned int line,
                              const char *function) noexcept {
    if (cudasim::detail::in_kernel())
        cudasim::detail::tl_runner->assert_failed(expr, file, line, function);
    std::fprintf(stderr, "%s: %s:%u: %s: Assertion `%s' failed.\n", program_invocation_short_name,
                 file, line, function, expr);
    std::abort();
}
