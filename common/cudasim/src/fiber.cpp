// fiber.cpp — stacks, context switches and sanitizer annotations for the simulator's fibers, and
// the switch-cost measurement of cudasim.h.
#include "fiber.h"

#include <chrono>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cudasim.h>

#if CUDASIM_USE_FCONTEXT
#include <boost/context/detail/fcontext.hpp>
#endif
#if CUDASIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if CUDASIM_TSAN
#include <sanitizer/tsan_interface.h> // gcc 12's declares the fiber API
#endif

namespace cudasim {
namespace detail {

namespace {

size_t page_size() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
}

// The fiber being entered for the first time reads its entry point here.
thread_local fiber_base *tl_switch_target;

#if CUDASIM_USE_FCONTEXT
namespace ctx = boost::context::detail;

// A switch-in stores the suspended context in the fiber that jumped (passed as the data word).
inline void save_jumper(ctx::transfer_t t) { static_cast<fiber_base *>(t.data)->fctx = t.fctx; }
#endif

// Completes a switch on the side of the fiber that now runs.
inline void finish_switch(fiber_base &self) {
#if CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(self.fake_stack, nullptr, nullptr);
#else
    (void)self;
#endif
}

#if CUDASIM_USE_FCONTEXT
void trampoline(ctx::transfer_t t) {
    save_jumper(t);
    fiber_base &self = *tl_switch_target;
    finish_switch(self);
    self.entry();
}
#else
void trampoline() {
    fiber_base &self = *tl_switch_target;
    finish_switch(self);
    self.entry();
}
#endif

} // namespace

void fiber_init_main(fiber_base &main) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr = nullptr;
        size_t size = 0;
        pthread_attr_getstack(&attr, &addr, &size);
        main.stack_lo = static_cast<char *>(addr);
        main.stack_size = size;
        pthread_attr_destroy(&attr);
    }
#if CUDASIM_TSAN
    main.tsan = __tsan_get_current_fiber();
#endif
}

bool fiber_alloc_stack(fiber_base &f, size_t bytes) {
    size_t page = page_size();
    bytes = (bytes + page - 1) / page * page;
    void *m = mmap(nullptr, guard_bytes + bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
        return false;
    f.mapping = static_cast<char *>(m);
    mprotect(f.mapping, guard_bytes, PROT_NONE);
    f.stack_lo = f.mapping + guard_bytes;
    f.stack_size = bytes;
    return true;
}

void fiber_release(fiber_base &f) {
    if (f.mapping)
        munmap(f.mapping, guard_bytes + f.stack_size);
    f.mapping = f.stack_lo = nullptr;
    f.stack_size = 0;
#if CUDASIM_TSAN
    if (f.tsan)
        __tsan_destroy_fiber(f.tsan);
    f.tsan = nullptr;
#endif
}

void fiber_prepare(fiber_base &f, fiber_entry entry, bool abandoned) {
    f.entry = entry;
#if CUDASIM_ASAN
    // Frames that never returned left their redzones poisoned; a fresh run must not trip on them.
    if (abandoned)
        __asan_unpoison_memory_region(f.stack_lo, f.stack_size);
    f.fake_stack = nullptr;
#endif
#if CUDASIM_TSAN
    // A fiber left mid-run keeps its shadow call stack; start from a clean TSan context.
    if (abandoned && f.tsan) {
        __tsan_destroy_fiber(f.tsan);
        f.tsan = nullptr;
    }
    if (!f.tsan)
        f.tsan = __tsan_create_fiber(0);
#endif
    (void)abandoned;
#if CUDASIM_USE_FCONTEXT
    f.fctx = ctx::make_fcontext(f.stack_lo + f.stack_size, f.stack_size, trampoline);
#else
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack_lo;
    f.uc.uc_stack.ss_size = f.stack_size;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, trampoline, 0);
#endif
}

void fiber_switch(fiber_base &from, fiber_base &to, bool from_finished) {
#if CUDASIM_ASAN
    if (from_finished && from.mapping) {
        // The frames from here up never return, so they never unpoison their redzones; the next
        // run of this stack would trip over them. Clear that top part (a few KiB) now.
        char *sp = static_cast<char *>(__builtin_frame_address(0)) - 4096;
        char *lo = sp > from.stack_lo ? sp : from.stack_lo;
        __asan_unpoison_memory_region(lo,
                                      static_cast<size_t>(from.stack_lo + from.stack_size - lo));
    }
    __sanitizer_start_switch_fiber(from_finished ? nullptr : &from.fake_stack, to.stack_lo,
                                   to.stack_size);
#else
    (void)from_finished;
#endif
#if CUDASIM_TSAN
    // no_sync: switching must not order the simulated threads; barriers do that explicitly.
    __tsan_switch_to_fiber(to.tsan, __tsan_switch_to_fiber_no_sync);
#endif
    tl_switch_target = &to;
#if CUDASIM_USE_FCONTEXT
    save_jumper(ctx::jump_fcontext(to.fctx, &from));
#else
    swapcontext(&from.uc, &to.uc);
#endif
    finish_switch(from);
}

bool fiber_guard_hit(const fiber_base &f, const void *addr) {
    const char *a = static_cast<const char *>(addr);
    return f.mapping && a >= f.mapping && a < f.stack_lo;
}

} // namespace detail
} // namespace cudasim

// ---- switch-cost measurement -------------------------------------------------------------------
namespace {
using cudasim::detail::fiber_base;

struct ping_pong {
    fiber_base main, a, b;
    long rounds = 0;
};
thread_local ping_pong *tl_pp;

void ping() {
    ping_pong &p = *tl_pp;
    for (long i = 0; i < p.rounds; ++i)
        cudasim::detail::fiber_switch(p.a, p.b, false);
    cudasim::detail::fiber_switch(p.a, p.main, true);
}
void pong() {
    ping_pong &p = *tl_pp;
    for (;;)
        cudasim::detail::fiber_switch(p.b, p.a, false);
}
} // namespace

extern "C" double cudasim_measure_switch_ns(long iterations) {
    using namespace cudasim::detail;
    ping_pong p;
    p.rounds = iterations > 0 ? iterations : 1;
    fiber_init_main(p.main);
    if (!fiber_alloc_stack(p.a, 64 * 1024) || !fiber_alloc_stack(p.b, 64 * 1024))
        return -1.0;
    fiber_prepare(p.a, ping, false);
    fiber_prepare(p.b, pong, false);
    tl_pp = &p;
    auto t0 = std::chrono::steady_clock::now();
    fiber_switch(p.main, p.a, false);
    auto t1 = std::chrono::steady_clock::now();
    tl_pp = nullptr;
    // pong is left suspended for good; its stack poison is irrelevant once unmapped.
#if CUDASIM_ASAN
    __asan_unpoison_memory_region(p.b.stack_lo, p.b.stack_size);
#endif
    fiber_release(p.a);
    fiber_release(p.b);
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return ns / (2.0 * static_cast<double>(p.rounds));
}
