// cooperative_groups/reduce.h (cudasim) — cg::reduce over a thread_block_tile, with the
// operators plus, less, greater, bit_and, bit_or, bit_xor. Every thread of the tile gets the
// result. Computed as a butterfly of shfl_xor: the order of the additions may differ from a
// GPU's, so floating-point sums may differ in the last bits.
#ifndef CUDASIM_COOPERATIVE_GROUPS_REDUCE_H
#define CUDASIM_COOPERATIVE_GROUPS_REDUCE_H

#include <cooperative_groups.h>

namespace cooperative_groups {

template <typename T> struct plus {
    T operator()(T a, T b) const { return a + b; }
};
template <typename T> struct less { // the smaller of the two
    T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T> struct greater { // the larger of the two
    T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T> struct bit_and {
    T operator()(T a, T b) const { return a & b; }
};
template <typename T> struct bit_or {
    T operator()(T a, T b) const { return a | b; }
};
template <typename T> struct bit_xor {
    T operator()(T a, T b) const { return a ^ b; }
};

template <unsigned N, typename Parent, typename T, typename Op>
T reduce(const thread_block_tile<N, Parent> &tile, T value, Op op,
         const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    for (unsigned offset = N / 2; offset > 0; offset /= 2)
        value = op(value, tile.shfl_xor(value, offset, file, line));
    return value;
}

} // namespace cooperative_groups

#endif // CUDASIM_COOPERATIVE_GROUPS_REDUCE_H
