// flash3_fwd.cu — Example 10: FlashAttention-3's forward pass on Hopper (sm_90a), one idea per
// version, on the building blocks of common/device/sm90.cuh (wgmma, TMA, mbarriers, named
// barriers, setmaxnreg). The same code runs on an H100/H200 and on the simulator, which checks
// the asynchronous protocol (common/cudasim/README.md, "Hopper's asynchronous instructions").
//
//   v1 fa3_wgmma     one warpgroup (128 threads) owns 64 query rows. Q, then each K/V tile of
//                    128 keys, arrive by TMA (one thread issues the copy, an mbarrier counts its
//                    bytes, everyone waits on it); S = Q K^T and O += P V are wgmma: a warpgroup
//                    instruction reading its operands straight from shared memory through
//                    descriptors (no ldmatrix), P from registers. Synchronous: load, wait,
//                    compute, wait, repeat.
//   v2 fa3_warpspec  warp specialisation: a producer warpgroup (one thread at work, registers
//                    given back with setmaxnreg) fills a 2-stage ring of K/V tiles; two consumer
//                    warpgroups (64 rows each) wait on each stage's `full` mbarrier and free it
//                    through its `empty` one. Loads now overlap compute.
//   v3 fa3_pingpong  the two consumers take turns on the tensor cores (named barriers): one's
//                    softmax runs while the other's GEMMs do; and within a warpgroup the next
//                    S = Q K^T is issued before this tile's softmax, with P V of the previous
//                    tile in flight behind it (two wgmma groups, wait_group<1>).
//
// Shapes: D = 64 or 128, f16 or bf16, causal (bottom-right aligned) or not, Lq != Lk; dense
// [B, H, L, D] layout. Shared memory (from a 1024-byte aligned base): every tile is D / 64 column
// blocks of rows x 128 bytes, swizzled 128B by the TMA copy and read by wgmma with the same
// swizzle (K-major for Q and K, MN-major for V: O = P V takes V as its B operand, keys along K).
#include <cuda.h>
#include <string.h>

#include "attn/example.h"
#include "fa3_tile.cuh"

namespace {

constexpr uint32_t chunk_rows_bytes = 128; // one row of a 64-column block: 64 x 2 bytes

// The wgmma calls on the element type (f16 or bf16).
template <bool BF16> struct wgmma16 {
    template <int N>
    static __device__ __forceinline__ void qk(float *s, uint64_t a, uint64_t b, bool acc) {
        if constexpr (BF16)
            wgmma_ss_bf16<N>(s, a, b, acc);
        else
            wgmma_ss_f16<N>(s, a, b, acc);
    }
    // V is MN-major (its rows are keys, the K of P V): the transposed-B flag.
    template <int N>
    static __device__ __forceinline__ void pv(float *o, const uint32_t *p, uint64_t b) {
        if constexpr (BF16)
            wgmma_rs_bf16<N, 1>(o, p, b, true);
        else
            wgmma_rs_f16<N, 1>(o, p, b, true);
    }
};

// The per-version plan: warpgroups, stages and shared-memory bytes.
template <int D, int V> struct plan {
    static constexpr int consumers = V == 1 ? 1 : 2;
    static constexpr int threads = 128 * (consumers + (V == 1 ? 0 : 1));
    static constexpr int stages = V == 1 ? 1 : 2;
    static constexpr uint32_t q_bytes = BM * D * 2;  // one consumer's Q tile
    static constexpr uint32_t kv_bytes = BN * D * 2; // one K or V tile
    static constexpr uint32_t smem = 1024 + consumers * q_bytes + 2 * stages * kv_bytes;
    static constexpr int rows = consumers * BM; // query rows per block
};

// Copies a tile of `rows` rows (from row `row0` of head `bh`) into `dst`, one TMA box of 64
// columns per column block, completing on bar.
template <int D>
__device__ __forceinline__ void load_tile(unsigned char *dst, const CUtensorMap *map, uint64_t *bar,
                                          int rows, int row0, int bh) {
    for (int c = 0; c < D / 64; ++c)
        tma_load_3d(dst + c * rows * chunk_rows_bytes, map, bar, 64 * c, row0, bh);
}

// S = Q K^T for one tile, issued (not waited): D / 16 wgmma along the head dimension. Column
// block c of Q and K holds dimensions 64c..64c+63; instruction k starts 32 bytes (16 elements)
// further into its block's 128-byte rows (the swizzle is applied on the address, as the TMA wrote
// it). SBO = 1024: eight 128-byte rows per group.
template <bool BF16, int D>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], const unsigned char *q,
                                         const unsigned char *k) {
    wgmma_fence();
    for (int kk = 0; kk < D / 16; ++kk) {
        int c = kk / 4, off = 32 * (kk % 4);
        wgmma16<BF16>::template qk<BN>(
            s, wgmma_desc(q + c * BM * chunk_rows_bytes + off, 0, 1024, ATTN_SMEM_SW128),
            wgmma_desc(k + c * BN * chunk_rows_bytes + off, 0, 1024, ATTN_SMEM_SW128), kk > 0);
    }
    wgmma_commit_group();
}

