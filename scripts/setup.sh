# scripts/setup.sh — sourced by run.sh and test.sh: installs what a fresh Debian machine lacks.
# apt packages when run as root (otherwise prints the command to run), Python packages into the
# project-local virtual environment .venv. Safe to run again: it only installs what is missing.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The tools the C/C++ build needs: command -> Debian package.
attn_need_build_tools() {
    local missing=()
    command -v cmake >/dev/null || missing+=(cmake)
    command -v make >/dev/null || missing+=(make)
    command -v gcc >/dev/null || missing+=(gcc)
    command -v g++ >/dev/null || missing+=(g++)
    [ -f /usr/include/boost/context/detail/fcontext.hpp ] || missing+=(libboost-context-dev)
    if [ "${1:-}" = python ]; then
        command -v python3 >/dev/null || missing+=(python3)
        python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing Debian packages: ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
            >/dev/null || die "apt-get install ${missing[*]} failed"
    else
        die "missing packages: ${missing[*]} (install them: sudo apt-get install ${missing[*]})"
    fi
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
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing Debian packages: ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
            >/dev/null || die "apt-get install ${missing[*]} failed"
    else
        say "the sim-check preset needs: sudo apt-get install ${missing[*]}"
        return 1
    fi
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
    say "setting up the Python environment in .venv (PyTorch, NumPy, Matplotlib; first time only)"
    [ -x "$ATTN_PY" ] || python3 -m venv "$ROOT/.venv" || die "python3 -m venv .venv failed"
    "$ATTN_PY" -m pip install -q --disable-pip-version-check -r "$ROOT/requirements.txt" ||
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

# The quality toolkit (quality/): SmolLM2's GGUF, gguf and tokenizers into the venv, and the
# Debian text packages unpacked into quality/.cache (quality/install.sh says how).
attn_need_quality() {
    say "quality toolkit: SmolLM2-135M weights and texts"
    bash "$ROOT/quality/install.sh" "$ATTN_PY" || die "quality/install.sh failed"
}
