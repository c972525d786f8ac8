/* deepseek_v4.cu — Example 12: DeepSeek-V4's hybrid attention, compressed sparse attention (CSA)
 * and heavily compressed attention (HCA). Example 05's V3.2 indexer scores every past token; V4
 * first compresses the sequence, m tokens into one entry, and then attends to (CSA) the top-k
 * entries that the lightning indexer picks, or (HCA, m = 128) every entry, plus a sliding window
 * of recent uncompressed tokens, under one softmax that also holds a per-head sink.
 *
 *   entry w   = RoPE_{w m}( RMSNorm( sum_slots softmax_slots(gate + bias) * value ) )  per channel
 *               CSA slots: window w-1's first channel half + window w's second half (2m slots);
 *               HCA slots: window w (m slots)
 *   visible   : entry w to the query at t iff (w+1) m <= t+1 (its window is complete)
 *   CSA       : S_t = top-k over visible w of sum_h wI(t,h) ReLU(qI(t,h) . kI_w)
 *   output    : O_t = RoPE_{-t}( softmax over {window tokens} + S_t (+ the sink) of q . k / sqrt(D)
 *                                weighting the same vectors as values )
 *
 * Versions, stage by stage (every kernel checked against deepseek_v4_reference.c):
 *   1 compress      (stage compress) one block per (entry, sequence): the gate softmax of every
 *                   channel over its slots in fp32, the block's RMS reduction, RoPE at w*m.
 *                   CSA also runs it on the indexer's projections (index_dim wide).
 *                   ./build/sim/examples/12_deepseek_v4/deepseek_v4_sim --kernel 1
 *   2 index_topk    (stage index, CSA) example 05's indexer kernel (tensor cores) over the
 *                   compressed index keys, the entries not yet visible set to -inf, example 05's
 *                   radix top-k: called, not copied (deepseek_sparse.h).
 *                   ./build/sim/examples/12_deepseek_v4/deepseek_v4_sim --kernel 2
 *   3 csa_attention (stage attention) one warp per (query, head): the window's tokens and the
 *                   selected entries in one online softmax, fp32 accumulation, the sink added to
 *                   the denominator at the end, the rotary part rotated back.
 *                   ./build/sim/examples/12_deepseek_v4/deepseek_v4_sim --kernel 3
 *   4 hca_attention (stage attention) the same walk over the window and every visible entry.
 *                   ./build/sim/examples/12_deepseek_v4/deepseek_v4_sim --kind hca --kernel 4
 *   5 decode        (stage attention) token by token: the streaming compressor (a ring of the last
 *                   2m tokens' projections, one entry every m tokens into a paged pool), CSA's
 *                   indexer and top-k for the one new query, attention reading entries through
 *                   the page table.
 *                   ./build/sim/examples/12_deepseek_v4/deepseek_v4_sim --kernel 5
 * All versions: fp16/bf16 storage, fp32 arithmetic; D a multiple of 32 up to 512.
 * A model's generation loop (v4_api.c) runs 1-4 on a prefill chunk's rows (v4_launch_prefill_rows)
 * and 5's body on one decoding step (v4_launch_decode_rows), the ring and pool kept between calls.
 *
 * Sections: kernels | launchers | registry. The reference is deepseek_v4_reference.c, the stages'
 * inputs and checks deepseek_v4_stages.c, main() main.c.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "deepseek_v4.h"
#include "device/dispatch.cuh"

/* ======================================== kernels ============================================ */

__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

/* Where token s of sequence b lives: a row of [B, L, width], or of a ring of `ring` rows. */
struct v4_rows {
    int L, ring, width;
    __device__ __forceinline__ int64_t at(int b, int s) const {
        return ring > 0 ? ((int64_t)b * ring + s % ring) * width : ((int64_t)b * L + s) * width;
    }
};

/* Where entry w of sequence b lives: [B, n_cap, d], or a page of the pool. */
struct v4_entries {
    int n_cap, d, page, pages_per_seq;
    const int32_t *page_table; /* NULL: linear */
    __device__ __forceinline__ int64_t at(int b, int w) const {
        if (page_table == NULL)
            return ((int64_t)b * n_cap + w) * d;
        const int32_t pg = page_table[b * pages_per_seq + w / page];
        return ((int64_t)pg * page + w % page) * d;
    }
};

template <typename T> struct compress_params {
    const T *x, *g;
    v4_rows rows;
    const float *bias, *norm;
    T *out;
    v4_entries dst;
    int d, m, first_entry, rope_dim;
    bool overlap;
    float eps, theta;
};

