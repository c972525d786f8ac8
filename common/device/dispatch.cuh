/* device/dispatch.cuh — the {fp16, bf16} x {D = 64, 128} grid of the tensor-core kernels'
 * launchers, written once. A launcher templated on the element type T and the head dimension D
 * is called for the problem's dtype and D through a generic lambda that receives them as tags:
 *
 *   attn_dispatch_tc(p->dtype, p->D, [&](auto t, auto d) {
 *       launch_typed<typename decltype(t)::type, decltype(d)::value>(p, b, stream);
 *   });
 *
 * attn_dispatch_dtype and attn_dispatch_head_dim are the two halves, for a launcher templated on
 * one of them. The registries admit only fp16/bf16 and D = 64 or 128 for these kernels (their
 * requirements), so anything else never reaches here: a dtype that is not bf16 is taken as fp16,
 * a D that is not 64 as 128. Host code, valid for nvcc and for the simulator.
 *
 * The cells a build compiles: ATTN_GRID_CELLS, one bit per cell, bit 2 * bf16 + (D == 128):
 *
 *              D = 64   D = 128
 *     fp16     0x1      0x2
 *     bf16     0x4      0x8          0xF (every cell) unless the build defines it
 *
 * Every program a learner builds compiles the four. Some test builds compile fewer: a planted
 * copy of a kernel source the cells its test's arguments reach (tests/examples/CMakeLists.txt,
 * planted_grid), the standalone builds one, as they ask only whether a folder builds on its own
 * (tests/standalone_build.cmake), the ThreadSanitizer build (sim-tsan) one, fp16 at D = 64, the
 * cell of every case it runs (ATTN_SIM_GRID_CELLS, cmake/attn.cmake); the other cells, the same
 * template, are compiled by the plain build. A call for a cell the build left out stops the
 * program with exit status 2 and a line that names the cell. A launcher templated on the dtype
 * alone (or D alone) is compiled for each dtype (D) that some cell of the build has. */
#ifndef ATTN_DISPATCH_CUH
#define ATTN_DISPATCH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include "attn/problem.h"

#ifndef ATTN_GRID_CELLS
#define ATTN_GRID_CELLS 0xF
#endif

template <typename T> struct attn_type_tag { using type = T; };
template <int V> struct attn_int_tag { static constexpr int value = V; };

// Whether the build compiles the cell (bf16, D); D = 0: either D, bf16 = -1: either dtype.
static constexpr bool attn_grid_has(int bf16, int D) {
    int cells = 0;
    for (int b = 0; b < 2; ++b)
        for (int d = 0; d < 2; ++d)
            if ((bf16 < 0 || bf16 == b) && (D == 0 || D == (d ? 128 : 64)))
                cells |= 1 << (2 * b + d);
    return (ATTN_GRID_CELLS & cells) != 0;
}

[[noreturn]] static inline void attn_grid_left_out(int bf16, int D) {
    fprintf(stderr,
            "error: this program was compiled without the %s%s%s cell of the {fp16, bf16} x "
            "{64, 128} grid (ATTN_GRID_CELLS=%#x: a test build of one cell, "
            "common/device/dispatch.cuh)\n",
            bf16 < 0 ? "" : (bf16 ? "bf16" : "fp16"), bf16 < 0 || D == 0 ? "" : ", ",
            D == 0 ? "" : (D == 64 ? "D = 64" : "D = 128"), (unsigned)ATTN_GRID_CELLS);
    exit(2);
}

template <typename F> static inline void attn_dispatch_dtype(attn_dtype t, F &&f) {
    if (t == ATTN_BF16) {
        if constexpr (attn_grid_has(1, 0))
            f(attn_type_tag<__nv_bfloat16>{});
        else
            attn_grid_left_out(1, 0);
    } else {
        if constexpr (attn_grid_has(0, 0))
            f(attn_type_tag<__half>{});
        else
            attn_grid_left_out(0, 0);
    }
}

template <typename F> static inline void attn_dispatch_head_dim(int D, F &&f) {
    if (D == 64) {
        if constexpr (attn_grid_has(-1, 64))
            f(attn_int_tag<64>{});
        else
            attn_grid_left_out(-1, 64);
    } else {
        if constexpr (attn_grid_has(-1, 128))
            f(attn_int_tag<128>{});
        else
            attn_grid_left_out(-1, 128);
    }
}

// One cell: f(T's tag, D's tag) where the build has it.
template <bool BF16, int D, typename F> static inline void attn_grid_cell(F &&f) {
    using T = typename std::conditional<BF16, __nv_bfloat16, __half>::type;
    if constexpr (attn_grid_has(BF16, D))
        f(attn_type_tag<T>{}, attn_int_tag<D>{});
    else
        attn_grid_left_out(BF16, D);
}

template <typename F> static inline void attn_dispatch_tc(attn_dtype t, int D, F &&f) {
    if (t == ATTN_BF16) {
        if (D == 64)
            attn_grid_cell<true, 64>(f);
        else
            attn_grid_cell<true, 128>(f);
    } else {
        if (D == 64)
            attn_grid_cell<false, 64>(f);
        else
            attn_grid_cell<false, 128>(f);
    }
}

#endif /* ATTN_DISPATCH_CUH */
