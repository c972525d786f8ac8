#!/usr/bin/env python3
"""bench_deepseek.py — example 05's benchmark: DeepSeek Sparse Attention on DeepSeek-like shapes.

  python benchmarks/bench_deepseek.py --program build/bench-gpu/.../deepseek_sparse_gpu \\
      --out benchmarks/results/<device>/deepseek.jsonl
      the GPU grid: causal, top-k 2048, D = 128, 16 heads sharing the selection, bf16,
      L = 8K, 16K, 32K, 64K, 128K, indexer 64 x 128 (DeepSeek's) and 16 x 64. Each point is one
      run of the program (checks on a sample of rows, then every stage, the pipeline end to end
      and dense FA2 timed; one JSON line per stage), plus torch.topk on rows of the same length
      (where torch has a GPU), as a line with kernel "torch.topk". --seed-rows adds the seed's
      "Sparse (k=512)" row: B=4, H=8, D=64, L=2048 and 8192, not causal.
  python benchmarks/bench_deepseek.py --table FILE.jsonl
      the markdown table of a results file
  python benchmarks/bench_deepseek.py --readme [--check]
      example 05's README table (between <!-- sim-table ... --> and <!-- end sim-table -->),
      rewritten from the simulator's results file (or, with --check, compared: exit 1 if stale)

Exit status: 0, 1 when a run failed, 77 when the program finds no GPU.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import bench_mode  # noqa: E402

STAGES = ("indexer", "topk_bitonic", "topk_radix", "sparse_mma", "sparse_gather", "end_to_end",
          "dense_fa2")
# Names older results files use for the same kernels.
OLD_NAMES = {"dense fa2_mma": "dense_fa2"}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", help="deepseek_sparse_gpu (or _sim)")
    ap.add_argument("--out", help="JSON Lines file to append to")
    ap.add_argument("--L", default="8192,16384,32768,65536,131072", help="sequence lengths")
    ap.add_argument("--indexers", default="64x128,16x64", help="H_I x D_I list")
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--seed-rows", action="store_true",
                    help="also the seed's Sparse (k=512) row: B=4 H=8 D=64, L=2048 and 8192")
    ap.add_argument("--table", help="print the markdown table of this results file and exit")
    ap.add_argument("--readme", action="store_true", help="rewrite example 05's README table")
    ap.add_argument("--check", action="store_true", help="with --readme: only compare")
    return ap.parse_args(argv)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "examples", "05_deepseek_sparse", "README.md")
SIM_RESULTS = os.path.join(ROOT, "benchmarks", "results", "cudasim-AMD-EPYC-2-cores",
                           "deepseek.jsonl")


def readme(check):
    """Example 05's README table from the simulator's results: 0 when it is (now) up to date."""
    text = open(README, encoding="utf-8").read()
    head, rest = text.split("<!-- sim-table", 1)
    marker, rest = rest.split("-->\n", 1)
    _, tail = rest.split("<!-- end sim-table -->", 1)
    new = (head + "<!-- sim-table" + marker + "-->\n" + table(SIM_RESULTS) + "\n"
           + "<!-- end sim-table -->" + tail)
    if new == text:
        print("example 05's README table is up to date")
        return 0
    if check:
        print("example 05's README table is stale: python3 benchmarks/bench_deepseek.py --readme")
        return 1
    open(README, "w", encoding="utf-8").write(new)
    print("rewrote example 05's README table")
    return 0


def ms(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def table(path):
    """Rows: (L, indexer); columns: the stages' median ms, and end to end vs dense."""
    runs = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("example") != "05_deepseek_sparse":
            continue
        key = (r["Lq"], r.get("B", 1), r["H"], r["D"], r.get("causal", True), r.get("index_heads"),
               r.get("index_dim"), r.get("topk"))
        runs.setdefault(key, {})[OLD_NAMES.get(r["kernel"], r["kernel"])] = r
    cols = [s for s in STAGES if any(s in v for v in runs.values())]
    torch_col = any("torch.topk" in v for v in runs.values())
    head = ["L", "B", "H", "D", "causal", "H_I x D_I", "k"] + cols
    head += ["torch.topk"] if torch_col else []
    out = ["Median ms per stage; the last column is dense FA2's time over the pipeline's.", "",
           "| " + " | ".join(head) + " | end to end vs dense |",
           "|" + "---:|" * (len(head) + 1)]
    for key in sorted(runs):
        v = runs[key]
        L, B, H, D, causal, hi, di, k = key
        cells = [str(L), str(B), str(H), str(D), "yes" if causal else "no", f"{hi} x {di}",
                 str(k)]
        cells += [ms(v[c]["median_ms"]) if c in v else "" for c in cols]
        if torch_col:
            cells.append(ms(v["torch.topk"]["median_ms"]) if "torch.topk" in v else "")
        ratio = ""
        if "end_to_end" in v and "dense_fa2" in v:
            ratio = f"{v['dense_fa2']['median_ms'] / v['end_to_end']['median_ms']:.2f}x"
        out.append("| " + " | ".join(cells) + f" | {ratio} |")
    mems = {k: max(r.get("device_mem_bytes", 0) for r in v.values()) for k, v in runs.items()}
    out.append("")
    out.append("Device memory in use during the runs (MiB): " + ", ".join(
        f"L={k[0]}: {mems[k] / 2**20:.1f}" for k in sorted(mems)) + ".")
    return "\n".join(out)


def torch_topk(L, topk, chunk=512, reps=10):
    """Median ms of torch.topk over L causal rows (timed on `chunk` of the longest rows, scaled
    to L rows), or None without a CUDA device."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.randn(chunk, L, device="cuda")
    k = min(topk, L)
    times = []
    for _ in range(reps + 2):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.topk(x, k, dim=1, sorted=False)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times = sorted(times[2:])
    # causal rows see on average half the keys: scale the chunk's time by L rows of ~L/2 keys
    return times[len(times) // 2] * (L / chunk) * 0.5


def main(argv):
    args = parse_args(argv)
    if args.readme:
        return readme(args.check)
    done = bench_mode(args, table)
    if done is not None:
        return done
    failed = 0
    points = [(1, args.heads, 128, L, args.topk, spec, True)
              for L in [int(x) for x in args.L.split(",")] for spec in args.indexers.split(",")]
    if args.seed_rows:  # the seed's "Sparse (k=512)" row: B=4 H=8 D=64, not causal
        points += [(4, 8, 64, L, 512, "16x64", False) for L in (2048, 8192)]
    for B, H, D, L, topk, spec, causal in points:
        hi, di = spec.split("x")
        cmd = [args.program, "-B", str(B), "-H", str(H), "-L", str(L), "-D", str(D), "--dtype",
               "bf16", "--topk", str(topk), "--index-heads", hi, "--index-dim", di,
               "--check-rows", "8", "--reps", str(args.reps), "--warmup", "2", "--json", args.out]
        cmd += ["--causal"] if causal else []
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd).returncode
        if rc == 77:
            return 77
        failed += rc != 0
    for L in sorted({p[3] for p in points if p[5] == "64x128"}):
        ms = torch_topk(L, args.topk)
        if ms is not None:
            with open(args.out, "a") as f:
                f.write(json.dumps({"example": "05_deepseek_sparse", "kernel": "torch.topk",
                                    "backend": "torch", "Lq": L, "Lk": L, "B": 1, "causal": True,
                                    "H": args.heads,
                                    "D": 128, "topk": args.topk, "index_heads": 64,
                                    "index_dim": 128, "median_ms": ms,
                                    "commit": args.commit}) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
