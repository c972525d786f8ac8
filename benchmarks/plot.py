#!/usr/bin/env python3
"""plot.py — draws the benchmark results of one device: time, TFLOP/s and peak device memory
against the sequence length L, one line per implementation, one figure per problem family
(D, dtype, causal, B, H, pattern), as PNG; and, where there are records of Example 04's
sparse patterns, sparse_speedup.png: each kernel's measured speedup over dense_fa2 on the
same problem against the ideal speedup (dense entries / computed entries), with the chapter's goal
of 90 % of the ideal.

    python benchmarks/plot.py benchmarks/results/<device>            -> <device>/plots/*.png
    python benchmarks/plot.py RESULTS_DIR --out DIR

It reads bench_attention.jsonl and bench_torch.jsonl of the folder (bench_results.py; keys in
benchmarks/README.md) and plots the runs that passed their check; skipped, failed and
out-of-memory runs are left out (the tables list them). Figures of simulator results say so in
red: those timings measure the CPU simulator, not a GPU.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

import bench_results
import update_tables  # Example 04's rows: records matched to dense_fa2's


def family(r):
    return (r["D"], r["dtype"], r["causal"], r["B"], r["H"], r.get("pattern", "dense"))


def family_name(key):
    D, dtype, causal, B, H, pattern = key
    name = f"D{D}_{dtype}_{'causal' if causal else 'full'}_B{B}H{H}"
    return name + ("" if pattern == "dense" else "_" + re.sub(r"[^A-Za-z0-9.-]+", "_", pattern)), (
        f"B={B} H={H} D={D} {dtype} {'causal' if causal else 'non-causal'}"
        + ("" if pattern == "dense" else f", {pattern}"))


def draw(plt, key, recs, out_dir):
    name, title = family_name(key)
    by_impl = defaultdict(list)
    for r in recs:
        if r["status"] == "PASS" and r.get("median_ms"):
            by_impl[r["impl"]].append(r)
    if not by_impl:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    panels = [("median_ms", "time per call (ms, median)", 1.0),
              ("tflops", "TFLOP/s (FLOP model / median time)", 1.0),
              ("mem_peak_bytes", "peak device memory (MiB)", 1.0 / 2 ** 20)]
    for ax, (field, label, factor) in zip(axes, panels):
        for impl in sorted(by_impl):
            pts = sorted((r["Lq"], r[field] * factor) for r in by_impl[impl]
                         if r.get(field) is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl)
        ax.set_xscale("log", base=2)
        if field != "tflops":
            ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    sample = recs[0]
    fig.suptitle(f"{title} — {sample['device']} (commit {sample.get('commit', '?')}, "
                 f"{str(sample.get('date', '?'))[:10]})")
    simulator_warning(fig, recs)
    # Fixed margins, not tight_layout(): measuring every label's extent took 40 % of the
    # script's time (19 figures: 9.8 s of CPU with it, 5.6 s without), for the same figure.
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.14, top=0.88, wspace=0.25)
    return save(plt, fig, out_dir, name)


def simulator_warning(fig, recs):
    if any(r.get("simulated") for r in recs):
        fig.text(0.5, 0.005, "CPU simulator timings: they measure the simulator, not GPU "
                 "performance", ha="center", color="red")


def save(plt, fig, out_dir, name):
    path = os.path.join(out_dir, name + ".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_sparse(plt, recs, out_dir):
    """Example 04: measured speedup over dense_fa2 against the ideal speedup, per kernel."""
    points = defaultdict(list)
    for row in update_tables.sparse_rows(recs):
        for impl in update_tables.SPARSE_KERNELS + ["torch/flex"]:
            up = update_tables.speedup(row, impl)
            if up and row["bound"]:
                points[impl].append((row["bound"], up))
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 6))
    for impl, marker in zip(sorted(points), "osD^v"):
        ax.scatter([p[0] for p in points[impl]], [p[1] for p in points[impl]], marker=marker,
                   label=impl, alpha=0.8)
    values = [v for pts in points.values() for p in pts for v in p]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="ideal (measured = ideal)")
    ax.plot([lo, hi], [0.9 * lo, 0.9 * hi], color="black", lw=1, ls="--",
            label="goal: 90 % of the ideal")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("ideal speedup (dense entries / computed entries)")
    ax.set_ylabel("measured speedup over 04_sparse_patterns/dense_fa2")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    sample = next(r for r in recs if r.get("pattern", "dense") != "dense")
    ax.set_title(f"Example 04, sparse patterns — {sample['device']}\n(commit "
                 f"{sample.get('commit', '?')}, {str(sample.get('date', '?'))[:10]})", fontsize=10)
    simulator_warning(fig, recs)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.12, top=0.9)  # fixed: see draw()
    return save(plt, fig, out_dir, "sparse_speedup")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a results folder: benchmarks/results/<device>")
    ap.add_argument("--out", help="where the figures go (default RESULTS/plots)")
    args = ap.parse_args(argv)
    recs = bench_results.load(args.results)
    if not recs:
        print(f"error: no benchmark records (bench_attention.jsonl, bench_torch.jsonl) in "
              f"{args.results}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out_dir = args.out or os.path.join(args.results, "plots")
    os.makedirs(out_dir, exist_ok=True)
    families = defaultdict(list)
    for r in recs:
        families[family(r)].append(r)
    written = 0
    figures = [draw(plt, key, families[key], out_dir) for key in sorted(families, key=str)]
    for path in figures + [draw_sparse(plt, recs, out_dir)]:
        if path:
            written += 1
            print("wrote " + os.path.relpath(path))
    print(f"{written} figures from {len(recs)} records")
    return 0 if written else 1


if __name__ == "__main__":
    bench_results.run_main(main)
