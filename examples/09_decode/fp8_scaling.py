#!/usr/bin/env python3
"""fp8_scaling.py — README.md's table of what the scale's group costs: a decode step's attention
over an FP8 cache whose e4m3 scales are shared per tensor, per token (and K/V head) or per block
of 128 values, against float64 attention over the unquantised cache, on inputs with outliers.

  .venv/bin/python examples/09_decode/fp8_scaling.py            rewrites the table
  .venv/bin/python examples/09_decode/fp8_scaling.py --check    exit 1 if it differs

Every group uses the same rule (the cache's, quality/attention.py e4m3_rows: a power-of-two scale
at or above the group's amax / 448, codes by PyTorch's float8_e4m3fn conversion); only what shares
a scale changes. PyTorch in float64 on the CPU: a model of the quantisation, not the kernels
(versions 11-13 implement the per-token and per-128 groups; no per-tensor kernel is built).
Inputs (seeded): uniform in [-1, 1); outlier channels: channels 7 and 37 of every key row (latent:
of every row, which is also V) times F; outlier tokens: the values of tokens 0-3 times F (V; the
latent row). The table sits between <!-- table:fp8_scaling --> and <!-- /table:fp8_scaling -->.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--python")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "quality"))
import attention  # noqa: E402

sys.path.insert(0, HERE)
import make_tables  # noqa: E402

L, SEED = 1000, 9


def quantise(x, group):
    """x [..., n] dequantised after e4m3 with one scale per group: 'tensor' (all of x), 'token'
    (each row of the last dimension) or 'block' (each 128 values of a row)."""
    if group == "tensor":
        y = attention.fp8_cache(x.reshape(1, -1))
    elif group == "token":
        y = attention.fp8_cache(x)
    else:
        y = attention.fp8_cache(x.reshape(*x.shape[:-1], -1, 128))
    return y.reshape(x.shape).double()


def attend(q, k, v):
    """One query per head q [H, d] over k [Hkv, L, d], v [Hkv, L, dv]: o [H, dv], float64."""
    rep = q.shape[0] // k.shape[0]
    kk, vv = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    p = torch.softmax(torch.einsum("hd,hld->hl", q, kk) / q.shape[-1] ** 0.5, -1)
    return torch.einsum("hl,hld->hd", p, vv)


def inputs(layout, kind, factor):
    """(q, k, v, quantised(group) -> (k, v), ordinary [bool mask of the cache's non-outlier
    values], the cache) of a case, float64 values of float32 numbers."""
    g = torch.Generator().manual_seed(SEED)
    u = lambda *s: (torch.rand(*s, generator=g, dtype=torch.float64) * 2 - 1).float().double()  # noqa: E731
    if layout == "kv":
        q, k, v = u(9, 64), u(3, L, 64), u(3, L, 64)
        x = k if kind == "channels" else v
        ordinary = torch.ones_like(x, dtype=torch.bool)
        if kind == "channels":
            ordinary[..., [7, 37]] = False
        else:
            ordinary[:, :4] = False
        x[~ordinary] *= factor
        return q, k, v, lambda grp: (quantise(k, grp), quantise(v, grp)), ordinary, x
    q, row = u(16, 576), u(1, L, 576)  # latent: K is the row, V its first 512 values
    ordinary = torch.ones(1, L, 512, dtype=torch.bool)
    if kind == "channels":
        ordinary[..., [7, 37]] = False
    else:
        ordinary[:, :4] = False
    row[..., :512][~ordinary] *= factor

    def quantised(grp):  # the 512 latent values quantised, the 64 RoPE values kept (bf16 there)
        r = torch.cat([quantise(row[..., :512], grp), row[..., 512:]], -1)
        return r, r[..., :512]
    return q, row, row[..., :512], quantised, ordinary, row[..., :512]


CASES = [("kv", "channels", f) for f in (1, 100, 1e5)] + [("kv", "tokens", f) for f in (1e3, 1e5)] \
    + [("latent", "channels", f) for f in (100, 1e5)] + [("latent", "tokens", 1e5)]
GROUPS = ("tensor", "token", "block")


def table():
    out = ["| cache | outliers | ×F | output error vs fp64: per tensor / per token / per 128 "
           "| ordinary values' error (relative RMS): per tensor / per token / per 128 |",
           "|---|---|---:|---:|---:|", ]
    for layout, kind, f in CASES:
        q, k, v, quantised, ordinary, x = inputs(layout, kind, f)
        exact = attend(q, k, v)
        err, rms = [], []
        for grp in GROUPS:
            if layout == "kv" and grp == "block":
                err.append("—")  # D = 64: a token's row is one block
                rms.append("—")
                continue
            kq, vq = quantised(grp)
            err.append(f"{(attend(q, kq, vq) - exact).abs().max().item():.3g}")
            xq = quantise(x, grp) if layout == "kv" else kq[..., :512]
            d = (xq - x)[ordinary]
            rms.append(f"{(d.pow(2).mean() / x[ordinary].pow(2).mean()).sqrt().item():.3g}")
        name = ("K/V (9 / 3 heads, D = 64)" if layout == "kv" else
                "latent (16 heads, 512 + 64 RoPE)")
        what = ("channels 7, 37 of K" if layout == "kv" else "channels 7, 37") \
            if kind == "channels" else ("tokens 0–3 of V" if layout == "kv" else "tokens 0–3")
        out.append(f"| {name} | {what} | {f:,.0f} | {' / '.join(err)} | {' / '.join(rms)} |")
    out += ["", f"`fp8_scaling.py` (PyTorch, float64 attention; a model of the quantisation, not "
                f"the kernels): one query per head over {L:,} tokens, inputs uniform in [−1, 1) "
                f"(seed {SEED}) with the outliers multiplied by F. Output error: the largest "
                f"absolute difference of an output element from the attention over the "
                f"unquantised cache. Ordinary values' error: over the cache values of the tensor "
                f"holding the outliers (K, V or the latent's 512) that are not outliers, "
                f"sqrt(mean((x̂ − x)²) / mean(x²)). Every group's scale: the power of two at or "
                f"above its amax / 448; — : a K/V row of 64 is one block."]
    return "\n".join(out)


def main(argv):
    if argv not in ([], ["--check"]):
        print(f"error: unknown arguments {' '.join(argv)} (usage: fp8_scaling.py [--check])",
              file=sys.stderr)
        return 2
    return make_tables.rewrite({"fp8_scaling": table()}, argv == ["--check"], "fp8_scaling.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
