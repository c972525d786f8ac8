#!/usr/bin/env python3
"""make_tables.py — every number README.md and REPORT.md quote, regenerated from the committed
result files: the quality runs (quality/results/*.json, written by quality/recompute.py; this
example's runs are its phases 512, 2k, 8k and passkey), the simulator bench (results/bench_sim.txt,
bench_sim.sh) and the parameters of the GPU grid (ladder.py). Each table sits between
<!-- table:NAME --> and <!-- /table:NAME --> markers and is rewritten in place, and so is every
verdict word between <!-- verdict SET|A|B --> markers (quality/report.py).

    python make_tables.py            rewrite the tables (and with --figures the report's figure)
    python make_tables.py --check    exit 1 if a table or verdict differs from its result files
                                     (a CTest)
    python make_tables.py --figure-only   draw the report's figure alone (benchmarks/figures.py:
                                     the tables have their own check)

The ladder is compared with each contender on the same windows of a window set
(quality/windowsets.py: 32 windows per text and length): the paired t-test and the sign-flip test
of (contender's NLL - ladder's NLL) per window (quality/stats.py); the ladder is "better" or
"worse" when both give p < 0.05, otherwise there is no significant difference.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
QUALITY = os.path.join(HERE, "..", "..", "quality")
sys.path.insert(0, QUALITY)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
import ladder  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

numpy = require("numpy", setup="--python")
import report  # noqa: E402
import plan  # noqa: E402
import readme_tables  # noqa: E402
import stats  # noqa: E402

LADDER = "ladder:b=8,s=1,w=4"
ROLES = {"dense": "dense (reference)", LADDER: "**ladder (ours)**",
         "global:n=4+causal_window:w=60": "window: 4 sinks + causal window",
         "strided:l=5": "strided (Sparse Transformer)", "bigbird:b=8,r=8,seed=1": "BigBird",
         "oracle:k=64": "DSA top-k, oracle selection", "indexer:k=64": "DSA top-k, trained indexer",
         "ladder:b=8,s=0,w=6": "ablation: no sink block",
         "ladder:b=1,s=4,w=56": "ablation: token granularity (b=1)",
         "ladder:b=4,s=2,w=12": "ablation: finer blocks (b=4)"}
TEXTS = (("austen", "Austen"), ("kjv", "KJV"), ("go", "Go"))
LONG = {2048: 256, 8192: 1024}  # the frontier's 23 % point at each length: k = L/8
TEXT_NAMES = dict(TEXTS)
# (L, window set, families shown; None: all): the other texts what phase 2k-texts runs
TEXT_FAMILIES = ("sink+window", "ladder", "oracle", "indexer")
LONG_SETS = ((2048, "austen-2k", None), (2048, "kjv-2k", TEXT_FAMILIES),
             (2048, "go-2k", TEXT_FAMILIES), (8192, "austen-8k", None))


def load(name):
    return report.load(name)


def vs_ladder(c, lad, is_ladder):
    """(contender - ladder [95% CI], 'p_t / p_signflip', the ladder's verdict) of a contender's
    results against the ladder's on the same windows; dashes for the ladder itself."""
    if is_ladder or not lad:
        return "—", "—", "—"
    r = stats.paired(c["window_nll"], lad["window_nll"])
    return (report.fmt_ci(r["mean"], r["ci95_t"]),
            f"{stats.fmt_p(r['p_t'])} / {stats.fmt_p(r['p_signflip'])}",
            stats.paired(lad["window_nll"], c["window_nll"])["verdict"])


def quality_table(set_name):
    """The ladder against every contender on one set of 512-token windows."""
    d = load(f"{set_name}.json")
    if not d:
        return f"not run: quality/results/{set_name}.json is missing"
    lad = report.complete(d, LADDER)
    rows = ["| attention | spec | density | n | perplexity [95% CI] | NLL change vs dense [95% CI] "
            "| contender - ladder NLL [95% CI] | p (t / sign-flip) | ladder is | mass recall "
            "| set recall |", "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for spec in ROLES:
        c = report.complete(d, spec)
        if not c:
            rows.append(f"| {ROLES[spec]} | `{spec}` | — | — | not run | | | | | | |")
            continue
        vs = c.get("vs_dense")
        dn = report.fmt_ci(vs["mean"], vs["ci95_t"]) if vs else "—"
        cmp, p, word = vs_ladder(c, lad, spec == LADDER)
        rec = c.get("recall", {})
        lo, hi = c["ppl_ci95_boot"]
        rows.append(f"| {ROLES[spec]} | `{spec}` | {c['density']:.3f} | {c['n']} "
                    f"| {c['ppl']:.2f} [{lo:.2f}, {hi:.2f}] | {dn} | {cmp} | {p} | {word} "
                    f"| {report.pct(rec.get('mass'))} | {report.pct(rec.get('set'))} |")
    rows += ["", report.set_caption(d)]
    return "\n".join(rows)


def ladder_verdict(d, spec):
    """The ladder against spec on a set: 'word (contender - ladder mean)'."""
    lad, c = report.complete(d, LADDER), report.complete(d, spec)
    if not lad or not c:
        return "not run"
    r = stats.paired(c["window_nll"], lad["window_nll"])
    word = stats.paired(lad["window_nll"], c["window_nll"])["verdict"]
    return f"{word} ({r['mean']:+.3f})"


def summary_table():
    sets = {t: load(f"{t}-512.json") for t, _ in TEXTS}
    rows = ["| contender | " + " | ".join(f"{name}: ladder is (contender - ladder NLL)"
                                          for _, name in TEXTS) + " |",
            "|---|" + "---|" * len(TEXTS)]
    for spec in ROLES:
        if spec in ("dense", LADDER):
            continue
        rows.append(f"| {ROLES[spec]} | " + " | ".join(
            ladder_verdict(sets[t], spec) if sets[t] else "not run" for t, _ in TEXTS) + " |")
    rows += ["", "n = 32 windows of 512 tokens per text (window sets `austen-512`, `kjv-512`, "
                 "`go-512`); the ladder is better or worse when the paired t-test and the "
                 "sign-flip test both give p < 0.05."]
    return "\n".join(rows)


def long_table():
    """The ladder against the other families at the frontier's 23 % point (quality/recompute.py's
    FRONTIER: each family's parameters reach the density of top-k with k = L/8), at 2,048 and
    8,192 tokens of Austen, and at 2,048 tokens of the Bible and the Go sources (the families
    their phase runs)."""
    rows = ["| L | text | attention | spec | density | n | NLL change vs dense [95% CI] "
            "| contender - ladder NLL [95% CI] | p (t / sign-flip) | ladder is |",
            "|---:|---|---|---|---:|---:|---:|---:|---:|---|"]
    captions = []
    for L, name, families in LONG_SETS:
        d = load(f"{name}.json")
        specs = plan.FRONTIER[L][LONG[L]]
        lad = report.complete(d, specs["ladder"]) if d else None
        text = TEXT_NAMES[name.split("-")[0]]
        for fam in families or plan.FAMILIES:
            spec = specs[fam]
            c = report.complete(d, spec) if d else None
            if not c:
                rows.append(f"| {L:,} | {text} | {report.NAMES[fam]} | `{spec}` | — | — "
                            f"| not run | | | |")
                continue
            vs = c.get("vs_dense")
            dn = report.fmt_ci(vs["mean"], vs["ci95_t"]) if vs else "— (dense not run)"
            cmp, p, word = vs_ladder(c, lad, fam == "ladder")
            rows.append(f"| {L:,} | {text} | {report.NAMES[fam]} | `{spec}` | "
                        f"{c['density']:.3f} | {c['n']} | {dn} | {cmp} | {p} | {word} |")
        if d:
            captions.append(report.set_caption(d))
    return "\n".join(rows + [""] + captions)


def passkey_table():
    t = report.passkey_table(specs=lambda L: [s for s, _ in plan.passkey_configs(L)])
    return t or "not run: quality/results/passkey.json is missing"


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


TABLES = {"quality_austen": lambda: quality_table("austen-512"),
          "quality_kjv": lambda: quality_table("kjv-512"),
          "quality_go": lambda: quality_table("go-512"),
          "quality_long": long_table, "passkey": passkey_table, "bench_sim": bench_sim_table,
          "gpu": gpu_table, "params": params_table, "summary": summary_table}


def rewrite(path, check):
    blocks = {f"table:{name}": (lambda make=make: make() + "\n") for name, make in TABLES.items()}
    changed, _ = readme_tables.update(path, blocks, check, rewrite=report.replace_verdicts)
    if changed and check:
        print(f"{os.path.relpath(path)}: tables or verdicts differ from the results "
              f"(run make_tables.py)")
        return False
    return True


def figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(TEXTS), figsize=(16, 4.5))
    for ax, (t, name) in zip(axes, TEXTS):
        d = load(f"{t}-512.json")
        if not d:
            ax.set_axis_off()
            ax.set_title(f"{name}: not run")
            continue
        specs = [s for s in ROLES if s != "dense" and report.complete(d, s)]
        ref = "dense" if all("vs_dense" in d["configs"][s] for s in specs) else LADDER
        if ref == LADDER:  # dense not run yet: each contender against the ladder
            if LADDER not in specs:
                continue
            specs = [s for s in specs if s != LADDER]
            vs = [stats.paired(d["configs"][s]["window_nll"], d["configs"][LADDER]["window_nll"])
                  for s in specs]
        else:
            vs = [d["configs"][s]["vs_dense"] for s in specs]
        dn = [v["mean"] for v in vs]
        err = [[v["mean"] - v["ci95_t"][0] for v in vs], [v["ci95_t"][1] - v["mean"] for v in vs]]
        colors = ["tab:red" if s == LADDER else "tab:gray" if s.startswith("ladder") else
                  "tab:blue" for s in specs]
        ax.barh(range(len(specs)), dn, xerr=err, color=colors)
        ax.set_yticks(range(len(specs)))
        ax.set_yticklabels([ROLES[s].replace("*", "") for s in specs], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel(f"NLL change vs {'dense' if ref == 'dense' else 'the ladder'} "
                      "(nats/token), 95% t interval")
        ax.set_title(f"{name}, n = {d['set']['count']} windows of 512")
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "images", "quality.png"), dpi=80)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--figures", action="store_true")
    ap.add_argument("--figure-only", action="store_true")
    args = ap.parse_args(argv)
    if args.figure_only:
        figure()
        return 0
    ok = all([rewrite(os.path.join(HERE, f), args.check) for f in ("README.md", "REPORT.md")])
    if args.figures:
        figure()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "benchmarks"))
    import bench_results  # the one __main__ wrapper: a missing package is one line
    bench_results.run_main(main)
