#!/usr/bin/env python3
"""flash2_fwd.py — PyTorch reference for Example 03 (FlashAttention-2 forward).

The loop order of flash2_fwd.cu written with PyTorch tensors, so that a reader can step through it
(in a debugger, or through the trace callback). One pass of the outer loop is one thread block of
the kernel; it owns Br = 64 query rows from start to finish:

    for each tile Q_i of Br query rows:                    one block (4 warps x 16 rows)
        m_i = -inf, l_i = 0, O_i = 0                        never leave the block
        n = keys the tile's last row may see                causal: i_last + Lk - Lq + 1
        for each tile K_j, V_j of Bc keys with j0 < n:      tiles above the diagonal: skipped
            S_ij  = scale * Q_i K_j^T                       [Br, Bc], masked entries -inf
            m_new = max(m_i, rowmax(S_ij))
            alpha = exp(m_i - m_new)                        rescales what was summed so far
            P_ij  = exp(S_ij - m_new)                       NOT divided by l
            l_i   = alpha * l_i + rowsum(P_ij)
            O_i   = alpha * O_i + P_ij V_j                  unnormalised
            m_i   = m_new
        O_i = O_i / l_i                                     once, after the last tile (deferred)
        LSE_i = m_i + log(l_i)                              rows that saw no key: 0 and -inf

Notation of Dao, "FlashAttention-2", 2023 (arXiv:2307.08691), Algorithm 1. Conventions shared
with the C harness (common/include/attn/problem.h): layout [B, H, L, D]; scale defaults to
1/sqrt(D); causal is bottom-right aligned (query i sees key j iff j <= i + Lk - Lq).

Variable length (flash2_fwd_varlen): FlashAttention's varlen layout, as the C harness's
--seqlens: Q packed [total_q, H, D], K/V [total_k, H, D], cu_seqlens_q/k of B+1 prefix offsets
(sequence b owns rows cu[b] .. cu[b+1]-1, a zero-length sequence owns none), LSE [H, total_q].
Each sequence runs the same tile loops on its own rows, causality aligned per sequence, as the
kernel's blocks do (attn_seq_head_at in kernel_common.cuh).

dtype=torch.float16 / torch.bfloat16 emulates version 2 (fa2_mma): Q, K, V rounded to the 16-bit
type, S accumulated in fp32, P rounded to the 16-bit type before P V (the kernel packs P into
the A fragments of the tensor-core mma), O accumulated in fp32 and rounded once at the end.

Run:
  python flash2_fwd.py             a short demo: tiles visited with and without causal, errors
                                   against F.scaled_dot_product_attention, the fp16/bf16 emulation
  python flash2_fwd.py --all       every check: against SDPA and against example 01's naive
                                   reference in float64 (tail tiles, Lq != Lk, causal, D = 64,
                                   80, 128), the causal tile skipping, the fp16/bf16 emulation by
                                   FlashAttention's 2x rule, any tile size, varlen batches (with
                                   an empty sequence) against SDPA per sequence
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "01_attention_basics")
)
from naive_attention import (  # noqa: E402
    causal_mask, naive_attention, random_qkv, run_script)

BR = 64  # query rows per tile = one thread block (both versions of flash2_fwd.cu)
BC_FP32 = 32  # keys per K/V tile, version 1 (fa2_fp32): one key per lane
BC_MMA = 64  # keys per K/V tile, version 2 (fa2_mma)
LOWP = (torch.float16, torch.bfloat16)

# ----------------------------------------------------------------------------------------------
# The reference
# ----------------------------------------------------------------------------------------------


def visible_keys(i, lq, lk, causal):
    """Keys 0 .. n-1 are the ones query row i may see (attn_visible_keys in kernel_common.cuh).
    A tile of rows needs the keys below visible_keys(its last row): that row sees the most."""
    if not causal:
        return lk
    return min(lk, max(0, i + lk - lq + 1))


def flash2_fwd(q, k, v, causal=False, scale=None, dtype=None, br=BR, bc=None, trace=None):
    """Returns (O, LSE) for q [B,H,Lq,D], k/v [B,H,Lk,D]; LSE is [B,H,Lq] (natural log).

    dtype None: computes in the inputs' precision (float64 or float32), Bc = 32 as fa2_fp32.
    dtype float16/bfloat16: emulates fa2_mma (Bc = 64); O comes back in that dtype, LSE in fp32.
    trace, if given, is called after every K/V tile as trace(i0, j0, m_i, l_i, o_i) with the
    running state of query tile i0 (o_i unnormalised).
    """
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    lowp = dtype is not None
    if lowp:
        assert dtype in LOWP, f"dtype must be one of {LOWP}"
        # The kernel's inputs are 16-bit; all arithmetic below is fp32 on the rounded values.
        q, k, v = (t.to(dtype).float() for t in (q, k, v))
    bc = (BC_MMA if lowp else BC_FP32) if bc is None else bc
    acc = q.dtype  # accumulation type: fp32 in the emulation, else the inputs' type
    neg_inf = float("-inf")

    o = torch.zeros(q.shape, dtype=acc)
    lse = torch.full(q.shape[:-1], neg_inf, dtype=acc)
    for i0 in range(0, lq, br):  # ---- outer loop: one thread block per query tile ----
        q_i = q[..., i0:i0 + br, :]  # [B,H,rows,D]; the last tile may have fewer rows
        rows = torch.arange(i0, i0 + q_i.shape[-2])
        m_i = torch.full(q_i.shape[:-1], neg_inf, dtype=acc)  # [B,H,rows] running max
        l_i = torch.zeros(q_i.shape[:-1], dtype=acc)  # running sum of exp(S - m_i)
        o_i = torch.zeros(q_i.shape, dtype=acc)  # unnormalised output
        # Causal: stop at the last key the tile's last row i_last = i0 + Br - 1 sees, so the
        # tiles wholly above the diagonal are never visited (the kernel never loads them).
        kv_end = visible_keys(i0 + br - 1, lq, lk, causal)
        for j0 in range(0, kv_end, bc):  # ---- inner loop: K/V tiles streamed past ----
            k_j, v_j = k[..., j0:j0 + bc, :], v[..., j0:j0 + bc, :]
            s_ij = scale * (q_i @ k_j.transpose(-2, -1))  # [B,H,rows,cols], fp32 accumulation
            if causal:  # only the tiles crossing the diagonal have masked entries
                cols = torch.arange(j0, j0 + k_j.shape[-2])
                s_ij = s_ij.masked_fill(cols[None, :] > rows[:, None] + (lk - lq), neg_inf)
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))
            # A row that has seen no visible key has m_new = -inf: subtract 0 instead, so that no
            # exponent is -inf - (-inf) = NaN (its P_ij is exp(-inf) = 0, its alpha 1 or 0).
            m_use = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m_i - m_use)
            p_ij = torch.exp(s_ij - m_use.unsqueeze(-1))  # in [0, 1], not normalised
            l_i = alpha * l_i + p_ij.sum(dim=-1)  # l from the fp32 P, as the kernel does
            if lowp:  # the kernel packs P to 16 bits as the A operand of the P V mma
                p_ij = p_ij.to(dtype).float()
            o_i = alpha.unsqueeze(-1) * o_i + p_ij @ v_j
            m_i = m_new
            if trace is not None:
                trace(i0, j0, m_i, l_i, o_i)
        # Deferred normalisation: one division per row, after the last tile.
        seen = l_i > 0
        inv_l = torch.where(seen, 1.0 / torch.where(seen, l_i, torch.ones_like(l_i)), 0.0)
        o[..., i0:i0 + br, :] = o_i * inv_l.unsqueeze(-1)
        lse[..., i0:i0 + br] = torch.where(seen, m_i + torch.log(l_i), neg_inf)
    if lowp:
        return o.to(dtype), lse
    return o, lse


def flash2_fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False, scale=None,
                      dtype=None, br=BR, bc=None):
    """Returns (O, LSE) for a packed batch: q [total_q,H,D], k/v [total_k,H,D], cu_seqlens_q/k
    lists of B+1 offsets; O is [total_q,H,D], LSE [H,total_q]. Sequence b is flash2_fwd on its
    own rows (moved to [1,H,L,D]); a sequence with no keys gives 0 and LSE -inf."""
    o = torch.zeros(q.shape, dtype=q.dtype if dtype is None else dtype)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"),
                     dtype=q.dtype if dtype is None else torch.float32)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = cu_seqlens_q[b], cu_seqlens_q[b + 1]
        k0, k1 = cu_seqlens_k[b], cu_seqlens_k[b + 1]
        if q1 == q0:  # an empty sequence: no block of the kernel visits it
            continue
        seq = lambda t, r0, r1: t[r0:r1].transpose(0, 1).unsqueeze(0)  # [1,H,L,D]
        o_b, lse_b = flash2_fwd(seq(q, q0, q1), seq(k, k0, k1), seq(v, k0, k1), causal=causal,
                                scale=scale, dtype=dtype, br=br, bc=bc)
        o[q0:q1] = o_b[0].transpose(0, 1)
        lse[:, q0:q1] = lse_b[0]
    return o, lse


def plain_lowp_attention(q, k, v, dtype, causal=False, scale=None):
    """A plain (untiled) implementation in the same precision, the yardstick of FlashAttention's
    error rule (attn_reference_lowp in common/src/reference.c): inputs in dtype, fp32 arithmetic,
    every stored intermediate — S, P = softmax(S), O — rounded to dtype."""
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    r = lambda t: t.to(dtype).float()  # round to dtype, keep computing in fp32
    q, k, v = r(q), r(k), r(v)
    s = r(scale * (q @ k.transpose(-2, -1)))
    if causal:
        s = s.masked_fill(~causal_mask(lq, lk), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isneginf(m), torch.zeros_like(m), m))
    l = e.sum(dim=-1, keepdim=True)
    p = r(torch.where(l > 0, e / torch.where(l > 0, l, torch.ones_like(l)), 0.0))
    return (p @ v).to(dtype)


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------

SHAPES = [  # (B, H, Lq, Lk, D): L < tile, tail tiles, one tile exactly, Lq != Lk both ways
    (1, 1, 1, 1, 64), (2, 1, 17, 17, 80), (1, 2, 64, 64, 64), (1, 1, 127, 127, 128),
    (2, 1, 129, 129, 80), (1, 1, 300, 300, 64), (1, 2, 64, 129, 64), (1, 2, 129, 64, 80),
    (1, 1, 1, 300, 128), (1, 1, 300, 17, 64), (1, 1, 17, 1, 128), (1, 1, 200, 127, 64),
]

LOWP_SHAPES = [  # the D of fa2_mma (64, 128); tails, Lq != Lk
    (1, 2, 17, 17, 64), (1, 1, 129, 129, 128), (1, 2, 300, 300, 64), (1, 1, 64, 300, 128),
    (1, 1, 300, 64, 64), (1, 1, 1, 129, 64),
]


def visible_rows(lq, lk, causal):
    return causal_mask(lq, lk).any(dim=-1) if causal else torch.ones(lq, dtype=torch.bool)


def shape_name(b, h, lq, lk, d, causal):
    return f"B={b} H={h} Lq={lq} Lk={lk} D={d} causal={causal}"


def check_against_sdpa(c):
    """O vs F.scaled_dot_product_attention in float64 on the rows that see a key (SDPA gives NaN
    on the others; our convention there is checked against the naive reference)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 1000 + lk + d)
            o, _ = flash2_fwd(q, k, v, causal=causal)
            mask = causal_mask(lq, lk) if causal else None
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            rows = visible_rows(lq, lk, causal)
            c.close(o[..., rows, :], want[..., rows, :], 1e-12, 1e-10,
                    "sdpa " + shape_name(b, h, lq, lk, d, causal))


