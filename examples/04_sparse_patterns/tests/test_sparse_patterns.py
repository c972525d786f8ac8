#!/usr/bin/env python3
"""test_sparse_patterns.py — the checks of Example 04's reference (sparse_patterns.py): spec
parsing and the canonical spec, hand-checked entries of every pattern kind, attention under a
pattern, FlexAttention's mask_mod and create_block_mask on the same predicate (where this PyTorch
has FlexAttention), and with --c-dump the C builders (attn_pattern_block_mask, attn_pattern_csr)
and the C reference under each pattern on data dumped by dump_reference.

    python examples/04_sparse_patterns/tests/test_sparse_patterns.py [--c-dump build/sim/tests/python/dump_reference]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "python"))  # attn_testing.py, shared by the suites
from attn_testing import dump, main, random_qkv, reference

sp = reference("sparse_patterns")
parse_pattern, format_pattern, pattern_mask = sp.parse_pattern, sp.format_pattern, sp.pattern_mask
bigbird_random, block_mask, flex_mask_mod = sp.bigbird_random, sp.block_mask, sp.flex_mask_mod
pattern_entries = sp.pattern_entries
causal_mask = reference("naive_attention").causal_mask
naive_attention = reference("naive_attention").naive_attention


def sparse_attention(q, k, v, spec, causal=False, scale=None):
    """Attention under the pattern: (O, LSE); rows that keep nothing give 0 and -inf."""
    return naive_attention(q, k, v, causal=causal, scale=scale,
                           mask=pattern_mask(spec, q.shape[-2], k.shape[-2]))


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
    c.expect(keeps("causal_window:w=3", 0, 17, 1, 20)
             and not keeps("causal_window:w=3", 0, 16, 1, 20),
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
    for spec, lq, lk, causal in (("strided:l=4", 300, 300, True), ("fixed:l=8,c=2", 100, 300, True),
                                 ("bigbird:b=32,r=1,seed=1", 100, 300, True),
                                 ("window:w=5", 100, 300, False)):
        n = pattern_entries(spec, lq, lk, causal, chunk=1000)  # causal: each chunk's keys cut
        c.expect(n == int(pattern_mask(spec, lq, lk, causal).sum()),
                 f"pattern_entries of {spec} {lq}x{lk} (causal={causal}) in chunks: {n}")


def check_c_builders(c, tool):
    """The C builders (block mask, CSR) and the C reference under each pattern, on dumps."""
    for n, (spec, B, lq, lk, causal) in enumerate(CASES):
        for tile in (8, 16):
            what = f"C {spec} B={B} Lq={lq} Lk={lk} causal={causal} tile={tile}"
            got = dump(c, what, tool, ["--tile", tile, "--pattern", spec, "-B", B, "-H", 2,
                                       "--lq", lq, "--lk", lk, "-D", 16, "--seed", 500 + n]
                       + (["--causal"] if causal else []),
                       ("q", "k", "v", "out", "lse", "mask", "kv_num", "kv_idx", "full_num",
                        "full_idx"), texts=("spec.txt",))
            if got is None:
                continue
            c_spec = got.pop("spec.txt")
            t = {name: torch.from_numpy(a) for name, a in got.items()}
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
                         f"{what}: block mask (attn_pattern_block_mask) equals "
                         "FlexAttention's rule")
            if tile == 8:
                o, lse = sparse_attention(t["q"].double(), t["k"].double(), t["v"].double(),
                                          spec, causal)
                c.close(t["out"], o, 1e-6, 1e-6, what + ": C reference output")
                c.close(t["lse"], lse, 1e-6, 1e-6, what + ": C reference LSE")


if __name__ == "__main__":
    sys.exit(main(__doc__, [check_predicates, check_attention, check_flex],
                  c_dump=check_c_builders,
                  c_dump_help="dump_reference tool to check the C pattern builders and reference"))
