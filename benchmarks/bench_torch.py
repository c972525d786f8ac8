#!/usr/bin/env python3
"""bench_torch.py — the peers of bench_attention, measured on the same GPU over the same grid and
written in the same JSON Lines schema (benchmarks/README.md), so that plots and tables put them
side by side:

    torch/sdpa_flash      scaled_dot_product_attention pinned to FLASH_ATTENTION (sdpa_kernel)
    torch/sdpa_cudnn      ... pinned to CUDNN_ATTENTION
    torch/sdpa_efficient  ... pinned to EFFICIENT_ATTENTION (memory-efficient, xformers-style)
    torch/sdpa_math       ... pinned to MATH (the unfused reference composite)
    torch/flex            FlexAttention (torch.compile'd) with a BlockMask (causal or --pattern)
    torch/naive           matmul, softmax, matmul: the L x L scores materialised

Each result is checked on a sample of query rows against a float64 reference (FlashAttention's
rule for fp16/bf16: error at most 2x that of a same-precision implementation + one ulp): a wrong
result is FAIL and is not timed. Timing: CUDA events, warm-up, L2 flushed before every timed call,
batches of repetitions until the spread (IQR/median) is small. Peak memory:
torch.cuda.max_memory_allocated over the call, inputs included, like bench_attention's.
A backend this torch or this GPU does not offer is recorded as SKIP with the reason.

    python benchmarks/bench_torch.py --grid issue3 --out benchmarks/results/<device>/bench_torch.jsonl
    python benchmarks/bench_torch.py --L 4096 --D 128 --H 16 --dtype f16 --impl sdpa_flash,flex
    python benchmarks/bench_torch.py --L 4096 --pattern sliding_window:256     (example 04's masks)
Without a CUDA GPU it prints one line and exits 77 (these are GPU peers only).
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "flex", "naive"]
ISSUE3_L = [1024, 2048, 4096, 8192, 16384]
# The same presets as bench_attention.c (sim and tiny are simulator grids: not here).
GRIDS = {
    "issue3": [dict(B=[1], H=[16], L=ISSUE3_L, D=[128], dtype=["f16", "bf16"], causal=[False, True]),
               dict(B=[1], H=[32], L=ISSUE3_L, D=[64], dtype=["f16", "bf16"], causal=[False, True])],
    "fp32": [dict(B=[1], H=[16], L=ISSUE3_L, D=[64], dtype=["f32"], causal=[False, True])],
}
ULP_AT_1 = {"f32": 2.0 ** -23, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="issue3", help="preset grid(s), comma-separated: "
                    + ", ".join(GRIDS) + " (default issue3)")
    ap.add_argument("--B", help="replace the grid's batch sizes (comma-separated)")
    ap.add_argument("--H", help="... heads")
    ap.add_argument("--L", help="... sequence lengths (k = x1024)")
    ap.add_argument("--D", help="... head dimensions")
    ap.add_argument("--dtype", help="... dtypes: f32, f16, bf16")
    ap.add_argument("--causal", choices=["no", "yes", "both"], help="... causal or not")
    ap.add_argument("--impl", help="implementations, comma-separated: " + ", ".join(IMPLS))
    ap.add_argument("--pattern", default="dense",
                    help="mask pattern: dense (causal from --causal), sliding_window:W "
                         "(|i-j| <= W) or causal_window:W (i-W < j <= i)")
    ap.add_argument("--out", help="JSON Lines output ('-' = stdout); truncated unless --append")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10, help="timed calls per batch (default 10)")
    ap.add_argument("--max-reps", type=int, default=100)
    ap.add_argument("--target-spread", type=float, default=0.02, help="IQR/median goal")
    ap.add_argument("--max-seconds", type=float, default=2.0,
                    help="stop adding batches after this many seconds of timed calls")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="stop starting new problems after this many seconds (0 = no limit)")
    ap.add_argument("--check-rows", type=int, default=64, help="query rows checked (default 64)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--commit", help="commit to record (default: git rev-parse)")
    args = ap.parse_args(argv)
    if args.impl:
        bad = [i for i in args.impl.split(",") if i not in IMPLS]
        if bad:
            ap.error(f"--impl: unknown {', '.join(bad)} (choose from {', '.join(IMPLS)})")
    for g in args.grid.split(","):
        if g not in GRIDS:
            ap.error(f"--grid: unknown grid '{g}' (choose from {', '.join(GRIDS)})")
    try:
        args.pattern_kind, args.window = parse_pattern(args.pattern)
        for key in ("B", "H", "L", "D"):
            if getattr(args, key) and min(int_list(getattr(args, key))) < 1:
                raise ValueError(f"--{key}: values must be positive")
    except ValueError as e:
        ap.error(str(e) if str(e).startswith("--") else f"bad list value: {e}")
    if args.dtype and not set(args.dtype.split(",")) <= {"f32", "f16", "bf16"}:
        ap.error(f"--dtype: takes f32, f16 or bf16, comma-separated (got '{args.dtype}')")
    return args


def parse_pattern(s):
    if s == "dense":
        return "dense", 0
    kind, _, w = s.partition(":")
    if kind in ("sliding_window", "causal_window") and w.isdigit() and int(w) > 0:
        return kind, int(w)
    raise ValueError(f"--pattern: '{s}' is not dense, sliding_window:W or causal_window:W")


def int_list(s):
    return [int(v[:-1]) * 1024 if v.lower().endswith("k") else int(v) for v in s.split(",")]


def problems(args):
    """The union of the grids' blocks, each list replaced by the command line's where given."""
    over = {}
    for key in ("B", "H", "L", "D"):
        if getattr(args, key):
            over[key] = int_list(getattr(args, key))
    if args.dtype:
        over["dtype"] = args.dtype.split(",")
    if args.causal:
        over["causal"] = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    out = []
    for g in args.grid.split(","):
        for block in GRIDS[g]:
            b = {**block, **over}
            for D in b["D"]:
                for dtype in b["dtype"]:
                    for H in b["H"]:
                        for B in b["B"]:
                            for L in b["L"]:
                                for causal in b["causal"]:
                                    out.append(dict(B=B, H=H, L=L, D=D, dtype=dtype, causal=causal))
    return out


# ---- masks ------------------------------------------------------------------------------------

def visible(i, j, causal, kind, w):
    """Which (query i, key j) entries the problem computes (tensors or ints)."""
    keep = (j <= i) if causal else (j >= 0)
    if kind == "sliding_window":
        keep = keep & ((i - j).abs() <= w if hasattr(i, "abs") else abs(i - j) <= w)
    elif kind == "causal_window":
        keep = keep & (j <= i) & (j > i - w)
    return keep


def entries_per_head(L, causal, kind, w):
    """Computed entries of one head's L x L score matrix (the FLOP model counts only these)."""
    if kind == "dense":
        return L * (L + 1) // 2 if causal else L * L
    total = 0
    for i in range(L):
        lo = max(0, i - w) if kind == "sliding_window" else max(0, i - w + 1)
        hi = i if (causal or kind == "causal_window") else min(L - 1, i + w)
        total += max(0, hi - lo + 1)
    return total


