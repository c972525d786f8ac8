/* device.c — device discovery, memory and error reporting. Compiled once per backend: against
 * the CUDA runtime (ATTN_BACKEND_GPU) or the CPU simulator's runtime (ATTN_BACKEND_SIM), whose
 * API is the same; only the backend name and the no-device message differ. */
#include "attn/device.h"
#include "attn/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ATTN_BACKEND_SIM
#include <cudasim.h>
static const bool simulated = true;
#else
static const bool simulated = false;
#endif

const char *attn_backend_name(void) { return simulated ? "sim" : "gpu"; }
bool attn_on_simulator(void) { return simulated; }

/* A failed call leaves its error as the "last error"; clear it so that the next
 * cudaGetLastError() after a kernel launch does not blame the kernel. */
static void clear_last_error(void) { (void)cudaGetLastError(); }

static void fill_info(attn_device_info *info, const struct cudaDeviceProp *prop) {
    info->simulated = simulated;
    snprintf(info->name, sizeof info->name, "%s", prop->name);
    info->cc_major = prop->major;
    info->cc_minor = prop->minor;
    info->sm_count = prop->multiProcessorCount;
    info->global_mem = prop->totalGlobalMem;
    info->l2_bytes = (size_t)prop->l2CacheSize;
    info->smem_per_block_optin = prop->sharedMemPerBlockOptin;
    if (cudaRuntimeGetVersion(&info->runtime_version) != cudaSuccess) {
        info->runtime_version = 0;
        clear_last_error();
    }
}

int attn_device_init(attn_device_info *info, char *why, size_t why_len) {
    memset(info, 0, sizeof *info);
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        const char *what =
            simulated ? "the CPU simulator offers no device" : "no CUDA GPU available";
        const char *hint = simulated ? "" : "; use the simulator build (build/sim)";
        if (err != cudaSuccess)
            snprintf(why, why_len, "%s: cudaGetDeviceCount failed with %s (%s)%s", what,
                     cudaGetErrorName(err), cudaGetErrorString(err), hint);
        else
            snprintf(why, why_len, "%s: cudaGetDeviceCount found 0 devices%s", what, hint);
        clear_last_error();
        return simulated ? 1 : ATTN_EXIT_NO_GPU;
    }
    struct cudaDeviceProp prop; /* "struct": the toolkit declares no typedef in C */
    memset(&prop, 0, sizeof prop);
    if ((err = cudaSetDevice(0)) != cudaSuccess ||
        (err = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
        snprintf(why, why_len, "cannot use device 0: %s (%s)", cudaGetErrorName(err),
                 cudaGetErrorString(err));
        clear_last_error();
        return 1;
    }
    fill_info(info, &prop);
    return 0;
}

int attn_device_init_reported(attn_device_info *info) {
    char why[512];
    int rc = attn_device_init(info, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "%s%s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP: " : "error: ", why);
    return rc;
}

int attn_cuda_report(cudaError_t err, const char *expr, const char *file, int line) {
    if (err == cudaSuccess)
        return 0;
    fprintf(stderr, "%s:%d: CUDA error %s: %s in %s\n", file, line, cudaGetErrorName(err),
            cudaGetErrorString(err), expr);
    return 1;
}

void *attn_device_alloc(size_t bytes) {
    void *ptr = NULL;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err != cudaSuccess) {
        fprintf(stderr, "error: cudaMalloc of %zu bytes (%.1f MiB) failed: %s (%s)\n", bytes,
                (double)bytes / (1 << 20), cudaGetErrorName(err), cudaGetErrorString(err));
        clear_last_error();
        return NULL;
    }
    return ptr;
}

void attn_device_free(void *p) {
    if (p == NULL)
        return;
    cudaError_t err = cudaFree(p);
    /* After a fault in a kernel, every later call returns that sticky error: the launch has
     * reported it already, so the clean-up does not repeat it once per buffer. */
    if (err != cudaErrorLaunchFailure && err != cudaErrorIllegalAddress)
        attn_cuda_report(err, "cudaFree(p)", __FILE__, __LINE__);
}

void attn_free_buffers(void *const *host, int num_host, void *const *dev, int num_dev) {
    for (int n = 0; n < num_host; ++n)
        free(host[n]);
    for (int n = 0; n < num_dev; ++n)
        attn_device_free(dev[n]);
}

int attn_to_device(void *dst, const void *src, size_t bytes) {
    ATTN_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

int attn_to_host(void *dst, const void *src, size_t bytes) {
    ATTN_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

int attn_device_fill_nan(void *dst, size_t bytes) {
    ATTN_CUDA_TRY(cudaMemset(dst, 0xFF, bytes));
    return 0;
}

int attn_device_fill_nan_output(const attn_problem *p, void *o, float *lse) {
    return attn_device_fill_nan(o, attn_problem_q_elems(p) * attn_dtype_size(p->dtype)) ||
           attn_device_fill_nan(lse, attn_problem_lse_elems(p) * sizeof(float));
}

size_t attn_device_mem_used(void) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
        clear_last_error();
        return 0;
    }
    return total_bytes - free_bytes;
}