// O += P V, issued: BN / 16 wgmma along the keys, P from registers (p[j]: keys 16j..16j+15),
// V MN-major: 8-key groups 1024 bytes apart (SBO), 64-column blocks BN rows apart (LBO).
template <bool BF16, int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&p)[BN / 16][4],
                                         const unsigned char *v) {
    wgmma_fence();
    for (int j = 0; j < BN / 16; ++j)
        wgmma16<BF16>::template pv<D>(o, p[j],
                                      wgmma_desc(v + j * 16 * chunk_rows_bytes,
                                                 BN * chunk_rows_bytes, 1024, ATTN_SMEM_SW128));
    wgmma_commit_group();
}

// The online softmax (fa3_tile.cuh), then P packed into wgmma's 16-bit A fragments: the
// accumulator's registers 8j..8j+7 are exactly A's for keys 16j..16j+15.
template <bool BF16, int D>
__device__ __forceinline__ void
softmax_tile(float (&s)[BN / 2], rows_state<D> &st, uint32_t (&p)[BN / 16][4], float (&alpha)[2],
             int r0, int n0, int Lk, int shift, bool causal, float scale_log2) {
    online_softmax<D>(s, st, alpha, r0, n0, Lk, shift, causal, scale_log2);
    for (int j = 0; j < BN / 16; ++j)
        for (int r = 0; r < 4; ++r)
            p[j][r] = elem<BF16>::pack(s[8 * j + 2 * r], s[8 * j + 2 * r + 1]);
}

