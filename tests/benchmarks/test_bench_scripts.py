#!/usr/bin/env python3
"""test_bench_scripts.py — the benchmark's Python scripts on small inputs (CTest python.bench_scripts):

  * update_tables.py makes the bench tables from a generated results tree (one GPU-like device
    with an implementation and torch/sdpa_flash: the ratio column), and --check sees a stale README;
  * update_tables.py makes Example 04's table (results:sparse) from a generated fixture: a
    GPU-like device with records of the sparse grid (speedups, % of ideal, FlexAttention ratio,
    the dense sdpa_flash, the targets) and a simulated one (labelled as such, no targets);
  * plot.py draws the sparse speedup figure from the fixture (--out), and refuses a folder
    without records (the committed simulator results' figures: python.figures_reproduce);
  * memory_analysis.py writes its table and plot, and adds measured points from a results folder;
  * bench_torch.py: usage errors exit 2; --grid sparse --dry-run lists the problems of the sparse
    grid, --grid seed-table those of the course's comparison table, --grid seed-128k those of the
    128K table; its patterns (Pattern: predicate, FlexAttention mask_mod, entry counts) equal
    sparse_patterns.pattern_mask on small problems of every kind; torch_sparse's CSR (built in
    chunks of rows) and its CSR attention (sampled_addmm, row softmax, sparse x dense) equal
    masked attention in float64 on the CPU; without a GPU it prints one line and exits 77, with
    one it runs a tiny problem and writes valid records.
The generated records' numbers are made up for the test (they are written to a temporary folder,
never to benchmarks/results).

    test_bench_scripts.py WORK_DIR        (run with the venv's python: matplotlib, torch)
"""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import types

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
SIM = os.path.join(BENCH, "results", "cudasim-AMD-EPYC-2-cores")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from preload import python_command  # noqa: E402 (a script's process: tests/python/preload.py)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run(python_command() + list(args), capture_output=True, text=True, timeout=600)


