// checkers.cpp — the sim-check build's checkers, observers of the access stream (stream.cpp),
// and cp.async as the hardware does it.
//
//   memcheck   an access outside every live allocation (in a redzone, a freed block, host
//              memory), outside the launch's dynamic shared memory, misaligned for its size; an
//              ldmatrix row or cp.async address that is not 16-byte aligned or not where the
//              instruction needs it (shared; global for a cp.async source).
//   initcheck  a read of cudaMalloc'd memory that no cudaMemcpy, cudaMemset or kernel store
//              wrote since cudaMalloc; a read of shared memory that no thread of this block
//              wrote (or whose cp.async has not been waited for).
//   racecheck  two accesses to the same shared byte by different threads, at least one a
//              write, with no __syncthreads() between them (or, within a warp, no __syncwarp()
//              or other warp collective).
//
// Shared-memory shadow, one cell per 4-byte word and per OS thread (a block runs on one OS
// thread): the last write and up to two reads since, each with its thread, the bytes of the
// word it touched, its code address and the sync
// epochs at the time (sim_ctx().epoch: block barriers; sim_ctx().warp_gen[w]: warp collectives).
// Two accesses are ordered when their epochs differ, or when they are in one warp and its
// collective count differs; otherwise they race, whichever ran first. So a report does not depend
// on the order in which the simulator ran the threads, and names both accesses the same way in
// every order: the write first (for two writes, the lower thread first).
#include "access.h"
#include "check.h"
#include "internal.h"

#include <cstring>
#include <vector>