#define COMPRESS_THREADS 128

/* One block per (entry, sequence): blockIdx.x + first_entry = w, blockIdx.y = b. */
template <typename T> __global__ void compress_kernel(const compress_params<T> a) {
    __shared__ float e[V4_MAX_D];
    __shared__ float red[COMPRESS_THREADS];
    const int w = blockIdx.x + a.first_entry, b = blockIdx.y, tid = threadIdx.x;
    const int m = a.m, d = a.d;
    float ss = 0.0f;
    for (int ch = tid; ch < d; ch += blockDim.x) {
        /* the slots: (CSA) tokens of window w-1, channel ch; then window w, channel d + ch */
        const int first = a.overlap && w > 0 ? -m : 0;
        const int off = a.overlap ? d : 0;
        float mx = -INFINITY;
        for (int j = first; j < m; ++j) {
            const int col = j < 0 ? ch : off + ch, slot = j < 0 ? j + m : j;
            const int64_t r = a.rows.at(b, w * m + j) + col;
            mx = fmaxf(mx, to_f(a.g[r]) + a.bias[slot * a.rows.width + col]);
        }
        float sum = 0.0f, acc = 0.0f;
        for (int j = first; j < m; ++j) {
            const int col = j < 0 ? ch : off + ch, slot = j < 0 ? j + m : j;
            const int64_t r = a.rows.at(b, w * m + j) + col;
            const float p = __expf(to_f(a.g[r]) + a.bias[slot * a.rows.width + col] - mx);
            sum += p;
            acc += p * to_f(a.x[r]);
        }
        const float v = acc / sum;
        e[ch] = v;
        ss += v * v;
    }
    red[tid] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            red[tid] += red[tid + s];
        __syncthreads();
    }
    const float r = rsqrtf(red[0] / d + a.eps);
    T *out = a.out + a.dst.at(b, w);
    const int base = d - a.rope_dim;
    for (int ch = tid; ch < d; ch += blockDim.x) {
        const float v = e[ch] * r * a.norm[ch];
        if (ch < base) {
            out[ch] = from_f<T>(v);
            continue;
        }
        /* interleaved RoPE at the window's first position: pairs (base + 2i, base + 2i + 1) */
        const int i = (ch - base) / 2, partner = ch ^ 1;
        const float pv = e[partner] * r * a.norm[partner];
        const float ang = (float)(w * m) * powf(a.theta, -2.0f * i / a.rope_dim);
        float sn, cs;
        sincosf(ang, &sn, &cs);
        out[ch] = from_f<T>((ch & 1) == 0 ? v * cs - pv * sn : v * cs + pv * sn);
    }
}

/* Index scores of entries not yet visible (w >= (t+1)/m) set to -inf: rows [i0, i0 + chunk). */
__global__ void mask_invisible_kernel(float *logits, int chunk, int i0, int L, int n, int m) {
    const int row = blockIdx.x, b = blockIdx.y, t = i0 + row;
    if (t >= L)
        return;
    float *l = logits + ((int64_t)b * chunk + row) * n;
    for (int w = threadIdx.x; w < n; w += blockDim.x)
        if ((w + 1) * m > t + 1)
            l[w] = -INFINITY;
}

/* Copies token t's projections into the streaming compressor's ring (row t % ring). */
template <typename T>
__global__ void ring_store_kernel(const T *x, const T *g, T *rx, T *rg, int L, int ring, int width,
                                  int t) {
    const int b = blockIdx.x;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        rx[((int64_t)b * ring + t % ring) * width + i] = x[((int64_t)b * L + t) * width + i];
        rg[((int64_t)b * ring + t % ring) * width + i] = g[((int64_t)b * L + t) * width + i];
    }
}

template <typename T> struct attn_params {
    const T *q, *kv;
    const T *comp;
    v4_entries ent;
    const int32_t *sel; /* CSA: [B*L, K]; NULL: HCA, every visible entry */
    int K, n;           /* selection width, entries emitted over the whole sequence */
    const float *sinks;
    T *o;
    int B, L, H, D, m, window, t0, rope_dim;
    float theta;
};

#define ATTN_WARPS 4
#define MAX_PER_LANE (V4_MAX_D / 32)

