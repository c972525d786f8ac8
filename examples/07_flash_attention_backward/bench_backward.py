#!/usr/bin/env python3
"""bench_backward.py — example 07's GPU benchmark: forward + backward TFLOP/s of the C kernels
beside PyTorch's SDPA backward in the same run, and the block-sparse backward's speedup against
density (benchmarks/gpu.sh --steps build,backward runs it).

  python examples/07_flash_attention_backward/bench_backward.py \\
      --program build/bench-gpu/examples/07_flash_attention_backward/flash_bwd_gpu \\
      --out benchmarks/results/<device>/backward.jsonl
      FlashAttention's grid: B*L = 16K tokens, L = 512 ... 16K, model width 2048 (H = 2048/D),
      D = 64 and 128, causal and not, fp16. Each point is one run of the program (the forward
      stage, example 03's fa2_mma, and versions 3 and 4, each checked on a (sequence, head) slice
      against the double reference, then timed: median of --reps), and the same problem through
      torch.nn.functional.scaled_dot_product_attention forward + backward with the flash, cuDNN
      and efficient backends pinned (sdpa_kernel), CUDA events, median of --reps. TFLOP/s with
      FlashAttention's convention: forward 4 N^2 d H B (halved when causal), backward 2.5x that,
      forward + backward 3.5x. Then the block-sparse grid: B=2 L=8192 D=64 H=32, windows of
      density 50 % down to 3 %, version 5 against version 4 dense.
  python examples/07_flash_attention_backward/bench_backward.py --table FILE.jsonl
      the markdown tables of a results file (README.md quotes them)
  --smoke: one tiny point on any build (the simulator's too; torch where CUDA is), for the test

Exit status: 0, 1 when a run failed, 77 when the program finds no GPU.
"""
import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import bench_mode  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", help="flash_bwd_gpu (or _sim)")
    ap.add_argument("--out", help="JSON Lines file to append to")
    ap.add_argument("--L", default="512,1024,2048,4096,8192,16384", help="sequence lengths")
    ap.add_argument("--tokens", type=int, default=16384, help="B * L")
    ap.add_argument("--width", type=int, default=2048, help="H * D")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--no-sparse", action="store_true", help="skip the block-sparse grid")
    ap.add_argument("--smoke", action="store_true", help="one tiny point (any build)")
    ap.add_argument("--table", help="print the markdown tables of this results file and exit")
    return ap.parse_args(argv)


def fwd_flops(b, h, l, d, causal):
    return 4.0 * b * h * l * l * d / (2.0 if causal else 1.0)


