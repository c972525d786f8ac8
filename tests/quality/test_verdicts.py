#!/usr/bin/env python3
"""Verdict words against the results (CTest quality.verdicts). In the documents that quote
quality results (quality/README.md and the Markdown files of examples 05 and 06 that hold a
generated table or a verdict marker; an assignment that asks for significance tests quotes none):

  - every verdict word between markers (<!-- verdict SET|A|B -->word<!-- /verdict -->) is the
    one the paired tests on the committed results/SET.json give (quality/report.py);
  - the word "significant" appears, outside the generated tables, only in a verdict marker's
    sentence or where the rule is stated (a line that says "p < 0.05"): no claim of significance
    without a paired test at p < 0.05;
  - the check fails when a verdict word is wrong: a copy of a document with one word swapped is
    caught.
Exit 0 when every check passes."""
import glob
import os
import re
import sys

import report
from checks import check, finish

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOCS = sorted({os.path.normpath(p) for p in
               [os.path.join(ROOT, "quality", "README.md")] +
               glob.glob(os.path.join(ROOT, "examples", "05_deepseek_sparse", "*.md")) +
               glob.glob(os.path.join(ROOT, "examples", "06_custom_pattern", "*.md"))})
TABLE = re.compile(r"<!-- table:([\w.-]+) -->\n.*?<!-- /table:\1 -->", re.S)


def main():
    swapped = None
    for path in DOCS:
        with open(path) as f:
            text = f.read()
        rel = os.path.relpath(path, ROOT)
        markers = report.VERDICT.findall(text)
        if not markers and not TABLE.search(text):
            continue  # quotes no results
        fixed = report.replace_verdicts(text)
        wrong = [m for m, n in zip(markers, report.VERDICT.findall(fixed)) if m[3] != n[3]]
        check(not wrong, f"{rel}: {len(markers)} verdict words agree with the results" +
              "".join(f"; {m[0]}|{m[1]}|{m[2]} says '{m[3]}'" for m in wrong))
        prose = TABLE.sub("", text)
        bad = [line.strip() for line in prose.splitlines()
               if re.search(r"significan", line, re.I) and "<!-- verdict" not in line
               and "p < 0.05" not in line]
        check(not bad, f"{rel}: 'significant' only with a verdict marker or the rule" +
              "".join(f"\n      {b[:110]}" for b in bad))
        if markers and swapped is None:
            m = markers[0]
            other = "better" if m[3] != "better" else "worse"
            old = f"<!-- verdict {m[0]}|{m[1]}|{m[2]} -->{m[3]}<!-- /verdict -->"
            swapped = (rel, text.replace(old, old.replace(f"-->{m[3]}<", f"-->{other}<"), 1))
    if swapped:
        rel, text = swapped
        check(report.replace_verdicts(text) != text, f"{rel} with one verdict word swapped: "
              "the check catches it")
    else:
        check(False, "no verdict marker in any document")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
