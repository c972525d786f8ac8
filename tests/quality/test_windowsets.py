#!/usr/bin/env python3
"""The window sets and the indexer's data (CTest quality.windowsets): every named set of
quality/windowsets.py has its count of windows (at least 32) of its length, inside one document,
none overlapping another, none in a document's first `skip` tokens (the openings), on the texts
it was laid out on (token counts recorded); the sets of the three texts at 512, 2,048 and 8,192
tokens exist; the committed results name their set and have its n. The indexer's training log
(results/indexer_training.json; before the training has run, train_indexer's plan on the same
novels): at least 50 distinct training windows from at least 4 novels, none of them evaluated,
held-out windows disjoint from them, and (the log) a held-out loss per epoch and the tokens and
steps it states consistent with its settings. The frontier's configurations
(plan.FRONTIER) reach their density point: window, sink+window and top-k within 0.1 % of the
top-k density, the ladder and BigBird within 5 %, strided as close as a stride gets (within 15 %).
Exit 0 when every check passes."""
import json
import os
import sys

import attention
import plan
import smollm
import texts
import train_indexer
import windowsets
from checks import check, finish

RESULTS = os.path.join(os.path.dirname(windowsets.__file__), "results")


def overlaps(a, b):
    return a[0] == b[0] and a[1] < b[1] + b[2] and b[1] < a[1] + a[2]


def main():
    tok = smollm.tokenizer()
    check({(ws.text, ws.length) for ws in windowsets.SETS.values()} ==
          {(t, n) for t in texts.SCENARIOS for n in (512, 2048, 8192)},
          "a set for each text (austen, kjv, go) and length (512, 2048, 8192)")
    for name, ws in windowsets.SETS.items():
        wins = windowsets.windows(name, tok)
        spans = [(d, s, ws.length) for d, s, _ in wins]
        docs = dict(windowsets.token_ids(ws.text, tok))
        ok = (len(wins) == ws.count >= 32 and all(w.numel() == ws.length for _, _, w in wins)
              and all(s >= ws.skip and s + ws.length <= len(docs[d]) for d, s, _ in wins)
              and not any(overlaps(a, b) for i, a in enumerate(spans) for b in spans[i + 1:]))
        check(ok, f"{name}: {len(wins)} windows of {ws.length}, in their documents, after the "
                  f"first {ws.skip} tokens, none overlapping")
        path = os.path.join(RESULTS, f"{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                d = json.load(f)
            same = [dict(doc=a, start=b) for a, b, _ in wins] == d["windows"]
            ns = {c["n"] for c in d["configs"].values() if c.get("complete")}
            check(same and d["set"]["name"] == name and ns <= {ws.count},
                  f"results/{name}.json: its windows are the set's, complete configs have n = "
                  f"{ws.count}")
    P = attention.patterns()
    for L, points in plan.FRONTIER.items():
        for k, specs in points.items():
            target = attention.top_k_density(k, L)
            for fam, spec in specs.items():
                if fam in ("oracle", "indexer"):
                    continue
                # counted in chunks of 64K entries (larger chunks spend more CPU time on a CPU:
                # 33 s at 4M entries against 12.5 s at 64K for the 30 configurations, measured
                # before pattern_entries cut each chunk's keys at causality; 7 s since)
                d = P.pattern_entries(spec, L, L, causal=True, chunk=1 << 16) / (L * (L + 1) / 2)
                tol = {"strided": 0.15, "bigbird": 0.05, "ladder": 0.05}.get(fam, 1e-3)
                check(abs(d - target) <= tol * target,
                      f"L={L} k={k} {fam} {spec}: density {d:.4f}, target {target:.4f}")
    log = os.path.join(RESULTS, "indexer_training.json")
    if os.path.exists(log):
        with open(log) as f:
            t = json.load(f)
    else:  # the training has not run yet: its plan (train_indexer.train's defaults) instead
        novels = [(title, tok.encode(x).ids) for title, x in texts.austen_novels()
                  if title in texts.TRAINING_NOVELS]
        tr, va = train_indexer.split(novels, 2048, 52, 8)
        t = dict(window=2048, train_windows=[dict(doc=d, start=s) for d, s in tr],
                 val_windows=[dict(doc=d, start=s) for d, s in va])
        print("note  results/indexer_training.json absent: the training plan is checked")
    train = {(w["doc"], w["start"]) for w in t["train_windows"]}
    val = {(w["doc"], w["start"]) for w in t["val_windows"]}
    evaluated = {title for title, _ in texts.documents("austen")} if any(
        ws.text == "austen" for ws in windowsets.SETS.values()) else set()
    check(len(train) == len(t["train_windows"]) >= 50, f"{len(train)} distinct training windows")
    novels = {d for d, _ in train}
    check(len(novels) >= 4 and not novels & evaluated and not {d for d, _ in val} & evaluated,
          f"training novels {sorted(novels)}, none of the evaluated {sorted(evaluated)}")
    check(not any(overlaps((d, s, t["window"]), (e, r, t["window"]))
                  for d, s in train for e, r in val), "held-out windows disjoint from training")
    if "val_loss" not in t:
        return finish()
    check([v["epoch"] for v in t["val_loss"]] == list(range(t["epochs"] + 1)),
          f"held-out loss before training and after each of {t['epochs']} epochs")
    check(t["training_tokens_seen"] == t["epochs"] * len(train) * t["window"]
          and t["adam_steps_per_layer"] == t["epochs"] * len(train) * t["steps_per_window"],
          f"{t['training_tokens_seen']} tokens and {t['adam_steps_per_layer']} steps per layer, "
          f"as the settings give")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
