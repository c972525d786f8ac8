// check_cases.cu — planted bugs for the checkers of the sim-check build, one per case, and
// correct kernels that must run with no report. `check_cases <case>` runs one kernel; a planted
// bug must fail its launch (cudaErrorLaunchFailure) with a report naming the line marked
// "// @<case>" (CMakeLists.txt matches it), in every thread order.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cudasim.h>
#include <device/mma.cuh>

constexpr int n = 64;

// memcheck: the last thread reads one element past the end of the input.
__global__ void oob_global_read(const float *in, float *out) {
    unsigned t = threadIdx.x;
    out[t] = in[t + 1]; // @oob_global_read
}

// memcheck: the dynamic shared memory holds n floats; thread 0 writes the (n+1)-th.
__global__ void oob_shared_write(float *out) {
    extern __shared__ float buf[];
    unsigned t = threadIdx.x;
    buf[t == 0 ? n : t] = 1.0f; // @oob_shared_write
    __syncthreads();
    out[t] = buf[t];
}

// memcheck: two static shared arrays; thread 0 writes the (n+1)-th element of the first, which
// would land in the second: reported at the write, naming the array (its guard, kernel.h).
__global__ void oob_static_shared_write(float *out) {
    __shared__ float first[n];
    __shared__ float second[n];
    unsigned t = threadIdx.x;
    second[t] = 2.0f;
    first[t == 0 ? n : t] = 1.0f; // @oob_static_shared_write
    __syncthreads();
    out[t] = first[t] + second[t];
}

// memcheck: float4 elements read through a pointer 4 bytes past a 16-byte boundary.
__global__ void misaligned_load(const float *in, float *out) {
    const float4 *p = reinterpret_cast<const float4 *>(in + 1);
    out[threadIdx.x] = p[threadIdx.x].x + p[threadIdx.x].w; // @misaligned_load
}

// memcheck: the rows of an ldmatrix start 8 bytes into a 16-byte aligned tile.
__global__ void misaligned_ldmatrix(float *out) {
    __shared__ __align__(16) uint16_t tile[16 * 24 + 8];
    for (unsigned i = threadIdx.x; i < 16 * 24 + 8; i += 32)
        tile[i] = static_cast<uint16_t>(i);
    __syncwarp();
    uint32_t r[4];
    unsigned lane = threadIdx.x;
    ldmatrix_x4(r, tile + 4 + (lane % 16) * 24 + (lane / 16) * 8); // @misaligned_ldmatrix
    out[lane] = static_cast<float>(r[0] & 0xffff);
}

// racecheck: thread t reads what thread n-1-t wrote, with no barrier (threads of two warps).
__global__ void cross_warp_race(float *out) {
    __shared__ float s[n];
    unsigned t = threadIdx.x;
    s[t] = static_cast<float>(t); // @cross_warp_race
    out[t] = s[n - 1 - t];        // @cross_warp_race_read
}

// racecheck: lanes exchange values through shared memory without __syncwarp().
__global__ void intra_warp_race(float *out) {
    __shared__ float s[32];
    unsigned t = threadIdx.x;
    s[t] = static_cast<float>(t); // @intra_warp_race
    out[t] = s[t ^ 1];            // @intra_warp_race_read
}

// initcheck: half of a static shared array is written, all of it is read.
__global__ void uninit_shared(float *out) {
    __shared__ float s[32];
    unsigned t = threadIdx.x;
    if (t < 16)
        s[t] = static_cast<float>(t);
    __syncthreads();
    out[t] = s[31 - t]; // @uninit_shared
}

// initcheck: the input was allocated but never copied to.
__global__ void uninit_global(const float *in, float *out) {
    out[threadIdx.x] = in[threadIdx.x] * 2.0f; // @uninit_global
}

// cp.async: two tiles in two groups; waiting with N = 1 lands only the first, yet both are read.
__global__ void wrong_wait_group(const float *in, float *out) {
    __shared__ __align__(16) float a[4 * 32], b[4 * 32];
    unsigned t = threadIdx.x;
    cp_async_16(a + 4 * t, in + 4 * t, true);
    cp_async_commit();
    cp_async_16(b + 4 * t, in + 4 * (t + 32), true);
    cp_async_commit();
    cp_async_wait<1>(); // should be cp_async_wait<0>()
    __syncthreads();
    out[t] = a[4 * t] + b[4 * t]; // @wrong_wait_group
}

