#!/usr/bin/env python3
"""bench_gpu.py — example 08 on a GPU, beside its peers in the same run: for each modification
(causal, document masking with 8 documents, ALiBi, soft-capping) at L = 1K..16K and D = 64/128,
B = 1, H = 16, fp16:

    flex_attention_gpu --kernel 2   ours (checked on a sample of rows, then timed)
    flex_attention_gpu --kernel 1   example 03's fa2_mma, dense: the plain kernel
    torch/flex_compiled             torch.compile(flex_attention) with flex_attention.py's
                                    mask_mod/score_mod and create_block_mask (128 x 128 blocks,
                                    FlexAttention's default)
    torch/sdpa_explicit             F.scaled_dot_product_attention with the explicit float mask
                                    and bias of flex_attention.py (soft-capping is not a bias:
                                    SKIP)

Every result is checked before it is timed: ours by the C program against the double-precision
reference, the peers on a sample of rows against float64 with FlashAttention's rule. TFLOP/s of
every implementation count the visible entries (4 D per entry), the C program's count. Records
(JSON Lines, the schema of benchmarks/README.md plus "mod") go to --out; benchmarks/gpu.sh runs
this as its step example08 and make_tables.py puts them in the README.

    python examples/08_flex_attention/bench_gpu.py --program build/gpu/.../flex_attention_gpu \
        --out benchmarks/results/<device>/flex08.jsonl
    python examples/08_flex_attention/bench_gpu.py --dry-run      (the runs; no GPU needed)
Without a CUDA GPU it prints one line and exits 77.
"""
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import no_gpu  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODS = ["causal", "document", "alibi", "softcap:cap=30"]
L_ALL = [1024, 2048, 4096, 8192, 16384]
D_ALL = [64, 128]
B, H, DTYPE, DOCS = 1, 16, "f16", 8
ULP_F16 = 2.0 ** -10


def problems(args):
    return [dict(mod=m, L=L, D=D) for m in args.mods for D in args.D for L in args.L]


