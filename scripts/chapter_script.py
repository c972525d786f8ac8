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
demo, `name.py --all [args]` its test file with the arguments.

3. A GPU benchmark script's two modes (bench_deepseek.py, example 07's bench_backward.py),
bench_mode: `--table FILE` prints the markdown table of a results file, otherwise `--program` and
`--out` are required.
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
