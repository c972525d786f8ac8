#!/usr/bin/env python3
"""readme_numbers.py -- the figures the examples' READMEs quote, computed from their formulas.

Two kinds of figures:
  tables   a README marks a generated table with  <!-- numbers:NAME --> ... <!-- /numbers:NAME -->
           and this script writes what lies between (NAME: 01-memory);
  claims   a sentence fragment with figures in it (a shared-memory size, a tile count, a bound,
           the length of a solution's function that a budget quotes):
           the fragment is formatted here from the formula and must appear verbatim in the README.

    python3 tests/docs/readme_numbers.py            rewrite the tables in place, then check
    python3 tests/docs/readme_numbers.py --check    exit 1 if a table or a claim disagrees (CTest)
Standard library only. Each formula is the one the README states next to the figure.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX01 = "examples/01_attention_basics/README.md"
EX02 = "examples/02_flash_attention_minimal/README.md"
EX03 = "examples/03_flash_attention_v2/README.md"
EX04 = "examples/04_sparse_patterns/README.md"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def size(nbytes):
    """64 MiB, 1 GiB, 32.5 KiB: the largest unit that keeps the figure >= 1."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if nbytes >= unit:
            v = nbytes / unit
            return f"{v:.0f} {name}" if v == int(v) else f"{v:.1f} {name}"
    return f"{nbytes} B"


# ---- example 01: the memory of the L x L matrix ---------------------------------------------

def table_01_memory():
    """Q, K, V, O: 4 tensors of B*H*L*D fp32; S: B*H*L*L fp32; their ratio L / (4D)."""
    rows = ["| B | H | L | D | Q, K, V, O together | S = P | S / (Q, K, V, O) |",
            "|---|---|---|---|---|---|---|"]
    for B, H, L, D in ((1, 4, 1024, 64), (4, 8, 2048, 64), (4, 8, 8192, 64), (4, 8, 32768, 64)):
        inputs = 4 * B * H * L * D * 4
        scores = B * H * L * L * 4
        fits = " (does not fit an 80 GiB H100)" if scores > 80 * GIB else ""
        rows.append(f"| {B} | {H} | {L} | {D} | {size(inputs)} | {size(scores)}{fits} | "
                    f"{scores // inputs}× |")
    return "\n".join(rows)


def claims_01():
    B, H, L, D = 4, 8, 8192, 64
    n = B * H * L * L
    assert n == 2 ** 31
    return [f"the ratio is `L / 4D` — at L = {L} and D = {D}, the score matrix is "
            f"{L // (4 * D)}× "
            "larger than Q, K, V and O together",
            f"has B·H·L² = 2³¹ elements exactly"]


# ---- examples 02 and 03: shared memory per block, causal tiles ------------------------------

def claims_02():
    smem = lambda D: 4 * 32 * (D + 1) * 4  # q_i, k_j, v_j, o_i: 32 x (D+1) floats each
    return [f"4 tiles of 32 x (D+1) floats: {size(smem(64))} at D = 64,",
            f"{size(smem(128))} at D = 128 (opt-in above 48 KiB)"]


