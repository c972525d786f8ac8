#!/usr/bin/env python3
"""run_mutants.py — the mutation run: plant each listed bug, rebuild, run the example's tests.

A mutant is one exact edit of one file (tests/mutation/mutants/<NN>.json: the example NN's,
checker.json: the harness's checker and reference): the bug a learner or a maintainer could
make. The run applies each mutant to a copy of this tree, rebuilds what depends on the file,
runs the example's CTest cases in the plain build (sim) and, when they all pass, in the checked
build (sim-check: memcheck, racecheck, initcheck), then restores the file. A mutant is *killed*
when some test fails; a *survivor* is a bug that every test lets through. The table at the end
names, for each mutant, the first test that failed.

    nice -n 19 tests/mutation/run_mutants.py                 every mutant (hours on 2 cores)
    tests/mutation/run_mutants.py --example 03 --example 05  the mutants of examples 03 and 05
    tests/mutation/run_mutants.py --only 03-tail-guard       one mutant (ids: --list)
    tests/mutation/run_mutants.py --resume                   skip mutants already in the results
    tests/mutation/run_mutants.py --table                    the kill table of the results so far

Options: --tree DIR (the copy, default build/mutation/tree), --jobs N (default 2), --plain-only
(no checked build), --list, --check (the mutant files are well formed, every "old" text occurs
exactly once, every example folder has its file: seconds, no build). Results accumulate in
build/mutation/results.json, one entry per mutant id (a mutant edited since its result was
recorded is run again).

    tests/mutation/run_mutants.py --publish        the results of every mutant, each with the date
                                                   and the commit it ran at (a mutant this run did
                                                   not run keeps its published result for the same
                                                   text; else 'not run'), into
                                                   tests/mutation/results.json,
                                                   and the tables generated from it into
                                                   tests/README.md and tests/mutation/README.md
    tests/mutation/run_mutants.py --readme --check those tables match results.json (docs test)

Needs what scripts/test.sh needs for the sim and sim-check presets (cmake, a C/C++ compiler,
clang-14 for sim-check); not Python packages. tests/mutation/README.md explains the files, and
how to read and extend the table.
"""
import argparse
import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MUTANTS = os.path.join(ROOT, "tests", "mutation", "mutants")
FIELDS = {"id", "file", "old", "new", "bug"}
OPTIONAL = {"tests", "equivalent", "note", "case", "case_build"}


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def load_mutants():
    """Every mutant of every file in mutants/, in file order, with its group (NN or name)."""
    mutants, seen = [], set()
    for name in sorted(os.listdir(MUTANTS)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(MUTANTS, name)
        try:
            with open(path) as f:
                entries = json.load(f)
        except (OSError, ValueError) as e:
            die(f"{path}: {e}")
        group = name[:-5]
        for n, m in enumerate(entries):
            keys = set(m)
            if not FIELDS <= keys or not keys <= FIELDS | OPTIONAL:
                die(f"{path}: mutant {n} needs the fields {sorted(FIELDS)} (optional: "
                    f"{sorted(OPTIONAL)}), has {sorted(keys)}")
            if m["id"] in seen:
                die(f"{path}: mutant id '{m['id']}' is used twice")
            if m["old"] == m["new"]:
                die(f"{path}: mutant '{m['id']}' changes nothing")
            if m.get("case_build", "plain") not in ("plain", "checked") or \
                    ("case_build" in m and "case" not in m):
                die(f"{path}: mutant '{m['id']}': case_build is plain or checked, with a case")
            seen.add(m["id"])
            m = dict(m)
            m["group"] = group
            if "tests" not in m:
                if not re.fullmatch(r"\d\d", group):
                    die(f"{path}: mutant '{m['id']}' needs \"tests\" (a CTest regex): only an "
                        "example's file NN.json has a default")
                m["tests"] = rf"^example{group}\."
            key = [m["file"], m["old"], m["new"], m["tests"]] + ([m["case"]] if "case" in m else [])
            m["hash"] = hashlib.sha1(json.dumps(key).encode()).hexdigest()[:12]
            mutants.append(m)
    return mutants


def check_mutants(mutants, tree=ROOT):
    """Each "old" text occurs exactly once in its file: a mutant never silently tests nothing."""
    bad = 0
    for m in mutants:
        path = os.path.join(tree, m["file"])
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            print(f"FAIL  {m['id']}: {m['file']} does not exist")
            bad += 1
            continue
        n = text.count(m["old"])
        if n != 1:
            print(f"FAIL  {m['id']}: its old text occurs {n} times in {m['file']} (must be once)")
            bad += 1
    return bad


# ---- the copy of the tree -----------------------------------------------------------------------

def tracked_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]


