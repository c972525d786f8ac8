#!/usr/bin/env python3
"""test_flash2_fwd.py — the checks of Example 03's reference (flash2_fwd.py): against
F.scaled_dot_product_attention and example 01's naive reference in float64 (tail tiles,
Lq != Lk, causal, D = 64, 80, 128), the causal tile skipping, the fp16/bf16 emulation by
FlashAttention's 2x rule, any tile size, and varlen batches (with an empty sequence) against
SDPA per sequence.

    python examples/03_flash_attention_v2/tests/test_flash2_fwd.py
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "python"))  # attn_testing.py, shared by the suites
from attn_testing import main, random_qkv, reference, visible_rows

fa2 = reference("flash2_fwd")
BR, BC_FP32, BC_MMA, LOWP = fa2.BR, fa2.BC_FP32, fa2.BC_MMA, fa2.LOWP
flash2_fwd, flash2_fwd_varlen = fa2.flash2_fwd, fa2.flash2_fwd_varlen
plain_lowp_attention, visited_tiles = fa2.plain_lowp_attention, fa2.visited_tiles
causal_mask = reference("naive_attention").causal_mask
naive_attention = reference("naive_attention").naive_attention

SHAPES = [  # (B, H, Lq, Lk, D): L < tile, tail tiles, one tile exactly, Lq != Lk both ways
    (1, 1, 1, 1, 64), (2, 1, 17, 17, 80), (1, 2, 64, 64, 64), (1, 1, 127, 127, 128),
    (2, 1, 129, 129, 80), (1, 1, 300, 300, 64), (1, 2, 64, 129, 64), (1, 2, 129, 64, 80),
    (1, 1, 1, 300, 128), (1, 1, 300, 17, 64), (1, 1, 17, 1, 128), (1, 1, 200, 127, 64),
]

LOWP_SHAPES = [  # the D of fa2_mma (64, 128); tails, Lq != Lk
    (1, 2, 17, 17, 64), (1, 1, 129, 129, 128), (1, 2, 300, 300, 64), (1, 1, 64, 300, 128),
    (1, 1, 300, 64, 64), (1, 1, 1, 129, 64),
]


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


if __name__ == "__main__":
    sys.exit(main(__doc__, [check_against_sdpa, check_against_naive, check_tile_skipping,
                            check_lowp, check_lowp_rounds_p, check_tile_sizes, check_stability,
                            check_varlen]))
