#!/usr/bin/env python3
"""examples_declared.py — every example folder is in the tour, the benchmark and the tests
(CTest docs.examples_declared): a new example is one folder, examples/NN_name/, that declares
itself (examples/README.md, "Adding an example"), and this check fails when one of the three is
missing for a folder. Usage: examples_declared.py BUILD_DIR CTEST (a configured build folder and
the ctest program). Prints PASS, or one line per missing declaration and FAIL; exit 0 or 1."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import verdict  # noqa: E402


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def main():
    if len(sys.argv) != 3:
        print("usage: examples_declared.py BUILD_DIR CTEST", file=sys.stderr)
        return 2
    build, ctest = sys.argv[1], sys.argv[2]
    folders = sorted(d for d in os.listdir(os.path.join(ROOT, "examples"))
                     if re.match(r"^\d\d_", d)
                     and os.path.isfile(os.path.join(ROOT, "examples", d, "CMakeLists.txt")))
    tour = {line.split("|")[1] for line in lines(os.path.join(build, "tour.txt"))}
    bench = {}
    for line in lines(os.path.join(build, "bench.txt")):
        folder, library, what = line.split("|", 2)
        bench[folder] = (library, what)
    listed = subprocess.run([ctest, "-N"], cwd=build, capture_output=True, text=True).stdout
    problems = []
    for folder in folders:
        nn = folder[:2]
        if folder not in tour:
            problems.append(f"examples/{folder}: not in the tour (attn_example_tour in its "
                            "CMakeLists.txt)")
        if folder not in bench:
            problems.append(f"examples/{folder}: no benchmark declaration (attn_example_bench, "
                            "or attn_example_bench(NONE \"why not\"))")
        elif bench[folder][0] == "NONE" and len(bench[folder][1].split()) < 3:
            problems.append(f"examples/{folder}: not benchmarked, without a reason")
        n = len(re.findall(rf"Test +#\d+: example{nn}\.", listed))
        if n < 3:
            problems.append(f"examples/{folder}: {n} CTest cases named example{nn}.* "
                            "(its tests/CMakeLists.txt)")
    return verdict(problems, f"PASS ({len(folders)} example folders)")


if __name__ == "__main__":
    sys.exit(main())
