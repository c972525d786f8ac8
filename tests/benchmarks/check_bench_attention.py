#!/usr/bin/env python3
"""check_bench_attention.py — runs bench_attention on a tiny grid and checks what it writes:
every line valid JSON with the documented keys, one line per (problem, implementation), PASS runs
timed with consistent statistics and the FLOP model of attn_problem_flops, SKIP runs with a reason,
provenance present, and (on the simulator) the warning that timings are not GPU performance, in
the records and on the terminal. Then a filtered run (--impl, --L, --dtype, --causal, --out -).

    check_bench_attention.py BENCH_BINARY WORK_DIR
Exit 0 when every check passes, 1 otherwise (77 when a gpu build finds no GPU). Standard library.
"""
import json
import os
import re
import subprocess
import sys

KEYS = ["example", "kernel", "kernel_id", "backend", "device", "B", "H", "Lq", "Lk", "D", "dtype",
        "causal", "varlen", "seqlens", "seqlens_k", "status", "note", "max_abs_err", "median_ms", "min_ms", "max_ms", "reps", "tflops",
        "gbps", "workspace_bytes", "bench", "impl", "simulated", "timing_note", "flops",
        "bytes_model", "mem_peak_bytes", "mem_model_bytes", "oom", "pattern", "spread", "warmup", "check_rows", "grid",
        "commit", "date", "cuda_runtime", "cuda_driver", "cc", "host"]
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


def check_record(r, where):
    missing = [k for k in KEYS if k not in r]
    check(not missing, f"{where}: keys missing: {missing}")
    if missing:
        return
    check(r["status"] in ("PASS", "SKIP"), f"{where}: status {r['status']} ({r['note']})")
    check(r["varlen"] is False and r["seqlens"] is None and r["seqlens_k"] is None,
          f"{where}: a dense problem says varlen false, seqlens null")
    check(r["impl"] == r["example"] + "/" + r["kernel"], f"{where}: impl {r['impl']}")
    check(r["flops"] == 4 * entries(r) * r["D"], f"{where}: flops {r['flops']}")
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
    impls = [line.split()[0] for line in run(binary, "--list").stdout.splitlines() if line]
    check(len(impls) >= 5, f"--list shows {len(impls)} implementations")

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

    p = run(binary, "--impl", "fa2_mma", "--L", "24", "--D", "64", "--dtype", "bf16", "--causal",
            "yes", "--out", "-")
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    check(p.returncode == 0 and len(lines) == 1, f"filtered run: {p.returncode}, {len(lines)} lines")
    if lines:
        r = lines[0]
        check((r["kernel"], r["Lq"], r["dtype"], r["causal"], r["status"]) ==
              ("fa2_mma", 24, "bf16", True, "PASS"), f"filtered run record {r}")
        check_record(r, "filtered run")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(recs) + 1} records checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