def sync_tree(tree):
    """Copies the working tree's files into tree, only those whose content differs, so that the
    copy's builds stay incremental; removes files the tree no longer has."""
    files = tracked_files()
    changed = 0
    for f in files:
        src, dst = os.path.join(ROOT, f), os.path.join(tree, f)
        if os.path.exists(dst) and filecmp.cmp(src, dst, shallow=False):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
        changed += 1
    keep = set(files)
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        if rel == "build" or rel.startswith("build" + os.sep) or rel.startswith(".git"):
            dirnames[:] = []
            continue
        for name in filenames:
            f = os.path.normpath(os.path.join(rel, name))
            if f not in keep:
                os.remove(os.path.join(dirpath, name))
    return changed


def run(cmd, cwd, log, timeout=None):
    """Runs cmd, appending its output to log; returns (exit status, output)."""
    start = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") + "\n(timed out)", 124
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}  [{time.time() - start:.0f} s, exit {rc}]\n{out}\n")
    return rc, out


def test_targets(tree, preset, regex):
    """The build targets of the programs that the tests matching regex run, read from the
    CTestTestfile.cmake files CMake wrote (ctest itself cannot name a program not built yet), so
    that a mutant rebuilds only what its tests need."""
    targets, pattern = set(), re.compile(regex)
    for dirpath, _, files in os.walk(os.path.join(tree, "build", preset)):
        if "CTestTestfile.cmake" not in files:
            continue
        with open(os.path.join(dirpath, "CTestTestfile.cmake")) as f:
            for line in f:
                m = re.match(r"add_test\(\[=\[(.+?)\]=\]\s+(.*)$", line)
                if m and pattern.search(m.group(1)):
                    targets.update(re.findall(r"/(\w+_sim)(?=$|[;\s\"])", m.group(2)))
    return sorted(targets)


def build(tree, preset, jobs, log, regex=None, configure=False):
    """Builds what the tests matching regex run (everything without a regex). configure: run
    CMake first (a run's first build: its test files then name every program; a mutant changes
    no CMakeLists, and make re-runs CMake when a planted-race copy's source changed)."""
    if configure or not os.path.isdir(os.path.join(tree, "build", preset)):
        rc, out = run(["cmake", "--preset", preset], tree, log)
        if rc != 0:
            return False
    cmd = ["cmake", "--build", "--preset", preset, "-j", str(jobs)]
    targets = test_targets(tree, preset, regex) if regex else None
    if targets:
        cmd += ["--target", *targets]
    rc, _ = run(cmd, tree, log)
    return rc == 0


def preset_exclude(tree, preset):
    """The test preset's own name exclusion (CMakePresets.json), which -E would replace."""
    with open(os.path.join(tree, "CMakePresets.json")) as f:
        presets = json.load(f).get("testPresets", [])
    for p in presets:
        if p.get("name") == preset:
            return p.get("filter", {}).get("exclude", {}).get("name", "")
    return ""


def ctest(tree, preset, regex, jobs, log, stop=True):
    """Runs the tests of preset that match regex (the standalone builds left out: they rebuild
    the example from scratch and add nothing a mutant's own build does not). Returns (passed,
    failed test names, how many ran)."""
    exclude = "|".join(filter(None, [preset_exclude(tree, preset), "standalone_build"]))
    cmd = ["ctest", "--preset", preset, "-R", regex, "-E", exclude, "-j", str(jobs),
           "--timeout", "900"]
    if stop:
        cmd.append("--stop-on-failure")
    rc, out = run(cmd, tree, log, timeout=7200)
    failed = re.findall(r"^\s*\d+ - (\S+) \(", out, re.M)
    total = re.search(r"tests passed, \d+ tests failed out of (\d+)", out)
    n = int(total.group(1)) if total else 0
    if rc != 0 and not failed:
        failed = ["(ctest: " + (out.strip().splitlines() or ["no output"])[-1] + ")"]
    return rc == 0 and n > 0, failed, n


# ---- one mutant ---------------------------------------------------------------------------------

def apply(tree, m):
    path = os.path.join(tree, m["file"])
    with open(path) as f:
        original = f.read()
    if original.count(m["old"]) != 1:
        return None
    with open(path, "w") as f:
        f.write(original.replace(m["old"], m["new"]))
    return original


def restore(tree, m, original):
    with open(os.path.join(tree, m["file"]), "w") as f:
        f.write(original)


