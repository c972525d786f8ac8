#!/usr/bin/env python3
"""flash_fwd.py — PyTorch reference for Example 02 (FlashAttention forward, minimal).

The algorithm of flash_fwd.cu written with PyTorch tensors, so that a reader can step through it
(in a debugger, or through the trace callback) and see that it never forms the [Lq, Lk] score matrix:

    for each tile Q_i of Br query rows:
        m_i = -inf, l_i = 0, O_i = 0                  running max, running sum, unnormalised output
        for each tile K_j, V_j of Bc keys (only those some row of Q_i may see):
            S_ij  = scale * Q_i K_j^T                  [Br, Bc], masked entries -inf
            m_new = max(m_i, rowmax(S_ij))
            P_ij  = exp(S_ij - m_new)
            l_i   = exp(m_i - m_new) * l_i + rowsum(P_ij)
            O_i   = exp(m_i - m_new) * O_i + P_ij V_j
            m_i   = m_new
        O_i = O_i / l_i,  LSE_i = m_i + log(l_i)       rows that saw no key: 0 and -inf

Notation of Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 1. Conventions shared with the
C harness (common/include/attn/problem.h): layout [B, H, L, D]; scale defaults to 1/sqrt(D);
causal is bottom-right aligned (query i sees key j iff j <= i + Lk - Lq).

Run:
  python flash_fwd.py              the README's worked example, tile by tile, and a comparison
                                   with F.scaled_dot_product_attention
  python flash_fwd.py --all        every check: against SDPA and against example 01's naive
                                   reference (shapes, tail tiles, causal Lq != Lk, large scores,
                                   any tile size), and the worked example's numbers
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "01_attention_basics"))
from naive_attention import (  # noqa: E402
    causal_mask, naive_attention, random_qkv, run_script)

BR = 32  # query rows per tile (flash_fwd.cu: one thread block)
BC = 32  # keys per K_j / V_j tile

# ----------------------------------------------------------------------------------------------
# The reference
# ----------------------------------------------------------------------------------------------


def flash_fwd(q, k, v, causal=False, scale=None, br=BR, bc=BC, trace=None):
    """Returns (O, LSE) for q [B,H,Lq,D], k/v [B,H,Lk,D]; LSE is [B,H,Lq] (natural log).

    Tiled exactly as flash_fwd.cu: memory beyond the inputs and outputs is one [.., br, bc] score
    tile at a time. trace, if given, is called after every K/V tile as
    trace(i0, j0, m_i, l_i, o_i) with the running state of query tile i0.
    """
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)
    for i0 in range(0, lq, br):
        q_i = q[..., i0:i0 + br, :]  # [B,H,rows,D]; the last tile may have fewer rows
        rows = torch.arange(i0, i0 + q_i.shape[-2])
        m_i = torch.full(q_i.shape[:-1], float("-inf"), dtype=q.dtype)  # [B,H,rows]
        l_i = torch.zeros(q_i.shape[:-1], dtype=q.dtype)
        o_i = torch.zeros_like(q_i)
        # Keys beyond what the tile's last row may see are masked for every row: skip them.
        kv_end = min(lk, max(0, int(rows[-1]) + lk - lq + 1)) if causal else lk
        for j0 in range(0, kv_end, bc):
            k_j, v_j = k[..., j0:j0 + bc, :], v[..., j0:j0 + bc, :]
            s_ij = scale * (q_i @ k_j.transpose(-2, -1))  # [B,H,rows,cols]: one tile only
            if causal:
                cols = torch.arange(j0, j0 + k_j.shape[-2])
                s_ij = s_ij.masked_fill(cols[None, :] > rows[:, None] + (lk - lq), float("-inf"))
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))
            # A row that has seen no visible key yet has m_new = -inf: exp(-inf - -inf) would be
            # NaN, so subtract 0 there instead (its P_ij is then exp(-inf) = 0).
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m_i - m_safe)  # rescales what was summed relative to the old max
            p_ij = torch.exp(s_ij - m_safe.unsqueeze(-1))
            l_i = alpha * l_i + p_ij.sum(dim=-1)
            o_i = alpha.unsqueeze(-1) * o_i + p_ij @ v_j
            m_i = m_new
            if trace is not None:
                trace(i0, j0, m_i, l_i, o_i)
        seen = l_i > 0
        o[..., i0:i0 + br, :] = torch.where(seen.unsqueeze(-1), o_i / l_i.clamp_min(1e-300).unsqueeze(-1),
                                            torch.zeros_like(o_i))
        lse[..., i0:i0 + br] = torch.where(seen, m_i + torch.log(l_i), torch.full_like(l_i, float("-inf")))
    return o, lse


# ----------------------------------------------------------------------------------------------
# The README's worked example: one query, four keys, two tiles of two
# ----------------------------------------------------------------------------------------------

# D = 1 and scale = 1, so the scores are q * k = (0, 2, 4, 2) and each value is one number.
WORKED_Q = [[1.0]]
WORKED_K = [[0.0], [2.0], [4.0], [2.0]]
WORKED_V = [[1.0], [2.0], [3.0], [4.0]]


def worked_example(trace=None):
    as_t = lambda rows: torch.tensor(rows, dtype=torch.float64).view(1, 1, len(rows), 1)
    return flash_fwd(as_t(WORKED_Q), as_t(WORKED_K), as_t(WORKED_V), scale=1.0, br=1, bc=2, trace=trace)


def print_worked_example():
    print("worked example: scores (0, 2, 4, 2), values (1, 2, 3, 4), tiles of 2 keys")

    def show(i0, j0, m_i, l_i, o_i):
        print(f"  after keys {j0}..{j0 + 1}: m = {m_i.item():.4f}  l = {l_i.item():.4f}  "
              f"O~ = {o_i.item():.4f}")

    o, lse = worked_example(show)
    print(f"  O = O~ / l = {o.item():.4f}   LSE = m + log l = {lse.item():.4f}")


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------

SHAPES = [  # (B, H, Lq, Lk, D): every length of the C tests, tail tiles, L < tile, Lq != Lk
    (1, 1, 1, 1, 64), (2, 1, 17, 17, 80), (1, 2, 64, 64, 32), (1, 1, 127, 127, 64),
    (1, 1, 128, 128, 128), (2, 1, 129, 129, 80), (1, 1, 300, 300, 32), (1, 1, 1000, 1000, 64),
    (1, 2, 64, 129, 64), (1, 2, 129, 64, 80), (1, 1, 1, 300, 128), (1, 1, 300, 17, 32),
    (1, 1, 17, 1, 64),
]


def visible_rows(lq, lk, causal):
    return causal_mask(lq, lk).any(dim=-1) if causal else torch.ones(lq, dtype=torch.bool)


def check_against_sdpa(c):
    """Tiled O vs F.scaled_dot_product_attention (float64) on rows that see a key (SDPA gives NaN
    on the others; our convention there is checked against the naive reference)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 1000 + lk)
            o, _ = flash_fwd(q, k, v, causal=causal)
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(lq, lk) if causal else None)
            rows = visible_rows(lq, lk, causal)
            c.close(o[..., rows, :], want[..., rows, :], 1e-12, 1e-10,
                    f"sdpa B={b} H={h} Lq={lq} Lk={lk} D={d} causal={causal}")


