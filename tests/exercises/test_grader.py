#!/usr/bin/env python3
"""test_grader.py -- tests of the grader (CTest label `grading`; grader/README.md, "Tests of the
grader").

  test_grader.py --build-dir build/sim --exercise 01_mini_flash CHECK

CHECK is one of: solution, skeleton, planted:<name>, cheat:<name>, hang, crash, compile_error,
class, hidden, usage, gradescope, modes, runner_links, links. A planted bug (planted.json) has
"why", "replace" (exact [text, replacement] pairs), and optionally "expect" (a message the grader
must print), "fails" (the cases that must lose their points: the planted bug is graded
on them and on the shuffled-order cases; every bug lists them), "sanitizers" (also run in those
presets), "only_in" (run only in those presets), "pending" (not registered yet: what its check
waits for), "hints" (the grader's hints it must get, HINTS below; no other), "min_lost" (points
it must lose at least) and "special" (used by one of the named checks, not as a planted:<name>
test). Every check runs grader/grade.py as a user would (a subprocess; the planted bugs of the
class run through its grade_submission, in process) and reads the
results.json it writes; `class` grades the solution, the skeleton, the crash and compile-error
variants in full in one class run, then every planted bug on its own cases, whose results
`solution`, `skeleton`, `crash`, `compile_error` and `planted:<name>` read ("the class run"
below). Planted bugs are made from
the solution at test time by exact text replacement; a text that is gone fails the test, so it
never silently grades an unbroken kernel.
The skeleton is the one the repository shipped (pristine.py: read from git objects by its
recorded blob id), never the learner's working copy, so these tests still pass after the learner
has solved the exercise.
"""
import argparse
import atexit
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import pristine

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GRADE = os.path.join(ROOT, "grader", "grade.py")
SECRET = "grader-test-secret"  # the tests' instructor secret (hidden cases run too)
WORK = tempfile.mkdtemp(prefix="grader-test-")  # every scratch folder, removed at exit
atexit.register(shutil.rmtree, WORK, True)


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def spec_of(exercise):
    with open(os.path.join(ROOT, "exercises", exercise, "grading.json")) as f:
        return json.load(f)


def grade(args, target, *extra, secret=True, timeout=300):
    """Runs grade.py on one submission; returns (exit status, results.json, stdout, seconds)."""
    out = tempfile.mkdtemp(prefix="grading-test-", dir=WORK)
    env = dict(os.environ)
    env.pop("ATTN_GRADER_SECRET_FILE", None)
    if secret:
        env["ATTN_GRADER_SECRET"] = SECRET
    else:
        env.pop("ATTN_GRADER_SECRET", None)
    cmd = [sys.executable, GRADE, args.exercise, target, "--build-dir", args.build_dir, "--out",
           out] + list(extra)
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    seconds = time.monotonic() - start
    results = None
    path = os.path.join(out, "results.json")
    if os.path.isfile(path):
        with open(path) as f:
            results = json.load(f)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    return done.returncode, results, done.stdout + done.stderr, seconds


def totals(results):
    return (sum(t["score"] for t in results["tests"]),
            sum(t["max_score"] for t in results["tests"]))


def check_gradescope_shape(results):
    if not isinstance(results.get("tests"), list) or "score" not in results:
        fail("results.json lacks score/tests[]")
    for t in results["tests"]:
        for key in ("name", "score", "max_score", "status", "output", "visibility"):
            if key not in t:
                fail(f"test {t.get('name')} lacks '{key}'")
        if t["status"] not in ("passed", "failed"):
            fail(f"test {t['name']}: status {t['status']}")
        if t["visibility"] not in ("visible", "hidden", "after_due_date"):
            fail(f"test {t['name']}: visibility {t['visibility']}")


def planted_bugs(exercise):
    """{name: bug} from tests/exercises/planted.json: deliberately broken copies of the exercise's
    solution, each made by exact text replacement ({why, fails, replace, sanitizers})."""
    with open(os.path.join(HERE, "planted.json")) as f:
        return dict(json.load(f).get(exercise, {}))


def planted_names(exercise, sanitizer):
    """The planted:<name> tests to register (CMake reads them at configure time), and the planted
    bugs of the class run. A bug marked "pending" (what the check that catches it still waits
    for) is not registered yet; one with "only_in" only under those sanitizers (a race that only
    a checker sees)."""
    names = []
    for name, bug in sorted(planted_bugs(exercise).items()):
        if bug.get("special") or bug.get("pending"):
            continue
        if "only_in" in bug and sanitizer not in bug["only_in"]:
            continue
        if not sanitizer or sanitizer in bug.get("sanitizers", []):
            names.append(name)
    return names


def planted_copy(args, name):
    """The solution with the planted bug `name`, written to a temp file."""
    spec = spec_of(args.exercise)
    bug = planted_bugs(args.exercise)[name]
    with open(os.path.join(ROOT, "solutions", args.exercise, spec["submission_file"])) as f:
        body = f.read()
    for text, replacement in bug["replace"]:
        if body.count(text) != 1:
            fail(f"planted bug {name}: the text {text!r} is not in the solution exactly once; "
                 "update tests/exercises/planted.json")
        body = body.replace(text, replacement)
    folder = tempfile.mkdtemp(prefix=f"planted-{name}-", dir=WORK)
    path = os.path.join(folder, spec["submission_file"])
    with open(path, "w") as f:
        f.write(body)
    return path, bug


# Fallbacks for an exercise whose planted bugs do not include hang, crash or compile_error:
# appended to the solution, they act when the case program starts (or when it is compiled).
GENERIC_SPECIAL = {
    "hang": "\n__attribute__((constructor)) static void planted_hang(void) {\n"
            "    volatile int spin = 1;\n    while (spin) {\n    }\n}\n",
    "crash": "\nstatic int *volatile planted_null; /* the compiler cannot see it is NULL */\n"
             "__attribute__((constructor)) static void planted_crash(void) {\n"
             "    *planted_null = 1;\n}\n",
    "compile_error": "\nstatic int planted_error(void) { return undeclared_name; }\n",
}


