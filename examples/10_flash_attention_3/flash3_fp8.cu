// flash3_fp8.cu — Example 10's version 4: FlashAttention-3's FP8 (e4m3) forward on Hopper, in two
// kernels (flash3_fp8.h has the layouts; the README, "v4: FP8", the lesson).
//
//   fa3_fp8_quantize   the pre-pass: one CUDA block per block of rows of one head (Q: 64 rows,
//                      K and V: 128 keys), one thread per row. With the Hadamard step a row of Q
//                      or K is multiplied by H_D / sqrt(D) (the fast Walsh-Hadamard transform in
//                      fp32: log2 D rounds of butterflies); then the block's largest magnitude
//                      sets its scale s (the smallest power of two with amax <= 448 s, so that
//                      dividing by it is exact) and every value is stored as e4m3(x / s), rounded
//                      to nearest even (cuda_fp8.h's conversion).
//   fa3_fp8_attention  version 4: v1's structure (one warpgroup of 128 threads per 64 query rows,
//                      Q and each K/V tile of 128 keys by TMA, an mbarrier counting the bytes) on
//                      the codes. S = Q K^T is wgmma m64n128k32 on e4m3 (K-major A and B, the
//                      only layout FP8 wgmma reads), times the two blocks' scales. For O += P V,
//                      V must be the K-major B operand too, keys contiguous: the warpgroup
//                      transposes each V tile in shared memory (V arrives as 128 rows of D bytes,
//                      it writes D rows of 128 keys, 128B-swizzled), while S's wgmma runs. P
//                      (in [0, 1]) is stored as e4m3(256 P) straight from S's registers into
//                      wgmma's 8-bit A fragments; their order of keys differs from the
//                      accumulator's, and the transpose writes V's keys in the fragments' order
//                      (fp8_key below), so no register moves between threads. O is kept in units
//                      of the current tile's V scale (rescaled with alpha when it changes).
//
// Why a pre-pass: the scale of a block is its largest magnitude, known only once every value of
// the block (after the Hadamard step, which mixes a row's D values) is; quantising inside the
// attention kernel would re-read and re-quantise every K/V tile once per block of queries.
// FlashAttention-3's interface likewise takes Q, K, V already in FP8. Each tensor is read once in
// 16 bits and written once in 8; attention then reads half the bytes.
#include <cuda.h>
#include <cuda_fp8.h>
#include <string.h>

#include "fa3_tile.cuh"
#include "flash3_fp8.h"

