// test_runtime.cu — the runtime API of the virtual device: launch-configuration errors (the
// codes a GPU returns, not sticky), the shared-memory opt-in, memory bookkeeping and checks,
// events, streams, device properties, error names, cudaLaunchKernel and symbols.
#include <chrono>
#include <cstring>
#include <cudasim.h>
#include <thread>

#include "sim_test.h"

__global__ void add_one(int *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] += 1;
}

__global__ void dyn_probe(int *out) {
    extern __shared__ int s[];
    s[threadIdx.x] = 1;
    out[threadIdx.x] = s[threadIdx.x];
}

__constant__ float coefficients[4];
__device__ int device_counter;

__global__ void use_symbols(float *out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = coefficients[threadIdx.x % 4];
    if (threadIdx.x == 0)
        atomicAdd(&device_counter, 5);
}

static void launch_errors(int *d) {
    // Each bad configuration returns its error once; the next good launch works.
    struct bad_config {
        dim3 grid, block;
        cudaError_t want;
    } cases[] = {
        {dim3(1), dim3(1025), cudaErrorInvalidConfiguration},
        {dim3(1), dim3(32, 33), cudaErrorInvalidConfiguration},
        {dim3(1), dim3(1, 1, 65), cudaErrorInvalidConfiguration},
        {dim3(0), dim3(32), cudaErrorInvalidConfiguration},
        {dim3(1), dim3(0, 1), cudaErrorInvalidConfiguration},
        {dim3(1, 65536), dim3(32), cudaErrorInvalidConfiguration},
        {dim3(1, 1, 65536), dim3(32), cudaErrorInvalidConfiguration},
    };
    for (const bad_config &c : cases) {
        add_one<<<c.grid, c.block>>>(d, 1);
        CHECK_ERR(cudaPeekAtLastError(), c.want);
        CHECK_ERR(cudaGetLastError(), c.want);
        CHECK_CUDA(cudaGetLastError());
        CHECK(std::strstr(cudasim_last_error_message(), "add_one") != nullptr);
    }
    add_one<<<dim3(1, 65535), dim3(1)>>>(d, 0); // the largest legal y
    CHECK_CUDA(cudaGetLastError());
    add_one<<<1, dim3(2, 8, 64)>>>(d, 0); // the largest block, with the largest z
    CHECK_CUDA(cudaGetLastError());

    // Dynamic shared memory: 48 KiB without opt-in; the opt-in is capped at 227 KiB.
    dyn_probe<<<1, 32, 48 * 1024>>>(d);
    CHECK_CUDA(cudaGetLastError());
    dyn_probe<<<1, 32, 48 * 1024 + 1>>>(d);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_ERR(cudaFuncSetAttribute(dyn_probe, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   227 * 1024 + 1),
              cudaErrorInvalidValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue); // a failed call sets the last error
    CHECK_CUDA(
        cudaFuncSetAttribute(dyn_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    dyn_probe<<<1, 32, 227 * 1024>>>(d);
    CHECK_CUDA(cudaGetLastError());
    dyn_probe<<<1, 32, 227 * 1024 + 4>>>(d);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    // The opt-in belongs to that kernel only.
    add_one<<<1, 32, 64 * 1024>>>(d, 0);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
}

static void memory() {
    size_t free0 = 0, total = 0;
    CHECK_CUDA(cudaMemGetInfo(&free0, &total));
    CHECK(total > 0 && free0 <= total);
    char *p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, 1 << 20));
    size_t free1 = 0;
    CHECK_CUDA(cudaMemGetInfo(&free1, &total));
    CHECK(free0 - free1 == (1u << 20));
    // Copies and memsets must stay inside the allocation on the device side.
    char host[64] = {0};
    CHECK_ERR(cudaMemcpy(p + (1 << 20) - 32, host, 64, cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);
    CHECK_ERR(cudaMemcpy(host, p, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CHECK_ERR(cudaMemcpy(host, host + 8, 8, static_cast<cudaMemcpyKind>(7)),
              cudaErrorInvalidMemcpyDirection);
    CHECK_ERR(cudaMemset(p + 10, 0, 1 << 20), cudaErrorInvalidValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue); // the last failure, then cleared
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemset(p, 0x5a, 1 << 20));
    CHECK_CUDA(cudaMemcpy(host, p + 1000, 64, cudaMemcpyDeviceToHost));
    CHECK(host[0] == 0x5a && host[63] == 0x5a);
    char *q = nullptr;
    CHECK_CUDA(cudaMalloc(&q, 100));
    CHECK_CUDA(cudaMemcpyAsync(q, p, 100, cudaMemcpyDeviceToDevice, nullptr));
    CHECK_CUDA(cudaMemcpy(host, q, 64, cudaMemcpyDefault));
    CHECK(host[5] == 0x5a);
    CHECK_ERR(cudaFree(p + 1), cudaErrorInvalidValue);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(q));
    CHECK_CUDA(cudaFree(nullptr));
    CHECK_CUDA(cudaMemGetInfo(&free1, &total));
    CHECK(free1 == free0);
    void *huge = nullptr;
    CHECK_ERR(cudaMalloc(&huge, ~size_t(0) / 2), cudaErrorMemoryAllocation);
    CHECK(huge == nullptr);
    CHECK_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    float *pinned = nullptr;
    CHECK_CUDA(cudaMallocHost(&pinned, 16 * sizeof(float)));
    pinned[15] = 1.0f;
    CHECK_CUDA(cudaFreeHost(pinned));
}

static void device_and_events() {
    int count = 0, dev = -1, v = 0;
    CHECK_CUDA(cudaGetDeviceCount(&count));
    CHECK(count == 1);
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_ERR(cudaSetDevice(1), cudaErrorInvalidDevice);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK(dev == 0);
    cudaDeviceProp p;
    CHECK_CUDA(cudaGetDeviceProperties(&p, 0));
    CHECK(std::strstr(p.name, "cudasim") != nullptr);
    CHECK(p.warpSize == 32 && p.maxThreadsPerBlock == 1024 && p.maxThreadsDim[2] == 64);
    CHECK(p.sharedMemPerBlock == 48 * 1024 && p.sharedMemPerBlockOptin == 227 * 1024);
    CHECK(p.major == 9 && p.minor == 0 && p.multiProcessorCount == 132);
    CHECK(p.l2CacheSize == 50 * 1024 * 1024 && p.maxGridSize[1] == 65535);
    CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CHECK(v == 227 * 1024);
    CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    CHECK(v == 132);
    CHECK_CUDA(cudaRuntimeGetVersion(&v));
    CHECK(v == CUDART_VERSION);
    CHECK_CUDA(cudaDriverGetVersion(&v));

    cudaStream_t s = nullptr;
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK(s != nullptr);
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    float ms = -1.0f;
    CHECK_ERR(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);
    CHECK_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    CHECK_CUDA(cudaEventRecord(start, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_CUDA(cudaEventRecord(stop, s));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    CHECK(ms >= 19.0f && ms < 2000.0f);
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    CHECK_CUDA(cudaStreamDestroy(s));
    CHECK_CUDA(cudaDeviceSynchronize());

    CHECK(std::strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration),
                      "cudaErrorInvalidConfiguration") == 0);
    CHECK(std::strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
    CHECK(std::strcmp(cudaGetErrorString(cudaErrorLaunchFailure), "unspecified launch failure") ==
          0);
    CHECK(cudaErrorLaunchFailure == 719 && cudaErrorInvalidConfiguration == 9);
}

static void launch_forms(int *d) {
    // cudaLaunchKernel with a stream, and __constant__/__device__ symbols.
    const int n = 100;
    int h[n];
    for (int i = 0; i < n; ++i)
        h[i] = i;
    CHECK_CUDA(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    int count = n;
    void *args[] = {static_cast<void *>(&d), static_cast<void *>(&count)};
    CHECK_CUDA(cudaLaunchKernel(add_one, dim3(4), dim3(32), args, 0, nullptr));
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1 && h[99] == 100);
    float c[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    CHECK_CUDA(cudaMemcpyToSymbol(coefficients, c, sizeof c));
    int zero = 0;
    CHECK_CUDA(cudaMemcpyToSymbol(device_counter, &zero, sizeof zero));
    float *f = nullptr;
    CHECK_CUDA(cudaMalloc(&f, 24 * sizeof(float)));
    use_symbols<<<3, 8>>>(f);
    float hf[24];
    CHECK_CUDA(cudaMemcpy(hf, f, sizeof hf, cudaMemcpyDeviceToHost));
    CHECK(hf[1] == 2.0f && hf[7] == 4.0f && hf[23] == 4.0f);
    int counter = 0;
    CHECK_CUDA(cudaMemcpyFromSymbol(&counter, device_counter, sizeof counter));
    CHECK(counter == 15);
    CHECK_CUDA(cudaFree(f));
}

int main() {
    int *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, 1024 * sizeof(int)));
    launch_errors(d);
    memory();
    device_and_events();
    launch_forms(d);
    CHECK_CUDA(cudaFree(d));
    return sim_test_result("runtime");
}
