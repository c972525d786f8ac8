#!/usr/bin/env python3
"""train_indexer.py — trains one lightning indexer per SmolLM2 layer (indexer.py) with DeepSeek's
dense warm-up objective, on windows of the four Austen novels that are never evaluated
(texts.TRAINING_NOVELS: Sense & Sensibility, Mansfield Park, Northanger Abbey, Persuasion), and
writes the weights (results/indexer_smollm2.npz) and the training log
(results/indexer_training.json). quality/recompute.py runs it as its phase 'train'.

The objective, per layer, the model frozen: for a query t of a window, p(t, .) is the layer's
causal softmax attention summed over its 9 heads and L1-normalised, and the loss is

    KL(p(t, .) || softmax(I(t, .)))   over the causal keys s <= t, in nats,

averaged over the query rows of a step (indexer.kl_loss).

The data: every novel cut into non-overlapping windows of --window tokens; from each novel an
equal share of --train-windows + --val-windows windows, evenly spaced; --val-windows of them,
spread over the novels, are held out for validation (never trained on). An epoch is one pass
over the training windows in a shuffled order (seeded per epoch): each window goes through the
frozen model once, and at every layer that layer's indexer takes --steps Adam steps, each on
--rows query rows drawn at random (one generator, seeded once, its state checkpointed) against all
keys. The validation loss is the same KL on every 4th query row of each held-out window, measured
before training (epoch 0) and after each epoch. Distinct windows: the list is fixed before the
first epoch; a resumed run continues from its checkpoint (results/.indexer_ckpt.pt, written after
every window), so no window is drawn twice by accident.

    nice -n 19 python quality/train_indexer.py       (the defaults: recompute.py's settings)
"""
import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import indexer  # noqa: E402
import metrics  # noqa: E402
import smollm  # noqa: E402
import texts  # noqa: E402
import windowsets  # noqa: E402

OBJECTIVE = ("KL(p(t,.) || softmax(I(t,.))) over the causal keys, nats, mean over query rows; "
             "p = the layer's causal attention summed over its heads, L1-normalised")


def split(novels, window, train_windows, val_windows):
    """([(title, start)] training, [(title, start)] validation) windows: an equal share of each
    novel's non-overlapping windows, evenly spaced; the validation ones spread over the list."""
    total = train_windows + val_windows
    chosen = []
    for i, (title, ids) in enumerate(novels):
        share = total // len(novels) + (i < total % len(novels))
        slots = len(ids) // window
        if share > slots:
            raise ValueError(f"{title}: {slots} windows of {window} tokens, {share} wanted")
        chosen += [(title, round(j * (slots - 1) / max(share - 1, 1)) * window)
                   for j in range(share)]
    val = {round((i + 0.5) * total / val_windows - 0.5) for i in range(val_windows)}
    return ([w for n, w in enumerate(chosen) if n not in val],
            [w for n, w in enumerate(chosen) if n in val])


