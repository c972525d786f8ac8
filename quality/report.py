#!/usr/bin/env python3
"""report.py — the Markdown tables and figures of quality/README.md, made from the committed JSON
results (results/*.json), never typed.

    python quality/report.py            rewrites the tables between the README's markers
                                        (<!-- table:NAME --> ... <!-- /table:NAME -->),
                                        results/dsa_table.md, and the figures in results/
    python quality/report.py --check    exit 1 if a table differs from what the JSON gives
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md")
# Example 05's walkthrough quotes the DSA table too (between the same markers).
EX05_README = os.path.join(HERE, "..", "examples", "05_deepseek_sparse", "README.md")
SELECTIONS = ["indexer", "oracle", "sink+window"]


def load(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def mean(rows):
    flat = [x for r in rows if r is not None for x in r]
    return sum(flat) / len(flat) if flat else float("nan")


def dsa_table(d):
    """Recall (mean over layers and heads) and perplexity per (selection, k)."""
    ks = sorted({int(k) for s in d["recall"].values() for k in s})
    head = ("| k | recall: trained indexer | oracle top-k | sink+window | perplexity: "
            "trained indexer | oracle top-k | sink+window |")
    lines = [head, "|" + "---:|" * 7]
    for k in ks:
        rec = [f"{mean(d['recall'][s][str(k)]):.3f}" for s in SELECTIONS]
        ppl = [f"{d['ppl'][s][str(k)]:.2f}" if str(k) in d["ppl"].get(s, {}) else "not run"
               for s in SELECTIONS]
        lines.append(f"| {k} | " + " | ".join(rec + ppl) + " |")
    lines.append("")
    lines.append(f"Dense perplexity {d['ppl']['dense']:.2f}; {d['windows']} window(s) of "
                 f"{d['window']} tokens of {d['text']}; {d['sinks']} sink tokens; "
                 f"{d['machine']}; {d['seconds']} s.")
    return "\n".join(lines)


def quality_table(d):
    """Per attention: perplexity [95% CI], NLL change vs dense [95% CI], recall, output error,
    density, passkey accuracy."""
    lines = ["| attention | perplexity [95% CI] | NLL change vs dense [95% CI] | recall | "
             "output rel. error | density | passkey |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in d["results"].items():
        lo, hi = r["ppl_ci95"]
        delta = (f"{r['delta_nll']:+.3f} [{r['delta_nll_ci95'][0]:+.3f}, "
                 f"{r['delta_nll_ci95'][1]:+.3f}]" if "delta_nll" in r else "—")
        err = sum(r["rel_err"]) / len(r["rel_err"])
        pk = r.get("passkey")
        pk = f"{sum(x['accuracy'] for x in pk) / len(pk):.2f}" if pk else "—"
        lines.append(f"| `{name}` | {r['ppl']:.2f} [{lo:.2f}, {hi:.2f}] | {delta} | "
                     f"{r['recall_mean']:.3f} | {err:.3f} | {r['density']:.3f} | {pk} |")
    lines.append("")
    lines.append(f"{d['windows']} windows of {d['window']} tokens of {d['text']} "
                 f"({d['tokens']} tokens); {d['machine']}.")
    cells = [(x["length"], x["depth"]) for r in d["results"].values() for x in r.get("passkey", [])]
    cells = sorted(set(cells))
    if cells:  # passkey accuracy per (length, depth of the key in the filler)
        lines += ["", "| passkey: attention | " + " | ".join(f"L={L}, depth {dp:g}"
                                                          for L, dp in cells) + " |",
                  "|---|" + "---:|" * len(cells)]
        for name, r in d["results"].items():
            acc = {(x["length"], x["depth"]): x["accuracy"] for x in r.get("passkey", [])}
            lines.append(f"| `{name}` | " + " | ".join(
                f"{acc[c]:.2f}" if c in acc else "—" for c in cells) + " |")
    return "\n".join(lines)


def tables():
    out = {}
    d = load("dsa_2k.json")
    if d:
        out["dsa"] = dsa_table(d)
    for name in sorted(os.listdir(RESULTS)) if os.path.isdir(RESULTS) else []:
        if name.endswith(".json") and name not in ("dsa_2k.json", "indexer_training.json"):
            out[name[:-5]] = quality_table(load(name))
    return out


def replace_tables(text, found):
    for name, table in found.items():
        n = re.escape(name)
        text = re.sub(rf"(<!-- table:{n} -->\n).*?(<!-- /table:{n} -->)",
                      lambda m: m.group(1) + table + "\n" + m.group(2), text, flags=re.S)
    return text


def figures():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name in sorted(os.listdir(RESULTS)):
        if not name.endswith(".json") or name in ("dsa_2k.json", "indexer_training.json"):
            continue
        d = load(name)
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for att, r in d["results"].items():
            pos = r["by_position"]
            ax[0].plot([(a + b) / 2 for a, b, _ in pos], [p for _, _, p in pos], "o-", label=att)
            ax[1].plot([sum(h) / len(h) for h in r["recall"]], label=att)
        ax[0].set(xscale="log", xlabel="token position in the window", ylabel="perplexity",
                  title=f"perplexity by position ({d['text']})")
        ax[1].set(xlabel="layer", ylabel="recall (mean over heads)", title="attention recall")
        ax[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, name[:-5] + ".png"), dpi=90)
        plt.close(fig)
    d = load("dsa_2k.json")
    if d:
        fig, ax = plt.subplots(figsize=(6, 4))
        for s in SELECTIONS:
            for k, style in (("64", ":"), ("256", "-")):
                ax.plot([sum(h) / len(h) for h in d["recall"][s][k]], style, label=f"{s} k={k}")
        ax.set(xlabel="layer", ylabel="recall (mean over heads)",
               title=f"DSA selections at {d['window']} tokens")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "dsa_recall.png"), dpi=90)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    found = tables()
    with open(README) as f:
        readme = f.read()
    new = replace_tables(readme, found)
    md = os.path.join(RESULTS, "dsa_table.md")
    if args.check:
        stale = [n for n in found if f"<!-- table:{n} -->\n{found[n]}\n" not in readme]
        if "dsa" in found and (not os.path.exists(md) or open(md).read() != found["dsa"] + "\n"):
            stale.append("results/dsa_table.md")
        ex05 = open(EX05_README).read()
        if "dsa" in found and f"<!-- table:dsa -->\n{found['dsa']}\n" not in ex05:
            stale.append("dsa in examples/05_deepseek_sparse/README.md")
        for n in stale:
            print(f"out of date: {n} (run python quality/report.py)")
        print("tables up to date" if not stale else f"{len(stale)} stale")
        return 1 if stale else 0
    with open(README, "w") as f:
        f.write(new)
    if "dsa" in found:
        with open(md, "w") as f:
            f.write(found["dsa"] + "\n")
        with open(EX05_README) as f:
            ex05 = replace_tables(f.read(), {"dsa": found["dsa"]})
        with open(EX05_README, "w") as f:
            f.write(ex05)
    figures()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
        sys.exit(f"error: {e.name} is not installed for {sys.executable}: "
                 "run scripts/setup.sh --python, then use .venv/bin/python")
