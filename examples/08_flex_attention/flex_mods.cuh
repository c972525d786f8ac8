/* flex_mods.cuh (example 08) — the modifications, each written once: FlexAttention's score_mod
 * and mask_mod as small C++ function objects that the CPU reference calls on the host (in double
 * precision) and the kernels inline on the device (in float). The kernel is a template on the
 * modification's type, so the compiler generates one kernel per modification with the functor's
 * few instructions inlined where the scores are: no function pointer, no branch on the kind.
 *
 *   mask_mod(b, h, q_idx, kv_idx) -> bool      may query q_idx see key kv_idx?
 *   score_mod(s, b, h, q_idx, kv_idx) -> s'    the scaled score s = scale * q.k, modified
 *
 * q_idx and kv_idx are positions inside sequence b (FlexAttention's arguments). The chapter
 * aligns queries bottom-right (attn/problem.h): query i sits at position a = i + off with
 * off = Lk - Lq, which is what every functor below compares keys with; for Lq = Lk, a = i.
 *
 *   mask_mods                                      score_mods
 *   flex_causal          kv <= a                   flex_alibi      s + slope(h) * (kv - a)
 *   flex_window    w     a - kv < w                flex_softcap    cap * tanh(s / cap)
 *   flex_prefix    p     kv < p                    flex_rel_bias   s + bias[h][clamp(a - kv)]
 *   flex_document  doc   doc[a] == doc[kv]         flex_identity   s
 *   flex_all             every key
 *   flex_and<A, B>, flex_or<A, B>                  combinations of mask_mods
 *
 * and a modification is the pair flex_mod<Mask, Score> (a bias on a mask: flex_mod<flex_causal,
 * flex_alibi>). The modifications the example compiles are listed in flex_attention.h; the
 * PyTorch versions, side by side with these, in flex_attention.py and the README.
 *
 * A score_mod is a template on its floating type F: the reference runs it in double, a kernel in
 * float. A mask_mod must not depend on the head (FlexAttention's H=None): the block mask is built
 * once per sequence and shared by the heads. Both are called only at q_idx < Lq and kv_idx < Lk.
 *
 * Include after <cuda_runtime.h> (nvcc or the simulator). C++ only. */
#ifndef FLEX_MODS_CUH
#define FLEX_MODS_CUH

#include <math.h>

#define FLEX_HD __host__ __device__ __forceinline__

/* The math a functor uses, in the precision it is called with. */
FLEX_HD float flex_tanh(float x) { return tanhf(x); }
FLEX_HD double flex_tanh(double x) { return tanh(x); }
FLEX_HD float flex_exp2(float x) { return exp2f(x); }
FLEX_HD double flex_exp2(double x) { return exp2(x); }
/* cos and sin of an angle: in double on the host (the reference); in float, the angle is first
 * reduced to [-pi, pi] by two fused multiply-adds (Cody and Waite: 2 pi as a float and the float
 * of its remainder, exact for any float angle below 2^24) and then the fast __sincosf applies
 * (absolute error about 4e-7 there), which keeps the slow path that the accurate sincosf carries
 * for large arguments (a local-memory table) out of the kernel. */
FLEX_HD void flex_sincos(double x, double *s, double *c) {
    *s = sin(x);
    *c = cos(x);
}
FLEX_HD void flex_sincos(float x, float *s, float *c) {
    const float k = rintf(x * 0.159154943f); /* x / (2 pi), to the nearest integer */
    float r = fmaf(-k, 6.28318548f, x);      /* float(2 pi), slightly above 2 pi */
    r = fmaf(-k, -1.74845553e-7f, r);        /* 2 pi - float(2 pi) */
#ifdef __CUDA_ARCH__
    __sincosf(r, s, c);
#else
    *s = sinf(r);
    *c = cosf(r);
#endif
}

/* ---- mask_mods ------------------------------------------------------------------------------- */

/* Causal, bottom-right aligned: a key at or before the query's position. */
struct flex_causal {
    int off; /* Lk - Lq */
    FLEX_HD bool operator()(int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h;
        return kv_idx <= q_idx + off;
    }
};

/* The w most recent positions, the query's own included (with flex_causal: Mistral's sliding
 * window, example 04's causal_window:w). */
struct flex_window {
    int off, w;
    FLEX_HD bool operator()(int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h;
        return q_idx + off - kv_idx < w;
    }
};

/* The first p positions, the prefix every query sees (with flex_causal by or: prefix-LM). */
struct flex_prefix {
    int p;
    FLEX_HD bool operator()(int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h, (void)q_idx;
        return kv_idx < p;
    }
};

/* Document masking over packed sequences: doc[pos] is the document of position pos (Lk entries,
 * non-decreasing); a query sees the keys of its own document. A query whose aligned position lies
 * before the first key (Lq > Lk) belongs to no document. */
struct flex_document {
    const int *doc; /* [Lk]: host memory for the reference, device memory for a kernel */
    int off;
    FLEX_HD bool operator()(int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h;
        const int a = q_idx + off;
        return a >= 0 && doc[a] == doc[kv_idx];
    }
};

