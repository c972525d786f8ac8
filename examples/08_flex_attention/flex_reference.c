/* flex_reference.c — example 08's reference's own RoPE and ALiBi, and the inputs hook that
 * rotates the seeded Q and K for --rope (and derives the LSE check's allowance for flex_rope).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/example.h"
#include "attn/profile.h"
#include "attn/tensor.h"
#include "flex_module.h"

/* ---- the reference's own RoPE and ALiBi --------------------------------------------------------
 * Written here from their published definitions, not with the functors the kernels inline
 * (flex_mods.cuh): a wrong sign in the kernels' rotation or a slope given to the wrong head is
 * then a difference the check sees, where a reference calling the same functors would agree with
 * it. */

/* ALiBi's slope of head h of H (Press, Smith, Lewis, "Train Short, Test Long", 2022): for H a
 * power of two the geometric sequence that starts at 2^(-8/H) and has that ratio, so head h has
 * (2^(-8/H))^(h+1): 1/2, 1/4, ..., 1/256 for 8 heads. For other H the authors' code takes the
 * n = 2^floor(log2 H) slopes of n heads, then the 1st, 3rd, 5th, ... slopes of 2n heads, H - n
 * of them. */
double flex_ref_alibi_slope(int h, int H) {
    int n = 1;
    while (2 * n <= H)
        n *= 2;
    if (h < n)
        return pow(pow(2.0, -8.0 / n), h + 1);
    return pow(pow(2.0, -8.0 / (2 * n)), 2 * (h - n) + 1); /* index 2(h - n) of 2n heads' */
}

/* ALiBi's score_mod: the distance penalty m_h (kv - q) on the aligned positions (query i at
 * i + Lk - Lq), in double with the exact slope. */
double flex_ref_alibi_score(const void *ctx, int b, int h, int i, int j, double s) {
    (void)b;
    const flex_state *st = (const flex_state *)ctx;
    return s + st->ref_slopes[h] * (double)(j - (i + st->host.Lk - st->host.Lq));
}

/* RoPE, rotate-half convention (GPT-NeoX, Llama): elements c and c + D/2 of a row at position pos
 * are the real and imaginary parts of one complex number, multiplied by e^(i pos theta_c); the
 * angle is formed in fp32, float(pos) * inv_freq[c] (the convention the kernels and PyTorch's
 * implementations share), the product in double, each value rounded to the dtype. */
static void rope_rows(float *x, int64_t n, int D, int pos0, const float *inv_freq, attn_dtype t) {
    for (int64_t r = 0; r < n; ++r) {
        float *row = x + r * D;
        for (int c = 0; c < D / 2; ++c) {
            const double angle = (double)((float)(pos0 + (int)r) * inv_freq[c]);
            const double re = row[c], im = row[c + D / 2], wr = cos(angle), wi = sin(angle);
            row[c] = attn_round_dtype((float)(re * wr - im * wi), t);
            row[c + D / 2] = attn_round_dtype((float)(re * wi + im * wr), t);
        }
    }
}

/* The largest Euclidean norm of the rows of x ([rows, D]). */
static double largest_row_norm(const float *x, size_t rows, int D) {
    double most = 0.0;
    for (size_t r = 0; r < rows; ++r) {
        double n2 = 0.0;
        for (int d = 0; d < D; ++d)
            n2 += (double)x[r * D + d] * x[r * D + d];
        most = n2 > most ? n2 : most;
    }
    return sqrt(most);
}

/* flex_rope rotates Q and K itself (in fp32, rounding each value to the dtype) where the reference
 * rotates them in double: the two roundings of one value may land one unit apart, and a unit is at
 * most 2u |x| + s (u: the dtype's unit roundoff, s: its smallest subnormal step). A score moves by
 * at most |scale| sum_d (|dq||k| + |q||dk| + |dq||dk|) <= |scale| ((4u + 4u^2) |q| |k| + ...) by
 * Cauchy-Schwarz with the largest row norms, and the LSE (1-Lipschitz in the scores) no more. */
static double rope_lse_allowance(const attn_problem *p, const attn_host_inputs *in) {
    const double u = p->dtype == ATTN_F32 ? 0x1p-24 : p->dtype == ATTN_BF16 ? 0x1p-8 : 0x1p-11;
    const double step = p->dtype == ATTN_F32    ? 0x1p-149
                        : p->dtype == ATTN_BF16 ? 0x1p-133
                                                : 0x1p-24;
    const double qn = largest_row_norm(in->q, in->q_elems / p->D, p->D);
    const double kn = largest_row_norm(in->k, in->k_elems / p->D, p->D);
    const double dq = 2.0 * u * qn + step * sqrt((double)p->D),
                 dk = 2.0 * u * kn + step * sqrt((double)p->D);
    return fabs((double)p->scale) * (dq * kn + qn * dk + dq * dk);
}

/* --rope: the seeded Q and K kept for flex_rope, then rotated in place (key j at offset + j,
 * query i at offset + i + Lk - Lq) for the reference and the kernels that read them rotated. */
int flex_rope_inputs(void *state, const attn_problem *p, attn_host_inputs *in) {
    flex_state *s = (flex_state *)state;
    if (!s->opt.rope)
        return 0;
    const int D = p->D;
    for (int c = 0; c < D / 2; ++c)
        s->inv_freq[c] = (float)pow(s->rope_base, -2.0 * c / D);
    s->q_raw = (float *)attn_host_alloc(in->q_elems * sizeof(float), "the inputs before rotation");
    s->k_raw = (float *)attn_host_alloc(in->k_elems * sizeof(float), "the inputs before rotation");
    if (s->q_raw == NULL || s->k_raw == NULL)
        return 1;
    memcpy(s->q_raw, in->q, in->q_elems * sizeof(float));
    memcpy(s->k_raw, in->k, in->k_elems * sizeof(float));
    for (int bh = 0; bh < p->B * p->H; ++bh) {
        rope_rows(in->q + (size_t)bh * p->Lq * D, p->Lq, D, s->opt.rope_offset + p->Lk - p->Lq,
                  s->inv_freq, p->dtype);
        rope_rows(in->k + (size_t)bh * p->Lk * D, p->Lk, D, s->opt.rope_offset, s->inv_freq,
                  p->dtype);
    }
    in->lse_allowance = rope_lse_allowance(p, in);
    return 0;
}
