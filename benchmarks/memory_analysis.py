#!/usr/bin/env python3
"""memory_analysis.py — the device memory attention needs, by model: dense naive attention
materialises the L x L score matrix (O(L^2)), FlashAttention keeps only the inputs, the output and
one log-sum-exp per row (O(L)). Prints a Markdown table and draws a plot (PNG) for L up to
128k, for the two configurations of the benchmarks' `dense` grid: B*H = 16 heads of D = 128 and
32 heads of D = 64, fp16. The same table is benchmarks/README.md's "Memory model"
(update_tables.py writes it there from table()).

    python benchmarks/memory_analysis.py            the table, and the plot in build/figures/
    python benchmarks/memory_analysis.py --no-plot  the table alone (no package needed)
    python benchmarks/memory_analysis.py --update   the plot the README shows, rewritten:
                                                    benchmarks/results/memory_model/memory_model.png
    python benchmarks/memory_analysis.py --results benchmarks/results/<device>
        adds the peak memory measured by bench_attention / bench_torch on that device to the plot
        (<device>/plots/memory_model.png) and a measured-vs-model table (stdout)
The plot needs Matplotlib (scripts/setup.sh --python); figures.py (the same folder) says how
every committed figure is drawn again and compared.

The model, per (batch x head) slice, elem = bytes of the dtype (2 for fp16/bf16, 4 for fp32):
    inputs and output  Q, K, V read, O written:      4 * L * D * elem
    log-sum-exp        one fp32 per query row:        4 * L
    naive scores       S = QK^T in fp32 (example 01): 4 * L * L     (P overwrites S in place)
    naive total   = inputs/output + scores          flash total = inputs/output + log-sum-exp
These are the buffers bench_attention allocates (mem_model_bytes); a framework may hold more
(PyTorch's naive path keeps S, its fp32 softmax and P at once), which the measured points show.
"""
import argparse
import os
import sys

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [dict(BH=16, D=128, dtype="f16"), dict(BH=32, D=64, dtype="f16")]
LENGTHS = [1024 * 2 ** n for n in range(8)]  # 1k .. 128k
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
H100_BYTES = 80e9  # H100 SXM/PCIe: 80 GB of HBM (NVIDIA's datasheet)


def model(L, BH, D, dtype):
    """(naive bytes, flash bytes, score bytes) for B*H = BH slices of length L."""
    io = BH * 4 * L * D * ELEM[dtype]
    scores = BH * 4.0 * L * L
    return io + scores, io + BH * 4 * L, scores


def human(b):
    for unit, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= f:
            return f"{b / f:.1f} {unit}"
    return f"{b:.0f} B"


def table():
    rows = ["| B·H | D | L | naive: scores | naive: total | flash: total | naive / flash |",
            "|---|---|---|---|---|---|---|"]
    for c in CONFIGS:
        for L in LENGTHS:
            naive, flash, scores = model(L, c["BH"], c["D"], c["dtype"])
            over = " (over 80 GB)" if naive > H100_BYTES else ""
            rows.append(f"| {c['BH']} | {c['D']} | {L // 1024}k | {human(scores)} | "
                        f"{human(naive)}{over} | {human(flash)} | {naive / flash:.0f}× |")
    return "\n".join(rows)


def measured(folder):
    """{(BH, D, dtype, impl): [(L, bytes)]} of the non-causal runs that passed, from a results
    folder."""
    out = {}
    for r in bench_results.load(folder):
        if r["status"] == "PASS" and r.get("mem_peak_bytes") and not r["causal"]:
            key = (r["B"] * r["H"], r["D"], r["dtype"], r["impl"])
            out.setdefault(key, []).append((r["Lq"], r["mem_peak_bytes"]))
    return out


def plot(out_dir, points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(CONFIGS), figsize=(13, 4.8), sharey=True)
    for ax, c in zip(axes, CONFIGS):
        for which, style in ((0, "-"), (1, "--")):
            ax.plot(LENGTHS, [model(L, c["BH"], c["D"], c["dtype"])[which] / 2 ** 30
                              for L in LENGTHS], style, color="k",
                    label="model: naive (L×L scores)" if which == 0 else "model: flash (O(L))")
        for (BH, D, dtype, impl), pts in sorted(points.items()):
            if (BH, D) == (c["BH"], c["D"]):
                pts = sorted(pts)
                ax.plot([p[0] for p in pts], [p[1] / 2 ** 30 for p in pts], "o:",
                        label=f"measured {impl} ({dtype})")
        ax.axhline(H100_BYTES / 2 ** 30, color="red", lw=0.8)
        ax.text(LENGTHS[0], H100_BYTES / 2 ** 30 * 1.15, "80 GB (H100)", color="red", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_title(f"B·H = {c['BH']}, D = {c['D']}, {c['dtype']}, non-causal")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("device memory (GiB)")
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "memory_model.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="a results folder whose measured peak memory to add")
    ap.add_argument("--out", help="output folder (default build/figures, or RESULTS/plots with "
                    "--results)")
    ap.add_argument("--update", action="store_true",
                    help="rewrite the committed figure, benchmarks/results/memory_model/")
    ap.add_argument("--no-plot", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    points = {}
    if args.results:
        if not os.path.isdir(args.results):
            print(f"error: no results folder {args.results}", file=sys.stderr)
            return 2
        points = measured(args.results)
    out_dir = args.out or (os.path.join(args.results, "plots") if args.results
                           else os.path.join(ROOT, "benchmarks", "results", "memory_model")
                           if args.update else os.path.join(ROOT, "build", "figures"))
    print(table())
    for (BH, D, dtype, impl), pts in sorted(points.items()):
        for L, b in sorted(pts):
            naive, flash, _ = model(L, BH, D, dtype)
            print(f"measured {impl} B·H={BH} D={D} {dtype} L={L}: {human(b)} "
                  f"(model: naive {human(naive)}, flash {human(flash)})")
    if not args.no_plot:
        print("wrote " + os.path.relpath(plot(out_dir, points)))
    return 0


if __name__ == "__main__":
    bench_results.run_main(main)
