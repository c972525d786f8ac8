#!/usr/bin/env python3
"""update_tables.py — regenerates the measured-results tables in the READMEs from the committed
result files (benchmarks/results/<device>/*.jsonl), so no figure in a README is typed by hand.

A README marks each generated table with
    <!-- results:NAME -->  ...  <!-- /results:NAME -->
and this script rewrites what lies between. Tables (NAME):
    foundation   simulator costs and Example 01 timings, per device, from foundation.jsonl
    bench        per device and problem family (D, dtype, causal, B, H): implementation x L, from
                 bench_attention.jsonl and bench_torch.jsonl; on a GPU TFLOP/s and the ratio to
                 PyTorch SDPA's flash backend at the same L, on the simulator the median time
    bench_memory per device: peak device memory measured at the largest L of each family
    sparse       Example 04, per device with records of a sparse pattern: per (pattern, L, dtype,
                 causal) the density, the ideal speedup, dense_fa2's time and each sparse kernel's
                 with its speedup over dense_fa2 (block_sparse: and the % of the ideal),
                 FlexAttention's (and block_sparse's speed relative to it), sdpa_flash's on the
                 dense problem of the same shape; on a GPU the chapter's targets
    memory_model the model of benchmarks/memory_analysis.py (naive L x L scores vs flash O(L))

    python3 benchmarks/update_tables.py            rewrite the READMEs in place
    python3 benchmarks/update_tables.py --check    exit 1 if a README is out of date (CI)
    --root DIR      another tree (results under DIR/benchmarks/results; for the tests)
    --readme PATH   only this README (relative to the root; repeatable)
Standard library only (the records are read by bench_results.py).
"""
import os
import sys
from typing import NamedTuple

import bench_results
import memory_analysis
import readme_tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READMES = ["examples/01_attention_basics/README.md", "examples/04_sparse_patterns/README.md",
           "examples/09_decode/README.md", "benchmarks/README.md"]


def results():
    return os.path.join(ROOT, "benchmarks", "results")


def ms(x):
    return "–" if x is None else f"{x:.1f}" if x >= 10 else f"{x:.3f}"


def load_bench(sparse=None):
    """{device: [records]} of bench_attention.jsonl and bench_torch.jsonl, devices sorted; with
    sparse=False only the records without a sparse pattern (those have their own table)."""
    out = {}
    for device, recs in bench_results.load_devices(results()).items():
        out[device] = [r for r in recs if sparse is None or is_sparse(r) == sparse]
    return {device: recs for device, recs in out.items() if recs}


def is_sparse(r):
    return (r.get("pattern") or "dense") not in ("dense", "none")


def family_key(r):
    return (r["D"], r["dtype"], r["causal"], r["B"], r["H"], r.get("pattern", "dense"))


def provenance(recs):
    """One line: device, commit(s), date(s), CUDA, of a device's records."""
    def values(key):
        return ", ".join(sorted({str(r.get(key, "?"))[:10] for r in recs}))
    return (f"{recs[0]['device']}; commit {values('commit')}; {values('date')}; CUDA runtime "
            f"{values('cuda_runtime')}, driver {values('cuda_driver')}")


def cell(r, ref, simulated):
    """One table cell: the figure of a run, or why there is none."""
    if r is None:
        return "–"
    if r["status"] != "PASS":
        return "OOM" if r.get("oom") else r["status"]
    if simulated:
        return ms(r["median_ms"]) + " ms"
    text = f"{r['tflops']:.1f}"
    if ref is not None and ref.get("status") == "PASS" and ref.get("tflops"):
        text += f" ({r['tflops'] / ref['tflops']:.2f}×)"
    return text


def table_bench():
    out = []
    for device, recs in load_bench(sparse=False).items():
        simulated = any(r.get("simulated") for r in recs)
        out.append(f"**{device}** — {provenance(recs)}.")
        out.append("CPU simulator timings (median ms): they measure the simulator, not GPU "
                   "performance." if simulated else
                   "TFLOP/s (dense FLOP model, halved for causal) at the median time; in brackets "
                   "the ratio to `torch/sdpa_flash` at the same L.")
        out.append("")
        families = {}
        for r in recs:
            families.setdefault(family_key(r), []).append(r)
        for key in sorted(families, key=str):
            D, dtype, causal, B, H, pattern = key
            fam = families[key]
            lengths = sorted({r["Lq"] for r in fam})
            by = {(r["impl"], r["Lq"]): r for r in fam}
            impls = sorted({r["impl"] for r in fam if r["status"] != "SKIP" or r.get("oom")})
            if not impls:
                continue
            title = (f"B={B} H={H} D={D} {dtype} {'causal' if causal else 'non-causal'}"
                     + ("" if pattern == "dense" else f" {pattern}"))
            out.append(f"*{title}*")
            out.append("")
            out.append("| implementation | " + " | ".join(f"L={L}" for L in lengths) + " |")
            out.append("|---|" + "---|" * len(lengths))
            for impl in impls:
                out.append(f"| {impl} | " + " | ".join(
                    cell(by.get((impl, L)), by.get(("torch/sdpa_flash", L)), simulated)
                    for L in lengths) + " |")
            out.append("")
    return "\n".join(out).rstrip() if out else "No benchmark results committed yet."