def bench_torch_module():
    """benchmarks/bench_torch.py loaded as a module (once)."""
    if "bench_torch" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_torch",
                                                      os.path.join(BENCH, "bench_torch.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["bench_torch"] = module
    return sys.modules["bench_torch"]


def run_bench_torch(*args):
    """bench_torch.py's main(args) in this process, as run() reports a run (exit status, stdout,
    stderr; argparse's exit 2 and a SKIP's exit 77 included): a process each would spend seconds
    importing PyTorch."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = bench_torch_module().main(list(args))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return types.SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


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
    text = update_readme(tree, "# t\n<!-- results:bench -->\nstale\n<!-- /results:bench -->\n"
                         "<!-- results:bench_memory -->\n<!-- /results:bench_memory -->\n", "bench")
    for want in ("| 03_flash_attention_v2/fa2_mma | 100.0 (0.50×) | 150.0 (0.50×) |",
                 "| torch/naive | – | OOM |", "commit abc1234", "L=2048", "64.0 MiB"):
        check(want in text, f"update_tables: '{want}' not in the table:\n{text}")


def update_readme(tree, text, what):
    """Writes tree/README.md, checks that update_tables.py --check sees it stale, updates it,
    checks that --check is then happy; returns the updated README."""
    readme = os.path.join(tree, "README.md")
    with open(readme, "w") as f:
        f.write(text)
    script = os.path.join(BENCH, "update_tables.py")
    p = run(script, "--root", tree, "--readme", "README.md", "--check")
    check(p.returncode == 1, f"{what}: --check on a stale README: exit {p.returncode}")
    p = run(script, "--root", tree, "--readme", "README.md")
    check(p.returncode == 0, f"{what}: update_tables: {p.stdout}{p.stderr}")
    p = run(script, "--root", tree, "--readme", "README.md", "--check")
    check(p.returncode == 0, f"{what}: --check after an update: exit {p.returncode}")
    return open(readme).read()


def sparse_record(impl, pattern, L, ms, causal=False, dtype="f16", status="PASS", simulated=False,
                  density=None, bound=None):
    """A made-up Example 04 record (the fixture of test_sparse_table; never a real result)."""
    example, kernel = impl.split("/")
    return {"example": example, "kernel": kernel, "impl": impl, "B": 1, "H": 16, "Lq": L, "Lk": L,
            "D": 128, "dtype": dtype, "causal": causal, "status": status, "note": "",
            "median_ms": ms if status == "PASS" else None, "tflops": 1.0, "oom": False,
            "simulated": simulated, "device": "cudasim (CPU simulator)" if simulated else
            "Test GPU", "pattern": pattern, "density": density, "speedup_bound": bound,
            "mem_peak_bytes": None, "mem_model_bytes": 1, "grid": "sparse", "commit": "fix7ure",
            "date": "2026-01-02T00:00:00Z", "cuda_runtime": "13.0", "cuda_driver": "13.0"}


def write_sparse_fixture(tree):
    """benchmarks/results/{Test-GPU,Test-sim}/ with made-up records of the sparse grid."""
    gpu = os.path.join(tree, "benchmarks", "results", "Test-GPU")
    sim = os.path.join(tree, "benchmarks", "results", "Test-sim")
    for d in (gpu, sim):
        os.makedirs(d, exist_ok=True)
    w, bb, cw = "window:w=1199", "bigbird:b=128,r=10,seed=1", "causal_window:w=4096"
    with open(os.path.join(gpu, "bench_attention.jsonl"), "w") as f:
        for rec in [sparse_record("04_sparse_patterns/" + k, w, 4096, t, density=0.5, bound=2.0)
                    for k, t in (("dense_fa2", 10.0), ("block_sparse", 5.5), ("window", 5.0),
                                 ("gather", 40.0))] + [
                    sparse_record("04_sparse_patterns/dense_fa2", bb, 4096, 10.0, density=0.5,
                                  bound=2.0),
                    sparse_record("04_sparse_patterns/block_sparse", bb, 4096, 0, status="FAIL",
                                  density=0.5, bound=2.0),
                    sparse_record("04_sparse_patterns/window", bb, 4096, 0, status="SKIP",
                                  density=0.5, bound=2.0),
                    sparse_record("04_sparse_patterns/dense_fa2", cw, 131072, 1625.0, causal=True,
                                  density=0.0308, bound=16.25),
                    sparse_record("04_sparse_patterns/window", cw, 131072, 125.0, causal=True,
                                  density=0.0308, bound=16.25),
                    sparse_record("04_sparse_patterns/block_sparse", cw, 131072, 130.0,
                                  causal=True, density=0.0308, bound=16.25),
                    sparse_record("03_flash_attention_v2/fa2_mma", "dense", 4096, 9.0)]:
            f.write(json.dumps(rec) + "\n")
    with open(os.path.join(gpu, "bench_torch.jsonl"), "w") as f:
        for rec in (sparse_record("torch/flex", w, 4096, 6.05, density=0.5, bound=2.0),
                    sparse_record("torch/flex", cw, 131072, 104.0, causal=True, density=0.0308,
                                  bound=16.25),
                    sparse_record("torch/sdpa_flash", "dense", 4096, 8.0),
                    sparse_record("torch/sdpa_flash", "dense", 4096, 7.0, dtype="bf16")):
            f.write(json.dumps(rec) + "\n")
    with open(os.path.join(sim, "bench_attention.jsonl"), "w") as f:
        for impl, ms in (("dense_fa2", 300.0), ("block_sparse", 100.0)):
            f.write(json.dumps(sparse_record("04_sparse_patterns/" + impl, "window:w=64", 512, ms,
                                             simulated=True, density=0.236, bound=4.24)) + "\n")
    return gpu


def test_sparse_table(work):
    tree = os.path.join(work, "sparse_tree")
    shutil.rmtree(tree, ignore_errors=True)
    write_sparse_fixture(tree)
    text = update_readme(tree, "# t\n<!-- results:sparse -->\nstale\n<!-- /results:sparse -->\n"
                         "<!-- results:bench -->\n<!-- /results:bench -->\n", "sparse")
    sparse, bench = text.split("<!-- results:bench -->")
    check("| 03_flash_attention_v2/fa2_mma | 1.0 (1.00×) |" in bench and "04_sparse" not in bench,
          f"the bench table keeps the dense records only:\n{bench}")
    check("fa2_mma" not in sparse and "Test-sim" not in bench, "sparse table: dense records")
    text = sparse
    for want in (
            "| window:w=1199 | 4096 | f16 | no | 50 % | 2.00× | 10.0 ms | 5.500 ms, 1.82× (91 % of "
            "ideal) | 5.000 ms, 2.00× | 40.0 ms, 0.25× | 6.050 ms | 1.10× | 8.000 ms |",
            "| bigbird:b=128,r=10,seed=1 | 4096 | f16 | no | 50 % | 2.00× | 10.0 ms | FAIL | — | — "
            "| — | — | 8.000 ms |",
            "| causal_window:w=4096 | 131072 | f16 | yes | 3.08 % | 16.25× | 1625.0 ms | 130.0 ms, "
            "12.50× (77 % of ideal) | 125.0 ms, 13.00× | — | 104.0 ms | 0.80× | — |",
            "| density 50 % at L = 4k vs dense | course bar 1.5×; ours ≥ 90 % of the ideal | "
            "window:w=1199 f16 block_sparse: 1.82× (91 % of 2.00×) |",
            "| density 25 % at L = 8k vs dense | course bar 2.5×; ours ≥ 90 % of the ideal | not "
            "measured |",
            "causal_window:w=4096 f16 block_sparse: 12.50× (77 % of 16.25×); causal_window:w=4096 "
            "f16 window: 13.00× (80 % of 16.25×) |",
            "| at least as fast (≥ 1.00×) | 0.80×–1.10× over 2 problems |",
            "**Test-sim** — cudasim (CPU simulator); commit fix7ure",
            "CPU simulator timings (median ms): they measure the simulator, not GPU performance.",
            "| window:w=64 | 512 | f16 | no | 23.6 % | 4.24× | 300.0 ms | 100.0 ms, 3.00× (71 % of "
            "ideal) |"):
        check(want in text, f"sparse table: '{want}' not in:\n{text}")
    check(text.count("| target | goal | measured |") == 1, "targets: for the GPU device only")
    check("No GPU results yet" not in text, "sparse table: GPU device")
    shutil.rmtree(os.path.join(tree, "benchmarks", "results", "Test-GPU"))
    run(os.path.join(BENCH, "update_tables.py"), "--root", tree, "--readme", "README.md")
    check("No GPU results yet" in open(os.path.join(tree, "README.md")).read(),
          "sparse table without a GPU device")


def test_plot(work):
    # plot.py on the committed simulator results: python.figures_reproduce draws them again
    # (benchmarks/figures.py) and compares each with the committed figure
    p = run(os.path.join(BENCH, "plot.py"), os.path.join(work, "nothing-here"))
    check(p.returncode == 2 and "error: no benchmark records" in p.stderr, "plot.py without data")
    gpu = write_sparse_fixture(os.path.join(work, "sparse_plot"))
    out = os.path.join(work, "plots")
    shutil.rmtree(out, ignore_errors=True)
    p = run(os.path.join(BENCH, "plot.py"), gpu, "--out", out)
    files = sorted(os.listdir(out)) if os.path.isdir(out) else []
    check(p.returncode == 0 and "sparse_speedup.png" in files
          and all(f.endswith(".png") and os.path.getsize(os.path.join(out, f)) > 1000
                  for f in files), f"plot.py --out on the sparse fixture wrote {files}: {p.stdout}")


def test_memory_analysis(work):
    out = os.path.join(work, "memory")
    shutil.rmtree(out, ignore_errors=True)
    p = run(os.path.join(BENCH, "memory_analysis.py"), "--results", SIM, "--out", out)
    check(p.returncode == 0, f"memory_analysis.py: {p.stdout}{p.stderr}")
    check(p.stdout.count("| 16 | 128 |") == 8 and "| 32 | 64 | 128k |" in p.stdout,
          "memory table rows")
    check("measured 01_attention_basics/naive" in p.stdout, "measured points not listed")
    check(os.path.isfile(os.path.join(out, "memory_model.png")), "no memory_model.png")
    check(os.listdir(out) == ["memory_model.png"], f"memory_analysis wrote {os.listdir(out)}")


# The sparse grid (benchmarks/README.md, bench_attention's grid): (L, causal, patterns).
SPARSE = [(4096, False, ["window:w=1199", "bigbird:b=128,r=10,seed=1"]),
          (8192, False, ["window:w=1097", "bigbird:b=128,r=9,seed=1"]),
          (16384, False, ["window:w=840", "bigbird:b=128,r=6,seed=1"]),
          (131072, True, ["causal_window:w=4096"])]


def test_bench_torch_grids(work):
    p = run_bench_torch("--grid", "sparse", "--dry-run")
    check(p.returncode == 0, f"bench_torch --grid sparse --dry-run: exit {p.returncode} {p.stderr}")
    got = [line.split() for line in p.stdout.strip().splitlines()]
    want = []
    for L, causal, specs in SPARSE:
        for dtype in ("f16", "bf16"):
            shape = ["B=1", "H=16", f"L={L}", "D=128", dtype] + (["causal"] if causal else [])
            want += [shape + [spec, "torch/flex", "torch/sdpa_cudnn", "torch/sdpa_efficient",
                              "torch/sdpa_math"] for spec in specs]
            want.append(shape + ["dense", "torch/sdpa_flash"])
    check(got[:-1] == want, f"--grid sparse --dry-run lists:\n{p.stdout}")
    check(got[-1:] == [["22", "problems,", "64", "runs"]], f"dry-run summary: {got[-1:]}")
    p = run_bench_torch("--dry-run", "--L", "1k", "--D", "64", "--dtype", "f16", "--causal", "no",
            "--grid", "fp32", "--pattern", "bigbird:b=64,r=3+global:n=4", "--impl", "flex")
    check(p.stdout.split()[:7] == ["B=1", "H=16", "L=1024", "D=64", "f16",
                                   "bigbird:b=64,r=3,seed=0+global:g=0-3", "torch/flex"],
          f"--pattern is written back in the canonical form: {p.stdout}")
    p = run_bench_torch("--grid", "seed-table", "--dry-run")
    check(p.stdout.splitlines() == [
        f"{'B=4 H=8 L=' + str(L) + ' D=64 f16 ' + spec:<56} {impls}"
        for L in (2048, 8192) for spec, impls in (("window:w=256", "torch/flex"),
                                                  ("dense", "torch/sdpa_flash torch/naive"))]
        + ["4 problems, 6 runs"], f"--grid seed-table --dry-run lists:\n{p.stdout}")

    bench_torch = bench_torch_module()
    sparse_patterns = bench_torch.patterns()
    from torch.nn.attention.flex_attention import create_mask
    for spec, L, causal in (("window:w=5", 70, False), ("causal_window:w=9", 70, True),
                            ("dilated:w=3,d=4", 70, False), ("strided:l=6", 70, True),
                            ("fixed:l=8,c=2", 70, False), ("global:g=0,30-33", 70, True),
                            ("bigbird:b=16,r=1,seed=2", 70, False),
                            ("window:w=2+bigbird:b=8,r=2,seed=5", 64, True), ("dense", 40, True)):
        pat = bench_torch.Pattern(dict(L=L, causal=causal, pattern=spec), "cpu")
        want = sparse_patterns.pattern_mask(spec, L, L, causal)
        got = create_mask(pat.mask_mod, 1, 1, L, L, device="cpu")[0, 0]
        check(bool((got == want).all()), f"bench_torch's mask_mod of {spec} (causal={causal})")
        idx = torch.arange(L)
        check(bool((pat.keep(idx[:, None], idx[None, :]) == want).all()) and
              pat.entries == int(want.sum()), f"bench_torch's predicate and entries of {spec}")
    # torch_sparse's path on the CPU: the chunked CSR and the CSR attention against masked
    # attention in float64 (chunks of 500 entries: several chunks per pattern)
    for spec, L, causal in (("window:w=5", 70, False), ("strided:l=6", 70, True),
                            ("global:g=0,30-33", 70, True), ("dilated:w=3,d=4", 66, False)):
        pat = bench_torch.Pattern(dict(L=L, causal=causal, pattern=spec), "cpu")
        crow, col, row = bench_torch.pattern_csr(torch, pat.keep, L, "cpu", chunk=500)
        want = sparse_patterns.pattern_mask(spec, L, L, causal)
        dense = torch.zeros(L, L, dtype=torch.bool)
        dense[row, col] = True
        check(int(crow[-1]) == int(want.sum()) and bool((dense == want).all()),
              f"pattern_csr of {spec}")
        gen = torch.Generator().manual_seed(3)
        q, k, v = (torch.rand(L, 32, generator=gen, dtype=torch.float16) * 2 - 1 for _ in range(3))
        got = bench_torch.csr_attention(torch, q, k, v, crow, col, row, 32 ** -0.5)
        s = (q.double() @ k.double().T * 32 ** -0.5).masked_fill(~want, float("-inf"))
        ref = torch.softmax(s, dim=-1).nan_to_num(0.0) @ v.double()
        err = (got.double() - ref).abs().max().item()
        check(err < 2 ** -10, f"csr_attention of {spec}: error {err} (fp16 output: 2^-11 ulp)")
    p = run_bench_torch("--grid", "seed-128k", "--dry-run")
    check(p.stdout.split()[-4:] == ["4", "problems,", "4", "runs"] and
          p.stdout.count("torch/torch_sparse") == 3 and "dense" in p.stdout and
          "torch/sdpa_flash" in p.stdout, f"--grid seed-128k --dry-run lists:\n{p.stdout}")
    s = bench_torch.Pattern(dict(L=1000, causal=True, pattern="causal_window:w=100"), "cpu").stats()
    check(s["pattern"] == "causal_window:w=100" and abs(s["density"] - 95050 / 1e6) < 1e-12 and
          abs(s["speedup_bound"] - 500500 / 95050) < 1e-12, f"Pattern.stats: {s}")
    s = bench_torch.Pattern(dict(L=64, causal=False, pattern="dense"), "cpu").stats()
    check(s["pattern"] == "dense" and s["density"] is None, f"dense Pattern.stats: {s}")


def test_bench_torch(work):
    for bad in (["--impl", "nope"], ["--dtype", "f8"], ["--pattern", "window"], ["--L", "0"],
                ["--pattern", "sliding_window:256"], ["--pattern", "bigbird:b=64,r=26"],
                ["--flex-block", "48"]):
        p = run_bench_torch(*bad)
        check(p.returncode == 2 and "error:" in p.stderr, f"bench_torch {bad}: exit {p.returncode}")
    out = os.path.join(work, "torch.jsonl")
    p = run_bench_torch("--L", "256", "--D", "64", "--H", "2", "--dtype", "f16", "--causal", "both",
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
    for test in (test_update_tables, test_sparse_table, test_plot, test_memory_analysis,
                 test_bench_torch_grids, test_bench_torch):
        before = len(failures)
        test(work)
        print(f"{test.__name__}: {'ok' if len(failures) == before else 'FAILED'}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
