/* thrust/host_vector.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/host_vector.h>: Thrust; use std::vector on the host. See common/cudasim/README.md."
