#!/usr/bin/env python3
"""test_naive_attention.py — the checks of Example 01's reference (naive_attention.py): against
F.scaled_dot_product_attention (shapes, causal, Lq != Lk), the stable softmax at large scores,
and with --c-dump the C reference (attn_reference) on tensors dumped by dump_reference.

    python examples/01_attention_basics/tests/test_naive_attention.py [--c-dump build/sim/tests/python/dump_reference]
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "python"))  # attn_testing.py, shared by the suites
from attn_testing import attn_uniform, dump, main, random_qkv, reference, visible_rows

naive = reference("naive_attention")


def check_against_sdpa(c):
    """Our reference vs PyTorch's F.scaled_dot_product_attention (float64, CPU)."""
    shapes = [(1, 1, 1, 1, 16), (2, 3, 17, 17, 64), (1, 2, 64, 129, 80), (1, 2, 129, 64, 32),
              (1, 1, 300, 300, 128), (1, 1, 33, 33, 256)]
    for b, h, lq, lk, d in shapes:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 1000 + lk)
            o, lse = naive.naive_attention(q, k, v, causal=causal)
            keep = naive.causal_mask(lq, lk) if causal else None
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            visible = visible_rows(lq, lk, causal)
            what = f"sdpa B={b} H={h} Lq={lq} Lk={lk} D={d} causal={causal}"
            c.close(o[..., visible, :], want[..., visible, :], 1e-12, 1e-10, what)
            # Rows that see no key: our convention is 0 and -inf (SDPA gives NaN there).
            c.expect(bool((o[..., ~visible, :] == 0).all()), what + ": masked rows are 0")
            c.expect(bool(torch.isneginf(lse[..., ~visible]).all()), what + ": masked LSE is -inf")
            s = (q @ k.transpose(-2, -1)) / math.sqrt(d)
            if causal:
                s = s.masked_fill(~keep, float("-inf"))
            want_lse = torch.logsumexp(s, dim=-1)
            c.close(lse[..., visible], want_lse[..., visible], 1e-12, 1e-12, what + ": LSE")


def check_stability(c):
    """Scores of magnitude ~100: the max-subtracted softmax stays finite in fp32, a plain one
    does not."""
    q, k, v = random_qkv(1, 2, 64, 64, 64, amplitude=12.0, seed=7)
    o64, _ = naive.naive_attention(q, k, v)
    o32, _ = naive.naive_attention(q.float(), k.float(), v.float())
    c.expect(bool(torch.isfinite(o32).all()), "stable softmax: fp32 output is finite at |S|~100")
    # fp32 scores of size ~100 carry absolute errors ~1e-5..1e-4 (D products of |q k| ~ 100),
    # which become relative errors of that size in P: 1e-3 leaves a margin, NaN never passes.
    c.close(o32, o64, 1e-3, 1e-3, "stable softmax: fp32 vs fp64 at |S|~100")
    s = (q.float() @ k.float().transpose(-2, -1)) / 8.0
    unstable = torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)
    c.expect(bool(torch.isnan(unstable).any()), "plain softmax overflows at |S|~100 (NaN)")


def check_c_reference(c, tool):
    """The C oracle (attn_reference, double accumulation) vs naive_attention, on tensors it
    dumps; also checks that attn_uniform reproduces the harness's inputs bit for bit."""
    cases = [
        dict(B=1, H=2, lq=17, lk=17, D=16, causal=False, amp=1.0),
        dict(B=2, H=1, lq=64, lk=129, D=64, causal=True, amp=1.0),
        dict(B=1, H=1, lq=129, lk=64, D=80, causal=True, amp=1.0),
        dict(B=1, H=2, lq=1, lk=300, D=128, causal=False, amp=1.0),
        dict(B=1, H=1, lq=100, lk=100, D=64, causal=False, amp=12.0),
    ]
    for i, cs in enumerate(cases):
        seed = 1000 + i
        what = f"C reference {cs}"
        t = dump(c, what, tool, ["-B", cs["B"], "-H", cs["H"], "--lq", cs["lq"], "--lk", cs["lk"],
                                 "-D", cs["D"], "--seed", seed, "--amplitude", cs["amp"]]
                 + (["--causal"] if cs["causal"] else []), ("q", "k", "v", "out", "lse"))
        if t is None:
            continue
        for stream, name in enumerate(("q", "k", "v")):
            mine = attn_uniform(seed, stream, t[name].size) * np.float32(cs["amp"])
            c.expect(np.array_equal(mine, t[name].reshape(-1)),
                     f"{what}: {name} reproduced bit for bit")
        q, k, v = (torch.from_numpy(t[name]).double() for name in ("q", "k", "v"))
        want_o, want_lse = naive.naive_attention(q, k, v, causal=cs["causal"])
        c.close(t["out"], want_o, 1e-6, 1e-6, what + ": output")
        c.close(t["lse"], want_lse, 1e-6, 1e-6, what + ": LSE")


if __name__ == "__main__":
    sys.exit(main(__doc__, [check_against_sdpa, check_stability], c_dump=check_c_reference,
                  c_dump_help="dump_reference tool to check the C reference"))