/* One key (window token or entry) into a warp's online softmax. */
template <typename T>
__device__ __forceinline__ void online_key(const T *k, const float *qv, int per_lane, int lane,
                                           float scale, float &mx, float &l, float *acc) {
    float kv[MAX_PER_LANE];
    float dot = 0.0f;
    for (int j = 0; j < per_lane; ++j) {
        kv[j] = to_f(k[lane + 32 * j]);
        dot += qv[j] * kv[j];
    }
    for (int off = 16; off > 0; off >>= 1)
        dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float s = dot * scale;
    const float mnew = fmaxf(mx, s);
    const float corr = __expf(mx - mnew), p = __expf(s - mnew);
    l = l * corr + p;
    for (int j = 0; j < per_lane; ++j)
        acc[j] = acc[j] * corr + p * kv[j];
    mx = mnew;
}

/* One warp per (query, head): blockIdx.x + t0 = t, blockIdx.y = b, heads strided over warps. */
template <typename T> __global__ void attention_kernel(const attn_params<T> a) {
    const int t = blockIdx.x + a.t0, b = blockIdx.y;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int per_lane = a.D / 32;
    const float scale = rsqrtf((float)a.D);
    const int lo = t - a.window + 1 > 0 ? t - a.window + 1 : 0;
    int vis = (t + 1) / a.m;
    vis = vis < a.n ? vis : a.n;
    for (int h = warp; h < a.H; h += ATTN_WARPS) {
        const T *q = a.q + (((int64_t)b * a.L + t) * a.H + h) * a.D;
        float qv[MAX_PER_LANE], acc[MAX_PER_LANE];
        for (int j = 0; j < per_lane; ++j) {
            qv[j] = to_f(q[lane + 32 * j]);
            acc[j] = 0.0f;
        }
        float mx = -INFINITY, l = 0.0f;
        for (int s = lo; s <= t; ++s) /* the sliding window: tokens as they are */
            online_key(a.kv + ((int64_t)b * a.L + s) * a.D, qv, per_lane, lane, scale, mx, l, acc);
        if (a.sel != NULL) { /* CSA: the selected entries still visible (-1: an empty slot) */
            const int32_t *row = a.sel + ((int64_t)b * a.L + t) * a.K;
            for (int j = 0; j < a.K; ++j) {
                const int w = row[j];
                if (w >= 0 && w < vis)
                    online_key(a.comp + a.ent.at(b, w), qv, per_lane, lane, scale, mx, l, acc);
            }
        } else { /* HCA: every visible entry */
            for (int w = 0; w < vis; ++w)
                online_key(a.comp + a.ent.at(b, w), qv, per_lane, lane, scale, mx, l, acc);
        }
        /* the sink: one more term of the denominator, with no value */
        const float sink = a.sinks[h], mnew = fmaxf(mx, sink);
        l = l * __expf(mx - mnew) + __expf(sink - mnew);
        const float inv = __expf(mx - mnew) / l;
        T *o = a.o + (((int64_t)b * a.L + t) * a.H + h) * a.D;
        const int base = a.D - a.rope_dim;
        for (int j = 0; j < per_lane; ++j) {
            const int ch = lane + 32 * j;
            const float v = acc[j] * inv;
            const float pv = __shfl_xor_sync(0xffffffffu, v, 1); /* channel ch ^ 1 */
            float out = v;
            if (ch >= base) { /* rotate back by -t */
                const int i = (ch - base) / 2;
                const float ang = (float)t * powf(a.theta, -2.0f * i / a.rope_dim);
                float sn, cs;
                sincosf(ang, &sn, &cs);
                out = (ch & 1) == 0 ? v * cs + pv * sn : v * cs - pv * sn;
            }
            o[ch] = from_f<T>(out);
        }
    }
}

/* ======================================== launchers ========================================== */

static int v4_entries_total(const v4_config *c) { return c->L / c->m; }

template <typename T>
static void compress_one(const v4_args *a, const void *x, const void *g, const float *bias,
                         const float *norm, void *out, v4_entries dst, int d, v4_rows rows,
                         int first, int count, cudaStream_t stream) {
    const v4_config *c = &a->c;
    compress_params<T> p{(const T *)x,  (const T *)g,
                         rows,          bias,
                         norm,          (T *)out,
                         dst,           d,
                         c->m,          first,
                         c->rope_dim,   c->kind == V4_CSA,
                         (float)c->eps, (float)c->rope_theta};
    compress_kernel<T><<<dim3(count, c->B), COMPRESS_THREADS, 0, stream>>>(p);
}

