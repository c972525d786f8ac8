// test_errors.cu — planted bugs, one per case (argv[1]). The simulator must report each one
// naming the kernel, block, thread and line (CTest checks the report against the "// @marker"
// lines), and a fault must then be sticky until cudaDeviceReset, as on a GPU.
#include <cstring>
#include <string>

#include "device/mma.cuh"
#include <cudasim.h>

#include "sim_test.h"

__global__ void fill(int *out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1; }

// Threads 0-15 and 16-63 take different __syncthreads() calls.
__global__ void divergent_barrier(int *out) {
    if (threadIdx.x < 16) {
        __syncthreads(); // @divergence_wait
    } else {
        __syncthreads(); // @divergence_report
    }
    out[threadIdx.x] = 1;
}

// In block 2 threads 8 and up return before the barrier the others wait at.
__global__ void early_exit(int *out) {
    if (blockIdx.x == 2 && threadIdx.x >= 8)
        return;
    __syncthreads(); // @exit_barrier
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Thread 40 waits for its whole warp, which waits at the block barrier: nobody can move.
__global__ void deadlock_kernel(int *out) {
    if (threadIdx.x == 40) {
        __syncwarp(); // @deadlock_syncwarp
    }
    __syncthreads(); // @deadlock_barrier
    out[threadIdx.x] = 1;
}

// Lane 31 returns; the others shuffle with a mask that still names it.
__global__ void shuffle_after_exit(float *out) {
    if (threadIdx.x == 31)
        return;
    float v = __shfl_down_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1); // @shfl_exited
    out[threadIdx.x] = v;
}

// 48 threads: warp 1 has 16 lanes, but block 1 uses a full mask.
__global__ void partial_warp_shuffle(float *out) {
    unsigned mask = blockIdx.x == 1 ? 0xffffffffu : __activemask();
    float v = __shfl_xor_sync(mask, static_cast<float>(threadIdx.x), 1); // @shfl_absent
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Even lanes shuffle while odd lanes ballot, in one warp.
__global__ void mixed_collectives(unsigned *out) {
    unsigned v;
    if (threadIdx.x % 2 == 0)
        v = __shfl_sync(0xffffffffu, threadIdx.x, 0); // @mismatch_shfl
    else
        v = __ballot_sync(0xffffffffu, 1); // @mismatch_ballot
    out[threadIdx.x] = v;
}

// Half a warp runs a warp-wide instruction; the other half exits without taking part.
__global__ void half_warp_mma(float *out) {
    uint32_t a[4] = {}, b[2] = {};
    float d[4] = {};
    if (threadIdx.x < 16)
        mma_m16n8k16_f16(d, a, b, d); // @mma_half_warp
    out[threadIdx.x] = d[0];
}

// The lanes of one allgather contribute different sizes.
__global__ void uneven_allgather(unsigned *out) {
    unsigned mine[2] = {threadIdx.x, 0}, all[32][2];
    cudasim::warp_allgather(mine, all, threadIdx.x < 16 ? 4 : 8); // @allgather_size
    out[threadIdx.x] = all[0][0];
}

__global__ void odd_width(float *out) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1, 12); // @bad_width
}

__device__ int recurse(int depth) {
    volatile char pad[1024];
    pad[0] = static_cast<char>(depth);
    return depth <= 0 ? pad[0] : recurse(depth - 1) + pad[depth % 1024];
}

__global__ void deep_recursion(int *out) {
    bool deep = blockIdx.x == 1 && threadIdx.x == 3;
    out[threadIdx.x] = deep ? recurse(1 << 20) : 0;
}

// A launch written inside a macro: reports name the kernel passed to it, not `k`.
#define LAUNCH_ON(k, grid, block, arg) k<<<grid, block>>>(arg)

