#!/usr/bin/env python3
"""report.py — the Markdown tables, verdict words and figures of quality/README.md and of example
05's README (and example 09's FP8 table), made from the committed result files (results/*.json, written by recompute.py),
never typed.

    python quality/report.py            rewrite the tables between the documents' markers
                                        (<!-- table:NAME --> ... <!-- /table:NAME -->), the
                                        verdict words (below) and the figures in results/
    python quality/report.py --check    exit 1 if a table or a verdict word differs from what the
                                        results give (CTest quality.results_table)

A verdict word in prose is written between markers naming the comparison, and is regenerated
like a table:

    <!-- verdict SET|A|B -->worse<!-- /verdict -->

(A's per-window NLL against B's on window set SET: "better", "worse" or "no significant
difference", stats.paired). Example 06's make_tables.py uses the same functions.
"""
import argparse
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plan  # noqa: E402
import stats  # noqa: E402
import windowsets  # noqa: E402

RESULTS = os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md")
EX05_README = os.path.join(HERE, "..", "examples", "05_deepseek_sparse", "README.md")
EX06 = os.path.join(HERE, "..", "examples", "06_custom_pattern")
EX09_README = os.path.join(HERE, "..", "examples", "09_decode", "README.md")  # its fp8 table only
# Every document whose prose holds verdict words: together, the family of comparisons that Holm's
# correction (holm_table) is taken over.
VERDICT_DOCS = (README, EX05_README, os.path.join(EX06, "README.md"), os.path.join(EX06, "REPORT.md"))
NAMES = {"dense": "dense", "window": "window", "sink+window": "sink+window",
         "strided": "strided", "bigbird": "BigBird", "ladder": "ladder",
         "oracle": "DSA top-k, oracle", "indexer": "DSA top-k, trained indexer"}


def load(name, results=RESULTS):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def complete(d, spec):
    """The config's entry when all of the set's windows are in, else None."""
    c = d["configs"].get(spec) if d else None
    return c if c and c.get("complete") else None


def fmt_ci(mean, ci, digits=3):
    return f"{mean:+.{digits}f} [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def comparison(d, a, b):
    """stats.paired of A's per-window NLL against B's on a set's results (None if either is not
    complete)."""
    ca, cb = complete(d, a), complete(d, b)
    if not ca or not cb:
        return None
    if b == "dense" and "vs_dense" in ca:
        return ca["vs_dense"]
    return stats.paired(ca["window_nll"], cb["window_nll"])


def verdict(d, a, b):
    r = comparison(d, a, b)
    return r["verdict"] if r else "not run"


def set_caption(d):
    s = d["set"]
    return (f"n = {s['count']} windows: {windowsets.describe(s['name'])}. "
            f"{d['model']}; {d['machine']}.")


def pct(x):
    return "—" if x is None else f"{x:.3f}"


# ----------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------

def sets_table():
    lines = ["| window set | text | documents (tokens) | length | count | stride | skip |",
             "|---|---|---|---:|---:|---:|---:|"]
    for name, ws in windowsets.SETS.items():
        docs = ", ".join(f"{n:,}" for n in windowsets.TOKENS[ws.text])
        lines.append(f"| `{name}` | {windowsets.TITLES[ws.text]} | {docs} | {ws.length:,} "
                     f"| {ws.count} | {ws.stride:,} | {ws.skip:,} |")
    return "\n".join(lines)


