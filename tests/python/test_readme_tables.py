#!/usr/bin/env python3
"""test_readme_tables.py — the one table writer (benchmarks/readme_tables.py) that every
make_tables.py and benchmarks/update_tables.py use (CTest python.readme_tables; about 3 s of CPU,
most of it the import of torch by the shared test helpers):

  * a body is put between its markers and nothing else of the text moves; a body given as a
    function is called only when its markers are there;
  * a file whose table is the generator's is not stale; a planted wrong body (one digit) is, and
    update() rewrites it unless asked only to check; a missing marker is named.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
sys.path.insert(0, HERE)
import attn_testing  # noqa: E402
import readme_tables  # noqa: E402

DOC = "intro\n<!-- table:a -->\n| x | 1 |\n<!-- /table:a -->\nmiddle\n<!-- results:b -->\nold\n" \
      "<!-- /results:b -->\nend\n"


def check_fill(c):
    calls = []
    new, missing = readme_tables.fill(DOC, {"table:a": "| x | 2 |\n",
                                            "results:b": lambda: calls.append(1) or "new\n",
                                            "table:absent": lambda: calls.append(2) or "never\n"})
    c.expect(new == DOC.replace("| x | 1 |", "| x | 2 |").replace("old\n", "new\n"),
             "the bodies replaced between their markers, the rest of the text as it was")
    c.expect(missing == ["table:absent"], f"the missing marker named (got {missing})")
    c.expect(calls == [1], f"a function body called only where its markers are (calls {calls})")


def check_update(c):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "README.md")
        with open(path, "w") as f:
            f.write(DOC)
        blocks = {"table:a": "| x | 1 |\n", "results:b": "old\n"}
        c.expect(readme_tables.update(path, blocks, check=True) == (False, []),
                 "the generator's own tables: not stale")
        planted = dict(blocks, **{"table:a": "| x | 7 |\n"})  # one digit changed
        c.expect(readme_tables.update(path, planted, check=True)[0],
                 "a planted wrong body is stale")
        with open(path) as f:
            c.expect(f.read() == DOC, "--check writes nothing")
        c.expect(readme_tables.update(path, planted, check=False)[0], "the stale file rewritten")
        with open(path) as f:
            c.expect("| x | 7 |" in f.read(), "the rewritten file holds the new body")


if __name__ == "__main__":
    sys.exit(attn_testing.main(__doc__, [check_fill, check_update]))
