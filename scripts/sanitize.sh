#!/usr/bin/env bash
# scripts/sanitize.sh — NVIDIA compute-sanitizer over every example's GPU kernels at the test
# sizes (tail tiles, L = 1, Lq != Lk, causal, varlen with an empty sequence, every pattern kind):
#   memcheck    out-of-bounds and misaligned global/shared accesses, leaks
#   racecheck   shared-memory hazards between threads of a block (a missing __syncthreads)
#   synccheck   illegal barriers (__syncthreads in divergent code, wrong __syncwarp masks)
# Each (tool, case) runs an example program with --check-only, so the results are also checked
# against the CPU reference. One JSON line per run goes to --out, a table to the terminal.
#
# Usage: scripts/sanitize.sh [--tools LIST] [--build DIR] [--out FILE] [--list]
#   --tools   comma-separated, default memcheck,racecheck,synccheck
#   --build   the gpu build folder (default build/gpu: cmake --preset gpu && cmake --build ...)
#   --out     JSON Lines file (default: none)
#   --list    print the cases and exit
# compute-sanitizer is taken from $COMPUTE_SANITIZER, PATH, the CUDA toolkit, or the project's
# virtual environment (PyPI's nvidia-cuda-sanitizer-api, installed there when missing).
# Exit status: 0 no error reported, 1 an error or a failed check, 2 usage, 77 no GPU here.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$ROOT"

tools="memcheck,racecheck,synccheck"
build="build/gpu"
out=""
list=0
while [ $# -gt 0 ]; do
    case "$1" in
    --tools) tools="${2:?--tools needs a list}"; shift 2 ;;
    --build) build="${2:?--build needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a file}"; shift 2 ;;
    --list) list=1; shift ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for t in ${tools//,/ }; do
    case "$t" in
    memcheck | racecheck | synccheck | initcheck) ;;
    *) echo "error: unknown tool '$t': memcheck, racecheck, synccheck or initcheck" >&2; exit 2 ;;
    esac
done

# program (under $build/examples) | arguments. Small shapes: racecheck tracks every shared
# memory access, so a case takes seconds, not minutes.
cases=(
    "01_attention_basics/naive_attention_gpu|-B 1 -H 2 -L 77 -D 64 --dtype f32"
    "01_attention_basics/naive_attention_gpu|-B 2 -H 1 --lq 33 --lk 90 -D 32 --dtype f32 --causal"
    "02_flash_attention_minimal/flash_fwd_gpu|-B 1 -H 2 -L 129 -D 64"
    "02_flash_attention_minimal/flash_fwd_gpu|-B 1 -H 1 --lq 17 --lk 100 -D 128 --causal"
    "02_flash_attention_minimal/flash_fwd_gpu|-B 1 -H 1 -L 1 -D 32"
    "03_flash_attention_v2/flash2_fwd_gpu|-B 1 -H 2 -L 129 -D 64 --dtype f16 --causal"
    "03_flash_attention_v2/flash2_fwd_gpu|-B 1 -H 1 -L 200 -D 128 --dtype bf16"
    "03_flash_attention_v2/flash2_fwd_gpu|-H 2 -D 64 --dtype f16 --seqlens 100,0,37 --causal"
    "03_flash_attention_v2/flash2_fwd_gpu|-B 1 -H 1 --lq 70 --lk 150 -D 80 --dtype f32"
    "04_sparse_patterns/sparse_patterns_gpu|-B 1 -H 2 -L 300 -D 64 --dtype f16 --pattern window:w=32"
    "04_sparse_patterns/sparse_patterns_gpu|-B 1 -H 1 -L 333 -D 128 --dtype bf16 --causal --pattern bigbird:b=64,r=2,seed=1"
    "04_sparse_patterns/sparse_patterns_gpu|-H 2 -D 64 --dtype f16 --seqlens 150,0,70 --pattern dilated:w=8,d=3"
    "04_sparse_patterns/sparse_patterns_gpu|-B 1 -H 1 --lq 40 --lk 200 -D 64 --dtype f16 --causal --pattern strided:l=16+global:n=4"
)
if [ $list -eq 1 ]; then
    printf '%s\n' "${cases[@]}" | tr '|' ' '
    exit 0
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no NVIDIA GPU here (nvidia-smi finds none): compute-sanitizer needs one"
    exit 77
fi

find_sanitizer() {
    local c
    for c in "${COMPUTE_SANITIZER:-}" "$(command -v compute-sanitizer 2>/dev/null)" \
        "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")/compute-sanitizer" \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer /usr/local/cuda/bin/compute-sanitizer \
        "$ROOT"/.venv/lib/python3*/site-packages/nvidia/cu1*/bin/compute-sanitizer; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}
san=$(find_sanitizer)
if [ -z "$san" ]; then
    say "compute-sanitizer not found: installing PyPI's nvidia-cuda-sanitizer-api into .venv"
    attn_need_venv >/dev/null || die "no Python virtual environment for the sanitizer"
    cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
    "$ATTN_PY" -m pip install --quiet "nvidia-cuda-sanitizer-api~=${cuda:-13.0}.0" ||
        die "could not install compute-sanitizer (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)"
    san=$(find_sanitizer) || die "compute-sanitizer still not found after installing it"
fi
for c in "${cases[@]}"; do
    prog="$build/examples/${c%%|*}"
    [ -x "$prog" ] || die "$prog is not built: cmake --preset gpu && cmake --build --preset gpu"
done
say "$($san --version | tail -1) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

[ -n "$out" ] && : >"$out"
logs=$(mktemp -d)
failed=0
total=0
for tool in ${tools//,/ }; do
    for c in "${cases[@]}"; do
        prog="${c%%|*}"
        args="${c#*|}"
        total=$((total + 1))
        log="$logs/$total.log"
        start=$SECONDS
        # shellcheck disable=SC2086 # args are words
        "$san" --tool "$tool" --error-exitcode 99 --print-limit 20 \
            "$build/examples/$prog" --check-only --quiet $args >"$log" 2>&1
        rc=$?
        summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$log" | tail -1 | sed 's/^=* *//')
        if [ $rc -eq 0 ]; then
            status=PASS
        else
            status=FAIL
            failed=$((failed + 1))
        fi
        printf '%-5s %-9s %-40s %4d s  %s  %s\n' "$status" "$tool" "$(basename "$prog")" \
            $((SECONDS - start)) "${summary:-no summary (exit $rc)}" "$args"
        if [ $status = FAIL ]; then
            grep -E '^=+ ' "$log" | head -30
            tail -5 "$log"
        fi
        [ -n "$out" ] && printf '{"tool":"%s","program":"%s","args":"%s","status":"%s","exit":%d,"summary":"%s","seconds":%d}\n' \
            "$tool" "$prog" "$args" "$status" $rc "$summary" $((SECONDS - start)) >>"$out"
    done
done
rm -rf "$logs"
echo "compute-sanitizer: $total runs, $failed failed"
[ $failed -eq 0 ]
