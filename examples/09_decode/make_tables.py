#!/usr/bin/env python3
"""make_tables.py — README.md's tables of example 09, made from their sources:

  split_rules   the split counts of the two rules (decode_host.c) on an H100, printed by the
                decode_split_table program (tests/split_table.c)
  bytes         bytes per decoded token: the model against the simulator's profile
                (results/bytes_per_token.jsonl, written by bytes_per_token.py)
  generate      SmolLM2-135M generating through the kernels (results/generate_*.json, written by
                quality/generate.py --out)
  fp8_roofline  bytes per cached token, 16-bit against the FP8 cache, and the decode bound they
                give (a model: the cache's bytes over a bandwidth), checked against the bytes the
                decode program's FP8 layouts take (--fp8)
  fp8_errors    the FP8 cache's error against fp64, with and without outlier channels, beside
                the 16-bit cache's: measured by running the decode program's FP8 step (--decode)

  python3 examples/09_decode/make_tables.py --split-table PATH --decode PATH
                                                              rewrites README.md
  ... --check                                                 exit 1 if they differ
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


# Models whose caches the roofline table sizes (their published configurations): layers, K/V
# heads, head dimension; MLA: one latent row of kv_lora_rank + qk_rope_head_dim per token.
ROOFLINE_MODELS = [
    ("SmolLM2-135M", 30, 3, 64, False),  # HuggingFaceTB/SmolLM2-135M config.json
    ("Llama-3-8B", 32, 8, 128, False),  # meta-llama/Meta-Llama-3-8B config.json
    ("DeepSeek-V3, MLA", 61, 1, 576, True),  # deepseek-ai/DeepSeek-V3 config.json: 512 + 64
]
H100_BW = 3.35e12  # bytes/s, H100 SXM (NVIDIA's datasheet)
CONTEXT = 32768


def cache_bytes(kv_heads, d, latent, fp8):
    """Bytes one token takes in one layer's cache (decode.h, "FP8 cache")."""
    if latent:  # 16-bit: the 576-wide row; FP8: FlashMLA's 512 codes, 4 fp32 scales, 64 x 2
        return 512 + 4 * 4 + 64 * 2 if fp8 else d * 2
    return 2 * kv_heads * (d + 4) if fp8 else 2 * kv_heads * d * 2  # K and V; a scale per head


# Every run of the FP8 step: bf16, one split, the seed of the published table, checked only.
FP8_FLAGS = ["--fp8", "--check-only", "--dtype", "bf16", "--splits", "1", "--seed", "45"]


def fp8_roofline(program):
    # the formula against the bytes the program's two layouts report
    for args, want in ((["--cache-lens", "4", "-H", "9", "--kv-heads", "3", "-D", "64"],
                        cache_bytes(3, 64, False, True)),
                       (["--latent", "--cache-lens", "4"], cache_bytes(1, 576, True, True))):
        out = subprocess.run([program] + FP8_FLAGS + args, capture_output=True, text=True).stdout
        m = re.search(r"(\d+) bytes per token", out)
        if m is None or int(m.group(1)) != want:
            raise SystemExit(f"error: {program} {' '.join(args)} does not report {want} bytes "
                             f"per token:\n{out}")
    out = ["| model (layers, cache per layer) | 16-bit (B/token/layer) | FP8 (B/token/layer) | "
           "FP8 / 16-bit | cache read per decoded token at 32K, 16-bit → FP8 (MB) | bound at 32K, "
           "16-bit → FP8 (tokens/s, model) |", "|---|---:|---:|---:|---:|---:|"]
    for name, layers, kv, d, latent in ROOFLINE_MODELS:
        b16, b8 = cache_bytes(kv, d, latent, False), cache_bytes(kv, d, latent, True)
        shape = "one latent row of 576" if latent else f"{kv} K/V heads of {d}"
        read16, read8 = layers * CONTEXT * b16, layers * CONTEXT * b8
        out.append(f"| {name} ({layers}, {shape}) | {b16:,} | {b8:,} | {b8 / b16:.3f} | "
                   f"{read16 / 1e6:,.0f} → {read8 / 1e6:,.0f} | "
                   f"{H100_BW / read16:,.0f} → {H100_BW / read8:,.0f} |")
    out += ["", f"A model, not a measurement: a decoded token of a sequence holding {CONTEXT:,} "
                f"tokens reads its whole cache once in every layer, and the bound is an H100 SXM's "
                f"{H100_BW / 1e12:.2f} TB/s over those bytes (tokens per second for all the "
                f"sequences of a batch together: each token reads its own sequence's cache). The "
                f"weights (read once per step for the whole batch), the queries and outputs are "
                f"left out; they dominate at short contexts and small batches. FP8 adds one fp32 "
                f"scale per token and K/V head (latent: 4 per token) to the e4m3 codes."]
    return "\n".join(out)