namespace cudasim {
namespace detail {

namespace {

bool reads(access_op op) {
    return op == access_op::load || op == access_op::atomic || op == access_op::ldmatrix_row ||
           op == access_op::cp_async_src;
}
bool writes(access_op op) {
    return op == access_op::store || op == access_op::atomic || op == access_op::cp_async_dst;
}

const char *op_name(access_op op) {
    switch (op) {
    case access_op::load:
        return "read";
    case access_op::store:
        return "write";
    case access_op::atomic:
        return "atomic";
    case access_op::ldmatrix_row:
        return "ldmatrix row read";
    case access_op::cp_async_src:
        return "cp.async source read";
    case access_op::cp_async_dst:
        return "cp.async destination write";
    }
    return "access";
}

[[noreturn]] void report(const access_event &e, const std::string &what) {
    fail_in_kernel(current_where() + " at " + symbolize_pc(e.pc) + ": " + what);
}

std::string access_text(const access_event &e) {
    return format("%s of %u byte%s at %p", op_name(e.op), e.size, e.size == 1 ? "" : "s",
                  reinterpret_cast<void *>(e.addr));
}

// ---- memcheck ---------------------------------------------------------------------------------

void memcheck(const access_event &e) {
    uintptr_t a = e.addr, base = e.object_base;
    size_t size = e.object_size;
    switch (e.object) {
    case mem_object::static_image:
        if (const host_argument *h = host_argument_at(a))
            report(e, "memcheck: " + access_text(e) +
                          format(" is in the host's static data (%s, passed as argument %d of "
                                 "the launch): a GPU kernel cannot reach host memory; copy it to "
                                 "cudaMalloc'd memory",
                                 h->name.empty() ? "an object of the program"
                                                 : ("'" + h->name + "'").c_str(),
                                 h->position));
        break;
    case mem_object::stack:
    case mem_object::builtin:
    case mem_object::static_shared:
        break;
    case mem_object::allocation:
    case mem_object::dynamic_shared:
        if (a + e.size > base + size) {
            bool global = e.object == mem_object::allocation;
            report(e, "memcheck: " + access_text(e) +
                          format(" runs %zu bytes past the end of %s (offset %zu)",
                                 static_cast<size_t>(a + e.size - base - size),
                                 global ? format("a %zu-byte cudaMalloc block", size).c_str()
                                        : format("the launch's %zu bytes of dynamic shared "
                                                 "memory",
                                                 size)
                                              .c_str(),
                                 static_cast<size_t>(a - base)));
        }
        break;
    case mem_object::redzone:
        if (a < base)
            report(e, "memcheck: " + access_text(e) +
                          format(" is %zu bytes before a %zu-byte cudaMalloc block, outside "
                                 "every live allocation",
                                 static_cast<size_t>(base - a), size));
        report(e, "memcheck: " + access_text(e) +
                      format(" is outside every live allocation: offset %zu of a %zu-byte "
                             "cudaMalloc block (%zu bytes past its end)",
                             static_cast<size_t>(a - base), size,
                             static_cast<size_t>(a - base - size)));
    case mem_object::shared_redzone:
        report(e, "memcheck: " + access_text(e) +
                      format(" is outside the launch's %zu bytes of dynamic shared memory "
                             "(offset %lld)",
                             size, static_cast<long long>(a) - static_cast<long long>(base)));
    case mem_object::freed:
        report(e, "memcheck: " + access_text(e) +
                      format(" is in a freed block: offset %zu of a %zu-byte block given to "
                             "cudaFree",
                             static_cast<size_t>(a - base), size));
    case mem_object::unknown:
        report(e, "memcheck: " + access_text(e) +
                      " is outside every live allocation, shared memory and the thread's stack");
    }
    bool ptx = e.op == access_op::ldmatrix_row || e.op == access_op::cp_async_src ||
               e.op == access_op::cp_async_dst;
    if (ptx) {
        const char *inst = e.op == access_op::ldmatrix_row ? "ldmatrix" : "cp.async";
        bool want_shared = e.op != access_op::cp_async_src;
        if (a % 16)
            report(e, format("memcheck: %s address %p is not 16-byte aligned", inst,
                             reinterpret_cast<void *>(a)));
        if ((e.space == mem_space::shared) != want_shared)
            report(e, format("memcheck: %s %s address %p is not in %s memory", inst,
                             want_shared ? "shared" : "global", reinterpret_cast<void *>(a),
                             want_shared ? "shared" : "global"));
    } else if (e.space != mem_space::local && (e.size & (e.size - 1)) == 0 && a % e.size) {
        report(e, "memcheck: misaligned " + access_text(e) +
                      format(": an access of %u bytes needs a %u-byte aligned address", e.size,
                             e.size));
    }
}

// ---- initcheck (global) ---------------------------------------------------------------------

void initcheck_global(const access_event &e) {
    if (e.object != mem_object::allocation)
        return;
    // The last block's shadow, per OS thread: the block map is not searched again.
    static thread_local uintptr_t last_base = 0;
    static thread_local uint64_t last_generation = 0;
    static thread_local uint8_t *last_shadow = nullptr;
    uint64_t generation = device_blocks_generation();
    if (e.object_base != last_base || generation != last_generation) {
        last_shadow = written_shadow(e.object_base);
        last_base = e.object_base;
        last_generation = generation;
    }
    uint8_t *w = last_shadow;
    if (!w)
        return;
    size_t off = e.addr - e.object_base;
    size_t n = std::min<size_t>(e.size, e.object_size - off);
    if (writes(e.op)) {
        for (size_t i = 0; i < n; ++i)
            __atomic_store_n(&w[off + i], uint8_t(1), __ATOMIC_RELAXED);
        return;
    }
    for (size_t i = 0; i < n; ++i)
        if (!__atomic_load_n(&w[off + i], __ATOMIC_RELAXED))
            report(e, "initcheck: " + access_text(e) +
                          format(" reads byte %zu of a %zu-byte cudaMalloc block that nothing "
                                 "wrote since cudaMalloc (no cudaMemcpy, cudaMemset or kernel "
                                 "store)",
                                 off + i, e.object_size));
}

// ---- shared memory: initcheck and racecheck --------------------------------------------------

// Code addresses are kept as 32-bit offsets from a function of this program (kernels and the
// simulator are linked into one executable), so that a cell stays small.
inline int32_t pc_code(const void *pc) {
    return static_cast<int32_t>(reinterpret_cast<intptr_t>(pc) -
                                reinterpret_cast<intptr_t>(&checks_block_start));
}
inline const void *pc_of(int32_t code) {
    return reinterpret_cast<const void *>(reinterpret_cast<intptr_t>(&checks_block_start) + code);
}

struct access_rec {
    uint32_t epoch = 0; // 0: none (epochs start at 1)
    uint32_t wgen = 0;
    int32_t pc = 0;
    uint16_t thread = 0;
    uint8_t mask = 0; // the bytes of the word it touched
};

// One cell per 4-byte word of shared memory (a byte mask in each record keeps accesses to
// different bytes of a word, e.g. two threads' __half stores, apart).
struct cell {
    access_rec w, r1, r2;
    int32_t pending_pc = 0; // a cp.async to this word not yet waited for (0: none)
    uint16_t pending_thread = 0;
    uint8_t written = 0;        // bytes written in the block of written_epoch (initcheck)
    uint32_t written_epoch = 0; // sim_ctx().block_epoch of that block
};

struct shared_shadow {
    std::vector<cell> dyn, stat;
};
thread_local shared_shadow tl_shadow;

// Reads of shared memory that no thread of the block had written, in the current epoch.
struct uninit_read {
    uint32_t thread;
    const void *pc;
    uint32_t size;
    uintptr_t addr;
    std::string object;
};
thread_local std::vector<uninit_read> tl_uninit;

// The cell of the word holding byte `a` of the object (base is 4-byte aligned), or nullptr.
cell *shadow_cells(uintptr_t a, mem_object obj, uintptr_t base, size_t size) {
    shared_shadow &s = tl_shadow;
    std::vector<cell> &v = obj == mem_object::dynamic_shared ? s.dyn : s.stat;
    size_t words = (size + 3) / 4;
    if (v.size() < words)
        v.resize(words);
    size_t off = a - base;
    return off < size ? &v[off / 4] : nullptr;
}

// Whether the earlier access p and an access by thread t now (bytes `mask` of the word) are
// ordered by a synchronisation, or touch different bytes.
inline bool ordered(const access_rec &p, uint32_t t, uint32_t epoch, uint32_t wgen, uint8_t mask) {
    if (p.epoch != epoch || p.thread == t || !(p.mask & mask))
        return true;
    return p.thread / 32 == t / 32 && p.wgen != wgen;
}

std::string shared_name(const access_event &e) {
    return e.object == mem_object::dynamic_shared
               ? format("dynamic shared memory offset %zu", e.addr - e.object_base)
               : format("a __shared__ variable (byte %zu of the static shared memory)",
                        e.addr - e.object_base);
}

[[noreturn]] void race(const access_event &e, const access_rec &p, bool p_writes) {
    const sim_context &c = sim_ctx();
    bool e_writes = writes(e.op);
    // Canonical order: the write first; two writes: the lower thread first.
    struct side {
        const char *what;
        uint32_t thread;
        const void *pc;
    } x{e_writes ? "write" : "read", c.thread, e.pc},
        y{p_writes ? "write" : "read", p.thread, pc_of(p.pc)};
    if ((!e_writes && p_writes) || (e_writes == p_writes && p.thread < c.thread))
        std::swap(x, y);
    bool same_warp = p.thread / 32 == c.thread / 32;
    std::string msg = format("racecheck: %s-%s hazard on %s: %s by thread %s at %s and %s by "
                             "thread %s at %s with no %s between them",
                             x.what, y.what, shared_name(e).c_str(), x.what,
                             thread_coords(x.thread).c_str(), symbolize_pc(x.pc).c_str(), y.what,
                             thread_coords(y.thread).c_str(), symbolize_pc(y.pc).c_str(),
                             same_warp ? "__syncwarp() (they are in one warp)" : "__syncthreads()");
    fail_in_kernel(current_where(false) + ": " + msg);
}

void check_shared(const access_event &e) {
    const sim_context &c = sim_ctx();
    uint32_t t = c.thread, epoch = c.epoch, wgen = c.warp_gen[t / 32];
    access_rec now;
    now.epoch = epoch;
    now.wgen = wgen;
    now.pc = pc_code(e.pc);
    now.thread = static_cast<uint16_t>(t);
    bool rd = reads(e.op), wr = writes(e.op), uninit_noted = false;
    uintptr_t end = std::min<uintptr_t>(e.addr + e.size, e.object_base + e.object_size);
    for (uintptr_t a = e.addr; a < end;) {
        cell *k = shadow_cells(a, e.object, e.object_base, e.object_size);
        if (!k)
            return;
        // The bytes of this word the access touches.
        uintptr_t word = e.object_base + (a - e.object_base) / 4 * 4;
        uintptr_t last = std::min<uintptr_t>(end, word + 4);
        uint8_t mask = static_cast<uint8_t>(((1u << (last - a)) - 1u) << (a - word));
        a = last;
        now.mask = mask;
        if (rd) {
            if (k->pending_pc)
                report(e, format("initcheck: %s reads %s, which the cp.async issued by thread %s "
                                 "at %s has not finished writing: wait for its group "
                                 "(cp_async_wait) and __syncthreads() before reading it",
                                 access_text(e).c_str(), shared_name(e).c_str(),
                                 thread_coords(k->pending_thread).c_str(),
                                 symbolize_pc(pc_of(k->pending_pc)).c_str()));
            bool written = k->written_epoch == c.block_epoch && (k->written & mask) == mask;
            if (!written && !uninit_noted) {
                // Reported when the epoch ends, unless another thread writes it before then:
                // that is a race, whichever order the two ran in.
                tl_uninit.push_back(uninit_read{t, e.pc, e.size, e.addr, shared_name(e)});
                uninit_noted = true;
            }
            if (!ordered(k->w, t, epoch, wgen, mask))
                race(e, k->w, true);
            // Keep up to two readers of this epoch, of different threads.
            if (k->r1.epoch != epoch || k->r1.thread == t) {
                uint8_t m = k->r1.epoch == epoch ? k->r1.mask : 0;
                k->r1 = now;
                k->r1.mask |= m;
            } else if (k->r2.epoch != epoch || k->r2.thread == t) {
                uint8_t m = k->r2.epoch == epoch ? k->r2.mask : 0;
                k->r2 = now;
                k->r2.mask |= m;
            }
        }
        if (wr) {
            if (!ordered(k->w, t, epoch, wgen, mask))
                race(e, k->w, true);
            if (!ordered(k->r1, t, epoch, wgen, mask))
                race(e, k->r1, false);
            if (!ordered(k->r2, t, epoch, wgen, mask))
                race(e, k->r2, false);
            // Another thread's write of other bytes of the word in this epoch is forgotten
            // (a later race on those bytes may go unreported; never a false one).
            uint8_t m = k->w.epoch == epoch && k->w.thread == t ? k->w.mask : 0;
            k->w = now;
            k->w.mask |= m;
            if (k->written_epoch != c.block_epoch) {
                k->written_epoch = c.block_epoch;
                k->written = 0;
            }
            k->written |= mask;
            if (e.op == access_op::cp_async_dst) {
                k->pending_pc = now.pc ? now.pc : 1;
                k->pending_thread = now.thread;
            }
        }
    }
}

class checker : public access_observer {
  public:
    void access(const access_event &e) override {
        memcheck(e);
        if (e.space == mem_space::global)
            initcheck_global(e);
        else if (e.space == mem_space::shared)
            check_shared(e);
    }
};

// ---- cp.async ---------------------------------------------------------------------------------

struct pending_copy {
    char *dst;
    unsigned char data[16];
    uint64_t group;
};
struct thread_copies {
    std::vector<pending_copy> pending;
    uint64_t open_group = 0; // the group that cp_async_commit will close
};
thread_local std::vector<thread_copies> tl_copies;

// The copy has landed: its bytes replace the poison, and the shadow forgets it is pending.
void complete(const pending_copy &p) {
    tsan_write_range(p.dst, 16);
    std::memcpy(p.dst, p.data, 16);
    if (!checks_enabled())
        return;
    access_event e{};
    e.addr = reinterpret_cast<uintptr_t>(p.dst);
    classify_address(e);
    if (e.space != mem_space::shared)
        return;
    for (uintptr_t a = e.addr; a < e.addr + 16; a += 4)
        if (cell *k = shadow_cells(a, e.object, e.object_base, e.object_size))
            k->pending_pc = 0;
}

} // namespace

std::string checks_epoch_end() {
    std::vector<uninit_read> &u = tl_uninit;
    if (u.empty())
        return "";
    // No other thread wrote these bytes in the epoch (that would have been a race): each read
    // saw memory no thread of the block wrote. Name the lowest thread's, in every order.
    const uninit_read *r = &u[0];
    for (const uninit_read &x : u)
        if (x.thread < r->thread)
            r = &x;
    std::string msg = format("%s thread %s at %s: initcheck: read of %u byte%s at %p reads %s, "
                             "which no thread of this block has written",
                             current_where(false).c_str(), thread_coords(r->thread).c_str(),
                             symbolize_pc(r->pc).c_str(), r->size, r->size == 1 ? "" : "s",
                             reinterpret_cast<void *>(r->addr), r->object.c_str());
    u.clear();
    return msg;
}

void checks_block_start() { tl_uninit.clear(); }

void ptx_row_read(void *dst, const void *row) {
    deliver_explicit(row, 16, access_op::ldmatrix_row, __builtin_return_address(0));
    tsan_read_range(row, 16);
    std::memcpy(dst, row, 16);
}

void install_checkers() {
    static bool done = false;
    if (done || !checks_enabled())
        return;
    done = true;
    static checker c;
    add_access_observer(&c);
}

void cp_async_issue(void *dst, const void *src, bool pred) {
    const void *pc = __builtin_return_address(0);
    if (pred)
        deliver_explicit(src, 16, access_op::cp_async_src, pc);
    deliver_explicit(dst, 16, access_op::cp_async_dst, pc);
    std::vector<thread_copies> &all = tl_copies;
    if (!in_kernel() || sim_ctx().thread >= all.size()) { // not in a kernel: at once
        if (pred)
            std::memcpy(dst, src, 16);
        else
            std::memset(dst, 0, 16);
        return;
    }
    thread_copies &mine = all[sim_ctx().thread];
    pending_copy p;
    p.dst = static_cast<char *>(dst);
    p.group = mine.open_group;
    if (pred) {
        tsan_read_range(src, 16);
        std::memcpy(p.data, src, 16);
    } else {
        std::memset(p.data, 0, 16);
    }
    // Until its wait the destination holds poison: NaN in fp32/fp16/bf16, -1 in integers.
    tsan_write_range(dst, 16);
    std::memset(dst, 0xff, 16);
    mine.pending.push_back(p);
}

void cp_async_commit_group() {
    std::vector<thread_copies> &all = tl_copies;
    if (in_kernel() && sim_ctx().thread < all.size())
        ++all[sim_ctx().thread].open_group;
}

void cp_async_wait_group(int pending_allowed) {
    std::vector<thread_copies> &all = tl_copies;
    if (!in_kernel() || sim_ctx().thread >= all.size())
        return;
    thread_copies &mine = all[sim_ctx().thread];
    // wait_group N: every committed group but the newest N has landed; wait_all (N < 0): all.
    std::vector<pending_copy> keep;
    for (const pending_copy &p : mine.pending) {
        bool done = pending_allowed < 0 ||
                    p.group + static_cast<uint64_t>(pending_allowed) < mine.open_group;
        if (done)
            complete(p);
        else
            keep.push_back(p);
    }
    mine.pending.swap(keep);
}

void cp_async_reset_block(uint32_t nthreads) {
    std::vector<thread_copies> &all = tl_copies;
    if (all.size() < nthreads)
        all.resize(nthreads);
    for (thread_copies &t : all) {
        t.pending.clear();
        t.open_group = 0;
    }
}

} // namespace detail
} // namespace cudasim