def check_against_naive(c):
    """Tiled O and LSE vs example 01's reference, every row (fully masked: 0 and -inf)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=7 + lq + lk)
            o, lse = flash_fwd(q, k, v, causal=causal)
            want_o, want_lse = naive_attention(q, k, v, causal=causal)
            what = f"naive B={b} H={h} Lq={lq} Lk={lk} D={d} causal={causal}"
            c.close(o, want_o, 1e-12, 1e-10, what)
            c.close(lse, want_lse, 1e-12, 1e-12, what + ": LSE")


def check_tile_sizes(c):
    """The result does not depend on the tiling: any Br, Bc give the same O (exact arithmetic up
    to rounding), including tiles of one row / one key and tiles larger than L."""
    q, k, v = random_qkv(1, 2, 75, 93, 48, seed=3)
    want, want_lse = naive_attention(q, k, v, causal=True)
    for br, bc in ((1, 1), (7, 5), (16, 64), (32, 32), (128, 128)):
        o, lse = flash_fwd(q, k, v, causal=True, br=br, bc=bc)
        c.close(o, want, 1e-12, 1e-10, f"tiles Br={br} Bc={bc}")
        c.close(lse, want_lse, 1e-12, 1e-12, f"tiles Br={br} Bc={bc}: LSE")


def check_stability(c):
    """Scores of magnitude ~100 (amplitude 12, D = 64): the online softmax in fp32 stays finite
    and close to the fp64 result, as the two-pass softmax of example 01 does."""
    for causal in (False, True):
        q, k, v = random_qkv(1, 2, 129, 100, 64, amplitude=12.0, seed=11)
        want, _ = naive_attention(q, k, v, causal=causal)
        o32, _ = flash_fwd(q.float(), k.float(), v.float(), causal=causal)
        c.expect(bool(torch.isfinite(o32).all()), f"fp32 online softmax finite at |S|~100 causal={causal}")
        # The same margin as naive_attention.py's check: fp32 scores of size ~100 carry errors
        # ~1e-5..1e-4 that become relative errors of that size in P.
        c.close(o32, want, 1e-3, 1e-3, f"fp32 online softmax vs fp64 at |S|~100 causal={causal}")


def check_worked_example(c):
    """The README's numbers: m = 4, l = (1 + e^-2)^2, O = (e^-4 + 2e^-2 + 3 + 4e^-2) / l."""
    e2, e4 = math.exp(-2.0), math.exp(-4.0)
    l = (1.0 + e2) ** 2
    o, lse = worked_example()
    c.close(o.item(), (e4 * 1 + e2 * 2 + 3 + e2 * 4) / l, 1e-15, 1e-14, "worked example O")
    c.close(lse.item(), 4.0 + math.log(l), 1e-15, 1e-14, "worked example LSE")


def demo():
    print_worked_example()
    q, k, v = random_qkv(2, 4, 300, 300, 64, dtype=torch.float32, seed=1)
    for causal in (False, True):
        o, _ = flash_fwd(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        err = (o - want).abs().max().item()
        print(f"flash_fwd vs F.scaled_dot_product_attention, B=2 H=4 L=300 D=64 causal={causal}: "
              f"max abs err {err:.2e}")
    print(f"largest intermediate: one [{BR}, {BC}] score tile per (batch, head), "
          f"not the [300, 300] matrix")


def main(argv=None):
    checks = [check_against_sdpa, check_against_naive, check_tile_sizes, check_stability, check_worked_example]
    return run_script(__doc__, demo, checks, argv)


if __name__ == "__main__":
    sys.exit(main())