def claims_03():
    fp32 = lambda D: (64 * D + 32 * (D + 1) + 32 * D + 2048) * 4
    padded = lambda D: 3 * 64 * (D + 8) * 2     # Q, K_j, V_j: [64][D+8] halves
    pipeline = lambda D: 5 * 64 * D * 2         # Q + 2 x (K + V): [64][D] halves
    out = [f"bytes — {fp32(128):,} B = {fp32(128) / KIB:.1f} KiB at D = 128",
           f"{size(padded(64))} at D = 64, {size(padded(128))} at D = 128 (opt-in)",
           f"`5 · 64 · D · 2` bytes, {size(pipeline(64))} at D = 64 and "
           f"{size(pipeline(128))} at "
           f"D = 128 (version 2: {padded(64) // KIB} and {padded(128) // KIB} KiB)"]
    # Causal tiles at Lq = Lk = 1024, Br = 64: query tile q's last row sees keys < 64(q + 1).
    for bc in (32, 64):
        visited = sum(-(-64 * (q + 1) // bc) for q in range(1024 // 64))
        total = (1024 // 64) * (1024 // bc)
        out.append(f"{visited} of {total} tiles at Bc = {bc}")
    return out


# ---- example 04: window densities -----------------------------------------------------------

def window_stats(L, lo, hi, tile=64):
    """Keys j kept for query i iff lo <= j - i <= hi (Lq = Lk = L): the density (kept / L²), the
    ideal speedup over dense (causal dense when hi <= 0), the share of all 64 x 64 tiles visited,
    and the fill of the visited tiles (kept / their entries)."""
    kept = sum(min(i + hi, L - 1) - max(i + lo, 0) + 1 for i in range(L))
    causal = hi <= 0
    dense = L * (L + 1) // 2 if causal else L * L
    nt = -(-L // tile)
    visited = entries = 0
    for qi in range(nt):
        i0, i1 = qi * tile, min(L, qi * tile + tile) - 1
        for kj in range(nt):
            j0, j1 = kj * tile, min(L, kj * tile + tile) - 1
            if j0 - i1 <= hi and j1 - i0 >= lo:
                visited += 1
                entries += (i1 - i0 + 1) * (j1 - j0 + 1)
    return kept / (L * L), dense / kept, visited / (nt * nt), kept / entries


def pct(x):
    return f"{100 * x:.1f} %" if x < 0.9995 else "100 %"


def claims_04():
    """The rows of the window patterns in the two tables of example 04, and the fill range the
    text quotes for the window patterns of the simulator table."""
    out, fills = [], []
    for spec, L, lo, hi, realistic in (("window:w=64", 1024, -64, 64, False),
                                       ("causal_window:w=128` (causal)", 1024, -127, 0, False),
                                       ("window:w=1200", 4096, -1200, 1200, True),
                                       ("window:w=1100", 8192, -1100, 1100, True),
                                       ("window:w=840", 16384, -840, 840, True),
                                       ("causal_window:w=4096` (causal)", 16384, -4095, 0, True)):
        density, speedup, visited, fill = window_stats(L, lo, hi)
        spec = spec if "`" in spec else spec + "`"
        if realistic:
            out.append(f"| `{spec} | {L} | {pct(density)} | {speedup:#.3g}× | {pct(visited)} |")
        else:
            fills.append(fill)
            out.append(f"| `{spec} | {pct(density)} | {speedup:#.3g}× |")
            out.append(f"| {pct(visited)}, {pct(fill)} |")
    out.append(f"fill their tiles ({100 * min(fills):.1f}–100 %")
    return out


# ---- exercise 02: the builder's budget -------------------------------------------------------

def claims_ex02():
    """The solution's block-mask builder (its section of the file, helper included), in lines of
    code: no blank lines, no comment lines."""
    with open(os.path.join(ROOT, "solutions/02_sparse_mask/sparse_mask.cu")) as f:
        text = f.read()
    section = text[text.index("= block mask ="):text.index("= kernels =")]
    code = [l for l in section.splitlines()[1:]
            if l.strip() and not l.strip().startswith(("/*", "*", "//"))]
    return [f"the solution's is {len(code)} lines of code"]


# ---- the grader: its own wall time for a class (benchmarks/grader_class.py) -----------------

def claims_grader():
    """The class benchmark as its result files record it (a measurement, quoted, not typed):
    the grader as it is, and as it was at the commit the "before" file names."""
    claims = []
    for name in ("class_01_mini_flash.json", "class_01_mini_flash_before.json"):
        with open(os.path.join(ROOT, "benchmarks/results/grader", name)) as f:
            r = json.load(f)
        claims.append(
            f"a class of {r['learners']} copies of exercise 01's solution "
            f"({r['cases_per_learner']} cases each, `--jobs {r['jobs']}`) took {r['seconds']:g} s, "
            f"{r['seconds_per_learner']:g} s per learner ({r['machine']}, load average "
            f"{r['load_average']:g} at the start, {r['date']}; sandbox: {r['sandbox']})")
        if name.endswith("_before.json"):
            claims.append(f"at commit {r['commit']}")
    return claims


TABLES = {EX01: {"01-memory": table_01_memory}}
CLAIMS = {EX01: claims_01, EX02: claims_02, EX03: claims_03, EX04: claims_04,
          "exercises/02_sparse_mask/README.md": claims_ex02, "grader/README.md": claims_grader}


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        print("usage: readme_numbers.py [--check]", file=sys.stderr)
        return 2
    bad = 0
    for readme in sorted(set(TABLES) | set(CLAIMS)):
        path = os.path.join(ROOT, readme)
        with open(path) as f:
            text = f.read()
        new = text
        for name, make in TABLES.get(readme, {}).items():
            pat = re.compile(rf"(<!-- numbers:{name} -->\n).*?(<!-- /numbers:{name} -->)", re.S)
            if not pat.search(new):
                print(f"{readme}: no <!-- numbers:{name} --> block")
                bad += 1
                continue
            new = pat.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), new)
        if new != text:
            if check:
                print(f"{readme}: a generated table disagrees with its formula "
                      f"(python3 tests/docs/readme_numbers.py rewrites it)")
                bad += 1
            else:
                with open(path, "w") as f:
                    f.write(new)
                print(f"{readme}: tables rewritten")
        flat = " ".join(new.split())  # a claim may wrap across lines
        for claim in CLAIMS.get(readme, lambda: [])():
            if " ".join(claim.split()) not in flat:
                print(f"{readme}: does not say {claim!r} (the figure its formula gives)")
                bad += 1
    print("PASS" if bad == 0 else f"FAIL: {bad} figure(s) disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
