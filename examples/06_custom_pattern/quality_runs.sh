#!/usr/bin/env bash
# quality_runs.sh — the quality runs this example's README and report quote, which are phases of
# the quality toolkit's one recompute (quality/recompute.py; its results are committed in
# quality/results/, and make_tables.py regenerates the tables from them):
#   512      the ladder against sink+window, strided, BigBird and DSA top-k (oracle) at about
#            23 % of the causal entries, and its three ablations, on 32 windows of 512 tokens of
#            each text (Austen, the King James Bible, the Go standard library)
#   train    the lightning indexer (for the DSA top-k with the trained indexer)
#   512-dsa  dense (with the recall probe) and the trained indexer on the same windows
#   2k, 8k   the same families at 2,048 and 8,192 tokens (Austen, the frontier's 23 % point)
#   passkey  passkey retrieval at 1,024 and 2,048 tokens, 5 depths x 5 keys
# Jobs already done are skipped (results/raw/*.jsonl); quality/README.md ("Recomputing
# everything") gives the time each phase took on 2 shared cores.
# Usage: examples/06_custom_pattern/quality_runs.sh [PYTHON [PHASES]]
#        (default .venv/bin/python, PHASES 512,train,512-dsa,2k,passkey,8k)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${1:-$root/.venv/bin/python}"
nice -n 19 "$py" "$root/quality/recompute.py" --phases "${2:-512,train,512-dsa,2k,passkey,8k}"
"$py" "$root/examples/06_custom_pattern/make_tables.py" --figures
