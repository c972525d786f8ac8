/* flash3_fp8.h — Example 10's version 4, FlashAttention-3's FP8 (e4m3) forward: the pre-pass that
 * quantises Q, K and V (flash3_fp8.cu, fa3_fp8_quantize), the attention kernel on the codes
 * (fa3_fp8_attention), the CPU side that checks them (flash3_fp8_reference.c) and the checks
 * (flash3_fp8_check.c) that the program (flash3_fp8_main.c) runs on what the kernels wrote.
 *
 * Layouts: Q, K, V and O dense [B, H, L, D] in the 16-bit dtype (f16 or bf16); the codes in the
 * same layout, one byte each (e4m3); one scale per block of rows of one head, a power of two:
 * Q in blocks of FA3_FP8_BM rows (a consumer warpgroup's rows), K and V in blocks of FA3_FP8_BN
 * keys (a K/V tile), [B * H][blocks] floats. Row r of block b of head bh is stored as
 * codes = e4m3(x / s) with s = the block's scale; with the Hadamard step Q's and K's rows are
 * first multiplied by H_D / sqrt(D) (H_D the Walsh-Hadamard matrix of order D: orthogonal, so
 * Q K^T is unchanged and V is left as it is).
 */
#ifndef FLASH3_FP8_H
#define FLASH3_FP8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "attn/problem.h"
#include "attn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FA3_FP8_BM 64  /* query rows per block (a scale of Q each) */
#define FA3_FP8_BN 128 /* keys per K/V tile (a scale of K and of V each) */

typedef struct fa3_fp8_args {
    int B, H, Lq, Lk, D; /* D = 64 or 128 */
    bool causal;         /* bottom-right aligned */
    float scale;         /* the softmax scale */
    attn_dtype dtype;    /* of Q, K, V and O: ATTN_F16 or ATTN_BF16 */
    bool hadamard;       /* rotate Q and K before quantising them */
    const void *q, *k, *v;
    uint8_t *q8, *k8, *v8;              /* the codes */
    float *q_scale, *k_scale, *v_scale; /* [B * H][blocks] */
    void *o;                            /* [B, H, Lq, D] dtype */
    float *lse;                         /* [B, H, Lq] natural log of the scaled scores */
} fa3_fp8_args;

/* Blocks per head: of Q (Lq / FA3_FP8_BM rounded up) and of K and V (Lk / FA3_FP8_BN). */
int fa3_fp8_q_blocks(int Lq);
int fa3_fp8_kv_blocks(int Lk);

/* The pre-pass (flash3_fp8.cu): one CUDA block per block of rows of one head of Q, K or V. */
void fa3_fp8_quantize(const fa3_fp8_args *a, cudaStream_t stream);
/* Version 4 (flash3_fp8.cu) on the codes and scales the pre-pass wrote: O and the LSE. */
void fa3_fp8_attention(const fa3_fp8_args *a, cudaStream_t stream);
/* Its launch shape for a (the resource report's and the launcher's). */
attn_launch_shape fa3_fp8_launch_shape(int D);

/* ---- the CPU side (flash3_fp8_reference.c), written from the definitions, sharing nothing
 * with the kernels ---------------------------------------------------------------------------- */

/* x (n rows of D) times H_D / sqrt(D) in double precision (the fast transform's butterflies on
 * exact sums, then one division), into out (may be x). */
void fa3_fp8_hadamard_ref(const double *x, int64_t rows, int D, double *out);
/* The scale of a block whose largest magnitude is amax: the smallest power of two s with
 * amax <= 448 s (1 for an all-zero block). */
double fa3_fp8_scale_ref(double amax);
/* The largest error rounding y (|y| <= 448) to the nearest e4m3 value can make: half the spacing
 * of e4m3 values where |y| lies (2^(e - 3) in [2^e, 2^(e+1)), the subnormals' 2^-9 below 2^-6). */
double fa3_fp8_half_spacing_ref(double y);

/* ---- the checks (flash3_fp8_check.c) --------------------------------------------------------- */

/* What the kernels wrote, read back: the codes and scales (fa3_fp8_args' layouts), O (fp32
 * values of the dtype) and the LSE. */
typedef struct fa3_fp8_result {
    const uint8_t *q8, *k8, *v8;
    const float *q_scale, *k_scale, *v_scale, *o, *lse;
} fa3_fp8_result;

/* The checks' errors: the largest against fp64 (unquantised inputs), its RMS and its ratio to the
 * bound; the same against the dequantised inputs; the largest score error; the LSE's; and the
 * number of values out of bounds of each. */
typedef struct fa3_fp8_errors {
    double max64, rms64, ratio64, maxdq, ratiodq, score_max, lse_max, ratio_lse;
    int64_t bad64, baddq, badlse;
} fa3_fp8_errors;

/* The four checks of got against the inputs in (the fp32 values the pre-pass read) on the first
 * `rows` query rows in memory order, one PASS/FAIL line each on stdout ("fa3_fp8 quantise",
 * "dequantised", "fp64", "lse"; the bounds: flash3_fp8_check.c). The number of failed checks, or
 * -1 after "error: out of host memory ..." on stderr. */
int fa3_fp8_check(const attn_problem *p, bool hadamard, int64_t rows, const attn_host_inputs *in,
                  const fa3_fp8_result *got, fa3_fp8_errors *e);

#ifdef __cplusplus
}
#endif
#endif /* FLASH3_FP8_H */
