/* cub/cub.cuh (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cub/cub.cuh>: CUB (block/warp/device primitives); write the reduction or scan with shuffles and shared memory. See common/cudasim/README.md."
