#!/usr/bin/env python3
"""rope_probe.py — why the trained indexer falls apart past query 4,096 at 8,192 tokens: a test of
one hypothesis about its RoPE frequencies, on a few windows.

The indexer (indexer.py) rotates the first rope_dim = 16 of its 32 dimensions with the model's base
(100,000): 8 frequencies theta_c = base^(-2c/16). It was trained on 2,048-token windows, so the
relative rotation theta_c * d it saw stops at d = 2,047. The low frequency c = 5 (theta ~ 7.5e-4)
turns by less than pi/2 there; it reaches pi near d = 4,189, past which its cosine rises again and a
far key scores like a nearer one. The hypothesis: that frequency, monotone over every distance the
indexer learnt and folded back past pi, is what breaks the selection for queries past ~4,096.

The test: the committed indexer at k = 1,024 on a few austen-8k windows with one frequency pair
removed from its scores (the two rotate-half dimensions c and c + 8 of its keys set to 0 after the
rotation, so that pair adds nothing to any q . k): the pair that folds (c = 5) and, as a control, the
next lower one (c = 6, which stays below pi/2 over 8,191 tokens: it never folds). Each variant's per-window
NLL per position bin is written to results/rope_probe.json beside the committed runs' bins of the
same windows (dense and the unmodified indexer, results/raw/austen-8k.jsonl); report.py makes the
table of quality/README.md from it.

    nice -n 19 .venv/bin/python quality/rope_probe.py --windows 0,1 --threads 1   (~100 s a job)
"""
import argparse
import json
import math
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")
import attention  # noqa: E402
import indexer  # noqa: E402
import metrics  # noqa: E402
import smollm  # noqa: E402
import windowsets  # noqa: E402

SET = "austen-8k"
K = 1024
OUT = os.path.join(HERE, "results", "rope_probe.json")
RAW = os.path.join(HERE, "results", "raw", f"{SET}.jsonl")


def frequencies(ix):
    """[(c, theta_c, distance where theta_c d = pi, rotation at the longest trained distance)]."""
    r, base = ix.rope_dim, ix.rope_base
    return [(c, base ** (-2 * c / r), math.pi / base ** (-2 * c / r),
             2047 * base ** (-2 * c / r)) for c in range(r // 2)]


def without_pair(indexers, c):
    """indexer.scorer with the keys' rotate-half pair c (dims c, c + r/2) zeroed."""
    def drop(ix, keys):
        keys = keys.clone()
        keys[:, c] = 0
        keys[:, c + ix.rope_dim // 2] = 0
        return keys
    return indexer.scorer(indexers, drop)


def committed(windows):
    """{config: {window: bins}} of the committed dense and indexer runs of those windows."""
    out = {}
    with open(RAW) as f:
        for line in f:
            r = json.loads(line)
            if r["config"] in ("dense", f"indexer:k={K}") and r["window"] in windows:
                out.setdefault(r["config"], {})[r["window"]] = r["bins"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", default="0,1", help="austen-8k window indices (default 0,1)")
    ap.add_argument("--pairs", default="5,6", help="frequency pairs to remove, one run each")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    wins = [int(x) for x in args.windows.split(",")]
    pairs = [int(x) for x in args.pairs.split(",")]
    ixs = indexer.load(os.path.join(HERE, "results", "indexer_smollm2.npz"))
    model, tok = smollm.load(), smollm.tokenizer()
    ws = windowsets.windows(SET, tok)
    old = json.load(open(OUT)) if os.path.exists(OUT) else {}
    runs = old.get("runs", {})
    for i in wins:  # every variant on a window before the next window
        for c in pairs:
            key = f"pair {c}|{i}"
            if key in runs:
                continue
            t0 = time.time()
            nll = model.token_nll(ws[i][2], attention.TopK(K, without_pair(ixs, c)))
            runs[key] = dict(pair=c, window=i, bins=metrics.position_sums(nll),
                             seconds=round(time.time() - t0, 1))
            print(f"pair {c} removed, window {i}: {runs[key]['seconds']} s", flush=True)
            write(runs, ixs, args.threads)  # after every job: a run stopped keeps what it did
    write(runs, ixs, args.threads)
    return 0


def write(runs, ixs, threads):
    done = sorted({r["window"] for r in runs.values()})
    out = dict(set=SET, k=K, frequencies=frequencies(ixs[0]), runs=runs,
               committed=committed(done),
               machine=f"{platform.machine()}, torch {torch.__version__}, {threads} thread(s)")
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
