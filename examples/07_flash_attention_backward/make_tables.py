#!/usr/bin/env python3
"""make_tables.py — every table README.md quotes, regenerated from the committed result files
in results/ (each between <!-- KIND:NAME --> markers), and the runs that make those files:

  profile:backward  results/profile.jsonl    the simulator's profile (--profile, sim-check build:
                                             common/cudasim/README.md, "The profile") of each
                                             version against the IO model below
  table:tolerance   results/tolerance.txt    tests/unit/test_tolerance_backward.c --full: the
                                             fp32 tolerance's margins (reference_backward.c)
  table:times       results/times.jsonl      the simulator's timings of every version (CPU time,
                                             not GPU performance)

The IO model: the FlashAttention-2 backward's memory traffic written out for this example's tiles.

The model counts the bytes each kernel asks global memory for (N = L, d = D, e = bytes per
element, B = H = 1, N a multiple of the tiles, T = (query tile, key tile) pairs visited):

  preprocess  O, dO read once (2 N d e), D written (4 N); the fp32 dQ accumulator zeroed (4 N d)
  dK/dV pass  K, V read once and dK, dV written once (4 N d e); per visited tile, Q_i, dO_i,
              LSE_i, D_i (2 Br d e + 8 Br) and, with atomics, Br d float adds into dQ (4 Br d)
  dQ pass     Q, dO, LSE, D read once (2 N d e + 8 N), dQ written once (N d e); per visited
              tile, K_j and V_j (2 Bc d e)
  convert     the accumulator read, dQ written (4 N d + N d e)
  naive       no tiles: per (row, key) q_i, k_j, dO_i, v_j by warp requests, P and dS written
              to and read back from global memory: Theta(N^2 d)
  block mask  version 5 also reads, per warp and pass, its block's two counts and the index of
              each tile it visits
  top-k       per selected (query, key) entry: the key's k and v rows (one lane each), k again
              for dQ, and 2 D float atomics into the dK, dV accumulators; per query its q, dO,
              LSE, D, slots and dQ; the accumulators zeroed and converted (no tiles: no reuse)

so a flash version moves N d (the inputs and gradients once) plus T (2 Br d e + ...) ~ N^2 d /
Bc: FlashAttention's Theta(N^2 d^2 / M) for M = Bc d elements of shared memory per block, the
same order as its forward (Dao et al. 2022, Theorem 5; Dao 2023, Algorithm 2).

    python3 examples/07_flash_attention_backward/make_tables.py --profile build/sim-check
        profile the problems of RUNS; writes results/profile.jsonl
    python3 examples/07_flash_attention_backward/make_tables.py --tolerance build/sim
        runs unit_tolerance_backward_sim --full; writes results/tolerance.txt
    python3 examples/07_flash_attention_backward/make_tables.py --times build/sim
        times every version on TIMES' problems (median of 3); writes results/times.jsonl
    python3 examples/07_flash_attention_backward/make_tables.py           README.md's tables
    python3 examples/07_flash_attention_backward/make_tables.py --check   exit 1 if one is out
                                                        of date (CTest example07.tables_up_to_date)
Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "profile.jsonl")
TOLERANCE = os.path.join(HERE, "results", "tolerance.txt")
TIMES = os.path.join(HERE, "results", "times.jsonl")
README = os.path.join(HERE, "README.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
import readme_tables  # noqa: E402
ELT = {"f32": 4, "f16": 2, "bf16": 2}
BR = BC = 64  # versions 3-5
F32_BR = F32_BC = 32  # version 2

# (label, arguments): each run profiles every kernel that serves the problem. Version 1 only up
# to L = 512: its Theta(N^2 d) requests take the instrumented simulator tens of minutes beyond.
F16 = ["--dtype", "f16", "-B", "1", "-H", "1", "-D", "64"]
RUNS = [(f"f32 L={n}", ["-B", "1", "-H", "1", "-L", str(n), "-D", "64"]) for n in (256, 512)]
RUNS += [("f32 L=1024", ["-B", "1", "-H", "1", "-L", "1024", "-D", "64", "--kernel", "2"])]
RUNS += [(f"f16 L={n}", F16 + ["-L", str(n)]) for n in (256, 512, 1024)]
RUNS += [("f16 L=1024 causal", F16 + ["-L", "1024", "--causal"]),
         ("f16 L=1024 window:w=64", F16 + ["-L", "1024", "--pattern", "window:w=64"]),
         ("f16 L=1024 top-k 64", F16 + ["-L", "1024", "--topk", "64"])]


def program(build, name="flash_bwd_sim", where=("examples",)):
    exe = os.path.join(build, *where, "07_flash_attention_backward", name)
    if not os.access(exe, os.X_OK):
        sys.exit(f"error: {exe} is missing: build that tree first (--profile: cmake --preset "
                 "sim-check && cmake --build --preset sim-check; --tolerance, --times: the sim "
                 "preset)")
    return exe


def read_records():
    if not os.path.exists(RESULTS):
        return []
    with open(RESULTS) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_records(recs):
    """In the order of RUNS, then of the kernels' ids (one file, rewritten after every run, so
    that an interrupted --profile keeps what it measured)."""
    order = {label: n for n, (label, _) in enumerate(RUNS)}
    recs = sorted(recs, key=lambda r: (order.get(r["label"], len(order)), r["kernel_id"]))
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        for r in recs:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def run_profile(build, only=None):
    exe = program(build)
    for label, args in RUNS:
        if only and label not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.jsonl")
            start = time.time()
            # the checkers off (the profile alone observes the stream); no watchdog: a loaded
            # machine can leave a block without progress for seconds
            proc = subprocess.run([exe, "--profile", "--quiet", "--json", out] + args,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, CUDASIM_CHECK="0", CUDASIM_WATCHDOG="0"))
            if proc.returncode != 0:
                sys.exit(f"error: {exe} {' '.join(args)} exited {proc.returncode}: "
                         f"{proc.stderr.strip()[:2000]}")
            new = []
            with open(out) as f:
                for line in f:
                    r = json.loads(line)
                    if r.get("profile"):
                        keep = ("kernel", "kernel_id", "dtype", "Lq", "Lk", "D", "causal",
                                "status", "pattern", "topk", "profile")
                        rec = {k: r.get(k) for k in keep}
                        rec["label"] = label
                        new.append(rec)
        write_records([r for r in read_records() if r["label"] != label] + new)
        print(f"{time.time() - start:7.1f} s  {label}", flush=True)


# ---- the model --------------------------------------------------------------------------------

def visited_tiles(n, causal, br, bc, listed=None):
    """(query tile, key tile) pairs a dense (causal) backward visits: some row sees some key."""
    if listed is not None:
        return listed
    t = 0
    for i0 in range(0, n, br):
        last = min(i0 + br, n) - 1
        keys = min(n, last + 1) if causal else n  # Lq = Lk: row i sees keys 0..i
        t += (keys + bc - 1) // bc
    return t


def window_tiles(n, w, b=64):
    """Tiles of a window:w pattern's block mask (64 x 64): some |i - j| <= w inside."""
    t = 0
    for i0 in range(0, n, b):
        for j0 in range(0, n, b):
            lo, hi = j0 - (i0 + b - 1), (j0 + b - 1) - i0  # the range of j - i in the tile
            t += lo <= w and hi >= -w
    return t