def run_program(args, b, h, l, d, causal, extra):
    cmd = [args.program, "-B", str(b), "-H", str(h), "-L", str(l), "-D", str(d), "--dtype",
           "f16", "--check-rows", "1", "--reps", str(args.reps), "--warmup", "2", "--json",
           args.out, "--quiet"] + (["--causal"] if causal else []) + extra
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def torch_point(args, b, h, l, d, causal):
    """SDPA forward + backward (and backward alone) per backend: median ms, or nothing without
    a CUDA device."""
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    import torch.nn.functional as F
    q, k, v, do = (torch.rand(b, h, l, d, device="cuda", dtype=torch.float16) * 2 - 1
                   for _ in range(4))
    for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                          ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        times_fb, times_b = [], []
        try:
            with sdpa_kernel(backend):
                for rep in range(args.reps + 2):
                    qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
                    e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                    e[0].record()
                    o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
                    e[1].record()
                    o.backward(do)
                    e[2].record()
                    torch.cuda.synchronize()
                    if rep >= 2:
                        times_fb.append(e[0].elapsed_time(e[2]))
                        times_b.append(e[1].elapsed_time(e[2]))
        except RuntimeError as err:  # a backend that does not take the shape
            print(f"  {name}: {str(err).splitlines()[0]}", flush=True)
            continue
        med = lambda x: sorted(x)[len(x) // 2]
        f = fwd_flops(b, h, l, d, causal)
        rec = {"example": "07_flash_attention_backward", "kernel": name, "backend": "torch",
               "B": b, "H": h, "Lq": l, "Lk": l, "D": d, "dtype": "f16", "causal": causal,
               "fwd_bwd_ms": med(times_fb), "bwd_ms": med(times_b),
               "fwd_bwd_tflops": 3.5 * f / (med(times_fb) * 1e-3) * 1e-12,
               "bwd_tflops": 2.5 * f / (med(times_b) * 1e-3) * 1e-12, "commit": args.commit}
        with open(args.out, "a") as out:
            out.write(json.dumps(rec) + "\n")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(path):
    recs = [r for r in load(path) if r.get("example") == "07_flash_attention_backward"]
    points = {}
    for r in recs:
        key = (r["Lq"], r["D"], r["causal"], r.get("pattern") or "")
        points.setdefault(key, {})[r["kernel"]] = r
    out = ["Forward + backward TFLOP/s (FlashAttention's convention: 3.5 x the forward's "
           "FLOPs), fp16, B*L = 16K tokens, H*D = 2048; the C kernels' backward is example "
           "07's version 3 (atomics) or 4 (deterministic), their forward example 03's fa2_mma.",
           "", "| L | D | causal | fa2_mma | fa2_mma_det | sdpa_flash | sdpa_cudnn | "
           "sdpa_efficient | fa2_mma / sdpa_flash |", "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for (l, d, causal, pattern), v in sorted(points.items()):
        if pattern:
            continue
        fwd = v.get("fwd_fa2")

        def ours(name):
            r = v.get(name)
            if not (r and fwd and r.get("median_ms") and fwd.get("median_ms")):
                return None
            return 3.5 * r["forward_flops"] / ((r["median_ms"] + fwd["median_ms"]) * 1e-3) * 1e-12

        cells = [ours("fa2_mma"), ours("fa2_mma_det")]
        cells += [v[n]["fwd_bwd_tflops"] if n in v else None
                  for n in ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient")]
        ratio = f"{cells[0] / cells[2]:.2f}" if cells[0] and cells[2] else ""
        text = ["" if c is None else f"{c:.1f}" for c in cells]
        out.append(f"| {l} | {d} | {'yes' if causal else 'no'} | " + " | ".join(text) +
                   f" | {ratio} |")
    sparse = sorted((k, v) for k, v in points.items() if k[3] and "block_sparse" in v)
    if sparse:
        out += ["", "Block-sparse backward (version 5) against the dense one (version 4) on the "
                "same problem: B=2 L=8192 D=64 H=32 fp16.", "",
                "| pattern | backward ms | dense backward ms | speedup | 1 / density |",
                "|---|---:|---:|---:|---:|"]
        for (l, d, causal, pattern), v in sparse:
            dense = points.get((l, d, causal, ""), {}).get("fa2_mma_det")
            r = v["block_sparse"]
            dense_ms = dense["median_ms"] if dense else None
            density = r["forward_flops"] / fwd_flops(r["B"], r["H"], l, d, causal)
            base = "" if dense_ms is None else f"{dense_ms:.3g}"
            speedup = "" if dense_ms is None else f"{dense_ms / r['median_ms']:.2f}x"
            out.append(f"| {pattern} | {r['median_ms']:.3g} | {base} | {speedup} | "
                       f"{1 / density:.2f} |")
    return "\n".join(out)


def main(argv):
    args = parse_args(argv)
    done = bench_mode(args, table)
    if done is not None:
        return done
    if args.smoke:
        points, args.reps, args.no_sparse = [(1, 2, 128, 64, True)], 1, True
    else:
        points = [(args.tokens // l, args.width // d, l, d, causal)
                  for l in [int(x) for x in args.L.split(",")] for d in (64, 128)
                  for causal in (False, True)]
    failed = 0
    for b, h, l, d, causal in points:
        rc = run_program(args, b, h, l, d, causal, [])
        if rc == 77:
            return 77
        failed += rc != 0
        torch_point(args, b, h, l, d, causal)
    if not args.no_sparse:  # windows of density ~ (2w+1)/L: 50 % .. 3 %
        for w in (2048, 1024, 512, 256, 128):
            failed += run_program(args, 2, 32, 8192, 64, False,
                                  ["--kernel", "5", "--pattern", f"window:w={w}"]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
