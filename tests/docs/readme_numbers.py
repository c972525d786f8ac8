#!/usr/bin/env python3
"""readme_numbers.py -- the figures the examples' READMEs quote, computed from their formulas.

Two kinds of figures:
  tables   a README marks a generated table with  <!-- numbers:NAME --> ... <!-- /numbers:NAME -->
           and this script writes what lies between (NAME: 01-memory);
  claims   a sentence fragment with figures in it (a shared-memory size, a tile count, a bound,
           the length of a solution's function that a budget quotes, a figure derived from a
           cited paper's own numbers): the fragment is formatted here from the formula and must
           appear verbatim in the README;
  checks   a table a README quotes from a script, recomputed here from the inputs the README
           itself states (example 05's cost table from its "cost-inputs" block), so that a reader
           can redo it from the README alone.

    python3 tests/docs/readme_numbers.py            rewrite the tables in place, then check
    python3 tests/docs/readme_numbers.py --check    exit 1 if a table or a claim disagrees (CTest)
Standard library only. Each formula is the one the README states next to the figure.
"""
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX01 = "examples/01_attention_basics/README.md"
EX02 = "examples/02_flash_attention_minimal/README.md"
EX03 = "examples/03_flash_attention_v2/README.md"
EX04 = "examples/04_sparse_patterns/README.md"
EX05 = "examples/05_deepseek_sparse/README.md"
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
    out = [f"the ratio is `L / 4D` — at L = {L} and D = {D}, the score matrix is "
           f"{L // (4 * D)}× "
           "larger than Q, K, V and O together",
           f"has B·H·L² = 2³¹ elements exactly"]
    # The traffic of the L x L matrix: step 1 writes S, step 2 reads it three times and writes P,
    # step 3 reads P; 4 bytes per pass per entry. Steps 1-2 are the profile's N^2 coefficient.
    steps12, step3 = 1 + 3 + 1, 1
    passes = steps12 + step3
    out += [f"{'six' if passes == 6 else passes} passes, at least `{passes} · 4 · B·H·L² = "
            f"{4 * passes}·B·H·L²` bytes",
            f"measures steps 1 and 2 as the `{4 * steps12}·N²` term of its fit"]
    # FLOPs 4·L²·D against 24·L² bytes: D/6 FLOP per byte; fp32 ridge points from the datasheets
    # (TFLOP/s over GB/s): H100 SXM 67 / 3350, A100 19.5 / 1555 (40GB) and 2039 (80GB SXM).
    out.append(f"`4D / {4 * passes} = D/6` FLOP per byte, {4 * 64 / (4 * passes):.1f} at D = 64 "
               f"and {4 * 128 / (4 * passes):.1f} at D = 128")
    out.append(f"{67e12 / 3350e9:.0f} FLOP/B on an H100 SXM (67 TFLOP/s, 3350 GB/s")
    out.append(f"{19.5e12 / 1555e9:.1f} on an A100 40GB and {19.5e12 / 2039e9:.1f} on an A100 "
               f"80GB SXM (19.5 TFLOP/s; 1555 and 2039 GB/s")
    assert 19.5e12 / 2039e9 < 4 * 64 / (4 * passes) < 19.5e12 / 1555e9 < 67e12 / 3350e9
    gb = [4 * passes * 4 * 8 * l * l for l in (2048, 8192)]
    out.append(f"move at least {gb[0] / 1e9:.2f} GB at L = 2048 and {gb[1] / 1e9:.1f} GB at "
               f"L = 8192, which take at least {gb[0] / 2039e9 * 1e3:.2f} ms and "
               f"{gb[1] / 2039e9 * 1e3:.1f} ms at an A100 80GB's 2039 GB/s")
    return out


def check_01(text):
    """The profile's fit (generated from the measured records) has the N² term the text quotes."""
    fit = re.search(r"- naive \(f32\), global bytes ≈ .*? \+ (\d+)·N² \+", text)
    if not fit or fit.group(1) != "20":
        return ["examples/01: the profile's fit of naive has no 20·N² term, which the text "
                "explains as steps 1 and 2"]
    return []


# ---- examples 02 and 03: shared memory per block, causal tiles ------------------------------

