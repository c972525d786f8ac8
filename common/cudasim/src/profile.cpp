// profile.cpp — the profile observer and its tables (see profile.h), and the C API of cudasim.h.
#include "profile.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <map>

#include <cudasim.h>

namespace cudasim {
namespace detail {

// Published peaks (dense, without structured sparsity). H100 SXM5: 3.35 TB/s HBM3, 989.4 TFLOP/s
// fp16 tensor with fp32 accumulation, 66.9 TFLOP/s fp32 (NVIDIA H100 Tensor Core GPU datasheet).
// A100 SXM4 80 GB: 2,039 GB/s HBM2e, 312 TFLOP/s fp16 tensor, 19.5 TFLOP/s fp32 (NVIDIA A100
// Tensor Core GPU datasheet).
const roofline_gpu roofline_h100_sxm = {"H100 SXM", 3.35e12, 989.4e12, 66.9e12};
const roofline_gpu roofline_a100_sxm = {"A100 SXM", 2.039e12, 312e12, 19.5e12};

void launch_profile::add(const launch_profile &o) {
    if (kernel.empty())
        kernel = o.kernel;
    else if (kernel != o.kernel && kernel.find(" + ") == std::string::npos)
        kernel += " + ...";
    launches += o.launches;
    nblocks += o.nblocks;
    nthreads = std::max(nthreads, o.nthreads);
    dyn_smem = std::max(dyn_smem, o.dyn_smem);
    std::map<std::string, profile_line> merged;
    const std::vector<profile_line> *both[] = {&lines, &o.lines};
    for (const std::vector<profile_line> *v : both)
        for (const profile_line &l : *v) {
            profile_line &m = merged[l.where];
            m.where = l.where;
            for (int k = 0; k < profile_kinds; ++k)
                m.k[k].add(l.k[k]);
            m.mma += l.mma;
        }
    lines.clear();
    for (auto &kv : merged)
        lines.push_back(kv.second);
    for (int k = 0; k < profile_kinds; ++k)
        total[k].add(o.total[k]);
    mma += o.mma;
    tensor_flops += o.tensor_flops;
    model_flops += o.model_flops;
    dram_read += o.dram_read;
    dram_written += o.dram_written;
    footprint += o.footprint;
}

double profile_flops(const launch_profile &p) {
    return p.tensor_flops > 0 ? (double)p.tensor_flops : p.model_flops;
}

double roofline_bound_s(const launch_profile &p, const roofline_gpu &g, bool *memory_bound) {
    double mem = (double)(p.dram_read + p.dram_written) / g.dram_bytes_per_s;
    double peak = p.tensor_flops > 0 ? g.tensor_f16_flops : g.fp32_flops;
    double compute = profile_flops(p) / peak;
    if (memory_bound != nullptr)
        *memory_bound = mem >= compute;
    return std::max(mem, compute);
}

// ---- the observer ------------------------------------------------------------------------------

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

uint64_t &profile_observer::flat_map::at(uint64_t key, uint64_t fresh, bool *inserted) {
    if (2 * (used + 1) > keys.size()) { // keep the load at most 1/2: rehash into twice the size
        std::vector<uint64_t> old_keys(std::max<size_t>(64, 2 * keys.size()), 0);
        std::vector<uint64_t> old_values(old_keys.size());
        old_keys.swap(keys);
        old_values.swap(values);
        size_t mask = keys.size() - 1;
        for (size_t i = 0; i < old_keys.size(); ++i)
            if (old_keys[i] != 0) {
                size_t j = mix(old_keys[i]) & mask;
                while (keys[j] != 0)
                    j = (j + 1) & mask;
                keys[j] = old_keys[i];
                values[j] = old_values[i];
            }
    }
    size_t mask = keys.size() - 1, j = mix(key) & mask;
    while (keys[j] != 0 && keys[j] != key)
        j = (j + 1) & mask;
    *inserted = keys[j] == 0;
    if (*inserted) {
        keys[j] = key;
        values[j] = fresh;
        ++used;
    }
    return values[j];
}

void profile_observer::flat_map::clear() {
    if (used != 0)
        std::fill(keys.begin(), keys.end(), 0);
    used = 0;
}

// (thread or warp, code address, op, space) in one nonzero word, exactly: a thread index is
// below 1024 (11 bits are left above a code address of this process, which is below 2^48).
static inline uint64_t access_key(const void *pc, access_op op, mem_space space, uint32_t who) {
    return ((uint64_t)who << 53 | (uint64_t)(uintptr_t)pc << 5 | (uint64_t)op << 2 |
            (uint64_t)space) +
           1;
}

namespace {
// The worker of the calling OS thread in the current launch (a launch bumps the generation).
std::atomic<uint64_t> next_generation{1};
thread_local uint64_t tl_generation = 0;
thread_local void *tl_worker = nullptr;

profile_kind kind_of(const access_event &e) {
    bool shared = e.space == mem_space::shared;
    switch (e.op) {
    case access_op::load:
    case access_op::ldmatrix_row:
    case access_op::cp_async_src:
        return shared ? shared_load : global_load;
    case access_op::store:
    case access_op::cp_async_dst:
        return shared ? shared_store : global_store;
    case access_op::atomic:
        return shared ? shared_store : global_atomic;
    }
    return global_load;
}
} // namespace

void profile_observer::launch_begin(const launch_info &li) {
    std::lock_guard<std::mutex> lock(m_);
    generation_ = next_generation.fetch_add(1);
    workers_.clear();
    by_pc_.clear();
    mma_ = tensor_flops_ = dram_read_ = dram_written_ = 0;
    mma_by_line_.clear();
    nthreads_ = li.nthreads;
    l2_clear();
}

profile_observer::worker &profile_observer::my_worker() {
    if (tl_generation != generation_ || tl_worker == nullptr) {
        std::lock_guard<std::mutex> lock(m_);
        workers_.push_back(std::unique_ptr<worker>(new worker));
        tl_worker = workers_.back().get();
        tl_generation = generation_;
    }
    return *static_cast<worker *>(tl_worker);
}

unsigned profile_observer::lanes_in_warp(uint32_t warp) const {
    unsigned first = warp * 32u;
    return nthreads_ > first ? std::min(32u, nthreads_ - first) : 32u;
}

void profile_observer::access(const access_event &e) {
    if (e.space != mem_space::global && e.space != mem_space::shared)
        return; // local memory (registers, stacks) and bad addresses: not memory traffic
    // Atomics reach the stream for the checkers; the profile's tables, measured before they
    // did, count plain loads and stores only.
    if (e.op == access_op::atomic)
        return;
    block_state &b = my_worker().b;
    if (b.block != e.block) {
        close_block(b);
        b.block = e.block;
    }
    bool fresh = false;
    uint64_t &arrivals = b.occurrences.at(access_key(e.pc, e.op, e.space, e.thread), 0, &fresh);
    uint32_t warp = e.thread / 32;
    if (fresh) { // the lane's first arrival here: find (or open) its warp's stream
        uint64_t si =
            b.stream_of.at(access_key(e.pc, e.op, e.space, warp), b.streams.size(), &fresh);
        if (fresh) {
            b.streams.emplace_back();
            warp_stream &s = b.streams.back();
            s.warp = warp;
            s.pc = e.pc;
            s.op = e.op;
            s.space = e.space;
        }
        arrivals = si << 32;
    }
    uint64_t n = arrivals++ & 0xffffffffu;
    warp_stream &s = b.streams[arrivals >> 32];
    size_t i = s.head + (size_t)(n - s.base);
    while (s.count <= i) { // open instances up to i (storage kept from earlier ones is reused)
        if (s.count == s.open.size())
            s.open.emplace_back();
        s.open[s.count++].n = 0;
    }
    warp_accesses &w = s.open[i];
    w.lane[w.n++] = lane_access{e.addr, e.size, e.thread % 32};
    unsigned lanes = lanes_in_warp(warp);
    if (w.n < lanes)
        return;
    close_instance(s, w); // every lane of the warp is in: the request is whole
    while (s.head < s.count && s.open[s.head].n == lanes) // drop the closed ones in front
        ++s.head, ++s.base;
    if (s.head == s.count) // nothing open: start again at the front
        s.head = s.count = 0;
}

void profile_observer::close_block(block_state &b) {
    // The instances some lanes never joined, in a fixed order: by warp, then occurrence.
    struct rest {
        uint32_t warp;
        uint64_t occurrence;
        size_t stream, index;
    };
    std::vector<rest> left;
    for (size_t si = 0; si < b.streams.size(); ++si) {
        const warp_stream &s = b.streams[si];
        for (size_t i = s.head; i < s.count; ++i)
            if (s.open[i].n < lanes_in_warp(s.warp))
                left.push_back(rest{s.warp, s.base + (i - s.head), si, i});
    }
    std::sort(left.begin(), left.end(), [](const rest &x, const rest &y) {
        if (x.warp != y.warp)
            return x.warp < y.warp;
        return x.occurrence != y.occurrence ? x.occurrence < y.occurrence : x.stream < y.stream;
    });
    for (const rest &r : left)
        close_instance(b.streams[r.stream], b.streams[r.stream].open[r.index]);
    b.occurrences.clear();
    b.stream_of.clear();
    b.streams.clear();
    b.block = ~0ull;
}

// Sorts x[0..n) and drops repeats; returns the new n.
static unsigned sort_unique(uint64_t *x, unsigned n) {
    if (!std::is_sorted(x, x + n)) // lanes mostly come in address order
        std::sort(x, x + n);
    return (unsigned)(std::unique(x, x + n) - x);
}

// The wavefronts of one shared-memory request: see profile.h. *phases = the ideal.
static uint64_t shared_wavefronts(const profile_observer::warp_accesses &w, uint64_t *phases) {
    uint32_t size = std::min(std::max(4u, w.lane[0].size), 16u);
    uint32_t per_phase = size <= 4 ? 32 : size <= 8 ? 16 : 8; // lanes per 128-byte phase
    uint64_t waves = 0;
    *phases = 0;
    for (uint32_t first = 0; first < 32; first += per_phase) {
        uint64_t words[32 * 4 + 4];
        unsigned n = 0;
        for (uint32_t i = 0; i < w.n; ++i) {
            const profile_observer::lane_access &a = w.lane[i];
            if (a.lane < first || a.lane >= first + per_phase)
                continue;
            uintptr_t last = (a.addr + std::max(a.size, 1u) - 1) / 4;
            for (uintptr_t x = a.addr / 4; x <= last && n < sizeof words / sizeof words[0]; ++x)
                words[n++] = x;
        }
        if (n == 0)
            continue;
        n = sort_unique(words, n);
        unsigned per_bank[32] = {}, most = 0;
        for (unsigned i = 0; i < n; ++i)
            most = std::max(most, ++per_bank[words[i] % 32]);
        waves += most;
        ++*phases;
    }
    return waves;
}

// Bytes the lanes of a request ask for, counting a byte that several lanes read once.
static uint64_t distinct_bytes(const profile_observer::warp_accesses &w) {
    std::pair<uintptr_t, uintptr_t> span[32]; // [begin, end) of each lane
    for (uint32_t i = 0; i < w.n; ++i)
        span[i] = {w.lane[i].addr, w.lane[i].addr + w.lane[i].size};
    if (!std::is_sorted(span, span + w.n))
        std::sort(span, span + w.n);
    uint64_t bytes = 0;
    uintptr_t covered = 0; // end of the union so far
    for (uint32_t i = 0; i < w.n; ++i) {
        uintptr_t from = std::max(span[i].first, covered);
        if (span[i].second > from)
            bytes += span[i].second - from;
        covered = std::max(covered, span[i].second);
    }
    return bytes;
}

void profile_observer::close_instance(const warp_stream &k, const warp_accesses &w) {
    if (w.n == 0)
        return;
    access_event e{};
    e.op = k.op;
    e.space = k.space;
    profile_kind kind = kind_of(e);
    profile_counts c;
    c.requests = 1;
    c.bytes = distinct_bytes(w);
    uint64_t sectors[32 * 4];
    unsigned ns = 0;
    if (k.space == mem_space::shared) {
        c.units = shared_wavefronts(w, &c.ideal);
    } else {
        for (uint32_t i = 0; i < w.n; ++i) {
            const lane_access &a = w.lane[i];
            uint64_t last = (a.addr + std::max(a.size, 1u) - 1) / 32;
            for (uint64_t s = a.addr / 32; s <= last && ns < 32 * 4; ++s)
                sectors[ns++] = s;
        }
        ns = sort_unique(sectors, ns);
        c.units = ns;
    }
    std::lock_guard<std::mutex> lock(m_);
    by_pc_[k.pc][kind].add(c);
    for (unsigned i = 0; i < ns; ++i) {
        if (kind != global_store)
            l2_touch(sectors[i], false);
        if (kind != global_load)
            l2_touch(sectors[i], true);
    }
}

void profile_observer::l2_touch(uint64_t sector, bool write) {
    bool fresh = false;
    uint32_t id = (uint32_t)l2_index_.at(sector + 1, l2_nodes_.size(), &fresh);
    if (fresh)
        l2_nodes_.push_back(l2_node{sector, l2_none, l2_none, false, false});
    l2_node &x = l2_nodes_[id];
    if (x.resident) {
        x.dirty = x.dirty || write;
        if (l2_head_ == id)
            return;
        l2_nodes_[x.prev].next = x.next; // unlink (x is not the head, so it has a prev)
        if (x.next != l2_none)
            l2_nodes_[x.next].prev = x.prev;
        else
            l2_tail_ = x.prev;
    } else {
        if (!write)
            dram_read_ += 32; // a store allocates its sector without reading it
        x.dirty = write;
        x.resident = true;
        ++l2_resident_;
    }
    x.prev = l2_none; // to the front
    x.next = l2_head_;
    if (l2_head_ != l2_none)
        l2_nodes_[l2_head_].prev = id;
    l2_head_ = id;
    if (l2_tail_ == l2_none)
        l2_tail_ = id;
    if (l2_resident_ > l2_sectors_) { // evict the least recently used
        l2_node &old = l2_nodes_[l2_tail_];
        if (old.dirty)
            dram_written_ += 32;
        old.resident = old.dirty = false;
        l2_tail_ = old.prev;
        l2_nodes_[l2_tail_].next = l2_none;
        --l2_resident_;
    }
}

void profile_observer::l2_clear() {
    l2_index_.clear();
    l2_nodes_.clear();
    l2_head_ = l2_tail_ = l2_none;
    l2_resident_ = 0;
}

void profile_observer::mma(uint64_t, uint32_t, uint64_t flops, const char *file, int line) {
    char where[512];
    snprintf(where, sizeof where, "%s:%d", file ? file : "?", line);
    std::lock_guard<std::mutex> lock(m_);
    ++mma_;
    ++mma_by_line_[where];
    tensor_flops_ += flops;
}

void profile_observer::launch_end(const launch_info &li, bool /*failed*/) {
    for (auto &w : workers_) // every block has finished: no worker runs
        close_block(w->b);
    std::lock_guard<std::mutex> lock(m_);
    launch_profile p;
    p.kernel = li.kernel ? li.kernel : "?";
    p.launches = 1;
    p.nblocks = li.nblocks;
    p.nthreads = li.nthreads;
    p.dyn_smem = li.dyn_smem;
    std::vector<const void *> pcs;
    for (auto &kv : by_pc_)
        pcs.push_back(kv.first);
    symbolize_pcs(pcs);
    std::map<std::string, profile_line> lines;
    for (auto &kv : by_pc_) {
        std::string where = kv.first ? symbolize_pc(kv.first) : "?";
        profile_line &l = lines[where];
        l.where = where;
        for (int k = 0; k < profile_kinds; ++k) {
            l.k[k].add(kv.second[k]);
            p.total[k].add(kv.second[k]);
        }
    }
    for (auto &kv : mma_by_line_) {
        profile_line &l = lines[kv.first];
        l.where = kv.first;
        l.mma += kv.second;
    }
    for (auto &kv : lines)
        p.lines.push_back(kv.second);
    p.mma = mma_;
    p.tensor_flops = tensor_flops_;
    p.model_flops = model_flops_;
    for (const l2_node &x : l2_nodes_)
        dram_written_ += x.resident && x.dirty ? 32 : 0;
    p.dram_read = dram_read_;
    p.dram_written = dram_written_;
    p.footprint = l2_nodes_.size() * 32;
    done_.push_back(std::move(p));
    workers_.clear();
    generation_ = next_generation.fetch_add(1);
    l2_clear();
    by_pc_.clear();
    mma_by_line_.clear();
}

std::vector<launch_profile> profile_observer::take() {
    std::lock_guard<std::mutex> lock(m_);
    std::vector<launch_profile> out;
    out.swap(done_);
    return out;
}

// ---- the tables --------------------------------------------------------------------------------

static const char *const kind_names[profile_kinds] = {"ld", "st", "atom", "ld", "st"};

static void print_row(FILE *f, const char *where, const char *op, const profile_counts &c,
                      bool shared) {
    double per = c.requests ? (double)c.units / (double)c.requests : 0.0;
    if (shared)
        fprintf(f, "  %-36.36s %-4s %12" PRIu64 " %12" PRIu64 " %8.2f %12" PRIu64 "\n", where, op,
                c.requests, c.units, per, c.units - c.ideal);
    else
        fprintf(f, "  %-36.36s %-4s %12" PRIu64 " %12" PRIu64 " %8.2f %11.1f%%\n", where, op,
                c.requests, c.units, per,
                c.units ? 100.0 * (double)c.bytes / (32.0 * (double)c.units) : 0.0);
}

// The tail of a path: at most n characters, cut at a '/'.
static std::string short_where(const std::string &w, size_t n) {
    if (w.size() <= n)
        return w;
    size_t cut = w.find('/', w.size() - n);
    return cut == std::string::npos ? w.substr(w.size() - n) : w.substr(cut + 1);
}

static void print_table(FILE *f, const launch_profile &p, bool shared) {
    int first = shared ? shared_load : global_load, last = shared ? shared_store : global_atomic;
    fprintf(f, "  %-36s %-4s %12s %12s %8s %12s\n",
            shared ? "shared memory: line" : "global memory: line", "op", "requests",
            shared ? "wavefronts" : "sectors", "per req", shared ? "conflicts" : "efficiency");
    for (const profile_line &l : p.lines)
        for (int k = first; k <= last; ++k)
            if (l.k[k].requests != 0)
                print_row(f, short_where(l.where, 36).c_str(), kind_names[k], l.k[k], shared);
    for (int k = first; k <= last; ++k)
        if (p.total[k].requests != 0)
            print_row(f, "total", kind_names[k], p.total[k], shared);
}

void print_profile(FILE *f, const launch_profile &p) {
    fprintf(f,
            "profile of %s (%" PRIu64 " launch%s, %" PRIu64 " blocks of %u threads, %" PRIu64
            " B dynamic shared memory)\n",
            p.kernel.c_str(), p.launches, p.launches == 1 ? "" : "es", p.nblocks, p.nthreads,
            p.dyn_smem);
    print_table(f, p, false);
    print_table(f, p, true);
    fprintf(f,
            "  DRAM (model: LRU L2 of 50 MiB, 32 B sectors, cold per launch): %.4g MB read, "
            "%.4g MB written; footprint %.4g MB\n",
            p.dram_read * 1e-6, p.dram_written * 1e-6, p.footprint * 1e-6);
    double flops = profile_flops(p), bytes = (double)(p.dram_read + p.dram_written);
    if (p.tensor_flops > 0) {
        fprintf(f, "  tensor: %" PRIu64 " mma.m16n8k16 = %.4g GFLOP\n", p.mma, flops * 1e-9);
        fprintf(f, "  %-36s %12s %12s\n", "tensor: line", "mma", "GFLOP");
        for (const profile_line &l : p.lines)
            if (l.mma != 0)
                fprintf(f, "  %-36.36s %12" PRIu64 " %12.4g\n", short_where(l.where, 36).c_str(),
                        l.mma, (double)l.mma * (double)p.tensor_flops / (double)p.mma * 1e-9);
    } else
        fprintf(f, "  FLOPs: %.4g GFLOP (the caller's count; no mma ran)\n", flops * 1e-9);
    fprintf(f, "  arithmetic intensity: %.3g FLOP per DRAM byte\n",
            bytes > 0 ? flops / bytes : 0.0);
    for (const roofline_gpu *g : {&roofline_h100_sxm, &roofline_a100_sxm}) {
        bool mem = false;
        double t = roofline_bound_s(p, *g, &mem);
        fprintf(f, "  roofline lower bound on %s: %.4g us (%s bound)\n", g->name, t * 1e6,
                mem ? "memory" : "compute");
    }
}

} // namespace detail
} // namespace cudasim

