#!/usr/bin/env python3
"""fp8_quality.py — README.md's table of SmolLM2-135M decoding through the kernels with the FP8
cache against the f16 cache, made from the committed results of generate.py:

  .venv/bin/python quality/generate.py --prompt 512 --new 32 --nll --attention dense dense-fp8 \\
      --dtype f16 --out examples/09_decode/results/fp8_generate_austen_512.json
  .venv/bin/python examples/09_decode/fp8_quality.py            rewrites the table
  .venv/bin/python examples/09_decode/fp8_quality.py --check    exit 1 if it differs

The paired test (quality/stats.py, stats.paired: the t-test and the sign-flip test, both at 5 %)
compares the NLL of each token of the text's own continuation under the FP8 cache with the same
token's under the f16 cache. The table sits between <!-- table:fp8_quality --> and
<!-- /table:fp8_quality -->.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "quality"))
import stats  # noqa: E402

sys.path.insert(0, HERE)
import make_tables  # noqa: E402

RESULTS = os.path.join(HERE, "results", "fp8_generate_austen_512.json")


def table(path=RESULTS):
    g = json.load(open(path))
    by = {r["attention"]: r for r in g["results"]}
    dense, fp8 = by["dense"], by["dense-fp8"]
    mean = lambda x: sum(x) / len(x)  # noqa: E731
    out = ["| cache | tokens equal to PyTorch's | max logit difference | NLL of the text's "
           "continuation (nats/token) | change vs the f16 cache [95 % CI] | p (t / sign-flip) | "
           "verdict |", "|---|---:|---:|---:|---:|---:|---|"]
    out.append(f"| PyTorch (`torch`, fp32) | — | — | {mean(by['torch']['nll']):.3f} | — | — | — |")
    out.append(f"| f16 (`dense`, version 5) | {dense['tokens_matched']} / {g['new']} | "
               f"{dense['max_logit_diff']:.2g} | {mean(dense['nll']):.3f} | — | — | — |")
    p = stats.paired(fp8["nll"], dense["nll"])
    out.append(f"| FP8 e4m3, a scale per token and head (`dense-fp8`, versions 11, 12) | "
               f"{fp8['tokens_matched']} / {g['new']} | {fp8['max_logit_diff']:.2g} | "
               f"{mean(fp8['nll']):.3f} | {p['mean']:+.4f} [{p['ci95_t'][0]:+.4f}, "
               f"{p['ci95_t'][1]:+.4f}] | {stats.fmt_p(p['p_t'])} / "
               f"{stats.fmt_p(p['p_signflip'])} | {p['verdict']} |")
    out += ["", f"{g['text']} tokens {g['start']}..{g['start'] + g['prompt'] - 1} as the prompt, "
                f"{g['new']} tokens of the text's own continuation (teacher forcing), pages of "
                f"{g['page_size']}, the {g['backend']} build; paired over those {p['n']} tokens "
                f"(one continuation: its tokens are not independent windows, so this is weaker "
                f"evidence than the quality toolkit's window sets). Max logit difference: over "
                f"the greedy steps before the first token that differs from PyTorch's."]
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args(argv)
    return make_tables.rewrite({"fp8_quality": table(args.results)}, args.check,
                               "fp8_quality.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