def table_bench_memory():
    rows = ["| device | problem | implementation | L | peak measured | model |",
            "|---|---|---|---|---|---|"]
    for device, recs in load_bench(sparse=False).items():
        families = {}
        for r in recs:
            if r["status"] == "PASS" and r.get("mem_peak_bytes"):
                families.setdefault(family_key(r)[:5], []).append(r)
        for (D, dtype, causal, B, H), fam in sorted(families.items(), key=str):
            L = max(r["Lq"] for r in fam)
            for r in sorted((r for r in fam if r["Lq"] == L), key=lambda r: r["impl"]):
                rows.append(f"| {device} | B={B} H={H} D={D} {dtype}{' causal' if causal else ''} "
                            f"| {r['impl']} | {L} | {mib(r['mem_peak_bytes'])} | "
                            f"{mib(r['mem_model_bytes'])} |")
    return "\n".join(rows)


def mib(b):
    return "–" if b is None else f"{b / 2 ** 20:.1f} MiB" if b >= 2 ** 20 else f"{b / 1024:.1f} KiB"


def table_memory_model():
    return memory_analysis.table()


def table_foundation():
    rows = ["| device | measured | figure | provenance |", "|---|---|---|---|"]
    for device, recs in bench_results.load_devices(results(), ("foundation",)).items():
        for r in recs:
            prov = f"commit {r.get('commit', '?')}, {r.get('date', '?')[:10]}, CUDA {r.get('cuda', '?')}"
            if r.get("bench") == "cudasim_fiber_switch":
                what, fig = "fiber switch", f"{r['ns']:.1f} ns"
            elif r.get("bench") == "cudasim_barrier_launch":
                what = (f"launch {r['blocks']} blocks × {r['threads']} threads × {r['barriers']} "
                        f"barriers ({r['os_threads']} OS threads)")
                fig = f"{ms(r['ms'])} ms"
            elif r.get("bench") == "cudasim_shuffle_launch":
                what = (f"launch {r['blocks']} blocks × {r['threads']} threads × {r['shuffles']} "
                        f"shuffles ({r['os_threads']} OS threads)")
                fig = f"{ms(r['ms'])} ms"
            elif "kernel" in r:
                causal = ", causal" if r["causal"] else ""
                what = (f"Example {r['example'][:2]} `{r['kernel']}` B={r['B']} H={r['H']} "
                        f"L={r['Lq']} D={r['D']} {r['dtype']}{causal} ({r['backend']})")
                fig = (f"{ms(r['median_ms'])} ms median (min {ms(r['min_ms'])}, max {ms(r['max_ms'])}, "
                       f"{r['reps']} reps), {r['status']}")
                if r["backend"] == "gpu" and r.get("tflops"):
                    fig += f", {r['tflops']:.2f} TFLOP/s"
            else:
                continue
            rows.append(f"| {device} | {what} | {fig} | {prov} |")
    return "\n".join(rows)


# ---- Example 04: sparse patterns ------------------------------------------------------------

DENSE = "04_sparse_patterns/dense_fa2"
SPARSE_KERNELS = ["04_sparse_patterns/block_sparse", "04_sparse_patterns/window",
                  "04_sparse_patterns/gather"]
NONE = "—"


class Problem(NamedTuple):
    """A benchmark record's problem, the key that pairs implementations run on it."""
    B: int
    H: int
    Lq: int
    Lk: int
    D: int
    dtype: str
    causal: bool


def problem_key(r):
    return Problem(r["B"], r["H"], r["Lq"], r["Lk"], r["D"], r["dtype"], r["causal"])


