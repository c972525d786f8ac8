#!/usr/bin/env python3
"""bytes_per_token.py — the bytes each version of example 09 moves per decoded token, measured by
the simulator's profile (common/cudasim/README.md, "The profile": every global load and store of
the kernels, counted; DRAM bytes under its L2 model) against the model of decode_report.c
(decode_report.c's model_bytes; README.md, "Bytes per decoded token").

  python3 examples/09_decode/bytes_per_token.py --program build/sim-check/examples/09_decode/decode_sim
      runs the committed problem (SmolLM2-135M's heads, 4 sequences of 2048 tokens, fp16) with
      --profile, then version 10 on its MLA-shaped problem (--latent: 16 heads over one latent row
      of 576, bf16, the same lengths), and writes examples/09_decode/results/bytes_per_token.jsonl
      (one line per version, the program's JSON record with its profile); make_tables.py turns it
      into README.md's table. Minutes of CPU: the instrumented build counts every access.
  python3 examples/09_decode/bytes_per_token.py --program ... --check
      a small problem (the checked build's test, tests/CMakeLists.txt): every version's requested
      bytes within 5 % of its model, and naive's and split_kv's at least g times those of gqa's
      K/V (each query head reads the cache itself); latent's within 5 % of its model and within
      10 % of the latent rows themselves (read once for all 16 heads). Exit 1 when one is not.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "bytes_per_token.jsonl")
PROBLEM = ["--cache-lens", "2048,2048,2048,2048", "-H", "9", "--kv-heads", "3", "-D", "64",
           "--dtype", "f16", "--page-size", "16", "--topk", "64"]
SMALL = ["--cache-lens", "600,300", "-H", "6", "--kv-heads", "2", "-D", "64", "--dtype", "f16",
         "--page-size", "16", "--topk", "32", "--splits", "2"]
# version 10: DeepSeek's 128 heads at 8-way tensor parallelism (16 per GPU), pages of 64 (FlashMLA's)
LATENT = ["--latent", "--cache-lens", "2048,2048,2048,2048", "-H", "16", "--dtype", "bf16",
          "--page-size", "64"]
LATENT_SMALL = ["--latent", "--cache-lens", "300,100", "-H", "16", "--dtype", "bf16",
                "--page-size", "16", "--splits", "1"]


def profile(program, args):
    """{kernel: record} of one --profile run."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "p.jsonl")
        cmd = [program, "--profile", "--check-only", "--quiet", "--json", out] + args
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
        return {rec["kernel"]: rec for rec in map(json.loads, open(out))
                if rec["status"] != "SKIP"}  # latent runs only with --latent, the rest without


def check(program):
    recs = profile(program, SMALL)
    bad = 0
    for name, r in recs.items():
        got, want = r["profile"]["global_bytes"], r["model_bytes"]
        ok = abs(got - want) <= 0.05 * want
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {got} bytes requested, model {want:.0f} "
              f"({got / want:.3f})")
    # the cache itself: 900 tokens x 2 K/V heads x (K and V) x 64 x 2 bytes; 6 heads over 2
    g, cache = 3, (600 + 300) * 2 * 2 * 64 * 2
    for name in ("naive", "split_kv", "gqa"):
        want = g * cache if name != "gqa" else cache
        got = recs[name]["profile"]["global_bytes"]
        ok = want <= got <= want * 1.1
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name} reads the cache {g if name != 'gqa' else 1} "
              f"time(s): {got} bytes requested, the cache is {cache}")
    # version 10: the latent rows, 576 x 2 bytes per token, read once for the 16 heads (beside
    # them, one split: q read once, O written once, 2 sequences x 16 heads x (576 + 512) x 2)
    lat = profile(program, LATENT_SMALL)["latent"]
    got, want, rows = lat["profile"]["global_bytes"], lat["model_bytes"], (300 + 100) * 576 * 2
    cache = got - 2 * 16 * (576 + 512) * 2
    ok = abs(got - want) <= 0.05 * want and rows <= cache <= rows * 1.1
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'}  latent: {got} bytes requested, model {want:.0f} "
          f"({got / want:.3f}); {cache} besides q and O, the latent rows are {rows} (read once "
          f"for all 16 heads)")
    print(f"{len(recs) + 4 - bad} passed, {bad} failed")
    return 1 if bad else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", required=True, help="the sim-check build's decode_sim")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        return check(args.program)
    runs = [(PROBLEM, profile(args.program, PROBLEM)), (LATENT, profile(args.program, LATENT))]
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    n = 0
    with open(RESULTS, "w") as f:
        for problem, recs in runs:
            for r in recs.values():
                if problem is LATENT and r["kernel"] != "latent":
                    continue  # its append is the first problem's, narrower
                r["args"] = " ".join(problem)
                f.write(json.dumps(r) + "\n")
                n += 1
    print(f"wrote {RESULTS} ({n} versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
