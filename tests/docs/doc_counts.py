#!/usr/bin/env python3
"""doc_counts.py — the counts GETTING_STARTED.md states, against the build and the tree (CTest
docs.doc_counts): the tour's steps (scripts/run.sh numbers them [k/N]: a build step, one per run
of build/<preset>/tour.txt, the closing table), the quick suite's tests (`ctest --preset
sim-fast -N`: the sim build's tests but those its filter in CMakePresets.json leaves out), the
number of exercises (exercises/NN_name/ folders), and a step of the path for every example and
exercise (a link to its README).

    doc_counts.py BUILD_DIR CTEST            check (a configured sim build and the ctest program)
    doc_counts.py BUILD_DIR CTEST --write    write the counts into GETTING_STARTED.md

Prints PASS, or one line per stale count and FAIL; exit 0, 1, or 2 on bad usage. A new example,
exercise or test changes a count: run it with --write after configuring the sim preset
(`cmake --preset sim && python3 tests/docs/doc_counts.py build/sim ctest --write`).
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import verdict  # noqa: E402
DOC = os.path.join(ROOT, "GETTING_STARTED.md")
WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen twenty").split()


def word(n):
    return WORDS[n] if n < len(WORDS) else str(n)


def folders(parent):
    return sorted(d for d in os.listdir(os.path.join(ROOT, parent))
                  if re.match(r"^\d\d_", d) and os.path.isdir(os.path.join(ROOT, parent, d)))


def counts(build, ctest):
    with open(os.path.join(build, "tour.txt"), encoding="utf-8") as f:
        runs = [line for line in f if line.strip()]
    with open(os.path.join(ROOT, "CMakePresets.json"), encoding="utf-8") as f:
        fast = next(p for p in json.load(f)["testPresets"] if p["name"] == "sim-fast")
    exclude = fast["filter"]["exclude"]  # the quick suite's filter, as ctest's options
    listed = subprocess.run([ctest, "-N", "-LE", exclude["label"], "-E", exclude["name"]],
                            cwd=build, capture_output=True, text=True, check=True).stdout
    m = re.search(r"Total Tests: (\d+)", listed)
    if not m:
        sys.exit(f"error: ctest -N in {build} listed no total")
    return {"steps": len(runs) + 2, "fast": int(m.group(1)),
            "exercises": len(folders("exercises"))}


# (what, pattern whose group 1 is the count, how the count is written)
RULES = [
    ("the tour's steps, [2/N]", r"`\[2/(\d+)\] example 01", str),
    ("the tour's steps, in words", r"and so on \((\w+) steps\)", word),
    ("the quick suite's tests", r"`--fast` runs the ([\d,]+) tests of the `sim` build", str),
    ("the exercises, in words", r"^\* The (\w+) exercises' own tests", word),
]
KEYS = ["steps", "steps", "fast", "exercises"]


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--write"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    build, ctest, write = argv[1], argv[2], len(argv) == 4
    have = counts(build, ctest)
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for (what, pattern, fmt), key in zip(RULES, KEYS):
        want = fmt(have[key])
        rx = re.compile(pattern, re.M)
        m = rx.search(text)
        if not m:
            problems.append(f"GETTING_STARTED.md: no sentence with {what} (/{pattern}/)")
        elif m.group(1) != want:
            if write:
                text = text[:m.start(1)] + want + text[m.end(1):]
            else:
                problems.append(f"GETTING_STARTED.md: {what} is {m.group(1)}, the tree has {want}"
                                " (tests/docs/doc_counts.py BUILD CTEST --write)")
    for parent in ("examples", "exercises"):
        for d in folders(parent):
            if f"({parent}/{d}/README.md)" not in text:
                problems.append(f"GETTING_STARTED.md: no step of the path links {parent}/{d}/"
                                "README.md")
    if write:
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(text)
    return verdict(problems, f"PASS ({have['steps']} tour steps, {have['fast']} quick tests, "
                             f"{have['exercises']} exercises)")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