template <bool BF16, int D, int V>
__global__ void __launch_bounds__(plan<D, V>::threads)
    fa3_kernel(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
               const __grid_constant__ CUtensorMap vmap, typename elem<BF16>::T *o, float *lse,
               int Lq, int Lk, float scale, int causal) {
    using P = plan<D, V>;
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t q_full[2], k_full[2], v_full[2], kv_empty[2];
    uint32_t sa = smem_address(smem_raw);
    unsigned char *q_smem = smem_raw + (1024 - sa % 1024) % 1024;
    unsigned char *k_smem = q_smem + P::consumers * P::q_bytes;
    unsigned char *v_smem = k_smem + P::stages * P::kv_bytes;
    const int bh = blockIdx.y, m0 = blockIdx.x * P::rows;
    const int n_tiles = tiles_for(m0, P::rows, Lq, Lk, causal != 0);
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const float scale_log2 = scale * CUDART_L2E_F;

    if (threadIdx.x == 0) {
        for (int c = 0; c < P::consumers; ++c)
            mbarrier_init(&q_full[c], 1);
        for (int s = 0; s < P::stages; ++s) {
            mbarrier_init(&k_full[s], 1);
            mbarrier_init(&v_full[s], 1);
            mbarrier_init(&kv_empty[s], P::consumers); // one arrival per consumer warpgroup
        }
        fence_barrier_init();
    }
    __syncthreads(); // the mbarriers are initialised before anyone uses them

    // ---- v2, v3: the producer warpgroup
    // -----------------------------------------------------------
    if constexpr (V >= 2) {
        if (wg == 0) {
            setmaxnreg_dec<24>(); // a producer needs few registers: the consumers get them
            if (t == 0) {
                for (int c = 0; c < P::consumers; ++c) {
                    mbarrier_arrive_expect_tx(&q_full[c], P::q_bytes);
                    load_tile<D>(q_smem + c * P::q_bytes, &qmap, &q_full[c], BM, m0 + c * BM, bh);
                }
                for (int j = 0; j < n_tiles; ++j) {
                    int s = j % P::stages;
                    if (j >= P::stages) // both consumers have released the stage's last use
                        mbarrier_wait(&kv_empty[s], (j / P::stages - 1) % 2);
                    mbarrier_arrive_expect_tx(&k_full[s], P::kv_bytes);
                    load_tile<D>(k_smem + s * P::kv_bytes, &kmap, &k_full[s], BN, j * BN, bh);
                    mbarrier_arrive_expect_tx(&v_full[s], P::kv_bytes);
                    load_tile<D>(v_smem + s * P::kv_bytes, &vmap, &v_full[s], BN, j * BN, bh);
                }
            }
            return;
        }
        setmaxnreg_inc<240>();
    }

    // ---- the consumer warpgroup(s)
    // -----------------------------------------------------------------
    const int c = V >= 2 ? wg - 1 : 0;
    const int r0 = m0 + c * BM + 16 * (t / 32) + (t % 32) / 4; // this thread's first row
    const int shift = Lk - Lq;
    const unsigned char *q_tile = q_smem + c * P::q_bytes;
    rows_state<D> st;
    for (int i = 0; i < D / 2; ++i)
        st.o[i] = 0.0f;
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.0f;
    float s[BN / 2], alpha[2];
    uint32_t p[BN / 16][4];

    if constexpr (V == 1) {
        if (t == 0) {
            mbarrier_arrive_expect_tx(&q_full[0], P::q_bytes);
            load_tile<D>(q_smem, &qmap, &q_full[0], BM, m0, bh);
        }
        mbarrier_wait(&q_full[0], 0);
        for (int j = 0; j < n_tiles; ++j) {
            if (t == 0) {
                mbarrier_arrive_expect_tx(&k_full[0], 2 * P::kv_bytes);
                load_tile<D>(k_smem, &kmap, &k_full[0], BN, j * BN, bh);
                load_tile<D>(v_smem, &vmap, &k_full[0], BN, j * BN, bh);
            }
            mbarrier_wait(&k_full[0], j % 2); // the j-th phase: K and V of tile j landed
            issue_qk<BF16, D>(s, q_tile, k_smem);
            wgmma_wait_group<0>();
            softmax_tile<BF16, D>(s, st, p, alpha, r0, j * BN, Lk, shift, causal != 0, scale_log2);
            rescale_o<D>(st, alpha);
            issue_pv<BF16, D>(st.o, p, v_smem);
            wgmma_wait_group<0>();
            __syncthreads(); // everyone is done with K and V before the next copy overwrites them
        }
    } else if constexpr (V == 2) {
        mbarrier_wait(&q_full[c], 0);
        for (int j = 0; j < n_tiles; ++j) {
            int sidx = j % P::stages;
            unsigned parity = (j / P::stages) % 2;
            mbarrier_wait(&k_full[sidx], parity);
            issue_qk<BF16, D>(s, q_tile, k_smem + sidx * P::kv_bytes);
            wgmma_wait_group<0>();
            softmax_tile<BF16, D>(s, st, p, alpha, r0, j * BN, Lk, shift, causal != 0, scale_log2);
            rescale_o<D>(st, alpha);
            mbarrier_wait(&v_full[sidx], parity);
            issue_pv<BF16, D>(st.o, p, v_smem + sidx * P::kv_bytes);
            wgmma_wait_group<0>();
            if (t == 0)
                mbarrier_arrive(&kv_empty[sidx]); // this warpgroup is done with the stage
        }
    } else {
        // Named barriers 1 and 2: consumer c may issue its GEMMs when barrier 1 + c completes
        // (its 128 threads sync, the other consumer's 128 arrived); consumer 0 goes first.
        const unsigned mine = 1 + c, other = 2 - c;
        if (c == 1)
            named_barrier_arrive(1, 256);
        mbarrier_wait(&q_full[c], 0);
        uint32_t p_prev[BN / 16][4];
        for (int j = 0; j <= n_tiles && n_tiles > 0; ++j) {
            int sidx = j % P::stages, prev = (j + P::stages - 1) % P::stages;
            if (j < n_tiles)
                mbarrier_wait(&k_full[sidx], (j / P::stages) % 2);
            if (j > 0)
                mbarrier_wait(&v_full[prev], ((j - 1) / P::stages) % 2);
            named_barrier_sync(mine, 256); // my turn on the tensor cores
            if (j < n_tiles)
                issue_qk<BF16, D>(s, q_tile, k_smem + sidx * P::kv_bytes); // S_j
            if (j > 0)
                issue_pv<BF16, D>(st.o, p_prev,
                                  v_smem + prev * P::kv_bytes); // O += P_{j-1} V_{j-1}
            named_barrier_arrive(other, 256);                   // the other consumer's turn
            if (j < n_tiles) {
                if (j > 0)
                    wgmma_wait_group<1>(); // S_j is done; P V may still run
                else
                    wgmma_wait_group<0>();
                softmax_tile<BF16, D>(s, st, p, alpha, r0, j * BN, Lk, shift, causal != 0,
                                      scale_log2);
            }
            if (j > 0) {
                wgmma_wait_group<0>(); // P_{j-1} V_{j-1} is in O
                if (t == 0)
                    mbarrier_arrive(&kv_empty[prev]);
            }
            if (j < n_tiles) {
                rescale_o<D>(st, alpha); // O (now with P_{j-1} V_{j-1}) to the new max
                memcpy(p_prev, p, sizeof p);
            }
        }
    }
    wgmma_fence_operand(st.o);
    store_rows<BF16, D>(st, o, lse, bh, r0, Lq);
}

