/* thrust/device_vector.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/device_vector.h>: Thrust; use cudaMalloc/cudaMemcpy and a kernel. See common/cudasim/README.md."
