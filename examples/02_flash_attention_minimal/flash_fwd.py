#!/usr/bin/env python3
"""flash_fwd.py — PyTorch reference for Example 02 (FlashAttention forward, minimal).

The algorithm of flash_fwd.cu written with PyTorch tensors, so that a reader can step through it
(in a debugger, or through the trace callback) and see that it never forms the [Lq, Lk] score
matrix:

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
C harness (common/README.md, "Conventions"): layout [B, H, L, D]; scale defaults to 1/sqrt(D);
causal is bottom-right aligned (query i sees key j iff j <= i + Lk - Lq).

Run:
  python flash_fwd.py              the README's worked example, tile by tile, and a comparison
                                   with F.scaled_dot_product_attention
  python flash_fwd.py --all        every check: against SDPA and against example 01's naive
                                   reference (shapes, tail tiles, causal Lq != Lk, large scores,
                                   any tile size), and the worked example's numbers; runs
                                   tests/test_flash_fwd.py
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import demo_against_sdpa, reference_main, require  # noqa: E402

torch, F = require("torch", "torch.nn.functional", setup="--python")

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "test_flash_fwd.py")
USAGE = "flash_fwd.py [--all]   (--all: every check, by tests/test_flash_fwd.py)"

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
        o[..., i0:i0 + br, :] = torch.where(
            seen.unsqueeze(-1), o_i / l_i.clamp_min(1e-300).unsqueeze(-1), torch.zeros_like(o_i))
        lse[..., i0:i0 + br] = torch.where(seen, m_i + torch.log(l_i),
                                           torch.full_like(l_i, float("-inf")))
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
    return flash_fwd(as_t(WORKED_Q), as_t(WORKED_K), as_t(WORKED_V), scale=1.0, br=1, bc=2,
                     trace=trace)


def print_worked_example():
    print("worked example: scores (0, 2, 4, 2), values (1, 2, 3, 4), tiles of 2 keys")

    def show(i0, j0, m_i, l_i, o_i):
        print(f"  after keys {j0}..{j0 + 1}: m = {m_i.item():.4f}  l = {l_i.item():.4f}  "
              f"O~ = {o_i.item():.4f}")

    o, lse = worked_example(show)
    print(f"  O = O~ / l = {o.item():.4f}   LSE = m + log l = {lse.item():.4f}")


# ----------------------------------------------------------------------------------------------
# Demo
# ----------------------------------------------------------------------------------------------


def demo():
    print_worked_example()
    demo_against_sdpa(flash_fwd, "flash_fwd", L=300)
    print(f"largest intermediate: one [{BR}, {BC}] score tile per (batch, head), "
          f"not the [300, 300] matrix")


if __name__ == "__main__":
    reference_main(demo, TESTS, USAGE, __doc__)
