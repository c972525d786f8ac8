// sim_test.h — check macros for the simulator's test programs: a failed check prints its
// location and expression; sim_test_result() turns the count into the exit status. And the
// programs' shared steps: sim_test_alloc, sim_test_upload and sim_test_download (device arrays),
// sim_test_free (cudaFree on each pointer), sim_test_run (a launch whose output array is copied
// back).
#ifndef CUDASIM_SIM_TEST_H
#define CUDASIM_SIM_TEST_H

#include <cstddef>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

static int sim_test_failures = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
            ++sim_test_failures;                                                                   \
        }                                                                                          \
    } while (0)

// Expects a runtime call to return `want`.
#define CHECK_ERR(expr, want)                                                                      \
    do {                                                                                           \
        cudaError_t got_ = (expr);                                                                 \
        if (got_ != (want)) {                                                                      \
            std::fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__,       \
                         #expr, cudaGetErrorName(got_), cudaGetErrorName(want));                   \
            ++sim_test_failures;                                                                   \
        }                                                                                          \
    } while (0)
#define CHECK_CUDA(expr) CHECK_ERR(expr, cudaSuccess)

// cudaFree on each of the device pointers, checked.
template <typename... P> static inline void sim_test_free(P *...ptrs) {
    for (void *p : {static_cast<void *>(ptrs)...})
        CHECK_CUDA(cudaFree(p));
}

// A device array of n T's (uninitialised), or a device copy of the host vector h.
template <typename T> static inline T *sim_test_alloc(size_t n) {
    T *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, n * sizeof(T)));
    return d;
}
template <typename T> static inline T *sim_test_upload(const std::vector<T> &h) {
    T *d = sim_test_alloc<T>(h.size());
    CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
// The n T's of the device array d, copied to the host.
template <typename T> static inline std::vector<T> sim_test_download(const T *d, size_t n) {
    std::vector<T> h(n);
    CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// launch(d) on a device array the size of h, whose contents are then copied into h (each step
// checked).
template <typename T, size_t N, typename Launch>
static inline void sim_test_run(T (&h)[N], Launch launch) {
    T *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, sizeof h));
    launch(d);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    sim_test_free(d);
}

// True, after saying so, when this build finds no device: the test then exits 77 (skipped). On
// the simulator there is always one.
static inline bool sim_test_no_gpu(const char *name) {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
        return false;
    std::printf("%s: no GPU, skipped\n", name);
    return true;
}

// Prints the verdict and returns the exit status.
static inline int sim_test_result(const char *name) {
    if (sim_test_failures) {
        std::fprintf(stderr, "%s: %d check(s) failed\n", name, sim_test_failures);
        return 1;
    }
    std::printf("%s: all checks passed\n", name);
    return 0;
}

#endif // CUDASIM_SIM_TEST_H
