/* cublas_v2.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cublas_v2.h>: cuBLAS; write the kernel or compute the reference on the host. See common/cudasim/README.md."
