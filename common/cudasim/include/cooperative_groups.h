// cooperative_groups.h (cudasim) — the block and tile basics of CUDA's cooperative groups, on
// the simulator's barriers and warp collectives: this_thread_block(), tiled_partition<N>() for N
// a power of two up to 32, sync(), thread_rank(), size()/num_threads(), meta_group_rank/size(),
// and on tiles shfl, shfl_up, shfl_down, shfl_xor, any, all, ballot. cg::reduce is in
// <cooperative_groups/reduce.h>. Grid and multi-grid groups, coalesced groups, dynamic
// partitions and memcpy_async are not simulated (using them fails to compile with a message).
//
// Every operation is the intrinsic it stands for (a tile's shfl is __shfl_sync with the tile's
// mask and width), so the simulator's reports name that intrinsic and the caller's line.
#ifndef CUDASIM_COOPERATIVE_GROUPS_H
#define CUDASIM_COOPERATIVE_GROUPS_H

#include <cuda_runtime.h>

namespace cooperative_groups {

namespace details {
inline unsigned block_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
template <typename T> struct unsupported : std::false_type {};
} // namespace details

class thread_block {
  public:
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const {
        __syncthreads(file, line);
    }
    unsigned thread_rank() const { return details::block_rank(); }
    unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

// A tile of N consecutive threads of the block (N a power of two, at most a warp).
template <unsigned N, typename Parent = void> class thread_block_tile;

template <unsigned N> class thread_block_tile<N, void> {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "cudasim: tiled_partition<N> supports N = 1, 2, 4, 8, 16, 32");

  public:
    // The lanes of the caller's tile within its warp.
    unsigned mask() const {
        unsigned lane = details::block_rank() % 32;
        return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (lane / N * N);
    }
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const {
        __syncwarp(mask(), file, line);
    }
    unsigned thread_rank() const { return details::block_rank() % N; }
    unsigned size() const { return N; }
    unsigned long long num_threads() const { return N; }
    unsigned meta_group_rank() const { return details::block_rank() / N; }
    unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
    template <typename T>
    T shfl(T var, int src, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const {
        return __shfl_sync(mask(), var, src, N, file, line);
    }
    template <typename T>
    T shfl_up(T var, unsigned delta, const char *file = __builtin_FILE(),
              int line = __builtin_LINE()) const {
        return __shfl_up_sync(mask(), var, delta, N, file, line);
    }
    template <typename T>
    T shfl_down(T var, unsigned delta, const char *file = __builtin_FILE(),
                int line = __builtin_LINE()) const {
        return __shfl_down_sync(mask(), var, delta, N, file, line);
    }
    template <typename T>
    T shfl_xor(T var, unsigned lane_mask, const char *file = __builtin_FILE(),
               int line = __builtin_LINE()) const {
        return __shfl_xor_sync(mask(), var, static_cast<int>(lane_mask), N, file, line);
    }
    int any(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const {
        return __any_sync(mask(), pred, file, line);
    }
    int all(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const {
        return __all_sync(mask(), pred, file, line);
    }
    // Bit i: the tile's thread of rank i.
    unsigned ballot(int pred, const char *file = __builtin_FILE(),
                    int line = __builtin_LINE()) const {
        unsigned lane = details::block_rank() % 32;
        return __ballot_sync(mask(), pred, file, line) >> (N == 32 ? 0 : lane / N * N);
    }
};

// What tiled_partition<N>(parent) returns; converts to thread_block_tile<N>.
template <unsigned N, typename Parent>
class thread_block_tile : public thread_block_tile<N, void> {};

template <unsigned N, typename Parent>
thread_block_tile<N, Parent> tiled_partition(const Parent &) {
    return thread_block_tile<N, Parent>();
}

template <typename Group>
void sync(const Group &g, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    g.sync(file, line);
}

// Not simulated: a clear message instead of a missing name.
template <typename T = void> void this_grid() {
    static_assert(details::unsupported<T>::value,
                  "cudasim does not support grid groups (cooperative_groups::this_grid)");
}
template <typename T = void> void this_multi_grid() {
    static_assert(details::unsupported<T>::value,
                  "cudasim does not support multi-grid groups (this_multi_grid)");
}
template <typename T = void> void coalesced_threads() {
    static_assert(details::unsupported<T>::value,
                  "cudasim does not support coalesced groups (coalesced_threads)");
}

} // namespace cooperative_groups

#endif // CUDASIM_COOPERATIVE_GROUPS_H
