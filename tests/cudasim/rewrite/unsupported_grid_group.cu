// A cooperative-groups feature the simulator does not provide: a clear error at compile time.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void k(float *out) {
    cg::this_grid(); // @grid_group
    out[threadIdx.x] = 0.0f;
}
