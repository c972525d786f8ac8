#!/usr/bin/env bash
# scripts/setup.sh — installs what a fresh Debian machine lacks; safe to run again (it only
# installs what is missing). Debian packages when run as root (otherwise it prints the apt-get
# line to run), Python packages into the project-local virtual environment .venv.
#   scripts/setup.sh             the build's Debian packages (cmake, g++, make, Boost.Context)
#   scripts/setup.sh --python    and .venv: PyTorch, NumPy, Matplotlib, for the Python
#                                references (then: .venv/bin/python examples/01_.../naive_attention.py)
#   scripts/setup.sh --quality   and the quality toolkit's model and texts (quality/install.sh)
# run.sh, test.sh and grade.sh source it for its functions.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Installs Debian packages when root (apt-get); returns 1 where it cannot (not root, no apt).
attn_apt_install() {
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null || return 1
    say "installing Debian packages: $*"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" \
        >/dev/null || die "apt-get install $* failed"
}

# The tools the C/C++ build needs: command -> Debian package.
attn_need_build_tools() {
    local missing=()
    command -v cmake >/dev/null || missing+=(cmake)
    command -v make >/dev/null || missing+=(make)
    command -v gcc >/dev/null || missing+=(gcc)
    command -v g++ >/dev/null || missing+=(g++)
    [ -f /usr/include/boost/context/detail/fcontext.hpp ] || missing+=(libboost-context-dev)
    # example 11 (context parallelism) runs its ranks under Open MPI
    command -v mpirun >/dev/null || missing+=(openmpi-bin)
    command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
    if [ "${1:-}" = python ]; then
        command -v python3 >/dev/null || missing+=(python3)
        python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    attn_apt_install "${missing[@]}" ||
        die "missing packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]})"
    local v
    v=$(cmake --version | awk 'NR==1{print $3}')
    printf '%s\n3.24\n' "$v" | sort -V -C && die "cmake $v is too old (3.24 or newer is needed)"
    return 0
}

# The sim-check preset's compilers: clang 14 (-fsanitize-coverage=trace-loads,trace-stores) and
# llvm-symbolizer-14 (source lines in its reports).
attn_need_check_tools() {
    local missing=()
    command -v clang++-14 >/dev/null || missing+=(clang-14)
    command -v llvm-symbolizer-14 >/dev/null || missing+=(llvm-14)
    [ ${#missing[@]} -eq 0 ] && return 0
    attn_apt_install "${missing[@]}" && return 0
    say "the sim-check preset needs: sudo apt-get install ${missing[*]}"
    return 1
}

# ccache: not needed to build, but the twelve standalone builds of the full test run share one
# compile cache through it (tests/standalone_build.cmake): the simulator and the harness are
# compiled once instead of twelve times. Installed when root; otherwise a line, and the run goes on.
attn_want_ccache() {
    command -v ccache >/dev/null && return 0
    (attn_apt_install ccache) && return 0
    say "ccache not found: the standalone builds each compile the simulator (slower; apt-get install ccache)"
    return 0
}

# .venv with requirements.txt (PyTorch, NumPy, Matplotlib); ATTN_PY points at its python.
attn_need_venv() {
    ATTN_PY="$ROOT/.venv/bin/python"
    if [ -x "$ATTN_PY" ] && "$ATTN_PY" -c 'import torch, numpy, matplotlib' 2>/dev/null; then
        return 0
    fi
    # No .venv, but python3 already has them (a GPU machine's image, where PyPI may be out of
    # reach): use it and install nothing.
    if [ ! -x "$ATTN_PY" ] && python3 -c 'import torch, numpy, matplotlib' 2>/dev/null; then
        ATTN_PY="$(command -v python3)"
        say "using $ATTN_PY: it has PyTorch, NumPy and Matplotlib"
        return 0
    fi
    say "setting up the Python environment in .venv (PyTorch, NumPy, Matplotlib; first time" \
        "only: PyPI's PyTorch brings its CUDA libraries, about 5.6 GB on disk)"
    [ -x "$ATTN_PY" ] || python3 -m venv "$ROOT/.venv" || die "python3 -m venv .venv failed"
    local quiet=(-q) # progress bars where someone watches (a terminal); quiet in a log
    [ -t 1 ] && quiet=()
    # uv where it can be had, else pip; nothing byte-compiled (scripts/pip_install.sh: why)
    bash "$ROOT/scripts/pip_install.sh" "$ATTN_PY" "${quiet[@]}" -r "$ROOT/requirements.txt" ||
        die "pip install -r requirements.txt failed (is PyPI reachable?)"
}

# Is an NVIDIA compiler here? (The gpu backend builds wherever nvcc is, GPU or not.)
attn_have_nvcc() {
    command -v nvcc >/dev/null && return 0
    [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH" && return 0
    return 1
}

# Is a GPU usable here? nvidia-smi must list one (a driver that answers). nvcc alone is not enough:
# the gpu build compiles without a GPU, but its programs can only say "no GPU" and exit 77.
attn_have_gpu() {
    command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || return 1
    attn_have_nvcc
}

# attn_cpu_seconds FILE: the CPU time (user + system, whole seconds) of every process this shell
# has run, into ATTN_CPU (FILE keeps bash's `times`, which a subshell would not see). On a machine
# shared with other jobs, CPU time / cores says more about a quiet machine than the wall time.
attn_cpu_seconds() {
    times >"$1"
    # shellcheck disable=SC2034 # read by the scripts that source this file
    ATTN_CPU=$(awk 'NR == 2 { for (i = 1; i <= 2; ++i) { split($i, t, "m"); s += t[1] * 60 + t[2] } }
                    END { printf "%.0f", s }' "$1")
}

# The quality toolkit (quality/): SmolLM2's GGUF, gguf, tokenizers and transformers (example 12's
# check against Hugging Face's DeepseekV4Attention) into the venv, and the
# Debian text packages unpacked into quality/.cache (quality/install.sh says how).
attn_need_quality() {
    say "quality toolkit: SmolLM2-135M weights and texts"
    bash "$ROOT/quality/install.sh" "$ATTN_PY" || die "quality/install.sh failed"
}

# Run as a command (not sourced): the set-up alone, with its size and time.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    python=0 quality=0
    for arg in "$@"; do
        case "$arg" in
        --python) python=1 ;;
        --quality) python=1 quality=1 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "error: unknown option '$arg' (scripts/setup.sh --help)" >&2; exit 2 ;;
        esac
    done
    start=$SECONDS
    attn_need_build_tools $([ $python -eq 1 ] && echo python)
    say "build tools: cmake, make, gcc, g++, Boost.Context, Open MPI present"
    if [ $python -eq 1 ]; then
        attn_need_venv
        [ $quality -eq 0 ] || attn_need_quality
        say "Python: $ATTN_PY ($("$ATTN_PY" -c 'import torch; print("PyTorch", torch.__version__)'))"
        [ "$ATTN_PY" != "$ROOT/.venv/bin/python" ] ||
            say ".venv: $(du -sh "$ROOT/.venv" | cut -f1) on disk"
        say "run the Python references with it, e.g. ${ATTN_PY#"$ROOT/"} examples/01_attention_basics/naive_attention.py"
    fi
    say "done in $((SECONDS - start)) s"
fi
