#!/usr/bin/env python3
"""make_gradescope_zip.py -- builds a Gradescope autograder zip for one exercise (simulator).

  grader/make_gradescope_zip.py 01_mini_flash --secret-file secret.txt --out autograder.zip

Gradescope unpacks the zip into /autograder/source, runs setup.sh once when the image is built,
and runs run_autograder per submission (the learner's files in /autograder/submission); the
grader writes /autograder/results/results.json. The zip holds:
  setup.sh            installs the build tools, configures the sim preset, builds the grader
  run_autograder      grades the submission (the hidden cases come from grader_secret.txt)
  grader_secret.txt   the instructor secret (only with --secret-file)
  repo/               the chapter's files (git ls-files), solutions included: never give this zip
                      to learners
For a test without /autograder, run_autograder takes AUTOGRADER_ROOT and ATTN_GRADER_BUILD from
the environment (grader/README.md, "Gradescope").
"""
import argparse
import json
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = """#!/usr/bin/env bash
# Gradescope setup for {ex}: build tools, then the simulator build of the grader (once).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq cmake make g++ gcc libboost-context-dev python3 python3-pip >/dev/null
# The chapter needs CMake >= 3.24; older images get it from PyPI.
if ! printf '3.24\\n%s\\n' "$(cmake --version | awk 'NR==1{{print $3}}')" | sort -V -C; then
    python3 -m pip install -q 'cmake>=3.24' ||
        python3 -m pip install -q --break-system-packages 'cmake>=3.24'
    hash -r
fi
cd /autograder/source/repo
cmake --preset sim >/dev/null
cmake --build --preset sim -j "$(nproc)" --target grader_{ex}_sim grader_{ex}_runner_sim grader_exec
"""

RUN = """#!/usr/bin/env bash
# Gradescope entry point for {ex}: grades /autograder/submission into results/results.json.
# AUTOGRADER_ROOT and ATTN_GRADER_BUILD override the paths (the grader's own tests use them);
# extra arguments go to grade.py.
set -uo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
src="$root/source"
build="${{ATTN_GRADER_BUILD:-$src/repo/build/sim}}"
results="$root/results"
mkdir -p "$results"
secret=()
# the secret readable by its owner only: a case runs as nobody and knows this path (the grader
# refuses a secret others can read); so are the solutions' texts, which a container without
# namespaces would leave readable to the submission (the grader refuses that too)
[ -f "$src/grader_secret.txt" ] && chmod 600 "$src/grader_secret.txt" &&
    secret=(--secret-file "$src/grader_secret.txt")
chmod -R go-rwx "$src/repo/solutions" "$build/cudasim_gen/solutions" 2>/dev/null
python3 "$src/repo/grader/grade.py" {ex} "$root/submission" --one --build-dir "$build" \\
    --out "$results/report" --results "$results/results.json" "${{secret[@]}}" "$@" \\
    2>"$results/stderr.txt"
status=$?
cat "$results/stderr.txt" >&2
if [ $status -eq 2 ] || [ ! -f "$results/results.json" ]; then
    # No grading happened (e.g. no {file} in the submission): say why, with 0 points.
    python3 - "$results" <<'PY'
import json, sys
msg = open(sys.argv[1] + "/stderr.txt").read().strip() or "the grader failed"
json.dump({{"score": 0, "output": msg, "tests": [{{"name": "submission", "score": 0,
           "max_score": 0, "status": "failed", "output": msg, "visibility": "visible"}}]}},
          open(sys.argv[1] + "/results.json", "w"), indent=2)
PY
fi
exit 0
"""


def repo_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             check=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in (".git", "build", ".venv")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return sorted(f for f in files if os.path.isfile(os.path.join(ROOT, f)))


def add_text(z, name, text, executable):
    info = zipfile.ZipInfo(name)
    info.external_attr = (0o755 if executable else 0o644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, text)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exercise", help="e.g. 01_mini_flash")
    ap.add_argument("--secret-file", help="instructor secret for the hidden cases")
    ap.add_argument("--out", help="zip path (default autograder_<exercise>.zip)")
    args = ap.parse_args(argv)
    spec = os.path.join(ROOT, "exercises", args.exercise, "grading.json")
    if not os.path.isfile(spec):
        print(f"make_gradescope_zip: error: no exercise {args.exercise} ({spec})", file=sys.stderr)
        return 2
    if args.secret_file and not os.path.isfile(args.secret_file):
        print(f"make_gradescope_zip: error: no secret file {args.secret_file}", file=sys.stderr)
        return 2
    with open(spec) as f:
        filename = json.load(f)["submission_file"]
    out = args.out or f"autograder_{args.exercise}.zip"
    with zipfile.ZipFile(out, "w") as z:
        fmt = {"ex": args.exercise, "file": filename}
        add_text(z, "setup.sh", SETUP.format(**fmt), True)
        add_text(z, "run_autograder", RUN.format(**fmt), True)
        if args.secret_file:
            with open(args.secret_file) as f:
                add_text(z, "grader_secret.txt", f.read(), False)
        for rel in repo_files():
            z.write(os.path.join(ROOT, rel), "repo/" + rel, compress_type=zipfile.ZIP_DEFLATED)
    print(f"wrote {out}" + ("" if args.secret_file else " (no secret: public cases only)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
