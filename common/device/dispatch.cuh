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
 * a D that is not 64 as 128. Host code, valid for nvcc and for the simulator. */
#ifndef ATTN_DISPATCH_CUH
#define ATTN_DISPATCH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attn/problem.h"

template <typename T> struct attn_type_tag { using type = T; };
template <int V> struct attn_int_tag { static constexpr int value = V; };

template <typename F> static inline void attn_dispatch_dtype(attn_dtype t, F &&f) {
    if (t == ATTN_BF16)
        f(attn_type_tag<__nv_bfloat16>{});
    else
        f(attn_type_tag<__half>{});
}

template <typename F> static inline void attn_dispatch_head_dim(int D, F &&f) {
    if (D == 64)
        f(attn_int_tag<64>{});
    else
        f(attn_int_tag<128>{});
}

template <typename F> static inline void attn_dispatch_tc(attn_dtype t, int D, F &&f) {
    attn_dispatch_dtype(t,
                        [&](auto tt) { attn_dispatch_head_dim(D, [&](auto dd) { f(tt, dd); }); });
}

#endif /* ATTN_DISPATCH_CUH */
