// test_profile.cu — the profile's counts (common/cudasim/src/profile.h) against counts computed
// by hand, on streams of accesses built here as an instrumented kernel would deliver them (any sim
// build), and one mma.m16n8k16 of a real kernel (the delivery of cudasim/ptx.h).
//
//   coalesced copy          32 lanes x 4 B, consecutive: 1 request, 128 B = 4 sectors each way
//   stride-32 floats        lane t at 128*t: 32 sectors per request
//   32-way bank conflict    lane t at shared word 32*t: every lane in bank 0, 32 wavefronts
//   broadcast               32 lanes, one word: 1 wavefront
//   transpose of a 32x32 float tile through shared memory, rows of 32 words (column reads: 32
//   wavefronts each) and padded rows of 33 (bank (t*33+c)%32 = (t+c)%32: 1 wavefront each)
//   ldmatrix                8 rows of 16 B per phase: rows 128 B apart all start in bank 0
//                           (8 wavefronts), rows XOR-swizzled by row (1 wavefront)
//   divergence              16 lanes of a warp: still 1 request
//   lanes in sequence       each lane's whole segment before the next lane's (the simulator's
//                           order): requests matched by occurrence, per warp and line
//   L2 model                an L2 of two sectors: reading sectors 0,1,2,0 misses four times
//   mma                     one warp-wide mma.m16n8k16: 4096 FLOPs
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "device/mma.cuh"
#include "profile.h"

#include "sim_test.h"

using namespace cudasim::detail;

