#!/usr/bin/env python3
"""test_publish.py — run_mutants.py --publish after a partial run (--only) keeps the published
verdicts of the mutants it did not run, and publishes as 'not run' one whose text changed since
its published result (its hash differs). Works on temporary copies of tests/mutation/results.json
and the two READMEs; prints "N passed, M failed", exit 1 on a failed check."""
import copy
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_mutants as rm  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(f"{'PASS' if ok else 'FAIL'}  {what}")


with tempfile.TemporaryDirectory() as tmp:
    shutil.copy(rm.PUBLISHED, os.path.join(tmp, "results.json"))
    rm.PUBLISHED = os.path.join(tmp, "results.json")
    docs = {}
    for name, path in rm.DOCS.items():
        docs[name] = os.path.join(tmp, name + ".md")
        shutil.copy(path, docs[name])
    rm.DOCS = docs
    with open(rm.PUBLISHED) as f:
        before = {r["id"]: r for r in json.load(f)["mutants"]}
    mutants = rm.load_mutants()
    ran = [m for m in mutants if before.get(m["id"], {}).get("hash") == m["hash"]]
    check(len(ran) >= 3, f"{len(ran)} published results carry their mutant's current hash")
    fresh, kept, edited = ran[0], ran[1], ran[2]
    # the partial run: one mutant run again (now 'survived', to see the new result win)
    results = {fresh["id"]: {"hash": fresh["hash"], "plain": "survived", "checked": "survived",
                             "commit": "abc1234", "date": "2026-01-01"}}
    # a mutant edited since its published result: its hash no longer matches
    mutants = copy.deepcopy(mutants)
    for m in mutants:
        if m["id"] == edited["id"]:
            m["hash"] = "0" * 12
    rm.publish(mutants, results)
    with open(rm.PUBLISHED) as f:
        after = {r["id"]: r for r in json.load(f)["mutants"]}
    check(after[fresh["id"]]["verdict"] == "SURVIVED" and after[fresh["id"]]["commit"] == "abc1234",
          "the mutant this run ran is published from this run")
    check(after[kept["id"]] == before[kept["id"]],
          "a mutant this run did not run keeps its published result")
    check(after[edited["id"]]["verdict"] == "not run",
          "a mutant edited since its published result is published as 'not run'")
    check(len(after) == len(mutants), "every listed mutant is published")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
