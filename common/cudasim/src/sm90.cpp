// sm90.cpp — Hopper's asynchronous machinery as the simulator runs it (the kernels' side and the
// rules are described in include/cudasim/sm90.h): mbarriers, TMA copies, wgmma groups, and
// cuTensorMapEncodeTiled. The state belongs to the block on this OS thread (a block's threads are
// fibers of one OS thread and never interleave inside one call), and is forgotten at every block
// start.
#include "access.h"
#include "check.h"
#include "internal.h"

#include <cudasim/ptx.h>
#include <cudasim/sm90.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cudasim {
namespace sm90 {

using detail::format;

namespace {

constexpr uint32_t poison_bits = 0xffffffffu; // NaN as an fp32, fp16 pair or bf16 pair

struct mbar_state {
    unsigned index = 0; // in the order of mbarrier_init, for the event record
    unsigned count = 0, pending = 0;
    int64_t tx = 0;      // bytes announced by expect_tx less bytes delivered, this phase
    uint32_t phases = 0; // completed phases
    const char *init_file = "";
    int init_line = 0;
    const char *tx_file = nullptr; // the last expect_tx of this phase
    int tx_line = 0;
    uint32_t tx_thread = 0;
    std::vector<uint32_t> seen; // per thread: the completed phases it has observed
};
// A TMA or bulk copy in flight: its bytes land at a wait on its mbarrier.
struct copy_rec {
    uintptr_t bar;
    unsigned char *dst;
    std::vector<unsigned char> data;
};
// Shared memory a copy fills, and the phase of its mbarrier that its completion completes: a
// thread may read it once it observed that phase complete.
struct fill_rec {
    uintptr_t lo, hi, bar;
    uint32_t phase, thread;
    const char *file;
    int line;
};
struct wg_entry {
    float *d;
    unsigned n; // floats
    std::vector<float> value;
    uint64_t group;
    const char *file;
    int line;
};
struct wg_thread {
    std::vector<wg_entry> pending;
    uint64_t open_group = 0;
    bool fenced = false;
};
struct block_state {
    std::unordered_map<uintptr_t, mbar_state> bars;
    std::vector<copy_rec> copies;
    std::vector<fill_rec> fills;
    std::vector<wg_thread> wg;
    uint32_t nthreads = 0;
};
thread_local block_state tl;

std::atomic<unsigned long long> c_tma_copies{0}, c_tma_bytes{0}, c_bulk_bytes{0}, c_wgmma{0},
    c_wgmma_smem{0}, c_waits{0}, c_blocked{0}, c_named{0}, c_maxnreg{0};

std::mutex events_mutex;
std::string events_text;
std::atomic<bool> events_on{false};

uint32_t me() { return detail::sim_ctx().thread; }
bool in_block0() { return detail::sim_ctx().block == 0; }

void event(const std::string &what) {
    if (!events_on.load(std::memory_order_relaxed) || !in_block0())
        return;
    std::lock_guard<std::mutex> lock(events_mutex);
    events_text += format("warp %u: ", me() / 32) + what + "\n";
}

[[noreturn]] void fail_at(const char *file, int line, const std::string &what) {
    detail::fail_in_kernel(detail::current_where() + format(" at %s:%d: ", file, line) + what);
}

mbar_state &bar_of(void *bar, const char *what, const char *file, int line) {
    auto it = tl.bars.find(reinterpret_cast<uintptr_t>(bar));
    if (it == tl.bars.end())
        fail_at(file, line,
                format("%s on the mbarrier at %p, which no mbarrier_init of this block "
                       "initialised",
                       what, bar));
    return it->second;
}

void complete_phase(uintptr_t key, mbar_state &b) {
    ++b.phases;
    b.pending = b.count;
    b.tx = 0;
    b.tx_file = nullptr;
    ++detail::sim_ctx().epoch; // its waiters' accesses after it are ordered after the arrivals
    event(format("mbarrier #%u completes phase %u", b.index, b.phases - 1));
    detail::mbarrier_wake(reinterpret_cast<const void *>(key));
}

void maybe_complete(uintptr_t key, mbar_state &b) {
    if (b.pending == 0 && b.tx == 0)
        complete_phase(key, b);
}

// The copies on this mbarrier land: their bytes replace the poison, the tx-count drops by them.
// In the sim-check build the landing is a write of shared memory by the waiting thread at its
// wait (pc), so that initcheck sees the bytes written and racecheck orders them before the
// readers the phase's completion releases.
void land(uintptr_t key, mbar_state &b, const void *pc) {
    bool any = false;
    detail::tsan_acquire(&b); // the issuing threads' copies (their poison, their images)
    for (size_t i = 0; i < tl.copies.size();) {
        copy_rec &c = tl.copies[i];
        if (c.bar != key) {
            ++i;
            continue;
        }
        detail::tsan_write_range(c.dst, c.data.size());
        std::memcpy(c.dst, c.data.data(), c.data.size());
        if (detail::checks_enabled())
            for (size_t off = 0; off < c.data.size(); off += 16)
                detail::deliver_explicit(
                    c.dst + off, static_cast<uint32_t>(std::min<size_t>(16, c.data.size() - off)),
                    detail::access_op::store, pc);
        b.tx -= static_cast<int64_t>(c.data.size());
        detail::tsan_release(&b);
        tl.copies.erase(tl.copies.begin() + static_cast<ptrdiff_t>(i));
        any = true;
    }
    if (any)
        maybe_complete(key, b);
}

// Fails the thread if it reads [addr, addr + bytes) of shared memory (shared addresses) that a
// copy fills before it observed the phase that copy completes.
void check_filled(uint32_t addr, uint32_t bytes, const char *what, const char *file, int line) {
    uintptr_t lo = detail::sim_ctx().smem_lo + addr, hi = lo + bytes;
    for (const fill_rec &f : tl.fills) {
        if (f.hi <= lo || hi <= f.lo)
            continue;
        auto it = tl.bars.find(f.bar);
        if (it == tl.bars.end())
            continue;
        const mbar_state &b = it->second;
        if (b.seen[me()] > f.phase)
            continue;
        fail_at(file, line,
                format("%s reads shared memory at offset %u, which the copy issued by thread %s "
                       "at %s:%d fills, before this thread waited for phase %u (parity %u) of "
                       "its mbarrier #%u (initialised at %s:%d): the data may not have landed; "
                       "mbarrier_wait on it first",
                       what, addr, detail::thread_coords(f.thread).c_str(), f.file, f.line, f.phase,
                       f.phase & 1, b.index, b.init_file, b.init_line));
    }
}

// A copy of `image` into shared memory at dst, completing on bar: poison now, bytes later.
void issue_copy(void *dst, std::vector<unsigned char> &&image, void *bar, const char *what,
                const char *file, int line) {
    mbar_state &b = bar_of(bar, what, file, line);
    uintptr_t key = reinterpret_cast<uintptr_t>(bar);
    auto *p = static_cast<unsigned char *>(dst);
    uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + image.size();
    detail::tsan_write_range(p, image.size());
    std::memset(p, 0xff, image.size());
    tl.fills.erase(std::remove_if(tl.fills.begin(), tl.fills.end(),
                                  [&](const fill_rec &f) { return f.lo < hi && lo < f.hi; }),
                   tl.fills.end());
    tl.fills.push_back(fill_rec{lo, hi, key, b.phases, me(), file, line});
    event(format("%s %zu bytes -> mbarrier #%u phase %u", what, image.size(), b.index, b.phases));
    tl.copies.push_back(copy_rec{key, p, std::move(image)});
    detail::tsan_release(&b);   // the copy, as issued, happens before it lands in a waiter
    detail::mbarrier_wake(bar); // a thread blocked on it lands the copy
}

// Tensor maps: the fields kept in CUtensorMap's opaque words.
constexpr uint64_t map_magic = 0x3039736d69736463ull; // "cdsimsm90"
struct map_fields {
    uint64_t magic;
    uint64_t addr;
    uint32_t rank, elem, swizzle, oob;
    uint64_t dim[5];
    uint64_t stride[4]; // bytes, of dimensions 1.. (dimension 0's is the element size)
    uint32_t box[5];
};
static_assert(sizeof(map_fields) <= sizeof(CUtensorMap), "tensor map fields");

unsigned elem_bytes(CUtensorMapDataType t) {
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
        return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 8;
    default:
        return 4;
    }
}

// The mma emulation's conversions (src/ptx.cpp: the values of attn/half.h and attn/fp8.h, faster).
float to_f32(const unsigned char *p, wg_type t) {
    switch (t) {
    case wg_type::f16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return detail::mma_f16_to_f32(v);
    }
    case wg_type::bf16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return attn_bf16_to_f32(v);
    }
    case wg_type::e4m3:
        return detail::mma_fp8_to_f32(*p, ATTN_FP8_E4M3);
    case wg_type::e5m2:
        return detail::mma_fp8_to_f32(*p, ATTN_FP8_E5M2);
    }
    return 0;
}

} // namespace

