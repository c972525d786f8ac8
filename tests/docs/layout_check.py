#!/usr/bin/env python3
"""layout_check.py — the READMEs' structure (CTest docs.layout):
  * the top README's "Repository layout" section and the tree agree: every folder the section
    names exists, every top-level folder of the repository (and every folder of common/) is named
    there, and each of them has a README.md saying what is in it;
  * the top README opens with the two commands, right after its title, and quotes no timing, size
    or test count before "What this chapter teaches" (those live in GETTING_STARTED.md);
  * every example's walkthrough puts the lesson first (examples/README.md): its code tour comes
    before "Run it"/"How to run", which comes before "Limits" and before any measurement (a
    "Measured ..." or ptxas section, or a generated table of measured results), and "Tests" is its
    last section.
Prints PASS, or one line per disagreement and FAIL; exit 0 or 1."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from chapter_script import verdict  # noqa: E402
# Folders whose contents their parent's README describes (common/README.md: include/, src/).
DESCRIBED_ABOVE = {"common/include", "common/src"}
IGNORED = {"build", "cmake", ".venv", ".git", ".ci", ".cache", ".whl", ".gl", "__pycache__"}


def layout_section():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## Repository layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    # the first word of each line that is not a continuation: a path, possibly with a file
    return [m.group(1) for m in re.finditer(r"^(\S+)", block, re.M)]


# Generated tables of measured results (the markers of update_tables.py, io_complexity.py,
# resource_usage.py, bench_deepseek.py, quality/report.py and example 06's make_tables.py).
MEASURED_MARKERS = ("<!-- results:", "<!-- profile:", "<!-- resources:", "<!-- sim-table",
                    "<!-- table:dsa", "<!-- table:bench_sim", "<!-- table:gpu",
                    "<!-- table:quality", "<!-- table:passkey", "<!-- table:summary")
MEASURED_HEADINGS = ("Measured", "Registers, spills")


def headings(text):
    """(line number, title) of the level-2 headings outside code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.split("\n")):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            out.append((n, line[3:].strip()))
    return out


def walkthrough_order(rel, text):
    """The lesson-first order of one example's README (see the docstring)."""
    problems = []
    heads = headings(text)
    lines = text.split("\n")

    def first(prefixes):
        return next((n for n, h in heads if h.startswith(prefixes)), None)

    tour, run, limits = first(("Code tour", "The kernels")), first(("Run it", "How to run")), \
        first(("Limits",))
    measured = [n for n, h in heads if h.startswith(MEASURED_HEADINGS)]
    measured += [n for n, l in enumerate(lines) if l.startswith(MEASURED_MARKERS)]
    if tour is None or run is None:
        problems.append(f"{rel}: no code tour section or no run section")
        return problems
    if not tour < run:
        problems.append(f"{rel}: the code tour comes after how to run it")
    for name, n in (("how to run it", run), ("the limits", limits)):
        if n is not None and measured and min(measured) < n:
            problems.append(f"{rel}: a measurement (line {min(measured) + 1}) comes before {name}")
    if not heads or heads[-1][1] != "Tests":
        problems.append(f"{rel}: 'Tests' is not the last section")
    return problems


def top_readme_opening(text):
    """The title, then the two commands, and no measured figure before the lesson."""
    problems = []
    lines = text.split("\n")
    body = [l for l in lines[1:8] if l.strip()]
    if body[:4] != ["```", "scripts/run.sh", "scripts/test.sh", "```"]:
        problems.append("README.md: the two commands are not the first thing after the title")
    opening = text.split("## What this chapter teaches", 1)[0]
    figure = re.search(r"\d[\d.,]*\s*(s|min|GB|MB|GiB|MiB|tests)\b", opening)
    if figure:
        problems.append(f"README.md: the opening quotes '{figure.group(0)}' (GETTING_STARTED.md "
                        "holds timings, sizes and test counts)")
    return problems


def main():
    problems = []
    top = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    problems += top_readme_opening(top)
    examples = os.path.join(ROOT, "examples")
    for d in sorted(os.listdir(examples)):
        readme = os.path.join(examples, d, "README.md")
        if re.match(r"\d\d_", d) and os.path.exists(readme):
            problems += walkthrough_order(f"examples/{d}/README.md",
                                          open(readme, encoding="utf-8").read())
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
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
