/* cuda_runtime_api.h (cudasim) — the subset of the CUDA runtime API this chapter uses, implemented
 * on the CPU by the simulator. Valid C11 and C++17: the C harness includes it in sim builds
 * exactly where a GPU build includes the toolkit's header of the same name.
 *
 * Names, signatures and error codes follow the CUDA runtime, so the same host code compiles
 * against either. Streams are accepted and ignored (every launch runs to completion before the
 * launch call returns); events record wall-clock time.
 */
#ifndef CUDASIM_CUDA_RUNTIME_API_H
#define CUDASIM_CUDA_RUNTIME_API_H

#include <stddef.h>

#define CUDASIM 1
/* The CUDA version whose API subset this mirrors (cudaRuntimeGetVersion reports it). */
#define CUDART_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: the CUDA runtime's names, numeric values and messages (cudaGetErrorName,
 * cudaGetErrorString), one row each, in order of value but for the one whose message needs two
 * lines, last. */
#define CUDASIM_ERRORS(X)                                                                          \
    X(cudaSuccess, 0, "no error")                                                                  \
    X(cudaErrorInvalidValue, 1, "invalid argument")                                                \
    X(cudaErrorMemoryAllocation, 2, "out of memory")                                               \
    X(cudaErrorInitializationError, 3, "initialization error")                                     \
    X(cudaErrorInvalidConfiguration, 9, "invalid configuration argument")                          \
    X(cudaErrorInvalidPitchValue, 12, "invalid pitch argument")                                    \
    X(cudaErrorInvalidMemcpyDirection, 21, "invalid copy direction for memcpy")                    \
    X(cudaErrorInvalidDeviceFunction, 98, "invalid device function")                               \
    X(cudaErrorNoDevice, 100, "no CUDA-capable device is detected")                                \
    X(cudaErrorInvalidDevice, 101, "invalid device ordinal")                                       \
    X(cudaErrorInvalidResourceHandle, 400, "invalid resource handle")                              \
    X(cudaErrorNotReady, 600, "device not ready")                                                  \
    X(cudaErrorIllegalAddress, 700, "an illegal memory access was encountered")                    \
    X(cudaErrorLaunchOutOfResources, 701, "too many resources requested for launch")               \
    X(cudaErrorLaunchTimeout, 702, "the launch timed out and was terminated")                      \
    X(cudaErrorAssert, 710, "device-side assert triggered")                                        \
    X(cudaErrorLaunchFailure, 719, "unspecified launch failure")                                   \
    X(cudaErrorUnknown, 999, "unknown error")                                                      \
    X(cudaErrorInsufficientDriver, 35,                                                             \
      "CUDA driver version is insufficient for CUDA runtime version")
typedef enum cudaError {
#define CUDASIM_ERROR_CODE(name, value, message) name = value,
    CUDASIM_ERRORS(CUDASIM_ERROR_CODE)
#undef CUDASIM_ERROR_CODE
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
} cudaFuncAttribute;

typedef enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
} cudaDeviceAttr;

/* Flags of cudaStreamCreateWithFlags and cudaMallocManaged (accepted; see the README). */
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

/* The fields of the toolkit's cudaDeviceProp that this chapter reads (same names). */
typedef struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;      /* 48 KiB without opt-in */
    size_t sharedMemPerBlockOptin; /* the most a kernel may opt in to */
    size_t sharedMemPerMultiprocessor;
    int regsPerBlock;
    int warpSize;           /* 32 */
    int maxThreadsPerBlock; /* 1024 */
    int maxThreadsDim[3];   /* 1024, 1024, 64 */
    int maxGridSize[3];     /* 2^31-1, 65535, 65535 */
    int clockRate;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    int major;
    int minor;
    int memoryClockRate;
    int memoryBusWidth;
} cudaDeviceProp;

const char *cudaGetErrorName(cudaError_t err);
const char *cudaGetErrorString(cudaError_t err);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
/* Device memory (cudaMalloc, cudaMallocManaged, cudaMallocPitch) starts filled with 0xFF bytes:
 * NaN in fp32/fp16/bf16 and -1 in integers, so a read of memory never written shows. */
cudaError_t cudaMallocManaged(void **ptr, size_t bytes, unsigned int flags);
cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height);
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* Kernels are passed as their address. cudaFuncAttributeMaxDynamicSharedMemorySize opts a kernel
 * in to more than 48 KiB of dynamic shared memory, as on a GPU. */
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value);

/* Resident blocks of `func` per SM of the virtual device (2048 threads, 32 blocks and 228 KiB of
 * shared memory per SM, 1 KiB of it reserved per block). Registers and static __shared__ are not
 * counted: the simulator does not know them. */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func,
                                                          int block_size, size_t dynamic_smem);

#ifdef __cplusplus
}
#endif
#endif /* CUDASIM_CUDA_RUNTIME_API_H */