/* No mask: every key (the score_mods alone). */
struct flex_all {
    static constexpr bool all = true;
    FLEX_HD bool operator()(int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h, (void)q_idx, (void)kv_idx;
        return true;
    }
};

template <class A, class B> struct flex_and {
    A a;
    B b;
    FLEX_HD bool operator()(int bi, int h, int q_idx, int kv_idx) const {
        return a(bi, h, q_idx, kv_idx) && b(bi, h, q_idx, kv_idx);
    }
};

template <class A, class B> struct flex_or {
    A a;
    B b;
    FLEX_HD bool operator()(int bi, int h, int q_idx, int kv_idx) const {
        return a(bi, h, q_idx, kv_idx) || b(bi, h, q_idx, kv_idx);
    }
};

/* ---- score_mods ------------------------------------------------------------------------------ */

/* The score unchanged: the kernel then scales S exactly as the plain kernel does. */
struct flex_identity {
    static constexpr bool identity = true;
    template <class F> FLEX_HD F operator()(F s, int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h, (void)q_idx, (void)kv_idx;
        return s;
    }
};

/* ALiBi (Press, Smith, Lewis 2022): a linear penalty m_h * (kv - a) on the distance, with head
 * slopes from the geometric sequence of the paper. For H a power of two, m_h = 2^(-8(h+1)/H)
 * (h = 0 .. H-1). Otherwise, with n the largest power of two below H: the n slopes of n heads,
 * then the first H - n of the odd-numbered slopes of 2n heads, 2^(-4(2k+1)/n), k = h - n. */
template <class F> FLEX_HD F flex_alibi_slope(int h, int H) {
    int n = 1;
    while (2 * n <= H)
        n *= 2;
    return h < n ? flex_exp2(F(-8 * (h + 1)) / F(n)) : flex_exp2(F(-4 * (2 * (h - n) + 1)) / F(n));
}

/* The slopes come as a table made once by flex_alibi_slope (rounded to fp32, for the reference
 * and the kernels alike): the score_mod then reads m_h, the same address for every score of a
 * head, rather than computing an exp2 per score (what a per-score call costs: README,
 * "Measured: what the compiler makes of a modification"). */
struct flex_alibi {
    const float *slopes; /* [H]: host memory for the reference, device memory for a kernel */
    int off;
    template <class F> FLEX_HD F operator()(F s, int b, int h, int q_idx, int kv_idx) const {
        (void)b;
        return s + F(slopes[h]) * F(kv_idx - (q_idx + off));
    }
};

/* Soft-capping (Gemma 2): the score squashed into (-cap, cap) by cap * tanh(s / cap), written
 * with the reciprocal 1 / cap (a multiplication, as compiled FlexAttention does). */
struct flex_softcap {
    float cap, inv_cap; /* cap > 0, inv_cap = 1 / cap */
    template <class F> FLEX_HD F operator()(F s, int b, int h, int q_idx, int kv_idx) const {
        (void)b, (void)h, (void)q_idx, (void)kv_idx;
        return F(cap) * flex_tanh(s * F(inv_cap));
    }
};

/* A learned relative-position bias with clipped distances (Shaw et al. 2018's clipping, as one
 * scalar per head and distance): bias[h][d + r] with d = a - kv clamped to [-r, r], one table of
 * 2r + 1 values per head. T5's bias buckets the distance logarithmically instead (not built). */
struct flex_rel_bias {
    const float *table; /* [H][2r + 1]: host memory for the reference, device memory for a kernel */
    int off, r;
    template <class F> FLEX_HD F operator()(F s, int b, int h, int q_idx, int kv_idx) const {
        (void)b;
        int d = q_idx + off - kv_idx;
        d = d < -r ? -r : (d > r ? r : d);
        return s + F(table[h * (2 * r + 1) + d + r]);
    }
};

/* ---- a modification -------------------------------------------------------------------------- */

template <class Mask, class Score> struct flex_mod {
    Mask mask;
    Score score;
};

/* ---- rotary position embedding (RoPE), rotate-half convention (GPT-NeoX, Hugging Face) ----------
 * (Meta's Llama code rotates interleaved pairs (2c, 2c + 1) instead; see the README, "Fused RoPE")
 * Element c < D/2 of a row at position pos pairs with element c + D/2; the pair turns by the angle
 * pos * theta_c, theta_c = base^(-2c/D):
 *     x'_c        = x_c cos - x_{c+D/2} sin
 *     x'_{c+D/2}  = x_{c+D/2} cos + x_c sin
 * The angle is formed in fp32 (float(pos) * inv_freq[c], inv_freq rounded to fp32 on the host), as
 * the PyTorch implementations form it, so that the host (cos/sin in double) and a kernel (in
 * float) turn by the same angle. */
template <class F> FLEX_HD void flex_rope_pair(F x1, F x2, int pos, float inv_freq, F *y1, F *y2) {
    const float angle = (float)pos * inv_freq;
    F s, c;
    flex_sincos(F(angle), &s, &c);
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}

#endif /* FLEX_MODS_CUH */
