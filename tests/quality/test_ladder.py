#!/usr/bin/env python3
"""Example 06's quality scenarios on short windows (CTest quality.ladder_short): the ladder in
every layer of SmolLM2-135M on a 128-token window of each text (b = 4: 32 blocks, the structure
of the full runs at a quarter of their length), checked for what the full runs
(quality/recompute.py's phase 512) report: the density the model sees is ladder.py's;
the ladder costs perplexity against dense (it is sparse); at a lower density than the ladder's,
strided is worse; without its sink block the ladder is worse. Then bad input: a ladder parameter
out of range and a missing text package, one line on stderr, exit status 2.
Exit 0 when every check passes, 1 otherwise."""
import os
import sys

import attention
import evaluate
import metrics
import smollm
import windowsets
from checks import check, finish, process_rejects, rejects

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "06_custom_pattern"))
import ladder  # noqa: E402

L = 128


def main():
    model, tok = smollm.load(), smollm.tokenizer()
    for name in ("austen", "kjv"):
        wins = [w for _, _, w in windowsets.adhoc(name, L, 1, tok, skip=1000)]
        nll = {}
        for spec in ("dense", "ladder:b=4,s=1,w=4", "ladder:b=4,s=0,w=5", "strided:l=4"):
            att = attention.make(spec, record=True)
            nll[spec] = metrics.score(model, wins, att, spec).double().mean().item()
            if spec == "ladder:b=4,s=1,w=4":
                seen = sum(sum(v) / len(v) for v in att.density.values()) / len(att.density)
                want = ladder.density(L, 4, 1, 4)
                check(abs(seen - want) < 1e-6,
                      f"{name}: density in the model {seen:.4f} = ladder.density {want:.4f}")
        lad = nll["ladder:b=4,s=1,w=4"]
        print(f"{name}: mean NLL " + ", ".join(f"{k} {v:.3f}" for k, v in nll.items()))
        check(lad > nll["dense"] + 0.01, f"{name}: the ladder loses to dense ({lad:.3f} > "
              f"{nll['dense']:.3f})")
        check(nll["strided:l=4"] > lad, f"{name}: strided (density 0.30 < 0.39) is worse")
        check(nll["ladder:b=4,s=0,w=5"] > lad, f"{name}: without the sink block it is worse")
    rejects(evaluate.main, ["--attention", "ladder:b=4,w=0"], "w must be")
    rejects(evaluate.main, ["--attention", "ladder:w=4"], "missing parameter b")
    process_rejects(evaluate.__file__, ["--window", "16", "--attention", "ladder:b=4,w=1"],
                    "Debian package r-cran-janeaustenr not found",
                    env={"ATTN_QUALITY_TEXTS": "/nonexistent"})
    return finish()


if __name__ == "__main__":
    sys.exit(main())
