/* thrust/sort.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/sort.h>: Thrust; sort on the host or write the kernel. See common/cudasim/README.md."
