// test_sm90_errors.cu — planted bugs in Hopper's asynchronous protocol, one per case (argv[1]):
// the simulator must report each at the right thread and line (tests/cudasim/CMakeLists.txt
// holds the expected reports; the lines are found by the "// @case" markers).
//
//   skip_wait          a warpgroup runs wgmma on shared memory a TMA fills without waiting on its
//                      mbarrier
//   wrong_parity       it waits with parity 1 on the first phase (which returns at once)
//   missing_fence      wgmma without wgmma_fence
//   missing_wait_group the accumulator is read and the thread exits without wgmma_wait_group
//   written_in_flight  the accumulator is written before the wait
//   tx_short           expect_tx announces more bytes than the copy delivers: the phase never
//                      completes (a deadlock, with the mbarrier's balance)
//   tx_never_waited    a copy is issued and nobody waits for it
//   named_mismatch     two warpgroups pass different thread counts to one named barrier
//   named_odd          a named barrier's count is not a multiple of 32
//   extra_arrival      more arrivals than the mbarrier's count in one phase
#include <cstdio>
#include <cstring>

#include <cuda.h>

#include "device/sm90.cuh"

enum plant {
    skip_wait,
    wrong_parity,
    missing_fence,
    missing_wait_group,
    written_in_flight,
    tx_short,
    tx_never_waited,
    named_mismatch,
    named_odd,
    extra_arrival
};
static const char *const names[] = {
    "skip_wait", "wrong_parity",    "missing_fence",  "missing_wait_group", "written_in_flight",
    "tx_short",  "tx_never_waited", "named_mismatch", "named_odd",          "extra_arrival"};
constexpr uint32_t tile_bytes = 64 * 64 * 2;

__global__ void planted(const __grid_constant__ CUtensorMap map, int which, float *out) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t bar;
    uint32_t sa = smem_address(smem_raw);
    unsigned char *a = smem_raw + (1024 - sa % 1024) % 1024, *b = a + tile_bytes;
    int t = threadIdx.x;
    if (t == 0) {
        mbarrier_init(&bar, 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (which == named_mismatch) {
        named_barrier_sync(1, t < 128 ? 256 : 128); // @named_mismatch
        return;
    }
    if (which == named_odd) {
        named_barrier_sync(1, 100); // @named_odd
        return;
    }
    if (t >= 128)
        return;
    if (t == 0) {
        uint32_t announced = which == tx_short ? 2 * tile_bytes + 1024 : 2 * tile_bytes;
        mbarrier_arrive_expect_tx(&bar, announced); // @expect_tx
        tma_load_2d(a, &map, &bar, 0, 0);           // @tma_a
        tma_load_2d(b, &map, &bar, 0, 64);
        if (which == extra_arrival)
            mbarrier_arrive(&bar); // @extra_arrival
    }
    if (which == tx_never_waited)
        return;
    if (which == wrong_parity)
        mbarrier_wait(&bar, 1);
    else if (which != skip_wait)
        mbarrier_wait(&bar, 0); // @wait
    float d[32];
    if (which != missing_fence)
        wgmma_fence();
    for (int k = 0; k < 4; ++k)
        wgmma_ss_f16<64>(d, wgmma_desc(a + 32 * k, 0, 1024, ATTN_SMEM_SW128), // @wgmma
                         wgmma_desc(b + 32 * k, 0, 1024, ATTN_SMEM_SW128), k > 0);
    wgmma_commit_group();
    if (which == written_in_flight)
        d[3] = 0.0f;
    if (which != missing_wait_group)
        wgmma_wait_group<0>(); // @wait_group
    for (int i = 0; i < 32; ++i)
        out[t * 32 + i] = d[i];
}

int main(int argc, char **argv) {
    int which = -1;
    for (int i = 0; argc > 1 && i < (int)(sizeof names / sizeof *names); ++i)
        if (std::strcmp(argv[1], names[i]) == 0)
            which = i;
    if (which < 0) {
        std::fprintf(stderr, "usage: %s <case>\n", argv[0]);
        return 2;
    }
    void *src;
    float *out;
    cudaMalloc(&src, 2 * tile_bytes);
    cudaMemset(src, 0, 2 * tile_bytes);
    cudaMalloc(&out, 128 * 32 * sizeof(float));
    CUtensorMap map;
    cuuint64_t dim[2] = {64, 128}, stride[1] = {128};
    cuuint32_t box[2] = {64, 64}, ones[2] = {1, 1};
    if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, src, dim, stride, box,
                               ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return 1;
    size_t smem = 1024 + 2 * tile_bytes;
    cudaFuncSetAttribute(planted, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    planted<<<1, 256, smem>>>(map, which, out);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("%s: launch returned %s\n", names[which], cudaGetErrorName(err));
    return 0;
}
