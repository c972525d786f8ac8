// A toolkit library the simulator does not provide: a clear error, not the toolkit's header.
#include <cub/cub.cuh>

__global__ void k(float *out) { out[threadIdx.x] = 0.0f; }