def train(model, tok, out=indexer.WEIGHTS, window=2048, train_windows=52, val_windows=8,
          epochs=2, steps=4, rows=256, lr=3e-3, heads=4, dim=32, rope_dim=16, seed=0,
          threads=2, minutes=None):
    """Train (or resume) and write the weights and the log; returns the log."""
    torch.set_num_threads(threads)
    novels = windowsets.token_ids("austen-training", tok, [
        (t, x) for t, x in texts.austen_novels() if t in texts.TRAINING_NOVELS])
    ids = dict(novels)
    train_w, val_w = split(novels, window, train_windows, val_windows)
    ckpt_path = os.path.join(os.path.dirname(out), ".indexer_ckpt.pt")
    torch.manual_seed(seed)
    ixs = [indexer.LightningIndexer(model.d_model, heads, dim, rope_dim, model.rope_base)
           for _ in range(model.n_layers)]
    opts = [torch.optim.Adam(ix.parameters(), lr=lr) for ix in ixs]
    gen = torch.Generator().manual_seed(seed)
    state = dict(epoch=0, pos=0, val=[], train=[], seconds=0.0, step_losses=[])
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, weights_only=False)
        if ck["train_w"] != train_w:
            raise ValueError(f"{ckpt_path} is another run's (other windows): remove it")
        for ix, opt, w, o in zip(ixs, opts, ck["indexers"], ck["opts"]):
            ix.load_state_dict(w)
            opt.load_state_dict(o)
        gen.set_state(ck["gen"])
        state = ck["state"]

    def save_ckpt():
        torch.save(dict(train_w=train_w, indexers=[ix.state_dict() for ix in ixs],
                        opts=[o.state_dict() for o in opts], gen=gen.get_state(),
                        state=state), ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    def train_hook(layer, h, q, k, v):
        with torch.enable_grad():
            for _ in range(steps):
                r = torch.randint(0, h.shape[0], (rows,), generator=gen).sort().values
                state["step_losses"][layer].append(
                    indexer.train_step(ixs[layer], opts[layer], h, q, k, r))

    def validate():
        per = [0.0] * len(ixs)
        for title, start in val_w:
            def hook(layer, h, q, k, v):
                r = torch.arange(0, h.shape[0], 4)
                with torch.no_grad():
                    per[layer] += float(indexer.kl_loss(ixs[layer](h, r),
                                                        indexer.target(q, k, r), r))
            model.hidden(torch.tensor(ids[title][start:start + window]), observe=hook)
        return [x / len(val_w) for x in per]

    t0 = time.time() - state["seconds"]
    total = epochs * len(train_w)
    while state["epoch"] <= epochs:
        e = state["epoch"]
        if e > 0:
            order = torch.randperm(len(train_w), generator=torch.Generator().manual_seed(
                seed + e)).tolist()
            if state["pos"] == 0:
                state["step_losses"] = [[] for _ in ixs]
            while state["pos"] < len(train_w):
                if minutes and time.time() - t0 > 60 * minutes:
                    raise ValueError(f"time is up after {minutes} min: resume to continue")
                title, start = train_w[order[state["pos"]]]
                done = (e - 1) * len(train_w) + state["pos"]
                metrics.progress(done, total, f"epoch {e}: {title} {start}", t0)
                model.hidden(torch.tensor(ids[title][start:start + window]), observe=train_hook)
                state["pos"] += 1
                state["seconds"] = time.time() - t0
                save_ckpt()
            layer_means = [sum(x) / len(x) for x in state["step_losses"]]
            state["train"].append(dict(epoch=e, loss=sum(layer_means) / len(layer_means),
                                       layers=layer_means))
        val = validate()
        state["val"].append(dict(epoch=e, loss=sum(val) / len(val), layers=val))
        print(f"\nepoch {e}: held-out KL {state['val'][-1]['loss']:.4f}" +
              (f", training KL {state['train'][-1]['loss']:.4f}" if e > 0 else ""),
              file=sys.stderr)
        state["epoch"], state["pos"] = e + 1, 0
        state["seconds"] = time.time() - t0
        save_ckpt()
    indexer.save(ixs, out)
    log = dict(objective=OBJECTIVE, novels=list(texts.TRAINING_NOVELS), window=window,
               train_windows=[dict(doc=t, start=s) for t, s in train_w],
               val_windows=[dict(doc=t, start=s) for t, s in val_w],
               epochs=epochs, steps_per_window=steps, rows_per_step=rows, lr=lr,
               optimizer="Adam (PyTorch defaults but lr), one per layer", heads=heads, dim=dim,
               rope_dim=rope_dim, seed=seed,
               distinct_training_tokens=len(train_w) * window,
               training_tokens_seen=epochs * len(train_w) * window,
               adam_steps_per_layer=epochs * len(train_w) * steps,
               query_rows_per_layer=epochs * len(train_w) * steps * rows,
               forwards=epochs * len(train_w) + (epochs + 1) * len(val_w),
               train_loss=state["train"], val_loss=state["val"],
               seconds=round(state["seconds"]), threads=threads,
               machine=f"{platform.machine()}, {os.cpu_count()} cores (shared)")
    with open(os.path.join(os.path.dirname(out), "indexer_training.json"), "w") as f:
        json.dump(log, f, indent=1)
    os.remove(ckpt_path)
    return log


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--train-windows", type=int, default=52)
    ap.add_argument("--val-windows", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4, help="Adam steps per layer per window")
    ap.add_argument("--rows", type=int, default=256, help="query rows per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--minutes", type=float, help="stop (resumable) after this long")
    ap.add_argument("--out", default=indexer.WEIGHTS)
    args = ap.parse_args(argv)
    try:
        log = train(smollm.load(), smollm.tokenizer(), out=args.out, window=args.window,
                    train_windows=args.train_windows, val_windows=args.val_windows,
                    epochs=args.epochs, steps=args.steps, rows=args.rows, lr=args.lr,
                    threads=args.threads, minutes=args.minutes)
    except (ValueError, smollm.ModelMissing, texts.TextMissing) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"held-out KL by epoch: " + ", ".join(f"{v['loss']:.4f}" for v in log["val_loss"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