def special_copy(args, name):
    """The solution with the special bug `name`: the exercise's own, else the generic one."""
    if name in planted_bugs(args.exercise):
        return planted_copy(args, name)[0]
    spec = spec_of(args.exercise)
    with open(solution_path(args)) as f:
        body = "#include <stdint.h>\n" + f.read() + GENERIC_SPECIAL[name]
    folder = tempfile.mkdtemp(prefix=f"special-{name}-", dir=WORK)
    path = os.path.join(folder, spec["submission_file"])
    with open(path, "w") as f:
        f.write(body)
    return path


def grade_module():
    """grader/grade.py loaded as a module (it is a script) for its functions."""
    if "grade" not in sys.modules:
        loader = importlib.util.spec_from_file_location("grade", GRADE)
        sys.modules["grade"] = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(sys.modules["grade"])
    return sys.modules["grade"]


def solution_path(args):
    return os.path.join(ROOT, "solutions", args.exercise, spec_of(args.exercise)["submission_file"])


def skeleton_path(args):
    """The shipped skeleton, copied out of the repository's objects (never the learner's file)."""
    folder = tempfile.mkdtemp(prefix="skeleton-", dir=WORK)
    path = os.path.join(folder, spec_of(args.exercise)["submission_file"])
    try:
        data = pristine.skeleton(args.exercise)
    except LookupError as e:
        fail(str(e))
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---- checks ------------------------------------------------------------------------------------

# ---- the class run ------------------------------------------------------------------------------
#
# The checks of whole gradings read one class run: `class` grades, in grade.py's class mode (as
# an instructor grades a class: the grader's programs brought up to date once), a folder holding
# the solution and, in the plain build, the shipped skeleton, the crash and compile-error variants
# and a learner without the file, each compiled and graded in full (every case, the hidden ones
# with the secret), as one file would be. Then, in the same process (grade.py's grade_submission,
# what grades each learner of a class; no second set-up), each planted bug of this build
# (planted_names) on its own cases only (planted_cases: the cases it must fail, "fails", and the
# shuffled-order ones, where a false barrier hint would show): a planted test asks "which of its
# cases caught it", not its full report, which the solution and the skeleton show. Every
# results.json and report.md stays in graded_dir(). `solution`, `skeleton`, `crash`,
# `compile_error` and `planted:<name>` then check their learner's (CTest: FIXTURES_REQUIRED),
# after checking that the file graded is the one the check makes now (its SHA-256 in
# graded.json): a missing or stale class run fails, never passes.

def graded_dir(args):
    return os.path.join(args.build_dir, "tests", "exercises", "graded", args.exercise)


def build_mode(args):
    """The build's checker or sanitizer as planted.json names it: "" (plain), check, asan, tsan."""
    with open(os.path.join(args.build_dir, "grader", f"{args.exercise}.sim.json")) as f:
        info = json.load(f)
    return "check" if info.get("checked") else info.get("sanitizer") or ""


def class_member(args, learner):
    """The file of one learner of the class run (made now, from the solution and planted.json)."""
    if learner == "solution":
        return solution_path(args)
    if learner == "skeleton":
        return skeleton_path(args)
    if learner in ("crash", "compile_error"):
        return special_copy(args, learner)
    return planted_copy(args, learner[len("planted_"):])[0]


def class_learners(args):
    """The learners graded in full by grade.py's class mode."""
    return ["solution"] + ([] if build_mode(args) else ["skeleton", "crash", "compile_error"])


def planted_learners(args):
    return ["planted_" + n for n in planted_names(args.exercise, build_mode(args))]


def planted_cases(args, name):
    """The cases a planted bug is graded on: those it must fail ("fails", which every bug of a
    build lists) and the shuffled-order ones (the barrier hint: it must be given where the bug
    lists it, and nowhere else), in grading.json's order."""
    bug = planted_bugs(args.exercise)[name]
    cases = spec_of(args.exercise)["cases"]
    names = [c["name"] for c in cases]
    if not bug.get("fails") or set(bug["fails"]) - set(names):
        fail(f"planted bug '{name}': \"fails\" must list cases of grading.json (the cases "
             f"that catch it, which it is graded on), got {bug.get('fails')}")
    want = set(bug["fails"]) | {c["name"] for c in cases if "CUDASIM_ORDER" in c.get("env", {})}
    return [n for n in names if n in want]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_class(args):
    """The class run: every learner of class_learners() and one without the file, graded in
    full in one grade.py run; class.csv lists them all (its scores those of their results.json),
    each graded learner has a report, progress lines are printed. Then each planted bug, on its
    own cases (planted_cases), by the function that grades each learner of a class."""
    spec = spec_of(args.exercise)
    top = graded_dir(args)
    shutil.rmtree(top, ignore_errors=True)
    folder, out = os.path.join(top, "class"), os.path.join(top, "out")
    files, planted = {}, {}
    for learner in class_learners(args) + planted_learners(args):
        path = class_member(args, learner)
        where = os.path.join(folder if learner in class_learners(args) else
                             os.path.join(top, "planted"), learner)
        os.makedirs(os.path.join(where, "src"))
        shutil.copyfile(path, os.path.join(where, "src", spec["submission_file"]))
        if learner.startswith("planted_"):
            planted[learner] = os.path.join(where, "src", spec["submission_file"])
        files[learner] = digest(path)
    os.makedirs(os.path.join(folder, "no_file"))  # a learner without the file
    env = dict(os.environ, ATTN_GRADER_SECRET=SECRET)
    env.pop("ATTN_GRADER_SECRET_FILE", None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, GRADE, args.exercise, folder, "--build-dir",
                           args.build_dir, "--out", out], capture_output=True, text=True,
                          env=env, timeout=1500)
    seconds = time.monotonic() - start
    with open(os.path.join(top, "class.log"), "w") as f:
        f.write(done.stdout + done.stderr)
    print(done.stdout[-3000:], done.stderr[-2000:])
    in_class = set(files) - set(planted)
    print(f"class of {len(in_class) + 1} graded in {seconds:.1f} s")
    with open(os.path.join(out, "class.csv")) as f:
        rows = [line.split(",") for line in f.read().splitlines()]
    by_name = {r[0]: r for r in rows[1:]}
    if done.returncode != 1 or set(by_name) != in_class | {"no_file"}:
        fail(f"class.csv must list the {len(in_class) + 1} learners (exit {done.returncode})")
    if by_name["no_file"][1] != "0" or "no single" not in by_name["no_file"][3]:
        fail("class.csv: the learner without the file must have 0 points and a note")
    for learner in in_class:
        if not os.path.isfile(os.path.join(out, learner, "report.md")):
            fail(f"no report for {learner}")
        with open(os.path.join(out, learner, "results.json")) as f:
            score, most = totals(json.load(f))
        if float(by_name[learner][1]) != round(score, 4) or float(by_name[learner][2]) != most:
            fail(f"class.csv: {learner}'s row is not its results.json ({score:g} / {most:g})")
    if f"[{len(in_class) + 1}/{len(in_class) + 1}]" not in done.stdout:
        fail("no progress lines")
    # The planted bugs: the build is the class run's (its programs brought up to date above).
    g = grade_module()
    try:
        gspec = g.load_spec(args.exercise)
        build = g.Build(gspec, args.build_dir, "sim", True)
        for learner, path in sorted(planted.items()):
            cases = planted_cases(args, learner[len("planted_"):])
            gargs = g.parse_args([args.exercise, "--quiet", "--cases", ",".join(cases)])
            res = g.grade_submission(gspec, build, path, os.path.join(out, learner), gargs, None,
                                     base=os.path.dirname(os.path.dirname(path)))
            print(f"{learner}: {res.score:g} / {res.max_score:g} on {', '.join(cases)}")
    except g.UsageError as e:
        fail(f"grading the planted bugs: {e}")
    print(f"class and {len(planted)} planted bugs graded in {time.monotonic() - start:.1f} s")
    with open(os.path.join(top, "graded.json"), "w") as f:  # last: the run is complete
        json.dump({"files": files}, f, indent=1)


