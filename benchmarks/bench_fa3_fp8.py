#!/usr/bin/env python3
"""bench_fa3_fp8.py — the peers of example 10's version 4 (FP8 e4m3 forward, flash3_fp8) on a
Hopper GPU, at the shapes of benchmarks/gpu.sh's example10 step, one JSON line per run:

    fa3/fp8          FlashAttention-3's own FP8 forward: flash_attn_interface.flash_attn_func on
                     float8_e4m3fn Q, K, V (per-tensor scale 1: the inputs are uniform in [-1, 1),
                     within e4m3's range), bf16 out. flash_attn_interface is built from the
                     hopper/ folder of the flash-attention repository (not on PyPI); where it is
                     not importable the record is a SKIP with the reason.
    torch/sdpa_bf16  PyTorch's scaled_dot_product_attention pinned to its FlashAttention backend
                     on the same inputs in bf16 (PyTorch has no FP8 attention).

Each fa3/fp8 record carries max_abs_diff: its largest difference from the bf16 SDPA output on the
same (e4m3-rounded) inputs, a sanity figure, not a pass/fail check. Timing: bench_torch.py's
(CUDA events, L2 flushed before each call, repetitions until the spread is small); provenance
(commit, device, driver) as bench_torch.py records it. Nothing here has been measured for the
README: the records are what gpu.sh collects when it runs on an H100/H200.

    python benchmarks/bench_fa3_fp8.py --B 2 --H 16 --L 1k,4k --D 64,128 --causal both --out f.jsonl
Without a CUDA GPU it prints one line and exits 77.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_torch  # noqa: E402  (time_calls, provenance: one timing and one record for both)


def counts(s):
    return [int(x[:-1]) * 1024 if x.endswith("k") else int(x) for x in s.split(",")]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--L", default="1k,2k,4k,8k,16k")
    ap.add_argument("--D", default="64,128")
    ap.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--target-spread", type=float, default=0.05)
    ap.add_argument("--max-seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU (these are GPU peers only)")
        return 77
    try:
        import flash_attn_interface
        fa3, why = flash_attn_interface.flash_attn_func, ""
    except ImportError as e:
        fa3, why = None, f"flash_attn_interface not importable ({e}): build flash-attention's hopper/"
    from torch.nn.attention import SDPBackend, sdpa_kernel

    prov = bench_torch.provenance(torch, args)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    with open(args.out, "a") as out:
        for L in counts(args.L):
            for D in counts(args.D):
                for causal in causals:
                    shape = dict(B=args.B, H=args.H, L=L, D=D, causal=causal)
                    entries = args.B * args.H * (L * (L + 1) / 2 if causal else L * L)
                    flops = 4.0 * entries * D
                    g = torch.Generator(device="cuda").manual_seed(1234)
                    # [B, L, H, D]: FlashAttention's layout; SDPA takes [B, H, L, D] views
                    q, k, v = (torch.rand(args.B, L, args.H, D, device="cuda", generator=g) * 2 - 1
                               for _ in range(3))
                    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
                    qb, kb, vb = (x.to(torch.bfloat16).transpose(1, 2) for x in (q8, k8, v8))

                    def sdpa():
                        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                            return torch.nn.functional.scaled_dot_product_attention(
                                qb, kb, vb, is_causal=causal)
                    ref = sdpa()
                    t = bench_torch.time_calls(torch, sdpa, args, flush)
                    out.write(json.dumps(dict(prov, impl="torch/sdpa_bf16", status="OK", **shape,
                                              **t, tflops=flops / (t["median_ms"] * 1e-3) * 1e-12))
                              + "\n")
                    if fa3 is None:
                        out.write(json.dumps(dict(prov, impl="fa3/fp8", status="SKIP", why=why,
                                                  **shape)) + "\n")
                        continue

                    def fp8():
                        r = fa3(q8, k8, v8, causal=causal)
                        return r[0] if isinstance(r, tuple) else r
                    diff = (fp8().float().transpose(1, 2) - ref.float()).abs().max().item()
                    t = bench_torch.time_calls(torch, fp8, args, flush)
                    out.write(json.dumps(dict(prov, impl="fa3/fp8", status="OK", **shape, **t,
                                              tflops=flops / (t["median_ms"] * 1e-3) * 1e-12,
                                              max_abs_diff=diff)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
