"""chapter_packages.py — the one line a chapter script prints when this Python lacks one of the
chapter's packages (PyTorch, NumPy, Matplotlib, the quality toolkit's), instead of a traceback:

    error: torch is not installed for /usr/bin/python3: run scripts/setup.sh --python, then use
    .venv/bin/python

(on one line) with the set-up command and the Python named from where the script was run. Every script of
examples/*/, quality/ and benchmarks/ imports its packages through it, the same way:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
    from chapter_packages import require  # noqa: E402

    torch, F = require("torch", "torch.nn.functional", setup="--python")

("../scripts" from quality/ and benchmarks/; setup="--quality" for the quality toolkit's scripts),
or, where the package is reached later (inside main), builds the line with missing(). It uses the
standard library only; tests/docs/python_without_packages.py checks every script's line.
"""
import importlib
import os
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
