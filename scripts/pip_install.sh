#!/usr/bin/env bash
# scripts/pip_install.sh PYTHON ARGS... — `pip install ARGS...` into PYTHON's environment, made
# with uv where PYTHON is a virtual environment (.venv: uv is installed into it first, from PyPI),
# else, or when uv cannot be had or fails, with pip itself (--no-compile). ARGS are options that
# mean the same to both: -q, -r FILE, --no-deps, package names.
#
# Why uv: PyTorch's wheels and the CUDA libraries PyPI's PyTorch brings (about 5.3 GB once
# unpacked) are unpacked by pip in Python. Measured on this project's 2-core machine on
# 2026-11-30, requirements.txt into a fresh virtual environment: pip 88 s of wall time and 75 s of
# CPU, uv 26 s and 34 s (the same versions: torch 2.15.0, numpy 2.4.6, matplotlib 3.11.2).
# Neither byte-compiles what it installs: Python compiles the few modules it imports on first use.
set -uo pipefail
py="${1:?usage: scripts/pip_install.sh PYTHON ARGS...}"
shift
[ -x "$py" ] || { echo "error: scripts/pip_install.sh: no Python at $py" >&2; exit 1; }

if "$py" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' 2>/dev/null; then
    uv="$(dirname "$py")/uv"
    if [ -x "$uv" ] || "$py" -m pip install -q --disable-pip-version-check uv >/dev/null 2>&1; then
        # uv reads none of pip's settings: the certificates and local wheels pip is told of
        [ -n "${PIP_CERT:-}" ] && export SSL_CERT_FILE="${SSL_CERT_FILE:-$PIP_CERT}"
        [ -n "${PIP_FIND_LINKS:-}" ] && export UV_FIND_LINKS="${UV_FIND_LINKS:-$PIP_FIND_LINKS}"
        [ -x "$uv" ] && "$uv" pip install --python "$py" "$@" && exit 0
        echo "note: uv did not install $*: trying pip" >&2
    fi
fi
exec "$py" -m pip install --disable-pip-version-check --no-compile "$@"
