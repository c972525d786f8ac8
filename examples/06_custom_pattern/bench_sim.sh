#!/usr/bin/env bash
# bench_sim.sh — the brief's speedup table (50 % density @ 4K, 25 % @ 8K, 10 % @ 16K vs dense)
# measured on the CPU simulator at half the lengths (2K, 4K, 8K: what the simulator runs in
# minutes), B=1 H=1 D=64 f16 causal, the ladder's s and w chosen with ladder.py for each density
# (at 8K the ladder alone, s=0, w=1, is 10 %: its rungs are log2 of the length).
# Writes results/bench_sim.txt (the program's output); make_tables.py turns it into the table of
# README.md. The simulator's times are CPU times, not GPU performance.
# Usage: examples/06_custom_pattern/bench_sim.sh [PROGRAM] (default: the sim build's)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prog="${1:-$here/../../build/sim/examples/06_custom_pattern/custom_pattern_sim}"
out="$here/results/bench_sim.txt"
: >"$out"
for row in "2048 0.50 ladder:b=64,s=1,w=8" "4096 0.25 ladder:b=64,s=1,w=5" \
    "8192 0.10 ladder:b=64,s=0,w=1"; do
    set -- $row
    echo "## L=$1 target=$2 pattern=$3" >>"$out"
    nice -n 10 "$prog" -B 1 -H 1 -L "$1" -D 64 --dtype f16 --causal --reps 2 --warmup 0 \
        --pattern "$3" >>"$out" 2>&1
done
