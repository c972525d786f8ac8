#!/usr/bin/env bash
# scripts/run.sh — the chapter tour: builds the examples, runs each one in learning-path order,
# checked against the double-precision CPU reference (PASS/FAIL), and ends with the comparison
# table of the implementations on this machine.
#   scripts/run.sh                 the whole tour
#   scripts/run.sh --example 03    one example (build included)
#   scripts/run.sh --no-model      the whole tour without the closing table's modelled columns
#   scripts/run.sh --model         require them (exit 1 where clang-14/llvm-14 cannot be had)
#   scripts/run.sh --help
# On the simulator the closing table has modelled columns (DRAM bytes, FLOPs, FLOP/B, roofline
# bound on an H100) from the instrumented sim-check build (clang-14, installed when run as root;
# its build and runs take longer: GETTING_STARTED.md says how long); without clang-14 the table is
# printed without them.
# Backend: the GPU build (preset gpu, programs in build/gpu/) only where a GPU answers
# (`nvidia-smi -L` lists one); otherwise the CPU simulator (preset sim, build/sim/), even where
# nvcc is installed. Simulator runs use smaller sizes; their timings are CPU timings.
# Exit status: 0 when every example passed, 1 when one failed, 2 on a bad option.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
only=""
model=auto
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --model) model=1; shift ;;
    --no-model) model=0; shift ;;
    --example)
        [ $# -ge 2 ] || { echo "error: --example needs a number (01, 02, ...)" >&2; exit 2; }
        [[ "$2" =~ ^[0-9]{1,2}$ ]] ||
            { echo "error: --example takes a number such as 03 (got '$2')" >&2; exit 2; }
        only=$(printf '%02d' "$((10#$2))")
        shift 2 ;;
    *) echo "error: unknown option '$1' (see scripts/run.sh --help)" >&2; exit 2 ;;
    esac
done

# An example number no folder has: said at once, before any configure or build.
if [ -n "$only" ] && ! compgen -G "examples/${only}_*/CMakeLists.txt" >/dev/null; then
    echo "error: no example $only in this checkout (ls examples/)" >&2
    exit 2
fi
attn_need_build_tools
if attn_have_gpu; then
    preset=gpu backend=gpu
    say "a GPU answers: $(nvidia-smi -L | head -1); using the GPU build (build/gpu)"
else
    preset=sim backend=sim
    say "no usable GPU here: using the CPU simulator build (build/sim); its timings are CPU timings"
fi
log="build/$preset/build.log"
mkdir -p "build/$preset"
start=$SECONDS
# The tour, in learning-path order: what each example folder declares (attn_example_tour in its
# CMakeLists.txt), one run per line of build/<preset>/tour.txt, written when the build is
# configured: NN | folder | program | simulator arguments | GPU arguments.
if ! cmake --preset "$preset" >"$log" 2>&1; then
    grep -E -A6 'Error|error' "$log" | head -60
    die "configuring the build failed (full log: $log)"
fi
runs=()
while IFS= read -r line; do
    [ -n "$line" ] || continue
    IFS='|' read -r nn _ <<<"$line"
    [ -z "$only" ] || [ "$nn" = "$only" ] || continue
    runs+=("$line")
