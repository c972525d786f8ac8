#!/usr/bin/env bash
# benchmarks/gpu.sh — the one command a machine with an NVIDIA GPU runs to measure the chapter's
# figures: builds bench_attention for this GPU's architecture, runs it and the PyTorch peers
# (bench_torch.py) over the dense grid and example 04's sparse grid (sparse patterns), and writes
#   benchmarks/results/<device>/bench_attention.jsonl   our kernels (checked, then timed)
#   benchmarks/results/<device>/bench_torch.jsonl       SDPA flash/cuDNN/efficient/math, FlexAttention, naive
#   benchmarks/results/<device>/backward.jsonl          example 07's forward + backward beside SDPA's
#   benchmarks/results/<device>/crossover*.jsonl        the crossover lab's kernels, the 128K table
#   benchmarks/results/<device>/flex08.jsonl            example 08 beside compiled FlexAttention, SDPA
#   benchmarks/results/<device>/meta.json               device, CUDA, driver, torch, commit, date, steps
#   benchmarks/results/<device>/plots/*.png|svg         plot.py and memory_analysis.py
# then regenerates the README tables (update_tables.py). Commit the results folder and READMEs.
#
# Usage: benchmarks/gpu.sh [--steps LIST] [--quick] [--deadline-s S]
#   --steps   comma-separated, run in this order (default all):
#             build,tests,sanitize,example10,c,torch,fp32,flex,sparse,flexsparse,ladder,deepseek,
#             backward,crossover,example08,decode,fp8,context_parallel,v4,plots
#             tests: the whole build, then its GPU tests (ctest -L gpu, the sanitizer's left out:
#             tests.xml in JUnit form, tests.txt the summary); sanitize: compute-sanitizer's
#             memcheck, racecheck and synccheck over examples 01-04 at the test sizes
#             (scripts/sanitize.sh, sanitizer.jsonl); c: bench_attention --grid dense; torch: the SDPA backends and naive PyTorch on the
#             same grid; fp32: examples 01/02 and FA2 v1 (fp32) at B=1 H=16 D=64; flex:
#             FlexAttention (compiled once per shape: the slowest step); sparse: example 04's
#             kernels and their dense baseline, bench_attention --grid sparse; flexsparse: the
#             peers on the same patterns (FlexAttention, SDPA with a mask where it fits) and
#             sdpa_flash on the dense problems, bench_torch.py --grid sparse; ladder: example
#             06's pattern at 50/25/10 % density, bench_attention --grid ladder; deepseek: example
#             05's pipeline on DeepSeek-like shapes and torch.topk (benchmarks/bench_deepseek.py);
#             backward: example 07's forward + backward TFLOP/s beside torch SDPA's backward,
#             and its block-sparse backward against density (bench_backward.py there);
#             crossover: the crossover lab's kernels (bench_attention --grid crossover) and the
#             course's 128K table (--grid seed-128k; bench_torch.py --grid seed-128k: SDPA dense
#             and torch.sparse), to which benchmarks/crossover.py fits its cost model and whose
#             measured columns replace "model" in its tables;
#             example08: example 08's modifications (causal, 8 documents, ALiBi, soft-cap) at
#             L 1k-16k, D 64/128, beside compiled FlexAttention and SDPA with an explicit
#             mask/bias (examples/08_flex_attention/bench_gpu.py, flex08.jsonl);
#             decode: example 09's decoding step, every version over B 1-64 and contexts 1K-128K,
#             its achieved bandwidth beside torch SDPA and flash_attn_with_kvcache (if
#             installed), DSA against dense at 32K and 128K, then version 10 on DeepSeek's MLA
#             shape (128 heads over one latent row of 576, bf16, pages of 64, B 1-64, contexts
#             1K-32K) beside SDPA on the same rows (examples/09_decode/bench_decode.py);
#             fp8: example 09's attention over its FP8 cache (K/V and FlashMLA's latent rows)
#             beside the 16-bit cache at the same points, and example 05's FP8 indexer beside
#             the 16-bit one (examples/09_decode/bench_fp8.py, fp8.jsonl, fp8.md; an H200's
#             --quick run in results/NVIDIA-H200);
#             context_parallel: example 11 on this one GPU, its ranks MPI processes sharing it
#             (--backend mpi: ring, zigzag, Ulysses at 1, 2 and 4 ranks, causal, L 8K; the
#             ranks' kernels share the GPU, so this checks and times the schedule, not a
#             multi-GPU speedup); the NCCL backend needs one GPU per rank and runs only where
#             nvidia-smi lists two or more (context_parallel.txt);
#             example10: example 10's FlashAttention-3 versions (an sm_90 GPU: H100/H200;
#             skipped elsewhere) at B 2, H 16, L 1k-16k, D 64/128, f16/bf16, causal or not
#             (fa3.jsonl), beside SDPA's FlashAttention and cuDNN backends on the same shapes
#             (bench_torch.py, fa3_torch.jsonl; on Hopper cuDNN's is its own FA3-class kernel);
#             and version 4, FP8 e4m3 (flash3_fp8, bf16 in and out, at the same B, H, L, D, causal
#             or not, checked on 64 rows: fa3_fp8.jsonl) beside FlashAttention-3's own FP8 forward
#             where flash_attn_interface is installed and SDPA on bf16 (bench_fa3_fp8.py,
#             fa3_fp8_peers.jsonl; an H200's --quick run in results/NVIDIA-H200);
#             v4: example 12's DeepSeek-V4 layer (compressor, indexer + top-k, CSA and HCA
#             attention, token-by-token decode), each kernel timed at V4's head shape (D 512,
#             window 128), L 2K and 8K (deepseek_v4.jsonl; 2K only so far, an H200's --quick run);
#             plots: figures + tables
#   --quick   L up to 4k only (a first look in about three minutes)
#   --deadline-s S  fit a lease: start no step after S seconds, and give each timed step at most
#             an even share of the time left among the steps still to run (its budget, its loops)
# Each step stops starting new problems when its time budget is spent (--budget-s), so the whole
# script stays within about 13 minutes on an H100, 21 with the crossover step (its budgets: 8
# minutes), plus example08's budget of 10 minutes, decode's of 150 s + 60 s, fp8's of 120 s and the backward step's
# fixed grid (none measured at the full grid yet); c and torch rewrite their file, the other steps append to it
# (rerun c or torch before rerunning one of those alone).
# Without a GPU it says so and exits 77.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

