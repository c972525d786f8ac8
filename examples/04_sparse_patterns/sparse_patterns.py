#!/usr/bin/env python3
"""sparse_patterns.py — PyTorch reference for Example 04 (sparse attention patterns).

The patterns of attn/patterns.cuh rebuilt independently in PyTorch, from the same spec strings:

    window:w=W          |j - a| <= w                     (Longformer, Beltagy et al. 2020)
    causal_window:w=W   a - W < j <= a                   (Mistral 7B, Jiang et al. 2023)
    dilated:w=W,d=D     j = a + d*m, m in [-w, w]         (Longformer)
    strided:l=L         j <= a, (a - j) mod l = 0 or a - l < j        (Sparse Transformer,
    fixed:l=L,c=C       floor(j/l) = floor(a/l) or j mod l >= l - c    Child et al. 2019)
    global:g=0,5-7      rows and columns of G dense
    bigbird:b=B,r=R,seed=S   ITC blocks: |I - J| <= 1, first/last block global, R seeded random
                             blocks per query block    (BigBird, Zaheer et al. 2020)
    parts joined by '+' are a union; a = i + Lk - Lq (bottom-right alignment, as causality)

and, as FlexAttention's BlockMask, the block mask (per query tile the sorted full and partial key
tiles). Where FlexAttention is available (torch.nn.attention.flex_attention) its create_block_mask
is run on the same predicate and must give the same tiles.

Run:
  python sparse_patterns.py                 density, block density and metadata size of every
                                            pattern at realistic sizes (the README's table)
  python sparse_patterns.py --all           every check
  python sparse_patterns.py --all --c-dump PATH
                                            also checks the C builders (attn_pattern_block_mask,
                                            attn_pattern_csr) and the C reference under each
                                            pattern on data dumped by PATH (tests/python's
                                            dump_reference)
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "01_attention_basics")
)
from naive_attention import (  # noqa: E402
    causal_mask, load_attn_tensor, naive_attention, random_qkv, run_script)

TILE = 64  # the kernels' tile (ATTN_SPARSE_TILE): Br = Bc = 64
MASK64 = (1 << 64) - 1

# ----------------------------------------------------------------------------------------------
# Spec strings
# ----------------------------------------------------------------------------------------------

# The parameters of each kind, in the order attn_pattern_format writes them; global's "n=K" is
# read as g=0-(K-1).
PARAMS = {"window": ("w",), "causal_window": ("w",), "dilated": ("w", "d"), "strided": ("l",),
          "fixed": ("l", "c"), "global": ("g",), "bigbird": ("b", "r", "seed")}
MIN = {"d": 1, "l": 1, "b": 1}  # smallest value of a parameter (others: 0)
MAX_RANDOM = 16  # ATTN_PATTERN_MAX_RANDOM: bigbird's r


def add_range(ranges, lo, hi):
    """[lo, hi) added to sorted half-open ranges, merging those that overlap or touch (as the C
    parser's add_range)."""
    out = []
    for a, b in sorted(ranges + [(lo, hi)]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def parse_pattern(spec):
    """'window:w=8+global:g=0,3-4' -> [{'kind': 'window', 'w': 8},
    {'kind': 'global', 'g': [(0, 1), (3, 5)]}] (global: merged half-open ranges, as the C
    parser). 'none' or 'dense' -> [] (dense). A malformed spec raises ValueError with a one-line
    reason (the C parser's unit test covers the same errors on the C side)."""
    if spec in ("none", "dense"):
        return []
    parts = []
    for text in spec.split("+"):
        kind, _, params = text.partition(":")
        if kind not in PARAMS:
            raise ValueError(f"unknown pattern '{text}' (kinds: {', '.join(PARAMS)}, none)")
        part = {"kind": kind, "g": [], "seed": 0} if kind in ("global", "bigbird") else \
            {"kind": kind}
        name = None
        for tok in params.split(",") if params else []:
            if "=" in tok:
                name, tok = tok.split("=", 1)
            elif name != "g":
                raise ValueError(f"pattern part '{text}': expected name=value, got '{tok}'")
            known = PARAMS[kind] + (("n",) if kind == "global" else ())
            if name not in known:
                raise ValueError(f"pattern part '{text}': unknown parameter '{name}' "
                                 f"({kind} takes {', '.join(known)})")
            lo, _, hi = tok.partition("-") if name == "g" else (tok, "", "")
            if not lo.isdigit() or not (hi.isdigit() or hi == "" and "-" not in tok):
                raise ValueError(f"pattern part '{text}': {name} must be a non-negative integer"
                                 f"{' or N-M' if name == 'g' else ''} (got '{tok}')")
            if name in ("g", "n"):
                first, last = (0, int(lo) - 1) if name == "n" else (int(lo), int(hi or lo))
                if last < first:
                    raise ValueError(f"pattern part '{text}': bad global range '{tok}'")
                part["g"] = add_range(part["g"], first, last + 1)
            elif int(lo) < MIN.get(name, 0) or name == "r" and int(lo) > MAX_RANDOM:
                raise ValueError(f"pattern part '{text}': {name} must be at least "
                                 f"{MIN.get(name, 0)}" + (f" and at most {MAX_RANDOM}"
                                                          if name == "r" else ""))
            else:
                part[name] = int(lo)
        missing = [p for p in PARAMS[kind] if p not in part or p == "g" and not part["g"]]
        if missing:
            raise ValueError(f"pattern part '{text}': missing parameter {missing[0]} "
                             f"({kind} takes {', '.join(PARAMS[kind])})")
        if kind == "fixed" and part["c"] > part["l"]:
            raise ValueError(f"pattern part '{text}': c must be at most l")
        parts.append(part)
    return parts


def format_pattern(parts):
    """The canonical spec of parsed parts, as attn_pattern_format writes it ("none" if dense):
    every parameter spelt out, e.g. 'bigbird:b=64,r=3,seed=0', 'global:g=0-3,9'."""
    if not parts:
        return "none"

    def value(part, name):
        if name != "g":
            return str(part[name])
        return ",".join(str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}" for lo, hi in part["g"])
    return "+".join(p["kind"] + ":" + ",".join(f"{n}={value(p, n)}" for n in PARAMS[p["kind"]])
                    for p in parts)


# ----------------------------------------------------------------------------------------------
# The predicate, on index tensors
# ----------------------------------------------------------------------------------------------


def splitmix(x):
    """SplitMix64's finaliser, as attn_pattern_hash (the generator of BigBird's random blocks)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def bigbird_random(r, seed, I, nb):
    """The random key blocks of query block I among nb: min(r, available) distinct blocks drawn
    uniformly (Floyd's algorithm) among those not kept anyway (I-1, I, I+1, 0, nb-1)."""
    kept = sorted({x for x in (0, I - 1, I, I + 1, nb - 1) if 0 <= x < nb})
    avail = nb - len(kept)
    r = min(r, avail)
    row = splitmix(seed ^ (I & 0xFFFFFFFF))
    chosen = []
    for k in range(avail - r, avail):
        t = splitmix(row ^ k) % (k + 1)
        chosen.append(k if t in chosen else t)
    free = [x for x in range(nb) if x not in kept]  # ordinal -> block index
    return [free[o] for o in chosen]


def bigbird_table(part, lq, lk, device=None):
    """BigBird's kept blocks as a bool table [NI, NB] and the first query block I0: row I - I0
    says which key blocks query block I keeps (window blocks, global first/last blocks, random
    blocks), for every query block that aligned positions a in [lk - lq, lk) fall in."""
    b = part["b"]
    nb = -(-lk // b)
    first = (lk - lq) // b  # floor: negative when lq > lk
    I = torch.arange(first, nb).unsqueeze(1)
    J = torch.arange(nb).unsqueeze(0)
    table = ((I - J).abs() <= 1) | (I == 0) | (I == nb - 1) | (J == 0) | (J == nb - 1)
    for row in range(table.shape[0]):
        table[row, bigbird_random(part["r"], part["seed"], first + row, nb)] = True
    return table.to(device), first


def part_predicate(part, lq, lk, device=None):
    """keep(a, j) of one part on broadcastable integer tensors of aligned query positions a and
    keys j (causality not applied). Only tensor arithmetic, comparisons and indexing of a table
    built here, so that it also runs as FlexAttention's mask_mod."""
    kind = part["kind"]
    if kind == "window":
        return lambda a, j: ((j - a) >= -part["w"]) & ((j - a) <= part["w"])
    if kind == "causal_window":
        return lambda a, j: ((j - a) > -part["w"]) & ((j - a) <= 0)
    if kind == "dilated":
        w, d = part["w"], part["d"]
        return lambda a, j: (((j - a) >= -d * w) & ((j - a) <= d * w)
                             & ((j - a).remainder(d) == 0))
    if kind == "strided":
        l = part["l"]
        return lambda a, j: ((j - a) <= 0) & (((j - a) > -l) | ((j - a).remainder(l) == 0))
    if kind == "fixed":
        l, c = part["l"], part["c"]
        return lambda a, j: ((torch.div(j, l, rounding_mode="floor")
                              == torch.div(a, l, rounding_mode="floor"))
                             | (j.remainder(l) >= l - c))
    if kind == "global":
        def keep(a, j):
            out = None
            for lo, hi in part["g"]:
                k = ((a >= lo) & (a < hi)) | ((j >= lo) & (j < hi))
                out = k if out is None else out | k
            return out
        return keep
    if kind == "bigbird":
        b = part["b"]
        table, first = bigbird_table(part, lq, lk, device)
        nq, nb = table.shape

        def keep(a, j):  # clamped: FlexAttention also asks about the padding of a tail tile
            I = (torch.div(a, b, rounding_mode="floor") - first).clamp(0, nq - 1)
            return table[I, torch.div(j, b, rounding_mode="floor").clamp(0, nb - 1)]
        return keep
    raise ValueError(f"unknown pattern kind {kind}")


def pattern_predicate(parts, lq, lk, causal=False, device=None):
    """keep(i, j) on broadcastable integer tensors of query rows i and keys j: the entries
    computed under the pattern (union of parts; no parts: dense) and causality, with query i at
    the aligned position a = i + lk - lq. Tables live on device."""
    tests = [part_predicate(p, lq, lk, device) for p in parts]

    def keep(i, j):
        a = i + (lk - lq)
        out = (j >= j) & (a >= a) if not tests else None  # dense: every entry (broadcast)
        for test in tests:
            out = test(a, j) if out is None else out | test(a, j)
        return out & (j <= a) if causal else out
    return keep


def flex_mask_mod(parts, lq, lk, causal=False, device=None):
    """FlexAttention's mask_mod(b, h, q_idx, kv_idx) of the pattern (all heads share it)."""
    keep = pattern_predicate(parts, lq, lk, causal, device)
    return lambda b, h, q_idx, kv_idx: keep(q_idx, kv_idx)


def pattern_mask(spec, lq, lk, causal=False, device=None):
    """Boolean [lq, lk]: the entries computed under the pattern (union of parts) and causality."""
    keep = pattern_predicate(parse_pattern(spec), lq, lk, causal, device)
    return keep(torch.arange(lq, device=device).unsqueeze(1),
                torch.arange(lk, device=device).unsqueeze(0))


def pattern_entries(spec, lq, lk, causal=False, device=None, chunk=1 << 26):
    """Entries computed per head (pattern and causality), counted in chunks of query rows of about
    `chunk` entries, without the whole [lq, lk] mask (128k x 128k would be 16 GiB)."""
    keep = pattern_predicate(parse_pattern(spec), lq, lk, causal, device)
    j = torch.arange(lk, device=device).unsqueeze(0)
    rows = max(1, chunk // max(lk, 1))
    return sum(int(keep(torch.arange(r, min(r + rows, lq), device=device).unsqueeze(1), j).sum())
               for r in range(0, lq, rows))


def block_mask(mask, tile_q, tile_k):
    """FlexAttention-style block mask of a boolean [lq, lk] mask: a tile is full when every
    in-range entry is kept, partial when some are. Returns (kv_num, kv_idx, full_num, full_idx);
    the index arrays are [NQ, NK], ascending, padded with -1."""
    lq, lk = mask.shape
    nq, nk = -(-lq // tile_q), -(-lk // tile_k)
    padded = torch.zeros(nq * tile_q, nk * tile_k, dtype=torch.bool)
    padded[:lq, :lk] = mask
    kept = padded.reshape(nq, tile_q, nk, tile_k).sum(dim=(1, 3))
    rows = (lq - torch.arange(nq) * tile_q).clamp(max=tile_q)  # in-range rows of each tile
    cols = (lk - torch.arange(nk) * tile_k).clamp(max=tile_k)
    total = rows.unsqueeze(1) * cols.unsqueeze(0)
    full = (kept == total) & (kept > 0)
    partial = (kept > 0) & ~full

    def lists(sel):
        idx = torch.full((nq, nk), -1, dtype=torch.int64)
        for r in range(nq):
            cols = torch.nonzero(sel[r]).flatten()
            idx[r, : cols.numel()] = cols
        return sel.sum(dim=1), idx

    kv_num, kv_idx = lists(partial)
    full_num, full_idx = lists(full)
    return kv_num, kv_idx, full_num, full_idx


def sparse_attention(q, k, v, spec, causal=False, scale=None):
    """Attention under the pattern: (O, LSE); rows that keep nothing give 0 and -inf."""
    return naive_attention(q, k, v, causal=causal, scale=scale,
                           mask=pattern_mask(spec, q.shape[-2], k.shape[-2]))


def pattern_stats(spec, lq, lk, causal=False, tile=TILE):
    """Density, theoretical speedup over dense, visited tiles and metadata bytes (as the C
    harness prints them: 4 int32 arrays [NQ] + [NQ] + [NQ, NK] + [NQ, NK])."""
    m = pattern_mask(spec, lq, lk, causal)
    kv_num, _, full_num, _ = block_mask(m, tile, tile)
    nq, nk = kv_num.numel(), -(-lk // tile)
    dense = float(causal_mask(lq, lk).sum()) if causal else float(lq * lk)
    kept = float(m.sum())
    return dict(density=kept / (lq * lk), speedup=dense / kept if kept else math.inf,
                visited=float(kv_num.sum() + full_num.sum()) / (nq * nk),
                full=int(full_num.sum()), partial=int(kv_num.sum()),
                metadata=4 * (2 * nq + 2 * nq * nk))


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------

CASES = [  # spec, B, Lq, Lk, causal
    ("window:w=0", 1, 40, 40, False),
    ("window:w=5", 2, 37, 37, True),
    ("window:w=100", 1, 33, 33, False),
    ("causal_window:w=9", 1, 50, 50, False),
    ("causal_window:w=0", 1, 20, 20, False),
    ("dilated:w=3,d=4", 1, 45, 45, False),
    ("strided:l=6", 1, 50, 50, True),
    ("strided:l=500", 1, 30, 30, False),
    ("fixed:l=8,c=2", 1, 50, 50, False),
    ("global:g=0,3-5,40", 1, 48, 48, False),
    ("bigbird:b=8,r=2,seed=3", 1, 70, 70, False),
    ("bigbird:b=5,r=1", 2, 41, 41, True),
    ("window:w=3+global:g=0-1", 1, 40, 40, True),
    ("causal_window:w=4+strided:l=5", 1, 30, 30, False),
    ("window:w=4", 1, 13, 50, True),
    ("bigbird:b=8,r=1,seed=9", 1, 50, 13, False),
    ("none", 1, 17, 17, True),
]


def check_predicates(c):
    """Spec parsing and the canonical spec; hand-checked entries (the same as the C unit test's)
    and the edge cases."""
    check_specs(c)
    def keeps(spec, i, j, lq=20, lk=20):
        return bool(pattern_mask(spec, lq, lk)[i, j])

    c.expect(keeps("window:w=2", 10, 8) and not keeps("window:w=2", 10, 13), "window w=2")
    c.expect(keeps("causal_window:w=3", 10, 8) and not keeps("causal_window:w=3", 10, 7),
             "causal window W=3")
    c.expect(keeps("causal_window:w=3", 0, 17, 1, 20) and not keeps("causal_window:w=3", 0, 16, 1, 20),
             "causal window, Lq=1: the query sits at the last position")
    c.expect(keeps("dilated:w=2,d=3", 10, 4) and not keeps("dilated:w=2,d=3", 10, 11), "dilated")
    c.expect(keeps("strided:l=4", 10, 2) and not keeps("strided:l=4", 10, 5), "strided")
    c.expect(keeps("fixed:l=4,c=1", 10, 3) and not keeps("fixed:l=4,c=1", 10, 4), "fixed")
    c.expect(keeps("global:g=1", 15, 1) and not keeps("global:g=1", 15, 2), "global")
    c.expect(bool(pattern_mask("window:w=64", 64, 64).all()), "window >= L is dense")
    c.expect(torch.equal(pattern_mask("strided:l=100", 64, 64), causal_mask(64, 64)),
             "stride > L is the causal band")
    c.expect(not bool(pattern_mask("causal_window:w=0", 30, 30).any()), "W = 0 keeps nothing")
    a = [bigbird_random(3, 7, I, 20) for I in range(20)]
    c.expect(a == [bigbird_random(3, 7, I, 20) for I in range(20)], "random blocks: same seed")
    c.expect(a != [bigbird_random(3, 8, I, 20) for I in range(20)], "random blocks: other seed")
    c.expect(all(len(set(r)) == 3 and all(abs(x - I) > 1 and 0 < x < 19 for x in r)
                 for I, r in enumerate(a)), "random blocks: distinct, none already kept")
    c.expect(bigbird_random(3, 7, 2, 6) == [4], "random blocks: only what is left")
    for lq, lk in ((70, 70), (100, 60), (30, 100)):  # the table against the definition, by row
        b, nb = 8, -(-lk // 8)
        want = torch.zeros(lq, lk, dtype=torch.bool)
        for i in range(lq):
            I = (i + lk - lq) // b
            for j in range(lk):
                J = j // b
                want[i, j] = abs(I - J) <= 1 or I in (0, nb - 1) or J in (0, nb - 1) or \
                    J in bigbird_random(2, 3, I, nb)
        c.expect(torch.equal(pattern_mask("bigbird:b=8,r=2,seed=3", lq, lk), want),
                 f"bigbird's block table equals its definition (Lq={lq}, Lk={lk})")


def check_specs(c):
    """Parsing and the canonical spec (attn_pattern_format's), and one-line errors."""
    for spec, canon in (("window:w=8", "window:w=8"), ("none", "none"),
                        ("bigbird:b=64,r=3", "bigbird:b=64,r=3,seed=0"),
                        ("global:n=4+dilated:w=2,d=3", "global:g=0-3+dilated:w=2,d=3"),
                        ("global:g=5,0-2,3,9-9", "global:g=0-3,5,9"),
                        ("fixed:c=2,l=8+strided:l=4", "fixed:l=8,c=2+strided:l=4"),
                        ("causal_window:w=4096", "causal_window:w=4096")):
        got = format_pattern(parse_pattern(spec))
        c.expect(got == canon, f"canonical spec of {spec}: {got} (want {canon})")
    for bad in ("window", "window:x=3", "window:w=-1", "windo:w=3", "dilated:w=2,d=0",
                "fixed:l=4,c=5", "global:g=3-1", "bigbird:b=64,r=17", "window:w=3+", "global:n=0"):
        try:
            parse_pattern(bad)
            c.expect(False, f"'{bad}' is rejected")
        except ValueError as e:
            c.expect("\n" not in str(e) and str(e) != "", f"'{bad}': one-line error ({e})")


def check_attention(c):
    """Attention under a pattern equals dense attention with the mask, and window >= L equals
    dense attention."""
    q, k, v = random_qkv(1, 2, 40, 40, 16, seed=3)
    o, _ = sparse_attention(q, k, v, "window:w=40")
    want, _ = naive_attention(q, k, v)
    c.close(o, want, 1e-12, 0, "window >= L is dense attention")
    o, lse = sparse_attention(q, k, v, "causal_window:w=0")
    c.expect(bool((o == 0).all()) and bool(torch.isinf(lse).all()), "masked rows: 0 and -inf")


def check_flex(c):
    """flex_mask_mod as FlexAttention evaluates it (vmap over scalar int32 indices, tail padding)
    equals pattern_mask for every kind, causal or not, L not a multiple of the tile, Lq != Lk;
    and create_block_mask on it gives our tiles (L a multiple of the tile: FlexAttention also
    judges the padding of a tail tile)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, create_mask
    except ImportError:
        print("FlexAttention not available in this PyTorch: BlockMask comparison skipped")
        return
    for spec, lq, lk, causal in (
            ("window:w=20", 100, 100, False), ("window:w=5", 37, 90, True),
            ("causal_window:w=70", 150, 150, False), ("dilated:w=8,d=9", 130, 130, False),
            ("strided:l=7", 90, 61, True), ("fixed:l=16,c=4", 100, 100, True),
            ("global:g=0,3-5", 70, 70, False), ("bigbird:b=16,r=2,seed=1", 100, 100, True),
            ("bigbird:b=8,r=2,seed=2", 100, 60, False),
            ("window:w=3+global:n=2+strided:l=16", 80, 80, True), ("none", 33, 33, True)):
        got = create_mask(flex_mask_mod(parse_pattern(spec), lq, lk, causal), 1, 1, lq, lk,
                          device="cpu")[0, 0]
        c.expect(torch.equal(got, pattern_mask(spec, lq, lk, causal)),
                 f"flex_mask_mod of {spec} (Lq={lq}, Lk={lk}, causal={causal}) equals the mask")
    for spec, causal in (("window:w=20", False), ("causal_window:w=70", False),
                         ("bigbird:b=32,r=2,seed=1", True), ("dilated:w=8,d=9", False),
                         ("fixed:l=32,c=4+global:g=3", False)):
        lq = lk = 256
        m = pattern_mask(spec, lq, lk, causal)
        bm = create_block_mask(flex_mask_mod(parse_pattern(spec), lq, lk, causal), None, None,
                               lq, lk, device="cpu", BLOCK_SIZE=32)
        kv_num, kv_idx, full_num, full_idx = block_mask(m, 32, 32)
        ok = torch.equal(bm.kv_num_blocks[0, 0].long(), kv_num) and \
            torch.equal(bm.full_kv_num_blocks[0, 0].long(), full_num)
        for r in range(kv_num.numel()):
            n, f = int(kv_num[r]), int(full_num[r])
            ok = ok and sorted(bm.kv_indices[0, 0, r, :n].tolist()) == kv_idx[r, :n].tolist()
            ok = ok and sorted(bm.full_kv_indices[0, 0, r, :f].tolist()) == full_idx[r, :f].tolist()
        c.expect(ok, f"FlexAttention BlockMask of {spec} (causal={causal}) equals ours")
    n = pattern_entries("causal_window:w=100", 1000, 1000, True, chunk=4000)
    c.expect(n == 100 * 101 // 2 + 900 * 100 and n == int(pattern_mask(
        "causal_window:w=100", 1000, 1000, True).sum()), f"pattern_entries in chunks: {n}")


def check_c_builders(c, tool):
    """The C builders (block mask, CSR) and the C reference under each pattern, on dumps."""
    for n, (spec, B, lq, lk, causal) in enumerate(CASES):
        for tile in (8, 16):
            what = f"C {spec} B={B} Lq={lq} Lk={lk} causal={causal} tile={tile}"
            with tempfile.TemporaryDirectory() as out:
                cmd = [tool, "--out", out, "--tile", str(tile), "--pattern", spec, "-B", str(B),
                       "-H", "2", "--lq", str(lq), "--lk", str(lk), "-D", "16",
                       "--seed", str(500 + n)] + (["--causal"] if causal else [])
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    c.expect(False, f"{what}: {' '.join(cmd)} exited {r.returncode}: {r.stderr}")
                    continue
                t = {name: torch.from_numpy(load_attn_tensor(os.path.join(out, name + ".bin")))
                     for name in ("q", "k", "v", "out", "lse", "mask", "kv_num", "kv_idx",
                                  "full_num", "full_idx")}
                with open(os.path.join(out, "spec.txt")) as f:
                    c_spec = f.read().strip()
            ours = format_pattern(parse_pattern(spec))
            c.expect(ours == c_spec,
                     f"{what}: canonical spec {ours} (attn_pattern_format: {c_spec})")
            want = pattern_mask(spec, lq, lk, causal)
            c.expect(all(torch.equal(t["mask"][b].bool(), want) for b in range(B)),
                     f"{what}: CSR (attn_pattern_csr) equals the mask")
            kv_num, kv_idx, full_num, full_idx = block_mask(want, tile, tile)
            got = [t[name].long() for name in ("kv_num", "kv_idx", "full_num", "full_idx")]
            ref = (kv_num, kv_idx, full_num, full_idx)
            if len(parse_pattern(spec)) > 1:  # unions: same tiles, full may be listed partial
                c.expect(all(torch.equal(got[0][b] + got[2][b], kv_num + full_num) and
                             bool((got[2][b] <= full_num).all()) for b in range(B)),
                         f"{what}: block mask lists the same tiles")
            else:
                c.expect(all(torch.equal(g[b], w) for g, w in zip(got, ref) for b in range(B)),
                         f"{what}: block mask (attn_pattern_block_mask) equals FlexAttention's rule")
            if tile == 8:
                o, lse = sparse_attention(t["q"].double(), t["k"].double(), t["v"].double(),
                                          spec, causal)
                c.close(t["out"], o, 1e-6, 1e-6, what + ": C reference output")
                c.close(t["lse"], lse, 1e-6, 1e-6, what + ": C reference LSE")


# ----------------------------------------------------------------------------------------------
# Demo: the README's table
# ----------------------------------------------------------------------------------------------

DEMO = [  # spec, L, causal: the density targets first (50% at 4k, 25% at 8k, 10% at 16k)
    ("window:w=1200", 4096, False),
    ("window:w=1100", 8192, False),
    ("window:w=840", 16384, False),
    ("causal_window:w=4096", 16384, True),
    ("dilated:w=256,d=4", 4096, False),
    ("strided:l=64", 4096, True),
    ("fixed:l=128,c=16", 4096, True),
    ("window:w=256+global:n=64", 4096, False),
    ("bigbird:b=64,r=3,seed=1", 4096, False),
]


def demo():
    print(f"{'pattern':<28} {'L':>6} causal  density  speedup bound  tiles visited"
          f"  full/partial   metadata")
    for spec, L, causal in DEMO:
        s = pattern_stats(spec, L, L, causal)
        print(f"{spec:<28} {L:>6} {'yes' if causal else 'no ':<6} {100 * s['density']:6.2f}%"
              f" {s['speedup']:13.2f}x {100 * s['visited']:12.1f}%  {s['full']:5d}/{s['partial']:<6d}"
              f" {s['metadata'] / 1024:8.1f} KiB")


def main(argv=None):
    return run_script(__doc__, demo, [check_predicates, check_attention, check_flex], argv,
                      c_dump=check_c_builders,
                      c_dump_help="dump_reference tool to check the C pattern builders and "
                                  "reference")


if __name__ == "__main__":
    sys.exit(main())
