#!/usr/bin/env python3
"""make_tables.py — README.md's tables of example 09, made from their sources:

  split_rules   the split counts of the two rules (decode_host.c) on an H100, printed by the
                decode_split_table program (tests/split_table.c)
  bytes         bytes per decoded token: the model against the simulator's profile
                (results/bytes_per_token.jsonl, written by bytes_per_token.py)
  generate      SmolLM2-135M generating through the kernels (results/generate_*.json, written by
                quality/generate.py --out)

  python3 examples/09_decode/make_tables.py --split-table PATH          rewrites README.md
  python3 examples/09_decode/make_tables.py --split-table PATH --check  exit 1 if they differ
Each table sits between <!-- table:NAME --> and <!-- /table:NAME --> in README.md.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
RESULTS = os.path.join(HERE, "results")


def split_rules(program):
    out = subprocess.run([program], capture_output=True, text=True, check=True).stdout.strip()
    return out + ("\n\nEach cell: ours / FlashAttention-2's rule on this kernel's grid (its "
                  "heuristic fed this kernel's blocks of at most 16 rows, not the blocks FlashAttention-2 "
                  "itself would launch), for one new token per sequence, on 132 SMs.")


def bytes_table():
    recs = [json.loads(line) for line in open(os.path.join(RESULTS, "bytes_per_token.jsonl"))]
    first = recs[0]
    lat = next((r for r in recs if r["kernel"] == "latent"), None)
    n = first["decoded_tokens"]
    out = ["| version | model (B/token) | requested, profile (B/token) | profile / model | "
           "DRAM under the L2 model (B/token) |", "|---|---:|---:|---:|---:|"]
    for r in recs:
        p, nt = r["profile"], r["decoded_tokens"]
        out.append(f"| `{r['kernel']}` | {r['model_bytes'] / nt:,.0f} | "
                   f"{p['global_bytes'] / nt:,.0f} | {p['global_bytes'] / r['model_bytes']:.3f} | "
                   f"{p['dram_bytes'] / nt:,.0f} |")
    out += ["", f"`decode_sim {first['args']}` in the sim-check build: {first['B']} sequences of "
                f"{first['Lk']} tokens, {first['H']} query heads over {first['kv_heads']} K/V heads, "
                f"D = {first['D']}, {first['dtype']}, k = {first['topk']}; {n} decoded tokens "
                f"(one per sequence). Splits: split_kv "
                f"{next(r['splits'] for r in recs if r['kernel'] == 'split_kv')}, gqa/paged "
                f"{next(r['splits'] for r in recs if r['kernel'] == 'paged')}, sparse "
                f"{next(r['splits'] for r in recs if r['kernel'] == 'sparse')}."]
    if lat is not None:  # version 10 on its own, MLA-shaped problem
        out += ["", f"`latent`: `decode_sim {lat['args']}`: {lat['B']} sequences of {lat['Lk']} "
                    f"tokens, {lat['H']} query heads over one latent row of {lat['D']} per token "
                    f"(V its first {lat['d_v']}), {lat['dtype']}, pages of {lat['page_size']}; "
                    f"{lat['decoded_tokens']} decoded tokens; {lat['splits']} splits."]
    return "\n".join(out)


def generate_table():
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "generate_*.json"))):
        g = json.load(open(path))
        ref = g["results"][0].get("nll")  # the PyTorch reference's
        rows = ["| attention | continuation (greedy) | tokens equal to PyTorch's | max logit "
                "difference | NLL of the text's continuation (nats/token) | change vs PyTorch | "
                "tokens 0.5 nats worse | tokens/s |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in g["results"]:
            text = r["text"].replace("\n", " ").replace("|", "\\|").strip()
            nll = r.get("nll")
            mean = f"{sum(nll) / len(nll):.3f}" if nll else "—"
            delta = worse = "—"
            if nll and ref and r is not g["results"][0]:
                d = [a - b for a, b in zip(nll, ref)]
                delta = f"{sum(d) / len(d):+.3f} (largest {max(d):+.2f})"
                worse = f"{sum(x > 0.5 for x in d)} / {len(d)}"
            same = f"{r['tokens_matched']} / {g['new']}" if "tokens_matched" in r else "—"
            diff = f"{r['max_logit_diff']:.2g}" if "max_logit_diff" in r else "—"
            rows.append(f"| `{r['attention']}` | {text} | {same} | {diff} | {mean} | {delta} | "
                        f"{worse} | {r['tokens_per_second']:.2f} |")
        timing = "simulator (CPU) timings, not GPU performance" if g["backend"] == "sim" else \
            "GPU timings"
        rows += ["", f"{g['text']} tokens {g['start']}..{g['start'] + g['prompt'] - 1} as the "
                     f"prompt, {g['new']} new tokens, cache {g['dtype']}, pages of "
                     f"{g['page_size']}; the text's own continuation: "
                     f"\"{g['truth'].replace(chr(10), ' ').strip()}\". Max logit difference: "
                     f"over the steps before the first different token. tokens/s: {timing} (the "
                     f"`torch` row: PyTorch on the CPU); {g.get('machine', '')}"]
        out.append("\n".join(rows))
    return "\n\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split-table", required=True, help="the decode_split_table program")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    tables = {"split_rules": split_rules(args.split_table), "bytes": bytes_table(),
              "generate": generate_table()}
    text = open(README).read()
    new = text
    for name, body in tables.items():
        pat = re.compile(rf"<!-- table:{name} -->\n.*?<!-- /table:{name} -->", re.S)
        if not pat.search(new):
            print(f"error: README.md has no <!-- table:{name} --> block", file=sys.stderr)
            return 1
        new = pat.sub(lambda m: f"<!-- table:{name} -->\n{body}\n<!-- /table:{name} -->", new)
    if args.check:
        if new != text:
            print("FAIL: README.md's tables differ from their sources (run make_tables.py)")
            return 1
        print("PASS")
        return 0
    open(README, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