uint32_t shared_address(const void *p, const char *what, const char *file, int line) {
    const detail::sim_context &c = detail::sim_ctx();
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a < c.smem_lo || a >= c.smem_hi)
        fail_at(file, line,
                format("%s: %p is not in the block's dynamic shared memory (the simulator keeps "
                       "TMA destinations and wgmma operands there: extern __shared__)",
                       what, p));
    return static_cast<uint32_t>(a - c.smem_lo);
}

void *shared_pointer(uint32_t addr) {
    return reinterpret_cast<void *>(detail::sim_ctx().smem_lo + addr);
}

void mbarrier_init(void *bar, unsigned count, const char *file, int line) {
    if (count == 0 || count >= (1u << 20))
        fail_at(file, line, format("mbarrier_init with count %u: the count is 1..2^20-1", count));
    mbar_state b;
    auto old = tl.bars.find(reinterpret_cast<uintptr_t>(bar));
    b.index = old != tl.bars.end() ? old->second.index : static_cast<unsigned>(tl.bars.size());
    b.count = b.pending = count;
    b.init_file = file;
    b.init_line = line;
    b.seen.assign(tl.nthreads, 0);
    tl.bars[reinterpret_cast<uintptr_t>(bar)] = std::move(b);
    event(format("mbarrier #%u init, count %u", tl.bars[reinterpret_cast<uintptr_t>(bar)].index,
                 count));
}

