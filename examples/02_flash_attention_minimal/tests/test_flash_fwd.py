#!/usr/bin/env python3
"""test_flash_fwd.py — the checks of Example 02's reference (flash_fwd.py): the tiled forward
against F.scaled_dot_product_attention and against example 01's naive reference (shapes, tail
tiles, causal Lq != Lk, large scores, any tile size), and the README's worked example.

    python examples/02_flash_attention_minimal/tests/test_flash_fwd.py
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "python"))  # attn_testing.py, shared by the suites
from attn_testing import main, random_qkv, reference, visible_rows

flash_fwd, worked_example = reference("flash_fwd").flash_fwd, reference("flash_fwd").worked_example
causal_mask = reference("naive_attention").causal_mask
naive_attention = reference("naive_attention").naive_attention

SHAPES = [  # (B, H, Lq, Lk, D): every length of the C tests, tail tiles, L < tile, Lq != Lk
    (1, 1, 1, 1, 64), (2, 1, 17, 17, 80), (1, 2, 64, 64, 32), (1, 1, 127, 127, 64),
    (1, 1, 128, 128, 128), (2, 1, 129, 129, 80), (1, 1, 300, 300, 32), (1, 1, 1000, 1000, 64),
    (1, 2, 64, 129, 64), (1, 2, 129, 64, 80), (1, 1, 1, 300, 128), (1, 1, 300, 17, 32),
    (1, 1, 17, 1, 64),
]


def check_against_sdpa(c):
    """Tiled O vs F.scaled_dot_product_attention (float64) on rows that see a key (SDPA gives NaN
    on the others; our convention there is checked against the naive reference)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 1000 + lk)
            o, _ = flash_fwd(q, k, v, causal=causal)
            mask = causal_mask(lq, lk) if causal else None
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
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
        c.expect(bool(torch.isfinite(o32).all()),
                 f"fp32 online softmax finite at |S|~100 causal={causal}")
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


if __name__ == "__main__":
    sys.exit(main(__doc__, [check_against_sdpa, check_against_naive, check_tile_sizes,
                            check_stability, check_worked_example]))