template <typename T> static void compress_all(const v4_args *a, cudaStream_t stream) {
    const v4_config *c = &a->c;
    const int n = v4_entries_total(c), wm = c->kind == V4_CSA ? 2 : 1;
    if (n == 0)
        return;
    compress_one<T>(a, a->ckv, a->cgate, a->cbias, a->cnorm, a->comp,
                    v4_entries{n, c->D, 1, 0, NULL}, c->D, v4_rows{c->L, 0, wm * c->D}, 0, n,
                    stream);
    if (c->kind == V4_CSA)
        compress_one<T>(a, a->ikv, a->igate, a->ibias, a->inorm, a->icomp,
                        v4_entries{n, c->DI, 1, 0, NULL}, c->DI, v4_rows{c->L, 0, 2 * c->DI}, 0, n,
                        stream);
}

extern "C" void v4_launch_compress(const v4_args *a, cudaStream_t stream) {
    attn_dispatch_dtype(a->p->dtype,
                        [&](auto t) { compress_all<typename decltype(t)::type>(a, stream); });
}

/* Example 05's indexer and radix top-k on the rows [i0, i0 + chunk) (ds->chunk rows). */
static void index_rows(const v4_args *a, const ds_args *ds, int i0, cudaStream_t stream) {
    const v4_config *c = &a->c;
    ds_launch_indexer(ds, i0, stream);
    mask_invisible_kernel<<<dim3(ds->chunk, c->B), 128, 0, stream>>>(
        ds->logits, ds->chunk, i0, c->L, v4_entries_total(c), c->m);
    ds_launch_topk_radix(ds, i0, stream);
}

extern "C" void v4_launch_index_topk(const v4_args *a, cudaStream_t stream) {
    if (v4_entries_total(&a->c) > 0)
        index_rows(a, &((const ds_args *)a->ds)[0], 0, stream);
}

template <typename T>
static void attention_rows(const v4_args *a, const void *comp, v4_entries ent, void *o, int t0,
                           int rows, cudaStream_t stream) {
    const v4_config *c = &a->c;
    const int n = v4_entries_total(c);
    const ds_args *ds = (const ds_args *)a->ds;
    attn_params<T> p{(const T *)a->q,
                     (const T *)a->kv,
                     (const T *)comp,
                     ent,
                     c->kind == V4_CSA && n > 0 ? a->sel : NULL,
                     c->kind == V4_CSA && n > 0 ? ds[0].topk : 0,
                     n,
                     a->sinks,
                     (T *)o,
                     c->B,
                     c->L,
                     c->H,
                     c->D,
                     c->m,
                     c->window,
                     t0,
                     c->rope_dim,
                     (float)c->rope_theta};
    attention_kernel<T><<<dim3(rows, c->B), 32 * ATTN_WARPS, 0, stream>>>(p);
}

template <typename T> static void attention_all(const v4_args *a, cudaStream_t stream) {
    const v4_config *c = &a->c;
    attention_rows<T>(a, a->comp, v4_entries{v4_entries_total(c), c->D, 1, 0, NULL}, a->o, 0, c->L,
                      stream);
}

extern "C" void v4_launch_attention(const v4_args *a, cudaStream_t stream) {
    attn_dispatch_dtype(a->p->dtype,
                        [&](auto t) { attention_all<typename decltype(t)::type>(a, stream); });
}

/* Token t's projections (and CSA's indexer's) into the streaming compressor's ring. */
template <typename T> static void ring_store(const v4_args *a, int t, cudaStream_t stream) {
    const v4_config *c = &a->c;
    const int csa = c->kind == V4_CSA;
    const int ring = csa ? 2 * c->m : c->m, width = (csa ? 2 : 1) * c->D;
    ring_store_kernel<T><<<c->B, 128, 0, stream>>>((const T *)a->ckv, (const T *)a->cgate,
                                                   (T *)a->ring_kv, (T *)a->ring_gate, c->L, ring,
                                                   width, t);
    if (csa)
        ring_store_kernel<T><<<c->B, 128, 0, stream>>>((const T *)a->ikv, (const T *)a->igate,
                                                       (T *)a->ring_ikv, (T *)a->ring_igate, c->L,
                                                       ring, 2 * c->DI, t);
}

/* What the decode and the prefill of rows both use: the n entries in all, csa (the layer's
 * kind), the ring of the streaming compressor (its rows and a row's width: 2m rows of 2D for
 * CSA's overlapping windows, m rows of D for HCA) and the paged pool of compressed entries. */
