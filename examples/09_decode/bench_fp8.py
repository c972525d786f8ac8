#!/usr/bin/env python3
"""bench_fp8.py — the FP8 steps of the GPU benchmark (benchmarks/gpu.sh --steps fp8):

  decode   example 09's attention over the FP8 cache (decode --fp8: paged_fp8, latent_fp8) beside
           the same kernel over the 16-bit cache (decode: version 5 paged, version 10 latent) at
           the same points: Llama-like heads (32 over 8, D = 128) and DeepSeek's MLA shape (128
           heads over one latent row), bf16, pages of 64, one new token per sequence
  indexer  example 05's lightning indexer in fp16/bf16 (version 1) and in FP8 (version 8,
           indexer_fp8) on DeepSeek's indexer (64 heads x 128), causal, L 8K-128K

  python examples/09_decode/bench_fp8.py --decode PROG --deepseek PROG \\
      --out benchmarks/results/<device>/fp8.jsonl [--quick] [--budget-s S]
  python examples/09_decode/bench_fp8.py --table FILE.jsonl     the markdown tables of a file

Each run checks before it times (decode 64 of its rows); a failed check is reported and
its point left out of the tables. Exit status: 0, 1 when a run failed, 77 without a GPU.
Not measured on a GPU yet.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def decode_points(quick):
    pts = []
    for B, L in ((1, 4096), (1, 32768), (8, 4096), (8, 32768)):
        pts.append(("llama", B, L))
    for B, L in ((1, 4096), (1, 32768), (8, 8192)):
        pts.append(("latent", B, L))
    return [p for p in pts if p[2] == 4096 and p[1] == 1] if quick else pts


def indexer_points(quick):
    return [8192] if quick else [8192, 32768, 131072]


def run_cmd(cmd):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode


def run(args):
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    start, failed = time.monotonic(), 0
    sizes = args.sizes
    for shape, B, L in decode_points(args.quick):
        if args.budget_s and time.monotonic() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: the remaining points are not run")
            break
        B, L = (B, L) if sizes is None else sizes
        lens = ",".join([str(L)] * B)
        heads = ["--latent", "-H", "128" if sizes is None else "16"] if shape == "latent" else \
            ["-H", "32", "--kv-heads", "8", "-D", "128"]
        rc = run_cmd([args.decode, "--fp8", "--kernel", "13" if shape == "latent" else "12",
                      "--cache-lens", lens, "--page-size", "64", "--dtype", "bf16",
                      "--check-rows", "64", "--reps", str(args.reps), "--quiet", "--json",
                      args.out] + heads)
        if rc == 77:
            return 77
        failed += rc not in (0,)
        sixteen = ["--latent", "--kernel", "10", "-H", "128" if sizes is None else "16"] \
            if shape == "latent" else ["--kernel", "5", "-H", "32", "--kv-heads", "8", "-D", "128"]
        rc = run_cmd([args.decode, "-B", str(B), "-L", str(L), "--page-size", "64", "--dtype",
                      "bf16", "--check-rows", "64", "--reps", str(args.reps), "--warmup", "2",
                      "--quiet", "--json", args.out] + sixteen)
        failed += rc != 0
    for L in indexer_points(args.quick):
        if args.budget_s and time.monotonic() - start > args.budget_s:
            break
        L = L if sizes is None else sizes[1]
        for kernel in ("1", "8"):
            rc = run_cmd([args.deepseek, "-B", "1", "-H", "16", "-L", str(L), "-D", "128",
                          "--dtype", "bf16", "--topk", "64" if sizes else "2048", "--causal",
                          "--index-heads", "64" if sizes is None else "16", "--index-dim",
                          "128" if sizes is None else "64", "--kernel", kernel, "--check-rows",
                          "8", "--reps", str(args.reps), "--warmup", "2", "--json", args.out])
            if rc == 77:
                return 77
            failed += rc != 0
    return 1 if failed else 0


def table(path):
    recs = [json.loads(x) for x in open(path) if x.strip()]
    out = ["Decode: attention over the FP8 cache beside the 16-bit cache (median ms; the FP8 "
           "cache's bytes read per ms):", "",
           "| shape | B | context | 16-bit cache (ms) | FP8 cache (ms) | 16-bit / FP8 | FP8: "
           "cache GB/s |", "|---|---:|---:|---:|---:|---:|---:|"]
    fp8 = {}
    sixteen = {}
    for r in recs:
        if r.get("kernel") in ("paged_fp8", "latent_fp8") and r.get("status") == "PASS" \
                and r.get("median_ms"):
            fp8[(r["kernel"] == "latent_fp8", r["B"], r["Lk"])] = r
        elif r.get("example") == "09_decode" and r.get("kernel") in ("paged", "latent") \
                and r.get("median_ms"):
            sixteen[(r["kernel"] == "latent", r["B"], r["Lk"])] = r
    for key in sorted(fp8):
        f = fp8[key]
        s = sixteen.get(key)
        ms16 = f"{s['median_ms']:.3g}" if s else "—"
        ratio = f"{s['median_ms'] / f['median_ms']:.2f}" if s and f["median_ms"] else "—"
        out.append(f"| {'latent, ' + str(f['H']) + ' heads' if key[0] else 'K/V ' + str(f['H']) + ' / ' + str(f['kv_heads'])} "
                   f"| {key[1]} | {key[2]:,} | {ms16} | {f['median_ms']:.3g} | {ratio} | "
                   f"{f['cache_bytes'] / (f['median_ms'] * 1e-3) * 1e-9:.1f} |")
    idx = {}
    for r in recs:
        if r.get("example") == "05_deepseek_sparse" and r.get("kernel") in ("indexer",
                                                                             "indexer_fp8"):
            idx.setdefault(r["Lk"], {})[r["kernel"]] = r["median_ms"]
    out += ["", "Indexer (example 05): median ms", "",
            "| context | indexer (16-bit) | indexer_fp8 | 16-bit / FP8 |", "|---:|---:|---:|---:|"]
    for L in sorted(idx):
        a, b = idx[L].get("indexer"), idx[L].get("indexer_fp8")
        out.append(f"| {L:,} | {a if a is None else f'{a:.3g}'} | "
                   f"{b if b is None else f'{b:.3g}'} | "
                   f"{f'{a / b:.2f}' if a and b else '—'} |")
    backend = {r.get("backend") for r in recs} - {None}
    if backend == {"sim"}:
        out += ["", "Simulator timings: CPU time, not GPU performance."]
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--decode", help="decode_gpu (or _sim)")
    ap.add_argument("--deepseek", help="deepseek_sparse_gpu (or _sim)")
    ap.add_argument("--out", help="JSON Lines file to append to")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", help="B,L for every point (a tiny grid for the simulator's test)")
    ap.add_argument("--table", help="print the tables of a results file")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if not (args.decode and args.deepseek and args.out):
        print("error: --decode, --deepseek and --out are needed (or --table)",
              file=sys.stderr)
        return 2
    if args.sizes:
        try:
            args.sizes = tuple(int(x) for x in args.sizes.split(","))
            assert len(args.sizes) == 2 and min(args.sizes) > 0
        except (ValueError, AssertionError):
            print(f"error: --sizes takes B,L (got '{args.sizes}')", file=sys.stderr)
            return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
