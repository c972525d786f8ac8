/* flash_backward.h — exercise 03's interface: what your flash_backward.cu exports, and how its
 * kernel receives the backward's tensors.
 * DO NOT EDIT: the public tests and the grader are compiled against this header.
 *
 * Your flash_backward.cu defines flash_backward_example, the registry entry of the backward
 * (one kernel, id 1). Everything else in your file stays `static`.
 *
 * The launcher gets Q, K, V in attn_buffers.q, .k, .v ([B, H, L, D] row-major, fp32) and every
 * other tensor, as device pointers, in the array attn_buffers.args, in this order:
 */
#ifndef FLASH_BACKWARD_H
#define FLASH_BACKWARD_H

#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FB_O = 0,   /* [B,H,Lq,D]  the forward's output O                         (input)  */
    FB_DO = 1,  /* [B,H,Lq,D]  dO, the gradient of the loss with respect to O (input)  */
    FB_LSE = 2, /* [B,H,Lq]    the forward's log-sum-exp LSE (natural log)    (input)  */
    FB_DQ = 3,  /* [B,H,Lq,D]  dQ                                              (output) */
    FB_DK = 4,  /* [B,H,Lk,D]  dK                                              (output) */
    FB_DV = 5,  /* [B,H,Lk,D]  dV                                              (output) */
    FB_D = 6,   /* [B,H,Lq]    scratch: D_i = rowsum(dO_i * O_i)              (written) */
    FB_BUFFERS = 7
};

/* The tiles of the dK/dV kernel: a block owns FB_KEYS keys (one thread each) and walks the
 * query rows FB_ROWS at a time. */
#define FB_KEYS 32
#define FB_ROWS 16
/* Largest head dimension: a thread's dK and dV accumulators live in registers. */
#define FB_MAX_D 64

/* The backward (one kernel, id 1): fp32, any Lq and Lk, D <= FB_MAX_D, causal (bottom-right). */
extern const attn_example flash_backward_example;

#ifdef __cplusplus
}
#endif
#endif /* FLASH_BACKWARD_H */