void mbarrier_expect_tx(void *bar, uint32_t tx, const char *file, int line) {
    mbar_state &b = bar_of(bar, "mbarrier_expect_tx()", file, line);
    b.tx += tx;
    b.tx_file = file;
    b.tx_line = line;
    b.tx_thread = me();
}

uint64_t mbarrier_arrive(void *bar, unsigned count, uint32_t tx, const char *file, int line) {
    mbar_state &b = bar_of(bar, "mbarrier_arrive()", file, line);
    if (tx)
        mbarrier_expect_tx(bar, tx, file, line);
    if (b.pending < count)
        fail_at(file, line,
                format("mbarrier_arrive on mbarrier #%u (initialised at %s:%d with count %u): "
                       "more arrivals than its count in phase %u",
                       b.index, b.init_file, b.init_line, b.count, b.phases));
    b.pending -= count;
    detail::tsan_release(
        &b); // what the thread did before arriving happens before the waiters go on
    if (me() % 32 == 0)
        event(format("arrive on mbarrier #%u phase %u%s", b.index, b.phases,
                     tx ? format(" (expect %u bytes)", tx).c_str() : ""));
    uint64_t token = b.phases;
    maybe_complete(reinterpret_cast<uintptr_t>(bar), b);
    return token;
}

bool mbarrier_try_wait(void *bar, unsigned parity, bool block, const char *file, int line) {
    const void *pc = __builtin_return_address(0);
    uintptr_t key = reinterpret_cast<uintptr_t>(bar);
    bool blocked = false;
    for (;;) {
        mbar_state &b = bar_of(bar, "mbarrier_wait()", file, line);
        // The phase of that parity may be done already (then the copies in flight stay in
        // flight: a wait with the wrong parity passes before they land, as it can on a GPU);
        // otherwise the copies on the barrier land now, which may complete it.
        if ((b.phases & 1u) == (parity & 1u))
            land(key, b, pc);
        if ((b.phases & 1u) != (parity & 1u)) {
            detail::tsan_acquire(&b);
            b.seen[me()] = b.phases;
            c_waits.fetch_add(1, std::memory_order_relaxed);
            if (blocked) {
                c_blocked.fetch_add(1, std::memory_order_relaxed);
                if (me() % 32 == 0)
                    event(format("waited for mbarrier #%u phase %u", b.index, b.phases - 1));
            }
            return true;
        }
        if (!block) {
            detail::spin_yield();
            return false;
        }
        blocked = true;
        detail::mbarrier_block(bar, file, line);
    }
}

