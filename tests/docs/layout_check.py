#!/usr/bin/env python3
"""layout_check.py — the top README's "Repository layout" section and the tree agree (CTest
docs.layout): every folder the section names exists, every top-level folder of the repository
(and every folder of common/) is named there, and each of them has a README.md saying what is in
it. Prints PASS, or one line per disagreement and FAIL; exit 0 or 1."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Folders whose contents their parent's README describes (common/README.md: include/, src/).
DESCRIBED_ABOVE = {"common/include", "common/src"}
IGNORED = {"build", "cmake", ".venv", ".git", ".ci", ".cache", ".whl", ".gl", "__pycache__"}


def layout_section():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## Repository layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    # the first word of each line that is not a continuation: a path, possibly with a file
    return [m.group(1) for m in re.finditer(r"^(\S+)", block, re.M)]


def main():
    problems = []
    named = layout_section()
    folders = {n.rstrip("/") for n in named if n.endswith("/")}
    for n in named:
        if "NN_" in n:  # examples/NN_name/ stands for the numbered folders
            continue
        if not os.path.exists(os.path.join(ROOT, n)):
            problems.append(f"the layout section names {n}, which does not exist")
    expected = {d for d in os.listdir(ROOT)
                if os.path.isdir(os.path.join(ROOT, d)) and d not in IGNORED
                and not d.startswith(".")}
    expected |= {"common/" + d for d in os.listdir(os.path.join(ROOT, "common"))
                 if os.path.isdir(os.path.join(ROOT, "common", d))}
    covered = {f.split("/NN_")[0] for f in folders} | folders
    for d in sorted(expected):
        if d not in covered and not any(f.startswith(d + "/") for f in folders):
            problems.append(f"{d}/ is not in the README's layout section")
        if not os.path.exists(os.path.join(ROOT, d, "README.md")) and d not in DESCRIBED_ABOVE:
            problems.append(f"{d}/ has no README.md")
    for p in problems:
        print(p)
    print("FAIL" if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
