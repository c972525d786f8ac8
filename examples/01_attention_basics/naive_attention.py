#!/usr/bin/env python3
"""naive_attention.py — PyTorch reference for Example 01 (naive O(L^2) attention).

The same three steps as naive_attention.cu, written so a reader can step through them:

    S = scale * Q K^T          the full [Lq, Lk] score matrix, materialised
    P = softmax(S) per row      subtract the row max first (stability), masked entries -> 0
    O = P V

Conventions shared with the C harness (common/README.md, "Conventions"):
  * layout [B, H, L, D];  scale defaults to 1/sqrt(D);
  * causal is bottom-right aligned: query i sees key j iff j <= i + Lk - Lq;
  * a query that sees no key outputs 0 and has log-sum-exp -inf.

Run:
  python naive_attention.py                 a small demo against F.scaled_dot_product_attention
  python naive_attention.py --all           every check (shapes, causal, Lq != Lk, large scores):
                                            runs tests/test_naive_attention.py
  python naive_attention.py --all --c-dump PATH
                                            also checks the C reference (attn_reference) on tensors
                                            dumped by PATH (the dump_reference tool of tests/python)
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import demo_against_sdpa, reference_main, require  # noqa: E402

torch, F = require("torch", "torch.nn.functional", setup="--python")

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "test_naive_attention.py")
USAGE = ("naive_attention.py [--all [--c-dump PATH]]"
         "   (--all: every check, by tests/test_naive_attention.py)")

# ----------------------------------------------------------------------------------------------
# The reference
# ----------------------------------------------------------------------------------------------


def causal_mask(lq, lk, device=None):
    """Bottom-right aligned causal mask [lq, lk]: True where query i may see key j."""
    i = torch.arange(lq, device=device).unsqueeze(1)
    j = torch.arange(lk, device=device).unsqueeze(0)
    return j <= i + (lk - lq)


def naive_attention(q, k, v, causal=False, scale=None, mask=None):
    """Returns (O, LSE) for q [B,H,Lq,D], k/v [B,H,Lk,D]; LSE is [B,H,Lq] (natural log).

    mask (optional) is a boolean [Lq, Lk] (or broadcastable) of entries to keep; it is combined
    with causal. Rows without any visible key give O = 0 and LSE = -inf.
    """
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = scale * (q @ k.transpose(-2, -1))  # [B,H,Lq,Lk]: the O(L^2) matrix
    keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if causal:
        keep = keep & causal_mask(lq, lk, q.device)
    if mask is not None:
        keep = keep & mask
    s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)  # row max m_i
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # fully masked row: avoid -inf - -inf
    e = torch.exp(s - m)  # every entry <= 1: no overflow
    l = e.sum(dim=-1, keepdim=True)  # row sum l_i
    p = torch.where(l > 0, e / l, torch.zeros_like(e))
    o = p @ v
    lse = torch.where(l > 0, m + torch.log(l), torch.full_like(l, float("-inf"))).squeeze(-1)
    return o, lse


# ----------------------------------------------------------------------------------------------
# Demo
# ----------------------------------------------------------------------------------------------


def demo():
    demo_against_sdpa(naive_attention, "naive", L=128)
    s = torch.tensor([100.0, 99.0, 98.0, 90.0])  # one row of fp32 scores of magnitude ~100
    plain = torch.exp(s) / torch.exp(s).sum()  # exp(100) = inf in fp32, and inf / inf = NaN
    shifted = torch.exp(s - s.max()) / torch.exp(s - s.max()).sum()  # every exponent <= 0
    print(f"softmax of the fp32 row {s.tolist()}: unshifted {plain.tolist()}, shifted by its "
          f"max {[round(p, 4) for p in shifted.tolist()]}")
    lq = lk = 4096
    print(f"S for B=4, H=8, L={lq} costs {4 * 8 * lq * lk * 4 / 2**30:.1f} GiB in fp32 "
          "(example 02 never stores it)")


if __name__ == "__main__":
    reference_main(demo, TESTS, USAGE, __doc__)