void named_barrier(unsigned id, unsigned count, bool wait, const char *file, int line) {
    c_named.fetch_add(1, std::memory_order_relaxed);
    if (me() % 32 == 0)
        event(format("%s %u, %u threads", wait ? "bar.sync" : "bar.arrive", id, count));
    detail::named_barrier(id, count, wait, file, line);
}

void setmaxnreg(unsigned regs, bool inc, const char *file, int line) {
    if (regs < 24 || regs > 256 || regs % 8 != 0)
        fail_at(file, line,
                format("setmaxnreg.%s %u: the count is 24..256, a multiple of 8",
                       inc ? "inc" : "dec", regs));
    if (me() % 32 == 0) {
        c_maxnreg.fetch_add(1, std::memory_order_relaxed);
        event(format("setmaxnreg.%s %u", inc ? "inc" : "dec", regs));
    }
}

void fence_proxy_async(const char *, int) {}

void tma_load(void *dst, const CUtensorMap *map, void *bar, unsigned rank, const int32_t *coords,
              const char *file, int line) {
    map_fields m;
    std::memcpy(&m, map, sizeof m);
    if (m.magic != map_magic)
        fail_at(file, line, "tma_load: the tensor map was not made by cuTensorMapEncodeTiled");
    if (m.rank != rank)
        fail_at(file, line, format("tma_load_%ud with a %u-dimensional tensor map", rank, m.rank));
    uint32_t sa = shared_address(dst, "tma_load destination", file, line);
    if (sa % 128 != 0)
        fail_at(file, line,
                format("tma_load: the destination (shared offset %u) is not 128-byte aligned", sa));
    uint64_t count = 1;
    for (unsigned d = 0; d < rank; ++d)
        count *= m.box[d];
    size_t bytes = static_cast<size_t>(count * m.elem);
    size_t span_bytes = (bytes + 127) / 128 * 128;
    if (sa + span_bytes > detail::sim_ctx().smem_hi - detail::sim_ctx().smem_lo)
        fail_at(file, line,
                format("tma_load: the %zu-byte box at shared offset %u ends past the block's "
                       "dynamic shared memory",
                       bytes, sa));
    std::vector<unsigned char> image(span_bytes, 0);
    unsigned span = m.swizzle == CU_TENSOR_MAP_SWIZZLE_32B    ? 32
                    : m.swizzle == CU_TENSOR_MAP_SWIZZLE_64B  ? 64
                    : m.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                                                              : 16;
    uint32_t e[5] = {};
    const auto *base = reinterpret_cast<const unsigned char *>(m.addr);
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t r = i;
        bool inside = true;
        uint64_t off = 0;
        for (unsigned d = 0; d < rank; ++d) {
            e[d] = static_cast<uint32_t>(r % m.box[d]);
            r /= m.box[d];
            int64_t c = static_cast<int64_t>(coords[d]) + e[d];
            if (c < 0 || static_cast<uint64_t>(c) >= m.dim[d])
                inside = false;
            else
                off += static_cast<uint64_t>(c) * (d == 0 ? m.elem : m.stride[d - 1]);
        }
        uint32_t at = box_address(sa, rank, m.box, e, m.elem, span) - sa;
        if (inside) // out of the tensor: zeros
            std::memcpy(&image[at], base + off, m.elem);
    }
    c_tma_copies.fetch_add(1, std::memory_order_relaxed);
    c_tma_bytes.fetch_add(bytes, std::memory_order_relaxed);
    // The transaction is the box's bytes (the zeros of elements out of the tensor included).
    image.resize(bytes);
    issue_copy(dst, std::move(image), bar, format("tma_load_%ud", rank).c_str(), file, line);
}

