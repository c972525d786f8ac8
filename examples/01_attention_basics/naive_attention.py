#!/usr/bin/env python3
"""naive_attention.py — PyTorch reference for Example 01 (naive O(L^2) attention).

The same three steps as naive_attention.cu, written so a reader can step through them:

    S = scale * Q K^T          the full [Lq, Lk] score matrix, materialised
    P = softmax(S) per row      subtract the row max first (stability), masked entries -> 0
    O = P V

Conventions shared with the C harness (common/include/attn/problem.h):
  * layout [B, H, L, D];  scale defaults to 1/sqrt(D);
  * causal is bottom-right aligned: query i sees key j iff j <= i + Lk - Lq;
  * a query that sees no key outputs 0 and has log-sum-exp -inf.

Run:
  python naive_attention.py                 a small demo against F.scaled_dot_product_attention
  python naive_attention.py --all           every check (shapes, causal, Lq != Lk, large scores)
  python naive_attention.py --all --c-dump PATH
                                            also checks the C reference (attn_reference) on tensors
                                            dumped by PATH (the dump_reference tool of tests/python)
Exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

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
# The harness's inputs, bit for bit (common/src/tensor.c: attn_uniform)
# ----------------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def attn_uniform(seed, stream, count):
    """The C harness's attn_uniform(seed, stream, n) for n = 0 .. count-1, as float32:
    SplitMix64's finaliser over x = (seed ^ stream*0x9E3779B97F4A7C15) + n*0xBF58476D1CE4E5B9
    (mod 2^64), top 24 bits mapped to k * 2^-23 - 1 in [-1, 1)."""
    base = np.uint64((seed ^ ((stream * 0x9E3779B97F4A7C15) & MASK64)) & MASK64)
    with np.errstate(over="ignore"):
        x = base + np.arange(count, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float64) * 2.0**-23 - 1.0).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def expect(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")

    def close(self, got, want, atol, rtol, what):
        got = torch.as_tensor(got, dtype=torch.float64)
        want = torch.as_tensor(want, dtype=torch.float64)
        both_inf = torch.isinf(got) & torch.isinf(want) & (torch.sign(got) == torch.sign(want))
        err = torch.where(both_inf, torch.zeros_like(got), (got - want).abs())
        bad = ~(err <= atol + rtol * want.abs().nan_to_num(0.0))  # NaN counts as bad
        n_bad = int(bad.sum())
        max_err = float(err.nan_to_num(float("inf")).max()) if err.numel() else 0.0
        self.expect(n_bad == 0, f"{what}: {n_bad}/{err.numel()} out of tolerance, max err {max_err:.3e}")
        return max_err


def random_qkv(b, h, lq, lk, d, dtype=torch.float64, amplitude=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda l: (torch.rand(b, h, l, d, generator=g, dtype=torch.float64) * 2 - 1) * amplitude
    return mk(lq).to(dtype), mk(lk).to(dtype), mk(lk).to(dtype)


def check_against_sdpa(c):
    """Our reference vs PyTorch's F.scaled_dot_product_attention (float64, CPU)."""
    shapes = [(1, 1, 1, 1, 16), (2, 3, 17, 17, 64), (1, 2, 64, 129, 80), (1, 2, 129, 64, 32),
              (1, 1, 300, 300, 128), (1, 1, 33, 33, 256)]
    for b, h, lq, lk, d in shapes:
        for causal in (False, True):
            q, k, v = random_qkv(b, h, lq, lk, d, seed=lq * 1000 + lk)
            o, lse = naive_attention(q, k, v, causal=causal)
            keep = causal_mask(lq, lk) if causal else None
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            visible = keep.any(dim=-1) if causal else torch.ones(lq, dtype=torch.bool)
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
    o64, _ = naive_attention(q, k, v)
    o32, _ = naive_attention(q.float(), k.float(), v.float())
    c.expect(bool(torch.isfinite(o32).all()), "stable softmax: fp32 output is finite at |S|~100")
    # fp32 scores of size ~100 carry absolute errors ~1e-5..1e-4 (D products of |q k| ~ 100),
    # which become relative errors of that size in P: 1e-3 leaves a margin, NaN never passes.
    c.close(o32, o64, 1e-3, 1e-3, "stable softmax: fp32 vs fp64 at |S|~100")
    s = (q.float() @ k.float().transpose(-2, -1)) / 8.0
    unstable = torch.exp(s) / torch.exp(s).sum(-1, keepdim=True)
    c.expect(bool(torch.isnan(unstable).any()), "plain softmax overflows at |S|~100 (NaN)")


