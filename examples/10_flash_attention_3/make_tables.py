#!/usr/bin/env python3
"""make_tables.py — the FP8 error study of example 10's README (version 4), measured by running
the flash3_fp8 program (the simulator's build, which computes what a GPU would: the e4m3
roundings are cuda_fp8.h's, the wgmma products exact, fp32 sums), never typed by hand:

  fp8_errors   version 4's error against fp64 on inputs with outlier channels (channels 7 and 37
               of Q and K times a factor), with and without the Hadamard step

    python3 examples/10_flash_attention_3/make_tables.py --fp8-program PATH   rewrites README.md
    ... --check                                                 exit 1 if the table differs
The table sits between <!-- table:fp8_errors --> and <!-- /table:fp8_errors --> in README.md
(benchmarks/readme_tables.py). Standard library only; about 10 s on the simulator.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(HERE, "README.md")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import readme_tables  # noqa: E402

PROBLEM = ["-B", "1", "-H", "1", "-L", "200", "-D", "128", "--dtype", "bf16", "--causal"]
OUTLIERS = (1, 10, 30)


def fp8_errors(program):
    out = ["| outlier channels | Hadamard step | max \\|O − O64\\| | RMS error | largest score "
           "error | max error / its bound |", "|---:|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.jsonl")
        for o in OUTLIERS:
            for hadamard in (False, True):
                cmd = [program, "--check-only", "--quiet", "--outliers", str(o), "--json",
                       path] + PROBLEM + ([] if hadamard else ["--no-hadamard"])
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"error: {' '.join(cmd)} exited {run.returncode}:\n{run.stdout}"
                             f"{run.stderr}")
                with open(path) as f:
                    r = [json.loads(x) for x in f if x.strip()][-1]
                out.append(f"| ×{o} | {'on' if hadamard else 'off'} | {r['err_fp64']:.3g} | "
                           f"{r['rms_fp64']:.3g} | {r['score_err']:.3g} | "
                           f"{r['err_over_bound']:.3g} |")
    out += ["", f"`flash3_fp8_sim {' '.join(PROBLEM)} --outliers F [--no-hadamard]` (the "
                "simulator): one head of 200 queries and keys, inputs uniform in [−1, 1) with "
                "channels 7 and 37 of every row of Q and K multiplied by F. Errors: the largest "
                "and the root-mean-square difference of an output element from the "
                "double-precision attention over the unquantised inputs; the largest score "
                "error: max over every query and key of |scale (q' · k' − q · k)|, q' and k' "
                "the dequantised codes the pre-pass wrote. The bound: the worst case derived in "
                "flash3_fp8_check.c (every check of these runs passed)."]
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fp8-program", required=True, help="the flash3_fp8 program (sim build)")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    changed, missing = readme_tables.update(README, {"table:fp8_errors":
                                                     lambda: fp8_errors(args.fp8_program)},
                                            args.check)
    if missing:
        print(f"error: README.md has no <!-- {missing[0]} --> block", file=sys.stderr)
        return 1
    if args.check:
        if changed:
            print("FAIL: README.md's FP8 error table differs from the program's measurements "
                  "(run examples/10_flash_attention_3/make_tables.py --fp8-program PATH)")
            return 1
        print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
