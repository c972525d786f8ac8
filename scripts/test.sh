#!/usr/bin/env bash
# scripts/test.sh — builds every preset this machine can build and runs every test:
#   sim        the whole suite on the CPU simulator (unit, cudasim, examples, python)
#   gpu        compiled wherever nvcc is; its tests run on a GPU and skip (exit 77) without one
#              (the unit and docs checks ran in sim: not again)
#   sim-asan   cudasim + each example's representative cases and other tests under
#              AddressSanitizer/UBSan (label sanitize: tests/README.md)
#   sim-tsan   cudasim + each example's planted races and representative cases under ThreadSanitizer
#   sim-check  those example tests and the label check under memcheck, racecheck and initcheck
#              (clang-14)
# Options:
#   --fast       the quick suite: the sim build and its tests without the labels python, quality,
#                grading and standalone and one long case (the sim-fast test preset); no Python
#                set-up. Those, the other presets and the sanitizers are left to the full run.
#   --no-python  every preset, without the PyTorch set-up, the python and quality suites.
# Ends with one line "N passed, M failed, K skipped" and the time it took, wall and CPU; exit
# status 0 only if nothing failed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"

fast=0
python=1
for arg in "$@"; do
    case "$arg" in
    --fast) fast=1 ;;
    --no-python) python=0 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "error: unknown option '$arg' (see scripts/test.sh --help)" >&2; exit 2 ;;
    esac
done

attn_need_build_tools python || exit 1

presets=(sim)
if [ $fast -eq 0 ]; then
    attn_want_ccache
    attn_have_nvcc && presets+=(gpu) || say "nvcc not found: skipping the gpu preset"
    presets+=(sim-asan sim-tsan)
    # Not a GPU matter: without clang-14 the checked preset fails rather than skips.
    attn_need_check_tools && presets+=(sim-check) || missing_check=1
fi

results="$ROOT/build/test-results"
# Python's compiled modules (.pyc) are written once, under build/pycache, and read by every later
# Python process of the run, even where the environment says PYTHONDONTWRITEBYTECODE (then every
# process compiled again each module it imports, PyTorch's included: the python and quality
# suites took 329 s of CPU so, 240 s this way: tests/README.md, "Time budgets"). Neither the
# repository nor .venv gets a __pycache__.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$ROOT/build/pycache"
rm -rf "$results" && mkdir -p "$results"
failed_presets=()
[ "${missing_check:-0}" -eq 1 ] && failed_presets+=("sim-check(clang-14 and llvm-14 missing)")

# The Python set-up (.venv, the quality toolkit: minutes of downloads and unpacking on one core the
# first time) runs in the background while the presets build, after the apt steps above (one apt
# at a time); the sim preset is configured again with the interpreter once both are done.
py_flag=()
setup_pid=
if [ $python -eq 1 ] && [ $fast -eq 0 ]; then
    say "Python set-up (.venv, the quality toolkit) in the background: $results/setup.log"
    # setup.ok, once it is done: the interpreter, for the presets configured after it (build_presets)
    (attn_need_venv && attn_need_quality && echo "$ATTN_PY" >"$results/setup.ok") \
        >"$results/setup.log" 2>&1 &
    setup_pid=$!
