/* thrust/reduce.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/reduce.h>: Thrust; write the reduction kernel. See common/cudasim/README.md."
