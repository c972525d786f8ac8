/* attn/device.h — the device side of the harness: backend detection, memory, timing.
 *
 * Compiled once per backend: against the CUDA runtime (gpu) or the CPU simulator's runtime (sim).
 * Callers see the same API either way.
 */
#ifndef ATTN_DEVICE_H
#define ATTN_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a program that needs a GPU and finds none (CTest: SKIP_RETURN_CODE 77). */
#define ATTN_EXIT_NO_GPU 77
/* Exit status for a usage error (bad flag, impossible shape). */
#define ATTN_EXIT_USAGE 2

typedef struct attn_device_info {
    bool simulated; /* true on the CPU simulator */
    char name[256]; /* device name */
    int cc_major, cc_minor;
    int sm_count;
    size_t global_mem;
    size_t l2_bytes;
    size_t smem_per_block_optin;
    int runtime_version; /* cudaRuntimeGetVersion */
} attn_device_info;

/* Which backend this binary was built for: "gpu" or "sim". */
const char *attn_backend_name(void);
/* true on a sim build (the CPU simulator), false on a gpu build. */
bool attn_on_simulator(void);

/* Finds the device. Returns 0 and fills info; on a gpu build without a usable GPU returns
 * ATTN_EXIT_NO_GPU and writes a one-line reason (e.g. the cudaGetDeviceCount error) to why. */
int attn_device_init(attn_device_info *info, char *why, size_t why_len);
/* attn_device_init for a program's main(): on failure prints the reason as one line on stderr
 * ("SKIP: ..." for no GPU, "error: ..." otherwise) and returns the exit status. */
int attn_device_init_reported(attn_device_info *info);

/* Prints "<file>:<line>: CUDA error <name>: <string> in <expr>" to stderr and returns 1 if err !=
 * 0. */
int attn_cuda_report(cudaError_t err, const char *expr, const char *file, int line);
/* Evaluates a runtime call; on error reports it and makes the enclosing function return 1. */
#define ATTN_CUDA_TRY(expr)                                                                        \
    do {                                                                                           \
        if (attn_cuda_report((expr), #expr, __FILE__, __LINE__))                                   \
            return 1;                                                                              \
    } while (0)

/* Device allocation that reports failures (with the size) and returns NULL. */
void *attn_device_alloc(size_t bytes);
void attn_device_free(void *p);
/* A module's release in one call: free() on each of the num_host host pointers and
 * attn_device_free on each of the num_dev device pointers (NULL entries are skipped by both). */
void attn_free_buffers(void *const *host, int num_host, void *const *dev, int num_dev);
/* Host <-> device copies; return 0 or 1 after reporting the error. */
int attn_to_device(void *dst, const void *src, size_t bytes);
int attn_to_host(void *dst, const void *src, size_t bytes);
/* A new device buffer holding count fp32 values stored as dtype t (attn_pack through staging, a
 * host scratch of at least count elements of t; at least 16 bytes are allocated). 0, or 1 after
 * reporting the error (*dst NULL or to be freed by the caller). */
int attn_device_upload(void **dst, const float *src, size_t count, attn_dtype t, void *staging);
/* The same into an existing device buffer dst (count elements of t). 0, or 1 after reporting. */
int attn_device_write(void *dst, const float *src, size_t count, attn_dtype t, void *staging);
/* The reverse of attn_device_write: count elements of t at src on the device into dst as fp32
 * (through staging, a host scratch of at least count elements of t). 0, or 1 after reporting. */
int attn_device_read(float *dst, const void *src, size_t count, attn_dtype t, void *staging);
/* attn_device_write and attn_device_read through a host scratch *staging of *cap bytes, grown
 * first to count elements of t (attn_host_grow): for a model library that copies its caller's
 * tensors of every size (example 09's decode_api.c, 12's v4_api.c). 0, or 1 (reported). */
int attn_device_put(void *dst, const float *src, size_t count, attn_dtype t, void **staging,
                    size_t *cap);
int attn_device_get(float *dst, const void *src, size_t count, attn_dtype t, void **staging,
                    size_t *cap);
/* A new device buffer holding a copy of `bytes` host bytes (at least 16 are allocated). 0, or 1
 * after reporting the error (*dst NULL, or to be freed by the caller). */
int attn_device_upload_bytes(void **dst, const void *src, size_t bytes);
/* A varlen problem's cu_seqlens_q and cu_seqlens_k (B + 1 offsets each) in new device buffers;
 * both NULL for a dense problem. 0, or 1 after reporting the error (the caller frees both). */
int attn_device_upload_seqlens(const attn_problem *p, int **cu_q, int **cu_k);
/* Fills device memory with 0xFF bytes (NaN in every float dtype) so unwritten outputs fail. */
int attn_device_fill_nan(void *dst, size_t bytes);
/* The same for an attention output: o (dtype of p, attn_problem_q_elems values) and its LSE
 * (attn_problem_lse_elems floats), as a stage's clear does before its kernel runs. */
int attn_device_fill_nan_output(const attn_problem *p, void *o, float *lse);

/* A device buffer *buf of *cap bytes grown to at least `need` (its contents not kept; at least 16
 * bytes): 0, or 1 after reporting (then *buf is NULL and *cap 0). attn_host_grow's twin, for the
 * buffers a model library (example 09's decode_api.c, 12's v4_api.c) reuses across calls. */
int attn_device_grow(void **buf, size_t *cap, size_t need);
/* The launches so far finished: the last launch's error, then the synchronisation's. 0, or 1 with
 * "<error name>: <error string>" in why (a library reports it to its caller, not on stderr). */
int attn_device_sync(char *why, size_t why_len);

/* ---- a program's buffers, released together --------------------------------------------------
 * A standalone check program (example 10's flash3_fp8), or a module's buffers of one kind
 * (example 09's FP8 cache), are allocated through one attn_allocs and freed with one call. An
 * allocation that fails is reported (one line on stderr) and returns NULL; failed then stays set,
 * so that a run of allocations is checked once. At most ATTN_ALLOCS_MAX of each kind (past it:
 * NULL, failed). */
#define ATTN_ALLOCS_MAX 64
typedef struct attn_allocs {
    void *host[ATTN_ALLOCS_MAX], *dev[ATTN_ALLOCS_MAX];
    int n_host, n_dev;
    bool failed;
} attn_allocs;
/* n zeroed host elements of size bytes (at least one byte). */
void *attn_allocs_host(attn_allocs *a, size_t n, size_t size);
/* A device buffer of `bytes` (at least 16), uninitialised. */
void *attn_allocs_device(attn_allocs *a, size_t bytes);
/* A device buffer holding a copy of `bytes` host bytes (attn_device_upload_bytes). */
void *attn_allocs_upload(attn_allocs *a, const void *src, size_t bytes);
/* A device buffer holding count fp32 values stored as dtype t (attn_device_upload). */
void *attn_allocs_upload_as(attn_allocs *a, const float *src, size_t count, attn_dtype t,
                            void *staging);
/* Frees every buffer of a (host and device) and empties it. */
void attn_allocs_free(attn_allocs *a);

/* Bytes of device memory currently in use (GPU: total - free; sim: the simulator's count). */
size_t attn_device_mem_used(void);

/* Names the launches that follow "<example>:<kernel>" (a registry's example and kernel version):
 * on the simulator, for the checked build's barrier record (cudasim_set_launch_label); nothing on
 * a GPU. */
void attn_device_label_launches(const char *example, const char *kernel);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_DEVICE_H */