def sparse_rows(recs):
    """Example 04's problems among one device's records: one row per (pattern, problem), with
    the pattern's density and ideal speedup, the record of each implementation on it (the last
    one run) and sdpa_flash's on the dense problem of the same shape (matched by B, H, Lq, Lk,
    D, dtype, causal). Sorted by shape, L, causality, pattern, dtype."""
    dense, rows = {}, {}
    for r in recs:
        if not is_sparse(r):
            if r["impl"] == "torch/sdpa_flash":
                dense[problem_key(r)] = r
            continue
        row = rows.setdefault((r["pattern"],) + problem_key(r), {
            "pattern": r["pattern"], "key": problem_key(r), "density": None, "bound": None,
            "impls": {}})
        row["impls"][r["impl"]] = r
        if r.get("density") is not None:
            row["density"], row["bound"] = r["density"], r.get("speedup_bound")
    for row in rows.values():
        row["sdpa_flash"] = dense.get(row["key"])
    return sorted(rows.values(), key=lambda row: (
        row["key"].B, row["key"].H, row["key"].D, row["key"].Lq, row["key"].causal,
        row["pattern"], row["key"].dtype))


def timed(r):
    """The median time of a run that passed its check, else None."""
    return r["median_ms"] if r and r.get("status") == "PASS" and r.get("median_ms") else None


def speedup(row, impl):
    """dense_fa2's time / impl's on the same problem (both measured), else None."""
    base, t = timed(row["impls"].get(DENSE)), timed(row["impls"].get(impl))
    return base / t if base and t else None


def run_cell(r, extra=""):
    """A run's time (and extra), its status when it has none, or — when there is no run or the
    implementation does not serve the pattern (SKIP)."""
    if r is None or r.get("status") == "SKIP" and not r.get("oom"):
        return NONE
    if timed(r) is None:
        return "OOM" if r.get("oom") else r["status"]
    return f"{ms(r['median_ms'])} ms" + extra


def sparse_cells(row):
    impls = row["impls"]
    cells = [row["pattern"], str(row["key"].Lq), row["key"].dtype,
             "yes" if row["key"].causal else "no",
             NONE if row["density"] is None else f"{100 * row['density']:.3g} %",
             NONE if not row["bound"] else f"{row['bound']:.2f}×",
             run_cell(impls.get(DENSE))]
    for impl in SPARSE_KERNELS:
        up = speedup(row, impl)
        extra = ""
        if up is not None:
            extra = f", {up:.2f}×"
            if impl.endswith("block_sparse") and row["bound"]:
                extra += f" ({100 * up / row['bound']:.0f} % of ideal)"
        cells.append(run_cell(impls.get(impl), extra))
    flex, ours = timed(impls.get("torch/flex")), timed(impls.get(SPARSE_KERNELS[0]))
    cells.append(run_cell(impls.get("torch/flex")))
    cells.append(f"{flex / ours:.2f}×" if flex and ours else NONE)
    cells.append(run_cell(row["sdpa_flash"]))
    return cells


# The chapter's targets: (L, causal, what, course bar); ours is 90 % of the ideal speedup.
SPARSE_TARGETS = [(4096, False, "density 50 % at L = 4k", 1.5),
                  (8192, False, "density 25 % at L = 8k", 2.5),
                  (16384, False, "density 10 % at L = 16k", 5.0)]


def sparse_targets(rows):
    """The chapter's targets against a GPU's rows (speedups over dense_fa2)."""
    out = ["| target | goal | measured |", "|---|---|---|"]

    def listed(sel, impls):
        items = []
        for row in sel:
            for impl in impls:
                up = speedup(row, impl)
                if up is not None:
                    items.append(f"{row['pattern']} {row['key'].dtype} {impl.split('/')[1]}: "
                                 f"{up:.2f}× ({100 * up / row['bound']:.0f} % of "
                                 f"{row['bound']:.2f}×)")
        return "; ".join(items) or "not measured"
    for L, causal, what, bar in SPARSE_TARGETS:
        sel = [row for row in rows if row["key"].Lq == L and row["key"].causal == causal
               and row["bound"]]
        out.append(f"| {what} vs dense | course bar {bar:g}×; ours ≥ 90 % of the ideal | "
                   f"{listed(sel, SPARSE_KERNELS[:1])} |")
    sel = [row for row in rows if row["key"].Lq == 131072 and row["key"].causal
           and row["pattern"] == "causal_window:w=4096"]
    out.append("| causal window W = 4096 at L = 128k vs dense causal | ≥ 20× (the FLOP count "
               f"bounds it at 16.25×) | {listed(sel, SPARSE_KERNELS[:2])} |")
    ratios = sorted(timed(row["impls"].get("torch/flex")) / timed(row["impls"][SPARSE_KERNELS[0]])
                    for row in rows if timed(row["impls"].get("torch/flex"))
                    and timed(row["impls"].get(SPARSE_KERNELS[0])))
    out.append("| block_sparse vs FlexAttention, same BlockMask tiles | at least as fast "
               "(≥ 1.00×) | " + (f"{ratios[0]:.2f}×–{ratios[-1]:.2f}× over {len(ratios)} problems"
                  if ratios else "not measured") + " |")
    return out


