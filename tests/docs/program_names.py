#!/usr/bin/env python3
"""program_names.py — the programs the documents name are the programs the build makes
(CTest docs.program_names): in every tracked Markdown file,
  * each word ending in _sim or _gpu (naive_attention_sim, bench_attention_gpu, ...) is a program
    or library of this build: a file of that name, or of its twin for the other backend (a sim
    build has no _gpu files), somewhere under BUILD_DIR;
  * each path build/<preset>/.../<program>_<backend> is where this build puts that program:
    BUILD_DIR/.../<program>_<backend> exists, for either backend (the preset's folder mapped to
    this build's);
so that a renamed or moved program fails here rather than in a reader's shell. HTML comments
(the generated tables' markers) and placeholders (<preset>, <program>) are left out.

    program_names.py BUILD_DIR          (a built preset's folder)
Prints PASS, or one line per stale name (file:line) and FAIL; exit 0 or 1.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import verdict  # noqa: E402
PRESETS = ("sim", "gpu", "default", "sim-asan", "sim-tsan", "sim-check")
WORD = re.compile(r"(?<![\w/.-])([a-z][a-z0-9_]*_(?:sim|gpu))\b(?!\.\w)")  # not file.ext
PATH = re.compile(r"\bbuild/(" + "|".join(re.escape(p) for p in PRESETS) +
                  r")/([A-Za-z0-9_./-]+_(?:sim|gpu))\b")


def built_files(build):
    """Base names of the files under build (programs, lib<name>.a, lib<name>.so), scratch folders
    left out."""
    names = set()
    for folder, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if d not in ("CMakeFiles", "Testing", "cudasim_gen")]
        for f in files:
            lib = f.startswith("lib") and f.endswith((".a", ".so"))
            names.add(f[3:f.rindex(".")] if lib else f)
    return names


def twin(name):
    return name[:-4] + ("_gpu" if name.endswith("_sim") else "_sim")


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: program_names.py BUILD_DIR", file=sys.stderr)
        return 2
    build = os.path.abspath(argv[0])
    names = built_files(build)
    docs = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                          text=True).stdout.split()
    problems, seen = [], 0
    for rel in docs:
        text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for n, line in enumerate(text.split("\n"), 1):
            for m in WORD.finditer(line):
                seen += 1
                if m.group(1) not in names and twin(m.group(1)) not in names:
                    problems.append(f"{rel}:{n}: {m.group(1)} is no program of this build")
            for m in PATH.finditer(line):
                seen += 1
                inner = m.group(2)
                if not any(os.path.isfile(os.path.join(build, p)) for p in (inner, twin(inner))):
                    problems.append(f"{rel}:{n}: build/{m.group(1)}/{inner}: this build has no "
                                    f"{inner} (nor {os.path.basename(twin(inner))}) there")
    return verdict(problems, f"PASS ({seen} names in {len(docs)} Markdown files)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
