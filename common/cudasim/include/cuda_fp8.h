/* cuda_fp8.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cuda_fp8.h>: fp8 types (__nv_fp8_e4m3, __nv_fp8_e5m2). See common/cudasim/README.md."