void attn_device_label_launches(const char *example, const char *kernel) {
#ifdef ATTN_BACKEND_SIM
    char label[256];
    snprintf(label, sizeof label, "%s:%s", example, kernel);
    cudasim_set_launch_label(label);
#else
    (void)example, (void)kernel;
#endif
}

int attn_device_upload_bytes(void **dst, const void *src, size_t bytes) {
    *dst = attn_device_alloc(bytes ? bytes : 16);
    if (*dst == NULL)
        return 1;
    return bytes > 0 ? attn_to_device(*dst, src, bytes) : 0;
}

int attn_device_upload_seqlens(const attn_problem *p, int **cu_q, int **cu_k) {
    void *q = NULL, *k = NULL;
    const size_t bytes = ((size_t)p->B + 1) * sizeof(int);
    int err = attn_problem_is_varlen(p) && (attn_device_upload_bytes(&q, p->cu_seqlens_q, bytes) ||
                                            attn_device_upload_bytes(&k, p->cu_seqlens_k, bytes));
    *cu_q = q, *cu_k = k;
    return err;
}

int attn_device_write(void *dst, const float *src, size_t count, attn_dtype t, void *staging) {
    attn_pack(staging, src, count, t);
    return attn_to_device(dst, staging, count * attn_dtype_size(t));
}

int attn_device_read(float *dst, const void *src, size_t count, attn_dtype t, void *staging) {
    if (attn_to_host(staging, src, count * attn_dtype_size(t)))
        return 1;
    attn_unpack(dst, staging, count, t);
    return 0;
}

/* The staging scratch of attn_device_put/get: count elements of t, or 1 after reporting. */
static int grow_staging(void **staging, size_t *cap, size_t count, attn_dtype t) {
    if (attn_host_grow(staging, cap, count * attn_dtype_size(t)) == 0)
        return 0;
    fprintf(stderr, "error: out of host memory for %zu bytes of staging\n",
            count * attn_dtype_size(t));
    return 1;
}

int attn_device_put(void *dst, const float *src, size_t count, attn_dtype t, void **staging,
                    size_t *cap) {
    return grow_staging(staging, cap, count, t) || attn_device_write(dst, src, count, t, *staging);
}

int attn_device_get(float *dst, const void *src, size_t count, attn_dtype t, void **staging,
                    size_t *cap) {
    return grow_staging(staging, cap, count, t) || attn_device_read(dst, src, count, t, *staging);
}

int attn_device_upload(void **dst, const float *src, size_t count, attn_dtype t, void *staging) {
    const size_t bytes = count * attn_dtype_size(t);
    *dst = attn_device_alloc(bytes ? bytes : 16);
    if (*dst == NULL)
        return 1;
    return attn_device_write(*dst, src, count, t, staging);
}

int attn_device_grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap && *buf != NULL)
        return 0;
    attn_device_free(*buf);
    *buf = attn_device_alloc(need > 16 ? need : 16);
    *cap = *buf != NULL ? need : 0;
    return *buf == NULL;
}

int attn_device_sync(char *why, size_t why_len) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess)
        snprintf(why, why_len, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return e != cudaSuccess;
}

/* ---- attn_allocs ------------------------------------------------------------------------------
 */

static void *allocs_keep(attn_allocs *a, void *p, bool dev) {
    int *n = dev ? &a->n_dev : &a->n_host;
    if (p != NULL && *n == ATTN_ALLOCS_MAX) {
        fprintf(stderr, "error: more than %d %s buffers in one attn_allocs\n", ATTN_ALLOCS_MAX,
                dev ? "device" : "host");
        dev ? attn_device_free(p) : free(p);
        p = NULL;
    }
    if (p == NULL) {
        a->failed = true;
        return NULL;
    }
    (dev ? a->dev : a->host)[(*n)++] = p;
    return p;
}

void *attn_allocs_host(attn_allocs *a, size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        fprintf(stderr, "error: out of host memory (%zu x %zu bytes)\n", n, size);
    return allocs_keep(a, p, false);
}

void *attn_allocs_device(attn_allocs *a, size_t bytes) {
    return allocs_keep(a, attn_device_alloc(bytes > 16 ? bytes : 16), true);
}

void *attn_allocs_upload(attn_allocs *a, const void *src, size_t bytes) {
    void *p = NULL;
    if (attn_device_upload_bytes(&p, src, bytes) != 0 && p != NULL) {
        attn_device_free(p);
        p = NULL;
    }
    return allocs_keep(a, p, true);
}

void *attn_allocs_upload_as(attn_allocs *a, const float *src, size_t count, attn_dtype t,
                            void *staging) {
    void *p = NULL;
    if (attn_device_upload(&p, src, count, t, staging) != 0 && p != NULL) {
        attn_device_free(p);
        p = NULL;
    }
    return allocs_keep(a, p, true);
}

void attn_allocs_free(attn_allocs *a) {
    attn_free_buffers(a->host, a->n_host, a->dev, a->n_dev);
    a->n_host = a->n_dev = 0;
}