def run_mutant(tree, m, args, log):
    """{'plain': 'killed'|'survived'|'no build', 'checked': ..., 'by': [...], 'seconds': s}."""
    start = time.time()
    r = {"id": m["id"], "hash": m["hash"], "group": m["group"], "bug": m["bug"],
         "commit": head_commit(), "date": time.strftime("%Y-%m-%d")}
    original = apply(tree, m)
    if original is None:
        r.update(plain="stale", checked="-", by=["the old text is not in the file once"])
        return r
    case, case_build = m.get("case"), m.get("case_build", "plain")
    try:
        r["checked"] = "-"
        # the plain build first; a mutant it does not kill goes on to the checked build
        for preset, phase in (("sim", "plain"), ("sim-check", "checked")):
            if phase == "checked" and args.plain_only:
                r["by"] = []
                return r
            if not build(tree, preset, args.jobs, log, m["tests"]):
                compiler = "the compiler" + (" (sim-check)" if phase == "checked" else "")
                r.update({phase: "no build", "by": [compiler]})
                return r
            if case and case_build == phase:  # the case written for this bug, alone, first
                ok, failed, _ = ctest(tree, preset, case, args.jobs, log)
                r["case_kills"] = not ok
                if not ok:
                    r.update({phase: "killed", "by": failed})
                    return r
            ok, failed, n = ctest(tree, preset, m["tests"], args.jobs, log)
            r[phase + "_tests"] = n
            r.update({phase: "survived" if ok else "killed", "by": failed})
            if not ok:
                return r
        return r
    finally:
        restore(tree, m, original)
        r["seconds"] = round(time.time() - start)


# ---- results and the table ----------------------------------------------------------------------

