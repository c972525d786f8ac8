/* cub/block/block_reduce.cuh (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cub/block/block_reduce.cuh>: CUB (block/warp/device primitives); write the reduction with shuffles and shared memory. See common/cudasim/README.md."
