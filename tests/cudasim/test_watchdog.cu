// test_watchdog.cu — kernels that never finish, a failing device assert and accesses outside the
// launch's dynamic shared memory, one per case (argv[1]). The watchdog must end a stalled launch
// with cudaErrorLaunchTimeout and a report naming the kernel, block, spinning thread and line
// (CTest checks it against the "// @marker" lines); a failed assert must end its launch with
// cudaErrorAssert; an out-of-bounds shared access with cudaErrorIllegalAddress (not under ASan,
// which reports it itself). Each is sticky until cudaDeviceReset, after which the program
// launches normally again. Built with asserts on.
#include <cassert>
#include <cstdlib>
#include <cstring>

#include <cudasim.h>

#include "sim_test.h"

__global__ void fill(int *out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1; }

// Warp 1 waits for a flag that warp 0 never sets (it checks the wrong condition).
__global__ void spin_atomic(int *flag, int *out) {
    if (threadIdx.x == 0 && out[0] == 12345)
        atomicExch(flag, 1);
    if (threadIdx.x == 32)
        while (atomicAdd(flag, 0) == 0) {
        }
    out[threadIdx.x] = 1;
}

// The same with __nanosleep: the other threads run and exit, the sleeper still waits.
__global__ void spin_sleep(int *flag, int *out) {
    if (threadIdx.x == 5)
        while (atomicAdd(flag, 0) == 0)
            __nanosleep(1000); // @spin_sleep
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Block 0 waits for block 1, which waits at a barrier for thread 0 of its own block... which
// waits for block 0: every block of the grid is stalled.
__global__ void spin_blocks(int *flag, int *out) {
    if (threadIdx.x == 0)
        while (atomicAdd(&flag[1 - blockIdx.x], 0) == 0)
            __nanosleep(100); // @spin_blocks
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Thread (3,1,0) of block (1,0,0) finds a negative value.
__global__ void checked(const int *in, int *out) {
    int i = (blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    assert(in[i] >= 0); // @assert
    out[i] = in[i] * 2;
}

// One thread computes for `ns` nanoseconds of wall clock without a barrier: not a stall, but the
// watchdog cannot tell (it is off, or longer, for such kernels).
__global__ void long_thread(long long ns, int *out) {
    long long end = clock64() + ns;
    int spins = 0;
    while (clock64() < end)
        ++spins;
    out[0] = spins > 0;
}

// Thread 63 of each block writes one element past the launch's 64 floats.
__global__ void write_past_end(int *out) {
    extern __shared__ float s[];
    s[threadIdx.x + 1] = 1.0f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = 0;
}

// The launch forgot the dynamic shared memory size: the first read is out of bounds.
__global__ void read_without_size(int *out) {
    extern __shared__ int s[];
    out[threadIdx.x] = s[threadIdx.x];
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    int *flag = nullptr, *out = nullptr;
    CHECK_CUDA(cudaMalloc(&flag, 2 * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&out, 256 * sizeof(int)));
    CHECK_CUDA(cudaMemset(flag, 0, 2 * sizeof(int)));
    CHECK_CUDA(cudaMemset(out, 0, 256 * sizeof(int)));
    cudaError_t want = cudaErrorLaunchTimeout;
    if (!std::getenv("CUDASIM_WATCHDOG"))
        cudasim_set_watchdog(0.5);
    if (!std::strcmp(c, "spin_atomic")) {
        spin_atomic<<<1, 64>>>(flag, out);
    } else if (!std::strcmp(c, "spin_sleep")) {
        spin_sleep<<<2, 32>>>(flag, out);
    } else if (!std::strcmp(c, "spin_blocks")) {
        cudasim_set_threads(2);
        spin_blocks<<<2, 64>>>(flag, out);
    } else if (!std::strcmp(c, "assert")) {
        int in[64];
        for (int i = 0; i < 64; ++i)
            in[i] = i == 32 + 8 + 3 ? -1 : i;
        CHECK_CUDA(cudaMemcpy(flag, in, 0, cudaMemcpyHostToDevice));
        int *din = nullptr;
        CHECK_CUDA(cudaMalloc(&din, sizeof in));
        CHECK_CUDA(cudaMemcpy(din, in, sizeof in, cudaMemcpyHostToDevice));
        checked<<<2, dim3(8, 4)>>>(din, out);
        want = cudaErrorAssert;
    } else if (!std::strcmp(c, "long_thread")) {
        long_thread<<<1, 1>>>(1000 * 1000 * 1000, out); // 1 s
        want = cudasim_set_watchdog(-1) == 0 ? cudaSuccess : cudaErrorLaunchTimeout;
    } else if (!std::strcmp(c, "write_past_end")) {
        write_past_end<<<2, 64, 64 * sizeof(float)>>>(out);
        want = cudaErrorIllegalAddress;
    } else if (!std::strcmp(c, "read_without_size")) {
        read_without_size<<<1, 32>>>(out);
        want = cudaErrorIllegalAddress;
    } else {
        std::fprintf(stderr, "usage: test_watchdog spin_atomic|spin_sleep|spin_blocks|assert|"
                             "long_thread|write_past_end|read_without_size\n");
        return 2;
    }
    CHECK_ERR(cudaGetLastError(), want);
    CHECK_ERR(cudaDeviceSynchronize(), want); // sticky
    if (want != cudaSuccess)
        CHECK_ERR(cudaMemset(out, 0, 4), want);
    CHECK_CUDA(cudaDeviceReset());
    CHECK_CUDA(cudaMalloc(&out, 256 * sizeof(int)));
    fill<<<4, 64>>>(out);
    CHECK_CUDA(cudaGetLastError());
    int h[256];
    CHECK_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1 && h[255] == 1);
    CHECK_CUDA(cudaFree(out));
    if (sim_test_failures)
        return sim_test_result("watchdog");
    std::printf("watchdog checks passed\n");
    return 0;
}
