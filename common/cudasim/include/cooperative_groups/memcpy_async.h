/* cooperative_groups/memcpy_async.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cooperative_groups/memcpy_async.h>: cooperative_groups::memcpy_async; copy with loads and stores, or cp.async through device/mma.cuh. See common/cudasim/README.md."
