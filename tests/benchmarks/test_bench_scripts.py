#!/usr/bin/env python3
"""test_bench_scripts.py — the benchmark's Python scripts on small inputs (CTest python.bench_scripts):

  * update_tables.py makes the bench tables from a generated results tree (one GPU-like device
    with an implementation and torch/sdpa_flash: the ratio column), and --check sees a stale README;
  * plot.py draws PNG + SVG figures from the committed simulator results;
  * memory_analysis.py writes its table and plot, and adds measured points from a results folder;
  * bench_torch.py: usage errors exit 2; without a GPU it prints one line and exits 77, with one
    it runs a tiny problem and writes valid records.
The generated records' numbers are made up for the test (they are written to a temporary folder,
never to benchmarks/results).

    test_bench_scripts.py WORK_DIR        (run with the venv's python: matplotlib, torch)
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
SIM = os.path.join(BENCH, "results", "cudasim-AMD-EPYC-2-cores")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)


def record(impl, L, tflops, status="PASS"):
    ms = 4.0 * 16 * L * L * 128 / (tflops * 1e12) * 1e3 if status == "PASS" else None
    example, kernel = impl.split("/")
    return {"example": example, "kernel": kernel, "impl": impl, "device": "Test GPU",
            "B": 1, "H": 16, "Lq": L, "Lk": L, "D": 128, "dtype": "f16", "causal": False,
            "status": status, "note": "", "median_ms": ms, "tflops": tflops if ms else None,
            "simulated": False, "mem_peak_bytes": 1 << 26 if ms else None,
            "mem_model_bytes": 1 << 26, "oom": False, "commit": "abc1234",
            "date": "2026-01-01T00:00:00Z", "cuda_runtime": "13.0", "cuda_driver": "13.0"}


def test_update_tables(work):
    tree = os.path.join(work, "tree")
    dev = os.path.join(tree, "benchmarks", "results", "Test-GPU")
    os.makedirs(dev, exist_ok=True)
    with open(os.path.join(dev, "bench_attention.jsonl"), "w") as f:
        for L, t in ((1024, 100.0), (2048, 150.0)):
            f.write(json.dumps(record("03_flash_attention_v2/fa2_mma", L, t)) + "\n")
    with open(os.path.join(dev, "bench_torch.jsonl"), "w") as f:
        f.write(json.dumps(record("torch/sdpa_flash", 1024, 200.0)) + "\n")
        f.write(json.dumps(record("torch/sdpa_flash", 2048, 300.0)) + "\n")
        f.write(json.dumps(record("torch/naive", 2048, 0, status="ERROR") | {"oom": True}) + "\n")
    readme = os.path.join(tree, "README.md")
    with open(readme, "w") as f:
        f.write("# t\n<!-- results:bench -->\nstale\n<!-- /results:bench -->\n"
                "<!-- results:bench_memory -->\n<!-- /results:bench_memory -->\n")
    script = os.path.join(BENCH, "update_tables.py")
    p = run(script, "--root", tree, "--readme", "README.md", "--check")
    check(p.returncode == 1, f"--check on a stale README: exit {p.returncode}")
    p = run(script, "--root", tree, "--readme", "README.md")
    check(p.returncode == 0, f"update_tables: {p.stdout}{p.stderr}")
    text = open(readme).read()
    for want in ("| 03_flash_attention_v2/fa2_mma | 100.0 (0.50×) | 150.0 (0.50×) |",
                 "| torch/naive | – | OOM |", "commit abc1234", "L=2048", "64.0 MiB"):
        check(want in text, f"update_tables: '{want}' not in the table:\n{text}")
    p = run(script, "--root", tree, "--readme", "README.md", "--check")
    check(p.returncode == 0, f"--check after an update: exit {p.returncode}")


def test_plot(work):
    out = os.path.join(work, "plots")
    shutil.rmtree(out, ignore_errors=True)
    p = run(os.path.join(BENCH, "plot.py"), SIM, "--out", out)
    check(p.returncode == 0, f"plot.py: {p.stdout}{p.stderr}")
    files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    pngs = [f for f in files if f.endswith(".png")]
    check(len(pngs) >= 6 and len(files) == 2 * len(pngs), f"plot.py wrote {files}")
    check(all(os.path.getsize(os.path.join(out, f)) > 1000 for f in files), "empty figure")
    p = run(os.path.join(BENCH, "plot.py"), os.path.join(work, "nothing-here"))
    check(p.returncode == 2 and "error: no benchmark records" in p.stderr, "plot.py without data")


def test_memory_analysis(work):
    out = os.path.join(work, "memory")
    p = run(os.path.join(BENCH, "memory_analysis.py"), "--results", SIM, "--out", out)
    check(p.returncode == 0, f"memory_analysis.py: {p.stdout}{p.stderr}")
    check(p.stdout.count("| 16 | 128 |") == 8 and "| 32 | 64 | 128k |" in p.stdout,
          "memory table rows")
    check("measured 01_attention_basics/naive" in p.stdout, "measured points not listed")
    for ext in ("png", "svg"):
        check(os.path.isfile(os.path.join(out, "memory_model." + ext)), f"no memory_model.{ext}")


def test_bench_torch(work):
    script = os.path.join(BENCH, "bench_torch.py")
    for bad in (["--impl", "nope"], ["--dtype", "f8"], ["--pattern", "window"], ["--L", "0"]):
        p = run(script, *bad)
        check(p.returncode == 2 and "error:" in p.stderr, f"bench_torch {bad}: exit {p.returncode}")
    import torch
    out = os.path.join(work, "torch.jsonl")
    p = run(script, "--L", "256", "--D", "64", "--H", "2", "--dtype", "f16", "--causal", "both",
            "--impl", "sdpa_math,naive", "--out", out)
    if not torch.cuda.is_available():
        lines = p.stdout.strip().splitlines()
        check(p.returncode == 77 and len(lines) == 1 and lines[0].startswith("SKIP: no CUDA GPU"),
              f"bench_torch without a GPU: exit {p.returncode}, {p.stdout!r}")
        return
    check(p.returncode == 0, f"bench_torch on a GPU: exit {p.returncode}: {p.stderr[-2000:]}")
    recs = [json.loads(line) for line in open(out)]
    check(len(recs) == 4 and all(r["status"] == "PASS" and r["median_ms"] > 0 for r in recs),
          f"bench_torch records: {recs}")


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    for test in (test_update_tables, test_plot, test_memory_analysis, test_bench_torch):
        before = len(failures)
        test(work)
        print(f"{test.__name__}: {'ok' if len(failures) == before else 'FAILED'}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