# ---- the implementations ---------------------------------------------------------------------

class Skip(Exception):
    """This implementation cannot run this problem here; the message says why."""


def make_impls(torch, args):
    from torch.nn import functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        SDPBackend = sdpa_kernel = None
        sdpa_missing = f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel ({e})"
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        torch._dynamo.config.cache_size_limit = 256  # one compiled kernel per shape of the grid
        if hasattr(torch._dynamo.config, "recompile_limit"):
            torch._dynamo.config.recompile_limit = 256
        flex = torch.compile(flex_attention, dynamic=False)
    except ImportError as e:
        flex = None
        flex_missing = f"torch {torch.__version__} has no FlexAttention ({e})"

    def sdpa(backend_name):
        def run(q, k, v, prob, mask):
            if sdpa_kernel is None:
                raise Skip(sdpa_missing)
            backend = getattr(SDPBackend, backend_name, None)
            if backend is None:
                raise Skip(f"torch {torch.__version__} has no SDPBackend.{backend_name}")
            if mask is not None and backend_name == "FLASH_ATTENTION":
                raise Skip("FLASH_ATTENTION takes no arbitrary mask (--pattern)")
            with warnings.catch_warnings(record=True) as caught, sdpa_kernel([backend]):
                warnings.simplefilter("always")
                try:
                    return F.scaled_dot_product_attention(
                        q, k, v, attn_mask=mask, is_causal=prob["causal"] and mask is None)
                except RuntimeError as e:
                    if "No available kernel" not in str(e) and "No viable backend" not in str(e):
                        raise
                    why = "; ".join(str(w.message).split("\n")[0] for w in caught)
                    raise Skip(f"{backend_name} not available for this problem: "
                               f"{why or str(e).splitlines()[0]}")
        return run

    block_masks = {}

    def run_flex(q, k, v, prob, mask):
        if flex is None:
            raise Skip(flex_missing)
        kind, w, causal = args.pattern_kind, args.window, prob["causal"]
        if kind == "dense" and not causal:
            bm = None
        else:
            key = (prob["L"], causal)
            if key not in block_masks:
                def mask_mod(b, h, q_idx, kv_idx):
                    return visible(q_idx, kv_idx, causal, kind, w)
                block_masks[key] = create_block_mask(mask_mod, None, None, prob["L"], prob["L"],
                                                     device="cuda")
            bm = block_masks[key]
        return flex(q, k, v, block_mask=bm)

    def run_naive(q, k, v, prob, mask):
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(prob["D"]))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        elif prob["causal"]:
            L = prob["L"]
            s = s.masked_fill(torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1),
                              float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(q.dtype)
        return torch.matmul(p, v)

    return {"sdpa_flash": sdpa("FLASH_ATTENTION"), "sdpa_cudnn": sdpa("CUDNN_ATTENTION"),
            "sdpa_efficient": sdpa("EFFICIENT_ATTENTION"), "sdpa_math": sdpa("MATH"),
            "flex": run_flex, "naive": run_naive}


