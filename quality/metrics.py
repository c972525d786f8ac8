"""metrics.py — what sparse-attention work reports, measured on SmolLM2 with a pluggable
attention.

    score(model, wins, attend)       per-window token NLL [count, length - 1] (+ the attention's
                                     recall and output error, when it records them); the windows
                                     come from windowsets.py
    summary(nll)                     perplexity with a bootstrap 95% interval over windows
                                     (comparisons of two attentions: stats.py)
    by_position(nll)                 perplexity by token position (bins of doubling size: the
                                     long-range tokens are where patterns differ)
    position_sums(nll)               one window's NLL sum and count per position bin
    passkey_trial(model, ...)        passkey retrieval: a five-digit key hidden at a depth of a
                                     filler text, asked for at the end; the answer is read
                                     teacher-forced (each digit the model's most likely token)

Perplexity is exp(mean NLL over every predicted token of every window). The bootstrap draws whole
windows with replacement (the tokens of one window are not independent), 1000 times, and reports
the 2.5% and 97.5% percentiles (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993).
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

POSITION_BINS = [1, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


def progress(i, n, what, start):
    """One progress line on stderr, rewritten in place: [#####.....] i/n what, elapsed, left."""
    done = int(30 * i / n)
    el = time.time() - start
    left = el / i * (n - i) if i else 0
    sys.stderr.write(f"\r[{'#' * done}{'.' * (30 - done)}] {i}/{n} {what} "
                     f"{el:6.0f} s, ~{left:5.0f} s left ")
    if i == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def score(model, wins, attend, label=""):
    """NLL [count, length - 1] of each window under attend (with a progress bar)."""
    start, out = time.time(), []
    for n, w in enumerate(wins):
        progress(n, len(wins), label, start)
        out.append(model.token_nll(w, attend))
    progress(len(wins), len(wins), label, start)
    return torch.stack(out)


def bootstrap(values, stat, reps=1000, seed=0):
    """(low, high): the 95% percentile interval of stat(values[sample]) over window resamples."""
    g = torch.Generator().manual_seed(seed)
    n = values.shape[0]
    stats = sorted(stat(values[torch.randint(0, n, (n,), generator=g)]) for _ in range(reps))
    return stats[int(0.025 * reps)], stats[int(0.975 * reps) - 1]


def ppl(nll):
    return math.exp(float(nll.double().mean()))


def summary(nll):
    """Perplexity of NLL [windows, tokens] and its bootstrap interval over windows (paired
    comparisons of two attentions: stats.paired on their per-window means)."""
    return {"ppl": ppl(nll), "ppl_ci95": bootstrap(nll, ppl)}


def by_position(nll):
    """[(first position, last position, perplexity)] of the tokens predicted at positions in
    [lo, hi) (position = index of the predicted token in its window)."""
    n = nll.shape[1] + 1
    out = []
    for lo, hi in zip(POSITION_BINS, POSITION_BINS[1:]):
        if lo >= n:
            break
        out.append((lo, min(hi, n) - 1, ppl(nll[:, lo - 1:min(hi, n) - 1])))
    return out


def position_sums(nll):
    """[[first, last, NLL sum, tokens]] of one window's token NLL [L - 1] per position bin (as
    by_position): summed over windows, they give each bin's perplexity."""
    n = nll.shape[0] + 1
    out = []
    for lo, hi in zip(POSITION_BINS, POSITION_BINS[1:]):
        if lo >= n:
            break
        part = nll[lo - 1:min(hi, n) - 1].double()
        out.append([lo, min(hi, n) - 1, float(part.sum()), int(part.numel())])
    return out


def attention_stats(attend):
    """Recall [layers][heads], output relative error [layers] and density [layers] recorded."""
    if not attend.recall:
        return {}
    return {"recall": attend.recall_table().tolist(),
            "recall_mean": float(attend.recall_table().mean()),
            "rel_err": [sum(attend.rel_err[i]) / len(attend.rel_err[i])
                        for i in sorted(attend.rel_err)],
            "density": sum(sum(d) / len(d) for d in attend.density.values()) / len(attend.density)}


NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = "\nWhat is the pass key? The pass key is "


def passkey_prompt(tok, filler_ids, length, depth, key):
    """Token ids [length]: filler text with the needle at `depth` (0..1) of it, the question, and
    the key's five digits at the end; returns (ids, index of the first digit)."""
    needle = tok.encode(NEEDLE.format(key=key)).ids
    question = tok.encode(QUESTION).ids
    answer = tok.encode(str(key)).ids
    n_fill = length - len(needle) - len(question) - len(answer)
    at = int(depth * n_fill)
    ids = list(filler_ids[:at]) + needle + list(filler_ids[at:n_fill]) + question + answer
    return torch.tensor(ids), len(ids) - len(answer)


def passkey_trial(model, tok, filler_ids, attend, length, depth, key):
    """One trial: (hit, digits right) — hit when every one of the key's five digits is the
    model's most likely next token (teacher-forced: one forward)."""
    ids, first = passkey_prompt(tok, filler_ids, length, depth, key)
    logits = model.hidden(ids, attend)[first - 1:-1] @ model.lm_head.T
    right = (logits.argmax(-1) == ids[first:])
    return bool(right.all()), int(right.sum())


def passkey(model, tok, filler_ids, attend, lengths, depths, keys):
    """{(length, depth): share of keys whose five digits are all the model's top token}."""
    out, start, cases = {}, time.time(), [(L, d) for L in lengths for d in depths]
    for n, (L, d) in enumerate(cases):
        progress(n, len(cases), "passkey", start)
        hits = sum(passkey_trial(model, tok, filler_ids, attend, L, d, key)[0] for key in keys)
        out[(L, d)] = hits / len(keys)
    progress(len(cases), len(cases), "passkey", start)
    return out
