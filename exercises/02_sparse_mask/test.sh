#!/usr/bin/env bash
# test.sh — Exercise 02's public tests, one command: builds YOUR sparse_mask.cu into the case
# program on the simulator (build/sim, preset sim) and runs every public case of grading.json,
# one line per case, then the points. The grader runs the same cases (and hidden ones).
#   exercises/02_sparse_mask/test.sh               your sparse_mask.cu
#   exercises/02_sparse_mask/test.sh --solution    the solution's (what full marks look like)
#   exercises/02_sparse_mask/test.sh reach density only these cases
# Exit status: 0 when every case run passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
target=sparse_mask_check_sim
if [[ "${1:-}" == "--solution" ]]; then
  target=sparse_mask_check_solution_sim
  shift
fi
[[ -f build/sim/CMakeCache.txt ]] || cmake --preset sim >/dev/null
cmake --build --preset sim --target "$target" -j "$(nproc)" >/dev/null ||
  { echo "build failed: run 'cmake --build --preset sim --target $target' to see why"; exit 1; }
exec python3 - "build/sim/exercises/02_sparse_mask/$target" "exercises/02_sparse_mask/grading.json" "$@" <<'PY'
import json, os, subprocess, sys
prog, spec_path, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])
spec = json.load(open(spec_path))
got = total = 0.0
all_passed = True
for n, case in enumerate(spec["cases"]):
    if only and case["name"] not in only:
        continue
    cmd = [prog, "--case", case["name"], "--seed", str(case.get("seed", n + 1))] + case["args"] + ["--json"]
    env = dict(os.environ, **case.get("env", {}))
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=spec["timeout_s"])
        lines = run.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {"passed": False, "fraction": 0,
                 "message": "no result (crashed, exit %d): %s" % (run.returncode, run.stderr.strip()[-300:])}
    except subprocess.TimeoutExpired:
        result = {"passed": False, "fraction": 0, "message": "timed out after %s s" % spec["timeout_s"]}
    points = case["points"] * result["fraction"]
    got, total = got + points, total + case["points"]
    all_passed &= result["passed"]
    print("%-4s %-26s %4.1f/%-3g %s" % ("PASS" if result["passed"] else "FAIL", case["name"], points,
                                        case["points"], result["message"]))
print("public cases: %.1f of %g points (hidden cases and, on a GPU, performance are graded too)" % (got, total))
sys.exit(0 if all_passed else 1)
PY
