#!/usr/bin/env python3
"""check_bench_attention.py — runs bench_attention on a tiny grid and checks what it writes:
every line valid JSON with the documented keys, one line per (problem, implementation), PASS runs
timed with consistent statistics and the FLOP model of attn_problem_flops, SKIP runs with a reason,
provenance present, and (on the simulator) the warning that timings are not GPU performance, in
the records and on the terminal. Then a filtered run (--impl, --L, --dtype, --causal, --out -),
and the sparse path (--grid tiny-sparse): example 04's kernels (the grid names them) on problems
with a pattern, their
FLOPs counting only the entries the pattern keeps (counted here independently), the dense
baseline's the dense entries, a kernel that does not serve a pattern skipped with the reason.

    check_bench_attention.py BENCH_BINARY WORK_DIR
Exit 0 when every check passes, 1 otherwise (77 when a gpu build finds no GPU). Standard library.
"""
import json
import os
import re
import subprocess
import sys

KEYS = ["example", "kernel", "kernel_id", "backend", "device", "B", "H", "Lq", "Lk", "D", "dtype",
        "causal", "varlen", "seqlens", "seqlens_k", "status", "note", "max_abs_err", "median_ms",
        "min_ms", "max_ms", "reps", "tflops",
        "gbps", "workspace_bytes", "bench", "impl", "simulated", "timing_note", "flops",
        "bytes_model", "mem_peak_bytes", "mem_model_bytes", "oom", "pattern", "density",
        "speedup_bound", "block_density", "block_fill", "mask_bytes", "spread", "warmup",
        "check_rows", "grid", "commit", "date", "cuda_runtime", "cuda_driver", "cc", "host"]
SPARSE_MARK = "[problems with a pattern]"  # --list's mark of a sparse example's kernels
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
    if p.returncode == 77:
        print(p.stderr.strip())
        sys.exit(77)
    return p


