#!/usr/bin/env python3
"""Example 06's ladder in Python (CTest example06.ladder_py): examples/06_custom_pattern/ladder.py's
block rule and exact density against example 04's PyTorch predicate (sparse_patterns.py, the one
quality/ runs in the model), and against the C harness's pattern line (the entries its reference
and kernels compute). Usage: test_ladder.py PROGRAM (custom_pattern_sim). Exit 0 when every check
passes, 1 otherwise."""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples", "06_custom_pattern"))
sys.path.insert(0, os.path.join(ROOT, "examples", "04_sparse_patterns"))
import ladder  # noqa: E402
import sparse_patterns as sp  # noqa: E402

ladder.register(sp)  # the ladder is example 06's own kind

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def main():
    program = sys.argv[1]
    cases = [(1, 1, 1, 1), (37, 4, 1, 1), (100, 8, 0, 2), (130, 16, 2, 3), (257, 1, 4, 9),
             (300, 64, 1, 1), (500, 24, 1, 5)]
    for L, b, s, w in cases:
        spec = f"ladder:b={b},s={s},w={w}"
        mask = sp.pattern_mask(spec, L, L, causal=True)
        kept = int(mask.sum())
        rule = all(bool(mask[i, j]) == (j <= i and ladder.block_keep(i // b, j // b, s, w))
                   for i in range(0, L, max(1, L // 23)) for j in range(L))
        check(rule, f"{spec} L={L}: ladder.block_keep equals sparse_patterns' predicate")
        check(abs(ladder.density(L, b, s, w) - kept / (L * (L + 1) / 2)) < 1e-12,
              f"{spec} L={L}: ladder.density = {ladder.density(L, b, s, w):.4f} equals the mask's")
        nb = (L + b - 1) // b
        check(all(ladder.rungs(I, s, w) == len(ladder.kept_blocks(I, s, w)) for I in range(nb)),
              f"{spec}: rungs() (closed form) equals the kept blocks counted")
        r = subprocess.run([program, "--check-only", "-L", str(L), "-D", "64",
                            "--causal", "--kernel", "2", "--pattern", spec],
                           capture_output=True, text=True)
        m = re.search(r"\((\d+) of (\d+) entries per head under causality\)", r.stdout)
        check(r.returncode == 0 and m is not None and int(m.group(1)) == kept,
              f"{spec} L={L}: the C harness computes {m.group(1) if m else '?'} entries, "
              f"PyTorch keeps {kept} (exit {r.returncode})")
    # The parameters the README and the GPU grid quote reach their density, and w - 1 does not.
    for L, target in [(4096, 0.5), (8192, 0.25), (16384, 0.10)]:
        w = ladder.params_for(L, target)
        check(ladder.density(L, 64, 1, w) >= target > (ladder.density(L, 64, 1, w - 1)
                                                        if w > 1 else 0),
              f"L={L}: w={w} is the smallest w with density >= {target}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
