#!/usr/bin/env python3
"""flex_attention.py — PyTorch reference for Example 08: the modifications of flex_attention.cu
written for PyTorch's FlexAttention (torch.nn.attention.flex_attention), and the same attention
written out with an explicit mask and bias for F.scaled_dot_product_attention.

FlexAttention (PyTorch 2.5) computes

    O = softmax(mask_mod ? score_mod(scale * Q K^T, b, h, q_idx, kv_idx) : -inf) V

with two user functions: score_mod(score, b, h, q_idx, kv_idx) -> score and mask_mod(b, h, q_idx,
kv_idx) -> bool, and a BlockMask (create_block_mask) made from the mask_mod so that EMPTY tiles
are skipped and FULL tiles run without the mask. flex_attention.cu does the same in CUDA C with
C++ functors (flex_mods.cuh), one kernel per modification; here each modification is the pair of
Python functions FlexAttention takes, side by side with its C++ functor:

    spec                 mask_mod / score_mod here               flex_mods.cuh
    causal               kv <= q + off                           flex_causal
    sliding_window:w=W   causal & (q + off - kv < W)             flex_and<flex_causal, flex_window>
    prefix_lm:p=P        causal | (kv < P)                       flex_or<flex_causal, flex_prefix>
    document             causal & (doc[q + off] == doc[kv])      flex_and<flex_causal, flex_document>
    alibi                causal; s + slope[h] * (kv - q - off)   flex_causal, flex_alibi
    softcap:cap=C        causal; C * tanh(s / C)                 flex_causal, flex_softcap
    rel_bias:r=R         -; s + table[h, clamp(q+off-kv) + R]    flex_all, flex_rel_bias

off = Lk - Lq: queries are aligned bottom-right, as everywhere in the chapter
(common/include/attn/problem.h), so query i sits at position i + off. FlexAttention evaluates the
functions on padded indices too (past Lq and Lk in a tail tile); the table lookups clamp their
index so that those evaluations stay in range (their results are discarded).

RoPE (rotary position embeddings, rotate-half convention of GPT-NeoX and Hugging Face's Llama
port, not Meta's interleaved pairs; Su et al. 2021, RoFormer): rope(x, positions, base) turns the pairs (c, c + D/2) by positions * base^(-2c/D),
the angle formed in fp32 as flex_attention.cu forms it.

Run:
  python flex_attention.py          a short demo: each modification through flex_attention and
                                    through SDPA with an explicit mask and bias, and the tiles
  python flex_attention.py --all    every check (examples/08_flex_attention/tests/
                                    test_flex_attention.py), with --c-program PATH also against
                                    the C program's dumped tensors
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import reference_main, require  # noqa: E402

torch, F = require("torch", "torch.nn.functional", setup="--python")

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "tests", "test_flex_attention.py")
USAGE = "flex_attention.py [--all [test options]]"

SPECS = ("causal", "sliding_window:w=W", "prefix_lm:p=P", "document", "alibi", "softcap:cap=C",
         "rel_bias:r=R")


def parse_spec(spec):
    """'softcap:cap=30' -> ('softcap', 30.0); 'causal' -> ('causal', None)."""
    name, _, param = spec.partition(":")
    if name not in [s.split(":")[0] for s in SPECS]:
        raise ValueError(f"unknown modification '{name}' (compiled: {', '.join(SPECS)})")
    value = None
    if param:
        value = float(param.split("=", 1)[1])
        value = value if name == "softcap" else int(value)
    return name, value


def alibi_slopes(H):
    """Press, Smith, Lewis, "Train Short, Test Long" (ICLR 2022): for H a power of two the
    geometric sequence starting at 2^(-8/H) with that ratio (the paper's rule); otherwise, as the
    authors' code does it (get_slopes, ofirpress/attention_with_linear_biases), the slopes of the
    largest power of two n < H, then every other slope of 2n heads for the remaining H - n."""
    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    if math.log2(H).is_integer():
        return power_of_two(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_two(n) + alibi_slopes(2 * n)[0::2][:H - n]


def modification(spec, H, lq, lk, doc=None, table=None, device=None):
    """(mask_mod, score_mod) of spec for FlexAttention (None where there is none). doc: [lk]
    int tensor of document ids (document); table: [H, 2r+1] float tensor (rel_bias)."""
    name, value = parse_spec(spec)
    off = lk - lq

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + off

    if name == "causal":
        return causal, None
    if name == "sliding_window":
        return (lambda b, h, q_idx, kv_idx:
                causal(b, h, q_idx, kv_idx) & (q_idx + off - kv_idx < value)), None
    if name == "prefix_lm":
        return (lambda b, h, q_idx, kv_idx: causal(b, h, q_idx, kv_idx) | (kv_idx < value)), None
    if name == "document":
        def document(b, h, q_idx, kv_idx):
            a = q_idx + off  # a < 0 (Lq > Lk): before the first key, in no document
            same = doc[a.clamp(0, lk - 1)] == doc[kv_idx.clamp(0, lk - 1)]
            return causal(b, h, q_idx, kv_idx) & (a >= 0) & same
        return document, None
    if name == "alibi":
        slopes = torch.tensor(alibi_slopes(H), dtype=torch.float64, device=device)
        return causal, (lambda score, b, h, q_idx, kv_idx:
                        score + slopes[h].to(score.dtype) * (kv_idx - q_idx - off))
    if name == "softcap":
        cap = torch.tensor(value, dtype=torch.float64, device=device)  # a tensor: FlexAttention
        # traces the function, and takes captured tensors (a Python float it does not)
        return causal, (lambda score, b, h, q_idx, kv_idx:
                        cap.to(score.dtype) * torch.tanh(score / cap.to(score.dtype)))
    if name == "rel_bias":
        r = value

        def rel_bias(score, b, h, q_idx, kv_idx):
            d = (q_idx + off - kv_idx).clamp(-r, r)
            return score + table[h, d + r].to(score.dtype)
        return None, rel_bias
    raise AssertionError(name)


def flex(q, k, v, spec, doc=None, table=None, block=128):
    """FlexAttention (eager: works on the CPU) under spec: O and the log-sum-exp.

    Outside torch.compile, PyTorch's flex_attention traces its operator with Dynamo at every call
    (about 0.9 s of CPU each here, whatever the size) only to run the operator's dense
    implementation; this calls the operator directly, through PyTorch's own switch for that
    (_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG, set for the call only): the same dense computation.
    tests/test_flex_attention.py checks it against SDPA with an explicit mask and bias."""
    import torch.nn.attention.flex_attention as fa
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    B, H, lq, lk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    mask_mod, score_mod = modification(spec, H, lq, lk, doc, table, q.device)
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, None, None, lq, lk, device=q.device,
                                       BLOCK_SIZE=block)
    traced = fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    try:
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                              return_lse=True)
    finally:
        fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = traced


def explicit_mask_and_bias(spec, H, lq, lk, doc=None, table=None, device=None, rows=None,
                           dtype=torch.float64):
    """The same modification as dense tensors, built from index grids without FlexAttention:
    a boolean mask [lq, lk] (None: none) and an additive bias [H, lq, lk] of dtype (None: none);
    rows (an int tensor of query rows): those rows only, [len(rows), lk]."""
    name, value = parse_spec(spec)
    i = torch.arange(lq, device=device) if rows is None else rows
    a = i.unsqueeze(1) + (lk - lq)  # aligned query positions
    j = torch.arange(lk, device=device).unsqueeze(0)
    causal = j <= a
    mask = {"causal": causal, "alibi": causal, "softcap": causal,
            "sliding_window": causal & (a - j < (value or 0)),
            "prefix_lm": causal | (j < (value or 0)), "rel_bias": None}.get(name)
    if name == "document":
        mask = causal & (a >= 0) & (doc[a.clamp(0, lk - 1)] == doc[j])
    bias = None
    if name == "alibi":
        slopes = torch.tensor(alibi_slopes(H), dtype=torch.float64, device=device)
        bias = torch.stack([(slopes[h] * (j - a).double()).to(dtype) for h in range(H)])
    if name == "rel_bias":
        bias = table.double()[:, ((a - j).clamp(-value, value) + value)].to(dtype)
    return mask, bias


def sdpa_explicit(q, k, v, spec, doc=None, table=None):
    """The modification through F.scaled_dot_product_attention with an explicit float mask
    (bias, and -inf where the mask drops an entry); soft-capping is not a bias, so softcap is the
    softmax written out. Rows that see no key: 0 (SDPA would give NaN). O and the log-sum-exp."""
    H, lq, lk, D = q.shape[1], q.shape[2], k.shape[2], q.shape[3]
    name, value = parse_spec(spec)
    mask, bias = explicit_mask_and_bias(spec, H, lq, lk, doc, table, q.device)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)  # only for the LSE (and softcap's softmax)
    if name == "softcap":
        scores = value * torch.tanh(scores / value)
    add = torch.zeros(H, lq, lk, dtype=q.dtype, device=q.device)  # SDPA's float attn_mask
    if bias is not None:
        add = add + bias.to(q.dtype)
        scores = scores + bias.to(q.dtype)
    if mask is not None:
        add = add.masked_fill(~mask, float("-inf"))
        scores = scores.masked_fill(~mask, float("-inf"))
    if name == "softcap":
        o = torch.softmax(scores, dim=-1) @ v
    else:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=add)
    lse = torch.logsumexp(scores, dim=-1)
    seen = torch.isfinite(lse).unsqueeze(-1)
    return torch.where(seen, o, torch.zeros_like(o)), lse


def rope(x, positions, base=10000.0):
    """Rotary embedding, rotate-half: x [..., L, D], positions [L] (ints). The frequencies are
    rounded to fp32 and the angles formed in fp32, as the C code forms them; the rotation itself
    in x's dtype."""
    D = x.shape[-1]
    inv_freq = torch.tensor([base ** (-2.0 * c / D) for c in range(D // 2)],
                            dtype=torch.float64).float()
    angle = positions.float().unsqueeze(-1) * inv_freq  # [L, D/2], fp32
    cos, sin = angle.double().cos().to(x.dtype), angle.double().sin().to(x.dtype)
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def tiles(mask, tile=64):
    """The block mask of a boolean [lq, lk] mask as flex_attention.cu's create_block_mask counts
    it: per query tile the FULL key tiles (every in-range entry visible) and the PARTIAL ones
    (some visible); the others are EMPTY."""
    lq, lk = mask.shape
    full, partial = [], []
    for q0 in range(0, lq, tile):
        f, p = [], []
        for j0 in range(0, lk, tile):
            t = mask[q0:q0 + tile, j0:j0 + tile]
            if bool(t.all()):
                f.append(j0 // tile)
            elif bool(t.any()):
                p.append(j0 // tile)
        full.append(f)
        partial.append(p)
    return full, partial


def demo():
    torch.manual_seed(1)
    B, H, lq, lk, D = 1, 3, 200, 200, 64
    q, k, v = (torch.rand(B, H, n, D, dtype=torch.float64) * 2 - 1 for n in (lq, lk, lk))
    doc = torch.repeat_interleave(torch.arange(4), torch.tensor([50, 70, 0, 80]))
    table = torch.rand(H, 2 * 8 + 1, dtype=torch.float64) * 2 - 1
    for spec in ("causal", "sliding_window:w=64", "prefix_lm:p=32", "document", "alibi",
                 "softcap:cap=0.5", "rel_bias:r=8"):
        o, lse = flex(q, k, v, spec, doc, table)
        want, want_lse = sdpa_explicit(q, k, v, spec, doc, table)
        mask, _ = explicit_mask_and_bias(spec, H, lq, lk, doc, table)
        full, partial = tiles(mask if mask is not None else torch.ones(lq, lk, dtype=torch.bool))
        nf, npart = sum(map(len, full)), sum(map(len, partial))
        n = len(full) * ((lk + 63) // 64)
        print(f"{spec:20s} flex_attention vs SDPA (explicit mask/bias): max err "
              f"{(o - want).abs().max().item():.1e}, LSE {(lse - want_lse).abs().max().item():.1e};"
              f" 64 x 64 tiles: FULL {nf}, PARTIAL {npart}, EMPTY {n - nf - npart}")
    pos = torch.arange(lq)
    qr, kr = rope(q, pos), rope(k, pos)
    shifted = rope(q, pos + 1000) @ rope(k, pos + 1000).transpose(-1, -2)
    print(f"RoPE: scores depend on relative positions only: shifting both by 1000 changes them "
          f"by {(shifted - qr @ kr.transpose(-1, -2)).abs().max().item():.1e}")


if __name__ == "__main__":
    reference_main(demo, TESTS, USAGE, __doc__)
