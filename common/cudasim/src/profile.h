// profile.h — the profile: an observer of the access stream (access.h) that counts what a GPU's
// memory system would see, per launch and per source line, in the terms of Nsight Compute's
// memory tables.
//
//   global requests   one per warp instruction instance: the accesses of one warp's lanes at
//                     one code address, the n-th time each lane reaches it (lanes of a warp
//                     that diverge and meet again are matched by their occurrence count)
//   sectors           distinct 32-byte sectors a request touches; sectors per request measure
//                     coalescing (4 for 32 lanes reading 32 consecutive floats, 32 at a stride
//                     of 32 floats)
//   DRAM bytes        sectors that miss a model of the L2: fully associative, LRU, 32-byte
//                     sectors, 50 MiB (the H100's L2), cold at the start of each launch;
//                     a load miss reads its sector from DRAM, a store allocates it dirty
//                     without a read, dirty sectors are written back when evicted and at the
//                     launch's end. The footprint (distinct sectors touched) is the
//                     compulsory traffic, a lower bound on any cache
//   shared wavefronts per request: the lanes are split into phases of 128 bytes (32 lanes of
//                     <= 4 bytes, 16 of 8, 8 of 16; ldmatrix: its 8 rows of 16 bytes); in a
//                     phase, the 32 banks are the 4-byte words modulo 32, and the phase takes
//                     as many wavefronts as the most distinct words any bank must deliver (the
//                     same word to several lanes is one broadcast). Bank conflicts = wavefronts
//                     - phases (the ideal)
//   mma               warp-wide mma.m16n8k16 instructions, 2*16*8*16 = 4096 FLOPs each
//
// The stream arrives in the simulator's order (block by block, each block's threads one after
// another between barriers), not a GPU's interleaving: request, sector and wavefront counts do
// not depend on the order; the L2 model does only when a launch's footprint exceeds 50 MiB.
#ifndef CUDASIM_PROFILE_H
#define CUDASIM_PROFILE_H

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "access.h"

namespace cudasim {
namespace detail {

// The kinds of request a line's row counts.
enum profile_kind : int { global_load, global_store, global_atomic, shared_load, shared_store };
constexpr int profile_kinds = 5;

struct profile_counts {
    uint64_t requests = 0; // warp instruction instances
    uint64_t units = 0;    // global: sectors; shared: wavefronts
    uint64_t ideal = 0;    // shared: phases (conflict-free wavefronts); global: unused
    uint64_t bytes = 0;    // bytes the lanes asked for
    void add(const profile_counts &o) {
        requests += o.requests;
        units += o.units;
        ideal += o.ideal;
        bytes += o.bytes;
    }
};

struct profile_line {
    std::string where; // "file:line" (symbolize_pc) or "?"
    profile_counts k[profile_kinds];
    uint64_t mma = 0; // mma.m16n8k16 instructions issued at this line (per warp)
};

// What one launch (or a sum of launches) did.
struct launch_profile {
    std::string kernel;
    uint64_t launches = 0, nblocks = 0;
    unsigned nthreads = 0;
    uint64_t dyn_smem = 0; // bytes of dynamic shared memory per block (the largest launch)
    std::vector<profile_line> lines; // sorted by where
    profile_counts total[profile_kinds];
    uint64_t mma = 0, tensor_flops = 0;
    double model_flops = 0; // FLOPs the caller attributes to the launch (for kernels without mma)
    uint64_t dram_read = 0, dram_written = 0, footprint = 0; // bytes
    void add(const launch_profile &o);
};

// A GPU's published peaks, for the roofline bound.
struct roofline_gpu {
    const char *name;
    double dram_bytes_per_s, tensor_f16_flops, fp32_flops;
};
extern const roofline_gpu roofline_h100_sxm, roofline_a100_sxm;
// FLOPs the bound uses: the tensor FLOPs if any mma ran, else the model FLOPs (fp32 cores).
double profile_flops(const launch_profile &p);
// max(DRAM bytes / bandwidth, FLOPs / peak) in seconds; *memory_bound says which term wins.
double roofline_bound_s(const launch_profile &p, const roofline_gpu &g, bool *memory_bound);
// The tables (one launch or a sum), as Nsight Compute lays out memory tables.
void print_profile(FILE *f, const launch_profile &p);

class profile_observer : public access_observer {
  public:
    explicit profile_observer(uint64_t l2_bytes = 50ull << 20) : l2_sectors_(l2_bytes / 32) {}
    void launch_begin(const launch_info &li) override;
    void access(const access_event &e) override;
    void mma(uint64_t block, uint32_t warp, uint64_t flops, const char *file, int line) override;
    void launch_end(const launch_info &li, bool failed) override;