def check_against_naive(c):
    """O and LSE vs example 01's reference in float64, every row (fully masked: 0 and -inf)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=7 + lq + lk + d)
            o, lse = flash2_fwd(q, k, v, causal=causal)
            want_o, want_lse = naive_attention(q, k, v, causal=causal)
            what = "naive " + shape_name(b, h, lq, lk, d, causal)
            c.close(o, want_o, 1e-12, 1e-10, what)
            c.close(lse, want_lse, 1e-12, 1e-12, what + ": LSE")
            hidden = ~visible_rows(lq, lk, causal)
            if hidden.any():
                c.expect(bool((o[..., hidden, :] == 0).all())
                         and bool(torch.isneginf(lse[..., hidden]).all()),
                         what + ": rows that see no key give 0 and LSE -inf")


def visited_tiles(lq, lk, causal, br=BR, bc=BC_FP32):
    """The (i0, j0) tiles flash2_fwd visits, recorded by its trace callback (tiny D: only the
    loop structure matters here)."""
    seen = []
    q, k, v = random_qkv(1, 1, lq, lk, 1, dtype=torch.float32)
    flash2_fwd(q, k, v, causal=causal, br=br, bc=bc,
               trace=lambda i0, j0, *_: seen.append((i0, j0)))
    return seen


def check_tile_skipping(c):
    """Causal: the tiles visited are exactly those holding at least one visible (query, key)
    entry — none wholly above the diagonal is visited, none that matters is skipped — and for
    Lq = Lk = 1024 they are about half of the non-causal count."""
    for lq, lk, bc in ((1024, 1024, BC_FP32), (1024, 1024, BC_MMA), (129, 300, BC_FP32),
                       (300, 129, BC_MMA), (17, 1, BC_MMA), (200, 127, BC_FP32)):
        visible = causal_mask(lq, lk)
        want = {(i0, j0) for i0 in range(0, lq, BR) for j0 in range(0, lk, bc)
                if visible[i0:i0 + BR, j0:j0 + bc].any()}
        got = visited_tiles(lq, lk, True, bc=bc)
        c.expect(len(got) == len(set(got)) and set(got) == want,
                 f"causal Lq={lq} Lk={lk} Bc={bc}: visits exactly the {len(want)} tiles with a "
                 f"visible entry (visited {len(got)})")
    for bc in (BC_FP32, BC_MMA):
        full = len(visited_tiles(1024, 1024, False, bc=bc))
        causal = len(visited_tiles(1024, 1024, True, bc=bc))
        n_q, n_k = 1024 // BR, 1024 // bc
        c.expect(full == n_q * n_k, f"L=1024 Bc={bc}: non-causal visits all {n_q}x{n_k} tiles")
        # Query tile t needs the keys < 64 (t + 1): (t + 1) * 64 / Bc tiles; summed, that is
        # (n_k / n_q) * n_q (n_q + 1) / 2 = half of n_q * n_k, plus the diagonal's share.
        c.expect(causal == n_k * (n_q + 1) // 2 and 0.5 <= causal / full <= 0.55,
                 f"L=1024 Bc={bc}: causal visits {causal} of {full} tiles "
                 f"({causal / full:.3f}, about half)")


def check_lowp(c):
    """fp16/bf16 emulation by FlashAttention's rule (attn/check.h): max |O - ref| <= 2 x the
    max error of a plain same-precision implementation + one ulp of the dtype at 1. The
    reference is float64 on the same rounded inputs. Also: LSE close to the reference's."""
    for dtype, ulp in ((torch.float16, 2.0**-10), (torch.bfloat16, 2.0**-7)):
        name = str(dtype).replace("torch.", "")
        for b, h, lq, lk, d in LOWP_SHAPES:
            for causal in (False, True):
                q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 31 + lk + d)
                q, k, v = (t.to(dtype).double() for t in (q, k, v))  # what the kernel reads
                ref, ref_lse = naive_attention(q, k, v, causal=causal)
                o, lse = flash2_fwd(q, k, v, causal=causal, dtype=dtype)
                plain = plain_lowp_attention(q, k, v, dtype, causal=causal)
                err = (o.double() - ref).abs().max().item()
                plain_err = (plain.double() - ref).abs().max().item()
                bound = 2.0 * plain_err + ulp
                what = f"{name} " + shape_name(b, h, lq, lk, d, causal)
                c.expect(bool(torch.isfinite(o).all()) and err <= bound,
                         f"{what}: max err {err:.2e} <= 2 x plain {plain_err:.2e} + ulp")
                # LSE is fp32 from 16-bit inputs: S carries ~1e-6 relative error.
                c.close(lse, ref_lse, 1e-4, 1e-4, what + ": LSE")


