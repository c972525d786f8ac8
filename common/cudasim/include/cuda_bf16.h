/* cuda_bf16.h (cudasim) — __nv_bfloat16 and __nv_bfloat162 with the toolkit's API, for the
 * simulator. See cudasim/half_types.h. */
#ifndef CUDASIM_CUDA_BF16_H
#define CUDASIM_CUDA_BF16_H
#include <cudasim/half_types.h>
#endif