namespace {

static_assert(FA3_FP8_BM == BM && FA3_FP8_BN == BN, "the scale blocks are the kernel's tiles");

constexpr float p_scale = 256.0f; // P in [0, 1] is stored as e4m3(256 P): 2^-14 and up normal

// ---- the pre-pass ---------------------------------------------------------------------------

// The smallest power of two s with amax <= 448 s, exactly: amax = f 2^e with f in [0.5, 1) and
// 448 = 0.875 2^9, so s = 2^(e - 9) when f <= 0.875, else 2^(e - 8). An all-zero block: 1.
__device__ __forceinline__ float block_scale(float amax) {
    if (!(amax > 0.0f))
        return 1.0f;
    int e;
    float f = frexpf(amax, &e);
    return ldexpf(1.0f, f <= 0.875f ? e - 9 : e - 8);
}

template <typename T, int D>
__global__ void __launch_bounds__(128)
    fa3_fp8_quantize_kernel(const T *q, const T *k, const T *v, uint8_t *q8, uint8_t *k8,
                            uint8_t *v8, float *qs, float *ks, float *vs, int Lq, int Lk,
                            int hadamard) {
    const int which = blockIdx.z; // 0 Q, 1 K, 2 V
    const int L = which == 0 ? Lq : Lk, rows = which == 0 ? BM : BN;
    const int blocks = (L + rows - 1) / rows;
    if ((int)blockIdx.x >= blocks)
        return; // this tensor has fewer blocks than the grid's x
    const T *src = which == 0 ? q : which == 1 ? k : v;
    uint8_t *dst = which == 0 ? q8 : which == 1 ? k8 : v8;
    float *scales = which == 0 ? qs : which == 1 ? ks : vs;
    const int bh = blockIdx.y, row = blockIdx.x * rows + threadIdx.x;
    const bool mine = (int)threadIdx.x < rows && row < L;
    const int64_t at = ((int64_t)bh * L + row) * D;

    float x[D];
    float amax = 0.0f;
    if (mine) {
        for (int d = 0; d < D; ++d)
            x[d] = static_cast<float>(src[at + d]);
        if (hadamard && which < 2) {
            for (int h = 1; h < D; h *= 2) // butterflies: (a, b) -> (a + b, a - b)
                for (int i = 0; i < D; i += 2 * h)
                    for (int j = i; j < i + h; ++j) {
                        float a = x[j], b = x[j + h];
                        x[j] = a + b;
                        x[j + h] = a - b;
                    }
            const float norm = rsqrtf((float)D);
            for (int d = 0; d < D; ++d)
                x[d] *= norm;
        }
        for (int d = 0; d < D; ++d)
            amax = fmaxf(amax, fabsf(x[d]));
    }
    // The block's largest magnitude: over each warp, then over the four warps.
    __shared__ float warp_max[4];
    for (int o = 16; o > 0; o /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = amax;
    __syncthreads(); // every warp's maximum is written before any thread reads the four
    amax = fmaxf(fmaxf(warp_max[0], warp_max[1]), fmaxf(warp_max[2], warp_max[3]));
    const float s = block_scale(amax);
    if (threadIdx.x == 0)
        scales[(int64_t)bh * blocks + blockIdx.x] = s;
    if (mine)
        for (int d = 0; d < D; ++d) // x / s is exact (s a power of two); then one rounding
            dst[at + d] = __nv_cvt_float_to_fp8(x[d] / s, __NV_SATFINITE, __NV_E4M3);
}

// ---- version 4 -------------------------------------------------------------------------------

template <int D> struct fp8_plan {
    static constexpr uint32_t q_bytes = BM * D;  // one byte per value
    static constexpr uint32_t kv_bytes = BN * D; // one K or V tile, and V^T
    // Q, K (swizzled rows of D bytes: the 64B swizzle for D = 64, 128B for D = 128), V as it
    // arrives (rows of D bytes, not swizzled), V^T (D rows of 128 keys, 128B-swizzled).
    static constexpr uint32_t smem = 1024 + q_bytes + 3 * kv_bytes;
    static constexpr unsigned swizzle = D == 64 ? ATTN_SMEM_SW64 : ATTN_SMEM_SW128;
};

// Position a (0..31) of the 8-bit A fragment's 32 keys of one k-step holds, in thread quad q,
// byte c of register 2 hi + (row half): the key 16 hi + 4 q + c of the fragment (wgmma's layout,
// common/cudasim/include/cudasim/sm90.h, a_frag_coord). The accumulator S gives the same thread
// the keys 8 i4 + 2 q + {0, 1} (i4 = register / 4): so fragment key 16 hi + 4 q + c is filled with
// S's key 16 hi + 8 (c / 2) + 2 q + c % 2, and V^T's column a must hold that key's row of V.
__device__ __forceinline__ int fp8_key(int a) {
    int hi = a / 16, q = (a % 16) / 4, c = a % 4;
    return 16 * hi + 8 * (c / 2) + 2 * q + c % 2;
}

// V^T from the V tile: column a of V^T (a position of the fragments' key order, 32 per k-step)
// is row 32 (a / 32) + fp8_key(a % 32) of V. Thread t writes column t: D bytes, one per row of
// V^T, at the 128B swizzle's address (the 16-byte chunk XOR the row's index within 8 rows).
template <int D>
__device__ __forceinline__ void transpose_v(unsigned char *vt, const unsigned char *v, int t) {
    const unsigned char *src = v + (32 * (t / 32) + fp8_key(t % 32)) * D;
    for (int d = 0; d < D; ++d) {
        uint32_t off = d * 128 + t;
        vt[off ^ (((off >> 7) & 7) << 4)] = src[d];
    }
}

// S = Q K^T, issued: D / 32 wgmma k32 along the head dimension, 32 bytes further each into
// rows of D bytes (the swizzle applies to the address), 8-row groups 8 D bytes apart (SBO).
template <int D>
__device__ __forceinline__ void issue_qk_fp8(float (&s)[BN / 2], const unsigned char *q,
                                             const unsigned char *k) {
    constexpr auto sw = static_cast<attn_smem_layout>(fp8_plan<D>::swizzle);
    wgmma_fence();
    for (int kk = 0; kk < D / 32; ++kk)
        wgmma_ss_e4m3<BN>(s, wgmma_desc(q + 32 * kk, 0, 8 * D, sw),
                          wgmma_desc(k + 32 * kk, 0, 8 * D, sw), kk > 0);
    wgmma_commit_group();
}

// O += P V, issued: BN / 32 wgmma k32 along the keys, P from registers, V^T K-major (rows of
// 128 keys, 128B swizzle, 8-row groups 1024 bytes apart).
template <int D>
__device__ __forceinline__ void issue_pv_fp8(float (&o)[D / 2], const uint32_t (&p)[BN / 32][4],
                                             const unsigned char *vt) {
    wgmma_fence();
    for (int kk = 0; kk < BN / 32; ++kk)
        wgmma_rs_e4m3<D>(o, p[kk], wgmma_desc(vt + 32 * kk, 0, 1024, ATTN_SMEM_SW128), true);
    wgmma_commit_group();
}

// P (in s, after online_softmax) into the 8-bit A fragments: register r of k-step kk holds, in
// byte c, fragment key 16 (r / 2) + 4 q + c of row half r % 2, i.e. S's key
// 32 kk + 16 (r / 2) + 8 (c / 2) + 2 q + c % 2, which is S's register
// 4 (4 kk + 2 (r / 2) + c / 2) + 2 (r % 2) + c % 2 of this thread.
__device__ __forceinline__ void pack_p_fp8(const float (&s)[BN / 2], uint32_t (&p)[BN / 32][4]) {
    for (int kk = 0; kk < BN / 32; ++kk)
        for (int r = 0; r < 4; ++r) {
            uint32_t w = 0;
            for (int c = 0; c < 4; ++c) {
                int i = 4 * (4 * kk + 2 * (r / 2) + c / 2) + 2 * (r % 2) + c % 2;
                uint32_t code = __nv_cvt_float_to_fp8(s[i] * p_scale, __NV_SATFINITE, __NV_E4M3);
                w |= code << (8 * c);
            }
            p[kk][r] = w;
        }
}

template <bool BF16, int D>
__global__ void __launch_bounds__(128)
    fa3_fp8_kernel(const __grid_constant__ CUtensorMap qmap,
                   const __grid_constant__ CUtensorMap kmap,
                   const __grid_constant__ CUtensorMap vmap, const float *q_scale,
                   const float *k_scale, const float *v_scale, typename elem<BF16>::T *o,
                   float *lse, int Lq, int Lk, float scale, int causal) {
    using P = fp8_plan<D>;
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t q_full, kv_full;
    uint32_t sa = smem_address(smem_raw);
    unsigned char *q_smem = smem_raw + (1024 - sa % 1024) % 1024;
    unsigned char *k_smem = q_smem + P::q_bytes;
    unsigned char *v_smem = k_smem + P::kv_bytes;
    unsigned char *vt_smem = v_smem + P::kv_bytes;
    const int bh = blockIdx.y, m0 = blockIdx.x * BM, t = threadIdx.x;
    const int n_tiles = tiles_for(m0, BM, Lq, Lk, causal != 0);
    const int q_blocks = (Lq + BM - 1) / BM, kv_blocks = (Lk + BN - 1) / BN;
    const int r0 = m0 + 16 * (t / 32) + (t % 32) / 4, shift = Lk - Lq;
    // S's scale in log2 units, without the blocks' scales (q's here, k's per tile)
    const float sq_log2 = scale * CUDART_L2E_F * q_scale[(int64_t)bh * q_blocks + blockIdx.x];

    if (t == 0) {
        mbarrier_init(&q_full, 1);
        mbarrier_init(&kv_full, 1);
        fence_barrier_init();
    }
    __syncthreads(); // the fp8 mbarriers are initialised before anyone uses them

    rows_state<D> st;
    for (int i = 0; i < D / 2; ++i)
        st.o[i] = 0.0f;
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.0f;
    float s[BN / 2], alpha[2], sv = 1.0f;
    uint32_t p[BN / 32][4];

    if (t == 0) {
        mbarrier_arrive_expect_tx(&q_full, P::q_bytes);
        tma_load_3d(q_smem, &qmap, &q_full, 0, m0, bh);
    }
    mbarrier_wait(&q_full, 0);
    for (int j = 0; j < n_tiles; ++j) {
        if (t == 0) {
            mbarrier_arrive_expect_tx(&kv_full, 2 * P::kv_bytes);
            tma_load_3d(k_smem, &kmap, &kv_full, 0, j * BN, bh);
            tma_load_3d(v_smem, &vmap, &kv_full, 0, j * BN, bh);
        }
        mbarrier_wait(&kv_full, j % 2); // the j-th phase: K and V of tile j landed
        issue_qk_fp8<D>(s, q_smem, k_smem);
        transpose_v<D>(vt_smem, v_smem, t); // while S's wgmma runs
        fence_proxy_async(); // the generic stores of V^T before wgmma's (async proxy) reads
        wgmma_wait_group<0>();
        const int64_t kb = (int64_t)bh * kv_blocks + j;
        online_softmax<D>(s, st, alpha, r0, j * BN, Lk, shift, causal != 0, sq_log2 * k_scale[kb]);
        pack_p_fp8(s, p);
        // O is in units of the previous tile's V scale: to this tile's, and to the new max.
        const float sv_new = v_scale[kb];
        alpha[0] *= sv / sv_new;
        alpha[1] *= sv / sv_new;
        sv = sv_new;
        rescale_o<D>(st, alpha);
        __syncthreads(); // every column of V^T is written before wgmma reads any
        issue_pv_fp8<D>(st.o, p, vt_smem);
        wgmma_wait_group<0>();
        __syncthreads(); // everyone is done with K, V and V^T before the next copy overwrites them
    }
    wgmma_fence_operand(st.o);
    for (int i = 0; i < D / 2; ++i) // O in the units of the values: the V scale, P's 256
        st.o[i] *= sv / p_scale;
    store_rows<BF16, D>(st, o, lse, bh, r0, Lq);
}

// ---- host side -----------------------------------------------------------------------------

// A 3-D tensor map over [B * H, L, D] bytes seen as (D, L, B * H): boxes of the whole D x rows
// x 1 head; rows past L read as zeros. Q and K swizzled as wgmma reads them, V not (the
// transpose reads it).
static CUtensorMap make_map(const void *base, int BH, int L, int D, int rows,
                            CUtensorMapSwizzle swizzle) {
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    cuuint64_t dim[3] = {(cuuint64_t)D, (cuuint64_t)L, (cuuint64_t)BH};
    cuuint64_t stride[2] = {(cuuint64_t)D, (cuuint64_t)L * D};
    cuuint32_t box[3] = {(cuuint32_t)D, (cuuint32_t)rows, 1}, ones[3] = {1, 1, 1};
    attn_encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void *>(base), dim,
                           stride, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
}

template <bool BF16, int D> static void launch_attention(const fa3_fp8_args *a, cudaStream_t s) {
    using P = fp8_plan<D>;
    cudaFuncSetAttribute(fa3_fp8_kernel<BF16, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)P::smem);
    const int BH = a->B * a->H;
    const CUtensorMapSwizzle sw = D == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
    CUtensorMap qm = make_map(a->q8, BH, a->Lq, D, BM, sw),
                km = make_map(a->k8, BH, a->Lk, D, BN, sw),
                vm = make_map(a->v8, BH, a->Lk, D, BN, CU_TENSOR_MAP_SWIZZLE_NONE);
    dim3 grid((a->Lq + BM - 1) / BM, BH);
    fa3_fp8_kernel<BF16, D><<<grid, 128, P::smem, s>>>(qm, km, vm, a->q_scale, a->k_scale,
                                                       a->v_scale, (typename elem<BF16>::T *)a->o,
                                                       a->lse, a->Lq, a->Lk, a->scale, a->causal);
}

template <bool BF16, int D> static void launch_quantize(const fa3_fp8_args *a, cudaStream_t s) {
    using T = typename elem<BF16>::T;
    int blocks = fa3_fp8_q_blocks(a->Lq) > fa3_fp8_kv_blocks(a->Lk) ? fa3_fp8_q_blocks(a->Lq)
                                                                    : fa3_fp8_kv_blocks(a->Lk);
    dim3 grid(blocks, a->B * a->H, 3);
    fa3_fp8_quantize_kernel<T, D><<<grid, 128, 0, s>>>(
        (const T *)a->q, (const T *)a->k, (const T *)a->v, a->q8, a->k8, a->v8, a->q_scale,
        a->k_scale, a->v_scale, a->Lq, a->Lk, a->hadamard ? 1 : 0);
}

} // namespace

extern "C" int fa3_fp8_q_blocks(int Lq) { return (Lq + BM - 1) / BM; }
extern "C" int fa3_fp8_kv_blocks(int Lk) { return (Lk + BN - 1) / BN; }

extern "C" void fa3_fp8_quantize(const fa3_fp8_args *a, cudaStream_t s) {
    fa3_dispatch(a->dtype, a->D, [&](auto bf16, auto d) {
        launch_quantize<decltype(bf16)::value, decltype(d)::value>(a, s);
    });
}

extern "C" void fa3_fp8_attention(const fa3_fp8_args *a, cudaStream_t s) {
    fa3_dispatch(a->dtype, a->D, [&](auto bf16, auto d) {
        launch_attention<decltype(bf16)::value, decltype(d)::value>(a, s);
    });
}

extern "C" attn_launch_shape fa3_fp8_launch_shape(int D) {
    return {"fa3_fp8_kernel", 128,
            D == 64 ? (size_t)fp8_plan<64>::smem : (size_t)fp8_plan<128>::smem};
}
