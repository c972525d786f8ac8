#!/usr/bin/env python3
"""bench_decode.py — example 09's GPU benchmark: one decoding step over batches of 1 to 64
sequences with caches of 1K to 128K tokens, every version timed, beside PyTorch's SDPA (and
flash_attn_with_kvcache where the flash-attn package is installed) in the same run.

  python examples/09_decode/bench_decode.py --program build/bench-gpu/examples/09_decode/decode_gpu \\
      --out benchmarks/results/<device>/decode.jsonl          (benchmarks/gpu.sh --steps decode)
      Llama-like heads (32 query heads over 8 key/value heads, D = 128), bf16, pages of 64 tokens,
      one new token per sequence; (B, L) for B in 1, 4, 16, 64 and L in 1K, 4K, 8K, 32K, 128K up
      to a million cached tokens in all; each point is one run of the program (a sample of rows
      checked, then each version timed: one JSON line per version, with the bytes it must move,
      model_bytes). At L = 32K and 128K the DSA stages (indexer 64 x 128, top-k 2048, sparse)
      run beside the dense ones. Then torch SDPA (enable_gqa, contiguous cache) and
      flash_attn_with_kvcache (paged) at the same points, as lines with kernel "torch.sdpa" and
      "flash_attn_with_kvcache".
  python examples/09_decode/bench_decode.py --grid latent --program ... --out ...
      version 10 on DeepSeek's MLA shape (--latent: 128 query heads over one latent row of 576,
      V its first 512, bf16, pages of 64 as FlashMLA's), B 1-64 and contexts 1K-32K up to a
      million cached tokens, beside torch SDPA on the same latent rows (enable_gqa, K = the
      rows, V = their first 512 columns), as lines with kernel "torch.sdpa_latent".
  python examples/09_decode/bench_decode.py --table FILE.jsonl [--peak-tbs X]
      the markdown tables: achieved bandwidth (model bytes / median time) and its share of the
      device's peak (H100 SXM: 3.35 TB/s, NVIDIA's datasheet), and DSA against dense.
  --quick: B 1 and 16, L 1K and 32K.  --grid tiny: a few small points (the simulator's test of
  this script, tests/CMakeLists.txt).

Exit status: 0, 1 when a run failed, 2 on bad usage, 77 when the program finds no GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import time

VERSIONS = ("naive", "split_kv", "gqa", "paged", "sparse")
DSA = ("indexer", "topk_radix", "sparse")
PEAKS_TBS = {"H100 80GB HBM3": 3.35, "H100 SXM": 3.35, "H200": 4.8}  # NVIDIA datasheets


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", help="decode_gpu (or decode_sim)")
    ap.add_argument("--out", help="JSON Lines file to append to")
    ap.add_argument("--grid", default="gpu", choices=["gpu", "latent", "tiny", "tiny-latent"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting points after this")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--table", help="print the markdown tables of this results file and exit")
    ap.add_argument("--peak-tbs", type=float, help="the device's peak bandwidth (TB/s)")
    return ap.parse_args(argv)


def points(grid, quick):
    """(B, L, H, H_kv, D, dtype, page, topk) of the grid (latent grids: D = 576, H_kv = 1)."""
    if grid == "tiny":
        return [(2, 300, 4, 2, 64, "f16", 16, 16), (1, 1000, 8, 2, 64, "bf16", 64, 64)]
    if grid == "tiny-latent":
        return [(2, 300, 16, 1, 576, "bf16", 64, 0)]
    if grid == "latent":  # DeepSeek-V3's 128 heads on one GPU, FlashMLA's pages of 64
        Bs, Ls = ([1, 16], [1024, 32768]) if quick else ([1, 4, 16, 64], [1024, 4096, 8192,
                                                                          32768])
        return [(B, L, 128, 1, 576, "bf16", 64, 0) for B in Bs for L in Ls if B * L <= 1 << 20]
    Bs, Ls = ([1, 16], [1024, 32768]) if quick else ([1, 4, 16, 64], [1024, 4096, 8192, 32768,
                                                                      131072])
    return [(B, L, 32, 8, 128, "bf16", 64, 2048 if L >= 32768 else 0) for B in Bs for L in Ls
            if B * L <= 1 << 20]


def kv_bytes(B, L, H, H_kv, D, dsize=2):
    """What any decoding step must move: K and V once, q read and O written (latent, D = 576:
    the latent row once, q of 576 read and O of 512 written)."""
    if D == 576:
        return B * L * D * dsize + B * H * (576 + 512) * dsize
    return B * L * H_kv * D * 2 * dsize + B * H * D * 2 * dsize


def torch_peers(B, L, H, H_kv, D, page, reps):
    """[(name, median ms)] of SDPA and flash_attn_with_kvcache on a CUDA device (none without)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    dt = torch.bfloat16
    q = torch.randn(B, H, 1, D, device="cuda", dtype=dt)
    k = torch.randn(B, H_kv, L, D, device="cuda", dtype=dt)
    v = torch.randn_like(k) if D != 576 else k[..., :512]  # latent: V = the rows' first 512

    def timed(fn):
        times = []
        for _ in range(reps + 2):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        times = sorted(times[2:])
        return times[len(times) // 2]

    def timed_or_oom(fn):
        """timed(fn), or None where the peer runs out of memory (SDPA's math path copies K and V
        to every head: 144 GiB at B 16, 32K contexts, 128 heads of 576 on an H200)."""
        try:
            return timed(fn)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            return None

    out = [("torch.sdpa" if D != 576 else "torch.sdpa_latent",
            timed_or_oom(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, enable_gqa=True, scale=192 ** -0.5 if D == 576 else None)))]
    if D == 576:  # flash_attn_with_kvcache takes one head dimension for K and V
        return out
    try:
        from flash_attn import flash_attn_with_kvcache
    except ImportError:
        return out
    pages = B * -(-L // page)
    kp = torch.randn(pages, page, H_kv, D, device="cuda", dtype=dt)
    vp = torch.randn_like(kp)
    table = torch.randperm(pages, device="cuda", dtype=torch.int32).view(B, -1)
    lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
    qf = q.transpose(1, 2).contiguous()
    out.append(("flash_attn_with_kvcache", timed_or_oom(lambda: flash_attn_with_kvcache(
        qf, kp, vp, cache_seqlens=lens, block_table=table))))
    return out


def run(args):
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    start, failed = time.monotonic(), 0
    for B, L, H, H_kv, D, dtype, page, topk in points(args.grid, args.quick):
        if args.budget_s and time.monotonic() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: the remaining points are not run")
            break
        cmd = [args.program, "-B", str(B), "-L", str(L), "-H", str(H), "--kv-heads", str(H_kv),
               "-D", str(D), "--dtype", dtype, "--page-size", str(page), "--check-rows", "64",
               "--reps", str(args.reps), "--warmup", "2", "--quiet", "--json", args.out]
        cmd += ["--latent", "--kernel", "10"] if D == 576 else []
        cmd += ["--topk", str(topk)] if topk else []
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
        if rc == 77:
            return 77
        failed += rc != 0
        for name, ms in torch_peers(B, L, H, H_kv, D, page, args.reps):
            with open(args.out, "a") as f:
                f.write(json.dumps({"example": "09_decode", "kernel": name, "backend": "torch",
                                    "B": B, "H": H, "Lq": 1, "Lk": L, "D": D, "dtype": dtype,
                                    "kv_heads": H_kv, "page_size": page, "median_ms": ms,
                                    "oom": ms is None,
                                    "model_bytes": kv_bytes(B, L, H, H_kv, D),
                                    "commit": args.commit}) + "\n")
    return 1 if failed else 0


def bandwidth_rows(runs, cols, peak):
    """| B | context | GB/s (share of the peak) per column |, one row per (B, L)."""
    out = ["| B | context | " + " | ".join(cols) + " |", "|---:|---:|" + "---:|" * len(cols)]
    for (B, L) in sorted(runs):
        v, cells = runs[(B, L)], []
        for c in cols:
            if c not in v or not v[c]["median_ms"]:
                cells.append("")
                continue
            gbs = v[c]["model_bytes"] / (v[c]["median_ms"] * 1e-3) * 1e-9
            cells.append(f"{gbs:.3g}" + (f" ({gbs / (peak * 1e3):.0%})" if peak else ""))
        out.append(f"| {B} | {L} | " + " | ".join(cells) + " |")
    return out


def table(path, peak_tbs):
    runs, mla, device = {}, {}, ""  # mla: version 10's runs (--latent) and their SDPA peer
    for line in open(path):
        r = json.loads(line)
        if r.get("example") != "09_decode" or r.get("median_ms") is None:
            continue
        device = r.get("device", device) if r.get("backend") != "torch" else device
        latent = r.get("latent") or r["kernel"] == "torch.sdpa_latent"
        (mla if latent else runs).setdefault((r["B"], r["Lk"]), {})[r["kernel"]] = r
    peak = peak_tbs or next((v for k, v in PEAKS_TBS.items() if k in device), None)
    cols = [c for c in VERSIONS + ("torch.sdpa", "flash_attn_with_kvcache")
            if any(c in v for v in runs.values())]
    share = f" (share of {peak} TB/s)" if peak else ""
    out = [f"Achieved bandwidth, GB/s{share}: the bytes each must move (model_bytes) over its "
           f"median time; {device or 'device unknown'}.", ""] + bandwidth_rows(runs, cols, peak)
    if mla:
        out += ["", "DeepSeek's MLA (version 10, `--latent`: 128 heads over one latent row of "
                    "576, V its first 512, bf16), the same measure:", ""]
        out += bandwidth_rows(mla, [c for c in ("latent", "torch.sdpa_latent")
                                    if any(c in v for v in mla.values())], peak)
    dsa = [(k, v) for k, v in sorted(runs.items()) if all(s in v for s in DSA) and "paged" in v]
    if dsa:
        out += ["", "DSA (indexer + top-k + sparse) against dense (paged), median ms:", "",
                "| B | context | k | indexer | top-k | sparse | DSA total | dense | dense / DSA |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (B, L), v in dsa:
            t = [v[s]["median_ms"] for s in DSA]
            out.append(f"| {B} | {L} | {v['sparse'].get('topk')} | " +
                       " | ".join(f"{x:.3g}" for x in t) +
                       f" | {sum(t):.3g} | {v['paged']['median_ms']:.3g} | "
                       f"{v['paged']['median_ms'] / sum(t):.2f}x |")
    return "\n".join(out)


def main(argv):
    args = parse_args(argv)
    if args.table:
        print(table(args.table, args.peak_tbs))
        return 0
    if not args.program or not args.out:
        print("error: --program and --out are required (or --table FILE)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