    void set_model_flops(double flops) { model_flops_ = flops; }
    // The launches finished since the last take, in order; clears them.
    std::vector<launch_profile> take();

    struct lane_access {
        uintptr_t addr;
        uint32_t size;
        uint32_t lane;
    };
    struct warp_accesses { // the lanes of one warp instruction instance so far
        uint32_t n = 0;
        lane_access lane[32];
    };

  private:
    // An open-addressing hash map from a nonzero 64-bit key to a 64-bit value: the hot tables
    // of the observer (a probe costs a multiply and, mostly, one cache line).
    struct flat_map {
        std::vector<uint64_t> keys; // 0: empty
        std::vector<uint64_t> values;
        size_t used = 0;
        // The value of key (inserted as fresh when absent); *inserted says which.
        uint64_t &at(uint64_t key, uint64_t fresh, bool *inserted);
        void clear();
    };
    // The lanes of one warp at one (code address, op, space), in order of occurrence: entry i
    // is the instance that the i-th arrival of each lane joins (lanes of a warp that diverge and
    // meet again are matched by their occurrence count).
    struct warp_stream {
        uint32_t warp = 0;
        const void *pc = nullptr;
        access_op op = access_op::load;
        mem_space space = mem_space::global;
        uint64_t base = 0; // occurrence number of open[head]
        size_t head = 0;   // open[0..head) are closed and wait to be dropped
        size_t count = 0;  // open[0..count) are in use (the storage is kept for reuse)
        // An instance is closed once every lane of the warp has joined it (n == its lanes).
        std::vector<warp_accesses> open;
    };
    // One block's open warp instructions (a block runs on one OS thread from start to end).
    struct block_state {
        uint64_t block = ~0ull;
        // (thread, code address, op, space) -> arrivals so far (low 32 bits) and the index of
        // the warp's stream in streams (high 32 bits)
        flat_map occurrences;
        flat_map stream_of; // (warp, code address, op, space) -> index in streams
        std::vector<warp_stream> streams;
    };
    struct worker {
        block_state b;
    };
    worker &my_worker();
    void close_block(block_state &b);
    void close_instance(const warp_stream &s, const warp_accesses &w);
    void l2_touch(uint64_t sector, bool write);
    unsigned lanes_in_warp(uint32_t warp) const;
    std::mutex m_; // guards everything below but the workers' block states
    uint64_t generation_ = 0;
    std::vector<std::unique_ptr<worker>> workers_;
    std::unordered_map<const void *, profile_counts[profile_kinds]> by_pc_;
    std::unordered_map<std::string, uint64_t> mma_by_line_; // mma instructions per file:line
    uint64_t mma_ = 0, tensor_flops_ = 0;
    double model_flops_ = 0;
    unsigned nthreads_ = 0;
    // The L2 model: every sector touched in the launch has a node (their count is the
    // footprint); the resident ones form a list, most recently used first.
    struct l2_node {
        uint64_t sector;
        uint32_t prev, next; // l2_none at the ends
        bool dirty, resident;
    };
    static constexpr uint32_t l2_none = ~0u;
    uint64_t l2_sectors_;
    flat_map l2_index_; // sector + 1 -> node
    std::vector<l2_node> l2_nodes_;
    uint32_t l2_head_ = l2_none, l2_tail_ = l2_none;
    uint64_t l2_resident_ = 0;
    void l2_clear();
    uint64_t dram_read_ = 0, dram_written_ = 0;
    std::vector<launch_profile> done_;
};

} // namespace detail
} // namespace cudasim

#endif // CUDASIM_PROFILE_H