def model_bytes(kernel, n, d, e, causal, tiles=None, topk=0):
    """The bytes kernel asks global memory for (None: no model, e.g. top-k's data-dependent
    gather)."""
    if kernel == "naive":  # dense, non-causal only (its loops skip the masked keys' loads)
        if causal:
            return None
        p_ds = n * n * ((2 * 4 + 2 * 128) * d + 2 * 128) / 32 + 32 * n  # 4 warps: lse, D
        dq = n * n * (d / 32) * (4 + 128) + 4 * n * d
        dkdv = n * n * (d / 32) * 2 * (4 + 128) + 8 * n * d
        return 2 * n * d * 4 + 4 * n + p_ds + dq + dkdv
    if kernel in ("fa2_fp32", "fa2_mma"):  # atomics: preprocess + zero, dK/dV pass, convert
        br = F32_BR if kernel == "fa2_fp32" else BR
        bc = F32_BC if kernel == "fa2_fp32" else BC
        t = visited_tiles(n, causal, br, bc, tiles)
        return (2 * n * d * e + 4 * n + 4 * n * d + 4 * n * d * e +
                t * (2 * br * d * e + 8 * br + 4 * br * d) + 4 * n * d + n * d * e)
    if kernel in ("fa2_mma_det", "block_sparse"):  # preprocess, dK/dV pass, dQ pass
        t = visited_tiles(n, causal, BR, BC, tiles)
        total = (2 * n * d * e + 4 * n + 4 * n * d * e + t * (2 * BR * d * e + 8 * BR) +
                 2 * n * d * e + 8 * n + n * d * e + t * 2 * BC * d * e)
        if kernel == "block_sparse":  # each warp reads its block's two counts and each index
            total += 2 * 4 * (8 * (n // BR) + 4 * t)
        return total
    if kernel == "topk" and topk:  # per selected entry: k, v rows, k again, 2 D float atomics
        entries = n * topk
        per_row = 2 * d * e + 8 + 4 * topk + d * e  # q, dO; LSE, D; the slots; dQ written
        return (entries * (3 * d * e + 8 * d) + n * per_row + 2 * n * d * e + 4 * n +
                2 * n * d * 4 + 2 * (n * d * 4 + n * d * e))  # preprocess, zeroing, converts
    return None


# ---- the table --------------------------------------------------------------------------------

# The simulator's timings: (label, arguments), every version that serves the problem.
TIMES_RUNS = [("f32 L=256 causal", ["-B", "1", "-H", "2", "-L", "256", "-D", "64", "--causal"]),
              ("f16 L=256 causal", ["-B", "1", "-H", "2", "-L", "256", "-D", "64", "--causal",
                                    "--dtype", "f16"]),
              ("f16 L=512 window:w=64", ["-B", "1", "-H", "2", "-L", "512", "-D", "64",
                                         "--dtype", "f16", "--pattern", "window:w=64"]),
              ("f16 L=256 top-k 32 causal", ["-B", "1", "-H", "2", "-L", "256", "-D", "64",
                                             "--causal", "--dtype", "f16", "--topk", "32"])]


def run_times(build):
    exe = program(build)
    recs = []
    for label, args in TIMES_RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.jsonl")
            proc = subprocess.run([exe, "--quiet", "--reps", "3", "--json", out] + args,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, CUDASIM_THREADS="1"))
            if proc.returncode != 0:
                sys.exit(f"error: {exe} {' '.join(args)} exited {proc.returncode}")
            with open(out) as f:
                for line in f:
                    r = json.loads(line)
                    if r["status"] == "PASS":
                        recs.append({"label": label, "kernel": r["kernel"],
                                     "stage": r.get("stage"), "median_ms": r["median_ms"],
                                     "min_ms": r["min_ms"], "max_ms": r["max_ms"]})
        print(f"timed {label}", flush=True)
    import platform
    meta = {"machine": f"{os.cpu_count()} cores, {platform.machine()}",
            "date": time.strftime("%Y-%m-%d"), "threads": 1, "load": os.getloadavg()[0]}
    with open(TIMES, "w") as f:
        f.write(json.dumps({"meta": meta}) + "\n")
        for r in recs:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def run_tolerance(build):
    exe = os.path.join(build, "tests", "unit", "unit_tolerance_backward_sim")
    if not os.access(exe, os.X_OK):
        sys.exit(f"error: {exe} is missing: cmake --preset sim && cmake --build --preset sim")
    proc = subprocess.run([exe, "--full"], capture_output=True, text=True)
    with open(TOLERANCE, "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"error: {exe} --full exited {proc.returncode} (results/tolerance.txt: its output)")


def mb(x):
    return f"{x / 1e6:.3g}"


def times_table():
    if not os.path.exists(TIMES):
        return "(no records: run `python3 examples/07_flash_attention_backward/make_tables.py --times build/sim`)\n"
    with open(TIMES) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    meta, recs = lines[0]["meta"], lines[1:]
    out = ["| problem | kernel | stage | median ms | min ms | max ms |", "|---|---|---|---:|---:|---:|"]
    for r in recs:
        out.append(f"| {r['label']} | {r['kernel']} | {r['stage']} | {r['median_ms']:.0f} | "
                   f"{r['min_ms']:.0f} | {r['max_ms']:.0f} |")
    out.append("")
    out.append(f"CPU simulator timings, not GPU performance: B = 1, H = 2, D = 64, median of 3 "
               f"launches on one OS thread (`CUDASIM_THREADS=1`), {meta['machine']}, shared "
               f"(load average {meta['load']:.0f} at the start), {meta['date']}. They rank the "
               "work a version does on a CPU, nothing about a GPU.")
    return "\n".join(out) + "\n"


def tolerance_table():
    if not os.path.exists(TOLERANCE):
        return "(no records: run `python3 examples/07_flash_attention_backward/make_tables.py --tolerance build/sim`)\n"
    rows = []
    with open(TOLERANCE) as f:
        for line in f:
            m = re.match(r"\s*(\d+)\s+(\d+)\s+([\d.]+)\s+(causal)?\s*\|\s*(\S+)\s+(\S+)\s*\|"
                         r"\s*(\S+)\s+(\S+)\s*(FAIL)?", line)
            if m:
                rows.append(m.groups())
    out = ["| D | L | amplitude | causal | max err (correct) | margin | wrong scale: err / tol "
           "| last key dropped: err / tol |", "|---:|---:|---:|---|---:|---:|---:|---:|"]
    for d, l, a, causal, err, margin, scale, drop, fail in rows:
        if l == "1":  # one key: the backward is exact (P = 1, dS = 0), nothing to scale or drop
            continue
        out.append(f"| {d} | {l} | {a} | {'yes' if causal else 'no'} | {err} | {margin} | "
                   f"{scale} | {drop} |" + (" FAIL |" if fail else ""))
    out.append("")
    out.append("`tests/unit/test_tolerance_backward.c --full` (results/tolerance.txt): the fp32 "
               "backward of attn_reference_backward_lowp against attn_reference_backward, "
               "B = H = 1, every element of dQ, "
               "dK and dV. *margin*: the smallest tolerance / error over all elements (required: "
               ">= 4); the wrong backwards must exceed their tolerance somewhere (> 1; at "
               "amplitude 10 the last key weighs nothing). L = 1, where a single key makes every "
               "gradient exactly 0, passes too and is left out of the table.")
    return "\n".join(out) + "\n"


def table():
    recs = read_records()
    if not recs:
        return "(no records: run `python3 examples/07_flash_attention_backward/make_tables.py --profile build/sim-check`)\n"
    out = ["| problem | kernel | asked (MB) | model (MB) | sectors x 32 (MB) | DRAM (MB) | "
           "H100 bound (µs) |", "|---|---|---|---|---|---|---|"]
    for r in recs:
        p, n, d, e = r["profile"], r["Lq"], r["D"], ELT[r["dtype"]]
        tiles = None
        if r.get("pattern", "").startswith("window:w="):
            tiles = window_tiles(n, int(r["pattern"].split("=")[1]))
        model = None if r["kernel"].startswith("fwd_") else \
            model_bytes(r["kernel"], n, d, e, r["causal"], tiles, r.get("topk") or 0)
        model_text = "–" if model is None else (
            f"{mb(model)}" + ("" if abs(model - p["global_bytes"]) < 0.5 else
                              f" ({p['global_bytes'] / model:.3f}x)"))
        out.append(f"| {r['label']} | {r['kernel']} | {mb(p['global_bytes'])} | {model_text} | "
                   f"{mb(32 * p['global_sectors'])} | {mb(p['dram_bytes'])} | "
                   f"{p['bound_h100_s'] * 1e6:.3g} |")
    out.append("")
    out.append("B = H = 1, D = 64. *asked*: the bytes the kernels' lanes ask global memory for "
               "(every load, store and atomic; a byte several lanes of one request read counts "
               "once), summed over a version's launches; *model*: the count above (a ratio "
               "where it differs); *sectors x 32*: the 32-byte sectors those requests touch, "
               "what the FlashAttention paper's model counts as HBM accesses; *DRAM*: what "
               "reaches DRAM under the profile's 50 MiB L2 model; *H100 bound*: the profile's "
               "roofline lower bound (a model, not a measurement). The forward (fwd_*, "
               "examples 03-05's kernels) for comparison.")
    return "\n".join(out) + "\n"


BLOCKS = {"profile:backward": table, "table:tolerance": tolerance_table, "table:times": times_table}


def update(check):
    changed, _ = readme_tables.update(README, BLOCKS, check)
    if changed and check:
        print("out of date: examples/07_flash_attention_backward/README.md (python3 "
              "examples/07_flash_attention_backward/make_tables.py)")
        return 1
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", metavar="BUILD", help="profile RUNS (a sim-check build)")
    ap.add_argument("--tolerance", metavar="BUILD", help="unit_tolerance_backward --full (sim)")
    ap.add_argument("--times", metavar="BUILD", help="time TIMES_RUNS (a sim build)")
    ap.add_argument("--only", help="with --profile: these labels of RUNS (comma-separated)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a README table is stale")
    args = ap.parse_args(argv)
    if args.profile:
        run_profile(args.profile, args.only.split(",") if args.only else None)
    if args.tolerance:
        run_tolerance(args.tolerance)
    if args.times:
        run_times(args.times)
    return update(args.check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
