#!/usr/bin/env python3
"""figures.py — every committed figure (PNG) of the chapter, the command that draws it, and a check
that drawing it again gives the same figure: a figure is either reproduced from committed files or
not tracked.

    python benchmarks/figures.py            redraw every committed figure in place
    python benchmarks/figures.py --check    redraw them in a scratch copy of the tracked files
                                            (without the committed figures: each must be drawn
                                            again) and compare them with the committed ones
                                            (CTest python.figures_reproduce)
    python benchmarks/figures.py --list     the commands and the figures each draws
    python benchmarks/figures.py --compare A.png B.png   the comparison of two files, alone

The comparison is an image comparison, as Matplotlib's own test suite makes it
(matplotlib.testing.compare.compare_images), not a comparison of bytes: the bytes of a PNG depend
on the machine as well as on Matplotlib's version (antialiasing can differ in a few pixels from one
machine to another, drawn with the same Matplotlib). Two figures are the same when they have the
same size, the RMS of their pixel difference is at most TOLERANCE (in levels of 0-255, as
compare_images counts it) and at most MAX_PIXELS pixels differ by more than PIXEL_LEVELS levels in
a channel: a few pixels of another antialiasing pass, a curve, bar or marker drawn from other data
does not (tests/python/test_figures_compare.py plants both). requirements.txt pins the Matplotlib
the figures were drawn with. A tracked PNG that no command below draws fails the check too. Exit
status 0, 1 when a figure differs or a command fails, 2 on bad usage. Needs the chapter's Python
(scripts/setup.sh --python).
"""
import argparse
import filecmp
import fnmatch
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import bench_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import run_as_main, verdict  # noqa: E402
TOLERANCE = 2.0  # RMS of the difference, levels of 0-255 (compare_images's tol)
PIXEL_LEVELS = 32  # a pixel differs when a channel moved by more than this ...
MAX_PIXELS = 64  # ... and at most this many may
SIM_RESULTS = "benchmarks/results/cudasim-AMD-EPYC-2-cores"
H200_RESULTS = "benchmarks/results/NVIDIA-H200"  # gpu.sh's first GPU run (plot.py: its plots step)
# What the commands import, imported once by --check before it forks one child per command
PRELOAD = ["numpy", "torch", "matplotlib.pyplot"]
# (command, run from the repository root; the figures it draws, as glob patterns)
FIGURES = [
    (["examples/04_sparse_patterns/plot_patterns.py"],
     ["examples/04_sparse_patterns/images/patterns_*.png"]),
    (["examples/05_deepseek_sparse/cost_model.py", "--plot",
      "examples/05_deepseek_sparse/images/cost_curves.png"],
     ["examples/05_deepseek_sparse/images/cost_curves.png"]),
    (["examples/06_custom_pattern/ladder.py", "--plot", "examples/06_custom_pattern/images"],
     ["examples/06_custom_pattern/images/ladder_*.png"]),
    (["examples/06_custom_pattern/make_tables.py", "--figure-only"],
     ["examples/06_custom_pattern/images/quality.png"]),
    (["quality/report.py", "--figures"], ["quality/results/*.png"]),
    (["benchmarks/io_complexity.py", "--plot"], ["examples/*/images/io_complexity.png"]),
    (["benchmarks/plot.py", SIM_RESULTS], [SIM_RESULTS + "/plots/*.png"]),
    (["benchmarks/plot.py", H200_RESULTS], [H200_RESULTS + "/plots/*.png"]),
    (["benchmarks/memory_analysis.py", "--update"],
     ["benchmarks/results/memory_model/memory_model.png"]),
    (["benchmarks/crossover.py"], ["benchmarks/results/model/*.png"]),
]


def tracked(root):
    p = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True,
                       check=True)
    return [f for f in p.stdout.split("\0") if f]


def differs(expected, actual):
    """'' when actual is the figure expected (module docstring: the rule), else how it differs."""
    if filecmp.cmp(expected, actual, shallow=False):
        return ""
    import numpy as np
    from matplotlib.testing.compare import compare_images
    from PIL import Image

    a, b = (np.asarray(Image.open(f).convert("RGB"), dtype=np.int16) for f in (expected, actual))
    if a.shape != b.shape:
        return f"size {b.shape[1]} x {b.shape[0]}, the committed one {a.shape[1]} x {a.shape[0]}"
    moved = int((np.abs(a - b).max(axis=2) > PIXEL_LEVELS).sum())
    with tempfile.TemporaryDirectory() as tmp:  # compare_images writes its difference image there
        copy = os.path.join(tmp, "actual.png")
        shutil.copyfile(actual, copy)
        result = compare_images(expected, copy, TOLERANCE, in_decorator=True)
    rms = result["rms"] if result else float(np.sqrt(((a - b).astype(float) ** 2).mean()))
    if result is None and moved <= MAX_PIXELS:
        return ""
    return (f"RMS difference {rms:.3g} (at most {TOLERANCE}), {moved} pixels moved by more than "
            f"{PIXEL_LEVELS} levels (at most {MAX_PIXELS})")


