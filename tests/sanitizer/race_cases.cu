// race_cases.cu — planted races on global memory (and an atomic against a plain store in shared
// memory) for racecheck of the sim-check build, and correct kernels it must leave alone.
// `race_cases <case>` runs one kernel; a planted race must fail its launch
// (cudaErrorLaunchFailure) with a report naming the two lines marked "// @<case>" and
// "// @<case>_other" (CMakeLists.txt matches them), in every thread order and with one or more
// OS threads running blocks. `race_cases clean` runs the correct kernels: no report.
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cudasim.h>

constexpr int n = 64;

// Many threads of one block add to one address with a plain read-modify-write.
__global__ void block_sum_race(const float *in, float *out) {
    out[0] += in[threadIdx.x]; // @block_sum_race
}

// One thread of each block adds to one address: a race between blocks only.
__global__ void grid_sum_race(const float *in, float *out) {
    if (threadIdx.x == 0)
        out[0] += in[blockIdx.x]; // @grid_sum_race
}

// Block 1 reads what block 0 writes: no order between blocks within a launch.
__global__ void cross_block_read(float *buf, float *out) {
    unsigned t = threadIdx.x;
    if (blockIdx.x == 0)
        buf[t] = static_cast<float>(t); // @cross_block_read
    else
        atomicAdd(out, buf[t]); // @cross_block_read_other
}

// The fused backward's mistake: one block per key tile, each thread one key; every thread adds
// its key's share of dQ to every query row with a plain +=, as the atomicAdd of a correct
// backward would. Threads of a block and blocks of the launch lose each other's updates on a GPU.
__global__ void fused_dq_race(const float *ds, const float *k, float *dq, int lq, int d) {
    int j = blockIdx.x * blockDim.x + threadIdx.x; // this thread's key
    for (int i = 0; i < lq; ++i)
        for (int c = 0; c < d; ++c)
            dq[i * d + c] += ds[i * n + j] * k[j * d + c]; // @fused_dq_race
}

// Shared memory: thread 0 zeroes a counter while the other lanes already add to it atomically.
__global__ void shared_atomic_store(int *out) {
    __shared__ int count;
    if (threadIdx.x == 0)
        count = 0;        // @shared_atomic_store
    atomicAdd(&count, 1); // @shared_atomic_store_other
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = count;
}

// ---- correct kernels: none of these is a race -------------------------------------------------

// Atomics from every thread of every block to one address (float, int, __half2).
__global__ void atomics_only(float *sum, int *count, __half2 *h) {
    atomicAdd(sum, 1.0f);
    atomicAdd(count, 1);
    atomicAdd(h, __floats2half2_rn(1.0f, 1.0f));
}

// A thread writes its own element several times and reads it back; inputs read by every block.
__global__ void same_thread(const float *in, float *out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[threadIdx.x];
    out[i] += in[0];
    out[i] = out[i] * 2.0f;
}

// Within a block, a write and another thread's read of it with a barrier between them; within a
// warp, with __syncwarp(); then the write-after-read the barrier orders too.
__global__ void barrier_ordered(float *scratch, float *out) {
    unsigned t = threadIdx.x, b = blockIdx.x * blockDim.x;
    scratch[b + t] = static_cast<float>(t);
    __syncthreads();
    float v = scratch[b + (blockDim.x - 1 - t)];
    __syncthreads();
    scratch[b + t] = v;
    __syncwarp();
    out[b + t] = scratch[b + (t ^ 1)];
}

// Neighbouring __half elements (two bytes of one word) written by different blocks.
__global__ void adjacent_halves(__half *out) {
    if (threadIdx.x == 0)
        out[blockIdx.x] = __float2half(static_cast<float>(blockIdx.x));
}

// Shared memory: the counter is zeroed before a barrier, then added to atomically.
__global__ void shared_atomic_ordered(int *out) {
    __shared__ int count;
    if (threadIdx.x == 0)
        count = 0;
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = count;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: race_cases <case>\n");
        return 2;
    }
    std::string c = argv[1];
    std::vector<float> h(n * n);
    for (size_t i = 0; i < h.size(); ++i)
        h[i] = static_cast<float>(i % 5) - 2.0f;
    float *in = nullptr, *out = nullptr, *buf = nullptr;
    cudaMalloc(&in, h.size() * sizeof(float));
    cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMalloc(&out, n * n * sizeof(float));
    cudaMemset(out, 0, n * n * sizeof(float));
    cudaMalloc(&buf, n * n * sizeof(float));
    cudaMemset(buf, 0, n * n * sizeof(float));
    int *count = nullptr;
    cudaMalloc(&count, n * sizeof(int));
    cudaMemset(count, 0, n * sizeof(int));
    __half2 *hsum = nullptr;
    cudaMalloc(&hsum, sizeof(__half2));
    cudaMemset(hsum, 0, sizeof(__half2));
    __half *halves = nullptr;
    cudaMalloc(&halves, n * sizeof(__half));

    if (c == "block_sum_race") {
        block_sum_race<<<1, n>>>(in, out);
    } else if (c == "grid_sum_race") {
        grid_sum_race<<<8, 32>>>(in, out);
    } else if (c == "cross_block_read") {
        cross_block_read<<<2, 32>>>(buf, out);
    } else if (c == "fused_dq_race") {
        fused_dq_race<<<2, 32>>>(in, in, out, 4, 8);
    } else if (c == "shared_atomic_store") {
        shared_atomic_store<<<1, 32>>>(count);
    } else if (c == "clean") {
        const char *names[] = {"atomics_only", "same_thread", "barrier_ordered", "adjacent_halves",
                               "shared_atomic_ordered"};
        for (int k = 0; k < 5; ++k) {
            if (k == 0)
                atomics_only<<<8, n>>>(out, count, hsum);
            else if (k == 1)
                same_thread<<<8, n>>>(in, out);
            else if (k == 2)
                barrier_ordered<<<8, n>>>(buf, out);
            else if (k == 3)
                adjacent_halves<<<n, 32>>>(halves);
            else
                shared_atomic_ordered<<<8, n>>>(count);
            cudaError_t e = cudaDeviceSynchronize();
            if (e != cudaSuccess) {
                std::printf("%s: launch returned %s\n", names[k], cudaGetErrorName(e));
                return 1;
            }
        }
        int cnt[8] = {0};
        cudaMemcpy(cnt, count, sizeof cnt, cudaMemcpyDeviceToHost);
        std::printf("correct kernels: no report (counts %d %d)\n", cnt[0], cnt[7]);
        return cnt[0] == n && cnt[7] == n ? 0 : 1;
    } else {
        std::fprintf(stderr, "race_cases: unknown case '%s'\n", c.c_str());
        return 2;
    }
    cudaError_t e = cudaDeviceSynchronize();
    std::printf("launch returned %s\n", cudaGetErrorName(e));
    return e == cudaErrorLaunchFailure ? 0 : 1;
}