def load_results(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_results(path, results):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def verdict(r):
    if r.get("plain") == "killed":
        return "killed (plain)"
    if r.get("checked") == "killed":
        return "killed (checked)"
    if r.get("plain") == "survived" and r.get("checked") in ("survived", "-"):
        return "SURVIVED"
    return r.get("plain", "?")


def table(mutants, results):
    rows, killed, survivors, equivalent, missing = [], 0, [], [], 0
    for m in mutants:
        r = results.get(m["id"])
        if r is None or r.get("hash") != m["hash"]:
            missing += 1
            continue
        v = verdict(r)
        eq = "equivalent" in m
        if eq:
            equivalent.append(m["id"])
        elif v.startswith("killed"):
            killed += 1
        else:
            survivors.append(m["id"])
        by = ", ".join(r.get("by", [])[:2]) or "-"
        rows.append((m["id"], m["group"], ("equivalent: " if eq else "") + v, by, m["bug"]))
    w = [max([len(x[c]) for x in rows] + [len(h)]) for c, h in enumerate(["mutant", "of", "verdict",
                                                                            "first failing test"])]
    print(f"{'mutant':<{w[0]}}  {'of':<{w[1]}}  {'verdict':<{w[2]}}  {'first failing test':<{w[3]}}"
          "  bug")
    for x in rows:
        print(f"{x[0]:<{w[0]}}  {x[1]:<{w[1]}}  {x[2]:<{w[2]}}  {x[3]:<{w[3]}}  {x[4]}")
    counted = killed + len(survivors)
    print(f"\nkilled {killed} of {counted} non-equivalent mutants"
          f"{f' ({100.0 * killed / counted:.1f} %)' if counted else ''}; "
          f"{len(equivalent)} equivalent{': ' + ', '.join(equivalent) if equivalent else ''}; "
          f"survivors: {', '.join(survivors) if survivors else 'none'}"
          f"{f'; {missing} not run yet' if missing else ''}")
    return 0 if not survivors and not missing else 1


# ---- the published run: tests/mutation/results.json and the READMEs' tables ---------------------

PUBLISHED = os.path.join(ROOT, "tests", "mutation", "results.json")
DOCS = {"summary": os.path.join(ROOT, "tests", "README.md"),
        "table": os.path.join(ROOT, "tests", "mutation", "README.md")}


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def head_commit():
    """The commit the run's copy was taken from, '+' when the tree had uncommitted changes."""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")


def publish(mutants, results):
    """Every listed mutant into tests/mutation/results.json. A mutant with a current result in
    this tree's run (results) is published from it; one without keeps its published entry when
    that was recorded for the mutant's current text (the same hash), so that a run of a few
    mutants (--only, --example) adds to the published run instead of replacing it; any other is
    published as 'not run' and named in the summary."""
    try:
        with open(PUBLISHED) as f:
            before = {r["id"]: r for r in json.load(f)["mutants"]}
    except (OSError, ValueError, KeyError):
        before = {}
    runs = []
    for m in mutants:
        kept = before.get(m["id"])
        r = results.get(m["id"])
        if (r is None or r.get("hash") != m["hash"]) and kept and kept.get("hash") == m["hash"]:
            runs.append(kept)
            continue
        if r is None or r.get("hash") != m["hash"]:
            r = {"plain": "not run"}
        runs.append({"id": m["id"], "group": m["group"], "file": m["file"], "bug": m["bug"],
                     "equivalent": m.get("equivalent", ""), "verdict": verdict(r),
                     "by": r.get("by", [])[:1], "seconds": r.get("seconds", 0),
                     "commit": r.get("commit", ""), "date": r.get("date", ""),
                     "case": m.get("case", ""), "case_kills": r.get("case_kills"),
                     "hash": m["hash"]})
    done = [r for r in runs if r["verdict"] != "not run"]
    doc = {"dates": sorted({r["date"] for r in done if r["date"]}),
           "commits": sorted({r["commit"] for r in done if r["commit"]}),
           "machine": f"{os.cpu_count()} cores, shared; builds and tests with -j2 under nice",
           "mutants": runs}
    with open(PUBLISHED, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return readme(check=False)


def render(doc):
    """{"summary": tests/README.md's block, "table": tests/mutation/README.md's block}."""
    listed = doc["mutants"]
    runs = [r for r in listed if r["verdict"] != "not run"]
    not_run = [r for r in listed if r["verdict"] == "not run"]
    eq = [r for r in listed if r["equivalent"]]
    counted = [r for r in runs if not r["equivalent"]]
    killed = [r for r in counted if r["verdict"].startswith("killed")]
    checked_only = [r for r in killed if r["verdict"] == "killed (checked)"]
    survivors = [r for r in counted if not r["verdict"].startswith("killed")]
    groups = sorted({r["group"] for r in runs})
    pct = f"{100.0 * len(killed) / len(counted):.0f} %" if counted else "-"
    with_case = [r for r in runs if r.get("case")]
    case_kills = [r for r in with_case if r.get("case_kills")]
    lines = [f"Last run: {', '.join(doc['dates'])}, commit {', '.join(doc['commits'])} "
             f"('+': with uncommitted changes), {doc['machine']}: {len(runs)} of the "
             f"{len(listed)} listed mutants run, of {', '.join(groups)}"
             f"{f'; {len(not_run)} not run (marked in the table)' if not_run else ''}"
             f". **{len(killed)} of {len(counted)} "
             f"non-equivalent mutants killed ({pct})**, {len(checked_only)} of them only by the "
             f"checked build; survivors: "
             f"{', '.join('`' + r['id'] + '`' for r in survivors) if survivors else 'none'}. "
             f"Of the {len(with_case)} mutants that a case was written for (its \"case\"), "
             f"{len(case_kills)} are killed by that case alone.",
             "", f"Equivalent mutants ({len(eq)}), which no test can tell from the original:", ""]
    lines += [f"- `{r['id']}` ({r['bug']}): {r['equivalent']}"
              f"{' (not run in this run)' if r['verdict'] == 'not run' else ''}." for r in eq]
    summary = "\n".join(lines)
    rows = ["| mutant | bug | verdict | first failing test |", "|---|---|---|---|"]
    for r in listed:
        v = r["verdict"] if r["verdict"] == "not run" or not r["equivalent"] else "equivalent"
        by = f"`{r['by'][0]}`" if r["by"] and not r["equivalent"] else "-"
        if r.get("case") and r["verdict"] != "not run":
            by += " (the case written for it)" if r.get("case_kills") else " (NOT its case)"
        rows.append(f"| `{r['id']}` | {r['bug']} | {v} | {by} |")
    return {"summary": summary, "table": "\n".join(rows)}


def readme(check):
    """Writes (or with check, compares) the blocks between <!-- mutation:NAME --> markers."""
    try:
        with open(PUBLISHED) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        die(f"{PUBLISHED}: {e}")
    # A mutant listed since the published run (in mutants/, not in results.json) is shown as
    # 'not run': the documents never count fewer mutants than the lists hold.
    published = {r["id"] for r in doc["mutants"]}
    for m in load_mutants():
        if m["id"] not in published:
            doc["mutants"].append({"id": m["id"], "group": m["group"], "file": m["file"],
                                   "bug": m["bug"], "equivalent": m.get("equivalent", ""),
                                   "verdict": "not run", "by": [], "case": m.get("case", "")})
    blocks, bad = render(doc), 0
    for name, path in DOCS.items():
        with open(path) as f:
            text = f.read()
        begin, end = f"<!-- mutation:{name} -->\n", f"\n<!-- /mutation:{name} -->"
        a, b = text.find(begin), text.find(end)
        if a < 0 or b < a:
            print(f"FAIL  {os.path.relpath(path, ROOT)}: no {begin.strip()} ... {end.strip()} block")
            bad += 1
            continue
        new = text[:a + len(begin)] + blocks[name] + text[b:]
        if new == text:
            continue
        if check:
            print(f"FAIL  {os.path.relpath(path, ROOT)}: the mutation:{name} block differs from "
                  "tests/mutation/results.json (run_mutants.py --readme)")
            bad += 1
        else:
            with open(path, "w") as f:
                f.write(new)
    if check and not bad:
        print("PASS  the mutation tables match tests/mutation/results.json")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=os.path.join(ROOT, "build", "mutation", "tree"))
    ap.add_argument("--results", default=os.path.join(ROOT, "build", "mutation", "results.json"))
    ap.add_argument("--example", action="append", default=[], help="NN, or 'checker'")
    ap.add_argument("--only", action="append", default=[], help="a mutant id (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--plain-only", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--publish", action="store_true")
    ap.add_argument("--readme", action="store_true")
    args = ap.parse_args()
    if args.readme:
        return readme(check=args.check)

    mutants = load_mutants()
    chosen = [m for m in mutants if (not args.example or m["group"] in args.example) and
              (not args.only or m["id"] in args.only)]
    if args.only and len(chosen) != len(set(args.only)):
        die("unknown mutant id in --only (see --list)")
    if args.list:
        for m in chosen:
            print(f"{m['id']:<36} {m['group']:<8} {m['file']}: {m['bug']}")
        return 0
    if args.check:
        bad = check_mutants(chosen)
        groups = {m["group"] for m in mutants}
        for folder in sorted(os.listdir(os.path.join(ROOT, "examples"))):
            if re.match(r"\d\d_", folder) and folder[:2] not in groups and \
                    os.path.isfile(os.path.join(ROOT, "examples", folder, "CMakeLists.txt")):
                print(f"FAIL  examples/{folder} has no mutants: add tests/mutation/mutants/"
                      f"{folder[:2]}.json (tests/mutation/README.md)")
                bad += 1
        print(f"{'PASS' if not bad else 'FAIL'}  {len(chosen)} mutants, {bad} problems")
        return 1 if bad else 0
    results = load_results(args.results)
    if args.table:
        return table(chosen, results)
    if args.publish:
        return publish(chosen, results)
    if check_mutants(chosen):
        die("fix the mutant files first (--check)")

    os.makedirs(args.tree, exist_ok=True)
    log = os.path.join(os.path.dirname(args.results), "log.txt")
    print(f"copying the tree into {args.tree} ...", flush=True)
    print(f"  {sync_tree(args.tree)} files changed; building sim and sim-check (log: {log})",
          flush=True)
    presets = ["sim"] if args.plain_only else ["sim", "sim-check"]
    regex = "|".join(sorted({m["tests"] for m in chosen}))
    for preset in presets:
        # configure first (the test list needs it), then build what the tests run
        if not build(args.tree, preset, args.jobs, log, regex, configure=True):
            die(f"the unmutated tree does not build ({preset}): see {log}")
    # The baseline: every test the chosen mutants run passes on the unmutated tree.
    for preset in presets:
        ok, failed, n = ctest(args.tree, preset, regex, args.jobs, log, stop=False)
        print(f"  baseline ({preset}): {n} tests, {'all pass' if ok else 'FAILED: ' + ', '.join(failed)}",
              flush=True)
        if not ok:
            die("the unmutated tree fails its own tests: fix that before a mutation run")
    for k, m in enumerate(chosen):
        old = results.get(m["id"])
        if args.resume and old is not None and old.get("hash") == m["hash"]:
            continue
        print(f"[{k + 1}/{len(chosen)}] {m['id']} ({m['file']}) ...", end=" ", flush=True)
        r = run_mutant(args.tree, m, args, log)
        results[m["id"]] = r
        save_results(args.results, results)
        print(f"{verdict(r)} in {r.get('seconds', 0)} s"
              f"{' by ' + ', '.join(r['by'][:2]) if r.get('by') else ''}", flush=True)
    # Leave both builds matching the unmutated tree (what the mutants' tests run).
    for preset in presets:
        build(args.tree, preset, args.jobs, log, regex)
    print()
    return table(chosen, results)


if __name__ == "__main__":
    sys.exit(main())
