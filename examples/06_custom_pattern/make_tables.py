#!/usr/bin/env python3
"""make_tables.py — every number README.md and REPORT.md quote, regenerated from the committed
result files of example 06 (results/): the quality runs (quality_runs.sh), the simulator bench
(bench_sim.sh) and the parameters of the GPU grid (ladder.py). Each table sits between
<!-- table:NAME --> and <!-- /table:NAME --> markers and is rewritten in place.

    python make_tables.py            rewrite the tables (and with --figures the report's figure)
    python make_tables.py --check    exit 1 if a table differs from its result files (a CTest)

The ladder is compared with each contender on the same windows: the paired bootstrap 95 %
interval of (contender's NLL - ladder's NLL), windows resampled 1000 times (quality/metrics.py's
bootstrap); an interval above 0 means the ladder is significantly better, below 0 worse.
"""
import argparse
import json
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "quality"))
sys.path.insert(0, HERE)
import ladder  # noqa: E402

LADDER = "ladder:b=8,s=1,w=4"
ROLES = {"dense": "dense (reference)", LADDER: "**ladder (ours)**",
         "global:n=4+causal_window:w=60": "window: 4 sinks + causal window",
         "strided:l=5": "strided (Sparse Transformer)", "bigbird:b=8,r=8,seed=1": "BigBird",
         "oracle:k=64": "DSA top-k, oracle selection", "indexer:k=64": "DSA top-k, trained indexer",
         "ladder:b=8,s=0,w=6": "ablation: no sink block",
         "ladder:b=1,s=4,w=56": "ablation: token granularity (b=1)",
         "ladder:b=4,s=2,w=12": "ablation: finer blocks (b=4)"}


def load(name):
    with open(os.path.join(HERE, "results", name)) as f:
        return json.load(f)


def paired(a, b):
    """Mean and 95 % interval of a - b over the same windows (nats per token)."""
    import torch
    import metrics
    d = torch.tensor(a, dtype=torch.float64) - torch.tensor(b, dtype=torch.float64)
    lo, hi = metrics.bootstrap(d, lambda x: float(x.mean()))
    return float(d.mean()), lo, hi


def quality_table(name):
    run = load(name)
    res = run["results"]
    lad = res[LADDER]["window_nll"]
    rows = ["| attention | spec | density | perplexity [95% CI] | NLL change vs dense [95% CI] "
            "| contender - ladder NLL [95% CI] | recall |", "|---|---|---:|---:|---:|---:|---:|"]
    for spec, r in res.items():
        dn = "—" if spec == "dense" else \
            f"{r['delta_nll']:+.3f} [{r['delta_nll_ci95'][0]:+.3f}, {r['delta_nll_ci95'][1]:+.3f}]"
        if spec == LADDER:
            vs = "—"
        else:
            m, lo, hi = paired(r["window_nll"], lad)
            mark = " (ladder better)" if lo > 0 else " (ladder worse)" if hi < 0 else ""
            vs = f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"
        rows.append(f"| {ROLES.get(spec, spec)} | `{spec}` | {r.get('density', 1.0):.3f} "
                    f"| {r['ppl']:.2f} [{r['ppl_ci95'][0]:.2f}, {r['ppl_ci95'][1]:.2f}] | {dn} "
                    f"| {vs} | {r.get('recall_mean', 1.0):.3f} |")
    rows.append("")
    rows.append(textwrap.fill(f"{run['windows']} windows of {run['window']} tokens of "
                              f"{run['text']} ({run['tokens']} tokens); {run['machine']}.", 100))
    return "\n".join(rows)


def passkey_table():
    run = load("passkey.json")
    res = run["results"]
    cells = [(p["length"], p["depth"]) for p in next(iter(res.values()))["passkey"]]
    head = "| attention | density | " + " | ".join(f"L={L}, depth {d}" for L, d in cells) + \
        " | mean |"
    rows = [head, "|---|---:|" + "---:|" * (len(cells) + 1)]
    for spec, r in res.items():
        acc = [p["accuracy"] for p in r["passkey"]]
        rows.append(f"| {ROLES.get(spec, spec)} | {r.get('density', 1.0):.3f} | "
                    + " | ".join(f"{a:.2f}" for a in acc) + f" | {sum(acc) / len(acc):.2f} |")
    rows.append("")
    rows.append(textwrap.fill("Teacher-forced passkey retrieval (quality/metrics.py) in a filler "
                              f"of {run['text']}, one key (quality_runs.sh); density on the "
                              f"{run['window']}-token window; {run['machine']}.", 100))
    return "\n".join(rows)


def bench_sim_table():
    with open(os.path.join(HERE, "results", "bench_sim.txt")) as f:
        text = f.read()
    rows = ["| brief: density @ L | simulator: L | pattern | density (causal) | theoretical "
            "| dense_fa2 ms | block_sparse ms | measured |",
            "|---|---:|---|---:|---:|---:|---:|---:|"]
    brief = {"0.50": "50 % @ 4K", "0.25": "25 % @ 8K", "0.10": "10 % @ 16K"}
    for sec in text.split("## ")[1:]:
        m = re.match(r"L=(\d+) target=([\d.]+) pattern=(\S+)", sec)
        L, target, spec = int(m.group(1)), m.group(2), m.group(3)
        p = dict(kv.split("=") for kv in spec.split(":")[1].split(","))
        dens = ladder.density(L, int(p["b"]), int(p["s"]), int(p["w"]))
        theo = re.search(r"theoretical ([\d.]+)x", sec).group(1)
        dense = re.search(r"^\s+1 dense_fa2 .*?PASS\s+\S+\s+([\d.]+)", sec, re.M).group(1)
        sparse = r"(?:ladder_fa2|block_sparse)"  # version 2's name, before and after its reuse
        lad = re.search(rf"^\s+2 {sparse} .*?PASS\s+\S+\s+([\d.]+)", sec, re.M).group(1)
        meas = re.search(rf"{sparse}\s+[\d.]+ ms\s+measured ([\d.]+)x", sec).group(1)
        rows.append(f"| {brief.get(target, target)} | {L} | `{spec}` | {dens:.3f} | {theo}x "
                    f"| {float(dense):.0f} | {float(lad):.0f} | {meas}x |")
    return "\n".join(rows)


