/* thrust/execution_policy.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <thrust/execution_policy.h>: Thrust. See common/cudasim/README.md."