struct v4_row_setup {
    int n, csa, ring, width;
    v4_entries pool;
};
static v4_row_setup v4_row_setup_of(const v4_args *a) {
    const v4_config *c = &a->c;
    const int csa = c->kind == V4_CSA;
    return {v4_entries_total(c), csa, csa ? 2 * c->m : c->m, (csa ? 2 : 1) * c->D,
            v4_entries{0, c->D, c->page, a->pages_per_seq, a->page_table}};
}

/* The per-token body of the decode: rows [t0, t1) of every sequence, one token at a time. */
template <typename T>
static void decode_rows(const v4_args *a, int t0, int t1, cudaStream_t stream) {
    const v4_config *c = &a->c;
    const auto [n, csa, ring, width, pool] = v4_row_setup_of(a);
    for (int t = t0; t < t1; ++t) {
        ring_store<T>(a, t, stream);
        if ((t + 1) % c->m == 0) { /* a window closed: one entry */
            const int w = (t + 1) / c->m - 1;
            compress_one<T>(a, a->ring_kv, a->ring_gate, a->cbias, a->cnorm, a->pool, pool, c->D,
                            v4_rows{c->L, ring, width}, w, 1, stream);
            if (csa)
                compress_one<T>(a, a->ring_ikv, a->ring_igate, a->ibias, a->inorm, a->icomp,
                                v4_entries{n, c->DI, 1, 0, NULL}, c->DI,
                                v4_rows{c->L, ring, 2 * c->DI}, w, 1, stream);
        }
        if (csa && n > 0)
            index_rows(a, &((const ds_args *)a->ds)[1], t, stream);
        attention_rows<T>(a, a->pool, pool, a->o, t, 1, stream);
    }
}

extern "C" void v4_launch_decode(const v4_args *a, cudaStream_t stream) {
    v4_launch_decode_rows(a, 0, a->c.L, stream);
}

extern "C" void v4_launch_decode_rows(const v4_args *a, int t0, int t1, cudaStream_t stream) {
    attn_dispatch_dtype(
        a->p->dtype, [&](auto t) { decode_rows<typename decltype(t)::type>(a, t0, t1, stream); });
}

/* A chunk of rows [t0, t1) at once (kernels 1-4): the entries whose window closes in the chunk
 * from the token buffers into the pool, the chunk's index scores and top-k (example 05's, ds[0]
 * with its chunk set to the rows), the rows' attention; then the chunk's last tokens into the
 * ring, where the decode's streaming compressor continues. */
template <typename T>
static void prefill_rows(const v4_args *a, int t0, int t1, cudaStream_t stream) {
    const v4_config *c = &a->c;
    const auto [n, csa, ring, width, pool] = v4_row_setup_of(a);
    const int first = t0 / c->m, count = t1 / c->m - first;
    if (count > 0) {
        compress_one<T>(a, a->ckv, a->cgate, a->cbias, a->cnorm, a->pool, pool, c->D,
                        v4_rows{c->L, 0, width}, first, count, stream);
        if (csa)
            compress_one<T>(a, a->ikv, a->igate, a->ibias, a->inorm, a->icomp,
                            v4_entries{n, c->DI, 1, 0, NULL}, c->DI, v4_rows{c->L, 0, 2 * c->DI},
                            first, count, stream);
    }
    if (csa && n > 0) {
        ds_args d = ((const ds_args *)a->ds)[0];
        d.chunk = t1 - t0;
        index_rows(a, &d, t0, stream);
    }
    attention_rows<T>(a, a->pool, pool, a->o, t0, t1 - t0, stream);
    for (int t = t1 - ring > t0 ? t1 - ring : t0; t < t1; ++t)
        ring_store<T>(a, t, stream);
}

extern "C" void v4_launch_prefill_rows(const v4_args *a, int t0, int t1, cudaStream_t stream) {
    attn_dispatch_dtype(
        a->p->dtype, [&](auto t) { prefill_rows<typename decltype(t)::type>(a, t0, t1, stream); });
}

/* ======================================== registry =========================================== */

ATTN_LAUNCH_ARGS(run_compress, v4_launch_compress, v4_args)
ATTN_LAUNCH_ARGS(run_index, v4_launch_index_topk, v4_args)
ATTN_LAUNCH_ARGS(run_attention, v4_launch_attention, v4_args)
ATTN_LAUNCH_ARGS(run_decode, v4_launch_decode, v4_args)