def table_sparse():
    out, gpu = [], False
    header = ("| pattern | L | dtype | causal | density | ideal speedup | dense_fa2 | block_sparse "
              "| window | gather | FlexAttention | block_sparse vs flex | sdpa_flash (dense) |")
    for device, recs in load_bench().items():
        rows = sparse_rows(recs)
        if not rows:
            continue
        used = [r for row in rows for r in list(row["impls"].values()) + [row["sdpa_flash"]] if r]
        simulated = any(r.get("simulated") for r in used)
        out.append(f"**{device}** — {provenance(used)}.")
        out.append("CPU simulator timings (median ms): they measure the simulator, not GPU "
                   "performance." if simulated else "Median time on the GPU.")
        out.append("")
        shapes = {}
        for row in rows:
            shapes.setdefault((row["key"].B, row["key"].H, row["key"].D), []).append(row)
        for (B, H, D), group in shapes.items():
            out += [f"*B={B} H={H} D={D}*", "", header, "|---" * 13 + "|"]
            out += ["| " + " | ".join(sparse_cells(row)) + " |" for row in group]
            out.append("")
        if not simulated:
            out += ["Targets (speedups over dense_fa2 in the same run):", ""]
            out += sparse_targets(rows) + [""]
            gpu = True
    if not gpu:
        out.append("No GPU results yet: the targets above are to be measured (`benchmarks/gpu.sh`,"
                   " steps `sparse` and `flexsparse`).")
    return "\n".join(out).rstrip()


def table_decode():
    """Example 09's GPU runs: its bench_decode.py and bench_fp8.py tables of each results folder
    with decode.jsonl or fp8.jsonl (benchmarks/gpu.sh, steps decode and fp8)."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "09_decode"))
    import bench_decode
    import bench_fp8
    out = []
    base = results()
    for dev in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        parts = []
        for name, make in (("decode.jsonl", lambda f: bench_decode.table(f, None)),
                           ("fp8.jsonl", bench_fp8.table)):
            path = os.path.join(base, dev, name)
            if os.path.exists(path) and os.path.getsize(path):
                parts.append(make(path).rstrip("\n"))
        if parts:
            out += [f"**{dev}** ({provenance_of(os.path.join(base, dev))})", ""]
            out += ["\n\n".join(parts), ""]
    if not out:
        return ("No GPU results yet: `benchmarks/gpu.sh --steps build,decode,fp8` writes them; "
                "every GPU figure of this example is not measured until then.")
    return "\n".join(out).rstrip("\n")


def provenance_of(folder):
    """'commit C, date D, --quick' from a results folder's meta.json (written by gpu.sh)."""
    import json
    path = os.path.join(folder, "meta.json")
    if not os.path.exists(path):
        return "no meta.json"
    with open(path) as f:
        m = json.load(f)
    return (f"{m.get('device', '?')}, CUDA {m.get('nvcc', '?')}, commit {m.get('commit', '?')}, "
            f"{str(m.get('date', '?'))[:10]}" + (", `--quick`" if m.get("quick") else ""))


TABLES = {"foundation": table_foundation, "bench": table_bench, "bench_memory": table_bench_memory,
          "memory_model": table_memory_model, "sparse": table_sparse, "decode": table_decode}


def main():
    global ROOT
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__.strip())
        return 0
    known = {"--check", "--root", "--readme"}
    for i, a in enumerate(args):
        last = i + 1 == len(args)
        if (a.startswith("-") and a not in known) or (a in ("--root", "--readme") and last):
            print(f"error: unknown or incomplete option '{a}' (see --help)", file=sys.stderr)
            return 2
    check = "--check" in args
    readmes = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--readme"] or READMES
    if "--root" in args[:-1]:
        ROOT = os.path.abspath(args[args.index("--root") + 1])
    stale = []
    blocks = {f"results:{name}": (lambda make=make: make() + "\n") for name, make in TABLES.items()}
    for rel in readmes:
        changed, _ = readme_tables.update(os.path.join(ROOT, rel), blocks, check)
        if changed:
            stale.append(rel)
    if check and stale:
        print("out of date (run python3 benchmarks/update_tables.py): " + ", ".join(stale))
        return 1
    print(("checked: " if check else "updated: ") + (", ".join(stale) if stale else "all up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