def check_lowp_rounds_p(c):
    """The emulation really rounds P: without that rounding (the float32 path on the same
    16-bit inputs) the result differs from the emulated one, by about the dtype's ulp."""
    q, k, v = random_qkv(1, 1, 128, 256, 64, seed=5)
    for dtype in LOWP:
        q16, k16, v16 = (t.to(dtype).float() for t in (q, k, v))
        o_emul, _ = flash2_fwd(q, k, v, dtype=dtype)
        o_fp32, _ = flash2_fwd(q16, k16, v16, bc=BC_MMA)
        c.expect(not torch.equal(o_emul.float(), o_fp32.to(dtype).float()),
                 f"{dtype}: rounding P to 16 bits changes the output")


def check_tile_sizes(c):
    """The result does not depend on the tiling: any Br, Bc give the same O and LSE up to
    rounding, including tiles of one row / one key and tiles larger than L."""
    q, k, v = random_qkv(1, 2, 75, 93, 48, seed=3)
    want, want_lse = naive_attention(q, k, v, causal=True)
    for br, bc in ((1, 1), (7, 5), (16, 64), (64, 32), (64, 64), (128, 128)):
        o, lse = flash2_fwd(q, k, v, causal=True, br=br, bc=bc)
        c.close(o, want, 1e-12, 1e-10, f"tiles Br={br} Bc={bc}")
        c.close(lse, want_lse, 1e-12, 1e-12, f"tiles Br={br} Bc={bc}: LSE")


