// fiber.h — user-space threads for the simulated CUDA threads: stacks with guard pages, context
// switches (Boost.Context's fcontext, or ucontext where Boost is missing), and the sanitizer
// annotations that every switch needs (ASan: stack bounds and fake stacks; TSan: fiber contexts).
#ifndef CUDASIM_FIBER_H
#define CUDASIM_FIBER_H

#include <cstddef>

#if !CUDASIM_USE_FCONTEXT
#include <ucontext.h>
#endif

namespace cudasim {
namespace detail {

using fiber_entry = void (*)();

// A context that can be switched to: either an OS thread's own (its "main" context) or a fiber
// with its own stack. Never copied or moved once used (a ucontext points into itself).
struct fiber_base {
#if CUDASIM_USE_FCONTEXT
    void *fctx = nullptr;
#else
    ucontext_t uc;
#endif
    fiber_entry entry = nullptr;
    char *mapping = nullptr;  // start of the mmap: the guard pages, then the stack
    char *stack_lo = nullptr; // lowest usable stack address
    size_t stack_size = 0;    // usable bytes
#if CUDASIM_ASAN
    void *fake_stack = nullptr;
#endif
#if CUDASIM_TSAN
    void *tsan = nullptr;
#endif
};

// Bytes of PROT_NONE below every fiber stack: an overflow faults there instead of silently
// running into a neighbouring stack (unless one frame is larger than this).
constexpr size_t guard_bytes = 64 * 1024;

// Describes the calling OS thread's own context (stack bounds, TSan context) so fibers can switch
// back to it.
void fiber_init_main(fiber_base &main);
// Maps a stack of `bytes` (rounded up to pages) with a guard below it. False if mmap fails.
bool fiber_alloc_stack(fiber_base &f, size_t bytes);
void fiber_release(fiber_base &f);
// Makes f start at `entry` on its next switch-in. `abandoned`: f was left mid-run (its stack may
// hold stale sanitizer state).
void fiber_prepare(fiber_base &f, fiber_entry entry, bool abandoned);
// Suspends `from` and resumes `to`. `from_finished`: from will never be resumed.
void fiber_switch(fiber_base &from, fiber_base &to, bool from_finished);
// True if addr lies in f's guard pages.
bool fiber_guard_hit(const fiber_base &f, const void *addr);

} // namespace detail
} // namespace cudasim

#endif // CUDASIM_FIBER_H
