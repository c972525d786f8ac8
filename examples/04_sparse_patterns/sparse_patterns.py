#!/usr/bin/env python3
"""sparse_patterns.py — PyTorch reference for Example 04 (sparse attention patterns).

The patterns of common/device/patterns.cuh (parsed by attn/sparse/patterns.h) rebuilt
independently in PyTorch, from the same spec strings:

    window:w=W          |j - a| <= w                     (Longformer, Beltagy et al. 2020)
    causal_window:w=W   a - W < j <= a                   (Mistral 7B, Jiang et al. 2023)
    dilated:w=W,d=D     j = a + d*m, m in [-w, w]         (Longformer)
    strided:l=L         j <= a, (a - j) mod l = 0 or a - l < j        (Sparse Transformer,
    fixed:l=L,c=C       floor(j/l) = floor(a/l) or j mod l >= l - c    Child et al. 2019)
    global:g=0,5-7      rows and columns of G dense
    bigbird:b=B,r=R,seed=S   ITC blocks: |I - J| <= 1, first/last block global, R seeded random
                             blocks per query block    (BigBird, Zaheer et al. 2020)
    parts joined by '+' are a union; a = i + Lk - Lq (bottom-right alignment, as causality)

An example may add a kind of its own (register_kind; example 06's ladder.py registers "ladder"),
as the C harness lets it (attn_pattern_register).

and, as FlexAttention's BlockMask, the block mask (per query tile the sorted full and partial key
tiles). Where FlexAttention is available (torch.nn.attention.flex_attention) its create_block_mask
is run on the same predicate and must give the same tiles.

Run:
  python sparse_patterns.py                 density, block density and metadata size of every
                                            pattern at realistic sizes (the README's table)
  python sparse_patterns.py --all           every check (runs tests/test_sparse_patterns.py)
  python sparse_patterns.py --all --c-dump PATH
                                            also checks the C builders (attn_pattern_block_mask,
                                            attn_pattern_csr) and the C reference under each
                                            pattern on data dumped by PATH (tests/python's
                                            dump_reference)
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import reference_main, require  # noqa: E402

torch = require("torch", setup="--python")

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "test_sparse_patterns.py")
USAGE = ("sparse_patterns.py [--all [--c-dump PATH]]"
         "   (--all: every check, by tests/test_sparse_patterns.py)")

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

# The kinds examples define themselves: name -> (defaults of the optional parameters, smallest
# values, predicate(part) -> keep(a, j) on index tensors).
OWN = {}


def register_kind(name, params, defaults, minimum, predicate):
    """Adds a pattern kind of an example's own: its parameter names (in attn_pattern_format's
    order), defaults of the optional ones ({name: value}; the others are required), smallest
    values ({name: value}), and predicate(part) returning keep(a, j) on broadcastable integer
    tensors of aligned query positions and keys (causality not applied), as part_predicate's."""
    PARAMS[name] = tuple(params)
    OWN[name] = (dict(defaults), dict(minimum), predicate)


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
            dict(OWN[kind][0], kind=kind) if kind in OWN else {"kind": kind}
        minimum = dict(MIN, **OWN[kind][1]) if kind in OWN else MIN
        given = set()
        name = None
        for tok in params.split(",") if params else []:
            if "=" in tok:
                name, tok = tok.split("=", 1)
                if name in given:
                    raise ValueError(f"pattern part '{text}': {name} is given twice")
                given.add(name)
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
            elif int(lo) < minimum.get(name, 0) or name == "r" and int(lo) > MAX_RANDOM:
                raise ValueError(f"pattern part '{text}': {name} must be at least "
                                 f"{minimum.get(name, 0)}" + (f" and at most {MAX_RANDOM}"
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
    if kind in OWN:
        return OWN[kind][2](part)
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
    `chunk` entries, without the whole [lq, lk] mask (128k x 128k would be 16 GiB). Under
    causality a chunk's keys stop at its last row's aligned position (the rest are never kept):
    half the work of a square pattern."""
    keep = pattern_predicate(parse_pattern(spec), lq, lk, causal, device)
    rows = max(1, chunk // max(lk, 1))

    def keys(end):  # the keys a chunk of rows before `end` can keep
        n = max(0, min(lk, end + lk - lq)) if causal else lk
        return torch.arange(n, device=device).unsqueeze(0)
    return sum(int(keep(torch.arange(r, min(r + rows, lq), device=device).unsqueeze(1),
                        keys(min(r + rows, lq))).sum())
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


def pattern_stats(spec, lq, lk, causal=False, tile=TILE):
    """Density, theoretical speedup over dense, visited tiles and metadata bytes (as the C
    harness prints them: 4 int32 arrays [NQ] + [NQ] + [NQ, NK] + [NQ, NK])."""
    m = pattern_mask(spec, lq, lk, causal)
    kv_num, _, full_num, _ = block_mask(m, tile, tile)
    nq, nk = kv_num.numel(), -(-lk // tile)
    dense = float(pattern_mask("none", lq, lk, causal).sum())
    kept = float(m.sum())
    return dict(density=kept / (lq * lk), speedup=dense / kept if kept else math.inf,
                visited=float(kv_num.sum() + full_num.sum()) / (nq * nk),
                full=int(full_num.sum()), partial=int(kv_num.sum()),
                metadata=4 * (2 * nq + 2 * nq * nk))


# ----------------------------------------------------------------------------------------------
# Demo: the README's table
# ----------------------------------------------------------------------------------------------

DEMO = [  # spec, L, causal: the chapter's density targets first (50% at 4k, 25% at 8k, 10% at 16k)
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
              f" {s['speedup']:13.2f}x {100 * s['visited']:12.1f}%"
              f"  {s['full']:5d}/{s['partial']:<6d}"
              f" {s['metadata'] / 1024:8.1f} KiB")


if __name__ == "__main__":
    reference_main(demo, TESTS, USAGE, __doc__)
