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
    memory_model the model of benchmarks/memory_analysis.py (naive L x L scores vs flash O(L))

    python3 benchmarks/update_tables.py            rewrite the READMEs in place
    python3 benchmarks/update_tables.py --check    exit 1 if a README is out of date (CI)
    --root DIR      another tree (results under DIR/benchmarks/results; for the tests)
    --readme PATH   only this README (relative to the root; repeatable)
Standard library only.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READMES = ["examples/01_attention_basics/README.md", "benchmarks/README.md"]


def load(name):
    """{device: [records]} from benchmarks/results/<device>/<name>.jsonl, devices sorted."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*", name + ".jsonl"))):
        with open(path) as f:
            out[os.path.basename(os.path.dirname(path))] = [json.loads(l) for l in f if l.strip()]
    return out


def ms(x):
    return "–" if x is None else f"{x:.1f}" if x >= 10 else f"{x:.3f}"


def load_bench():
    """{device: [records]} of bench_attention.jsonl and bench_torch.jsonl, devices sorted."""
    out = {}
    for name in ("bench_attention", "bench_torch"):
        for device, recs in load(name).items():
            out.setdefault(device, []).extend(recs)
    return dict(sorted(out.items()))


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
    for device, recs in load_bench().items():
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
    for device, recs in load_bench().items():
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
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import memory_analysis
    return memory_analysis.table()


def table_foundation():
    rows = ["| device | measured | figure | provenance |", "|---|---|---|---|"]
    for device, recs in load("foundation").items():
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


TABLES = {"foundation": table_foundation, "bench": table_bench, "bench_memory": table_bench_memory,
          "memory_model": table_memory_model}


def main():
    global ROOT
    args = sys.argv[1:]
    check = "--check" in args
    readmes = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--readme"] or READMES
    if "--root" in args[:-1]:
        ROOT = os.path.abspath(args[args.index("--root") + 1])
    stale = []
    for rel in readmes:
        path = os.path.join(ROOT, rel)
        text = open(path).read()
        new = text
        for name, make in TABLES.items():
            pat = re.compile(rf"(<!-- results:{name} -->\n).*?(<!-- /results:{name} -->)", re.S)
            new = pat.sub(lambda m: m.group(1) + make() + "\n" + m.group(2), new)
        if new != text:
            stale.append(rel)
            if not check:
                open(path, "w").write(new)
    if check and stale:
        print("out of date (run python3 benchmarks/update_tables.py): " + ", ".join(stale))
        return 1
    print(("checked: " if check else "updated: ") + (", ".join(stale) if stale else "all up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
