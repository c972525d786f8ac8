#!/usr/bin/env python3
"""configure_twice.py — configuring a build tree again writes no file whose content is unchanged.

    configure_twice.py CMAKE [SOURCE]   configure SOURCE (default: the chapter) into a scratch
                                        tree with the sim backend, configure it again, and fail
                                        when a file the first configure made was written again
    configure_twice.py CMAKE --planted  the same on two small projects: one that writes its
                                        source with file(WRITE) (must be caught) and one that
                                        writes it with attn_write_if_changed (must pass)

A generated source written again gets a new mtime, and the next build compiles it (and what
depends on it) again: the exercise skeletons and the planted sources of the example tests are
generated at configure time, so a second `cmake --preset sim` must leave them alone. CMake's own
files (CMakeFiles/, Makefiles, CTestTestfile.cmake, cmake_install.cmake, the cache) are left out:
CMake rewrites those itself, and they do not make anything compile again. Exit status 0 (PASS),
1 (files written again, named), 2 on bad usage.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import verdict  # noqa: E402
CMAKES_OWN = {"Makefile", "CTestTestfile.cmake", "cmake_install.cmake", "CMakeCache.txt",
              "compile_commands.json", "DartConfiguration.tcl"}


def stamps(tree):
    """Path -> mtime (ns) of every file of tree that CMake does not rewrite itself."""
    out = {}
    for d, dirs, files in os.walk(tree):
        dirs[:] = [x for x in dirs if x != "CMakeFiles" and x != "Testing"]
        for f in files:
            if f not in CMAKES_OWN:
                p = os.path.join(d, f)
                out[os.path.relpath(p, tree)] = os.stat(p).st_mtime_ns
    return out


def rewritten(cmake, source, tree, extra):
    """Configures source into tree twice; the files the second configure wrote again."""
    cmd = [cmake, "-S", source, "-B", tree] + extra
    for n in (1, 2):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"error: configure {n} of {source} failed: {(p.stdout + p.stderr)[-1500:]}")
        if n == 1:
            before = stamps(tree)
            time.sleep(0.05)  # past the filesystem's clock granularity
    after = stamps(tree)
    return sorted(f for f, t in before.items() if f in after and after[f] != t)


PLANTED = """cmake_minimum_required(VERSION 3.24)
project(planted LANGUAGES C)
include("{root}/cmake/attn.cmake")
{write} "${{CMAKE_BINARY_DIR}}/generated.c" "int generated(void) {{ return 1; }}\\n")
"""


def planted(cmake):
    problems = []
    for write, want in (("file(WRITE", True), ("attn_write_if_changed(", False)):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            os.makedirs(src)
            with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
                f.write(PLANTED.format(root=ROOT, write=write))
            # the sim backend named: "auto" would look for a GPU (nvidia-smi, a CUDA probe),
            # 4 of the 5 s of each first configure here
            got = rewritten(cmake, src, os.path.join(tmp, "build"), ["-DATTN_BACKENDS=sim"])
            caught = "generated.c" in got
            print(f"planted {write.rstrip('(')}: generated.c "
                  f"{'written again' if caught else 'left alone'}")
            if caught != want:
                problems.append(f"{write.rstrip('(')}: expected generated.c "
                                f"{'written again' if want else 'left alone'}")
    return problems


def main(argv):
    if len(argv) not in (2, 3) or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    cmake = argv[1]
    if argv[2:] == ["--planted"]:
        problems = planted(cmake)
    else:
        source = argv[2] if len(argv) == 3 else ROOT
        # ATTN_PYTHON: this script's Python (CTest runs it with CMake's Python3, which has no
        # PyTorch), so that the python and quality suites are not registered: they write no file
        # at configure time, and their probes (execute_process importing PyTorch, gguf,
        # transformers) took 8 of the 12 s of CPU of each configure with the .venv's Python.
        with tempfile.TemporaryDirectory() as tmp:
            got = rewritten(cmake, source, os.path.join(tmp, "build"),
                            ["-DATTN_BACKENDS=sim", "-DCMAKE_BUILD_TYPE=Release",
                             f"-DATTN_PYTHON={sys.executable}"])
        problems = [f"{f}: written again by a second configure, its content unchanged"
                    for f in got]
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