def own_module(m):
    """True for a module of this checkout (not of its virtual environment)."""
    path = os.path.realpath(getattr(m, "__file__", None) or "/")
    return (path.startswith(os.path.realpath(ROOT) + os.sep)
            and not path.startswith(os.path.realpath(sys.prefix) + os.sep))


def run_forked(cmd, root):
    """`python cmd` in root, as a child of this process (fork): the child starts with the third
    party modules PRELOAD already imported, and with none of the chapter's own (its modules are
    those of root, not of this checkout). (exit status, its output)."""
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:  # the child: a fresh `python cmd` but for the modules imported already
            status = 1
            try:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                for name, m in list(sys.modules.items()):
                    if own_module(m):
                        del sys.modules[name]
                os.chdir(root)
                script = os.path.join(root, cmd[0])
                sys.path[0] = os.path.dirname(script)
                status = run_as_main(script, cmd[1:])
            finally:
                os._exit(status)
        _, wait = os.waitpid(pid, 0)
        log.seek(0)
        return os.waitstatus_to_exitcode(wait), log.read().decode(errors="replace")


def draw(root, fork=False):
    """Runs every command in root (with fork: each in run_forked, the modules they share imported
    once: half the CPU time of a new Python for each); the failures' messages."""
    failed = []
    if fork:
        os.environ.setdefault("MPLBACKEND", "Agg")  # what every command selects
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:  # the command that needs it says so
                pass
    for cmd, _ in FIGURES:
        print("drawing: " + " ".join(cmd), flush=True)
        if fork:
            rc, out = run_forked(cmd, root)
        else:
            p = subprocess.run([sys.executable] + cmd, cwd=root, capture_output=True, text=True)
            rc, out = p.returncode, p.stdout + p.stderr
        if rc != 0:
            failed.append(f"{' '.join(cmd)}: exit {rc}: {out[-800:]}")
    return failed


def compared(root, copy, figures):
    """The problems of the figures drawn again in copy against root's: each of figures (paths
    relative to both) must be there, drawn by its command (--check removes them from the copy
    first: a command that does not draw its figure leaves it missing), and be the same figure."""
    problems = []
    for f in figures:
        if not os.path.isfile(os.path.join(copy, f)):
            problems.append(f"{f}: not drawn again by its command")
            continue
        why = differs(os.path.join(root, f), os.path.join(copy, f))
        if why:
            problems.append(f"{f}: drawn again, another figure: {why} (run python "
                            "benchmarks/figures.py with the pinned Matplotlib)")
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("EXPECTED", "ACTUAL"))
    args = ap.parse_args(argv)
    if args.compare:
        for f in args.compare:
            if not os.path.isfile(f):
                ap.error(f"--compare: {f} is not a file")
        why = differs(*args.compare)
        print(f"differ: {why}" if why else "same figure")
        return 1 if why else 0
    files = tracked(ROOT)
    figures = [f for f in files if f.endswith(".png")]
    owner = {f: [cmd for cmd, pats in FIGURES if any(fnmatch.fnmatch(f, p) for p in pats)]
             for f in figures}
    problems = [f"{f}: tracked, but no command of figures.py draws it" for f, c in owner.items()
                if not c]
    if args.list:
        for cmd, pats in FIGURES:
            print(" ".join(cmd) + "\n    " + ", ".join(f for f in figures
                                                        if any(fnmatch.fnmatch(f, p)
                                                               for p in pats)))
        return 0
    if not args.check:
        problems += draw(ROOT)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "repo")
            for f in files:  # the working tree's tracked files, as committed or edited
                if os.path.isfile(os.path.join(ROOT, f)):
                    os.makedirs(os.path.dirname(os.path.join(copy, f)), exist_ok=True)
                    shutil.copy2(os.path.join(ROOT, f), os.path.join(copy, f))
            subprocess.run(["git", "init", "-q"], cwd=copy, check=True)  # for scripts that ask git
            drawn = [f for f in figures if owner[f]]
            for f in drawn:  # each must be drawn again, not left from the copy
                os.remove(os.path.join(copy, f))
            problems += draw(copy, fork=True)
            problems += compared(ROOT, copy, drawn)
    return verdict(problems, f"PASS ({len(figures)} figures, {len(FIGURES)} commands)")


if __name__ == "__main__":
    bench_results.run_main(main)
