/* cp_check.h — example 11's checks, on rank 0 (cp_check.c): the gathered result against the
 * harness's double-precision references (attn_reference, attn_reference_backward) and against
 * the same kernels on the whole problem on one device, and each rank's work against its
 * layout's count. Each prints its lines and returns true if every check passes. */
#ifndef CP_CHECK_H
#define CP_CHECK_H

#include <stdbool.h>

#include "attn/tensor.h"
#include "cp_dsa.h"
#include "cp_gather.h"
#include "cp_options.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The forward: O and LSE (g->f[0], g->f[1]) of P ranks. */
bool cp_report(const cp_options *o, int P, const attn_host_inputs *in, const cp_gathered *g);
/* The backward: dQ, dK, dV (g->f[0..2]) for the loss gradient dout. */
bool cp_report_backward(const cp_options *o, int P, const attn_host_inputs *in, const float *dout,
                        const cp_gathered *g);
/* DeepSeek sparse attention: O, LSE and the selection (g->f[0..2]), and the bytes received. */
bool cp_report_dsa(const cp_options *o, int P, const cp_dsa_inputs *in, const cp_gathered *g);

#ifdef __cplusplus
}
#endif
#endif /* CP_CHECK_H */
