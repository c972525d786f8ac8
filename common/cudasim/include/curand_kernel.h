/* curand_kernel.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <curand_kernel.h>: cuRAND device functions; generate random numbers on the host. See common/cudasim/README.md."
