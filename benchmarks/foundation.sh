#!/usr/bin/env bash
# benchmarks/foundation.sh — the foundation's figures, written as JSON Lines under
# benchmarks/results/<device>/foundation.jsonl, each line stamped with device, CUDA version,
# commit and date:
#   * simulator: fiber switch cost and a 64 blocks x 256 threads x 10 barriers launch
#     (cudasim_bench), and Example 01 at B=1 H=4 L=1024 D=64;
#   * GPU (when one is present): Example 01 at B=4 H=8 D=64, L=2048 and L=8192.
# Usage: benchmarks/foundation.sh [build-dir]   (default: build/default, else build/sim)
# Simulator timings are CPU timings: they say how long the simulator takes, not how fast a GPU is.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
build="${1:-}"
if [ -z "$build" ]; then
    for b in build/default build/sim; do [ -d "$b" ] && build=$b && break; done
fi
[ -n "$build" ] && [ -d "$build" ] || { echo "error: no build directory (run scripts/run.sh first)" >&2; exit 2; }
ex="$build/examples/01_attention_basics"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)
stamp() { # adds the provenance keys to every JSON line on stdin
    sed "s|^{|{\"commit\":\"$commit\",\"date\":\"$date\",\"cuda\":\"${cuda:-none}\",\"host_cpu\":\"$cpu\",|"
}
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
cpu="${cpu:-unknown cpu}, $(nproc) cores"

# --- simulator figures ---
dev="cudasim-$(echo "$cpu" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')"
out="benchmarks/results/$dev"
mkdir -p "$out"
tmp=$(mktemp)
echo "simulator figures -> $out/foundation.jsonl"
bench="$build/common/cudasim/cudasim_bench"
[ -x "$bench" ] || { echo "error: $bench not built" >&2; exit 1; }
"$bench" | tee /dev/stderr | grep '^{' >"$tmp" # its JSON lines; the human lines go to the terminal
"$ex/naive_attention_sim" -B 1 -H 4 -L 1024 -D 64 --reps 3 --warmup 1 --json "$tmp"
stamp <"$tmp" >"$out/foundation.jsonl"
rm -f "$tmp"

# --- GPU figures ---
if [ -x "$ex/naive_attention_gpu" ]; then
    tmp=$(mktemp)
    set +e
    "$ex/naive_attention_gpu" -B 4 -H 8 -L 2048 -D 64 --json "$tmp"
    rc=$?
    set -e
    if [ $rc -eq 77 ]; then
        echo "no GPU here: GPU figures skipped"
    else
        [ $rc -eq 0 ] || { echo "error: naive_attention_gpu failed ($rc)" >&2; exit 1; }
        "$ex/naive_attention_gpu" -B 4 -H 8 -L 8192 -D 64 --reps 5 --json "$tmp"
        gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
        mkdir -p "benchmarks/results/$gpu"
        stamp <"$tmp" >"benchmarks/results/$gpu/foundation.jsonl"
        echo "GPU figures -> benchmarks/results/$gpu/foundation.jsonl"
    fi
    rm -f "$tmp"
fi