namespace {

int *ints = nullptr;
float *floats = nullptr;

// After a fault: errors are sticky until cudaDeviceReset, then the device works again.
void check_sticky(const char *kernel) {
    CHECK_ERR(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK_ERR(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK_ERR(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    void *p = nullptr;
    CHECK_ERR(cudaMalloc(&p, 16), cudaErrorLaunchFailure);
    fill<<<1, 32>>>(ints);
    CHECK_ERR(cudaGetLastError(), cudaErrorLaunchFailure);
    CHECK(std::strstr(cudasim_last_error_message(), kernel) != nullptr);
    CHECK_CUDA(cudaDeviceReset());
    CHECK_CUDA(cudaGetLastError());
    CHECK(cudasim_last_error_message()[0] == '\0');
    int *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, 64 * sizeof(int)));
    fill<<<2, 32>>>(d);
    CHECK_CUDA(cudaGetLastError());
    int h[64] = {0};
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1 && h[63] == 1);
    CHECK_CUDA(cudaFree(d));
    if (!sim_test_failures)
        std::fprintf(stderr, "cudasim-test: sticky error checks passed\n");
}

// A rejected launch is not a fault: the error is returned once and the device goes on.
void check_rejected(cudaError_t want) {
    CHECK_ERR(cudaGetLastError(), want);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    fill<<<1, 32>>>(ints);
    CHECK_CUDA(cudaGetLastError());
    if (!sim_test_failures)
        std::fprintf(stderr, "cudasim-test: launch error checks passed\n");
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <case>\n", argv[0]);
        return 2;
    }
    std::string c = argv[1];
    CHECK_CUDA(cudaMalloc(&ints, 1024 * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&floats, 1024 * sizeof(float)));
    cudasim_set_order(CUDASIM_ORDER_FORWARD, 0);
    if (c == "divergence") {
        divergent_barrier<<<1, 64>>>(ints);
        check_sticky("divergent_barrier");
    } else if (c == "exit_before_barrier") {
        early_exit<<<4, 64>>>(ints);
        check_sticky("early_exit");
    } else if (c == "barrier_after_exit") {
        cudasim_set_order(CUDASIM_ORDER_REVERSE, 0);
        early_exit<<<4, 64>>>(ints);
        check_sticky("early_exit");
    } else if (c == "pointer_launch") {
        // Launched through a pointer: the message names the kernel, and the pointer as written.
        void (*kernel)(int *) = early_exit;
        kernel<<<4, 64>>>(ints);
        check_sticky("early_exit");
    } else if (c == "macro_launch") {
        LAUNCH_ON(early_exit, 4, 64, ints);
        check_sticky("early_exit");
    } else if (c == "macro_rejected") {
        LAUNCH_ON(fill, 1, dim3(33, 32), ints); // @macro_rejected
        check_rejected(cudaErrorInvalidConfiguration);
    } else if (c == "deadlock") {
        deadlock_kernel<<<1, 64>>>(ints);
        check_sticky("deadlock_kernel");
    } else if (c == "mask_exit_while_waiting") {
        shuffle_after_exit<<<1, 32>>>(floats);
        check_sticky("shuffle_after_exit");
    } else if (c == "mask_exited") {
        cudasim_set_order(CUDASIM_ORDER_REVERSE, 0);
        shuffle_after_exit<<<1, 32>>>(floats);
        check_sticky("shuffle_after_exit");
    } else if (c == "mask_absent") {
        partial_warp_shuffle<<<2, 48>>>(floats);
        check_sticky("partial_warp_shuffle");
    } else if (c == "collective_mismatch") {
        mixed_collectives<<<1, 32>>>(reinterpret_cast<unsigned *>(ints));
        check_sticky("mixed_collectives");
    } else if (c == "mma_half_warp") {
        half_warp_mma<<<1, 32>>>(floats);
        check_sticky("half_warp_mma");
    } else if (c == "allgather_size") {
        uneven_allgather<<<1, 32>>>(reinterpret_cast<unsigned *>(ints));
        check_sticky("uneven_allgather");
    } else if (c == "bad_width") {
        odd_width<<<1, 32>>>(floats);
        check_sticky("odd_width");
    } else if (c == "stack_overflow") {
        deep_recursion<<<2, 32>>>(ints);
        std::fprintf(stderr, "cudasim-test: the stack overflow was not caught\n");
        return 0; // the process must have ended in the fault handler (non-zero status)
    } else if (c == "invalid_launch") {
        fill<<<1, dim3(33, 32)>>>(ints); // @invalid_launch
        check_rejected(cudaErrorInvalidConfiguration);
    } else if (c == "too_much_smem") {
        fill<<<1, 32, 64 * 1024>>>(ints); // @smem_launch
        check_rejected(cudaErrorInvalidValue);
    } else {
        std::fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    cudaFree(ints);
    cudaFree(floats);
    return sim_test_result(argv[1]);
}