// ---- host side
// ---------------------------------------------------------------------------------------

// A 3-D tensor map over a [B, H, L, D] tensor seen as (D, L, B * H): boxes of 64 columns x rows
// x 1 head, 128B swizzle; rows past L read as zeros.
static CUtensorMap make_map(const void *base, const attn_problem *p, int L, int rows) {
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    cuuint64_t dim[3] = {(cuuint64_t)p->D, (cuuint64_t)L, (cuuint64_t)p->B * p->H};
    cuuint64_t stride[2] = {(cuuint64_t)p->D * 2, (cuuint64_t)L * p->D * 2};
    cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, ones[3] = {1, 1, 1};
    CUtensorMapDataType type =
        p->dtype == ATTN_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    attn_encode_tensor_map(&map, type, 3, const_cast<void *>(base), dim, stride, box, ones,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
}

template <bool BF16, int D, int V>
static void launch_typed(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    using P = plan<D, V>;
    cudaFuncSetAttribute(fa3_kernel<BF16, D, V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)P::smem);
    CUtensorMap qm = make_map(b->q, p, p->Lq, BM), km = make_map(b->k, p, p->Lk, BN),
                vm = make_map(b->v, p, p->Lk, BN);
    dim3 grid((p->Lq + P::rows - 1) / P::rows, p->B * p->H);
    fa3_kernel<BF16, D, V><<<grid, P::threads, P::smem, stream>>>(
        qm, km, vm, (typename elem<BF16>::T *)b->o, b->lse, p->Lq, p->Lk, p->scale, p->causal);
}

template <int V>
static void launch_version(const attn_problem *p, const attn_buffers *b, cudaStream_t stream) {
    fa3_dispatch(p->dtype, p->D, [&](auto bf16, auto d) {
        launch_typed<decltype(bf16)::value, decltype(d)::value, V>(p, b, stream);
    });
}

template <int V> static attn_launch_shape shape_of(const attn_problem *p) {
    return {"fa3_kernel", p->D == 64 ? plan<64, V>::threads : plan<128, V>::threads,
            p->D == 64 ? (size_t)plan<64, V>::smem : (size_t)plan<128, V>::smem};
}

/* fp16/bf16, D = 64 or 128, causal, dense layout only (no varlen) */
constexpr attn_requirements fa3_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = 128, .d_multiple = 64, .causal = true};

const attn_kernel fa3_kernels[] = {
    {ATTN_VERSION(1, "fa3_wgmma",
                  "one warpgroup, Q and K/V by TMA (an mbarrier counts the bytes), S and P V by "
                  "wgmma from shared-memory descriptors; synchronous"),
     .launch = launch_version<1>, .req = fa3_requirements, .launch_shape = shape_of<1>},
    {ATTN_VERSION(2, "fa3_warpspec",
                  "warp specialisation: a producer warpgroup fills a 2-stage K/V ring (full/empty "
                  "mbarriers, setmaxnreg), two consumer warpgroups compute"),
     .launch = launch_version<2>, .req = fa3_requirements, .launch_shape = shape_of<2>},
    {ATTN_VERSION(3, "fa3_pingpong",
                  "the consumers take turns on the tensor cores (named barriers); the next Q K^T "
                  "is issued before this tile's softmax, P V of the previous one behind it"),
     .launch = launch_version<3>, .req = fa3_requirements, .launch_shape = shape_of<3>},
};

} // namespace

extern "C" const attn_example flash3_fwd_example = {
    .name = "10_flash_attention_3",
    .summary = "FlashAttention-3 forward on Hopper: wgmma, TMA, warp specialisation, ping-pong",
    ATTN_KERNELS(fa3_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {2, 16, 4096, 128}, .sim = {1, 2, 256, 64}},
};