done <"build/$preset/tour.txt"
if [ ${#runs[@]} -eq 0 ]; then
    echo "error: no example $only in this checkout (ls examples/)" >&2
    exit 2
fi

targets=()
for line in "${runs[@]}"; do
    IFS='|' read -r _ _ program _ <<<"$line"
    [[ " ${targets[*]-} " == *" ${program}_$backend "* ]] || targets+=("${program}_$backend")
done
# On the simulator (unless --no-model) the closing table comes from the instrumented build's
# benchmark, which adds the modelled columns (DRAM bytes, FLOP/B, roofline bound on an H100: the
# simulator's profile, common/cudasim/README.md) beside the timings; it is built in the background
# (preset sim-check) while the examples run, and the plain build's benchmark is not needed.
if [ -z "$only" ] && [ "$backend" = sim ] && [ "$model" != 0 ] && ! attn_need_check_tools; then
    [ "$model" = auto ] || die "--model needs clang-14 and llvm-14 (see above)"
    echo "the closing table comes without its modelled columns (clang-14 and llvm-14 missing)"
    model=0
fi
[ "$backend" = sim ] || model=0
[ -n "$only" ] || [ "$model" != 0 ] || targets+=("bench_attention_$backend")
step=0
steps=$((${#runs[@]} + 1))
[ -n "$only" ] || steps=$((steps + 1))
say "[$((++step))/$steps] configure and build (${targets[*]}; log: $log)"
if ! cmake --build --preset "$preset" -j "$JOBS" --target "${targets[@]}" >>"$log" 2>&1; then
    grep -E -A6 'error' "$log" | head -60
    die "the build failed (full log: $log)"
fi
echo "built in $((SECONDS - start)) s"
check_pid=""
if [ -z "$only" ] && [ "$model" != 0 ]; then
    say "building the instrumented benchmark for the modelled columns in the background (preset" \
        "sim-check; log: build/sim-check/build.log; scripts/run.sh --no-model skips it)"
    mkdir -p build/sim-check
    # its own process group, ended with the tour however the tour ends (Ctrl-C included)
    setsid bash -c 'cmake --preset sim-check && nice cmake --build --preset sim-check -j "$1" \
        --target bench_attention_sim' _ "$JOBS" >build/sim-check/build.log 2>&1 &
    check_pid=$!
    trap 'kill -- -"$check_pid" 2>/dev/null || true' EXIT
fi

verdicts=()
failed=0
for line in "${runs[@]}"; do
    IFS='|' read -r nn folder program sim_args gpu_args <<<"$line"
    args="$sim_args --reps 1" # the simulator: one timed run (its timings are CPU timings)
    [ $backend = gpu ] && args=$gpu_args
    exe="build/$preset/examples/$folder/${program}_$backend"
    say "[$((++step))/$steps] example $nn: $exe $args"
    t0=$SECONDS
    set +e
    # shellcheck disable=SC2086  # the arguments are words
    "$exe" $args
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then
        verdicts+=("example $nn ($program $args): PASS, $((SECONDS - t0)) s")
    elif [ $rc -eq 77 ]; then # cannot run here (it printed why): not a failure
        verdicts+=("example $nn ($program $args): SKIP (its line above says why)")
    else
        verdicts+=("example $nn ($program $args): FAIL (exit status $rc)")
        failed=1
    fi
done

if [ -z "$only" ]; then
    bench="build/$preset/benchmarks/bench_attention_$backend"
    if [ -n "$check_pid" ]; then
        say "waiting for the instrumented benchmark's build (build/sim-check/build.log)"
        if wait "$check_pid"; then
            bench=build/sim-check/benchmarks/bench_attention_sim
        else
            grep -E -A6 'error' build/sim-check/build.log | head -60
            echo "error: the sim-check build failed (full log: build/sim-check/build.log);" \
                "the closing table comes from the plain build, without its modelled columns" >&2
            failed=1
            cmake --build --preset "$preset" -j "$JOBS" --target "bench_attention_$backend" \
                >>"$log" 2>&1 || die "the build failed (full log: $log)"
        fi
    fi
    table_args="--grid seed-table --table"
    [ "$backend" = gpu ] || table_args="$table_args --reps 1" # as the examples: one timed run
    say "[$((++step))/$steps] the comparison table on this machine ($bench $table_args)"
    if "$bench" --grids 2>/dev/null | grep -q 'seed-table'; then
        # shellcheck disable=SC2086  # the arguments are words
        "$bench" $table_args || failed=1
    else
        echo "comparison table: not in this build ($bench has no --grid seed-table yet);"
        echo "  benchmarks/README.md lists the grids it has: $bench --grids"
    fi
fi

attn_cpu_seconds "build/$preset/tour.times" # CPU time too: GETTING_STARTED.md's times are so
say "summary ($backend backend, $((SECONDS - start)) s in all, $ATTN_CPU s of CPU on $(nproc) cores)"
printf '  %s\n' "${verdicts[@]}"
exit $failed
