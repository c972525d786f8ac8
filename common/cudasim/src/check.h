// check.h — what the runtime and the scheduler share with the instrumented access stream
// (stream.cpp) and the checkers (checkers.cpp): the context of the simulated thread that runs on
// this OS thread, device allocations with redzones, and the calls that mark memory written.
#ifndef CUDASIM_CHECK_H
#define CUDASIM_CHECK_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace cudasim {
namespace detail {

// The simulated thread running on this OS thread, kept by the scheduler at every switch. The
// instrumentation hooks read it to classify an access and to name its block and thread.
struct sim_context {
    bool active = false;     // a simulated thread runs on this OS thread now
    bool delivering = false; // an access is being delivered (observers' own accesses are not)
    uint32_t thread = 0;     // its linear index in the block
    uint64_t block = 0;      // the linear index of the block
    uintptr_t stack_lo = 0, stack_hi = 0; // the fiber's stack
    uintptr_t smem_lo = 0, smem_hi = 0;   // the launch's dynamic shared memory
    // Synchronisation epochs: `epoch` grows at every block start and every completed
    // __syncthreads of this OS thread's blocks; `block_epoch` is its value at this block's start;
    // warp_gen[w] grows at every completed collective of warp w (__syncwarp, shuffles, ...).
    uint32_t epoch = 0, block_epoch = 0;
    const uint32_t *warp_gen = nullptr;
    uint32_t nthreads = 0;
};
extern thread_local sim_context tl_sim;
// tl_sim for the other translation units: GCC's UBSan (the sim-asan build) takes some direct
// accesses to an extern thread_local for null pointers.
sim_context &sim_ctx();

// "kernel 'k' block (x,y,z) thread (x,y,z)" of the running simulated thread; "(x,y,z)" of thread
// `linear` of the running block (scheduler.cpp).
std::string current_where(bool with_thread = true);
std::string thread_coords(uint32_t linear);

// Classifies and delivers one access of the running simulated thread (no-op outside kernels or
// without observers); the hooks, the PTX emulation and the atomics call it.
enum class access_op : uint8_t;
struct access_event;
void deliver_explicit(const void *p, uint32_t size, access_op op, const void *pc);
// Fills space, object, object_base and object_size of e from e.addr (the running thread's view).
void classify_address(access_event &e);
// initcheck's shadow of the device block starting at base: one byte per byte, 1 once written.
uint8_t *written_shadow(uintptr_t base);
// Grows at every cudaMalloc and cudaFree (a cached written_shadow is stale when it changed).
uint64_t device_blocks_generation();

// True in the sim-check build (kernels instrumented, checkers on unless CUDASIM_CHECK=0).
bool checks_enabled();
// Registers the checkers once (launch.cpp calls it before every launch).
void install_checkers();

// The scheduler ends a sync epoch (a __syncthreads completes, or the block's threads all
// exited): the report of a deferred finding (a read of shared memory no thread wrote), or "".
std::string checks_epoch_end();
void checks_block_start();
// A launch of nblocks blocks on `workers` OS threads begins (the shadow of global memory's
// racecheck starts empty), and
// ends: the report of a race on global memory (kernel: as reports name it; grid and block
// dimensions), or "" (also when the launch failed otherwise).
void checks_launch_begin(uint64_t nblocks, unsigned workers);
std::string checks_launch_end(const std::string &kernel, const unsigned grid[3],
                              const unsigned block[3], bool failed);
// A __syncthreads() at file:line completed in the block on this OS thread (the barrier record).
void checks_barrier(const char *file, int line);

// Device memory (cudaMalloc): in the sim-check build each block has a redzone on both sides and
// the checkers know it; otherwise plain malloc/free of exactly the size asked (ASan's redzones).
void *device_alloc(size_t bytes);
void device_release(void *p);
// cudaMemcpy/cudaMemset wrote [p, p + bytes) of device memory (initcheck).
void note_device_written(const void *p, size_t bytes);

// cp.async as the hardware does it (checkers.cpp): per simulated thread, pending copies by
// commit group; the destination holds poison until the matching wait.
// The declarations the kernels' side uses are in cudasim/ptx.h.
void cp_async_issue(void *dst, const void *src, bool pred);
void cp_async_commit_group();
void cp_async_wait_group(int pending_allowed);
// The block on this OS thread ended or was abandoned: forget its pending copies.
void cp_async_reset_block(uint32_t nthreads);

// Hopper's asynchronous machinery (sm90.cpp): the block on this OS thread starts (its mbarriers,
// TMA copies and wgmma groups are forgotten), and ends: what it left unbalanced, or "";
// sm90_deadlock_note: what the mbarriers say when the block is deadlocked ("" or lines).
void sm90_block_start(uint32_t nthreads);
std::string sm90_block_end();
std::string sm90_deadlock_note();
// The scheduler's side (scheduler.cpp): a named barrier; the current thread waits until
// mbarrier_wake(bar) (the caller then checks the phase again); threads waiting on bar may go on.
void named_barrier(unsigned id, unsigned count, bool wait, const char *file, int line);
void mbarrier_block(const void *bar, const char *file, int line);
void mbarrier_wake(const void *bar);

} // namespace detail
} // namespace cudasim

#endif // CUDASIM_CHECK_H
