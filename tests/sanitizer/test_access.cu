// test_access.cu — the instrumented access stream of the sim-check build: every global and shared
// load and store of a kernel reaches an observer with its address, size, operation, space,
// source line, block and thread, and every launch is framed by launch_begin/launch_end.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "access.h"
#include "sim_test.h"

using namespace cudasim::detail;

namespace {

struct recorder : access_observer {
    std::mutex m;
    std::vector<access_event> events;
    std::vector<launch_info> begins, ends;
    std::string kernel; // launch_info::kernel lives as long as the launch
    void launch_begin(const launch_info &li) override {
        begins.push_back(li);
        kernel = li.kernel;
    }
    void access(const access_event &e) override {
        std::lock_guard<std::mutex> lock(m);
        events.push_back(e);
    }
    void launch_end(const launch_info &li, bool) override { ends.push_back(li); }
};

int line_global_load, line_shared_store, line_dyn_store, line_dyn_load, line_global_store;

} // namespace

constexpr int n = 64;

__global__ void copy_through_shared(const float *in, double *out) {
    __shared__ float tile[n];
    extern __shared__ float dyn[];
    unsigned t = threadIdx.x, g = blockIdx.x * n + t;
    float v = in[g];
    line_global_load = __LINE__ - 1; // the line above
    tile[t] = v;
    line_shared_store = __LINE__ - 1; // the line above
    __syncthreads();
    dyn[t] = tile[n - 1 - t];
    line_dyn_store = __LINE__ - 1; // the line above
    __syncthreads();
    double r = dyn[n - 1 - t];
    line_dyn_load = __LINE__ - 1; // the line above
    out[g] = r;
    line_global_store = __LINE__ - 1; // the line above
}

// The one event of thread `thread` of block `block` with this operation and space at this line
// (the kernel's stores of line numbers go to the program's static data: not these).
static const access_event *find(const recorder &r, uint64_t block, uint32_t thread, access_op op,
                                mem_space space, int line) {
    const access_event *found = nullptr;
    std::string want = std::string(__FILE__) + ":" + std::to_string(line);
    for (const access_event &e : r.events)
        if (e.block == block && e.thread == thread && e.op == op && e.space == space &&
            e.object != mem_object::static_image && symbolize_pc(e.pc) == want) {
            if (found)
                return nullptr; // more than one: not what the kernel does
            found = &e;
        }
    return found;
}

int main() {
    CHECK(access_stream_available());
    if (!access_stream_available())
        return sim_test_result("access stream");
    recorder rec;
    add_access_observer(&rec);
    const int blocks = 3;
    float *in;
    double *out;
    CHECK_CUDA(cudaMalloc(&in, blocks * n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&out, blocks * n * sizeof(double)));
    std::vector<float> h(blocks * n);
    for (int i = 0; i < blocks * n; ++i)
        h[i] = static_cast<float>(i);
    CHECK_CUDA(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    copy_through_shared<<<blocks, n, n * sizeof(float)>>>(in, out);
    CHECK_CUDA(cudaDeviceSynchronize());
    remove_access_observer(&rec);
    std::vector<double> back(blocks * n);
    CHECK_CUDA(cudaMemcpy(back.data(), out, back.size() * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < blocks * n; ++i)
        CHECK(back[i] == h[i]);

    CHECK(rec.begins.size() == 1 && rec.ends.size() == 1);
    if (!rec.begins.empty()) {
        const launch_info &li = rec.begins[0];
        CHECK(rec.kernel == "'copy_through_shared'");
        CHECK(li.nblocks == blocks && li.nthreads == n && li.dyn_smem == n * sizeof(float));
    }
    uintptr_t tile_base = 0;
    for (uint64_t b = 0; b < blocks; ++b)
        for (uint32_t t = 0; t < n; ++t) {
            uintptr_t g = b * n + t;
            const access_event *e =
                find(rec, b, t, access_op::load, mem_space::global, line_global_load);
            CHECK(e && e->addr == reinterpret_cast<uintptr_t>(in + g) && e->size == 4 &&
                  e->object == mem_object::allocation &&
                  e->object_base == reinterpret_cast<uintptr_t>(in));
            e = find(rec, b, t, access_op::store, mem_space::shared, line_shared_store);
            CHECK(e && e->size == 4 && e->object == mem_object::static_shared);
            if (e && t == 0 && b == 0)
                tile_base = e->addr;
            CHECK(e && e->addr == tile_base + 4 * t);
            e = find(rec, b, t, access_op::load, mem_space::shared, line_dyn_store);
            CHECK(e && e->addr == tile_base + 4 * (n - 1 - t));
            e = find(rec, b, t, access_op::store, mem_space::shared, line_dyn_store);
            CHECK(e && e->size == 4 && e->object == mem_object::dynamic_shared &&
                  e->addr == e->object_base + 4 * t && e->object_size == n * sizeof(float));
            e = find(rec, b, t, access_op::load, mem_space::shared, line_dyn_load);
            CHECK(e && e->size == 4 && e->addr == e->object_base + 4 * (n - 1 - t));
            e = find(rec, b, t, access_op::store, mem_space::global, line_global_store);
            CHECK(e && e->addr == reinterpret_cast<uintptr_t>(out + g) && e->size == 8);
        }
    // Host code of the same source is instrumented too, but reaches no observer.
    for (const access_event &e : rec.events)
        CHECK(e.block < blocks && e.thread < n);
    std::printf("%zu accesses observed\n", rec.events.size());
    CHECK_CUDA(cudaFree(in));
    CHECK_CUDA(cudaFree(out));
    return sim_test_result("access stream");
}