def check_stability(c):
    """Scores of magnitude ~100 (amplitude 12, D = 64): the online softmax with its alpha
    rescaling stays finite in fp32 and close to the fp64 result."""
    for causal in (False, True):
        q, k, v = random_qkv(1, 2, 129, 100, 64, amplitude=12.0, seed=11)
        want, _ = naive_attention(q, k, v, causal=causal)
        o32, _ = flash2_fwd(q.float(), k.float(), v.float(), causal=causal)
        c.expect(bool(torch.isfinite(o32).all()), f"fp32 finite at |S|~100 causal={causal}")
        c.close(o32, want, 1e-3, 1e-3, f"fp32 vs fp64 at |S|~100 causal={causal}")


VARLEN_BATCHES = [  # (query lengths, key lengths): tails, a sequence shorter than a tile, an
    # empty sequence (no queries; no keys for its queries), Lq != Lk per sequence
    ((1, 17, 0, 129, 300), (1, 17, 0, 129, 300)),
    ((17, 129, 1, 64, 5), (300, 64, 0, 127, 5)),
]


def packed(lengths, h, d, g, dtype=torch.float64):
    """Random packed rows [sum(lengths), H, D] and cu_seqlens for lengths."""
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return (torch.rand(cu[-1], h, d, generator=g, dtype=torch.float64) * 2 - 1).to(dtype), cu