def claims_02():
    smem = lambda D: 4 * 32 * (D + 1) * 4  # q_i, k_j, v_j, o_i: 32 x (D+1) floats each
    out = [f"4 tiles of 32 x (D+1) floats: {size(smem(64))} at D = 64,",
           f"{size(smem(128))} at D = 128 (opt-in above 48 KiB)"]
    # FlashAttention's Algorithm 1, line 1: Bc = ceil(M/4d), Br = min(ceil(M/4d), d); the score
    # tile Br·Bc is bounded by M/4, reached iff Br = d, i.e. M >= 4d².
    M = 100 * 1024 // 4
    bc = lambda d: -(-M // (4 * d))
    br = lambda d: min(bc(d), d)
    assert br(64) * bc(64) == M // 4 and M >= 4 * 64 ** 2
    assert br(128) * bc(128) < M // 4 and M < 4 * 128 ** 2
    out.append(f"Two cases with M = {M // 1000} {M % 1000:03d} fp32 values (100 KiB): at d = 64, "
               f"`M/4d` = {bc(64)}, so Bc = {bc(64)}, Br = {br(64)} and `Br·Bc` = "
               f"{br(64) * bc(64)} = M/4 (M ≥ 4d² = {4 * 64 ** 2}: tight); at d = 128, "
               f"Bc = Br = {bc(128)} and `Br·Bc` = {br(128) * bc(128)}, below M/4 = {M // 4} "
               f"(M < 4d² = {4 * 128 ** 2})")
    return out


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
    # FA2 paper §3.1: A100 matmul vs non-matmul throughput.
    out.append(f"~{312 / 19.5:.0f}× faster than anything else (FA2 paper, §3.1: an A100 does\n"
               "312 TFLOP/s of fp16/bf16 matmul but 19.5 TFLOP/s of non-matmul fp32)")
    # The base-2 softmax on example 02's worked example: scores (0, 2, 4, 2), LSE 4 + ln l.
    log2e, l = math.log2(math.e), (1 + math.exp(-2)) ** 2
    m2 = 4 * log2e
    lse = m2 * math.log(2) + math.log(l)
    assert abs(lse - (4 + math.log(l))) < 1e-12
    out.append(f"`CUDART_L2E_F` = {log2e:.4f}")
    out.append(f"`m₂ = 4 · log₂e = {m2:.4f}`, `l = {l:.4f}`, and `{m2:.4f} · {math.log(2):.4f} + "
               f"ln {l:.4f} = {lse:.4f}`")
    # FlashAttention-3: its ablation's TFLOP/s from its times (4·B·H·L²·d, §4.1), the peak's share,
    # the exponential's cost at d = 128 (§3.1: 989 vs 3.9 TFLOP/s; 4d matmul FLOPs per score).
    flops = 4 * 4 * 16 * 8448 ** 2 * 128
    tf = {ms: flops / (ms * 1e-3) / 1e12 for ms in (3.538, 4.021, 4.105)}
    out += [f"| FlashAttention-3 | 3.538 ms | {tf[3.538]:.0f} |",
            f"| without the GEMM-softmax pipelining (warp specialisation kept) | 4.021 ms | "
            f"{tf[4.021]:.0f} |",
            f"| without warp specialisation (pipelining kept) | 4.105 ms | {tf[4.105]:.0f} |"]
    gains = sorted(round(100 * (tf[3.538] / tf[ms] - 1)) for ms in (4.021, 4.105))
    out.append(f"Each of the two techniques is worth {gains[0]}–{gains[1]} % on its own")
    out.append(f"reaches up to\n740 TFLOP/s in fp16, {100 * 740 / 989:.0f} % of the peak")
    exp_share = (1 / 3.9) / (4 * 128 / 989)
    assert abs(exp_share - 0.5) < 0.01  # "about half as long as the matmuls"
    out.append(f"each score costs 4d = {4 * 128} matmul FLOPs and one exponential, the "
               "exponentials take about half as\nlong as the matmuls")
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
    # One-sided windows against Longformer's two-sided w; density over all entries against the
    # speedup over dense causal.
    out.append(f"`window:w=64` keeps {2 * 64 + 1} keys, the\nwindow Longformer calls w = {2 * 64}")
    density, speedup, _, _ = window_stats(1024, -127, 0)
    out.append(f"`causal_window:w=128` at L = 1024 keeps {pct(density)} of all entries "
               f"(1/density = {1 / density:.1f}×)")
    out.append(f"the speedup over it is {speedup:#.3g}×")
    return out


# ---- example 05: the indexer against attention, the cost table, cited figures ----------------

def claims_05():
    H, HI, DI = 128, 64, 128
    idx, mha, mqa = HI * DI, H * (192 + 128), H * (576 + 512)
    out = [f"H_I·D_I = {HI}·{DI} = {idx} multiply-adds per pair",
           f"H·(D_qk + D_v) = {H}·(192 + 128) = {mha} in BF16",
           f"{mha // idx}× fewer multiply-adds, {2 * mha // idx}× fewer tensor-core cycles",
           f"{H}·(576 + 512) = {mqa} per pair, {mqa // idx}× the indexer's"]
    assert mha % idx == 0
    # The example of the cost model at t = 32K.
    t, k = 32768, 2048
    out.append(f"dense prefill 2 · {t} · {H} · 320 = {2 * t * H * 320 / 1e9:.2f} GFLOP; DSA "
               f"{t} · {idx} + 2 · {k} · {H} · 1088 = {(t * idx + 2 * k * mqa) / 1e9:.2f} "
               f"GFLOP; decoding reads 656 · {t} = {656 * t / 1e3:.0f} KB dense and 132 · {t} + "
               f"656 · {k} = {(132 * t + 656 * k) / 1e3:.0f} KB with DSA")
    # The Benchmarks section: 16 heads of 128 against a 64 x 128 indexer, fp16.
    out.append(f"2 · 16 · 256 = {2 * 16 * 256:,} FLOPs".replace(",", " "))
    out.append(f"indexer {2 * HI * DI:,} in fp16".replace(",", " "))
    # TensorRT-LLM tech blog 15, Table 1: the ten speedups over torch.topk, and their average.
    speedups = (7.596, 7.702, 7.431, 7.495, 7.498, 7.510, 7.423, 7.407, 7.173, 6.859)
    out.append(f"at {sum(speedups) / len(speedups):.2f}× the speed of `torch.topk` on\naverage")
    # FP8 against BF16 dense tensor-core peaks (H100 SXM datasheet).
    out.append(f"| FP8 tensor-core rate / BF16 rate | {1979 / 989:.0f} |")
    return out


def check_05(text):
    """Recomputes the cost table from the inputs the README lists (its cost-inputs block) with the
    formulas it states, and compares every figure of the table (generated by cost_model.py) at
    the precision it is printed with."""
    block = text[text.index("<!-- cost-inputs"):text.index("<!-- end cost-inputs -->")]
    rows = [l.split("|")[1:3] for l in block.splitlines()[3:] if l.startswith("| ")]
    val = {name.strip().split(",")[0]: v.strip() for name, v in rows}
    nums = lambda s: [int(x) for x in re.findall(r"\d+", s)]
    H, = nums(val["H"])
    (dq_mha, dv_mha), (dq_mqa, dv_mqa) = [nums(v) for n, v in rows if n.startswith(" D_qk")]
    HI, DI = nums(val["H_I × D_I"])
    k, = nums(val["k"])
    kv, = nums(val["bytes per token of the FP8 latent cache"])
    ikey, = nums(val["bytes per token of the FP8 indexer key cache"])
    rate, = nums(val["FP8 tensor-core rate / BF16 rate"])
    cost = {"prefill": (lambda t: 2 * t * H * (dq_mha + dv_mha),
                        lambda t: 2 * t * HI * DI / rate + 2 * min(t, k) * H * (dq_mqa + dv_mqa)),
            "decode": (lambda t: kv * t, lambda t: ikey * t + kv * min(t, k))}
    table = text[text.index("<!-- cost-table"):text.index("<!-- end cost-table -->")]
    problems, seen = [], 0

    def agrees(printed, value):
        """printed (a README figure) is value rounded to printed's decimals."""
        decimals = len(printed.split(".")[1]) if "." in printed else 0
        return abs(float(printed) - value) <= 0.5 * 10 ** -decimals + 1e-9

    for line in table.splitlines():
        cells = [c.strip().rstrip("x") for c in line.strip("|").split("|")]
        if not re.fullmatch(r"\d+K", cells[0]):
            continue
        seen += 1
        t = int(cells[0][:-1]) * 1024
        pd, ps = (f(t) / 1e9 for f in cost["prefill"])
        dd, ds = (f(t) / 1e3 for f in cost["decode"])
        for printed, value in zip(cells[1:], (pd, ps, pd / ps, dd, ds, dd / ds)):
            if not agrees(printed, value):
                problems.append(f"{EX05}: cost table at t = {cells[0]}: {printed} where the "
                                f"README's inputs give {value:.4g}")
    # Where DSA gets cheaper: the first t with dense(t) > DSA(t) past k, in closed form
    # (dense slope · t > indexer slope · t + the constant cost of k keys).
    first = lambda dense, index, const: const // (dense - index) + 1
    crossings = (first(2 * H * (dq_mha + dv_mha), 2 * HI * DI // rate,
                       2 * k * H * (dq_mqa + dv_mqa)), first(kv, ikey, kv * k))
    slopes = (2 * H * (dq_mha + dv_mha) / (2 * HI * DI / rate), kv / ikey)
    line = " ".join(table.split())
    expect = (f"DSA is cheaper than dense from position {crossings[0]} (prefill FLOPs) and "
              f"{crossings[1]} (decode bytes); the indexer's slope is {slopes[0]:.0f}x (prefill) "
              f"and {slopes[1]:.1f}x (decode) shallower")
    if expect not in line:
        problems.append(f"{EX05}: the cost table's last line does not say {expect!r}")
    if seen != 5:
        problems.append(f"{EX05}: the cost table has {seen} rows of positions, not 5")
    return problems


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
CLAIMS = {EX01: claims_01, EX02: claims_02, EX03: claims_03, EX04: claims_04, EX05: claims_05,
          "exercises/02_sparse_mask/README.md": claims_ex02, "grader/README.md": claims_grader}
CHECKS = {EX01: check_01, EX05: check_05}


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        print("usage: readme_numbers.py [--check]", file=sys.stderr)
        return 2
    bad = 0
    for readme in sorted(set(TABLES) | set(CLAIMS) | set(CHECKS)):
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
        for problem in CHECKS.get(readme, lambda _: [])(new):
            print(problem)
            bad += 1
    print("PASS" if bad == 0 else f"FAIL: {bad} figure(s) disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