// Correct: a shared-memory tree reduction, cp.async with the right waits, ldmatrix, a warp
// exchange with __syncwarp: no report in any order.
__global__ void correct(const float *in, float *out) {
    __shared__ float s[n], w[32];
    __shared__ __align__(16) float tile[4 * n];
    __shared__ __align__(16) uint16_t m[16 * 24];
    unsigned t = threadIdx.x;
    cp_async_16(tile + 4 * t, in + 4 * t, true);
    cp_async_commit();
    cp_async_wait<0>();
    s[t] = tile[4 * t];
    __syncthreads();
    for (unsigned stride = n / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    for (unsigned i = t; i < 16 * 24; i += n)
        m[i] = static_cast<uint16_t>(i);
    __syncthreads();
    uint32_t r[4];
    unsigned lane = t % 32;
    ldmatrix_x4(r, m + (lane % 16) * 24 + (lane / 16) * 8);
    float x = static_cast<float>(r[0] & 0xffff);
    __syncwarp();
    if (t < 32) {
        w[t] = x;
        __syncwarp();
        x = w[t ^ 1];
    }
    out[blockIdx.x * n + t] = (t == 0 ? s[0] : 0.0f) + x;
}

// The barrier record (CUDASIM_BARRIER_RECORD): two tiles of a loop, two warps. Each thread
// writes its element of the tile and reads another warp's after the first barrier (a read after
// write ordered by it alone: shown), then the next tile overwrites what the other warp read
// (ordered by the end-of-tile barrier alone: shown). A cp.async lands at its thread's wait: the
// barrier after the issue and before the wait orders nothing (reached only); the one after the
// wait orders the landing before another thread's read (shown). The last barrier guards no
// shared memory at all (reached only).
__global__ void barrier_record(const float *in, float *out) {
    __shared__ float s[n];
    __shared__ __align__(16) float tile[4 * n];
    unsigned t = threadIdx.x;
    float acc = 0.0f;
    for (int j = 0; j < 2; ++j) {
        s[t] = in[j * n + t];
        __syncthreads(); // @record_raw
        acc += s[(t + 32) % n];
        __syncthreads(); // @record_war
    }
    cp_async_16(tile + 4 * t, in + 4 * t, true);
    cp_async_commit();
    __syncthreads(); // @record_issue_only
    cp_async_wait<0>();
    __syncthreads(); // @record_landed
    acc += tile[4 * ((t + 32) % n)];
    __syncthreads(); // @record_nothing
    out[t] = acc;
}

static float *device_copy(const std::vector<float> &h) {
    float *d = nullptr;
    cudaMalloc(&d, h.size() * sizeof(float));
    cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: check_cases <case>\n");
        return 2;
    }
    std::string c = argv[1];
    std::vector<float> h(8 * n);
    for (size_t i = 0; i < h.size(); ++i)
        h[i] = static_cast<float>(i % 7);
    float *in = device_copy(h), *out = nullptr, *small = nullptr, *raw = nullptr;
    cudaMalloc(&out, 8 * n * sizeof(float));
    small = device_copy(std::vector<float>(n, 1.0f));
    cudaMalloc(&raw, n * sizeof(float));
    if (c == "oob_global_read")
        oob_global_read<<<1, n>>>(small, out);
    else if (c == "oob_shared_write")
        oob_shared_write<<<1, n, n * sizeof(float)>>>(out);
    else if (c == "oob_static_shared_write")
        oob_static_shared_write<<<1, n>>>(out);
    else if (c == "misaligned_load")
        misaligned_load<<<1, 4>>>(in, out);
    else if (c == "misaligned_ldmatrix")
        misaligned_ldmatrix<<<1, 32>>>(out);
    else if (c == "cross_warp_race")
        cross_warp_race<<<1, n>>>(out);
    else if (c == "intra_warp_race")
        intra_warp_race<<<1, 32>>>(out);
    else if (c == "uninit_shared")
        uninit_shared<<<1, 32>>>(out);
    else if (c == "uninit_global")
        uninit_global<<<1, 32>>>(raw, out);
    else if (c == "wrong_wait_group")
        wrong_wait_group<<<1, 32>>>(in, out);
    else if (c == "correct")
        correct<<<2, n>>>(in, out);
    else if (c == "barrier_record")
        barrier_record<<<1, n>>>(in, out);
    else {
        std::fprintf(stderr, "check_cases: unknown case '%s'\n", c.c_str());
        return 2;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (c == "barrier_record") {
        std::printf("barrier_record: launch returned %s\n", cudaGetErrorName(e));
        return e == cudaSuccess ? 0 : 1;
    }
    if (c == "correct") {
        std::vector<float> back(n);
        cudaMemcpy(back.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
        float sum = 0;
        for (int i = 0; i < n; ++i)
            sum += h[4 * i];
        // Lane 1's first ldmatrix element is m[2]; lane 0 takes it in the warp exchange.
        bool ok = e == cudaSuccess && back[0] == sum + 2.0f;
        std::printf("correct kernels: %s\n", ok ? "no report, right result" : "FAILED");
        return ok ? 0 : 1;
    }
    std::printf("%s: launch returned %s\n", c.c_str(), cudaGetErrorName(e));
    return e == cudaErrorLaunchFailure ? 0 : 1;
}
