// mma.h (cudasim) — nvcuda::wmma for 16x16x16 tiles with __half or __nv_bfloat16 inputs and
// float or __half accumulators: fragment, fill_fragment, load_matrix_sync, mma_sync,
// store_matrix_sync, row_major/col_major operands and mem_row_major/mem_col_major accumulators.
// Other shapes (32x8x16, 8x32x16), tf32, double, integer and sub-byte types are not simulated.
//
// Which elements of a tile a lane holds is unspecified in CUDA; here lane l holds the 8 elements
// l*8 .. l*8+7 of the tile in row-major order (a GPU holds more for operands: never rely on
// num_elements or on the mapping, only on element-wise operations over x[]). Loads and stores are
// done by each lane for its own elements, so sanitizers see them in that lane. mma_sync is a
// warp collective (all 32 lanes; reported as wmma::mma_sync()): the lanes exchange their operand
// elements, then each computes its accumulators in fp32, C + A[i][0]*B[0][j] + ... in k order.
//
// Not checked: that ldm is a multiple of 16 bytes and the pointer 32-byte aligned, as CUDA asks.
#ifndef CUDASIM_MMA_H
#define CUDASIM_MMA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
constexpr unsigned tile = 16, per_lane = tile * tile / 32;
template <typename T> struct unsupported : std::false_type {};
// Memory offset of tile element (r, c).
inline size_t offset(unsigned r, unsigned c, unsigned ldm, bool col) {
    return col ? static_cast<size_t>(c) * ldm + r : static_cast<size_t>(r) * ldm + c;
}
inline unsigned first_element() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32 * per_lane;
}
} // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void> class fragment {
    static_assert(M == 16 && N == 16 && K == 16,
                  "cudasim does not support this WMMA shape: only 16x16x16 is simulated");
    static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value ||
                      (std::is_same<Use, accumulator>::value && std::is_same<T, float>::value),
                  "cudasim does not support this WMMA element type: operands are __half or "
                  "__nv_bfloat16, accumulators float or __half");

  public:
    enum { num_elements = detail::per_lane };
    using element_type = T;
    T x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
void fill_fragment(fragment<Use, M, N, K, T, L> &f, const V &value) {
    for (int i = 0; i < f.num_elements; ++i)
        f.x[i] = static_cast<T>(value);
}

// Operands: the layout is the fragment's.
template <typename Use, int M, int N, int K, typename T, typename L>
void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const T *p, unsigned ldm) {
    static_assert(!std::is_same<L, void>::value,
                  "an operand fragment needs a layout (row_major or col_major)");
    unsigned e = detail::first_element();
    for (unsigned i = 0; i < detail::per_lane; ++i, ++e)
        f.x[i] = p[detail::offset(e / 16, e % 16, ldm, std::is_same<L, col_major>::value)];
}

template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p, unsigned ldm,
                      layout_t layout) {
    unsigned e = detail::first_element();
    for (unsigned i = 0; i < detail::per_lane; ++i, ++e)
        f.x[i] = p[detail::offset(e / 16, e % 16, ldm, layout == mem_col_major)];
}

template <int M, int N, int K, typename T>
void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f, unsigned ldm,
                       layout_t layout) {
    unsigned e = detail::first_element();
    for (unsigned i = 0; i < detail::per_lane; ++i, ++e)
        p[detail::offset(e / 16, e % 16, ldm, layout == mem_col_major)] = f.x[i];
}

template <int M, int N, int K, typename TD, typename TAB, typename LA, typename LB, typename TC>
void mma_sync(fragment<accumulator, M, N, K, TD> &d, const fragment<matrix_a, M, N, K, TAB, LA> &a,
              const fragment<matrix_b, M, N, K, TAB, LB> &b,
              const fragment<accumulator, M, N, K, TC> &c, bool satf = false,
              const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    (void)satf;
    TAB all_a[detail::tile * detail::tile], all_b[detail::tile * detail::tile];
    cudasim::warp_allgather(a.x, all_a, sizeof a.x, "wmma::mma_sync()", file, line);
    cudasim::warp_allgather(b.x, all_b, sizeof b.x, "wmma::mma_sync()", file, line);
    unsigned e = detail::first_element();
    TD out[detail::per_lane];
    for (unsigned i = 0; i < detail::per_lane; ++i, ++e) {
        unsigned r = e / 16, col = e % 16;
        float acc = static_cast<float>(c.x[i]);
        for (unsigned k = 0; k < detail::tile; ++k)
            acc += static_cast<float>(all_a[r * 16 + k]) * static_cast<float>(all_b[k * 16 + col]);
        out[i] = static_cast<TD>(acc);
    }
    for (unsigned i = 0; i < detail::per_lane; ++i)
        d.x[i] = out[i];
}

} // namespace wmma
} // namespace nvcuda

#endif // CUDASIM_MMA_H