def doc_lens(L):
    """8 documents of (nearly) equal length: flex_module.c's default."""
    return [L * (d + 1) // DOCS - L * d // DOCS for d in range(DOCS)]


def run_c(program, kernel, prob, args):
    """One record of the C program (--json), or a record saying why there is none."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.jsonl")
        cmd = [program, "--kernel", str(kernel), "--mod", prob["mod"], "-B", str(B), "-H", str(H),
               "-L", str(prob["L"]), "-D", str(prob["D"]), "--dtype", DTYPE, "--quiet",
               "--json", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if os.path.exists(out):
            with open(out) as f:
                rec = json.loads(f.readline())
            rec.update(mod=prob["mod"], bench="example08")
            return rec
        return dict(example="08_flex_attention", kernel=str(kernel), status="ERROR", mod=prob["mod"],
                    Lq=prob["L"], D=prob["D"], note=f"exit {r.returncode}: {r.stderr.strip()[:200]}",
                    bench="example08")


def peers(torch, fx, prob, dev, check_rows=64, seed=1234, compile_fn=None):
    """The peers on one problem: ({name: a call, or None when it cannot take the problem},
    check(output) -> (pass, max abs err)). compile_fn wraps flex_attention (torch.compile on the
    GPU; None: eager, for the test on the CPU)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    L, D = prob["L"], prob["D"]
    gen = torch.Generator(device=dev).manual_seed(seed)
    q, k, v = (torch.rand(B, H, L, D, device=dev, dtype=torch.float16, generator=gen) * 2 - 1
               for _ in range(3))
    doc = torch.repeat_interleave(torch.arange(DOCS, device=dev),
                                  torch.tensor(doc_lens(L), device=dev))
    mask_mod, score_mod = fx.modification(prob["mod"], H, L, L, doc, None, dev)
    name, cap = fx.parse_spec(prob["mod"])
    rows = torch.tensor(sorted({L - 1, 0} | {i * (L - 1) // max(1, check_rows - 1)
                                             for i in range(check_rows)}), device=dev)
    mask, bias = fx.explicit_mask_and_bias(prob["mod"], H, L, L, doc, None, dev, rows=rows)

    def reference(acc, store):
        """Attention of the sampled rows in acc precision, scores stored in store."""
        s = torch.matmul(q[:, :, rows].to(acc), k.to(acc).transpose(-1, -2)) / math.sqrt(D)
        if name == "softcap":
            s = cap * torch.tanh(s / cap)
        if bias is not None:
            s = s + bias.to(acc)
        s = s.to(store).to(acc)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0).to(store)
        return torch.matmul(p.to(acc), v.to(acc)).to(store)

    ref = reference(torch.float64, torch.float64)
    bound = 2.0 * (reference(torch.float32, torch.float16).double() - ref).abs().max().item() \
        + ULP_F16

    def check(out):
        err = (out[:, :, rows].double() - ref).abs().max().item()
        return err <= bound, err

    block_mask = (create_block_mask(mask_mod, None, None, L, L, device=dev)
                  if mask_mod is not None else None)
    flex = compile_fn(flex_attention) if compile_fn else flex_attention
    sdpa_mask = None
    if name != "softcap":  # the float attn_mask: the bias in fp16, -inf where masked, built in
        # chunks of 1024 query rows (ALiBi's [H, L, L] bias in fp32 would take 16 GiB at 16K)
        sdpa_mask = torch.zeros(1, H if name == "alibi" else 1, L, L, device=dev,
                                dtype=torch.float16)
        for r0 in range(0, L, 1024):
            part = torch.arange(r0, min(r0 + 1024, L), device=dev)
            m, b = fx.explicit_mask_and_bias(prob["mod"], H, L, L, doc, None, dev, rows=part,
                                             dtype=torch.float32)
            if b is not None:
                sdpa_mask[0, :, r0:r0 + len(part)] = b.half()
            if m is not None:
                sdpa_mask[0, :, r0:r0 + len(part)].masked_fill_(~m, float("-inf"))
    impls = {
        "flex_compiled": lambda: flex(q, k, v, score_mod=score_mod, block_mask=block_mask),
        "sdpa_explicit": (lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=sdpa_mask)) if sdpa_mask is not None else None,
    }
    return impls, check