/* fp16/bf16, D a multiple of 32 up to 512; no causal flag (the layer is causal by definition),
 * no varlen */
static const attn_requirements v4_requirements = {
    .dtypes = ATTN_DTYPES_F16_BF16, .max_d = V4_MAX_D, .d_multiple = 32};

static const attn_stage v4_stages[] = {
    {"compress", false, NULL, v4_clear_compress, v4_check_compress},
    {"index", false, NULL, v4_clear_index, v4_check_index},
    {"attention", false, NULL, v4_clear_attention, v4_check_attention},
};

/* A row of the registry: each kernel, its launcher and its stage; every one has the layer's
 * requirements. */
#define V4_KERNEL(id, name, what, run, stage_)                                                     \
    { ATTN_VERSION(id, name, what), .launch = run, .req = v4_requirements, .stage = stage_ }
static const attn_kernel v4_kernels[] = {
    V4_KERNEL(V4_K_COMPRESS, "compress",
              "every complete window -> one entry: gate softmax, RMSNorm, RoPE", run_compress,
              V4_STAGE_COMPRESS),
    V4_KERNEL(V4_K_INDEX, "index_topk",
              "CSA: example 05's indexer and radix top-k over the entries", run_index,
              V4_STAGE_INDEX),
    V4_KERNEL(V4_K_CSA, "csa_attention",
              "window + selected entries, one online softmax with the sink", run_attention,
              V4_STAGE_ATTENTION),
    V4_KERNEL(V4_K_HCA, "hca_attention",
              "window + every visible entry, one online softmax with the sink", run_attention,
              V4_STAGE_ATTENTION),
    V4_KERNEL(V4_K_DECODE, "decode",
              "token by token: streaming compressor, paged entries, attention", run_decode,
              V4_STAGE_ATTENTION),
};
#undef V4_KERNEL

#define OPT(field) offsetof(v4_options, field)
static const attn_option v4_option_table[] = {
    {"--kind", "KIND", "the layer: csa (overlapping windows, indexer, top-k) or hca (dense)",
     ATTN_OPTION_CHOICE, OPT(kind), 0, 0, "csa|hca", "csa", NULL},
    {"-m", "M", "compression rate: tokens per compressed entry (V4: 4 for CSA, 128 for HCA)",
     ATTN_OPTION_INT, OPT(m), 1, 512, NULL, "4", NULL},
    {"--window", "N", "sliding window n_win, the query included (V4: 128)", ATTN_OPTION_INT,
     OPT(window), 1, 1 << 20, NULL, "16", NULL},
    {"--topk", "K", "CSA: entries selected per query (V4-Flash: 512)", ATTN_OPTION_INT, OPT(topk),
     0, 1 << 20, NULL, "8", NULL},
    {"--index-heads", "N", "CSA: indexer heads (example 05's kernel: 16, 32, 48 or 64)",
     ATTN_OPTION_INT, OPT(index_heads), 16, 64, NULL, "16", NULL},
    {"--index-dim", "N", "CSA: indexer head dimension (64 or 128)", ATTN_OPTION_INT, OPT(index_dim),
     64, 128, NULL, "64", NULL},
    {"--rope-dim", "N", "rotated channels at the end of every vector (V4: 64)", ATTN_OPTION_INT,
     OPT(rope_dim), 2, V4_MAX_D, NULL, "16", NULL},
    {"--page", "N", "decode: compressed entries per page of the pool", ATTN_OPTION_INT, OPT(page),
     1, 1 << 16, NULL, "4", NULL},
};
#undef OPT

static const attn_module v4_module = {
    ATTN_MODULE_OPTIONS(v4_option_table, v4_options),
    .state_size = sizeof(v4_state),
    .prepare = v4_prepare,
    .verdict = v4_verdict,
    .banner = v4_banner,
    ATTN_STAGES(v4_stages),
    .setup = v4_setup,
    .flops = v4_flops,
    .release = v4_release,
};

extern "C" const attn_example deepseek_v4_example = {
    .name = "12_deepseek_v4",
    .summary = "DeepSeek-V4 attention: compressed entries (CSA with indexer and top-k, HCA dense), "
               "a sliding window and a sink, prefill and decode",
    ATTN_KERNELS(v4_kernels),
    /* B, H, L, D */
    .defaults = {.gpu = {1, 16, 2048, 512}, .sim = {1, 4, 64, 64}},
    .module = &v4_module,
};
