"""chapter_script.py — what the chapter's Python scripts share.

1. Their packages: the one line a script prints when this Python lacks one of the chapter's
packages (PyTorch, NumPy, Matplotlib, the quality toolkit's), instead of a traceback:

    error: torch is not installed for /usr/bin/python3: run scripts/setup.sh --python, then use
    .venv/bin/python

(on one line) with the set-up command and the Python named from where the script was run. Every script of
examples/*/, quality/ and benchmarks/ imports its packages through it, the same way:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
    from chapter_script import require  # noqa: E402

    torch, F = require("torch", "torch.nn.functional", setup="--python")

("../scripts" from quality/ and benchmarks/; setup="--quality" for the quality toolkit's scripts),
or, where the package is reached later (inside main), builds the line with missing(). It uses the
standard library only; tests/docs/python_without_packages.py checks every script's line.

2. A PyTorch reference's entry point (examples 01-04 and 08), reference_main: `name.py` runs its
demo, `name.py --all [args]` its test file with the arguments; demo_against_sdpa, the first lines
of examples 01's and 02's demos.

3. A GPU benchmark script's two modes (bench_deepseek.py, example 07's bench_backward.py),
bench_mode: `--table FILE` prints the markdown table of a results file, otherwise `--program` and
`--out` are required.

4. A check script's verdict (tests/docs/, benchmarks/figures.py), verdict: one line per problem,
then FAIL or the PASS line; the exit status 1 or 0.

5. A GPU-only script's skip (bench_torch.py, example 08's bench_gpu.py), no_gpu: where PyTorch sees
no CUDA GPU, one SKIP line and CTest's skip status 77.

6. A script run as `python script args` would run it, in a process that has imported what it
shares with other scripts (benchmarks/figures.py's children, tests/python/preload.py's),
run_as_main: the exit status that Python would give.
"""
import argparse
import importlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def missing(package, setup):
    """The line naming package, this Python, and the set-up command (scripts/setup.sh setup) and
    Python to use instead, as paths from the current folder."""
    script = os.path.relpath(os.path.join(ROOT, "scripts", "setup.sh"))
    python = os.path.relpath(os.path.join(ROOT, ".venv", "bin", "python"))
    return (f"error: {package} is not installed for {sys.executable}: run {script} {setup}, "
            f"then use {python}")


def require(*modules, setup):
    """The modules, imported by name (one, or a tuple of them); where one is missing, exits with
    missing()'s line."""
    try:
        found = tuple(importlib.import_module(m) for m in modules)
    except ModuleNotFoundError as e:
        sys.exit(missing(e.name, setup))
    return found[0] if len(found) == 1 else found


def reference_main(demo, tests, usage, doc):
    """--all [args]: runs the test file tests with args and exits with its status; otherwise
    parses the command line (--help: usage and the first line of doc) and runs demo()."""
    if sys.argv[1:2] == ["--all"]:
        sys.exit(subprocess.call([sys.executable, tests] + sys.argv[2:]))
    argparse.ArgumentParser(usage=usage, description=doc.split("\n")[0]).parse_args()
    demo()


def demo_against_sdpa(attention, name, L):
    """A reference demo's first lines (examples 01 and 02): attention(q, k, v, causal=...)[0]
    against PyTorch's F.scaled_dot_product_attention on uniform inputs in [-1, 1), B=2 H=4 L D=64,
    seed 1, without and with the causal mask: the largest absolute difference of each."""
    torch = importlib.import_module("torch")
    F = importlib.import_module("torch.nn.functional")
    torch.manual_seed(1)
    q, k, v = (torch.rand(2, 4, L, 64) * 2 - 1 for _ in range(3))
    for causal in (False, True):
        o, _ = attention(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        err = (o - want).abs().max().item()
        print(f"{name} vs F.scaled_dot_product_attention, B=2 H=4 L={L} D=64 causal={causal}: "
              f"max abs err {err:.2e}")


def bench_mode(args, table):
    """--table FILE: prints table(FILE) and returns 0. Otherwise, where --program or --out is
    missing, prints one line and returns 2; else makes --out's folder and returns None: the
    script goes on and measures."""
    if args.table:
        print(table(args.table))
        return 0
    if not args.program or not args.out:
        print("error: --program and --out are required (or --table FILE)", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    return None


def verdict(problems, passed="PASS"):
    """Prints each problem, then FAIL, or the line passed where there is none; returns the exit
    status (1 or 0)."""
    for p in problems:
        print(p)
    print("FAIL" if problems else passed)
    return 1 if problems else 0


def no_gpu(torch, script, measures):
    """None where torch sees a CUDA GPU; otherwise prints the SKIP line (script measures ...) and
    returns 77, CTest's skip status."""
    if torch.cuda.is_available():
        return None
    print(f"SKIP: no CUDA GPU (torch.cuda.is_available() is False): {script} measures {measures}")
    return 77


def run_as_main(script, argv):
    """Runs script as __main__ with sys.argv = [script] + argv, in this process; returns the exit
    status `python script argv` would have (sys.exit's code, 1 and the traceback on an uncaught
    exception), stdout and stderr flushed."""
    import runpy  # noqa: PLC0415 (only the callers that fork need it)
    import traceback  # noqa: PLC0415

    sys.argv = [script] + list(argv)
    status = 1
    try:
        runpy.run_path(os.path.abspath(script), run_name="__main__")
        status = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    return status