namespace {

const char line_a = 0, line_b = 0; // two code addresses, one per "source line"

access_event ev(uintptr_t addr, uint32_t size, access_op op, mem_space space, const void *pc,
                uint32_t thread, uint64_t block = 0) {
    return access_event{addr, size, op, space, pc, block, thread};
}

launch_info launch(unsigned nthreads, uint64_t nblocks = 1) {
    static uint64_t id = 0;
    return launch_info{"synthetic", ++id, nblocks, nthreads, 0};
}

// Runs `feed` between launch_begin and launch_end of a fresh observer; the launch's profile.
template <class F> launch_profile run(unsigned nthreads, F feed, uint64_t l2 = 50ull << 20) {
    profile_observer o(l2);
    launch_info li = launch(nthreads);
    o.launch_begin(li);
    feed(o);
    o.launch_end(li, false);
    std::vector<launch_profile> v = o.take();
    CHECK(v.size() == 1);
    return v.empty() ? launch_profile() : v[0];
}

const uintptr_t gbase = 0x10000000, sbase = 0x7f0000000000;

void coalesced_copy() {
    launch_profile p = run(128, [](profile_observer &o) {
        for (uint32_t t = 0; t < 128; ++t) {
            o.access(ev(gbase + 4 * t, 4, access_op::load, mem_space::global, &line_a, t));
            o.access(
                ev(gbase + 0x100000 + 4 * t, 4, access_op::store, mem_space::global, &line_b, t));
        }
    });
    CHECK(p.total[global_load].requests == 4);
    CHECK(p.total[global_load].units == 16); // 4 sectors per 128-byte warp request
    CHECK(p.total[global_store].requests == 4);
    CHECK(p.total[global_store].units == 16);
    CHECK(p.dram_read == 512 && p.dram_written == 512 && p.footprint == 1024);
    CHECK(p.lines.size() == 1); // both code addresses symbolise to "?" without the stream
}

void strided() {
    launch_profile p = run(32, [](profile_observer &o) {
        for (uint32_t t = 0; t < 32; ++t)
            o.access(ev(gbase + 4 * 32 * t, 4, access_op::load, mem_space::global, &line_a, t));
    });
    CHECK(p.total[global_load].requests == 1);
    CHECK(p.total[global_load].units == 32);
    CHECK(p.total[global_load].bytes == 128);
    p = run(32, [](profile_observer &o) { // every lane reads the same float: one sector, 4 bytes
        for (uint32_t t = 0; t < 32; ++t)
            o.access(ev(gbase + 8, 4, access_op::load, mem_space::global, &line_a, t));
    });
    CHECK(p.total[global_load].units == 1 && p.total[global_load].bytes == 4);
}

void bank_conflict_and_broadcast() {
    launch_profile p = run(32, [](profile_observer &o) {
        for (uint32_t t = 0; t < 32; ++t)
            o.access(ev(sbase + 4 * 32 * t, 4, access_op::load, mem_space::shared, &line_a, t));
    });
    CHECK(p.total[shared_load].requests == 1);
    CHECK(p.total[shared_load].units == 32);
    CHECK(p.total[shared_load].units - p.total[shared_load].ideal == 31);
    CHECK(p.dram_read == 0 && p.footprint == 0); // shared memory never reaches the L2
    p = run(32, [](profile_observer &o) {
        for (uint32_t t = 0; t < 32; ++t)
            o.access(ev(sbase, 4, access_op::load, mem_space::shared, &line_a, t));
    });
    CHECK(p.total[shared_load].units == 1 && p.total[shared_load].ideal == 1);
}

// One warp transposes a 32x32 float tile: row c written by lane t at column t, then column c
// read by lane t at row t (as a transpose kernel's second half does).
launch_profile transpose(unsigned row_words) {
    return run(32, [row_words](profile_observer &o) {
        for (uint32_t c = 0; c < 32; ++c)
            for (uint32_t t = 0; t < 32; ++t)
                o.access(ev(sbase + 4 * (c * row_words + t), 4, access_op::store, mem_space::shared,
                            &line_a, t));
        for (uint32_t c = 0; c < 32; ++c)
            for (uint32_t t = 0; t < 32; ++t)
                o.access(ev(sbase + 4 * (t * row_words + c), 4, access_op::load, mem_space::shared,
                            &line_b, t));
    });
}

void transposes() {
    launch_profile plain = transpose(32), padded = transpose(33);
    CHECK(plain.total[shared_store].requests == 32 && plain.total[shared_store].units == 32);
    CHECK(plain.total[shared_load].requests == 32);
    CHECK(plain.total[shared_load].units == 32 * 32); // 32-way conflict on every column read
    CHECK(padded.total[shared_store].units == 32);
    CHECK(padded.total[shared_load].units == 32); // conflict-free
    CHECK(padded.total[shared_load].units == padded.total[shared_load].ideal);
}

// One ldmatrix.x4: 32 rows of 16 B, 8 per phase, row r of matrix i at (8i + r) * stride.
launch_profile ldmatrix_rows(bool swizzle) {
    return run(32, [swizzle](profile_observer &o) {
        for (uint32_t lane = 0; lane < 32; ++lane) {
            uint32_t chunk = swizzle ? (lane % 8) : 0; // 16-byte chunk of the 128-byte row
            o.access(ev(sbase + 128 * lane + 16 * chunk, 16, access_op::ldmatrix_row,
                        mem_space::shared, &line_a, lane));
        }
    });
}

void ldmatrix_phases() {
    launch_profile plain = ldmatrix_rows(false), swizzled = ldmatrix_rows(true);
    CHECK(plain.total[shared_load].requests == 1);
    CHECK(plain.total[shared_load].ideal == 4); // 4 phases of 8 rows
    CHECK(plain.total[shared_load].units == 32);
    CHECK(swizzled.total[shared_load].units == 4);
}

void divergence_and_occurrences() {
    launch_profile p = run(32, [](profile_observer &o) {
        for (int rep = 0; rep < 3; ++rep) // each lane reaches the line 3 times: 3 requests
            for (uint32_t t = 0; t < 16; ++t)
                o.access(ev(gbase + 256 * rep + 4 * t, 4, access_op::load, mem_space::global,
                            &line_a, t));
    });
    CHECK(p.total[global_load].requests == 3);
    CHECK(p.total[global_load].units == 6); // 64 bytes each
}

// The simulator's order: each lane runs its whole segment before the next lane starts. Two
// warps, two lines; lane t of each warp reaches line_a 4 times and line_b 4 times, and lanes
// 0..15 reach line_a a fifth time (a partial request, closed at the block's end).
void lanes_one_after_another() {
    launch_profile p = run(64, [](profile_observer &o) {
        for (uint32_t t = 0; t < 64; ++t) {
            for (int rep = 0; rep < 4; ++rep) {
                o.access(ev(gbase + 4096 * rep + 4 * t, 4, access_op::load, mem_space::global,
                            &line_a, t));
                o.access(ev(gbase + 0x100000 + 4096 * rep + 4 * t, 4, access_op::store,
                            mem_space::global, &line_b, t));
            }
            if (t % 32 < 16)
                o.access(ev(gbase + 0x200000 + 4 * t, 4, access_op::load, mem_space::global,
                            &line_a, t));
        }
    });
    CHECK(p.total[global_load].requests == 2 * 5);
    CHECK(p.total[global_load].units == 2 * (4 * 4 + 2)); // 4 full requests, 1 of 16 lanes
    CHECK(p.total[global_store].requests == 2 * 4 && p.total[global_store].units == 2 * 4 * 4);
    CHECK(p.total[global_load].bytes == 2 * (4 * 128 + 64));
}

void l2_model() {
    launch_profile p = run(
        1,
        [](profile_observer &o) {
            for (uintptr_t s : {0, 1, 2, 0})
                o.access(ev(gbase + 32 * s, 4, access_op::load, mem_space::global, &line_a, 0));
            o.access(ev(gbase + 32 * 3, 4, access_op::store, mem_space::global, &line_b, 0));
        },
        64);
    CHECK(p.dram_read == 4 * 32);    // 0, 1, 2 (evicts 0), 0 again
    CHECK(p.dram_written == 1 * 32); // the dirty sector, written back at the end
    CHECK(p.footprint == 4 * 32);
    p = run(
        1,
        [](profile_observer &o) { // an evicted dirty sector is written back, then read again
            o.access(ev(gbase, 4, access_op::store, mem_space::global, &line_a, 0));
            for (uintptr_t s : {1, 2, 0})
                o.access(ev(gbase + 32 * s, 4, access_op::load, mem_space::global, &line_b, 0));
        },
        64);
    CHECK(p.dram_written == 32);  // sector 0, evicted by sector 2 (sectors 2 and 0 end clean)
    CHECK(p.dram_read == 3 * 32); // 1, 2, 0
    CHECK(p.footprint == 3 * 32);
}

__global__ void one_mma(float *d) {
    uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u}; // fp16 1.0 pairs
    uint32_t b[2] = {0x3c003c00u, 0x3c003c00u};
    float c[4] = {0, 0, 0, 0}, out[4];
    mma_m16n8k16_f16(out, a, b, c);
    for (int i = 0; i < 4; ++i)
        d[threadIdx.x * 4 + i] = out[i];
}