void bulk_copy(void *dst, const void *src, uint32_t bytes, void *bar, const char *file, int line) {
    uint32_t sa = shared_address(dst, "bulk_copy destination", file, line);
    if (bytes == 0 || bytes % 16 != 0 || sa % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
        fail_at(file, line,
                format("bulk_copy of %u bytes from %p to shared offset %u: the size and both "
                       "addresses must be multiples of 16",
                       bytes, src, sa));
    if (!detail::in_device_allocation(src) ||
        !detail::in_device_allocation(static_cast<const char *>(src) + bytes - 1))
        fail_at(file, line,
                format("bulk_copy: the source %p..+%u is not inside one cudaMalloc'd block", src,
                       bytes));
    std::vector<unsigned char> image(bytes);
    detail::tsan_read_range(src, bytes);
    std::memcpy(image.data(), src, bytes);
    c_bulk_bytes.fetch_add(bytes, std::memory_order_relaxed);
    issue_copy(dst, std::move(image), bar, "bulk_copy", file, line);
}

void wgmma_fence(const char *, int) {
    if (me() < tl.wg.size())
        tl.wg[me()].fenced = true;
}

void wgmma_commit(const char *, int) {
    if (me() >= tl.wg.size())
        return;
    ++tl.wg[me()].open_group;
    if (me() % 128 == 0)
        event("wgmma commit_group");
}

// FP8 wgmma's accumulation, as Hopper's tensor cores do it: not fp32. DeepSeek-V3's technical
// report (arXiv:2412.19437, section 3.3.2) measured that FP8 GEMM on the H800 keeps "around 14
// bits" of the sum. The model here: the accumulator C and the 32 products of one k32 step
// (exact: e4m3 x e4m3 has 8 significant bits) are aligned to the largest exponent among them and
// each truncated toward zero to 13 bits below its leading bit (a quantum 2^-13 of that power of
// two), then summed, and the sum truncated to 14 significant bits (e8m13). An H200's results
// for example 10's version 4 broke bounds written for fp32 sums, and this model breaks them the
// same way on the simulator (common/cudasim/README.md, "wgmma"); the bounds now carry it.
static float fp8_accumulate(float c, const float *a, const float *b) {
    double term[33];
    int n = 0, emax = 0;
    bool any = false;
    term[n++] = c;
    for (unsigned k = 0; k < 32; ++k)
        term[n++] = static_cast<double>(a[k]) * b[k];
    for (int i = 0; i < n; ++i)
        if (term[i] != 0.0 && std::isfinite(term[i])) {
            emax = any ? std::max(emax, std::ilogb(term[i])) : std::ilogb(term[i]);
            any = true;
        }
    if (!any) { // all zero, or an inf/NaN among them: plain sums propagate it
        double s = 0.0;
        for (int i = 0; i < n; ++i)
            s += term[i];
        return static_cast<float>(s);
    }
    const double quantum = std::ldexp(1.0, emax - 13);
    double s = 0.0;
    for (int i = 0; i < n; ++i)
        s += std::trunc(term[i] / quantum) * quantum;
    if (s == 0.0)
        return 0.0f;
    const double q_sum = std::ldexp(1.0, std::ilogb(s) - 13);
    return static_cast<float>(std::trunc(s / q_sum) * q_sum);
}

void wgmma(float *d, unsigned n, wg_type type, const uint32_t *a_regs, uint64_t a_desc,
           uint64_t b_desc, bool scale_d, bool tnsp_a, bool tnsp_b, const char *file, int line) {
    wg_thread &w = tl.wg[me()];
    bool fp8 = type == wg_type::e4m3 || type == wg_type::e5m2;
    if (!w.fenced)
        fail_at(file, line,
                "wgmma without wgmma_fence() since this thread's last wgmma_wait_group (or its "
                "start): the ISA wants wgmma.fence before a wgmma whose registers the "
                "warpgroup may have accessed");
    if (n < 8 || n > 256 || n % 8 != 0)
        fail_at(file, line, format("wgmma m64n%u: N is a multiple of 8 in 8..256", n));
    if (fp8 && (tnsp_a || tnsp_b))
        fail_at(file, line, "wgmma on FP8 takes K-major operands only (no transpose)");
    const unsigned elem = fp8 ? 1 : 2, K = fp8 ? 32 : 16;
    const unsigned t = me() % 128, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    const uint32_t smem_size =
        static_cast<uint32_t>(detail::sim_ctx().smem_hi - detail::sim_ctx().smem_lo);
    auto read = [&](uint32_t addr, const char *what) {
        if (addr + elem > smem_size)
            fail_at(file, line,
                    format("wgmma's %s operand reaches shared offset %u, past the block's %u "
                           "bytes of dynamic shared memory",
                           what, addr, smem_size));
        return to_f32(static_cast<const unsigned char *>(shared_pointer(addr)), type);
    };
    // This lane's rows of A (16 warp + g, + 8) over K.
    float arow[2][32];
    if (a_regs) {
        uint32_t regs[32][4];
        warp_allgather(a_regs, regs, sizeof regs[0], "wgmma()", file, line);
        for (unsigned l = 4 * g; l < 4 * g + 4; ++l)
            for (unsigned v = 0; v < 2 * K / 4; ++v) { // 8 values of 16 bits or 16 of 8 bits
                unsigned row, k;
                a_frag_coord(32 * warp + l, v, elem, &row, &k);
                unsigned per = 4 / elem, shift = 8 * elem * (v % per);
                uint32_t bits = regs[l][v / per] >> shift;
                unsigned char raw[2] = {static_cast<unsigned char>(bits),
                                        static_cast<unsigned char>(bits >> 8)};
                arow[row % 16 >= 8][k] = to_f32(raw, type);
            }
    } else {
        matrix_desc ad = decode_desc(a_desc);
        for (unsigned h = 0; h < 2; ++h)
            for (unsigned k = 0; k < K; ++k) {
                uint32_t addr = operand_address(ad, !tnsp_a, elem, 16 * warp + g + 8 * h, k);
                check_filled(addr, elem, "wgmma (operand A)", file, line);
                arow[h][k] = read(addr, "A");
            }
    }
    matrix_desc bd = decode_desc(b_desc);
    std::vector<float> bcol(static_cast<size_t>(n / 4) * K); // this lane's columns 8 j + 2 q + h
    for (unsigned j = 0; j < n / 8; ++j)
        for (unsigned h = 0; h < 2; ++h)
            for (unsigned k = 0; k < K; ++k) {
                uint32_t addr = operand_address(bd, !tnsp_b, elem, 8 * j + 2 * q + h, k);
                check_filled(addr, elem, "wgmma (operand B)", file, line);
                bcol[(2 * j + h) * K + k] = read(addr, "B");
            }
    // C: the newest in-flight value of this accumulator, else the registers.
    const wg_entry *prev = nullptr;
    for (const wg_entry &e : w.pending)
        if (e.d == d)
            prev = &e;
    wg_entry out{d, n / 2, std::vector<float>(n / 2), w.open_group, file, line};
    for (unsigned i = 0; i < n / 2; ++i) {
        float acc = scale_d ? (prev ? prev->value[i] : d[i]) : 0.0f;
        unsigned h = (i / 2) % 2, col = 2 * (i / 4) + i % 2;
        if (fp8) {
            out.value[i] = fp8_accumulate(acc, arow[h], &bcol[col * K]);
            continue;
        }
        for (unsigned k = 0; k < K; ++k)
            acc += arow[h][k] * bcol[col * K + k];
        out.value[i] = acc;
    }
    w.pending.push_back(std::move(out));
    std::memset(d, 0xff, n / 2 * sizeof(float)); // poison until the wait
    if (t == 0) {
        c_wgmma.fetch_add(1, std::memory_order_relaxed);
        c_wgmma_smem.fetch_add((a_regs ? 0 : 64 * K * elem) + n * K * elem,
                               std::memory_order_relaxed);
        event(format("wgmma m64n%uk%u (A from %s) issued", n, K, a_regs ? "registers" : "smem"));
    }
}

void wgmma_wait(int pending, const char *file, int line) {
    wg_thread &w = tl.wg[me()];
    std::vector<wg_entry> keep, done;
    for (wg_entry &e : w.pending)
        (e.group + static_cast<uint64_t>(pending) < w.open_group ? done : keep)
            .push_back(std::move(e));
    for (size_t i = 0; i < done.size(); ++i) {
        const wg_entry &e = done[i];
        bool newer = false;
        for (size_t j = i + 1; j < done.size() && !newer; ++j)
            newer = done[j].d == e.d;
        for (const wg_entry &k : keep)
            newer = newer || k.d == e.d;
        if (newer)
            continue; // a later wgmma on these registers is the one that writes them
        for (unsigned x = 0; x < e.n; ++x) {
            uint32_t bits;
            std::memcpy(&bits, &e.d[x], 4);
            if (bits != poison_bits)
                fail_at(file, line,
                        format("wgmma_wait_group: the accumulator registers of the wgmma issued "
                               "at %s:%d (register %u) were written while it was in flight; "
                               "wait for its group before touching them",
                               e.file, e.line, x));
        }
        std::memcpy(e.d, e.value.data(), e.n * sizeof(float));
    }
    w.pending.swap(keep);
    w.fenced = false;
    if (me() % 128 == 0)
        event(format("wgmma wait_group %d", pending));
}

counts take_counts() {
    counts c;
    c.tma_copies = c_tma_copies.exchange(0);
    c.tma_bytes = c_tma_bytes.exchange(0);
    c.bulk_bytes = c_bulk_bytes.exchange(0);
    c.wgmma_ops = c_wgmma.exchange(0);
    c.wgmma_smem_bytes = c_wgmma_smem.exchange(0);
    c.mbarrier_waits = c_waits.exchange(0);
    c.mbarrier_blocked = c_blocked.exchange(0);
    c.named_barrier_waits = c_named.exchange(0);
    c.setmaxnreg = c_maxnreg.exchange(0);
    return c;
}

void record_events(bool on) {
    std::lock_guard<std::mutex> lock(events_mutex);
    events_text.clear();
    events_on = on;
}
const char *events() {
    std::lock_guard<std::mutex> lock(events_mutex);
    return events_text.c_str();
}

} // namespace sm90

