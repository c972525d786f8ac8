/* cuda_pipeline.h (cudasim) — not simulated: a clear error instead of the toolkit's header. */
#error "cudasim does not support <cuda_pipeline.h>: the pipeline primitives (__pipeline_memcpy_async); use cp.async through device/mma.cuh. See common/cudasim/README.md."