# ---- checking and timing ---------------------------------------------------------------------

def sample_rows(L, n):
    """The last row (under causality it sees every key), the first, tile edges, then spread."""
    rows = {L - 1, 0} | {r for r in (63, 64, 127, 128) if r < L}
    return sorted(rows | {i * (L - 1) // max(1, n - 1) for i in range(n)})


def check(torch, q, k, v, out, prob, args, mask_fn):
    """(pass, max_abs_err) on a sample of rows against float64, FlashAttention's rule."""
    rows = torch.tensor(sample_rows(prob["L"], args.check_rows), device=q.device)
    scale = 1.0 / math.sqrt(prob["D"])
    keys = torch.arange(prob["L"], device=q.device)
    keep = mask_fn(rows[:, None], keys[None, :])
    qr = q[:, :, rows, :]

    def attention(acc, store):
        s = (torch.matmul(qr.to(acc), k.to(acc).transpose(-1, -2)) * scale).to(store)
        s = s.to(acc).masked_fill(~keep, float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0).to(store)
        return torch.matmul(p.to(acc), v.to(acc)).to(store)

    ref = attention(torch.float64, torch.float64)
    lowp = attention(torch.float32, q.dtype).to(torch.float64)
    got = out[:, :, rows, :].to(torch.float64)
    if not torch.isfinite(got).all():
        return False, float("inf")
    err = (got - ref).abs().max().item()
    bound = 2.0 * (lowp - ref).abs().max().item() + ULP_AT_1[prob["dtype"]]
    return err <= bound, err


def time_calls(torch, fn, args, flush):
    """Median/min/max/spread of per-call CUDA-event times (ms), L2 flushed before each call."""
    for _ in range(args.warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    while True:
        for _ in range(args.reps):
            flush.zero_()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        s = sorted(samples)
        n = len(s)
        median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
        spread = (s[3 * n // 4] - s[n // 4]) / median if n >= 4 and median > 0 else 0.0
        if (n >= args.max_reps or spread <= args.target_spread
                or sum(samples) >= 1e3 * args.max_seconds):
            return dict(median_ms=median, min_ms=s[0], max_ms=s[-1], reps=n, spread=spread)


# ---- records ----------------------------------------------------------------------------------

def provenance(torch, args):
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                                  timeout=30).stdout.strip().split("\n")[0]
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = args.commit or first_line(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    if not args.commit and subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode:
        commit += "-dirty"
    props = torch.cuda.get_device_properties(0)
    return dict(commit=commit,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                cuda_runtime=torch.version.cuda or "unknown",
                cuda_driver=first_line(["nvidia-smi", "--query-gpu=driver_version",
                                        "--format=csv,noheader"]) or "unknown",
                cc=f"{props.major}.{props.minor}", device=props.name,
                host=f"{first_line(['sh', '-c', 'sed -n s/^model.name.*:.//p /proc/cpuinfo'])}, "
                     f"{os.cpu_count()} cores",
                torch=torch.__version__)


def record(prob, impl_name, status, note, pv, args, entries, **kw):
    elem = {"f32": 4, "f16": 2}.get(prob["dtype"], 2)
    B, H, L, D = prob["B"], prob["H"], prob["L"], prob["D"]
    io_bytes = elem * 4 * B * H * L * D + 4 * B * H * L  # Q, K, V read, O written, + LSE
    flops = 4.0 * B * H * entries * D
    t = kw.get("timing")
    grid = args.grid + (" (modified)" if any(getattr(args, a) for a in
                                              ("B", "H", "L", "D", "dtype", "causal")) else "")
    return {
        "example": "torch", "kernel": impl_name, "kernel_id": IMPLS.index(impl_name) + 1,
        "backend": "gpu", "device": pv["device"], "B": B, "H": H, "Lq": L, "Lk": L, "D": D,
        "dtype": prob["dtype"], "causal": prob["causal"], "status": status, "note": note,
        "max_abs_err": kw.get("err"), "median_ms": t and t["median_ms"],
        "min_ms": t and t["min_ms"], "max_ms": t and t["max_ms"], "reps": t["reps"] if t else 0,
        "tflops": t and flops / (t["median_ms"] * 1e-3) * 1e-12,
        "gbps": t and io_bytes / (t["median_ms"] * 1e-3) * 1e-9, "workspace_bytes": 0,
        "bench": "bench_torch", "impl": "torch/" + impl_name, "simulated": False,
        "timing_note": "", "flops": flops, "bytes_model": io_bytes,
        "mem_peak_bytes": kw.get("mem"), "mem_model_bytes": io_bytes, "oom": kw.get("oom", False),
        "spread": t and t["spread"], "warmup": args.warmup, "check_rows": args.check_rows,
        "grid": grid, "pattern": args.pattern, "commit": pv["commit"], "date": pv["date"],
        "cuda_runtime": pv["cuda_runtime"], "cuda_driver": pv["cuda_driver"], "cc": pv["cc"],
        "host": pv["host"], "torch": pv["torch"]}


def run_one(torch, fn, name, prob, args, pv, flush):
    """Check, then time, one implementation on one problem: its record."""
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[prob["dtype"]]
    B, H, L, D = prob["B"], prob["H"], prob["L"], prob["D"]
    kind, w, causal = args.pattern_kind, args.window, prob["causal"]
    entries = entries_per_head(L, causal, kind, w)

    def mask_fn(i, j):
        return visible(i, j, causal, kind, w)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    q = k = v = mask = None
    try:
        gen = torch.Generator(device="cuda").manual_seed(args.seed)
        q, k, v = (torch.rand(B, H, L, D, device="cuda", dtype=dt, generator=gen) * 2 - 1
                   for _ in range(3))
        if kind != "dense":
            idx = torch.arange(L, device="cuda")
            mask = mask_fn(idx[:, None], idx[None, :])
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = fn(q, k, v, prob, mask)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        mem = torch.cuda.max_memory_allocated() - base
        ok, err = check(torch, q, k, v, out, prob, args, mask_fn)
        del out
        note = f"first call (compile) {first_s:.1f} s" if name == "flex" else ""
        if not ok:
            return record(prob, name, "FAIL", note, pv, args, entries, err=err, mem=mem)
        timing = time_calls(torch, lambda: fn(q, k, v, prob, mask), args, flush)
        return record(prob, name, "PASS", note, pv, args, entries, err=err, mem=mem,
                      timing=timing)
    except Skip as e:
        return record(prob, name, "SKIP", str(e), pv, args, entries)
    except torch.cuda.OutOfMemoryError as e:
        return record(prob, name, "ERROR", "out of device memory: " + str(e).split("\n")[0][:200],
                      pv, args, entries, oom=True)
    except Exception as e:  # any other failure of a peer is a result of this run, not a crash
        return record(prob, name, "ERROR", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                      if str(e) else type(e).__name__, pv, args, entries)
    finally:
        del q, k, v, mask
        torch.cuda.empty_cache()


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: no PyTorch here ({e}): bench_torch.py measures GPU peers only")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU (torch.cuda.is_available() is False): bench_torch.py measures "
              "GPU peers only; the simulator figures come from bench_attention")
        return 77
    names = args.impl.split(",") if args.impl else IMPLS
    fns = make_impls(torch, args)
    pv = provenance(torch, args)
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * max(getattr(props, "L2_cache_size", 0), 1 << 20), dtype=torch.uint8,
                        device="cuda")
    probs = problems(args)
    out = sys.stdout if args.out == "-" else open(args.out, "a" if args.append else "w") \
        if args.out else None
    total, done, failed, t0 = len(probs) * len(names), 0, 0, time.time()
    print(f"bench_torch: {len(probs)} problems x {len(names)} implementations on {pv['device']}, "
          f"torch {torch.__version__}, CUDA {pv['cuda_runtime']}, commit {pv['commit']}",
          file=sys.stderr)
    for n, prob in enumerate(probs):
        if args.budget_s and time.time() - t0 > args.budget_s:
            print(f"budget: --budget-s {args.budget_s:.0f} reached; {len(probs) - n} of "
                  f"{len(probs)} problems not run", file=sys.stderr)
            break
        for name in names:
            r = run_one(torch, fns[name], name, prob, args, pv, flush)
            done += 1
            failed += r["status"] in ("FAIL", "ERROR") and not r["oom"]
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()
            what = (f"B={prob['B']} H={prob['H']} L={prob['L']} D={prob['D']} {prob['dtype']}"
                    + (" causal" if prob["causal"] else ""))
            tail = (f"{r['median_ms']:9.4f} ms {r['tflops']:8.3f} TFLOP/s"
                    if r["median_ms"] is not None else r["note"])
            print(f"[{done:3d}/{total} {time.time() - t0:5.0f} s] {what:<28} torch/{name:<15} "
                  f"{r['status']:<5} {tail}", file=sys.stderr)
    if out and out is not sys.stdout:
        out.close()
    print(f"bench_torch: {done} runs in {time.time() - t0:.1f} s, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
