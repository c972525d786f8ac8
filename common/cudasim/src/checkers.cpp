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
//              plain write, with no __syncthreads() between them (or, within a warp, no
//              __syncwarp() or other warp collective); an atomic races with a plain write only.
//              The same in cudaMalloc'd memory, where accesses of different blocks of a launch
//              are never ordered (reported when the launch ends; below, "global memory").
//   the barrier record (CUDASIM_BARRIER_RECORD=<folder>): which __syncthreads() sites each
//              launch label reached, and which of them racecheck showed to matter: two accesses
//              of different threads to one shared byte, one a write, ordered by that barrier
//              alone (deleting it would be a race racecheck reports). Tests use it to prove that
//              every barrier of a kernel is covered by a checked case (tests/README.md).
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

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace cudasim {
namespace detail {

namespace {

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
    case mem_object::static_shared_guard:
        report(e, "memcheck: " + access_text(e) +
                      format(" runs past the end of the __shared__ array '%s' (%zu bytes): "
                             "offset %lld of it",
                             e.object_name ? e.object_name : "?", size,
                             static_cast<long long>(a) - static_cast<long long>(base)));
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

// ---- the barrier record ----------------------------------------------------------------------

// A cp.async counts as written where it lands (at its issuing thread's wait), since that is what
// a barrier after the wait orders before the readers.
// Enabled by CUDASIM_BARRIER_RECORD=<folder>: at exit the process writes
// <folder>/barriers.<pid>.tsv, one line per (launch label, kernel, barrier site):
//   label <TAB> kernel <TAB> file <TAB> line <TAB> shown (1: shown to matter, 0: only reached)
// and one line with an empty file and line 0 per (label, kernel) launched.
struct site_key {
    std::string label, kernel, file;
    int line;
    bool operator<(const site_key &o) const {
        return std::tie(label, kernel, file, line) < std::tie(o.label, o.kernel, o.file, o.line);
    }
};

struct barrier_record {
    std::string folder;
    std::mutex m;
    std::map<site_key, bool> sites;  // -> shown
    std::string label, kernel;       // of the launch in flight (set between launches)
    std::atomic<uint64_t> launch{0}; // grows at every launch: the per-thread caches' key
};

barrier_record *record() {
    static barrier_record *r = [] {
        const char *v = std::getenv("CUDASIM_BARRIER_RECORD");
        if (v == nullptr || *v == '\0')
            return static_cast<barrier_record *>(nullptr);
        auto *rec = new barrier_record();
        rec->folder = v;
        std::atexit([] {
            barrier_record *r = record();
            std::string path = r->folder + format("/barriers.%ld.tsv", static_cast<long>(getpid()));
            std::lock_guard<std::mutex> lock(r->m);
            if (r->sites.empty())
                return;
            FILE *f = std::fopen(path.c_str(), "w");
            if (f == nullptr) {
                std::fprintf(stderr, "cudasim: CUDASIM_BARRIER_RECORD: cannot write %s\n",
                             path.c_str());
                return;
            }
            for (const auto &s : r->sites)
                std::fprintf(f, "%s\t%s\t%s\t%d\t%d\n", s.first.label.c_str(),
                             s.first.kernel.c_str(), s.first.file.c_str(), s.first.line,
                             s.second ? 1 : 0);
            std::fclose(f);
        });
        return rec;
    }();
    return r;
}

std::string &launch_label() {
    static std::string *l = new std::string();
    return *l;
}

// The last barrier that completed in the block on this OS thread (nullptr: none yet).
thread_local const char *tl_bar_file = nullptr;
thread_local int tl_bar_line = 0;

// Notes (shown or reached) the site file:line for the launch in flight. A few recent sites per
// OS thread are remembered, so that the lock is taken once per site, not once per barrier.
void note_site(const char *file, int line, bool shown) {
    barrier_record *r = record();
    struct seen {
        const char *file;
        int line;
        bool shown;
    };
    static thread_local std::vector<seen> cache;
    static thread_local uint64_t cache_launch = 0;
    uint64_t launch = r->launch.load(std::memory_order_relaxed);
    if (cache_launch != launch) {
        cache.clear();
        cache_launch = launch;
    }
    for (seen &c : cache)
        if (c.file == file && c.line == line && (c.shown || !shown))
            return;
    std::lock_guard<std::mutex> lock(r->m);
    bool &s = r->sites[site_key{r->label, r->kernel, file, line}];
    s = s || shown;
    if (cache.size() >= 16)
        cache.erase(cache.begin());
    cache.push_back(seen{file, line, s});
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

// What an access does, for racecheck: a plain read, a plain write, or an atomic.
enum : uint8_t { rk_read = 0, rk_write = 1, rk_atomic = 2 };
inline uint8_t rec_kind(access_op op) {
    return op == access_op::atomic ? rk_atomic : writes(op) ? rk_write : rk_read;
}
const char *rec_name(uint8_t kind) {
    return kind == rk_write ? "write" : kind == rk_atomic ? "atomic" : "read";
}

struct access_rec {
    uint32_t epoch = 0; // 0: none (epochs start at 1)
    uint32_t wgen = 0;
    int32_t pc = 0;
    uint16_t thread = 0;
    uint8_t mask = 0; // the bytes of the word it touched
    uint8_t kind = rk_read;
};

// The accesses of one word that racecheck keeps: the last plain write, and up to two reads or
// atomics since, of different threads.
struct word_recs {
    access_rec w, r1, r2;
};

// One cell per 4-byte word of shared memory (a byte mask in each record keeps accesses to
// different bytes of a word, e.g. two threads' __half stores, apart).
struct cell : word_recs {
    access_rec landed;      // the barrier record only: the last cp.async to land here, at its wait
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

// The earlier access of k that `now` (thread t, in these epochs) races with, or nullptr: a plain
// write races with every access of another thread it is not ordered with; a read or an atomic
// with a plain write only (two atomics, or an atomic and a read, are not a race).
const access_rec *conflict(const word_recs &k, const access_rec &now, uint32_t t, uint32_t epoch,
                           uint32_t wgen) {
    if (!ordered(k.w, t, epoch, wgen, now.mask))
        return &k.w;
    if (now.kind == rk_write) {
        if (!ordered(k.r1, t, epoch, wgen, now.mask))
            return &k.r1;
        if (!ordered(k.r2, t, epoch, wgen, now.mask))
            return &k.r2;
    }
    return nullptr;
}

// Keeps `now` in k: a plain write as the last write (another thread's write of other bytes of
// the word in this epoch is forgotten: a later race on those bytes may go unreported, never a
// false one); a read or an atomic in one of the two slots of this epoch, of different threads.
void remember(word_recs &k, const access_rec &now, uint32_t t, uint32_t epoch) {
    access_rec *slot = &k.w;
    if (now.kind != rk_write) {
        slot = k.r1.epoch != epoch || k.r1.thread == t   ? &k.r1
               : k.r2.epoch != epoch || k.r2.thread == t ? &k.r2
                                                         : nullptr;
        if (slot == nullptr)
            return;
    }
    uint8_t m = slot->epoch == epoch && slot->thread == t ? slot->mask : 0;
    *slot = now;
    slot->mask |= m;
}

// The two accesses of a race in the order reports name them, whichever ran first: the plain
// write first; of two accesses of one kind, the lower thread first.
struct race_side {
    uint8_t kind;
    uint32_t thread;
    const void *pc;
};
void canonical(race_side &x, race_side &y) {
    if ((y.kind == rk_write && x.kind != rk_write) || (x.kind == y.kind && y.thread < x.thread))
        std::swap(x, y);
}

// The barrier record: earlier access p and this one (thread t, a write or p a write) conflict
// and are ordered by the last barrier of the block alone (one epoch apart, not by the warp's
// collectives): that barrier is shown to matter.
inline void note_shown(const access_rec &p, uint32_t t, uint32_t epoch, uint32_t wgen,
                       uint8_t mask) {
    const sim_context &c = sim_ctx();
    if (p.epoch + 1 != epoch || p.epoch < c.block_epoch || p.thread == t || !(p.mask & mask) ||
        tl_bar_file == nullptr)
        return;
    if (p.thread / 32 == t / 32 && p.wgen != wgen)
        return;
    note_site(tl_bar_file, tl_bar_line, true);
}

std::string shared_name(const access_event &e) {
    return e.object == mem_object::dynamic_shared
               ? format("dynamic shared memory offset %zu", e.addr - e.object_base)
               : format("a __shared__ variable (byte %zu of the static shared memory)",
                        e.addr - e.object_base);
}

[[noreturn]] void race(const access_event &e, const access_rec &p) {
    const sim_context &c = sim_ctx();
    race_side x{rec_kind(e.op), c.thread, e.pc}, y{p.kind, p.thread, pc_of(p.pc)};
    canonical(x, y);
    bool same_warp = p.thread / 32 == c.thread / 32;
    std::string msg =
        format("racecheck: %s-%s hazard on %s: %s by thread %s at %s and %s by "
               "thread %s at %s with no %s between them",
               rec_name(x.kind), rec_name(y.kind), shared_name(e).c_str(), rec_name(x.kind),
               thread_coords(x.thread).c_str(), symbolize_pc(x.pc).c_str(), rec_name(y.kind),
               thread_coords(y.thread).c_str(), symbolize_pc(y.pc).c_str(),
               same_warp ? "__syncwarp() (they are in one warp)" : "__syncthreads()");
    fail_in_kernel(current_where(false) + ": " + msg);
}

// The record of access e by the running thread, now.
access_rec record_of(const access_event &e) {
    const sim_context &c = sim_ctx();
    access_rec now;
    now.epoch = c.epoch;
    now.wgen = c.warp_gen[c.thread / 32];
    now.pc = pc_code(e.pc);
    now.thread = static_cast<uint16_t>(c.thread);
    now.kind = rec_kind(e.op);
    return now;
}

void check_shared(const access_event &e) {
    const sim_context &c = sim_ctx();
    uint32_t t = c.thread, epoch = c.epoch, wgen = c.warp_gen[t / 32];
    access_rec now = record_of(e);
    // rd: the access reads (a read or an atomic); wr: it writes (a write or an atomic).
    bool rd = now.kind != rk_write, wr = now.kind != rk_read, uninit_noted = false;
    const bool recording = record() != nullptr;
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
        }
        if (const access_rec *p = conflict(*k, now, t, epoch, wgen))
            race(e, *p);
        if (recording) {
            note_shown(k->w, t, epoch, wgen, mask);
            if (rd)
                note_shown(k->landed, t, epoch, wgen, mask); /* a cp.async that landed */
            if (now.kind == rk_write) {
                note_shown(k->r1, t, epoch, wgen, mask);
                note_shown(k->r2, t, epoch, wgen, mask);
            }
        }
        remember(*k, now, t, epoch);
        if (wr) {
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

// ---- global memory: racecheck ---------------------------------------------------------------
//
// Two accesses of one launch to one byte of cudaMalloc'd memory race when they are of different
// threads, one is a plain write, and they are not ordered: accesses of different blocks are
// never ordered within a launch; those of one block are ordered by a __syncthreads() between
// them (in one warp also by a warp collective), as in shared memory. Two atomics, or an atomic
// and a plain read, are not a race. The shadow covers the bytes the launch touches, in pages of
// 4 KiB allocated at their first access and freed at the launch's end:
//   per byte, what decides a race between blocks whatever the order the blocks ran in: the
//   plain write of the lowest (block, thread), the access of the lowest (block, thread), and the
//   lowest access of any other block (the first access of a thread, when it made several). A
//   byte has a race between blocks exactly when it has a plain write and accesses of two blocks;
//   the report names the lowest such byte, with that write and the lowest access of another
//   block. These minima do not depend on the order the accesses arrive in.
//   per 4-byte word, the records of shared memory's racecheck (word_recs), for the block that
//   last touched it: a race within a block. When no two blocks race on a written byte, only one
//   block touches it, so its records are that block's alone. The lowest (block, byte) found is
//   reported, at the launch's end, after a race between blocks if there is one.
struct grec {
    uint32_t block1 = 0; // block + 1 (0: none)
    int32_t pc = 0;
    uint16_t thread = 0;
    uint8_t kind = rk_read;
};
inline bool key_less(const grec &a, const grec &b) {
    return a.block1 < b.block1 || (a.block1 == b.block1 && a.thread < b.thread);
}
struct gbyte {
    grec wmin; // the plain write of the lowest (block, thread)
    grec a1;   // the access of the lowest (block, thread)
    grec a2;   // the access of the lowest (block, thread) of a block other than a1's
};
struct gword {
    gbyte whole; // the word's bytes' summary while every access covered all four (they are equal)
    word_recs r;
    uint32_t owner = 0; // block + 1 of the records
    uint8_t split = 0;  // 1: an access covered part of the word: its bytes' summaries are in b
};
constexpr uintptr_t gpage_bytes = 4096;
struct gpage {
    gword w[gpage_bytes / 4];
    gbyte b[gpage_bytes];
};

struct intra_race {
    uint64_t block;
    uintptr_t addr;
    access_rec x, y; // the earlier access and the one that found it
};

struct global_shadow {
    bool on = false;
    size_t cap_pages = 0;
    bool truncated = false;
    std::atomic<uint64_t> generation{0}; // grows at every launch: the per-thread caches' key
    std::mutex map_m;
    std::unordered_map<uintptr_t, gpage *> pages;
    // The pages' locks: a spin lock each (held for a few dozen instructions, never across a
    // switch of simulated threads).
    struct spin {
        std::atomic<bool> held{false};
        void lock() {
            while (held.exchange(true, std::memory_order_acquire))
                while (held.load(std::memory_order_relaxed)) {
                }
        }
        void unlock() { held.store(false, std::memory_order_release); }
    };
    spin stripes[64];
    bool concurrent = false; // blocks run on several OS threads: the pages need their locks
    std::mutex found_m;
    bool have_intra = false;
    intra_race intra{};
};
global_shadow &gshadow() {
    static auto *g = new global_shadow();
    return *g;
}

// Per OS thread, the pages it looked up last, direct-mapped by page number (a kernel alternates
// between its operands' pages), valid for one launch.
struct page_cache {
    static constexpr unsigned n = 64;
    uint64_t gen = 0;
    uintptr_t base[n] = {};
    gpage *page[n] = {};
};
thread_local page_cache tl_pages;

// The shadow page of [base, base + 4 KiB), or nullptr past the cap (CUDASIM_RACECHECK_MB).
gpage *page_of(global_shadow &g, uintptr_t base) {
    page_cache &c = tl_pages;
    uint64_t gen = g.generation.load(std::memory_order_relaxed);
    if (c.gen != gen) {
        c = page_cache{};
        c.gen = gen;
    }
    unsigned slot = static_cast<unsigned>(base / gpage_bytes) % page_cache::n;
    if (c.base[slot] == base && base != 0)
        return c.page[slot];
    std::lock_guard<std::mutex> lock(g.map_m);
    gpage *p = nullptr;
    auto it = g.pages.find(base);
    if (it != g.pages.end())
        p = it->second;
    else if (g.pages.size() < g.cap_pages &&
             (p = static_cast<gpage *>(std::calloc(1, sizeof(gpage)))) != nullptr)
        g.pages.emplace(base, p);
    else
        g.truncated = true;
    c.base[slot] = base;
    c.page[slot] = p;
    return p;
}

void add_access(gbyte &b, const grec &x) {
    if (x.kind == rk_write && (b.wmin.block1 == 0 || key_less(x, b.wmin)))
        b.wmin = x;
    if (b.a1.block1 == 0 || x.block1 == b.a1.block1) {
        if (b.a1.block1 == 0 || key_less(x, b.a1))
            b.a1 = x;
    } else if (x.block1 < b.a1.block1) {
        b.a2 = b.a1;
        b.a1 = x;
    } else if (b.a2.block1 == 0 || key_less(x, b.a2)) {
        b.a2 = x;
    }
}

// The access of another block than the write's that races with it, or nullptr.
const grec *other_block(const gbyte &b) {
    if (b.wmin.block1 == 0)
        return nullptr;
    if (b.a1.block1 != b.wmin.block1)
        return &b.a1;
    return b.a2.block1 != 0 ? &b.a2 : nullptr;
}

// The lowest byte of the page's word i that races between blocks (its summary in *found), or -1.
int racing_byte(const gpage &p, uintptr_t i, gbyte *found) {
    const gword &k = p.w[i];
    if (!k.split) {
        if (other_block(k.whole) == nullptr)
            return -1;
        *found = k.whole;
        return 0;
    }
    for (int j = 0; j < 4; ++j)
        if (other_block(p.b[4 * i + j]) != nullptr) {
            *found = p.b[4 * i + j];
            return j;
        }
    return -1;
}

void note_intra(global_shadow &g, uint64_t block, uintptr_t addr, const access_rec &x,
                const access_rec &y) {
    std::lock_guard<std::mutex> lock(g.found_m);
    if (g.have_intra && std::tie(g.intra.block, g.intra.addr) <= std::tie(block, addr))
        return;
    g.have_intra = true;
    g.intra = intra_race{block, addr, x, y};
}

void check_global(const access_event &e) {
    global_shadow &g = gshadow();
    if (!g.on || e.object != mem_object::allocation) // cudaMalloc'd memory only
        return;
    const sim_context &c = sim_ctx();
    uint32_t t = c.thread, epoch = c.epoch, wgen = c.warp_gen[t / 32];
    uint32_t block1 = static_cast<uint32_t>(c.block + 1);
    access_rec now = record_of(e);
    grec gr;
    gr.block1 = block1;
    gr.pc = now.pc;
    gr.thread = now.thread;
    gr.kind = now.kind;
    no_interrupt quiet; // no lock may stay taken by a thread the watchdog abandons
    for (uintptr_t a = e.addr, end = e.addr + e.size; a < end;) {
        uintptr_t base = a & ~(gpage_bytes - 1), stop = std::min(end, base + gpage_bytes);
        gpage *p = page_of(g, base);
        if (p != nullptr) {
            global_shadow::spin *held = nullptr;
            if (g.concurrent) {
                held = &g.stripes[(base / gpage_bytes) % 64];
                held->lock();
            }
            for (uintptr_t w = a & ~uintptr_t(3); w < stop; w += 4) {
                uintptr_t lo = std::max(a, w), hi = std::min(stop, w + 4);
                now.mask = static_cast<uint8_t>(((1u << (hi - lo)) - 1u) << (lo - w));
                gword &k = p->w[(w - base) / 4];
                if (now.mask == 0xF && !k.split) {
                    add_access(k.whole, gr);
                } else {
                    gbyte *bytes = &p->b[w - base];
                    if (!k.split) { // from now on byte by byte, each starting as the word was
                        k.split = 1;
                        for (int j = 0; j < 4; ++j)
                            bytes[j] = k.whole;
                    }
                    for (uintptr_t b = lo; b < hi; ++b)
                        add_access(bytes[b - w], gr);
                }
                if (k.owner != block1) { // another block's records: not this block's business
                    k.r = word_recs{};
                    k.owner = block1;
                }
                if (const access_rec *q = conflict(k.r, now, t, epoch, wgen))
                    note_intra(g, c.block,
                               w + static_cast<uintptr_t>(__builtin_ctz(q->mask & now.mask)), *q,
                               now);
                remember(k.r, now, t, epoch);
            }
            if (held != nullptr)
                held->unlock();
        }
        a = stop;
    }
}

std::string coords_of(uint64_t linear, const unsigned dims[3]) {
    uint64_t x = linear % dims[0], y = linear / dims[0] % dims[1],
             z = linear / (static_cast<uint64_t>(dims[0]) * dims[1]);
    return format("(%llu,%llu,%llu)", static_cast<unsigned long long>(x),
                  static_cast<unsigned long long>(y), static_cast<unsigned long long>(z));
}

// "global memory (byte N of a S-byte cudaMalloc block)" for a byte of global memory.
std::string global_name(uintptr_t addr) {
    access_event e{};
    e.addr = addr;
    classify_address(e);
    if (e.object == mem_object::allocation)
        return format("global memory (byte %zu of a %zu-byte cudaMalloc block)",
                      static_cast<size_t>(addr - e.object_base), e.object_size);
    return format("global memory (%p)", reinterpret_cast<void *>(addr));
}

class checker : public access_observer {
  public:
    void launch_begin(const launch_info &li) override {
        if (barrier_record *r = record()) {
            std::lock_guard<std::mutex> lock(r->m);
            r->label = launch_label().empty() ? "-" : launch_label();
            r->kernel = li.kernel;
            r->launch.fetch_add(1, std::memory_order_relaxed);
            r->sites.emplace(site_key{r->label, r->kernel, "", 0}, false); // the launch itself
        }
    }
    void access(const access_event &e) override {
        memcheck(e);
        if (e.space == mem_space::global) {
            initcheck_global(e);
            check_global(e);
        } else if (e.space == mem_space::shared)
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
    const bool recording = record() != nullptr;
    const sim_context &c = sim_ctx();
    for (uintptr_t a = e.addr; a < e.addr + 16; a += 4)
        if (cell *k = shadow_cells(a, e.object, e.object_base, e.object_size)) {
            k->pending_pc = 0;
            if (recording && in_kernel()) { /* the copy lands now, in the waiting thread */
                k->landed.epoch = c.epoch;
                k->landed.wgen = c.warp_gen[c.thread / 32];
                k->landed.thread = static_cast<uint16_t>(c.thread);
                k->landed.mask = 0xF;
            }
        }
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

void checks_block_start() {
    tl_uninit.clear();
    tl_bar_file = nullptr;
}

void checks_launch_begin(uint64_t nblocks, unsigned workers) {
    global_shadow &g = gshadow();
    g.concurrent = workers > 1;
    g.generation.fetch_add(1, std::memory_order_relaxed);
    // CUDASIM_RACECHECK_MB: the shadow's cap in MiB (default 1024; 0: no racecheck of global
    // memory).
    static const size_t cap_mb = [] {
        const char *v = std::getenv("CUDASIM_RACECHECK_MB");
        char *stop = nullptr;
        unsigned long long mb = v && *v ? std::strtoull(v, &stop, 10) : 1024;
        return stop == nullptr || *stop == '\0' ? static_cast<size_t>(mb) : size_t(1024);
    }();
    g.on = checks_enabled() && nblocks < UINT32_MAX && cap_mb > 0;
    g.cap_pages = cap_mb * (size_t(1) << 20) / sizeof(gpage);
}

std::string checks_launch_end(const std::string &kernel, const unsigned grid[3],
                              const unsigned block[3], bool failed) {
    global_shadow &g = gshadow();
    if (!g.on)
        return "";
    g.on = false;
    std::string msg;
    if (!failed) {
        // A race between blocks: the lowest byte that has one.
        uintptr_t best = UINTPTR_MAX;
        gbyte found{};
        for (const auto &pg : g.pages)
            for (uintptr_t i = 0; i < gpage_bytes / 4 && pg.first + 4 * i < best; ++i) {
                int j = racing_byte(*pg.second, i, &found);
                if (j >= 0) {
                    best = pg.first + 4 * i + static_cast<uintptr_t>(j);
                    break;
                }
            }
        if (best != UINTPTR_MAX) {
            const grec &w = found.wmin, &o = *other_block(found);
            msg = format("kernel %s blocks %s and %s: racecheck: write-%s hazard on %s: write by "
                         "block %s thread %s at %s and %s by block %s thread %s at %s; the "
                         "blocks of a launch are not ordered (make the update atomic, or give "
                         "each block its own part of the output)",
                         kernel.c_str(), coords_of(w.block1 - 1, grid).c_str(),
                         coords_of(o.block1 - 1, grid).c_str(), rec_name(o.kind),
                         global_name(best).c_str(), coords_of(w.block1 - 1, grid).c_str(),
                         coords_of(w.thread, block).c_str(), symbolize_pc(pc_of(w.pc)).c_str(),
                         rec_name(o.kind), coords_of(o.block1 - 1, grid).c_str(),
                         coords_of(o.thread, block).c_str(), symbolize_pc(pc_of(o.pc)).c_str());
        } else if (g.have_intra) {
            const intra_race &r = g.intra;
            race_side x{r.x.kind, r.x.thread, pc_of(r.x.pc)},
                y{r.y.kind, r.y.thread, pc_of(r.y.pc)};
            canonical(x, y);
            bool same_warp = r.x.thread / 32 == r.y.thread / 32;
            msg = format("kernel %s block %s: racecheck: %s-%s hazard on %s: %s by thread %s at "
                         "%s and %s by thread %s at %s with no %s between them",
                         kernel.c_str(), coords_of(r.block, grid).c_str(), rec_name(x.kind),
                         rec_name(y.kind), global_name(r.addr).c_str(), rec_name(x.kind),
                         coords_of(x.thread, block).c_str(), symbolize_pc(x.pc).c_str(),
                         rec_name(y.kind), coords_of(y.thread, block).c_str(),
                         symbolize_pc(y.pc).c_str(),
                         same_warp ? "__syncwarp() (they are in one warp)" : "__syncthreads()");
        }
    }
    if (g.truncated && msg.empty()) {
        static std::once_flag once;
        std::call_once(once, [&] {
            std::fprintf(stderr,
                         "cudasim: note: racecheck of global memory in kernel %s saw only the "
                         "first %zu MiB of shadow (CUDASIM_RACECHECK_MB); bytes first touched "
                         "later were not checked\n",
                         kernel.c_str(), g.cap_pages * sizeof(gpage) >> 20);
        });
    }
    for (auto &pg : g.pages)
        std::free(pg.second);
    g.pages.clear();
    g.truncated = false;
    g.have_intra = false;
    return msg;
}

void checks_barrier(const char *file, int line) {
    tl_bar_file = file;
    tl_bar_line = line;
    if (record() != nullptr)
        note_site(file, line, false);
}

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

extern "C" void cudasim_set_launch_label(const char *label) {
    cudasim::detail::launch_label() = label != nullptr ? label : "";
}