def quality_table(d, specs=None, names=None):
    """Per attention of a set: density, n, perplexity [bootstrap CI], NLL change against dense
    [t CI] with both tests' p and the verdict, recall both ways and output error."""
    lines = ["| attention | density | n | perplexity [95% CI] | NLL change vs dense [95% CI] "
             "| p (t / sign-flip) | vs dense | mass recall | set recall | output error |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for spec in specs or d["configs"]:
        c = complete(d, spec)
        name = (names or {}).get(spec, f"`{spec}`")
        if not c:
            lines.append(f"| {name} | — | — | not run | | | | | | |")
            continue
        lo, hi = c["ppl_ci95_boot"]
        vs = c.get("vs_dense")
        delta = fmt_ci(vs["mean"], vs["ci95_t"]) if vs else "—"
        p = f"{stats.fmt_p(vs['p_t'])} / {stats.fmt_p(vs['p_signflip'])}" if vs else "—"
        rec = c.get("recall", {})
        lines.append(f"| {name} | {c['density']:.3f} | {c['n']} | {c['ppl']:.2f} [{lo:.2f}, "
                     f"{hi:.2f}] | {delta} | {p} | {vs['verdict'] if vs else '—'} "
                     f"| {pct(rec.get('mass'))} | {pct(rec.get('set'))} "
                     f"| {pct(rec.get('rel_err'))} |")
    lines += ["", set_caption(d)]
    return "\n".join(lines)


def dsa_rows(d, ks, sel):
    """The DSA comparison rows of a set at budgets ks."""
    out = []
    L = d["set"]["length"]
    text = OTHER_TEXTS.get(d["set"]["name"].split("-")[0])
    Lt = f"{L:,}" + (f" ({text})" if text else "")
    for k in ks:
        specs = {"trained indexer": f"indexer:k={k}", "oracle top-k": f"oracle:k={k}",
                 "sink+window": f"global:n=4+causal_window:w={k - 4}"}
        for name, spec in specs.items():
            if name not in sel:
                continue
            c = complete(d, spec)
            if not c:
                out.append(f"| {Lt} | {k} | {name} | — | — | not run | | | | | |")
                continue
            rec = c.get("recall", {})
            triv = 1 - rec["nontrivial"] / rec["rows"] if rec.get("rows") else None
            vs = c.get("vs_dense")
            if name == "sink+window":
                cmp = "—"
            else:
                r = comparison(d, spec, specs["sink+window"])
                cmp = (f"{fmt_ci(r['mean'], r['ci95_t'])}, p {stats.fmt_p(max(r['p_t'], r['p_signflip']))}"
                       f": {r['verdict']}" if r else "— (sink+window at this k: no results)")
            out.append(f"| {Lt} | {k} | {name} | {c['n']} | {c['density']:.3f} "
                       f"| {pct(rec.get('mass'))} | {pct(rec.get('set'))} | {pct(triv)} "
                       f"| {c['ppl']:.2f} | {fmt_ci(vs['mean'], vs['ci95_t']) if vs else '—'} "
                       f"| {cmp} |")
    return out


DSA_SELECTIONS = ("trained indexer", "oracle top-k", "sink+window")
OTHER_TEXTS = {"kjv": "Bible", "go": "Go"}  # the L column names the text when it is not Austen
DSA_SETS = (("austen-2k", (128, 256, 512)), ("kjv-2k", (256,)), ("go-2k", (256,)),
            ("austen-8k", (1024, 2048)))


def dsa_table(results=RESULTS):
    """The trained indexer against the oracle top-k and sink+window at the same budget k."""
    head = ["| L (text) | k | selection | n | density | mass recall | set recall@k "
            "| trivial queries | perplexity | NLL change vs dense [95% CI] | vs sink+window [95% CI], p: verdict |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines, captions = [], []
    for name, ks in DSA_SETS:
        d = load(f"{name}.json", results)
        if not d:
            continue
        rows = dsa_rows(d, ks, DSA_SELECTIONS)
        if any("not run" not in r for r in rows):
            lines += [r for r in rows if "not run" not in r]
            dense = complete(d, "dense")
            captions.append(f"{d['set']['length']:,} tokens: {windowsets.describe(name)}; " +
                            (f"dense perplexity {dense['ppl']:.2f}" if dense else
                             "dense not run yet"))
    if not lines:
        return None
    return "\n".join(head + lines + ["", "; ".join(captions) + ". Recall on 256 query rows "
                                     "per layer and window of the dense model (its own q/k); "
                                     "mass and set recall over the queries that see more than "
                                     "k keys (the trivial ones, which keep every key, apart)."])


def fp8_table(results=RESULTS):
    """FP8 against 16 bits on the same windows (plan.FP8_CONFIGS): the model over an FP8 KV cache
    against dense, the trained indexer in FP8 against itself at the same k; each pair's paired
    tests and verdict, and the FP8 run's time."""
    lines = ["| window set | FP8 | against | n | perplexity, against → FP8 | NLL change of FP8 "
             "[95% CI] | p (t / sign-flip) | verdict | time of the FP8 run |",
             "|---|---|---|---:|---:|---:|---:|---|---:|"]
    done = []
    for name in plan.FP8_SETS:
        d = load(f"{name}.json", results)
        for spec, family, k in plan.fp8_configs(name):
            base = "dense" if family == "fp8 cache" else f"indexer:k={k}"
            what = ("KV cache (e4m3, a scale per token and K/V head)" if family == "fp8 cache"
                    else f"indexer, k = {k} (e4m3 q_I, k_I)")
            against = "dense, 32-bit cache" if base == "dense" else f"the indexer in 32 bits"
            c, cb = complete(d, spec), complete(d, base)
            r = comparison(d, spec, base)
            if not r:
                lines.append(f"| `{name}` | {what} | {against} | — | not run | | | | |")
                continue
            done.append(name)
            lines.append(f"| `{name}` | {what} | {against} | {c['n']} | {cb['ppl']:.2f} → "
                         f"{c['ppl']:.2f} | {fmt_ci(r['mean'], r['ci95_t'], 4)} | "
                         f"{stats.fmt_p(r['p_t'])} / {stats.fmt_p(r['p_signflip'])} | "
                         f"{r['verdict']} | {c['seconds'] / 60:.1f} min |")
    sets = "; ".join(windowsets.describe(n) for n in dict.fromkeys(done))
    d = load(f"{done[0]}.json", results) if done else None
    lines += ["", (f"n windows per set: {sets}. " if done else "") +
              "Paired over the windows (stats.paired: t-test and sign-flip test, both at 5 %). "
              "PyTorch emulations on the CPU (quality/attention.py DenseFP8: K after RoPE and V "
              "through e4m3 with FlashMLA's power-of-two scale, as example 09's versions 11-12, "
              "held to them by quality.fp8_cache_real_qkv; example 05's index_scores_fp8 as its "
              "version 8, held to it by python.deepseek_sparse), not the kernels; the 32-bit side "
              "is the toolkit's float32. Time: the FP8 run's forwards, summed"
              + (f" ({d['machine']})." if d else ".")]
    return "\n".join(lines)


def frontier_table(d):
    """Per family and density point: NLL change vs dense [95% CI] (density) on a set."""
    L = d["set"]["length"]
    ks = sorted(plan.FRONTIER[L])
    lines = ["| family | " + " | ".join(
        f"k = {k} ({100 * d_:.0f} %): NLL change [95% CI] (density)"
        for k, d_ in ((k, _topk_density(k, L)) for k in ks)) + " |",
        "|---|" + "---:|" * len(ks)]
    for fam in plan.FAMILIES:
        cells = []
        for k in ks:
            spec = plan.FRONTIER[L][k][fam]
            c = complete(d, spec)
            vs = c.get("vs_dense") if c else None
            cells.append("not run" if not c else
                         f"{fmt_ci(vs['mean'], vs['ci95_t'])} ({c['density']:.3f})" if vs else
                         f"perplexity {c['ppl']:.2f}, dense not run ({c['density']:.3f})")
        lines.append(f"| {NAMES[fam]} | " + " | ".join(cells) + " |")
    dense = complete(d, "dense")
    lines += ["", set_caption(d) + (f" Dense perplexity {dense['ppl']:.2f}." if dense else "")]
    return "\n".join(lines)


def _topk_density(k, n):
    return (k * (k + 1) / 2 + (n - k) * k) / (n * (n + 1) / 2)


def passkey_table(results=RESULTS, specs=None, names=None):
    d = load("passkey.json", results)
    if not d:
        return None
    depths = d["depths"]
    lines = ["| L | attention | density | hits / trials | accuracy [95% Wilson] | " +
             " | ".join(f"depth {x:g}" for x in depths) + " |",
             "|---:|---|---:|---:|---:|" + "---:|" * len(depths)]
    for L, cfgs in sorted(d["lengths"].items(), key=lambda x: int(x[0])):
        for spec, c in cfgs.items():
            if specs and spec not in specs(int(L)):
                continue
            lo, hi = c["wilson95"]
            name = (names or {}).get(spec, f"`{spec}`")
            lines.append(f"| {int(L):,} | {name} | {c['density']:.3f} | {c['hits']} / "
                         f"{c['trials']} | {c['accuracy']:.2f} [{lo:.2f}, {hi:.2f}] | " +
                         " | ".join(f"{c['depth'][str(x)]['hits']}/{c['depth'][str(x)]['trials']}"
                                    if str(x) in c["depth"] else "—" for x in depths) + " |")
    cells = [c["depth"][k] for cfgs in d["lengths"].values() for c in cfgs.values()
             for k in c["depth"]]
    agree = sum(x["hits"] in (0, x["trials"]) for x in cells)
    lines += ["", f"Teacher-forced retrieval (a hit: all five digits are the model's most likely "
                  f"tokens) of {len(d['keys'])} keys at each of {len(depths)} depths of a filler "
                  f"from {d['filler']['doc']} (token {d['filler']['start']:,} on); "
                  f"{d['model']}; {d['machine']}. The trials are not independent: in {agree} "
                  f"of {len(cells)} (length, attention, depth) cells every key is found or none "
                  f"is (one filler, the needle at the same place), so a depth counts for little "
                  f"more than one trial and the Wilson intervals over all the trials of a row "
                  f"are narrower than the evidence; read a row as depths reached."]
    return "\n".join(lines)


def training_table(results=RESULTS):
    t = load("indexer_training.json", results)
    if not t:
        return None
    val = ", ".join(f"{v['loss']:.3f}" for v in t["val_loss"])
    tr = ", ".join(f"{v['loss']:.3f}" for v in t["train_loss"])
    docs = sorted({w["doc"] for w in t["train_windows"]})
    return "\n".join([
        "| what | value |", "|---|---|",
        f"| objective (per layer) | {t['objective']} |",
        f"| indexer | {t['heads']} heads x {t['dim']} dimensions ({t['rope_dim']} rotated), "
        f"one per layer |",
        f"| training windows | {len(t['train_windows'])} distinct windows of {t['window']:,} "
        f"tokens from {len(docs)} novels never evaluated ({', '.join(docs)}) |",
        f"| held-out windows | {len(t['val_windows'])} of the same novels, never trained on |",
        f"| tokens | {t['distinct_training_tokens']:,} distinct; {t['training_tokens_seen']:,} "
        f"seen in {t['epochs']} epochs |",
        f"| steps | {t['adam_steps_per_layer']} Adam steps per layer (lr {t['lr']:g}), "
        f"{t['steps_per_window']} per window, each on {t['rows_per_step']} random query rows "
        f"({t['query_rows_per_layer']:,} query rows per layer in all) |",
        f"| held-out KL (nats), epoch 0 (untrained) to {t['epochs']} | {val} |",
        f"| training KL (nats), epochs 1 to {t['epochs']} | {tr} |",
        f"| time | {t['seconds']:,} s ({t['forwards']} forwards of the model), {t['machine']} |"])


def cost_table(results=RESULTS):
    """Per phase of recompute.py: jobs done of planned, forwards by length, the time the finished
    jobs took (the sum of their own clocks; the indexer's training from its log), and the time
    the rest would take at the mean time per forward measured at each length."""
    raw = os.path.join(results, "raw")
    done = {}
    for path in sorted(os.listdir(raw)) if os.path.isdir(raw) else []:
        if not path.endswith(".jsonl"):
            continue
        key = path[:-len(".jsonl")]
        for r in plan.read_lines(os.path.join(raw, path)):
            if r["job"] == "nll":
                done[("nll", key, r["config"], r["window"])] = r["seconds"]
            else:
                done[("passkey", r["length"], r["config"], r["depth"], r["key"])] = r["seconds"]
    per_length = {}
    for job, secs in done.items():
        L = plan.forwards(job)[0]
        per_length.setdefault(L, []).append(secs)
    rate = {L: sum(x) / len(x) for L, x in per_length.items()}
    train = load("indexer_training.json", results)
    lines = ["| phase | jobs done / planned | forwards done (tokens each) | time of the done jobs "
             "| s per forward | the rest, at the measured s per forward |",
             "|---|---:|---|---:|---:|---:|"]
    total = left_total = 0.0
    unknown = False
    for name, jobs in plan.phases():
        if jobs == [("train",)]:
            hit = jobs if train else []
            secs = train["seconds"] if train else 0
            fw = {2048: train["forwards"]} if train else {}
        else:
            hit = [j for j in jobs if j in done]
            secs, fw = sum(done[j] for j in hit), {}
            for j in hit:
                L = plan.forwards(j)[0]
                fw[L] = fw.get(L, 0) + 1
        left = 0.0
        for j in jobs:
            if j not in hit:
                L, n = plan.forwards(j)
                if L in rate:
                    left += n * rate[L]
                else:
                    unknown = True
                    left = None
                    break
        total += secs
        left_total += left or 0.0
        count = sum(fw.values())
        forwards = ", ".join(f"{c} ({L:,})" for L, c in sorted(fw.items())) or "—"
        lines.append(f"| {name} | {len(hit)} / {len(jobs)} | {forwards} "
                     f"| {secs / 3600:.2f} h | {secs / count:.1f} |" if count else
                     f"| {name} | 0 / {len(jobs)} | — | — | — |")
        lines[-1] += (" — |" if left == 0 else " no measurement |" if left is None
                      else f" {left / 3600:.1f} h |")
    lines.append(f"| all | | | {total / 3600:.2f} h | | {left_total / 3600:.1f} h"
                 f"{' + the phases without a measurement' if unknown else ''} |")
    return "\n".join(lines)


def verify_table(results=RESULTS):
    """recompute.py --verify's records (results/verify.json), one block of rows per command: per
    window set (passkey: per length), how many committed jobs were run again and how close each
    came to its committed line."""
    v = load("verify.json", results)
    if not v:
        return None
    lines = ["| check | jobs of | run again | bit for bit | NLL within 1e-5 | within the "
             "tolerance | disagree | largest NLL difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for i, (cmd, run) in enumerate(sorted(v["runs"].items())):
        groups = {}
        for r in run["jobs"]:
            j = r["job"]
            groups.setdefault(j[1] if j[0] == "nll" else f"passkey at {j[1]:,}", []).append(r)
        for name in sorted(groups, key=lambda g: (g.startswith("passkey"), g)):
            rs = groups[name]
            d = [r["differences"] for r in rs]
            exact = sum(all(x == 0 for x in x_.values()) for x_ in d)
            close = sum(1 for r in rs if r["agrees"] and (r["differences"].get("nll") or 0)
                        <= 1e-5 and not all(x == 0 for x in r["differences"].values()))
            nll = [x["nll"] for x in d if x.get("nll") is not None]
            lines.append(f"| {i + 1} | {name} | {len(rs)} | {exact} | {close} "
                         f"| {sum(r['agrees'] for r in rs) - exact - close} "
                         f"| {sum(not r['agrees'] for r in rs)} "
                         f"| {f'{max(nll):.1e}' if nll else '— (hit or miss)'} |")
        tol = ", ".join(f"{k} {x:g}" for k, x in run["tolerances"].items())
        notes.append(f"{i + 1}: `recompute.py {cmd}` on {run['date']} ({run['machine']}; "
                     f"--threads {run['threads']}; tolerance per field: {tol}).")
    return "\n".join(lines + [""] + notes + [
        "", "Bins are compared per token (relative to the bin's NLL sum). \"NLL within 1e-5\" "
        "and \"within the tolerance\" count the jobs that are not bit for bit."])


def holm(ps):
    """Holm's step-down adjusted p values (Holm 1979) of a list of p values, in the same order:
    the i-th smallest times (m - i), made monotone, at most 1."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out, run = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (m - rank) * ps[i]))
        out[i] = run
    return out


def verdict_family(results=RESULTS, docs=VERDICT_DOCS):
    """[(set, A, B, comparison)] of the distinct verdict markers of the documents whose results
    are complete (a 'not run' verdict is no comparison)."""
    seen, out, cache = set(), [], {}
    for path in docs:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for s, a, b, _ in VERDICT.findall(f.read()):
                if (s, a, b) in seen:
                    continue
                seen.add((s, a, b))
                if s not in cache:
                    cache[s] = load(f"{s}.json", results)
                r = comparison(cache[s], a, b)
                if r:
                    out.append((s, a, b, r))
    return out


def holm_table(results=RESULTS):
    """The verdict words under Holm's correction over their whole family: its size, and every
    verdict that does not hold once corrected (the p of a comparison: the larger of its two tests',
    as the verdict requires both below alpha)."""
    fam = verdict_family(results)
    if not fam:
        return None
    ps = [max(r["p_t"], r["p_signflip"]) for *_, r in fam]
    adj = holm(ps)
    decided = [i for i, (*_, r) in enumerate(fam) if r["verdict"] != "no significant difference"]
    lost = [i for i in decided if adj[i] >= stats.ALPHA]
    lines = [f"Family: the {len(fam)} distinct comparisons whose verdict words appear in "
             f"quality/README.md and the READMEs of examples 05 and 06 and example 06's report; "
             f"{len(decided)} of them say \"better\" or \"worse\". Under Holm's correction at "
             f"{stats.ALPHA:g} over that family (each comparison's p: the larger of its t-test's "
             f"and sign-flip test's), {len(decided) - len(lost)} of those still hold"
             + (":" if not lost else "; these do not:")]
    if lost:
        lines += ["", "| window set | A | B | NLL change of A vs B | p | Holm-adjusted p | verdict "
                  "| under Holm |", "|---|---|---|---:|---:|---:|---|---|"]
        for i in lost:
            s, a, b, r = fam[i]
            lines.append(f"| `{s}` | `{a}` | `{b}` | {r['mean']:+.4f} | {stats.fmt_p(ps[i])} "
                         f"| {stats.fmt_p(adj[i])} | {r['verdict']} | no significant "
                         f"difference |")
    else:
        lines[-1] = lines[-1][:-1] + ": every one."
    return "\n".join(lines)


def rope_probe_table(results=RESULTS):
    """rope_probe.py's test of the 8K indexer's collapse: per variant, NLL per token over the
    probed windows in the position bins from 1,024 on, and the indexer's RoPE frequencies."""
    r = load("rope_probe.json", results)
    if not r or not r["runs"]:
        return None
    pairs = sorted({x["pair"] for x in r["runs"].values()})
    wins = sorted(w for w in {x["window"] for x in r["runs"].values()}
                  if all(f"pair {p}|{w}" in r["runs"] for p in pairs))  # every variant done
    if not wins:
        return None

    def per_bin(bins_of):  # {first position: NLL per token} summed over the windows
        acc = {}
        for bins in bins_of:
            for lo, hi, total, n in bins:
                a = acc.setdefault((lo, hi), [0.0, 0])
                a[0] += total
                a[1] += n
        return {k: v[0] / v[1] for k, v in acc.items()}

    rows = [("dense (committed)", per_bin(r["committed"]["dense"][str(w)] for w in wins)),
            (f"trained indexer, k = {r['k']:,} (committed)",
             per_bin(r["committed"][f"indexer:k={r['k']}"][str(w)] for w in wins))]
    for p in pairs:
        rows.append((f"the same, frequency pair {p} removed",
                     per_bin(r["runs"][f"pair {p}|{w}"]["bins"] for w in wins)))
    dense = rows[0][1]
    bins = [b for b in sorted(dense) if b[0] >= 1024]
    lines = ["| attention | " + " | ".join(f"queries {lo:,}–{hi:,}: NLL (vs dense)"
                                           for lo, hi in bins) + " |",
             "|---|" + "---:|" * len(bins)]
    for name, v in rows:
        lines.append(f"| {name} | " + " | ".join(
            f"{v[b]:.3f}" + ("" if v is dense else f" ({v[b] - dense[b]:+.3f})") for b in bins)
            + " |")
    fq = r["frequencies"]
    lines += ["", f"`{r['set']}` window{'s' if len(wins) > 1 else ''} {', '.join(str(w) for w in wins)}; NLL in nats per token "
              f"of the tokens of each position bin, over those windows. `rope_probe.py` "
              f"({r['machine']}); the committed rows are the same windows' lines of "
              f"results/raw/{r['set']}.jsonl. The indexer's RoPE frequencies θ_c (pair c) and the "
              "distance at which each turns by π; rotation at the longest distance it was trained "
              "on (2,047): " + "; ".join(
                  f"c = {c}: θ = {t:.3g}, π at {d:,.0f}, {a:.2f} rad" for c, t, d, a in fq) + "."]
    return "\n".join(lines)


def tables(results=RESULTS):
    out = {"sets": sets_table(), "cost": cost_table(results)}
    for name in windowsets.SETS:
        d = load(f"{name}.json", results)
        if d and name.endswith("-512"):  # the FP8 configurations have a table of their own
            out[name] = quality_table(d, [s for s, c in d["configs"].items()
                                          if c.get("family") not in plan.FP8_FAMILIES])
        if d and name in ("kjv-2k", "go-2k"):  # phase 2k-texts: the configurations it runs
            out[name] = quality_table(d, [s for s in d["configs"] if complete(d, s)])
        if d and name in ("austen-2k", "austen-8k"):
            out[f"frontier-{name[-2:]}"] = frontier_table(d)
    for name, make in (("dsa", dsa_table), ("fp8", fp8_table), ("passkey", passkey_table),
                       ("training", training_table), ("verify", verify_table),
                       ("holm", holm_table), ("rope-probe", rope_probe_table)):
        t = make(results)
        if t:
            out[name] = t
    return out


# ----------------------------------------------------------------------------------------------
# Rewriting the documents
# ----------------------------------------------------------------------------------------------

VERDICT = re.compile(r"<!-- verdict ([^|]+)\|([^|]+)\|([^ ]+) -->(.*?)<!-- /verdict -->")


def replace_tables(text, found, missing="not run: no results yet", only=None):
    """Every <!-- table:NAME --> block (of the names in only, if given) rewritten with
    found[NAME] (missing: that text)."""
    def sub(m):
        if only is not None and m.group(2) not in only:
            return m.group(0)
        body = found.get(m.group(2)) or missing
        return m.group(1) + body + "\n" + m.group(3)
    return re.sub(r"(<!-- table:([\w.-]+) -->\n)(?:.*?\n)?(<!-- /table:\2 -->)", sub, text,
                  flags=re.S)


def replace_verdicts(text, results=RESULTS):
    cache = {}

    def sub(m):
        s, a, b = m.group(1), m.group(2), m.group(3)
        if s not in cache:
            cache[s] = load(f"{s}.json", results)
        return f"<!-- verdict {s}|{a}|{b} -->{verdict(cache[s], a, b)}<!-- /verdict -->"
    return VERDICT.sub(sub, text)


def regenerate(path, found, check, results=RESULTS, only=None):
    """Rewrite (or, with check, compare) one document's tables and verdicts; True if current.
    only: the names of the tables to rewrite (the others are another script's)."""
    with open(path) as f:
        text = f.read()
    new = replace_verdicts(replace_tables(text, found, only=only), results)
    if new == text:
        return True
    if check:
        old_v = VERDICT.findall(text)
        new_v = VERDICT.findall(new)
        for o, n in zip(old_v, new_v):
            if o[3] != n[3]:
                print(f"{os.path.relpath(path)}: verdict {o[0]}|{o[1]}|{o[2]} says '{o[3]}', "
                      f"the results '{n[3]}'")
        print(f"{os.path.relpath(path)}: out of date (run python quality/report.py)")
        return False
    with open(path, "w") as f:
        f.write(new)
    return True


def figures(results=RESULTS):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name in windowsets.SETS:
        d = load(f"{name}.json", results)
        if not d:
            continue
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for spec, c in d["configs"].items():
            if c.get("complete") and c.get("family") not in plan.FP8_FAMILIES:
                pos = c["by_position"]
                ax[0].plot([(a + b) / 2 for a, b, _ in pos], [p for _, _, p in pos], "o-",
                           label=spec, ms=3)
            rec = c.get("recall")
            if rec and c.get("family") in ("sink+window", "ladder", "oracle", "indexer") \
                    and (c.get("k") in (None, d["set"]["length"] // 8, 64)):
                ax[1].plot(rec["layer_mass"], label=f"{spec} (mass)")
        ax[0].set(xscale="log", xlabel="token position in the window", ylabel="perplexity",
                  title=f"perplexity by position ({name}, n = {d['set']['count']})")
        ax[1].set(xlabel="layer", ylabel="mass recall (non-trivial queries)",
                  title="recall on the dense model's q/k")
        ax[0].legend(fontsize=6)
        ax[1].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(results, f"{name}.png"), dpi=80)
        plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--figures", action="store_true", help="also redraw the figures")
    args = ap.parse_args(argv)
    found = tables()
    ok = all([regenerate(README, found, args.check),
              regenerate(EX05_README, found, args.check),
              regenerate(EX09_README, {"fp8": found.get("fp8")}, args.check, only=("fp8",))])
    if args.figures and not args.check:
        figures()
    print("tables and verdicts up to date" if ok else "stale", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
        from chapter_script import missing
        sys.exit(missing(e.name, setup="--python"))