def gpu_table():
    rows = ["| L | pattern (bench_attention --grid ladder) | density (causal) | FLOP bound "
            "| brief's goal | measured (GPU) |", "|---:|---|---:|---:|---:|---|"]
    for L, target, goal in [(4096, 0.50, 1.5), (8192, 0.25, 2.5), (16384, 0.10, 5.0)]:
        w = ladder.params_for(L, target)
        d = ladder.density(L, 64, 1, w)
        rows.append(f"| {L} | `ladder:b=64,s=1,w={w}` | {d:.3f} | {1 / d:.2f}x | > {goal}x "
                    f"| not measured |")
    return "\n".join(rows)


def params_table():
    rows = ["| L | target density | w (b = 64, s = 1) | density "
            "| key tiles of the last query tile |",
            "|---:|---:|---:|---:|---:|"]
    for L, target in [(4096, 0.50), (8192, 0.25), (16384, 0.10), (32768, 0.05)]:
        w = ladder.params_for(L, target)
        rows.append(f"| {L} | {target:.2f} | {w} | {ladder.density(L, 64, 1, w):.3f} "
                    f"| {ladder.rungs(L // 64 - 1, 1, w)} of {L // 64} |")
    return "\n".join(rows)


def verdict(name, spec):
    """The paired test of the ladder against spec on the windows of a run: a word and the mean."""
    res = load(name)["results"]
    if spec not in res:
        return "not run"
    m, lo, hi = paired(res[spec]["window_nll"], res[LADDER]["window_nll"])
    word = "ladder better" if lo > 0 else "ladder worse" if hi < 0 else "no significant difference"
    return f"{word} ({m:+.3f})"


def summary_table():
    rows = ["| contender | Austen: contender - ladder NLL | KJV: contender - ladder NLL "
            "| passkey accuracy (ladder: {}) |", "|---|---|---|---:|"]
    try:
        pk = load("passkey.json")["results"]
    except FileNotFoundError:
        pk = {}

    def acc(spec):
        if spec not in pk:
            return "not run"
        a = [p["accuracy"] for p in pk[spec]["passkey"]]
        return f"{sum(a) / len(a):.2f}"
    rows[0] = rows[0].format(acc(LADDER))
    for spec in ROLES:
        if spec in ("dense", LADDER):
            continue
        rows.append(f"| {ROLES[spec]} | {verdict('austen_512.json', spec)} "
                    f"| {verdict('kjv_512.json', spec)} | {acc(spec)} |")
    return "\n".join(rows)


TABLES = {"quality_austen": lambda: quality_table("austen_512.json"),
          "quality_kjv": lambda: quality_table("kjv_512.json"),
          "passkey": passkey_table, "bench_sim": bench_sim_table, "gpu": gpu_table,
          "params": params_table, "summary": summary_table}


def rewrite(path, check):
    with open(path) as f:
        text = f.read()
    out = text
    for name, make in TABLES.items():
        pat = re.compile(rf"(<!-- table:{name} -->\n)(?:.*?\n)?(<!-- /table:{name} -->)", re.S)
        if pat.search(out):
            try:
                body = make()
            except FileNotFoundError as e:  # a full run not made (yet)
                body = f"not run: {os.path.relpath(e.filename, HERE)} is missing"
            out = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(2), out)
    if out == text:
        return True
    if check:
        print(f"{os.path.relpath(path)}: tables differ from results/ (run make_tables.py)")
        return False
    with open(path, "w") as f:
        f.write(out)
    return True


def figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, name in zip(axes, ["austen_512.json", "kjv_512.json"]):
        if not os.path.exists(os.path.join(HERE, "results", name)):
            continue
        res = load(name)["results"]
        specs = [s for s in res if s != "dense"]
        dn = [res[s]["delta_nll"] for s in specs]
        err = [[res[s]["delta_nll"] - res[s]["delta_nll_ci95"][0] for s in specs],
               [res[s]["delta_nll_ci95"][1] - res[s]["delta_nll"] for s in specs]]
        colors = ["tab:red" if s == LADDER else "tab:gray" if s.startswith("ladder") else
                  "tab:blue" for s in specs]
        ax.barh(range(len(specs)), dn, xerr=err, color=colors)
        ax.set_yticks(range(len(specs)))
        ax.set_yticklabels([ROLES.get(s, s).replace("*", "") for s in specs], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel("NLL change vs dense (nats/token), 95% CI")
        ax.set_title(name.split("_")[0])
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "images", "quality.png"), dpi=80)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--figures", action="store_true")
    args = ap.parse_args(argv)
    ok = all([rewrite(os.path.join(HERE, f), args.check) for f in ("README.md", "REPORT.md")])
    if args.figures:
        figure()
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
        sys.exit(f"error: {e.name} is not installed for {sys.executable}: "
                 "run scripts/setup.sh --python, then use .venv/bin/python")
