// test_indexing.cu — built-in variables in 1D, 2D and 3D blocks and grids: every simulated
// thread runs once and sees its own threadIdx/blockIdx and the launch's blockDim/gridDim.
#include <vector>

#include "sim_test.h"

struct seen {
    uint3 tid, bid;
    dim3 bdim, gdim;
    int warp_size;
    int runs;
};

__global__ void record(seen *out) {
    unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    seen &s = out[bx * (blockDim.x * blockDim.y * blockDim.z) + tx];
    s.tid = threadIdx;
    s.bid = blockIdx;
    s.bdim = blockDim;
    s.gdim = gridDim;
    s.warp_size = warpSize;
    s.runs += 1;
}

static void check_launch(dim3 grid, dim3 block) {
    size_t nb = size_t(grid.x) * grid.y * grid.z, nt = size_t(block.x) * block.y * block.z;
    std::vector<seen> h(nb * nt);
    seen *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, h.size() * sizeof(seen)));
    CHECK_CUDA(cudaMemset(d, 0, h.size() * sizeof(seen)));
    record<<<grid, block>>>(d);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(h.data(), d, h.size() * sizeof(seen), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(d));
    int bad = 0;
    for (size_t b = 0; b < nb; ++b)
        for (size_t t = 0; t < nt; ++t) {
            const seen &s = h[b * nt + t];
            unsigned tx = unsigned(t % block.x), ty = unsigned(t / block.x % block.y),
                     tz = unsigned(t / (block.x * block.y));
            unsigned bx = unsigned(b % grid.x), by = unsigned(b / grid.x % grid.y),
                     bz = unsigned(b / (size_t(grid.x) * grid.y));
            bad += s.runs != 1 || s.tid.x != tx || s.tid.y != ty || s.tid.z != tz ||
                   s.bid.x != bx || s.bid.y != by || s.bid.z != bz || s.bdim.x != block.x ||
                   s.bdim.y != block.y || s.bdim.z != block.z || s.gdim.x != grid.x ||
                   s.gdim.y != grid.y || s.gdim.z != grid.z || s.warp_size != 32;
        }
    if (bad)
        std::fprintf(stderr, "grid (%u,%u,%u) block (%u,%u,%u): %d threads saw wrong values\n",
                     grid.x, grid.y, grid.z, block.x, block.y, block.z, bad);
    CHECK(bad == 0);
}

int main() {
    check_launch(dim3(5), dim3(37));
    check_launch(dim3(3, 2), dim3(8, 4));
    check_launch(dim3(2, 3, 2), dim3(4, 2, 3));
    check_launch(dim3(1, 300), dim3(2, 1, 64));
    check_launch(dim3(1), dim3(1024));
    check_launch(dim3(7, 1, 5), dim3(1, 1, 1));
    return sim_test_result("indexing");
}
