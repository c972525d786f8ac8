#!/usr/bin/env python3
"""python_without_packages.py — a newcomer's first Python command, before the set-up
(CTest docs.python_without_packages): every Python script of examples/*/, quality/ and
benchmarks/, run with a Python that lacks the chapter's packages (this python3 with -S: no
site-packages, so no PyTorch, NumPy or Matplotlib whatever is installed), never prints a
traceback: it either runs (its --help, or a command that needs no package) or prints ONE line
naming the set-up command (scripts/setup.sh --python, or --quality for quality/) and exits 1.

Each script is run with --help, and the commands below that reach a package only later (a plot
after a table) as their documents write them; outputs go to a scratch folder, and no committed
figure may change (memory_analysis.py's default plot goes to build/figures, not to the committed
one). Prints PASS, or one line per script that fails and FAIL; exit 0 or 1.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import chapter_script  # noqa: E402
SIM = "benchmarks/results/cudasim-AMD-EPYC-2-cores"
# Commands that print first and need a package later: script, arguments ({tmp}: scratch folder),
# and whether they print more than the one line before it.
LATER = [
    ("benchmarks/memory_analysis.py", [], True),
    ("benchmarks/memory_analysis.py", ["--out", "{tmp}"], True),
    ("benchmarks/plot.py", ["{root}/" + SIM, "--out", "{tmp}"], False),
    ("examples/05_deepseek_sparse/cost_model.py", ["--plot", "{tmp}/cost.png"], True),
    ("examples/06_custom_pattern/ladder.py", ["--plot", "{tmp}"], False),
    ("examples/06_custom_pattern/make_tables.py", ["--check"], False),
    ("examples/05_deepseek_sparse/sparse_attention.py", [], False),
    ("examples/01_attention_basics/naive_attention.py", ["--all"], False),
]

# A script run from its example's folder (cd examples/07_flash_attention_backward).
FROM_FOLDER = "examples/07_flash_attention_backward/flash_bwd.py"


def tracked_state():
    """The committed figures' contents (what a plot command would rewrite), or None without git."""
    p = subprocess.run(["git", "ls-files", "*.png"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return {f: open(os.path.join(ROOT, f), "rb").read() for f in p.stdout.split()
            if os.path.isfile(os.path.join(ROOT, f))}


def run(script, args, tmp, cwd=None):
    # -E ignores PYTHONDONTWRITEBYTECODE and PYTHONPYCACHEPREFIX: -B, so that the scripts' .pyc
    # files are not written beside them in the repository
    cmd = [sys.executable, "-S", "-E", "-B", os.path.join(ROOT, script)]
    cmd += [a.format(tmp=tmp, root=ROOT) for a in args]
    p = subprocess.run(cmd, cwd=cwd or tmp, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def verdict(script, args, rc, out, prints_first, cwd):
    """'' when the run is acceptable, else why not."""
    where = " ".join([script] + args)
    lines = [line for line in out.splitlines() if line.strip()]
    if "Traceback" in out:
        return f"{where}: a traceback:\n{out[-1500:]}"
    if rc == 0:
        return ""
    setup = "scripts/setup.sh --quality" if script.startswith("quality/") else \
        "scripts/setup.sh --python"
    last = lines[-1] if lines else ""
    if rc != 1 or setup not in last or not last.startswith("error: "):
        return f"{where}: exit {rc}, last line {last!r} (not one error line naming {setup})"
    if not prints_first and len(lines) != 1:
        return f"{where}: {len(lines)} lines, not one:\n{out[-1500:]}"
    return paths_from(cwd, where, last)


def paths_from(cwd, where, last):
    """'' when the set-up command and the Python the line names are this checkout's, read from
    cwd (where the script was run); else why not."""
    m = re.search(r"run (\S+) --\w+, then use (\S+)$", last)
    if not m:
        return f"{where}: {last!r} names no set-up command and Python"
    for named, want in ((m.group(1), "scripts/setup.sh"), (m.group(2), ".venv/bin/python")):
        if os.path.normpath(os.path.join(cwd, named)) != os.path.join(ROOT, want):
            return f"{where}: run from {cwd}, it names {named}, not {want} of this checkout"
    return ""


def main():
    scripts = sorted(os.path.relpath(p, ROOT) for pattern in
                     ("examples/*/*.py", "quality/*.py", "benchmarks/*.py")
                     for p in glob.glob(os.path.join(ROOT, pattern)))
    before = tracked_state()
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for script in scripts:
            rc, out = run(script, ["--help"], tmp)
            problems.append(verdict(script, ["--help"], rc, out, False, tmp))
        for script, args, prints_first in LATER:
            rc, out = run(script, args, tmp)
            if rc == 0:
                problems.append(f"{script}: exit 0 without its packages: {out[-500:]}")
            problems.append(verdict(script, args, rc, out, prints_first, tmp))
        # ... and run from its own folder and from the root, as the READMEs write it: the paths
        # it names are right from there too.
        for cwd in (os.path.join(ROOT, os.path.dirname(FROM_FOLDER)), ROOT):
            rc, out = run(FROM_FOLDER, [], tmp, cwd)
            problems.append(verdict(FROM_FOLDER, [], rc, out, False, cwd))
    after = tracked_state()
    if before is not None and after != before:
        problems.append("committed figures rewritten: " +
                        ", ".join(f for f in before if before[f] != after.get(f)))
    problems = [p for p in problems if p]
    return chapter_script.verdict(problems,
                                  f"PASS ({len(scripts)} scripts, {len(LATER)} later imports)")


if __name__ == "__main__":
    sys.exit(main())