fi
wait_for_python() {
    [ -n "$setup_pid" ] || return 0
    local rc=0
    wait "$setup_pid" || rc=$?
    setup_pid=
    if [ $rc -ne 0 ]; then
        cat "$results/setup.log"
        echo "error: the Python set-up failed (the log above: $results/setup.log)" >&2
        exit 1
    fi
    attn_need_venv || exit 1 # already installed: only sets ATTN_PY
    py_flag=(-DATTN_PYTHON="$ATTN_PY")
    say "Python set-up done ($ATTN_PY)"
}
# Every preset is configured and built by one make over one pool of $JOBS jobs (a GNU make
# jobserver that the presets' own Makefiles share): while one preset's build runs a single job (its
# configure, a link, the simulator's translator), another preset's compiles fill the other cores.
# The tests then run preset by preset, alone on the machine. Measured: tests/README.md, "Time budgets".
# Where no GPU answers, the gpu preset is a compile check (its tests skip): it compiles for sm_90
# alone (the Hopper code of example 10 and the FP8 paths need it), except the kernels whose
# registers and spills are tabled for sm_80 and sm_90 (attn_tabled_architectures,
# cmake/attn.cmake); with a GPU, for ATTN_CUDA_ARCHITECTURES (sm_80 and sm_90).
# There its device code is also optimised at -O1 only (ATTN_GPU_COMPILE_CHECK, cmake/attn.cmake),
# the tabled kernels excepted.
gpu_archs="80;90"
gpu_check=OFF
attn_have_gpu || { gpu_archs=90-real; gpu_check=ON; }
# preset_args <preset>: the configure arguments of every configure of <preset> (in pargs)
preset_args() {
    pargs=()
    [ "$1" = gpu ] && pargs=("-DATTN_CUDA_ARCHITECTURES=$gpu_archs" "-DATTN_GPU_COMPILE_CHECK=$gpu_check")
    return 0
}
# The presets that need the interpreter (below: "configure again with it"): each is configured with
# it in the pool already when the set-up is done by then (setup.ok), or configured again there
# right after its build, while the other presets' compiles go on (marker <preset>.python); only
# what is left is done after the pool, one preset at a time.
python_presets=" sim gpu sim-check "
build_presets() {
    local mk="$results/build.mk" p t=$'\t' args ok="$results/setup.ok" py
    for p in "$@"; do
        preset_args "$p"
        args=
        [ ${#pargs[@]} -eq 0 ] || args=$(printf " '%s'" "${pargs[@]}")
        py=
        [[ "$python_presets" == *" $p "* ]] && py=1
        cat <<MK
$p:
${t}@py=; if [ -n "$py" ] && [ -f "$ok" ]; then py="-DATTN_PYTHON=\$\$(cat "$ok")"; fi; \\
${t}  cmake --preset $p$args \$\${py:+"\$\$py"} >"$results/$p.configure.log" 2>&1 && touch "$results/$p.configured" && \\
${t}  { [ -z "\$\$py" ] || touch "$results/$p.python"; }
${t}+@if [ -f "$ROOT/build/$p/Makefile" ]; then \$(MAKE) --no-print-directory -C "$ROOT/build/$p"; \\
${t}  else cmake --build --preset $p -j $JOBS; fi >"$results/$p.build.log" 2>&1
${t}+@if [ -n "$py" ] && [ -f "$ok" ] && [ ! -f "$results/$p.python" ]; then \\
${t}  cmake --preset $p$args "-DATTN_PYTHON=\$\$(cat "$ok")" >>"$results/$p.configure.log" 2>&1 && \\
${t}  \$(MAKE) --no-print-directory -C "$ROOT/build/$p" >>"$results/$p.build.log" 2>&1 && \\
${t}  touch "$results/$p.python"; fi; true
${t}@touch "$results/$p.built"; printf '\\033[1m==> [%s] built\\033[0m\\n' $p
MK
    done >"$mk"
    make -k -j "$JOBS" --no-print-directory -f "$mk" "$@" || true
    for p in "$@"; do
        if [ ! -f "$results/$p.configured" ]; then
            cat "$results/$p.configure.log"
            failed_presets+=("$p(configure)")
        elif [ ! -f "$results/$p.built" ]; then
            grep -E -B2 -A8 'error' "$results/$p.build.log" | head -80
            failed_presets+=("$p(build)")
        fi
    done
}
start=$SECONDS
say "configure + build: ${presets[*]} (logs: $results/<preset>.build.log)"
build_presets "${presets[@]}"
background_setup=0
[ -n "$setup_pid" ] && background_setup=1
for preset in "${presets[@]}"; do
    [ -f "$results/$preset.built" ] || continue
    if [[ "$python_presets" == *" $preset "* ]] && [ $background_setup -eq 1 ] &&
        [ ! -f "$results/$preset.python" ]; then
        # Built without the interpreter while the set-up ran: configure again with it (sim: adds
        # the Python suites and what they build; gpu: the resource tables' tests, which read the
        # binaries with .venv's cuobjdump where the CUDA toolkit has none; sim-check: example
        # 12's library on a Hugging Face module's weights, which needs transformers).
        wait_for_python
        preset_args "$preset"
        if ! cmake --preset "$preset" "${pargs[@]}" "${py_flag[@]}" >>"$results/$preset.configure.log" 2>&1 ||
            ! cmake --build --preset "$preset" -j "$JOBS" >>"$results/$preset.build.log" 2>&1; then
            tail -40 "$results/$preset.configure.log" "$results/$preset.build.log"
            failed_presets+=("$preset(configure with Python)")
            continue
        fi
    fi
done
say "built in $((SECONDS - start)) s"
# require_registered <preset> <what> <ctest selection...>: fails the run unless the selection
# names at least one test of <preset>.
require_registered() {
    local preset=$1 what=$2 n
    shift 2
    n=$(ctest --preset "$preset" -N "$@" | awk '/Total Tests:/{print $3}')
    [ "${n:-0}" -gt 0 ] && return 0
    echo "error: $preset: no test matches $* ($what): not registered"
    failed_presets+=("$preset($what)")
}
# The Python tests' preload server is a daemon (tests/python/preload.py): no process this script
# waits for counts its CPU time, so its log says it (cpu_seconds), added below; none left over.
rm -f "$ROOT"/build/*/python_preload.log
for preset in "${presets[@]}"; do
    [ -f "$results/$preset.built" ] || continue
    say "[$preset] testing"
    start=$SECONDS
    # With Python set up, these must be registered: never pass by not running them.
    if [ $python -eq 1 ] && [ $fast -eq 0 ]; then
        case $preset in
        sim) require_registered sim python -L python ;;
        # the resource tables' check (cuobjdump: the CUDA toolkit's or .venv's)
        gpu) require_registered gpu resources -R '^resources\.no_spills_tables_current$' ;;
        sim-check) require_registered sim-check transformers -R '^example12\.library_checked$' ;;
        esac
    fi
    test_preset=$preset
    [ $fast -eq 0 ] || test_preset=sim-fast
    ctest --preset "$test_preset" -j "$JOBS" --output-junit "$results/$preset.xml" ||
        failed_presets+=("$preset")
    say "[$preset] tested in $((SECONDS - start)) s"
done

wait_for_python # where no preset reached it (the sim build failed): its failure still counts

# One summary over all presets, counted from CTest's JUnit files.
python3 - "$results" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
p = f = s = 0
for path in glob.glob(sys.argv[1] + "/*.xml"):
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "")
        if case.find("skipped") is not None or status == "notrun" and case.find("failure") is None:
            s += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            f += 1
        else:
            p += 1
print(f"{p} passed, {f} failed, {s} skipped")
PY
attn_cpu_seconds "$results/times.txt" # the time it took, wall and CPU (tests/README.md, "Time budgets")
ATTN_CPU=$((ATTN_CPU + $(cat "$ROOT"/build/*/python_preload.log 2>/dev/null |
    awk '$1 == "cpu_seconds" { s += $2 } END { printf "%.0f", s }')))
echo "took $SECONDS s, $ATTN_CPU s of CPU on $(nproc) cores"
if [ ${#failed_presets[@]} -gt 0 ]; then
    echo "failed: ${failed_presets[*]}"
    exit 1
fi
exit 0
