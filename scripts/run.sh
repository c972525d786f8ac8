#!/usr/bin/env bash
# scripts/run.sh — builds the chapter and runs Example 01 (naive attention): on the GPU where
# there is one, otherwise on the CPU simulator. Extra arguments go to the example, e.g.
#   scripts/run.sh --causal -L 512          scripts/run.sh --help
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"

attn_need_build_tools
preset=sim
attn_have_nvcc && preset=default
say "configuring (preset '$preset')"
cmake --preset "$preset" >/dev/null
say "building (log: build/$preset/build.log)"
log="build/$preset/build.log"
if ! cmake --build --preset "$preset" -j "$JOBS" >"$log" 2>&1; then
    grep -E -A6 'error' "$log" | head -60
    die "the build failed (full log: $log)"
fi

ex="build/$preset/examples/01_attention_basics"
if [ -x "$ex/naive_attention_gpu" ]; then
    say "Example 01 on the GPU"
    set +e
    "$ex/naive_attention_gpu" "$@"
    rc=$?
    set -e
    [ $rc -ne 77 ] && exit $rc
    say "no usable GPU here (see the line above): running on the CPU simulator instead"
fi
say "Example 01 on the CPU simulator"
exec "$ex/naive_attention_sim" "$@"
