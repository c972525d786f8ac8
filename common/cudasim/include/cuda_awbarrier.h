/* cuda_awbarrier.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cuda_awbarrier.h>: arrive/wait barriers (mbarrier); use __syncthreads. See common/cudasim/README.md."