all_steps="build,tests,sanitize,example10,c,torch,fp32,flex,sparse,flexsparse,ladder,deepseek,backward,crossover,example08,decode,fp8,context_parallel,v4,plots"
steps=$all_steps
quick=0
deadline=0
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) steps="${2:?--steps needs a list}"; shift 2 ;;
    --quick) quick=1; shift ;;
    --deadline-s)
        deadline="${2:?--deadline-s needs seconds}"
        [[ "$deadline" =~ ^[1-9][0-9]*$ ]] || { echo "error: --deadline-s takes whole seconds, not '$deadline'" >&2; exit 2; }
        shift 2 ;;
    -h | --help) sed -n '2,/^# Without a GPU/p' "$0"; exit 0 ;;
    *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for s in ${steps//,/ }; do
    case ",$all_steps," in *",$s,"*) ;; *) echo "error: unknown step '$s' (steps: $all_steps)" >&2; exit 2 ;; esac
done
selected() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
started=" "
# has STEP: STEP was asked for and, under --deadline-s, there is still time to start it.
has() {
    selected "$1" || return 1
    case "$started" in *" $1 "*) return 0 ;; esac
    if [ "$deadline" -gt 0 ] && [ $((deadline - SECONDS)) -lt 20 ]; then
        say "$1: not started (--deadline-s $deadline reached)"
        return 1
    fi
    started+="$1 "
    return 0
}
# budget DEFAULT: a timed step's budget in seconds: DEFAULT, or under --deadline-s at most an even
# share of the time left among this step and the asked-for steps not yet started (at least 10 s).
budget() {
    [ "$deadline" -gt 0 ] || { echo "$1"; return; }
    local n=1 s share
    for s in ${all_steps//,/ }; do
        case "$s" in build | tests | sanitize | plots) continue ;; esac
        selected "$s" && case "$started" in *" $s "*) ;; *) n=$((n + 1)) ;; esac
    done
    share=$(((deadline - SECONDS - 10) / n))
    [ $share -lt 10 ] && share=10
    [ $share -lt "$1" ] && echo $share || echo "$1"
}
# in_time START BUDGET: for steps that loop over runs: whether BUDGET seconds since START are left.
in_time() { [ $((SECONDS - $1)) -lt "$2" ]; }
say() { printf '\033[1m==> [%4d s] %s\033[0m\n' "$SECONDS" "$*" >&2; }
# Builds the named targets of $build; on failure shows the end of the build log and stops.
build_targets() {
    cmake --build "$build" -j "$(nproc)" --target "$@" >>"$out/.build.log" 2>&1 ||
        { tail -50 "$out/.build.log"; exit 1; }
}
# run_bench WHAT SCRIPT PROGRAM FILE [ARGS...]: an example's benchmark script with ARGS on $build's
# PROGRAM, its records in $out/FILE; a failure is a warning naming WHAT.
run_bench() {
    local what=$1 script=$2 program=$3 file=$4
    shift 4
    "$py" "$script" "$@" --commit "$commit" --program "$build/$program" --out "$out/$file" ||
        echo "warning: $what reported failures" >&2
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no NVIDIA GPU here (nvidia-smi finds none): benchmarks/gpu.sh measures GPU figures;" \
        "on this machine run build/sim/benchmarks/bench_attention_sim (simulator timings)"
    exit 77
fi
query() { nvidia-smi --query-gpu="$1" --format=csv,noheader | head -1 | sed 's/^ *//; s/ *$//'; }
gpu_name=$(query name)
cc=$(query compute_cap)
driver=$(query driver_version)
slug=$(echo "$gpu_name" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/^-//; s/-$//')
out="benchmarks/results/$slug"
mkdir -p "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
commit=${ATTN_COMMIT:-$commit} # a copy of the tree without .git: the commit it was copied from
py="$ROOT/.venv/bin/python"
[ -x "$py" ] || py=python3
grid=(--grid dense)
sparse=(--grid sparse)
[ $quick -eq 1 ] && grid+=(--L 1k,2k,4k) && sparse+=(--L 4k)
say "device: $gpu_name (sm_${cc/./}), driver $driver, commit $commit -> $out"

nvcc_version=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)
torch_version=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# meta.json: written first (a run stopped part way keeps its provenance), again after each step.
write_meta() {
    cat >"$out/meta.json" <<EOF
{"device": "$gpu_name", "compute_capability": "$cc", "driver": "$driver",
 "nvcc": "${nvcc_version:-none}", "torch": "$torch_version", "commit": "$commit",
 "date": "$started_at", "steps_asked": "$steps", "steps": "${ran[*]:-}", "quick": $([ $quick -eq 1 ] && echo true || echo false),
 "host": "$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1), $(nproc) cores"}
EOF
}
ran=()
write_meta

build="build/bench-gpu"
bench="$build/benchmarks/bench_attention_gpu"
if has build; then
    say "build: gpu backend for sm_${cc/./} only (bench_attention_gpu)"
    cmake -S . -B "$build" -G "Unix Makefiles" -DATTN_BACKENDS=gpu -DATTN_CUDA_ARCHITECTURES="${cc/./}" \
        -DCMAKE_BUILD_TYPE=Release >"$out/.build.log" 2>&1 || { cat "$out/.build.log"; exit 1; }
    build_targets bench_attention_gpu
fi
if has tests; then
    say "tests: the whole gpu build, then its GPU tests (ctest -L gpu -LE sanitizer)"
    # keep going past a target that fails to build: its tests then fail, the others run
    keep=(-k)
    [ -f "$build/build.ninja" ] && keep=(-k 0)
    cmake --build "$build" -j "$(nproc)" -- "${keep[@]}" >>"$out/.build.log" 2>&1 ||
        { grep -E "error|Error" "$out/.build.log" | head -30 >&2; echo "warning: some targets did not build" >&2; }
    # under --deadline-s, tests start during half of the time left at most
    stop=()
    [ "$deadline" -gt 0 ] && stop=(--stop-time "$(date -d "@$(($(date +%s) + (deadline - SECONDS) / 2))" +%H:%M:%S)")
    # Each test is one process on the one GPU; 8 at a time leaves the CPU references their cores.
    ctest --test-dir "$build" -L gpu -LE sanitizer -j 8 --timeout 300 "${stop[@]}" \
        --output-junit "$ROOT/$out/tests.xml" >"$out/tests.txt" 2>&1 ||
        echo "warning: GPU tests failed (the list: $out/tests.txt)" >&2
    grep -E "tests passed|tests failed|\*\*\*(Failed|Timeout|Exception)|Not Run|\((Failed|Timeout)\)" "$out/tests.txt" | tail -40 >&2 || true
    ran+=(tests)
    write_meta
fi
if has sanitize; then
    say "sanitize: compute-sanitizer memcheck, racecheck, synccheck over examples 01-04"
    build_targets naive_attention_gpu flash_fwd_gpu flash2_fwd_gpu sparse_patterns_gpu
    # under --deadline-s, a third of the time left at most (its results so far are kept)
    lim=()
    [ "$deadline" -gt 0 ] && lim=(timeout $(((deadline - SECONDS) / 3)))
    "${lim[@]}" bash scripts/sanitize.sh --build "$build" --out "$out/sanitizer.jsonl" 2>&1 | tee "$out/sanitizer.txt" ||
        echo "warning: compute-sanitizer reported errors ($out/sanitizer.txt)" >&2
    ran+=(sanitize)
    write_meta
fi
if has example10; then
    if [ "${cc%%.*}" != 9 ]; then
        say "example 10: skipped (compute capability $cc; wgmma and TMA need sm_90)"
    else
        say "example 10: FlashAttention-3 versions beside SDPA flash/cuDNN"
        t10=$SECONDS
        b10=$(budget 300) # half for versions 1-3 and their peers, half for version 4 and its peers
        build_targets flash3_fwd_gpu flash3_fp8_gpu
        rm -f "$out/fa3.jsonl"
        l10=(1024 2048 4096 8192 16384)
        [ $quick -eq 1 ] && l10=(1024 2048 4096)
        for L in "${l10[@]}"; do
            in_time $t10 $((b10 * 2 / 5)) || break
            for D in 64 128; do
                for dt in f16 bf16; do
                    for c in "" --causal; do
                        "$build/examples/10_flash_attention_3/flash3_fwd_gpu" -B 2 -H 16 -L "$L" \
                            -D "$D" --dtype "$dt" $c --check-rows 64 --json "$out/fa3.jsonl" \
                            >/dev/null || echo "warning: flash3_fwd L=$L D=$D $dt $c failed" >&2
                    done
                done
            done
        done
        tl=1k,2k,4k,8k,16k
        [ $quick -eq 1 ] && tl=1k,2k,4k
        "$py" benchmarks/bench_torch.py --B 2 --H 16 --L "$tl" \
            --D 64,128 --dtype f16,bf16 --causal both --impl sdpa_flash,sdpa_cudnn \
            --commit "$commit" --out "$out/fa3_torch.jsonl" ||
            echo "warning: bench_torch.py (example 10's peers) reported failures" >&2
        # version 4 (FP8 e4m3; the pre-pass is not timed), then its peers
        rm -f "$out/fa3_fp8.jsonl" "$out/fa3_fp8_peers.jsonl"
        t10=$SECONDS
        for L in "${l10[@]}"; do
            in_time $t10 $((b10 * 2 / 5)) || break
            for D in 64 128; do
                for c in "" --causal; do
                    "$build/examples/10_flash_attention_3/flash3_fp8_gpu" -B 2 -H 16 -L "$L" \
                        -D "$D" --dtype bf16 $c --check-rows 64 --json "$out/fa3_fp8.jsonl" \
                        >/dev/null || echo "warning: flash3_fp8 L=$L D=$D $c failed" >&2
                done
            done
        done
        "$py" benchmarks/bench_fa3_fp8.py --B 2 --H 16 --L "$tl" --D 64,128 --causal both \
            --commit "$commit" --out "$out/fa3_fp8_peers.jsonl" ||
            echo "warning: bench_fa3_fp8.py (version 4's peers) reported failures" >&2
        ran+=(example10)
        write_meta
    fi
fi

if has c; then
    say "bench_attention: dense grid (budget 150 s)"
    "$bench" "${grid[@]}" --quiet --budget-s $(budget 150) --max-seconds 1 --commit "$commit" \
        --out "$out/bench_attention.jsonl" || echo "warning: bench_attention reported failures" >&2
    ran+=(c)
    write_meta
fi
if has fp32; then
    say "bench_attention: fp32 kernels, B=1 H=16 D=64 (budget 60 s)"
    fp32=(--grid fp32)
    [ $quick -eq 1 ] && fp32+=(--L 1k,2k,4k)
    "$bench" "${fp32[@]}" --impl 01,02,fa2_fp32 --quiet --budget-s $(budget 60) --max-seconds 1 \
        --commit "$commit" --append --out "$out/bench_attention.jsonl" ||
        echo "warning: bench_attention reported failures" >&2
    ran+=(fp32)
    write_meta
fi
if has torch; then
    say "bench_torch: SDPA backends and naive PyTorch, dense grid (budget 120 s)"
    "$py" benchmarks/bench_torch.py "${grid[@]}" --impl sdpa_flash,sdpa_cudnn,sdpa_efficient,sdpa_math,naive \
        --budget-s $(budget 120) --max-seconds 1 --commit "$commit" --out "$out/bench_torch.jsonl" ||
        echo "warning: bench_torch reported failures (or exited $?)" >&2
    ran+=(torch)
    write_meta
fi
if has flex; then
    say "bench_torch: FlexAttention, fp16 (compiled per shape; budget 90 s)"
    "$py" benchmarks/bench_torch.py "${grid[@]}" --dtype f16 --impl flex --budget-s $(budget 90) \
        --max-seconds 1 --commit "$commit" --append --out "$out/bench_torch.jsonl" ||
        echo "warning: bench_torch (flex) reported failures" >&2
    ran+=(flex)
    write_meta
fi
if has sparse; then
    say "bench_attention: example 04's sparse kernels, sparse grid (budget 150 s)"
    "$bench" "${sparse[@]}" --quiet --budget-s $(budget 150) --max-seconds 1 --commit "$commit" --append \
        --out "$out/bench_attention.jsonl" || echo "warning: bench_attention reported failures" >&2
    ran+=(sparse)
    write_meta
fi
if has ladder; then
    say "bench_attention: example 06's ladder at 50/25/10 % density (L 4k/8k/16k; budget 60 s)"
    "$bench" --grid ladder --quiet --budget-s $(budget 60) --max-seconds 1 --commit "$commit" --append \
        --out "$out/bench_attention.jsonl" || echo "warning: bench_attention reported failures" >&2
    ran+=(ladder)
    write_meta
fi
if has flexsparse; then
    say "bench_torch: FlexAttention, SDPA on the sparse grid's patterns, sdpa_flash dense (budget 150 s)"
    "$py" benchmarks/bench_torch.py "${sparse[@]}" --budget-s $(budget 150) --max-seconds 1 \
        --commit "$commit" --append --out "$out/bench_torch.jsonl" ||
        echo "warning: bench_torch (sparse grid) reported failures" >&2
    ran+=(flexsparse)
    write_meta
fi

if has deepseek; then
    say "bench_deepseek: example 05 (DSA) on DeepSeek-like shapes, L = 8K..128K"
    build_targets deepseek_sparse_gpu
    ds=(--L 8192,16384,32768,65536,131072 --seed-rows)
    [ $quick -eq 1 ] && ds=(--L 8192,32768)
    run_bench bench_deepseek benchmarks/bench_deepseek.py \
        examples/05_deepseek_sparse/deepseek_sparse_gpu deepseek.jsonl "${ds[@]}"
    ran+=(deepseek)
    write_meta
fi

if has backward; then
    say "bench_backward: example 07, forward + backward beside SDPA, B*L = 16K, L = 512..16K"
    build_targets flash_bwd_gpu
    bw=()
    [ $quick -eq 1 ] && bw=(--L 1024,4096 --no-sparse)
    rm -f "$out/backward.jsonl"
    run_bench bench_backward examples/07_flash_attention_backward/bench_backward.py \
        examples/07_flash_attention_backward/flash_bwd_gpu backward.jsonl "${bw[@]}"
    ran+=(backward)
    write_meta
fi

if has crossover; then
    say "bench_attention: the crossover lab and the 128K table (budget 300 s)"
    b=$(budget 500)
    cross=(--grid crossover,seed-128k)
    [ $quick -eq 1 ] && cross=(--grid crossover --L 1024,4096)
    "$bench" "${cross[@]}" --check-rows 64 --quiet --budget-s $((b * 3 / 5)) --max-seconds 1 \
        --commit "$commit" --out "$out/crossover.jsonl" ||
        echo "warning: bench_attention (crossover) reported failures" >&2
    say "bench_torch: PyTorch dense (SDPA flash) and torch.sparse at 128K (budget 200 s)"
    # torch.sparse takes seconds per call at 128K: one warm-up, three timed calls
    [ $quick -eq 1 ] || "$py" benchmarks/bench_torch.py --grid seed-128k --check-rows 16 \
        --warmup 1 --reps 3 --max-reps 3 --budget-s $((b * 2 / 5)) --max-seconds 1 --commit "$commit" \
        --out "$out/crossover_torch.jsonl" ||
        echo "warning: bench_torch (seed-128k) reported failures" >&2
    ran+=(crossover)
    write_meta
fi

if has example08; then
    say "example 08: FlexAttention in CUDA C beside compiled FlexAttention and SDPA (budget 600 s)"
    build_targets flex_attention_gpu
    l08=(--budget-s $(budget 600))
    [ $quick -eq 1 ] && l08+=(--L 1024,2048,4096)
    rm -f "$out/flex08.jsonl"
    run_bench "bench_gpu.py (example 08)" examples/08_flex_attention/bench_gpu.py \
        examples/08_flex_attention/flex_attention_gpu flex08.jsonl "${l08[@]}"
    ran+=(example08)
    write_meta
fi

if has decode; then
    say "bench_decode: example 09's decoding step, B 1-64, contexts 1K-128K (budget 150 s)"
    build_targets decode_gpu
    b=$(budget 210)
    dec=(--budget-s $((b * 5 / 7)))
    [ $quick -eq 1 ] && dec+=(--quick)
    run_bench bench_decode examples/09_decode/bench_decode.py examples/09_decode/decode_gpu \
        decode.jsonl "${dec[@]}"
    say "bench_decode: version 10 (MLA, 128 heads over one latent row), B 1-64, contexts 1K-32K (budget 60 s)"
    lat=(--grid latent --budget-s $((b * 2 / 7)))
    [ $quick -eq 1 ] && lat+=(--quick)
    run_bench "bench_decode (latent)" examples/09_decode/bench_decode.py \
        examples/09_decode/decode_gpu decode.jsonl "${lat[@]}"
    "$py" examples/09_decode/bench_decode.py --table "$out/decode.jsonl" >"$out/decode.md" || true
    ran+=(decode)
    write_meta
fi

if has fp8; then
    say "bench_fp8: FP8 cache decode (example 09) and the FP8 indexer (example 05) (budget 120 s)"
    build_targets decode_gpu deepseek_sparse_gpu
    f8=(--budget-s $(budget 120))
    [ $quick -eq 1 ] && f8+=(--quick)
    rm -f "$out/fp8.jsonl"
    "$py" examples/09_decode/bench_fp8.py "${f8[@]}" --out "$out/fp8.jsonl" \
        --decode "$build/examples/09_decode/decode_gpu" \
        --deepseek "$build/examples/05_deepseek_sparse/deepseek_sparse_gpu" ||
        echo "warning: bench_fp8 reported failures" >&2
    "$py" examples/09_decode/bench_fp8.py --table "$out/fp8.jsonl" >"$out/fp8.md" || true
    ran+=(fp8)
    write_meta
fi

if has context_parallel; then
    say "context_parallel: example 11's ranks sharing this GPU over MPI (ring, zigzag, Ulysses, a sliding window, DSA; 1, 2, 4 ranks)"
    build_targets context_parallel_gpu
    cpx="$build/examples/11_context_parallel/context_parallel_gpu"
    cpL=8192
    [ $quick -eq 1 ] && cpL=4096
    : >"$out/context_parallel.txt"
    tcp=$SECONDS
    bcp=$(budget 180)
    for np in 1 2 4; do
        in_time $tcp $bcp || break
        for strategy in ring zigzag ulysses "ring --window 1024" "zigzag --dsa 2048"; do
            "$cpx" --ranks $np --strategy $strategy --causal -B 1 -H 8 -L $cpL -D 64 --reps 3 \
                >>"$out/context_parallel.txt" 2>&1 ||
                echo "warning: context_parallel --ranks $np --strategy $strategy failed" >&2
        done
    done
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    if [ "${gpus:-0}" -ge 2 ]; then
        "$cpx" --ranks 2 --backend nccl --strategy zigzag --causal -B 1 -H 8 -L $cpL -D 64 \
            --reps 3 >>"$out/context_parallel.txt" 2>&1 ||
            echo "warning: context_parallel --backend nccl failed" >&2
    else
        echo "context_parallel: the NCCL backend needs one GPU per rank (>= 2 GPUs); this machine has ${gpus:-0}: not run" |
            tee -a "$out/context_parallel.txt"
    fi
    ran+=(context_parallel)
    write_meta
fi

if has v4; then
    say "example 12: DeepSeek-V4's CSA and HCA layers, prefill and decode, L 2K and 8K"
    build_targets deepseek_v4_gpu
    rm -f "$out/deepseek_v4.jsonl"
    lens=(2048 8192)
    [ $quick -eq 1 ] && lens=(2048)
    # three timed runs of each: its token-by-token decode took 5.3 s a run at L 2K on an H200
    t12=$SECONDS
    b12=$(budget 120)
    for L in "${lens[@]}"; do
        in_time $t12 $((b12 / 2)) || break
        "$build/examples/12_deepseek_v4/deepseek_v4_gpu" --quiet --reps 3 --warmup 1 -B 1 -H 16 -L "$L" -D 512 \
            --dtype bf16 --window 128 --topk 512 --index-heads 64 --index-dim 128 --rope-dim 64 \
            --json "$out/deepseek_v4.jsonl" || echo "warning: example 12 (CSA) reported failures" >&2
        "$build/examples/12_deepseek_v4/deepseek_v4_gpu" --quiet --reps 3 --warmup 1 --kind hca \
            -m 128 -B 1 -H 16 \
            -L "$L" -D 512 --dtype bf16 --window 128 --rope-dim 64 \
            --json "$out/deepseek_v4.jsonl" || echo "warning: example 12 (HCA) reported failures" >&2
    done
    ran+=(v4)
    write_meta
fi

if has plots; then
    say "plots and tables"
    "$py" benchmarks/plot.py "$out"
    "$py" benchmarks/memory_analysis.py --results "$out" | tail -5
    python3 benchmarks/update_tables.py
    "$py" benchmarks/crossover.py # the crossover lab: the model fitted to crossover*.jsonl
    python3 examples/08_flex_attention/make_tables.py
fi
say "done: commit $out and the READMEs (git add $out benchmarks/README.md)"
