/* cuda_runtime.h (cudasim) — what a .cu file sees in the simulator build: the runtime API and,
 * in C++, the kernel language (qualifiers, built-ins, barriers, warp intrinsics, atomics, math).
 *
 * cudasim_rewrite puts `#include <cuda_runtime.h>` at the top of every rewritten .cu, as nvcc
 * does implicitly. From C only the runtime API is available (as with the toolkit's header).
 */
#ifndef CUDASIM_CUDA_RUNTIME_H
#define CUDASIM_CUDA_RUNTIME_H

#include <cuda_runtime_api.h>
#include <vector_types.h>

#ifdef __cplusplus
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cudasim/device_functions.h>
#include <cudasim/kernel.h>
#endif

#endif /* CUDASIM_CUDA_RUNTIME_H */