# The error table's runs: (label, decode --fp8 arguments); outlier channels 7 and 37 x F.
FP8_ERROR_RUNS = [
    (f"K/V, per token and head (9 / 3 heads, D = 64)", o,
     ["--cache-lens", "1000", "-H", "9", "--kv-heads", "3", "--page-size", "16"])
    for o in (1, 10, 100)] + [
    (f"latent, per 128 (16 heads, 576)", o, ["--latent", "--cache-lens", "1000", "--page-size",
                                              "64"]) for o in (1, 10, 100)]


def fp8_errors(program):
    import tempfile
    out = ["| FP8 cache | outlier channels | error vs fp64, FP8 cache | error vs fp64, bf16 cache "
           "| FP8 / bf16 | FP8 error / its bound |", "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.jsonl")
        for label, o, args in FP8_ERROR_RUNS:
            run = subprocess.run([program] + FP8_FLAGS + ["--outliers", str(o), "--json", path] +
                                 args, capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"error: {program} {' '.join(args)} failed:\n{run.stdout}")
            r = [x for x in map(json.loads, open(path)) if x["kernel"].endswith("_fp8")][-1]
            out.append(f"| {label} | ×{o} | {r['err_fp64']:.3g} | "
                       f"{r['err_unquantised']:.3g} | {r['err_fp64'] / r['err_unquantised']:.0f} | "
                       f"{r['err_over_bound']:.3f} |")
    out += ["", "`decode_sim --fp8` (the simulator), bf16, one sequence of 1,000 tokens, one new "
                "token; inputs uniform in [−1, 1) with channels 7 and 37 of every key row "
                "multiplied by the factor (latent: of the row, which is also V). Errors: the "
                "largest absolute difference of an output element from the double-precision "
                "attention over the unquantised cache. bf16 cache: the same attention computed "
                "in the dtype's precision over the unquantised cache (the reference's "
                "same-precision row). The bound: the worst case derived in decode_fp8.c."]
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split-table", required=True, help="the decode_split_table program")
    ap.add_argument("--decode", required=True, help="the decode program (its --fp8 step)")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    tables = {"split_rules": split_rules(args.split_table), "bytes": bytes_table(),
              "generate": generate_table(), "fp8_roofline": fp8_roofline(args.decode),
              "fp8_errors": fp8_errors(args.decode)}
    return rewrite(tables, args.check, "make_tables.py")


def rewrite(tables, check, script):
    """README.md with each {name: body} between its markers: written, or with check compared
    (exit status 1 if it differs; script: what to run to regenerate it)."""
    text = open(README).read()
    new = text
    for name, body in tables.items():
        pat = re.compile(rf"<!-- table:{name} -->\n.*?<!-- /table:{name} -->", re.S)
        if not pat.search(new):
            print(f"error: README.md has no <!-- table:{name} --> block", file=sys.stderr)
            return 1
        new = pat.sub(lambda m: f"<!-- table:{name} -->\n{body}\n<!-- /table:{name} -->", new)
    if check:
        if new != text:
            print(f"FAIL: README.md's tables differ from their sources (run {script})")
            return 1
        print("PASS")
        return 0
    open(README, "w").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
