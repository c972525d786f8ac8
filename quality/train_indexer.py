#!/usr/bin/env python3
"""train_indexer.py — trains one lightning indexer per SmolLM2 layer (indexer.py) with DeepSeek's
dense warm-up objective, on windows of Jane Austen's novels other than Pride & Prejudice (kept for
the evaluation), and writes the weights (quality/results/indexer_smollm2.npz) and a training log
(quality/results/indexer_training.json).

Each window goes through the frozen model once; at every layer the layer's normed input h and its
q, k are handed to that layer's indexer, which takes --steps Adam steps on --rows random query rows
of the window (all keys). Windows are drawn until --windows or --minutes runs out; the weights are
written after every window.

The committed file: a first run (--steps 8 --rows 384 --minutes 24, stopped after its first
window) resumed by --init with --steps 40 --rows 256 --minutes 18 (one more window; "init" in the
log), nice -n 15 on 2 shared cores. The loss logged is the mean KL of each window's steps.
"""
import argparse
import json
import os
import platform
import random
import sys
import time

try:
    import torch
except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
    sys.exit(f"error: {e.name} is not installed for {sys.executable}: "
             "run scripts/setup.sh --quality, then use .venv/bin/python")

import indexer
import metrics
import smollm
import texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--windows", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--steps", type=int, default=4, help="Adam steps per layer per window")
    ap.add_argument("--rows", type=int, default=384, help="query rows per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--rope-dim", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=indexer.WEIGHTS)
    ap.add_argument("--init", help="weights file to start from (a run resumed)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = random.Random(0)

    model, tok = smollm.load(), smollm.tokenizer()
    novels = [t for title, t in texts.austen_novels() if title != "Pride & Prejudice"]
    ids = [torch.tensor(tok.encode(t).ids) for t in novels]
    ixs = [indexer.LightningIndexer(model.d_model, args.heads, args.dim, args.rope_dim,
                                    model.rope_base) for _ in range(model.n_layers)]
    if args.init:
        for ix, old in zip(ixs, indexer.load(args.init)):
            ix.load_state_dict(old.state_dict())
    opts = [torch.optim.Adam(ix.parameters(), lr=args.lr) for ix in ixs]
    log = [[] for _ in ixs]  # per layer: mean loss of each window

    def observe(layer, h, q, k, v):
        losses = []
        with torch.enable_grad():
            for _ in range(args.steps):
                rows = torch.randint(0, args.window, (args.rows,)).sort().values
                losses.append(indexer.train_step(ixs[layer], opts[layer], h, q, k, rows))
        log[layer].append(sum(losses) / len(losses))

    start = time.time()
    n = 0
    while n < args.windows and time.time() - start < 60 * args.minutes:
        book = rng.randrange(len(ids))
        at = rng.randrange(0, ids[book].numel() - args.window)
        model.hidden(ids[book][at:at + args.window], observe=observe)
        n += 1
        el = time.time() - start
        metrics.progress(min(el, 60 * args.minutes), 60 * args.minutes,
                         f"window {n}, loss {sum(l[-1] for l in log) / len(log):.3f}", start)
        indexer.save(ixs, args.out)
    indexer.save(ixs, args.out)
    info = dict(windows=n, window=args.window, steps=args.steps, rows=args.rows, lr=args.lr,
                heads=args.heads, dim=args.dim, rope_dim=args.rope_dim,
                seconds=round(time.time() - start), threads=args.threads, init=args.init,
                machine=f"{platform.machine()}, {os.cpu_count()} cores (shared)",
                loss_first_window=[l[0] for l in log], loss_last_window=[l[-1] for l in log])
    with open(os.path.join(os.path.dirname(args.out), "indexer_training.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"\n{n} windows in {info['seconds']} s; mean KL first window "
          f"{sum(info['loss_first_window']) / len(log):.3f}, last "
          f"{sum(info['loss_last_window']) / len(log):.3f}")


if __name__ == "__main__":
    main()