def torch_peers(torch, fx, bt, prob, args, pv, flush, entries):
    """The peers' records on one problem, checked then timed; entries: the visible entries (the
    C program's count)."""
    L, D = prob["L"], prob["D"]
    flops = 4.0 * entries * D
    impls, check = peers(torch, fx, prob, "cuda", args.check_rows, args.seed, torch.compile)
    out = []
    for impl, fn in impls.items():
        rec = dict(example="torch", kernel=impl, impl="torch/" + impl, bench="example08",
                   backend="gpu", device=pv["device"], B=B, H=H, Lq=L, Lk=L, D=D, dtype=DTYPE,
                   causal=False, mod=prob["mod"], flops=flops, commit=pv["commit"],
                   date=pv["date"], torch=pv["torch"], median_ms=None, tflops=None)
        if fn is None:
            out.append(dict(rec, status="SKIP", note="soft-capping is not an additive mask"))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                got = fn()
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                ok, err = check(got)
                del got
                if not ok:
                    out.append(dict(rec, status="FAIL", max_abs_err=err,
                                    note=f"error {err:.3g} beyond FlashAttention's bound"))
                    continue
                t = bt.time_calls(torch, fn, args, flush)
            out.append(dict(rec, status="PASS", max_abs_err=err, median_ms=t["median_ms"],
                            min_ms=t["min_ms"], max_ms=t["max_ms"], reps=t["reps"],
                            tflops=flops / (t["median_ms"] * 1e-3) * 1e-12,
                            note=f"first call {first:.1f} s" + (
                                "; BlockMask 128 x 128" if impl == "flex_compiled" else "")))
        except torch.cuda.OutOfMemoryError as e:
            out.append(dict(rec, status="ERROR", note="out of device memory: "
                            + str(e).split("\n")[0][:160]))
        except Exception as e:  # a peer's failure is a result of this run
            msg = str(e).splitlines()[0][:160] if str(e) else ""
            out.append(dict(rec, status="ERROR", note=f"{type(e).__name__}: {msg}"))
    del impls, check
    torch.cuda.empty_cache()
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", help="flex_attention_gpu (build/gpu/examples/08_flex_attention/)")
    ap.add_argument("--out", help="JSON Lines output, appended to")
    ap.add_argument("--mods", default=",".join(MODS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--L", default=",".join(map(str, L_ALL)))
    ap.add_argument("--D", default=",".join(map(str, D_ALL)))
    ap.add_argument("--dry-run", action="store_true", help="list the runs (no GPU needed)")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="stop starting new problems after this many seconds (0: no limit)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-reps", type=int, default=50)
    ap.add_argument("--target-spread", type=float, default=0.02)
    ap.add_argument("--max-seconds", type=float, default=1.0)
    ap.add_argument("--check-rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--commit")
    args = ap.parse_args(argv)
    args.mods = args.mods.split(",")
    try:
        args.L = [int(x) for x in args.L.split(",")]
        args.D = [int(x) for x in args.D.split(",")]
    except ValueError:
        ap.error("--L and --D take comma-separated integers")
    if not set(args.D) <= {64, 128}:
        ap.error("--D: the kernels take 64 or 128")
    return args


def main(argv):
    args = parse_args(argv)
    fx = load("flex_attention_ref", os.path.join(HERE, "flex_attention.py"))
    for m in args.mods:
        fx.parse_spec(m)  # an unknown modification: ValueError naming the compiled ones
    probs = problems(args)
    if args.dry_run:
        for p in probs:
            print(f"{p['mod']:16s} B={B} H={H} L={p['L']:6d} D={p['D']:3d} {DTYPE}: "
                  "flex, dense_fa2, torch/flex_compiled, torch/sdpa_explicit")
        print(f"{len(probs)} problems")
        return 0
    import torch
    skip = no_gpu(torch, "bench_gpu.py", "GPU figures only")
    if skip:
        return skip
    if not args.program or not os.access(args.program, os.X_OK):
        print(f"error: --program: '{args.program}' is not an executable (flex_attention_gpu)",
              file=sys.stderr)
        return 2
    bt = load("bench_torch", os.path.join(ROOT, "benchmarks", "bench_torch.py"))
    pv = bt.provenance(torch, args)
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * max(getattr(props, "L2_cache_size", 0), 1 << 20), dtype=torch.uint8,
                        device="cuda")
    out = open(args.out, "a") if args.out else sys.stdout
    t0, failed = time.time(), 0
    for n, prob in enumerate(probs):
        if args.budget_s and time.time() - t0 > args.budget_s:
            print(f"budget: --budget-s {args.budget_s:.0f} reached; {len(probs) - n} problems "
                  "not run", file=sys.stderr)
            break
        recs = [run_c(args.program, 2, prob, args), run_c(args.program, 1, prob, args)]
        entries = json.loads(json.dumps(recs[0])).get("visible_entries") or 0.0
        if entries:
            recs += torch_peers(torch, fx, bt, prob, args, pv, flush, entries)
        for r in recs:
            failed += r.get("status") in ("FAIL", "ERROR")
            out.write(json.dumps(r) + "\n")
            out.flush()
            print(f"[{time.time() - t0:5.0f} s] {prob['mod']:15s} L={prob['L']:6d} D={prob['D']:3d}"
                  f" {r.get('impl', r.get('kernel')):22s} {r.get('status')} "
                  f"{r.get('tflops') or 0:.1f} TFLOP/s", file=sys.stderr)
    if out is not sys.stdout:
        out.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
