#!/usr/bin/env bash
# scripts/grade.sh — the grader in one command (grader/README.md). Configures and builds the
# simulator build (build/sim) the first time, then runs grader/grade.py:
#   scripts/grade.sh 01_mini_flash                        grade my exercise (public cases)
#   scripts/grade.sh 01_mini_flash path/to/mini_flash.cu  grade one submission
#   scripts/grade.sh 01_mini_flash submissions/           grade a class: class.csv + reports
# Options go to grade.py (scripts/grade.sh 01 --help). Instructors: ATTN_GRADER_SECRET(_FILE)
# adds the hidden cases; --build-dir build/gpu grades on a GPU (performance points too).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"

attn_need_build_tools python
if [ ! -f build/sim/CMakeCache.txt ]; then
    say "configuring build/sim (first time only)"
    cmake --preset sim >/dev/null || die "cmake --preset sim failed"
fi
exec python3 "$ROOT/grader/grade.py" "$@"
