#!/usr/bin/env python3
"""grader_class.py -- the grader's own wall time for a class, on the simulator (a benchmark, not a
test: grader/README.md quotes its result file).

    python3 benchmarks/grader_class.py                      30 copies of exercise 01's solution
    python3 benchmarks/grader_class.py --learners 5 --exercise 02_sparse_mask
    python3 benchmarks/grader_class.py --root /tmp/old \
        --out benchmarks/results/grader/class_01_mini_flash_before.json
                        the grader of another checkout (its grade.py, build/sim and solution),
                        e.g. an older commit, for a before/after

Makes a class folder of N learners, each holding a copy of the solution (one comment line
different, so that each is compiled), grades it with
grader/grade.py exactly as an instructor would (class mode, the public cases, --jobs 2), and writes
benchmarks/results/grader/class_<exercise>.json: the wall time, the time per learner, the cases per
learner, the sandbox the grader used, the machine and its load average when the run started (a
shared machine makes every figure larger). Every learner must get full marks, or the run
is not a measurement (exit 1). Standard library only.
"""
import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exercise", default="01_mini_flash")
    ap.add_argument("--learners", type=int, default=30)
    ap.add_argument("--root", default=ROOT, help="the checkout whose grader is measured")
    ap.add_argument("--build-dir", help="its build (default <root>/build/sim)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="result file (default benchmarks/results/grader/"
                    "class_<exercise>.json)")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    build_dir = args.build_dir or os.path.join(root, "build", "sim")
    if args.learners < 1:
        print("grader_class: error: --learners must be at least 1", file=sys.stderr)
        return 2
    with open(os.path.join(root, "exercises", args.exercise, "grading.json")) as f:
        spec = json.load(f)
    solution = os.path.join(root, "solutions", args.exercise, spec["submission_file"])
    out = args.out or os.path.join(ROOT, "benchmarks", "results", "grader",
                                   f"class_{args.exercise}.json")
    with tempfile.TemporaryDirectory(prefix="grader-class-") as work:
        folder = os.path.join(work, "class")
        with open(solution) as f:
            text = f.read()
        for n in range(1, args.learners + 1):
            learner = os.path.join(folder, f"learner_{n:02d}")
            os.makedirs(learner)
            # each copy differs (a last comment line), as a class's files do: every learner's
            # file is compiled (a grader may skip a compile when the file has not changed)
            with open(os.path.join(learner, spec["submission_file"]), "w") as f:
                f.write(text + f"// learner {n:02d}\n")
        grades = os.path.join(work, "out")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ATTN_GRADER_")}
        load = os.getloadavg()[0]  # the machine may be shared: the figure says how busy it was
        start = time.monotonic()
        done = subprocess.run([sys.executable, os.path.join(root, "grader", "grade.py"),
                               args.exercise, folder, "--build-dir", build_dir, "--out",
                               grades, "--jobs", str(args.jobs)], env=env, capture_output=True,
                              text=True)
        seconds = time.monotonic() - start
        with open(os.path.join(grades, "class.csv")) as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(grades, "learner_01", "results.json")) as f:
            cases = len([t for t in json.load(f)["tests"] if t["name"] != "compile"])
        with open(os.path.join(grades, "learner_01", "report.md")) as f:
            sandbox = next((l.split(":", 1)[1].strip() for l in f
                            if l.startswith("- sandbox:")), "")
    full = all(r["score"] == r["max_score"] for r in rows) and len(rows) == args.learners
    if done.returncode != 0 or not full:
        print(done.stdout[-2000:], done.stderr[-2000:])
        print("grader_class: not every learner got full marks: no measurement", file=sys.stderr)
        return 1
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    doc = {"exercise": args.exercise, "learners": args.learners, "seconds": round(seconds, 1),
           "seconds_per_learner": round(seconds / args.learners, 2),
           "cases_per_learner": cases, "jobs": args.jobs, "sandbox": sandbox,
           "machine": f"{cpu_name()}, {os.cpu_count()} cores", "load_average": round(load, 1),
           "backend": "sim",
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": commit}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