def load_attn_tensor(path):
    """Reads a file written by attn_tensor_save: 'attn-tensor v1 f32 <dims>\\n' + raw fp32."""
    with open(path, "rb") as f:
        header = f.readline().decode("ascii").split()
        if header[:3] != ["attn-tensor", "v1", "f32"]:
            raise ValueError(f"{path}: not an attn-tensor v1 f32 file")
        dims = [int(x) for x in header[3:]]
        data = np.frombuffer(f.read(), dtype="<f4").copy()
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} values, header says {dims}")
    return data.reshape(dims)


def check_c_reference(c, tool):
    """The C oracle (attn_reference, double accumulation) vs this file's reference, on tensors
    it dumps; also checks that attn_uniform above reproduces the harness's inputs bit for bit."""
    cases = [
        dict(B=1, H=2, lq=17, lk=17, D=16, causal=False, amp=1.0),
        dict(B=2, H=1, lq=64, lk=129, D=64, causal=True, amp=1.0),
        dict(B=1, H=1, lq=129, lk=64, D=80, causal=True, amp=1.0),
        dict(B=1, H=2, lq=1, lk=300, D=128, causal=False, amp=1.0),
        dict(B=1, H=1, lq=100, lk=100, D=64, causal=False, amp=12.0),
    ]
    for i, cs in enumerate(cases):
        seed = 1000 + i
        with tempfile.TemporaryDirectory() as out:
            cmd = [tool, "--out", out, "-B", str(cs["B"]), "-H", str(cs["H"]), "--lq", str(cs["lq"]),
                   "--lk", str(cs["lk"]), "-D", str(cs["D"]), "--seed", str(seed),
                   "--amplitude", str(cs["amp"])] + (["--causal"] if cs["causal"] else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            what = f"C reference {cs}"
            if r.returncode != 0:
                c.expect(False, f"{what}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
                continue
            q, k, v, o, lse = (load_attn_tensor(os.path.join(out, n + ".bin"))
                               for n in ("q", "k", "v", "out", "lse"))
        for stream, (name, t) in enumerate((("q", q), ("k", k), ("v", v))):
            mine = attn_uniform(seed, stream, t.size) * np.float32(cs["amp"])
            c.expect(np.array_equal(mine, t.reshape(-1)), f"{what}: {name} reproduced bit for bit")
        want_o, want_lse = naive_attention(torch.from_numpy(q).double(), torch.from_numpy(k).double(),
                                           torch.from_numpy(v).double(), causal=cs["causal"])
        c.close(o, want_o, 1e-6, 1e-6, what + ": output")
        c.close(lse, want_lse, 1e-6, 1e-6, what + ": LSE")


def demo():
    q, k, v = random_qkv(2, 4, 128, 128, 64, dtype=torch.float32, seed=1)
    for causal in (False, True):
        o, _ = naive_attention(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        err = (o - want).abs().max().item()
        print(f"naive vs F.scaled_dot_product_attention, B=2 H=4 L=128 D=64 causal={causal}: "
              f"max abs err {err:.2e}")
    lq = lk = 4096
    print(f"S for B=4, H=8, L={lq} costs {4 * 8 * lq * lk * 4 / 2**30:.1f} GiB in fp32 "
          "(example 02 never stores it)")


def run_script(doc, demo, checks, argv=None, c_dump=None, c_dump_help=None):
    """The command line every reference script of the chapter shares: a plain run prints demo();
    --all runs each check(c) and ends with "N passed, M failed" (exit 1 on a failure).
    c_dump, if given, is a check c_dump(c, tool) of the C code on what the dump_reference tool
    (tests/python) prints: the script then takes --c-dump PATH (help: c_dump_help), and --all
    with it runs c_dump after the checks, or stops with exit 2 when PATH is not an executable."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="run every check")
    if c_dump:
        ap.add_argument("--c-dump", metavar="PATH", help=c_dump_help)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    if not args.all:
        demo()
        return 0
    c = Checks()
    for check in checks:
        check(c)
    if c_dump and args.c_dump:
        if not os.access(args.c_dump, os.X_OK):
            print(f"error: --c-dump {args.c_dump}: not an executable file", file=sys.stderr)
            return 2
        c_dump(c, args.c_dump)
    print(f"{c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1


def main(argv=None):
    return run_script(__doc__, demo, [check_against_sdpa, check_stability], argv,
                      c_dump=check_c_reference,
                      c_dump_help="dump_reference tool to check the C reference")


if __name__ == "__main__":
    sys.exit(main())