namespace detail {

void sm90_block_start(uint32_t nthreads) {
    sm90::tl.bars.clear();
    sm90::tl.copies.clear();
    sm90::tl.fills.clear();
    sm90::tl.nthreads = nthreads;
    sm90::tl.wg.assign(nthreads, sm90::wg_thread{});
}

namespace {
std::string unbalanced(const sm90::mbar_state &b) {
    if (b.tx == 0 && b.pending == b.count)
        return "";
    std::string who = b.tx_file ? format(" (expect_tx by thread %s at %s:%d)",
                                         thread_coords(b.tx_thread).c_str(), b.tx_file, b.tx_line)
                                : "";
    if (b.tx > 0)
        return format("mbarrier #%u (initialised at %s:%d): phase %u expects %lld bytes more "
                      "than its copies delivered%s",
                      b.index, b.init_file, b.init_line, b.phases, static_cast<long long>(b.tx),
                      who.c_str());
    if (b.tx < 0)
        return format("mbarrier #%u (initialised at %s:%d): phase %u received %lld bytes more "
                      "than expect_tx announced%s",
                      b.index, b.init_file, b.init_line, b.phases, -static_cast<long long>(b.tx),
                      who.c_str());
    return "";
}
} // namespace

std::string sm90_block_end() {
    for (uint32_t t = 0; t < sm90::tl.wg.size(); ++t)
        if (!sm90::tl.wg[t].pending.empty()) {
            const sm90::wg_entry &e = sm90::tl.wg[t].pending.front();
            return current_where(false) +
                   format(" thread %s at %s:%d: the wgmma issued here was never waited for "
                          "(wgmma_wait_group) before the thread exited",
                          thread_coords(t).c_str(), e.file, e.line);
        }
    for (auto &kv : sm90::tl.bars) {
        std::string u = unbalanced(kv.second);
        if (!u.empty() && kv.second.tx != 0)
            return current_where(false) + ": " + u +
                   ": its transaction count never balanced, so the phase never completed";
    }
    if (!sm90::tl.copies.empty())
        return current_where(false) +
               ": a TMA or bulk copy was issued that no thread ever waited for";
    return "";
}

std::string sm90_deadlock_note() {
    std::string r;
    for (auto &kv : sm90::tl.bars) {
        std::string u = unbalanced(kv.second);
        if (!u.empty())
            r += "\ncudasim:   " + u;
        else if (kv.second.pending != kv.second.count)
            r += format("\ncudasim:   mbarrier #%u: %u of %u arrivals in phase %u", kv.second.index,
                        kv.second.count - kv.second.pending, kv.second.count, kv.second.phases);
    }
    return r;
}

} // namespace detail
} // namespace cudasim