def check_varlen(c):
    """Packed batches against F.scaled_dot_product_attention run on each sequence alone (float64;
    rows that see no key, where SDPA gives NaN: 0 and LSE -inf), and the fp16/bf16 emulation by
    FlashAttention's 2x rule, sequence by sequence."""
    g = torch.Generator().manual_seed(13)
    h, d = 2, 64
    for lens_q, lens_k in VARLEN_BATCHES:
        q, cu_q = packed(lens_q, h, d, g)
        k, cu_k = packed(lens_k, h, d, g)
        v, _ = packed(lens_k, h, d, g)
        for causal in (False, True):
            o, lse = flash2_fwd_varlen(q, k, v, cu_q, cu_k, causal=causal)
            what = f"varlen q={lens_q} k={lens_k} causal={causal}"
            c.expect(o.shape == q.shape and lse.shape == (h, cu_q[-1]), what + ": shapes")
            for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
                if lq == 0:
                    continue
                qs = q[cu_q[b]:cu_q[b + 1]].transpose(0, 1)  # [H,lq,D]
                ks, vs = (t[cu_k[b]:cu_k[b + 1]].transpose(0, 1) for t in (k, v))
                o_b = o[cu_q[b]:cu_q[b + 1]].transpose(0, 1)
                lse_b = lse[:, cu_q[b]:cu_q[b + 1]]
                rows = visible_rows(lq, lk, causal) if lk > 0 else torch.zeros(lq, dtype=bool)
                if rows.any():
                    mask = causal_mask(lq, lk) if causal else None
                    want = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask)
                    c.close(o_b[:, rows], want[:, rows], 1e-12, 1e-10, f"{what}: sequence {b}")
                    s = (qs @ ks.transpose(-2, -1)) / math.sqrt(d)
                    if mask is not None:
                        s = s.masked_fill(~mask, float("-inf"))
                    c.close(lse_b[:, rows], torch.logsumexp(s, -1)[:, rows], 1e-12, 1e-12,
                            f"{what}: sequence {b}: LSE")
                if not rows.all():
                    c.expect(bool((o_b[:, ~rows] == 0).all())
                             and bool(torch.isneginf(lse_b[:, ~rows]).all()),
                             f"{what}: sequence {b}: rows that see no key give 0 and LSE -inf")
    lens_q, lens_k = VARLEN_BATCHES[1]
    q, cu_q = packed(lens_q, 1, 128, g)
    k, cu_k = packed(lens_k, 1, 128, g)
    v, _ = packed(lens_k, 1, 128, g)
    for dtype, ulp in ((torch.float16, 2.0**-10), (torch.bfloat16, 2.0**-7)):
        q16, k16, v16 = (t.to(dtype).double() for t in (q, k, v))
        o, _ = flash2_fwd_varlen(q16, k16, v16, cu_q, cu_k, causal=True, dtype=dtype)
        for b in range(len(lens_q)):
            if lens_q[b] == 0 or lens_k[b] == 0:  # no entries (checked in float64 above)
                continue
            seq = lambda t, cu: t[cu[b]:cu[b + 1]].transpose(0, 1).unsqueeze(0)
            qs, ks, vs = seq(q16, cu_q), seq(k16, cu_k), seq(v16, cu_k)
            ref, _ = naive_attention(qs, ks, vs, causal=True)
            plain = plain_lowp_attention(qs, ks, vs, dtype, causal=True)
            err = (seq(o, cu_q).double() - ref).abs().max().item()
            plain_err = (plain.double() - ref).abs().max().item()
            c.expect(bool(torch.isfinite(o).all()) and err <= 2.0 * plain_err + ulp,
                     f"{dtype} varlen causal sequence {b}: max err {err:.2e} <= 2 x plain "
                     f"{plain_err:.2e} + ulp")


