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
    torch/torch_sparse    torch.sparse, one head at a time: the pattern's CSR (built once per
                          problem, not timed, like our kernels' CSR), the scores of its entries by
                          torch.sparse.sampled_addmm (a sampled dense-dense product), a softmax over
                          each row's values, then the sparse x dense product with V (fp32 inside)

Example 04's sparse patterns (--pattern SPEC, or --grid sparse) take the harness's spec syntax
(attn/sparse/patterns.h: window, causal_window, dilated, strided, fixed, global, bigbird, unions with
'+'), parsed and evaluated by examples/04_sparse_patterns/sparse_patterns.py (the PyTorch
reference checked against the C builders). FlexAttention gets the pattern's predicate as its
mask_mod and a BlockMask of --flex-block (64) tiles, the tiles of our kernels; the SDPA backends
and naive PyTorch get a dense boolean L x L mask when it fits in 2 GiB (else SKIP); sdpa_flash
takes no mask (SKIP: --grid sparse measures it on the dense problem of the same shape instead).
The FLOP model counts only the computed entries; records carry pattern (the canonical spec),
density and speedup_bound (benchmarks/README.md).

Each result is checked on a sample of query rows against a float64 reference (FlashAttention's
rule for fp16/bf16: error at most 2x that of a same-precision implementation + one ulp): a wrong
result is FAIL and is not timed. Timing: CUDA events, warm-up, L2 flushed before every timed call,
batches of repetitions until the spread (IQR/median) is small. Peak memory:
torch.cuda.max_memory_allocated over the call, inputs included, like bench_attention's.
A backend this torch or this GPU does not offer is recorded as SKIP with the reason.

    python benchmarks/bench_torch.py --grid dense --out torch.jsonl
    python benchmarks/bench_torch.py --grid seed-table      (the course's comparison table)
    python benchmarks/bench_torch.py --L 4096 --D 128 --H 16 --dtype f16 --impl sdpa_flash,flex
    python benchmarks/bench_torch.py --L 4096 --pattern window:w=256+global:n=16
    python benchmarks/bench_torch.py --grid sparse --dry-run     (lists the runs; no GPU needed)
Without a CUDA GPU it prints one line and exits 77 (these are GPU peers only).
"""
import argparse
import datetime
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import no_gpu  # noqa: E402
IMPLS = ["sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "flex", "naive",
         "torch_sparse"]
DENSE_L = [1024, 2048, 4096, 8192, 16384]
# Example 04's grid, as bench_attention's: (L, causal, patterns) at B=1 H=16 D=128 f16/bf16, for
# the densities 50 / 25 / 10 % and Mistral's window at 128k. On each pattern problem the peers
# that take a pattern; on the dense problem of the same shape sdpa_flash, the dense baseline.
SPARSE = [(4096, False, ["window:w=1199", "bigbird:b=128,r=10,seed=1"]),
          (8192, False, ["window:w=1097", "bigbird:b=128,r=9,seed=1"]),
          (16384, False, ["window:w=840", "bigbird:b=128,r=6,seed=1"]),
          (131072, True, ["causal_window:w=4096"])]
# The same presets as bench_attention.c (sim and tiny are simulator grids: not here). A block may
# name its patterns and the implementations of its pattern and dense problems (default: all).
#   dense       the dense problems: 16 heads of D=128 and 32 of D=64, L 1k..16k, f16/bf16
#   fp32        examples 01 and 02's precision
#   sparse      Example 04's patterns (SPARSE above)
#   seed-table  the course's comparison table: B=4 H=8 D=64 f16 at L 2048 and 8192, non-causal;
#               sdpa_flash and naive PyTorch dense, FlexAttention under a window of 256 each side
#               (513 keys per query: the table's "sparse k=512")
#   seed-128k   the course's 128K table (benchmarks/crossover.py): B=1 H=16 D=128 f16 at L=128k,
#               non-causal, sliding window (1 %), BigBird b=256 (3 %), dilated d=4 (2 %):
#               torch.sparse on the patterns, sdpa_flash on the dense problem (PyTorch dense)
GRIDS = {
    "dense": [dict(B=[1], H=[16], L=DENSE_L, D=[128], dtype=["f16", "bf16"], causal=[False, True]),
              dict(B=[1], H=[32], L=DENSE_L, D=[64], dtype=["f16", "bf16"], causal=[False, True])],
    "fp32": [dict(B=[1], H=[16], L=DENSE_L, D=[64], dtype=["f32"], causal=[False, True])],
    "sparse": [dict(B=[1], H=[16], L=[L], D=[128], dtype=["f16", "bf16"], causal=[causal],
                    pattern=specs, impls=["flex", "sdpa_cudnn", "sdpa_efficient", "sdpa_math"],
                    dense_impls=["sdpa_flash"]) for L, causal, specs in SPARSE],
    "seed-table": [dict(B=[4], H=[8], L=[2048, 8192], D=[64], dtype=["f16"], causal=[False],
                        pattern=["window:w=256"], impls=["flex"],
                        dense_impls=["sdpa_flash", "naive"])],
    "seed-128k": [dict(B=[1], H=[16], L=[131072], D=[128], dtype=["f16"], causal=[False],
                       pattern=["window:w=655", "bigbird:b=256,r=9,seed=1", "dilated:w=1310,d=4"],
                       impls=["torch_sparse"], dense_impls=["sdpa_flash"])],
}
MASK_LIMIT = 2 << 30  # bytes: the largest dense boolean mask given to SDPA and naive PyTorch
DEVICE = "cuda"
ULP_AT_1 = {"f32": 2.0 ** -23, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="dense", help="preset grid(s), comma-separated: "
                    + ", ".join(GRIDS) + " (default dense)")
    ap.add_argument("--B", help="replace the grid's batch sizes (comma-separated)")
    ap.add_argument("--H", help="... heads")
    ap.add_argument("--L", help="... sequence lengths (k = x1024)")
    ap.add_argument("--D", help="... head dimensions")
    ap.add_argument("--dtype", help="... dtypes: f32, f16, bf16")
    ap.add_argument("--causal", choices=["no", "yes", "both"], help="... causal or not")
    ap.add_argument("--impl", help="implementations, comma-separated: " + ", ".join(IMPLS))
    ap.add_argument("--pattern", action="append",
                    help="sparse pattern in the harness's spec syntax, e.g. window:w=256, "
                    "causal_window:w=4096, bigbird:b=64,r=3,seed=1, window:w=64+global:n=16 "
                    "(attn/sparse/patterns.h), or dense; repeat for several; replaces the grid's "
                    "(default: dense; causality from --causal)")
    ap.add_argument("--flex-block", type=int, default=64,
                    help="FlexAttention BlockMask tile (default 64: the tiles of our kernels)")
    ap.add_argument("--dry-run", action="store_true",
                    help="list the (problem, implementation) runs and exit (no GPU needed)")
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
        if args.pattern:
            args.pattern = [canonical(p) for p in args.pattern]
        if args.flex_block < 16 or args.flex_block & (args.flex_block - 1):
            raise ValueError("--flex-block: takes a power of two, at least 16")
        for key in ("B", "H", "L", "D"):
            if getattr(args, key) and min(int_list(getattr(args, key))) < 1:
                raise ValueError(f"--{key}: values must be positive")
    except ValueError as e:
        ap.error(str(e) if str(e).startswith("--") else f"bad list value: {e}")
    if args.dtype and not set(args.dtype.split(",")) <= {"f32", "f16", "bf16"}:
        ap.error(f"--dtype: takes f32, f16 or bf16, comma-separated (got '{args.dtype}')")
    return args


@functools.lru_cache(maxsize=None)
def patterns():
    """Example 04's reference, examples/04_sparse_patterns/sparse_patterns.py: the patterns'
    parser and predicate, loaded once from its file (the example folder is no Python package)."""
    path = os.path.join(ROOT, "examples", "04_sparse_patterns", "sparse_patterns.py")
    spec = importlib.util.spec_from_file_location("sparse_patterns", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:
        print(f"SKIP: no PyTorch here ({e}): bench_torch.py measures GPU peers only")
        sys.exit(77)
    return module


def canonical(spec):
    """The canonical spec (attn_pattern_format's), 'dense' for no pattern; ValueError if bad."""
    try:
        parts = patterns().parse_pattern(spec)
    except ValueError as e:
        raise ValueError(f"--pattern: {e}") from None
    return patterns().format_pattern(parts) if parts else "dense"


def int_list(s):
    return [int(v[:-1]) * 1024 if v.lower().endswith("k") else int(v) for v in s.split(",")]


def problems(args):
    """The union of the grids' blocks, each list replaced by the command line's where given; each
    problem lists the implementations to run on it (--impl keeps some)."""
    over = {}
    for key in ("B", "H", "L", "D"):
        if getattr(args, key):
            over[key] = int_list(getattr(args, key))
    if args.dtype:
        over["dtype"] = args.dtype.split(",")
    if args.causal:
        over["causal"] = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
    if args.pattern:
        over["pattern"] = args.pattern
    names = args.impl.split(",") if args.impl else IMPLS
    out = []
    for g in args.grid.split(","):
        for block in GRIDS[g]:
            b = {**block, **over}
            runs = [(canonical(p), b.get("impls", IMPLS)) for p in b.get("pattern", ["dense"])]
            if "dense_impls" in b and any(p != "dense" for p, _ in runs):
                runs.append(("dense", b["dense_impls"]))
            for D in b["D"]:
                for dtype in b["dtype"]:
                    for H in b["H"]:
                        for B in b["B"]:
                            for L in b["L"]:
                                for causal in b["causal"]:
                                    out += [dict(B=B, H=H, L=L, D=D, dtype=dtype, causal=causal,
                                                 pattern=p, impls=[n for n in impls if n in names])
                                            for p, impls in runs]
    return [p for p in out if p["impls"]]


def describe(prob):
    return (f"B={prob['B']} H={prob['H']} L={prob['L']} D={prob['D']} {prob['dtype']}"
            + (" causal" if prob["causal"] else "")
            + " " + prob["pattern"])


# ---- patterns ---------------------------------------------------------------------------------

class Pattern:
    """A problem's pattern (or dense) under its causality: the predicate keep(i, j) on index
    tensors (sparse_patterns.pattern_predicate, tables on the GPU) and the entry counts."""

    def __init__(self, prob, device):
        sp = patterns()
        L, causal = prob["L"], prob["causal"]
        self.spec, self.L, self.causal = prob["pattern"], L, causal
        self.parts = sp.parse_pattern(self.spec)
        self.keep = sp.pattern_predicate(self.parts, L, L, causal, device)
        self.mask_mod = sp.flex_mask_mod(self.parts, L, L, causal, device)
        self.dense_entries = L * (L + 1) // 2 if causal else L * L
        self.entries = (sp.pattern_entries(self.spec, L, L, causal, device) if self.parts
                        else self.dense_entries)

    def stats(self):
        """The record's pattern keys (the contract of benchmarks/README.md)."""
        sparse = bool(self.parts)
        return {"pattern": self.spec,
                "density": self.entries / (self.L * self.L) if sparse else None,
                "speedup_bound": (self.dense_entries / self.entries if self.entries else None)
                if sparse else None}

    def dense_mask(self, torch, device):
        """The [L, L] boolean mask for SDPA and naive PyTorch (None when dense); Skip when it
        would take more than MASK_LIMIT bytes."""
        if not self.parts:
            return None
        if self.L * self.L > MASK_LIMIT:
            raise Skip(f"a dense boolean mask of {self.L} x {self.L} takes "
                       f"{self.L * self.L / 2 ** 30:.0f} GiB, over the {MASK_LIMIT >> 30} GiB "
                       f"limit of bench_torch")
        idx = torch.arange(self.L, device=device)
        return self.keep(idx[:, None], idx[None, :])


# ---- the implementations ---------------------------------------------------------------------

def pattern_csr(torch, keep, L, device, chunk=1 << 26):
    """The CSR of an [L, L] pattern given by its predicate keep(i, j) on index tensors, built in
    chunks of query rows of about `chunk` entries (never the whole mask): (crow [L+1], col [nnz],
    row [nnz]) as int64 tensors on device."""
    j = torch.arange(L, device=device)
    rows = max(1, chunk // L)
    counts, cols = [], []
    for r0 in range(0, L, rows):
        i = torch.arange(r0, min(L, r0 + rows), device=device)
        m = keep(i[:, None], j[None, :])
        counts.append(m.sum(dim=1))
        cols.append(m.nonzero()[:, 1])
    counts = torch.cat(counts)
    crow = torch.zeros(L + 1, dtype=torch.int64, device=device)
    crow[1:] = torch.cumsum(counts, 0)
    return crow, torch.cat(cols), torch.repeat_interleave(torch.arange(L, device=device), counts)


def csr_attention(torch, q, k, v, crow, col, row, scale):
    """Attention of one head through torch.sparse: S = scale Q K^T on the CSR's entries only
    (sampled_addmm), a softmax over each row's values, O = P V (sparse x dense); fp32 inside, the
    result in q's dtype. A row with no entry outputs 0."""
    L, size = q.shape[0], (q.shape[0], k.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        s = torch.sparse_csr_tensor(crow, col, torch.zeros(col.numel(), dtype=torch.float32,
                                                            device=q.device), size=size,
                                    check_invariants=False)
        s = torch.sparse.sampled_addmm(s, q.float(), k.float().transpose(0, 1), beta=0.0,
                                       alpha=scale)
        vals = s.values()
        top = torch.full((L,), float("-inf"), device=q.device).scatter_reduce(
            0, row, vals, "amax", include_self=True)
        e = torch.exp(vals - top[row])
        den = torch.zeros(L, device=q.device).scatter_add(0, row, e)
        p = torch.sparse_csr_tensor(crow, col, e / den[row], size=size, check_invariants=False)
        return torch.sparse.mm(p, v.float()).to(q.dtype)


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
        block_mask_compiled = torch.compile(create_block_mask)
    except ImportError as e:
        flex = None
        flex_missing = f"torch {torch.__version__} has no FlexAttention ({e})"

    def sdpa(backend_name):
        def run(q, k, v, prob, pat, mask):
            if sdpa_kernel is None:
                raise Skip(sdpa_missing)
            backend = getattr(SDPBackend, backend_name, None)
            if backend is None:
                raise Skip(f"torch {torch.__version__} has no SDPBackend.{backend_name}")
            if pat.parts and backend_name == "FLASH_ATTENTION":
                raise Skip("FLASH_ATTENTION takes no arbitrary mask (the pattern); --grid sparse "
                           "measures it on the dense problem of the same shape")
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

    def run_flex(q, k, v, prob, pat, mask):
        """The pattern's predicate as mask_mod, in --flex-block tiles; the BlockMask is built
        once per (pattern, L, causal), compiled above 2^30 entries (else it is evaluated as a
        whole [L, L] tensor)."""
        if flex is None:
            raise Skip(flex_missing)
        if not pat.parts and not pat.causal:
            bm = None
        else:
            key = (pat.spec, pat.L, pat.causal)
            if key not in block_masks:
                make = block_mask_compiled if pat.L * pat.L > 1 << 30 else create_block_mask
                block_masks[key] = make(pat.mask_mod, None, None, pat.L, pat.L, device=DEVICE,
                                        BLOCK_SIZE=args.flex_block)
            bm = block_masks[key]
        return flex(q, k, v, block_mask=bm)

    def run_naive(q, k, v, prob, pat, mask):
        s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(prob["D"]))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        elif prob["causal"]:
            L = prob["L"]
            s = s.masked_fill(torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1),
                              float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(q.dtype)
        return torch.matmul(p, v)

    csrs = {}

    def run_torch_sparse(q, k, v, prob, pat, mask):
        """torch.sparse one head at a time over the pattern's CSR (built once per pattern)."""
        if not pat.parts:
            raise Skip("torch_sparse runs sparse patterns only (the dense problem: sdpa_flash)")
        key = (pat.spec, pat.L, pat.causal)
        if key not in csrs:
            csrs.clear()  # one pattern's lists at a time: they take nnz x 16 bytes
            csrs[key] = pattern_csr(torch, pat.keep, pat.L, q.device)
        crow, col, row = csrs[key]
        out = torch.empty_like(q)
        scale = 1.0 / math.sqrt(prob["D"])
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                out[b, h] = csr_attention(torch, q[b, h], k[b, h], v[b, h], crow, col, row, scale)
        return out

    return {"sdpa_flash": sdpa("FLASH_ATTENTION"), "sdpa_cudnn": sdpa("CUDNN_ATTENTION"),
            "sdpa_efficient": sdpa("EFFICIENT_ATTENTION"), "sdpa_math": sdpa("MATH"),
            "flex": run_flex, "naive": run_naive, "torch_sparse": run_torch_sparse}


# ---- checking and timing ---------------------------------------------------------------------

def sample_rows(L, n):
    """The last row (under causality it sees every key), the first, tile edges, then spread."""
    rows = {L - 1, 0} | {r for r in (63, 64, 127, 128) if r < L}
    return sorted(rows | {i * (L - 1) // max(1, n - 1) for i in range(n)})


def check(torch, q, k, v, out, prob, args, pat):
    """(pass, max_abs_err) on a sample of rows against float64, FlashAttention's rule."""
    rows = torch.tensor(sample_rows(prob["L"], args.check_rows), device=q.device)
    scale = 1.0 / math.sqrt(prob["D"])
    keys = torch.arange(prob["L"], device=q.device)
    keep = pat.keep(rows[:, None], keys[None, :])
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


def record(prob, impl_name, status, note, pv, args, pat, **kw):
    elem = {"f32": 4, "f16": 2}.get(prob["dtype"], 2)
    B, H, L, D = prob["B"], prob["H"], prob["L"], prob["D"]
    io_bytes = elem * 4 * B * H * L * D + 4 * B * H * L  # Q, K, V read, O written, + LSE
    flops = 4.0 * B * H * pat.entries * D  # every peer here honours the pattern
    t = kw.get("timing")
    grid = args.grid + (" (modified)" if any(getattr(args, a) for a in
                                              ("B", "H", "L", "D", "dtype", "causal", "pattern"))
                        else "")
    return {
        "example": "torch", "kernel": impl_name, "backend": "gpu", "device": pv["device"],
        "B": B, "H": H, "Lq": L, "Lk": L, "D": D,
        "dtype": prob["dtype"], "causal": prob["causal"], "status": status, "note": note,
        "max_abs_err": kw.get("err"), "median_ms": t and t["median_ms"],
        "min_ms": t and t["min_ms"], "max_ms": t and t["max_ms"], "reps": t["reps"] if t else 0,
        "tflops": t and flops / (t["median_ms"] * 1e-3) * 1e-12,
        "gbps": t and io_bytes / (t["median_ms"] * 1e-3) * 1e-9,
        "bench": "bench_torch", "impl": "torch/" + impl_name, "simulated": False,
        "flops": flops, "bytes_model": io_bytes,
        "mem_peak_bytes": kw.get("mem"), "mem_model_bytes": io_bytes, "oom": kw.get("oom", False),
        "spread": t and t["spread"], "warmup": args.warmup, "check_rows": args.check_rows,
        "grid": grid, **pat.stats(), "commit": pv["commit"], "date": pv["date"],
        "cuda_runtime": pv["cuda_runtime"], "cuda_driver": pv["cuda_driver"], "cc": pv["cc"],
        "host": pv["host"], "torch": pv["torch"]}


def run_one(torch, fn, name, prob, pat, args, pv, flush):
    """Check, then time, one implementation on one problem (pattern pat): its record."""
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[prob["dtype"]]
    B, H, L, D = prob["B"], prob["H"], prob["L"], prob["D"]
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    q = k = v = mask = None
    try:
        gen = torch.Generator(device=DEVICE).manual_seed(args.seed)
        q, k, v = (torch.rand(B, H, L, D, device=DEVICE, dtype=dt, generator=gen) * 2 - 1
                   for _ in range(3))
        if name not in ("flex", "sdpa_flash", "torch_sparse"):
            mask = pat.dense_mask(torch, DEVICE)
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = fn(q, k, v, prob, pat, mask)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        mem = torch.cuda.max_memory_allocated() - base
        ok, err = check(torch, q, k, v, out, prob, args, pat)
        del out
        note = (f"BlockMask of {args.flex_block} x {args.flex_block} tiles; first call (compile) "
                f"{first_s:.1f} s" if name == "flex" else "")
        if not ok:
            return record(prob, name, "FAIL", note, pv, args, pat, err=err, mem=mem)
        timing = time_calls(torch, lambda: fn(q, k, v, prob, pat, mask), args, flush)
        return record(prob, name, "PASS", note, pv, args, pat, err=err, mem=mem, timing=timing)
    except Skip as e:
        return record(prob, name, "SKIP", str(e), pv, args, pat)
    except torch.cuda.OutOfMemoryError as e:
        return record(prob, name, "ERROR", "out of device memory: " + str(e).split("\n")[0][:200],
                      pv, args, pat, oom=True)
    except Exception as e:  # any other failure of a peer is a result of this run, not a crash
        return record(prob, name, "ERROR", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                      if str(e) else type(e).__name__, pv, args, pat)
    finally:
        del q, k, v, mask
        torch.cuda.empty_cache()


def dry_run(probs):
    """Lists the runs, one line per problem: what --grid/--pattern/--impl select."""
    for prob in probs:
        print(f"{describe(prob):<56} " + " ".join("torch/" + n for n in prob["impls"]))
    print(f"{len(probs)} problems, {sum(len(p['impls']) for p in probs)} runs")
    return 0


def main(argv):
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(problems(args))
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: no PyTorch here ({e}): bench_torch.py measures GPU peers only")
        return 77
    skip = no_gpu(torch, "bench_torch.py",
                  "GPU peers only; the simulator figures come from bench_attention")
    if skip:
        return skip
    fns = make_impls(torch, args)
    pv = provenance(torch, args)
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * max(getattr(props, "L2_cache_size", 0), 1 << 20), dtype=torch.uint8,
                        device=DEVICE)
    probs = problems(args)
    out = sys.stdout if args.out == "-" else open(args.out, "a" if args.append else "w") \
        if args.out else None
    total, done, failed, t0 = sum(len(p["impls"]) for p in probs), 0, 0, time.time()
    print(f"bench_torch: {len(probs)} problems, {total} runs on {pv['device']}, "
          f"torch {torch.__version__}, CUDA {pv['cuda_runtime']}, commit {pv['commit']}",
          file=sys.stderr)
    for n, prob in enumerate(probs):
        if args.budget_s and time.time() - t0 > args.budget_s:
            print(f"budget: --budget-s {args.budget_s:.0f} reached; {len(probs) - n} of "
                  f"{len(probs)} problems not run", file=sys.stderr)
            break
        pat = Pattern(prob, DEVICE)
        for name in prob["impls"]:
            r = run_one(torch, fns[name], name, prob, pat, args, pv, flush)
            done += 1
            failed += r["status"] in ("FAIL", "ERROR") and not r["oom"]
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()
            tail = (f"{r['median_ms']:9.4f} ms {r['tflops']:8.3f} TFLOP/s"
                    if r["median_ms"] is not None else r["note"])
            print(f"[{done:3d}/{total} {time.time() - t0:5.0f} s] {describe(prob):<28} "
                  f"torch/{name:<15} {r['status']:<5} {tail}", file=sys.stderr)
    if out and out is not sys.stdout:
        out.close()
    print(f"bench_torch: {done} runs in {time.time() - t0:.1f} s, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
