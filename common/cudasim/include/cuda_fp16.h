/* cuda_fp16.h (cudasim) — __half and __half2 with the toolkit's API, for the simulator.
 * See cudasim/half_types.h (which also declares the bfloat16 types of cuda_bf16.h). */
#ifndef CUDASIM_CUDA_FP16_H
#define CUDASIM_CUDA_FP16_H
#include <cudasim/half_types.h>
#endif