# ----------------------------------------------------------------------------------------------
# Demo
# ----------------------------------------------------------------------------------------------


def demo():
    for bc in (BC_FP32, BC_MMA):
        full = len(visited_tiles(1024, 1024, False, bc=bc))
        causal = len(visited_tiles(1024, 1024, True, bc=bc))
        print(f"L=1024, Br={BR} Bc={bc}: K/V tiles visited {full} non-causal, {causal} causal "
              f"({causal / full:.2f})")
    q, k, v = random_qkv(2, 4, 300, 300, 64, dtype=torch.float32, seed=1)
    for causal in (False, True):
        o, _ = flash2_fwd(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        print(f"fp32 vs F.scaled_dot_product_attention, B=2 H=4 L=300 D=64 causal={causal}: "
              f"max abs err {(o - want).abs().max().item():.2e}")
    for dtype in LOWP:
        q16, k16, v16 = (t.to(dtype).double() for t in (q, k, v))
        ref, _ = naive_attention(q16, k16, v16)
        o, _ = flash2_fwd(q16, k16, v16, dtype=dtype)
        plain = plain_lowp_attention(q16, k16, v16, dtype)
        print(f"{str(dtype).replace('torch.', '')} emulation (fa2_mma): max abs err "
              f"{(o.double() - ref).abs().max().item():.2e}, plain same-precision "
              f"{(plain.double() - ref).abs().max().item():.2e}")


def main(argv=None):
    checks = [check_against_sdpa, check_against_naive, check_tile_skipping, check_lowp,
              check_lowp_rounds_p, check_tile_sizes, check_stability, check_varlen]
    return run_script(__doc__, demo, checks, argv)


if __name__ == "__main__":
    sys.exit(main())