// ---- the driver API's tensor map ----------------------------------------------------------------
extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type,
                                           cuuint32_t rank, void *addr, const cuuint64_t *dim,
                                           const cuuint64_t *strides, const cuuint32_t *box,
                                           const cuuint32_t *element_strides,
                                           CUtensorMapInterleave interleave,
                                           CUtensorMapSwizzle swizzle, CUtensorMapL2promotion,
                                           CUtensorMapFloatOOBfill oob) {
    using cudasim::detail::format;
    using cudasim::detail::report_error;
    auto bad = [](const std::string &why) {
        report_error("cuTensorMapEncodeTiled: " + why);
        return CUDA_ERROR_INVALID_VALUE;
    };
    if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0)
        return bad("the tensor map must be 64-byte aligned");
    if (static_cast<unsigned>(type) > CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)
        return bad("unknown data type");
    if (rank < 1 || rank > 5)
        return bad(format("rank %u: 1 to 5", rank));
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ||
        static_cast<unsigned>(swizzle) > CU_TENSOR_MAP_SWIZZLE_128B) {
        report_error("cuTensorMapEncodeTiled: interleaved layouts and the 128B_ATOM swizzles are "
                     "not simulated");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (!addr || reinterpret_cast<uintptr_t>(addr) % 16 != 0)
        return bad("the global address must be 16-byte aligned");
    cudasim::sm90::map_fields m{};
    m.magic = cudasim::sm90::map_magic;
    m.addr = reinterpret_cast<uint64_t>(addr);
    m.rank = rank;
    m.elem = cudasim::sm90::elem_bytes(type);
    m.swizzle = swizzle;
    m.oob = oob;
    uint64_t last = 0; // the offset of the tensor's last element
    for (unsigned d = 0; d < rank; ++d) {
        if (dim[d] == 0 || dim[d] > (1ull << 32))
            return bad(format("globalDim[%u] = %llu: 1 to 2^32", d,
                              static_cast<unsigned long long>(dim[d])));
        m.dim[d] = dim[d];
        if (d > 0)
            m.stride[d - 1] = strides[d - 1];
        if (d > 0 && (strides[d - 1] % 16 != 0 || strides[d - 1] >= (1ull << 40)))
            return bad(format("globalStrides[%u] = %llu: a multiple of 16 below 2^40", d - 1,
                              static_cast<unsigned long long>(strides[d - 1])));
        if (box[d] == 0 || box[d] > 256)
            return bad(format("boxDim[%u] = %u: 1 to 256", d, box[d]));
        if (element_strides && element_strides[d] != 1) {
            report_error("cuTensorMapEncodeTiled: element strides other than 1 are not simulated");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        m.box[d] = box[d];
        last += (dim[d] - 1) * (d == 0 ? m.elem : strides[d - 1]);
    }
    if (box[0] * m.elem % 16 != 0)
        return bad(
            format("boxDim[0] * element size = %u bytes: a multiple of 16", box[0] * m.elem));
    unsigned span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B    ? 32
                    : swizzle == CU_TENSOR_MAP_SWIZZLE_64B  ? 64
                    : swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128
                                                            : 0;
    if (span && box[0] * m.elem > span)
        return bad(format("the box's inner dimension (%u bytes) exceeds the %u-byte swizzle span",
                          box[0] * m.elem, span));
    if (cudasim::detail::in_device_allocation(addr) &&
        !cudasim::detail::in_device_allocation(static_cast<char *>(addr) + last + m.elem - 1))
        return bad("the tensor's last element lies past the end of its cudaMalloc'd block");
    std::memset(map, 0, sizeof *map);
    std::memcpy(map, &m, sizeof m);
    return CUDA_SUCCESS;
}