// The launch itself delivers launch_begin and launch_end (and, instrumented, the accesses).
void mma_flops() {
    profile_observer o;
    float *d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, 128 * sizeof(float)));
    add_access_observer(&o);
    one_mma<<<1, 32>>>(d);
    CHECK_CUDA(cudaDeviceSynchronize());
    remove_access_observer(&o);
    float h[128];
    CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 16.0f);
    std::vector<launch_profile> v = o.take();
    CHECK(v.size() == 1);
    if (!v.empty()) {
        CHECK(v[0].mma == 1 && v[0].tensor_flops == 4096);
        uint64_t lines_with_mma = 0, mma_in_lines = 0; // the mma is counted at one line
        for (const profile_line &l : v[0].lines) {
            lines_with_mma += l.mma != 0;
            mma_in_lines += l.mma;
        }
        CHECK(lines_with_mma == 1 && mma_in_lines == 1);
        // the instrumented build also sees the kernel's stores: the bound is the larger term
        double mem = (double)(v[0].dram_read + v[0].dram_written) / 3.35e12;
        double t = roofline_bound_s(v[0], roofline_h100_sxm, nullptr);
        CHECK(t == std::max(mem, 4096 / 989.4e12));
        print_profile(stdout, v[0]);
    }
    cudaFree(d);
}

} // namespace

int main() {
    coalesced_copy();
    strided();
    bank_conflict_and_broadcast();
    transposes();
    ldmatrix_phases();
    divergence_and_occurrences();
    lanes_one_after_another();
    l2_model();
    mma_flops();
    return sim_test_result("profile");
}