// ---- the C API ---------------------------------------------------------------------------------

using cudasim::detail::launch_profile;

namespace {
cudasim::detail::profile_observer &the_profile() {
    static cudasim::detail::profile_observer p;
    return p;
}
bool profile_on = false;
int threads_before = 0;

void fill_summary(const launch_profile &p, cudasim_profile_summary *s) {
    using namespace cudasim::detail;
    *s = cudasim_profile_summary{};
    s->launches = p.launches;
    s->dyn_smem_bytes = p.dyn_smem;
    s->global_load_requests = p.total[global_load].requests;
    s->global_load_sectors = p.total[global_load].units;
    s->global_store_requests = p.total[global_store].requests + p.total[global_atomic].requests;
    s->global_store_sectors = p.total[global_store].units + p.total[global_atomic].units;
    s->global_load_bytes = p.total[global_load].bytes;
    s->global_store_bytes = p.total[global_store].bytes + p.total[global_atomic].bytes;
    s->shared_requests = p.total[shared_load].requests + p.total[shared_store].requests;
    s->shared_wavefronts = p.total[shared_load].units + p.total[shared_store].units;
    s->shared_conflicts =
        s->shared_wavefronts - p.total[shared_load].ideal - p.total[shared_store].ideal;
    s->dram_bytes = p.dram_read + p.dram_written;
    s->footprint_bytes = p.footprint;
    s->mma = p.mma;
    s->flops = profile_flops(p);
    s->intensity = s->dram_bytes ? s->flops / (double)s->dram_bytes : 0.0;
    s->bound_h100_s = roofline_bound_s(p, roofline_h100_sxm, nullptr);
    s->bound_a100_s = roofline_bound_s(p, roofline_a100_sxm, nullptr);
}
} // namespace

extern "C" {

int cudasim_profile_available(void) { return cudasim::detail::access_stream_available() ? 1 : 0; }

int cudasim_profile_enable(int on) {
    if (on && !cudasim_profile_available())
        return -1;
    if (on && !profile_on) {
        threads_before = cudasim_get_threads();
        cudasim_set_threads(1); // one order of the stream: the L2 model is reproducible
        cudasim::detail::add_access_observer(&the_profile());
    } else if (!on && profile_on) {
        cudasim::detail::remove_access_observer(&the_profile());
        cudasim_set_threads(threads_before);
    }
    profile_on = on != 0;
    return 0;
}

void cudasim_profile_set_flops(double flops) { the_profile().set_model_flops(flops); }

int cudasim_profile_report(FILE *f, cudasim_profile_summary *summary) {
    std::vector<launch_profile> done = the_profile().take();
    launch_profile sum;
    for (const launch_profile &p : done)
        sum.add(p);
    if (f != nullptr && !done.empty())
        cudasim::detail::print_profile(f, sum);
    if (summary != nullptr)
        fill_summary(sum, summary);
    return (int)done.size();
}

} // extern "C"
