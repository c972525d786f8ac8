#!/usr/bin/env bash
# test.sh — Exercise 02's public tests in one command: the grader (scripts/grade.sh) on YOUR
# sparse_mask.cu, public cases only, on the simulator; one line per case, then the points.
#   exercises/02_sparse_mask/test.sh               your sparse_mask.cu
#   exercises/02_sparse_mask/test.sh --solution    the solution's (what full marks look like)
#   exercises/02_sparse_mask/test.sh reach density only these cases
# Exit status: 0 at full marks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
file="$root/exercises/02_sparse_mask/sparse_mask.cu"
if [[ "${1:-}" == "--solution" ]]; then
    file="$root/solutions/02_sparse_mask/sparse_mask.cu"
    shift
fi
cases=()
if [[ $# -gt 0 ]]; then
    cases=(--cases "$(IFS=,; echo "$*")")
fi
exec "$root/scripts/grade.sh" 02_sparse_mask "$file" --out "$root/build/grade-02" "${cases[@]}"