def entries(r):
    L, causal = r["Lq"], r["causal"]
    return r["B"] * r["H"] * (L * (L + 1) // 2 if causal else L * L)


def keeps(spec, i, j):
    """The two patterns of the tiny-sparse grid, written out from their definitions (Lq = Lk)."""
    kind, _, value = spec.partition(":")
    n = int(value.split("=")[1])
    if kind == "window":
        return abs(i - j) <= n
    if kind == "strided":
        return j <= i and ((i - j) % n == 0 or i - n < j)
    raise ValueError(spec)


def pattern_entries(r):
    L = r["Lq"]
    return r["B"] * r["H"] * sum(keeps(r["pattern"], i, j) for i in range(L) for j in range(L)
                                 if not r["causal"] or j <= i)


def check_record(r, where):
    missing = [k for k in KEYS if k not in r]
    check(not missing, f"{where}: keys missing: {missing}")
    if missing:
        return
    check(r["status"] in ("PASS", "SKIP"), f"{where}: status {r['status']} ({r['note']})")
    check(r["varlen"] is False and r["seqlens"] is None and r["seqlens_k"] is None,
          f"{where}: a dense problem says varlen false, seqlens null")
    check(r["impl"] == r["example"] + "/" + r["kernel"], f"{where}: impl {r['impl']}")
    sparse = r["pattern"] != "dense" and r["kernel"] != "dense_fa2"
    want = pattern_entries(r) if sparse else entries(r)
    check(r["flops"] == 4 * want * r["D"],
          f"{where}: flops {r['flops']}, expected {4 * want * r['D']}")
    if r["pattern"] != "dense":
        kept = pattern_entries(r)
        check(abs(r["density"] - kept / (r["B"] * r["Lq"] * r["Lk"])) < 1e-5,
              f"{where}: density {r['density']}")
        check(abs(r["speedup_bound"] - entries(r) / kept) < 1e-4 * entries(r) / kept,
              f"{where}: speedup_bound {r['speedup_bound']}")
        check(0 < r["block_density"] <= 1 and r["mask_bytes"] > 0, f"{where}: block mask stats")
    else:
        check(r["density"] is None and r["speedup_bound"] is None, f"{where}: dense with a density")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["date"]) is not None,
          f"{where}: date {r['date']}")
    check(r["commit"] not in ("", None) and r["device"] and r["cuda_runtime"], f"{where}: provenance")
    if r["simulated"]:
        check("not GPU performance" in r["timing_note"], f"{where}: no simulator warning")
    if r["status"] == "PASS":
        check(r["reps"] >= 1 and 0 < r["min_ms"] <= r["median_ms"] <= r["max_ms"],
              f"{where}: timing statistics")
        tflops = r["flops"] / (r["median_ms"] * 1e-3) * 1e-12
        check(abs(r["tflops"] - tflops) <= 1e-3 * tflops, f"{where}: TFLOP/s {r['tflops']}")
        check(r["max_abs_err"] is not None, f"{where}: not checked")
        io = ELEM[r["dtype"]] * 2 * r["B"] * r["H"] * r["D"] * (r["Lq"] + r["Lk"])
        check(r["mem_model_bytes"] >= io + r["workspace_bytes"], f"{where}: memory model")
        if r["simulated"]:  # the simulator counts exactly what is allocated
            check(r["mem_peak_bytes"] == r["mem_model_bytes"],
                  f"{where}: peak {r['mem_peak_bytes']} != model {r['mem_model_bytes']}")
    else:
        check(r["note"] != "" and r["median_ms"] is None and r["reps"] == 0,
              f"{where}: a SKIP needs a reason and no timing")


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "tiny.jsonl")
    listed = [line for line in run(binary, "--list").stdout.splitlines() if line]
    impls = [line.split()[0] for line in listed if SPARSE_MARK not in line]
    sparse_impls = [line.split()[0] for line in listed if SPARSE_MARK in line]
    check(len(impls) >= 5, f"--list shows {len(impls)} dense implementations")
    check(len(sparse_impls) >= 4, f"--list shows {len(sparse_impls)} sparse implementations")

    p = run(binary, "--grid", "tiny", "--out", out)
    check(p.returncode == 0, f"tiny grid exit status {p.returncode}: {p.stderr[-2000:]}")
    with open(out) as f:
        recs = [json.loads(line) for line in f]
    problems = {(r["B"], r["H"], r["Lq"], r["D"], r["dtype"], r["causal"]) for r in recs}
    check(len(problems) == 8, f"{len(problems)} problems in the tiny grid, expected 8")
    check(len(recs) == len(problems) * len(impls), f"{len(recs)} records")
    for n, r in enumerate(recs):
        check_record(r, f"{out}:{n + 1}")
    passed = {r["impl"] for r in recs if r["status"] == "PASS"}
    check(passed == set(impls), f"implementations that passed: {sorted(passed)}")
    if recs and recs[0]["simulated"]:
        check("not GPU performance" in p.stdout and "not GPU performance" in p.stderr,
              "the simulator warning is not printed")
    total = len(problems) * len(impls)
    check(re.search(rf"\[\s*{total}/{total}", p.stderr) is not None, "no progress lines on stderr")

    # B and H named too: the default grid's differ by backend (an H200 ran H 16 and 32 here)
    p = run(binary, "--impl", "fa2_mma", "--B", "1", "--H", "2", "--L", "24", "--D", "64", "--dtype",
            "bf16", "--causal", "yes", "--out", "-")
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    check(p.returncode == 0 and len(lines) == 1, f"filtered run: {p.returncode}, {len(lines)} lines")
    if lines:
        r = lines[0]
        check((r["kernel"], r["Lq"], r["dtype"], r["causal"], r["status"]) ==
              ("fa2_mma", 24, "bf16", True, "PASS"), f"filtered run record {r}")
        check_record(r, "filtered run")

    sparse_out = os.path.join(work, "tiny_sparse.jsonl")
    p = run(binary, "--grid", "tiny-sparse", "--out", sparse_out)
    check(p.returncode == 0, f"tiny-sparse exit status {p.returncode}: {p.stderr[-2000:]}")
    with open(sparse_out) as f:
        srecs = [json.loads(line) for line in f]
    sproblems = {(r["Lq"], r["causal"], r["pattern"]) for r in srecs}
    check(len(sproblems) == 8, f"{len(sproblems)} problems in tiny-sparse, expected 8")
    # the grid names example 04's kernels (example 06's serve the same patterns: not rerun here)
    grid_impls = [i for i in sparse_impls if i.startswith("04_sparse_patterns/")]
    check(len(srecs) == len(sproblems) * len(grid_impls), f"{len(srecs)} sparse records")
    for n, r in enumerate(srecs):
        check_record(r, f"{sparse_out}:{n + 1}")
        if r["kernel"] == "window":
            check((r["status"] == "SKIP") == r["pattern"].startswith("strided")
                  and (r["status"] == "PASS" or "serves patterns made of window" in r["note"]),
                  f"{sparse_out}:{n + 1}: window kernel on {r['pattern']}: {r['status']}")
    passed = {r["impl"] for r in srecs if r["status"] == "PASS"}
    check(passed == set(grid_impls), f"sparse implementations that passed: {sorted(passed)}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(recs) + len(srecs) + 1} records checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
