/* thrust/transform.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/transform.h>: Thrust; write the kernel. See common/cudasim/README.md."
