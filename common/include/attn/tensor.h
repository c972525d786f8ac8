/* attn/tensor.h — host tensors: deterministic seeded fills, dtype conversion, NaN pre-fill.
 *
 * Host data is always kept as fp32 (the values the kernel sees, already rounded to the problem's
 * dtype) plus a packed copy in the problem's dtype for upload. The random generator is a
 * counter-based hash (SplitMix64), so the value at index n depends only on (seed, stream, n):
 * the C harness and the Python references produce identical inputs.
 */
#ifndef ATTN_TENSOR_H
#define ATTN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uniform float in [-1, 1) for element n of stream `stream` under `seed` (arithmetic mod 2^64):
 *   x = (seed ^ (stream * 0x9E3779B97F4A7C15)) + n * 0xBF58476D1CE4E5B9
 *   z = splitmix64_mix(x)       (SplitMix64's output function, spelled out in tensor.c)
 *   value = ((z >> 40) / 2^24) * 2 - 1      (exact in fp32)
 * Streams: 0 = Q, 1 = K, 2 = V. */
float attn_uniform(uint64_t seed, uint64_t stream, uint64_t n);

/* The value an fp32 number takes once stored in dtype t (round to nearest even; f32: itself). */
float attn_round_dtype(float f, attn_dtype t);

/* dst[n] = attn_round_dtype(amplitude * attn_uniform(seed, stream, n)) for n < count. */
void attn_fill_uniform(float *dst, size_t count, uint64_t seed, uint64_t stream, float amplitude,
                       attn_dtype t);

/* Converts fp32 values to the packed dtype (fp32 copy, fp16 or bf16 bits) and back. */
void attn_pack(void *dst, const float *src, size_t count, attn_dtype t);
void attn_unpack(float *dst, const void *src, size_t count, attn_dtype t);

/* malloc(bytes) (at least 1 byte, so that an empty tensor is not mistaken for a failure); on
 * failure prints "error: out of host memory for <what> (<bytes> bytes)" on stderr and returns
 * NULL. */
void *attn_host_alloc(size_t bytes, const char *what);
/* A host buffer *buf of *cap bytes grown to at least `bytes` (its contents not kept): 0, or 1 when
 * out of memory (then *buf is NULL and *cap 0). For staging buffers reused across calls. */
int attn_host_grow(void **buf, size_t *cap, size_t bytes);

/* Fills `bytes` of host memory with quiet-NaN bit patterns (0xFF bytes: NaN in fp32, fp16, bf16).
 */
void attn_fill_nan_host(void *dst, size_t bytes);

/* The signs of the seeded inputs (--inputs). UNIFORM: every value uniform in [-A, A). OPPOSED:
 * the same draws with Q and V made non-negative and K non-positive, so that every score q . k is
 * negative (or 0): a key that should be masked but leaks in with score 0 (a zero-filled tile row
 * past Lk, an empty selection slot) then outweighs every real key, and the output moves towards
 * that key's zero V: a masking bug becomes an error of the order of the output itself. */
typedef enum attn_inputs { ATTN_INPUTS_UNIFORM = 0, ATTN_INPUTS_OPPOSED = 1 } attn_inputs;

/* Sets the signs of q[0..nq), k[0..nk), v[0..nv) as kind says (nothing for UNIFORM). */
void attn_inputs_apply(attn_inputs kind, float *q, size_t nq, float *k, size_t nk, float *v,
                       size_t nv);

/* The inputs of one problem, on the host. */
typedef struct attn_host_inputs {
    float *q, *k, *v; /* fp32 values, already rounded to the problem's dtype */
    size_t q_elems, k_elems;
    /* 0, or what a module's inputs hook (attn/example.h) adds to the LSE check's atol when a kernel
     * derives its inputs itself (example 08's flex_rope rotates Q and K on load): its rounding of
     * those values to the dtype may differ by one unit from the reference's, which moves a score,
     * and so the LSE, by at most this much (the hook derives it). */
    double lse_allowance;
} attn_host_inputs;

/* Allocates and fills Q, K, V for p (streams 0, 1, 2), amplitude `amplitude` (1 = uniform in
 * [-1,1); larger values make large scores to exercise softmax stability). 0 on success. */
int attn_host_inputs_make(attn_host_inputs *in, const attn_problem *p, uint64_t seed,
                          float amplitude);
void attn_host_inputs_free(attn_host_inputs *in);

/* Writes a raw little-endian fp32 file with a one-line text header
 * "attn-tensor v1 f32 <dims...>\n" followed by the data. 0 on success. */
int attn_tensor_save(const char *path, const float *data, int ndim, const int64_t *dims);
/* One tensor of a --dump folder: dir/name.bin holding data (fp32) or, with data NULL, ints
 * (int32 values written as fp32, exact below 2^24); an entry with neither is skipped (a stage
 * that did not run). dims[0 .. ndim-1] its dimensions. */
typedef struct attn_dump_tensor {
    const char *name;
    const float *data;
    const int32_t *ints;
    int ndim;
    int64_t dims[4];
} attn_dump_tensor;
/* Writes the n tensors of t into dir in turn (attn_tensor_save). 0, or 1 after one line
 * "error: --dump: cannot write PATH" on stderr. */
int attn_dump_tensors(const char *dir, const attn_dump_tensor *t, int n);
/* Reads a file of attn_tensor_save: its dimensions into dims (at most max_dims of them; *ndim
 * gets their number) and its values into a new array (*data, malloc'ed: free it). 0, or -1 with
 * a one-line reason in why ("cannot open ...", "not an attn-tensor v1 f32 file", "... holds
 * fewer values than its header's dims"); nothing is allocated then. */
int attn_tensor_load(const char *path, float **data, int *ndim, int64_t *dims, int max_dims,
                     char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_TENSOR_H */