def graded(args, learner):
    """(exit status grade.py gives it alone, results.json, its messages) of a learner of the
    class run, which must have graded the file class_member() makes now."""
    top = graded_dir(args)
    try:
        with open(os.path.join(top, "graded.json")) as f:
            files = json.load(f)["files"]
    except (OSError, ValueError):
        fail(f"no complete class run in {top}: run the check 'class' first (CTest does)")
    if files.get(learner) != digest(class_member(args, learner)):
        fail(f"the class run in {top} did not grade this {learner} (run the check 'class' again)")
    with open(os.path.join(top, "out", learner, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(top, "out", learner, "report.md")) as f:
        report = f.read()
    print(report[-4000:])
    # what grade.py prints of one file: the messages (hints included) and the report's notes
    text = "\n".join([t["output"] for t in res["tests"]] +
                     [l for l in report.splitlines() if not l.startswith("- submission:")])
    score, most = totals(res)
    return (0 if score >= most else 1), res, text


# ---- checks ------------------------------------------------------------------------------------

def check_solution(args):
    rc, res, _ = graded(args, "solution")
    check_gradescope_shape(res)
    score, top = totals(res)
    hidden = [t for t in res["tests"] if t["name"].startswith("hidden_")]
    print(f"solution: {score:g} / {top:g} ({len(hidden)} hidden cases)")
    if rc != 0 or score != top or top <= 0:
        fail(f"the solution must get full marks (exit {rc}, {score} / {top})")
    if len(hidden) != spec_of(args.exercise).get("hidden", {}).get("count", 0):
        fail("the hidden cases did not all run with the secret set")
    by_name = {t["name"]: t for t in res["tests"]}
    for case in spec_of(args.exercise)["cases"]:  # run by the plain build only, 0 of 0 elsewhere
        if case.get("plain_only") and (by_name[case["name"]]["max_score"] > 0) != plain_build(
                args):
            fail(f"case {case['name']} is plain_only: its points count in the plain build only")


def check_skeleton(args):
    rc, res, out = graded(args, "skeleton")
    check_gradescope_shape(res)
    score, top = totals(res)
    if rc == 0 or score != 0 or top <= 0:
        fail(f"the untouched skeleton must get zero (exit {rc}, {score} / {top})")
    if "not implemented" not in out:
        fail("the skeleton's 'not implemented' message is not shown to the learner")
    if plain_build(args) and HINTS["barrier"] in out:  # it fails the same in every thread order
        fail("the skeleton got the missing-barrier hint")


# The grader's hints (grade.py and the case programs), by the words that only each one has. Every
# planted bug lists the hints it must get ("hints"); it must get no other (in the plain build:
# the checked build and the sanitizers report the bugs themselves, without these hints).
HINTS = {"barrier": "a missing __syncthreads()?",
         "bounds": "to have the checked build name the source line",
         "dk_scale": "dK is the reference divided by the scale",
         "partial_tile": "a partial tile was computed as full",
         "lse_right": "LSE: correct (so m and l are right",
         "heads": "only heads past the grid's 65535 rows"}


def plain_build(args):
    """True for a build without the checkers and sanitizers (where the hints are given)."""
    with open(os.path.join(args.build_dir, "grader", f"{args.exercise}.sim.json")) as f:
        info = json.load(f)
    return not info.get("checked") and not info.get("sanitizer")


def check_planted(args, name):
    bug = planted_bugs(args.exercise)[name]
    if "hints" not in bug:
        fail(f"planted bug '{name}' lists no \"hints\" (the hints it must get; [] for none)")
    rc, res, out = graded(args, "planted_" + name)
    check_gradescope_shape(res)
    score, top = totals(res)
    caught = [f"{t['name']} ({t['score']:g}/{t['max_score']:g})" for t in res["tests"]
              if t["score"] < t["max_score"]]
    print(f"planted {name}: {score:g} / {top:g}; caught by: {', '.join(caught) or 'no case'}")
    if rc == 0 or score >= top:
        fail(f"planted bug '{name}' ({bug['why']}) lost no points")
    if bug.get("min_lost") and top - score < bug["min_lost"]:
        fail(f"planted bug '{name}' lost {top - score:g} points, fewer than {bug['min_lost']}")
    if bug.get("expect") and bug["expect"] not in out:
        fail(f"planted bug '{name}': expected the message {bug['expect']!r}")
    if plain_build(args):
        for hint, words in HINTS.items():
            if (hint in bug["hints"]) != (words in out):
                fail(f"planted bug '{name}': the {hint} hint ({words!r}) must "
                     f"{'' if hint in bug['hints'] else 'not '}be given")
    by_name = {t["name"]: t for t in res["tests"]}
    for case in bug.get("fails", []):  # cases that must lose their points (others may too)
        if case not in by_name or by_name[case]["score"] >= by_name[case]["max_score"]:
            fail(f"planted bug '{name}': case {case} did not lose its points")


def check_hang(args):
    """A kernel that never ends: the case is killed at its timeout; results.json has the compile
    test before the grader finishes (results are written as they come)."""
    path = special_copy(args, "hang")
    out = tempfile.mkdtemp(prefix="grading-hang-", dir=WORK)
    timeout = 2  # the case's wall-clock limit: the check is that it is enforced, not its size
    cmd = [sys.executable, GRADE, args.exercise, path, "--build-dir", args.build_dir, "--out",
           out, "--timeout", str(timeout), "--cases", spec_of(args.exercise)["cases"][0]["name"]]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_early = False
    while proc.poll() is None:
        path_json = os.path.join(out, "results.json")
        if os.path.isfile(path_json):
            with open(path_json) as f:
                names = [t["name"] for t in json.load(f)["tests"]]
            seen_early = seen_early or "compile" in names
        time.sleep(0.2)
    seconds = time.monotonic() - start
    text = proc.stdout.read()
    print(text)
    if proc.returncode != 1 or f"timed out after {timeout} s" not in text:
        fail(f"a hanging kernel must fail by timeout (exit {proc.returncode})")
    if seconds > timeout + 60:
        fail(f"the grader took {seconds:.0f} s for one {timeout} s case")
    if not seen_early:
        fail("results.json was not written before the grader finished")


def check_crash(args):
    rc, res, out = graded(args, "crash")
    if rc != 1 or res is None or "crashed (SIGSEGV" not in out:
        fail(f"a crashing kernel must be a failed case saying so (exit {rc})")
    if totals(res)[0] != 0:
        fail("a crashing kernel scored points")


def check_compile_error(args):
    rc, res, out = graded(args, "compile_error")
    compile_test = next(t for t in res["tests"] if t["name"] == "compile")
    name = spec_of(args.exercise)["submission_file"]
    if rc != 1 or compile_test["status"] != "failed" or "error" not in compile_test["output"] \
            or name + ":" not in compile_test["output"]:
        fail(f"a compile error must be shown, naming {name}:<line> (exit {rc})")
    if totals(res)[0] != 0:
        fail("a submission that does not compile scored points")


def check_links(args):
    """Submissions are files, not links: a symbolic link to the solution, to the secret or to
    /proc/self/environ (the grader's environment, the secret in it), a file in a linked folder,
    a hard link, a FIFO and a device are refused with one line, read by no one, in all three ways
    of grading (one file, --one, a class); a compiler message quoting a 40 KB line is cut. As
    root, a file only root may read (the secret copied in, mode 0600) is refused too: the
    grader reads with the sandbox user's rights; one in a private folder is read."""
    spec = spec_of(args.exercise)
    name = spec["submission_file"]
    first = spec["cases"][0]["name"]
    work = tempfile.mkdtemp(prefix="grading-links-", dir=WORK)
    os.chmod(work, 0o755)
    secret_file = os.path.join(work, "secret.txt")
    with open(secret_file, "w") as f:
        f.write(SECRET + "-file\n")
    os.chmod(secret_file, 0o600)
    sol = solution_text_lines(args)

    def refused(seen, what):
        if SECRET in seen:
            fail(f"{what}: the instructor secret reached the output")
        shown = [l for l in sol if l in seen]
        if shown:
            fail(f"{what}: solution text reached the output: {shown[0]!r}")
        if "is refused" not in seen:
            fail(f"{what}: no line saying that the file is refused")

    def outputs(out):
        text = ""
        for d, _, files in os.walk(out):
            for n in files:
                with open(os.path.join(d, n), errors="replace") as f:
                    text += f.read()
        return text

    # one file: a link to the solution
    os.makedirs(os.path.join(work, "one"))
    os.symlink(solution_path(args), os.path.join(work, "one", name))
    rc, res, seen, _ = grade(args, os.path.join(work, "one", name), "--cases", first)
    if rc != 1 or totals(res)[0] != 0:
        fail(f"a link to the solution must score 0 (exit {rc})")
    refused(seen + json.dumps(res), "a link to the solution")
    # --one (Gradescope's layout): a link to the secret file, nested
    os.makedirs(os.path.join(work, "gs", "nested"))
    os.symlink(secret_file, os.path.join(work, "gs", "nested", name))
    rc, res, seen, _ = grade(args, os.path.join(work, "gs"), "--one", "--cases", first,
                             "--secret-file", secret_file)
    refused(seen + json.dumps(res), "--one: a link to the secret file")
    # a class: every other kind of link, a FIFO, a device, a long line, and one real solution
    folder = os.path.join(work, "class")
    makes = {
        "environ": lambda p: os.symlink("/proc/self/environ", p),
        "secret": lambda p: os.symlink(secret_file, p),
        "fifo": os.mkfifo,
        "device": lambda p: os.symlink("/dev/zero", p),
        "hardlink": lambda p: os.link(shutil.copy(solution_path(args),
                                                  os.path.join(work, "copy.cu")), p),
    }
    for learner, make in makes.items():
        os.makedirs(os.path.join(folder, learner))
        make(os.path.join(folder, learner, name))
    hidden = os.path.join(work, "elsewhere")
    os.makedirs(hidden)
    shutil.copy(solution_path(args), os.path.join(hidden, name))
    os.symlink(hidden, os.path.join(folder, "linked_folder"))
    os.symlink(solution_path(args), os.path.join(folder, "linked_file.cu"))
    os.makedirs(os.path.join(folder, "long_line"))
    with open(solution_path(args)) as f:
        body = f.read()
    with open(os.path.join(folder, "long_line", name), "w") as f:
        f.write(body + "\nstatic int long_line = undeclared_" + "x" * 40000 + ";\n")
    # a regular file in a private folder (mktemp -d's 0700) is read: the sandbox user reopens
    # the grader's descriptor, so only the file's own permissions count
    os.makedirs(os.path.join(folder, "real"))
    shutil.copy(solution_path(args), os.path.join(folder, "real", name))
    os.chmod(os.path.join(folder, "real", name), 0o644)
    os.chmod(os.path.join(folder, "real"), 0o700)
    if os.geteuid() == 0:  # a file only root may read: refused, never read with root's rights
        makes["closed"] = None
        os.makedirs(os.path.join(folder, "closed"))
        shutil.copy(secret_file, os.path.join(folder, "closed", name))
        os.chmod(os.path.join(folder, "closed", name), 0o600)
    out = os.path.join(work, "class-out")
    env = dict(os.environ, ATTN_GRADER_SECRET=SECRET)
    done = subprocess.run([sys.executable, GRADE, args.exercise, folder, "--build-dir",
                           args.build_dir, "--out", out, "--cases", first],
                          capture_output=True, text=True, env=env, timeout=300)
    print(done.stdout[-3000:], done.stderr[-2000:])
    with open(os.path.join(out, "class.csv")) as f:
        rows = {r[0]: r for r in (line.split(",") for line in f.read().splitlines()[1:])}
    for learner in list(makes) + ["linked_folder", "linked_file"]:
        if learner not in rows or float(rows[learner][1]) != 0:
            fail(f"class: {learner} must be listed with 0 points")
        refused(outputs(os.path.join(out, learner)), f"class: {learner}")
    if rows["real"][1] != rows["real"][2]:
        fail("class: the learner with a regular file must have full marks")
    if SECRET in done.stdout + done.stderr:
        fail("class: the instructor secret reached the grader's output")
    with open(os.path.join(out, "long_line", "results.json")) as f:
        compile_test = json.load(f)["tests"][0]
    longest = max(len(l) for l in compile_test["output"].splitlines())
    if compile_test["status"] != "failed" or longest > 400:
        fail(f"class: a compiler message quoting a 40 KB line must be cut (longest {longest})")


def check_hidden(args):
    """Hidden cases: the same secret gives the same shapes, another secret others, none none."""
    g = grade_module()
    spec = g.load_spec(args.exercise)
    a = [(c.args, c.seed) for c in g.hidden_cases(spec, b"one")]
    b = [(c.args, c.seed) for c in g.hidden_cases(spec, b"one")]
    c = [(c.args, c.seed) for c in g.hidden_cases(spec, b"two")]
    if not a or a != b or a == c or g.hidden_cases(spec, None):
        fail("hidden cases must follow the secret (and need one)")
    # A run's nonce: the same shapes, other seeds (fresh inputs), so no answer can be kept.
    run1 = [(c.args, c.seed) for c in g.hidden_cases(spec, b"one", b"run1")]
    run2 = [(c.args, c.seed) for c in g.hidden_cases(spec, b"one", b"run2")]
    if [x for x, _ in run1] != [x for x, _ in a] or any(
            s1 == s2 for (_, s1), (_, s2) in zip(run1, run2)):
        fail("the nonce must keep the hidden shapes and change every seed")
    print("\n".join(f"{args_} seed {seed}" for args_, seed in a))


def check_usage(args):
    cases = [([args.exercise, "/no/such/file.cu"], "no such file"),
             (["99_nothing"], "unknown exercise"),
             ([args.exercise, tempfile.mkdtemp(dir=WORK)], "no submissions"),
             ([args.exercise, "--cases", "no_such_case"], "no such case")]
    for argv, text in cases:
        done = subprocess.run([sys.executable, GRADE] + argv + ["--build-dir", args.build_dir],
                              capture_output=True, text=True)
        lines = done.stderr.strip().splitlines()
        if done.returncode != 2 or len(lines) != 1 or text not in lines[0]:
            fail(f"grade {' '.join(argv)}: want exit 2 and one line with '{text}', got "
                 f"{done.returncode}: {done.stderr!r}")


def check_gradescope(args):
    """The autograder zip has setup.sh and run_autograder; run_autograder grades a submission
    into results/results.json (paths from the environment, no /autograder needed)."""
    work = tempfile.mkdtemp(prefix="gradescope-", dir=WORK)
    zip_path = os.path.join(work, "autograder.zip")
    secret = os.path.join(work, "secret.txt")
    with open(secret, "w") as f:
        f.write(SECRET + "\n")
    subprocess.run([sys.executable, os.path.join(ROOT, "grader", "make_gradescope_zip.py"),
                    args.exercise, "--secret-file", secret, "--out", zip_path], check=True)
    root = os.path.join(work, "autograder")
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        for needed in ("setup.sh", "run_autograder", "repo/grader/grade.py", "grader_secret.txt"):
            if needed not in names:
                fail(f"the zip lacks {needed}")
        z.extractall(os.path.join(root, "source"))  # where Gradescope unpacks it
    os.makedirs(os.path.join(root, "submission", "nested"))
    with open(solution_path(args)) as f, open(os.path.join(
            root, "submission", "nested", spec_of(args.exercise)["submission_file"]), "w") as g:
        g.write(f.read())
    run = os.path.join(root, "source", "run_autograder")
    os.chmod(run, 0o755)
    env = dict(os.environ, AUTOGRADER_ROOT=root, ATTN_GRADER_BUILD=args.build_dir)
    first = [c["name"] for c in spec_of(args.exercise)["cases"][:2]]
    done = subprocess.run([run, "--cases", ",".join(first) + ",hidden_0[12],performance"],
                          capture_output=True, text=True, env=env)
    print(done.stdout[-3000:], done.stderr[-3000:])
    path = os.path.join(root, "results", "results.json")
    if not os.path.isfile(path):
        fail("run_autograder wrote no results/results.json")
    with open(path) as f:
        res = json.load(f)
    check_gradescope_shape(res)
    names = {t["name"] for t in res["tests"]}
    score, top = totals(res)
    if not {"hidden_01", "hidden_02", first[0]} <= names or score != top or top <= 0:
        fail(f"run_autograder: want full marks with the hidden cases, got {score} / {top}")
    hidden = next(t for t in res["tests"] if t["name"] == "hidden_01")
    if hidden["visibility"] != "after_due_date":
        fail("hidden cases must be after_due_date")
    if os.stat(os.path.join(root, "source", "grader_secret.txt")).st_mode & 0o077:
        fail("run_autograder must leave the secret readable by its owner only")


# What the submission's program must not contain (grader/README.md, "Case programs"): the
# oracles a submission could call through its own symbol table.
ORACLES = ("attn_reference*", "attn_check_*", "attn_block_mask_from_mask",
           "attn_block_mask_validate", "attn_block_mask_count_empty", "attn_example_main",
           "*_solution")


def check_runner_links(args):
    """The submission's program as built links no reference, checker, exact block-mask builder
    or solution (nm of its symbol table), and the checker does link them (the check can fail)."""
    import fnmatch
    with open(os.path.join(args.build_dir, "grader", f"{args.exercise}.sim.json")) as f:
        info = json.load(f)
    for key, want_none in (("runner", True), ("program", False)):
        # under grade.py's build lock: a grader running beside this test relinks the runner
        with open(os.path.join(args.build_dir, "grader", "build.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(["nm", "--defined-only", info[key]], capture_output=True,
                                  text=True, check=True)
        names = {line.split()[-1] for line in done.stdout.splitlines() if line.strip()}
        found = sorted(n for n in names if any(fnmatch.fnmatchcase(n, p) for p in ORACLES))
        print(f"{os.path.basename(info[key])}: {len(names)} symbols, oracles: {found[:6]}")
        if want_none and found:
            fail(f"the submission's program links {', '.join(found[:5])}")
        if not want_none and not found:
            fail("the checker links no oracle: the check above cannot see one")


def check_modes(args):
    """The weaker sandboxes, forced where a stronger one works (ATTN_GRADER_SANDBOX): "user"
    (nobody, no namespaces: cases one at a time, nobody's files removed after each; hidden cases
    refused while the solution's text is readable by others) and "none" (the grader's own user:
    the seccomp filters only; hidden cases refused). Needs root for "user"; as another user only
    "none" is tried."""
    spec = spec_of(args.exercise)
    first = spec["cases"][0]["name"]
    modes = ["user", "none"] if os.geteuid() == 0 else ["none"]
    g = grade_module()
    # A chapter inside a folder that nobody may not enter (mode 0700, as mktemp -d makes: WORK
    # is one): the user mode says which folder and the fix, before anything is built.
    inner = tempfile.mkdtemp(dir=WORK)
    os.chmod(inner, 0o755)
    closed = g.closed_to_nobody(inner)
    if closed is None or os.stat(closed).st_mode & 0o001 or not inner.startswith(closed + "/"):
        fail(f"closed_to_nobody({inner}) = {closed}: want the folder that nobody cannot enter")
    g._SANDBOX[:] = ["user"]
    try:
        g.refuse_unreachable({"_dir": inner}, argparse.Namespace(build_dir=args.build_dir))
        fail("user mode: a chapter folder that nobody cannot enter was not refused")
    except g.UsageError as e:
        if f"cannot enter {closed} " not in str(e) or f"chmod o+x {closed}" not in str(e):
            fail(f"user mode, a closed folder: the refusal must name it and the fix: {e}")
    g._SANDBOX[:] = []
    for mode in modes:
        env = dict(os.environ, ATTN_GRADER_SANDBOX=mode)
        env.pop("ATTN_GRADER_SECRET", None)
        # the solution, public cases: full marks; the sandbox is named in the report
        out = tempfile.mkdtemp(prefix=f"modes-{mode}-", dir=WORK)
        done = subprocess.run([sys.executable, GRADE, args.exercise, solution_path(args),
                               "--build-dir", args.build_dir, "--out", out, "--cases",
                               first], capture_output=True, text=True, env=env)
        print(done.stdout[-1500:], done.stderr[-1500:])
        report = ""
        if os.path.isfile(os.path.join(out, "report.md")):
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
        if done.returncode != 0 or f"sandbox: {SANDBOX_WORDS[mode]}" not in report:
            fail(f"{mode} mode: the solution must get full marks, the report name the sandbox "
                 f"({done.stderr.strip()[-300:]})")
        # hidden cases: refused where the submission could read the secret or the solution
        done = subprocess.run([sys.executable, GRADE, args.exercise, solution_path(args),
                               "--build-dir", args.build_dir, "--out", out, "--cases", first],
                              capture_output=True, text=True,
                              env=dict(env, ATTN_GRADER_SECRET=SECRET))
        lines = done.stderr.strip().splitlines()
        readable = os.stat(solution_path(args)).st_mode & 0o004
        if mode == "none" or readable:
            if done.returncode != 2 or len(lines) != 1 or "grade" not in lines[0]:
                fail(f"{mode} mode with the secret: want one line and exit 2, got "
                     f"{done.returncode}: {done.stderr!r}")
        # a secret file others can read: refused in every mode
        secret_file = os.path.join(out, "open-secret.txt")
        with open(secret_file, "w") as f:
            f.write(SECRET)
        os.chmod(secret_file, 0o644)
        done = subprocess.run([sys.executable, GRADE, args.exercise, solution_path(args),
                               "--build-dir", args.build_dir, "--out", out, "--secret-file",
                               secret_file], capture_output=True, text=True, env=env)
        if done.returncode != 2 or "readable by others" not in done.stderr:
            fail(f"{mode} mode: a secret file readable by others must be refused")
    # A checker copy that is gone or changed while grading: a failed case saying so, no crash.
    case = g.all_cases(spec, None, "sim")[0]
    copy = os.path.join(tempfile.mkdtemp(dir=WORK), "checker")
    with open(copy, "w") as f:
        f.write("#!/bin/sh\n")
    g._CHECKERS[copy] = g.file_digest(copy)
    for change in ("replaced", "removed"):
        if change == "replaced":
            with open(copy, "w") as f:
                f.write("#!/bin/sh\necho '{\"passed\": true, \"fraction\": 1}'\n")
        else:
            os.unlink(copy)
        result = g.run_case((copy, copy + "-runner", copy + "-exec"), case, 5, 1, ("", ""),
                            False)
        if result[1] != "failed" or "checker program was removed or changed" not in result[2]:
            fail(f"a checker {change} while grading: want a failed case saying so, got {result}")
    print(f"modes tried: {', '.join(modes)}; a checker replaced or removed: a failed case")


# The first words of each sandbox's line in report.md (grade.py's SANDBOX_NAMES).
SANDBOX_WORDS = {"user": "each compile and case as nobody (no namespaces",
                 "none": "the grader's own user"}


# ---- planted cheats (cheats.json) -------------------------------------------------------------

# A cheat without "exercise" is planted in exercise 01 only: what it attacks (grade.py,
# grader_exec, the seccomp filters, grader_runner.c, the compile's sandbox) is the same code for
# every exercise; what differs per exercise has cheats of its own (call_solution_02,
# patch_seccomp_03) and the check runner_links (each submission's program).
CHEAT_EXERCISE = "01_mini_flash"


def cheats(exercise):
    """{name: cheat} of cheats.json that apply to the exercise."""
    with open(os.path.join(HERE, "cheats.json")) as f:
        doc = json.load(f)
    return {n: c for n, c in doc.items() if not n.startswith("_")
            and c.get("exercise", CHEAT_EXERCISE) == exercise}


def list_cheats(exercise, preset=""):
    """The cheat:<name> tests to register: those of the plain build, or of `preset` (check)."""
    for name, cheat in sorted(cheats(exercise).items()):
        if preset in cheat.get("presets", [""]):
            print(name)


def cheat_copy(args, name, folder, **fill):
    """The cheat `name` written as the submission file in folder (@OUT@, @VICTIM@, ... filled)."""
    cheat = cheats(args.exercise)[name]
    body = ""
    base = cheat["base"]
    if base.startswith("planted:"):  # a planted bug of planted.json, hidden by the cheat
        body = open(planted_copy(args, base.split(":", 1)[1])[0]).read()
    elif base != "empty":
        with open(skeleton_path(args) if base == "skeleton" else solution_path(args)) as f:
            body = f.read()
    for text, replacement in cheat.get("replace", []):
        if body.count(text) != 1:
            fail(f"cheat {name}: the text {text!r} is not in the {base} exactly once")
        body = body.replace(text, replacement)
    extra = cheat.get("append", "")
    for key, value in fill.items():
        extra = extra.replace(f"@{key.upper()}@", value)
    path = os.path.join(folder, spec_of(args.exercise)["submission_file"])
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(body + "\n" + extra)
    return path, cheat


def solution_text_lines(args):
    """Lines of the solution that the shipped skeleton does not have (long enough to be the
    solution's own text): none may reach a learner's output."""
    with open(solution_path(args)) as f:
        sol = [l.strip() for l in f]
    with open(skeleton_path(args)) as f:
        skel = {l.strip() for l in f}
    return [l for l in sol
            if len(l) >= 30 and l not in skel and not l.startswith(("//", "/*", "*"))]


MARKERS = ("attn_cheat",)  # the files a cheat leaves behind are named so (nothing_left)


# The System V IPC keys of the cheats' queues, segments and semaphores (0x4174746e..0x41747470:
# "Attn" .. "Attp"): nothing_left looks for them too.
IPC_KEYS = range(0x4174746e, 0x41747471)


def left_behind():
    found = []
    for top in ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"):
        try:
            found += [os.path.join(top, n) for n in os.listdir(top) if n.startswith(MARKERS)]
        except OSError:
            pass
    for kind in ("msg", "shm", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = [line.split() for line in f.read().splitlines()[1:]]
        except OSError:
            continue
        found += [f"System V {kind} key {int(r[0]) & 0xffffffff:#x}" for r in rows
                  if r and int(r[0]) & 0xffffffff in IPC_KEYS]
    return found


def remove_ipc():
    """Removes what a cheat left in the System V and POSIX IPC of this machine (so that a failed
    run does not change the next); True if a POSIX queue of a cheat was there."""
    if shutil.which("ipcrm"):
        for flag in ("-Q", "-M", "-S"):  # message queues, shared memory, semaphores
            for key in IPC_KEYS:
                subprocess.run(["ipcrm", flag, f"{key:#x}"], capture_output=True)
    try:
        import ctypes
        rt = ctypes.CDLL("librt.so.1", use_errno=True)
        return rt.mq_unlink(b"/attn_cheat_mq") == 0
    except (OSError, AttributeError):
        return False


def check_cheat(args, name):
    """A planted cheat must lose points (score 0 for most), say what it is told to, show no
    secret and no solution text, and leave every other file alone."""
    work = tempfile.mkdtemp(prefix=f"cheat-{name}-", dir=WORK)
    os.chmod(work, 0o755)
    cheat = cheats(args.exercise)[name]
    kinds = cheat["check"] if isinstance(cheat["check"], list) else [cheat["check"]]
    spec = spec_of(args.exercise)
    first = spec["cases"][0]["name"]
    fill_cases = {"@FIRST@": first, "@SECOND@": spec["cases"][1]["name"]}
    cases = [fill_cases.get(c, c) for c in cheat.get("cases", [])]
    if "nothing_left" in kinds:
        remove_ipc()  # what an earlier run (of an older grader) left is not this run's
    if "victim_kept" in kinds:
        folder = os.path.join(work, "class")
        victim = os.path.join(folder, "alice", spec["submission_file"])
        os.makedirs(os.path.dirname(victim))
        shutil.copy(solution_path(args), victim)
        with open(victim, "rb") as f:
            before = f.read()
        cheat_copy(args, name, os.path.join(folder, "aaa_mallory"), victim=victim)
        out = os.path.join(work, "out")
        done = subprocess.run([sys.executable, GRADE, args.exercise, folder, "--build-dir",
                               args.build_dir, "--out", out, "--cases", first],
                              capture_output=True, text=True)
        print(done.stdout, done.stderr)
        with open(os.path.join(out, "class.csv")) as f:
            rows = {r[0]: r for r in (line.split(",") for line in f.read().splitlines()[1:])}
        with open(victim, "rb") as f:
            if f.read() != before:
                fail("the cheat overwrote another learner's submission")
        if float(rows["aaa_mallory"][1]) != 0 or rows["alice"][1] != rows["alice"][2]:
            fail("class: the cheat must score 0 and the learner beside it full marks")
        return
    out = os.path.join(work, "out")
    os.makedirs(out)
    solution_tu = os.path.join(args.build_dir, "cudasim_gen", "solutions", args.exercise,
                               spec["submission_file"] + ".cpp")
    secret_file = os.path.join(work, "secret.txt")
    with open(secret_file, "w") as f:
        f.write(SECRET + "-file\n")
    os.chmod(secret_file, 0o600)
    path, _ = cheat_copy(args, name, os.path.join(work, "sub"), out=out, solution_tu=solution_tu,
                         solution=solution_path(args), secret=secret_file)
    extra = []
    if "no_secret" in kinds:  # the secret both ways: a file on the command line and a variable
        extra = ["--secret-file", secret_file]
    if "no_cache_hit" in kinds:
        extra = ["--jobs", "1", "--cases", ",".join(c["name"] for c in spec["cases"][:2])]
    if "finishes" in kinds and not cases:  # one case, a 5 s limit: a grader that waits fails
        extra = ["--cases", first, "--timeout", "5"]
    if cases:
        extra += ["--cases", ",".join(cases)]
    if cheat.get("compile_timeout"):
        extra += ["--compile-timeout", str(cheat["compile_timeout"])]
    env = dict(os.environ, ATTN_GRADER_SECRET=SECRET)
    if args.sandbox:  # a weaker sandbox than the machine's (the secret is refused there)
        env["ATTN_GRADER_SANDBOX"] = args.sandbox
        env.pop("ATTN_GRADER_SECRET")
        extra = [a for a in extra if a != "--secret-file" and a != secret_file]
    start = time.monotonic()
    done = subprocess.run([sys.executable, GRADE, args.exercise, path, "--build-dir",
                           args.build_dir, "--out", out] + extra, capture_output=True, text=True,
                          env=env, timeout=300)
    seconds = time.monotonic() - start
    print(done.stdout[-3000:], done.stderr[-2000:])
    if "finishes" in kinds and seconds > 30:
        fail(f"the grader took {seconds:.0f} s on this cheat")
    if "results_kept" in kinds:
        # a process that the cheat leaves behind (outlives_s: it waits for report.md, then 1 s)
        # would have written by now; a cheat that leaves none is looked at at once
        time.sleep(cheat.get("outlives_s", 0))
    try:
        with open(os.path.join(out, "results.json")) as f:
            res = json.load(f)
    except ValueError:
        fail("results.json is not the grader's: rewritten by a process of the submission")
    with open(os.path.join(out, "report.md")) as f:
        report = f.read()
    score, top = totals(res)
    print(f"cheat {name}: {score:g} / {top:g}")
    if "did not finish" in res.get("output", ""):
        fail("results.json says the grading did not finish")
    if "loses" in kinds:
        if score >= top or done.returncode != 1:
            fail(f"cheat '{name}' ({cheat['why']}) lost no points (exit {done.returncode})")
    elif score != 0 or top <= 0 or done.returncode != 1:
        fail(f"cheat '{name}' ({cheat['why']}) must score 0 (exit {done.returncode})")
    by_name = {t["name"]: t for t in res["tests"]}
    for case in cheat.get("fails", []):
        if case not in by_name or by_name[case]["score"] >= by_name[case]["max_score"]:
            fail(f"cheat '{name}': case {case} did not lose its points")
    seen = done.stdout + done.stderr + json.dumps(res) + report
    if cheat.get("expect") and cheat["expect"] not in seen:
        fail(f"cheat '{name}': expected the message {cheat['expect']!r}")
    if "no_marker" in kinds and cheat["marker"] in seen:
        fail(f"cheat '{name}': its marker {cheat['marker']!r} reached the output")
    if "no_secret" in kinds and SECRET in seen:
        fail("the instructor secret reached the learner's output")
    if "no_solution_text" in kinds:
        shown = [l for l in solution_text_lines(args) if l in seen]
        if shown:
            fail(f"solution text reached the output: {shown[0]!r}")
    if "nothing_left" in kinds:
        left = left_behind()
        if remove_ipc():
            left.append("the POSIX message queue /attn_cheat_mq")
        if left:
            fail(f"left on the machine after grading: {', '.join(left)}")
    if "no_cache_hit" in kinds and "CACHE-HIT" in seen:
        fail("a case found a file that an earlier case left in /tmp")
    if "results_kept" in kinds and (os.path.exists(os.path.join(out, "cheat_was_here"))
                                    or len(os.listdir(out)) != 2):
        fail(f"a process of the submission outlived the grader and wrote in {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=".")
    ap.add_argument("--exercise", required=True)
    ap.add_argument("--list-planted", metavar="SANITIZER", nargs="?", const="",
                    help="print the planted bugs to test (under SANITIZER: those marked for it)")
    ap.add_argument("--list-cheats", metavar="PRESET", nargs="?", const="",
                    help="print the planted cheats (of the plain build, or of PRESET: check)")
    ap.add_argument("--sandbox", help="cheat:<name> under this (weaker) sandbox mode")
    ap.add_argument("check", nargs="?")
    args = ap.parse_args()
    if args.list_planted is not None:
        print("\n".join(planted_names(args.exercise, args.list_planted)))
        return
    if args.list_cheats is not None:
        list_cheats(args.exercise, args.list_cheats)
        return
    args.build_dir = os.path.abspath(args.build_dir)
    # CTest runs these checks after the build: grade.py need not bring the grader's programs up
    # to date again (ATTN_GRADER_BUILT), but in the class runs, the first check of each exercise,
    # which runs that step as a grader would.
    if args.check != "class":
        os.environ["ATTN_GRADER_BUILT"] = "1"
    else:
        os.environ.pop("ATTN_GRADER_BUILT", None)
    checks = {"solution": check_solution, "skeleton": check_skeleton, "hang": check_hang,
              "crash": check_crash, "compile_error": check_compile_error, "class": check_class,
              "hidden": check_hidden, "usage": check_usage, "gradescope": check_gradescope,
              "modes": check_modes, "runner_links": check_runner_links, "links": check_links}
    if args.check.startswith("planted:"):
        check_planted(args, args.check.split(":", 1)[1])
    elif args.check.startswith("cheat:"):
        check_cheat(args, args.check.split(":", 1)[1])
    elif args.check in checks:
        checks[args.check](args)
    else:
        fail(f"unknown check {args.check}")
    print("PASS")


if __name__ == "__main__":
    main()
