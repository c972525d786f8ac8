"""chapter_packages.py — the one line a chapter script prints when this Python lacks one of the
chapter's packages (PyTorch, NumPy, Matplotlib, the quality toolkit's), instead of a traceback:

    error: torch is not installed for /usr/bin/python3: run scripts/setup.sh --python, then use
    .venv/bin/python

(one line), with the set-up command and the Python named from where the script was run. A script
imports it beside its packages, the same way everywhere:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
    from chapter_packages import missing  # noqa: E402
    try:
        import torch
    except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
        sys.exit(missing(e.name, "--python"))

("../scripts" from quality/ and benchmarks/; --quality for the quality toolkit's scripts.) It uses
the standard library only. tests/docs/python_without_packages.py checks every script's line.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def missing(package, setup_flag):
    """The line naming package, this Python, and the set-up (scripts/setup.sh setup_flag) and
    Python to use instead, as paths from the current folder."""
    setup = os.path.relpath(os.path.join(ROOT, "scripts", "setup.sh"))
    python = os.path.relpath(os.path.join(ROOT, ".venv", "bin", "python"))
    return (f"error: {package} is not installed for {sys.executable}: run {setup} {setup_flag}, "
            f"then use {python}")
