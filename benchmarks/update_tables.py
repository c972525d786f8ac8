#!/usr/bin/env python3
"""update_tables.py — regenerates the measured-results tables in the READMEs from the committed
result files (benchmarks/results/<device>/*.jsonl), so no figure in a README is typed by hand.

A README marks each generated table with
    <!-- results:NAME -->  ...  <!-- /results:NAME -->
and this script rewrites what lies between. Tables (NAME):
    foundation   simulator costs and Example 01 timings, per device, from foundation.jsonl

    python3 benchmarks/update_tables.py            rewrite the READMEs in place
    python3 benchmarks/update_tables.py --check    exit 1 if a README is out of date (CI)
Standard library only.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READMES = ["examples/01_attention_basics/README.md"]


def load(name):
    """{device: [records]} from benchmarks/results/<device>/<name>.jsonl, devices sorted."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*", name + ".jsonl"))):
        with open(path) as f:
            out[os.path.basename(os.path.dirname(path))] = [json.loads(l) for l in f if l.strip()]
    return out


def ms(x):
    return "–" if x is None else f"{x:.1f}" if x >= 10 else f"{x:.3f}"


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


TABLES = {"foundation": table_foundation}


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for rel in READMES:
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
