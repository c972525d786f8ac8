#!/usr/bin/env python3
"""cost_model.py — the arithmetic of V4's design: the KV cache a sequence of N tokens holds and
the attention FLOPs of decoding the token at position N, for dense MLA (DeepSeek-V3), V3.2's DSA
and V4-Flash's CSA/HCA, from their configurations, N = 8K .. 1M.

  python3 examples/12_deepseek_v4/cost_model.py            # the table (Markdown)
  python3 examples/12_deepseek_v4/cost_model.py --check    # README.md's copy is current (exit 1)
  python3 examples/12_deepseek_v4/cost_model.py --write    # rewrite README.md's copy
  python3 examples/12_deepseek_v4/cost_model.py --check --plant   # the check on a copy with one
                                                                   # number changed: must FAIL
  python3 examples/12_deepseek_v4/cost_model.py [--check [--plant] | --write] \
          --program build/sim-check/examples/12_deepseek_v4/deepseek_v4_sim
      the second table: the same model at the simulator's sizes (SMALL: one layer, 64 tokens)
      beside the profile of each kernel's run (--profile: the instrumented build only)

What is counted (README.md, "The arithmetic"):
  cache    every layer's stored vectors: MLA/DSA one latent row of 512 + 64 rotary channels per
           token; DSA also one 128-wide indexer key per token; V4 one 512-wide entry per m tokens
           (CSA m = 4, HCA m = 128) plus, in CSA layers, one 128-wide index key per entry, plus
           each layer's window of 128 uncompressed tokens (sliding-only layers: the window alone).
           Bytes: 2 per element (BF16) for attention vectors; indexer keys 1 byte (FP8) plus a
           4-byte scale per key, as V3.2 runs its indexer.
  FLOPs    2 per multiply-add, one query: scores and weighted sum over every key attended
           (MLA in its absorbed form: 576-wide scores, 512-wide values, all heads), plus the
           indexer's scores over every candidate (DSA: every past token; V4 CSA: every visible
           entry). Projections, MoE and the compressor's own pooling are left out (they do not
           grow with N).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
BEGIN, END = "<!-- cost_model.py: begin -->", "<!-- cost_model.py: end -->"

# DeepSeek-V3.2-Exp (config_671B_v3.2.json of its inference code): 61 layers, 128 heads, MLA
# kv_lora_rank 512 + qk_rope_head_dim 64, indexer 64 heads x 128, top-k 2048.
V32 = dict(layers=61, heads=128, latent=512, rope=64, index_heads=64, index_dim=128, topk=2048)
# DeepSeek-V4-Flash: transformers 5.24.0's DeepseekV4Config defaults (configuration_deepseek_v4.py,
# checkpoint deepseek-ai/DeepSeek-V4-Flash-Base): 43 layers laid out by its __post_init__ (two HCA
# layers, then CSA and HCA alternating: 20 CSA, 23 HCA), 64 heads of 512 (one shared KV head),
# window 128, m = 4 (CSA) and 128 (HCA), indexer 64 heads x 128, top-k 512.
V4F = dict(layers=43, csa=20, hca=23, sliding=0, heads=64, head_dim=512, window=128, m_csa=4,
           m_hca=128, index_heads=64, index_dim=128, topk=512)

BF16, FP8_KEY = 2, lambda d: d + 4  # bytes per element; an FP8 key of d values and its scale
LENGTHS = [8192, 32768, 131072, 524288, 1048576]


def mla_cache(n, c=V32):
    return c["layers"] * n * (c["latent"] + c["rope"]) * BF16


def mla_flops(n, c=V32):
    return c["layers"] * 2 * c["heads"] * n * ((c["latent"] + c["rope"]) + c["latent"])


def dsa_cache(n, c=V32):
    return mla_cache(n, c) + c["layers"] * n * FP8_KEY(c["index_dim"])


def dsa_flops(n, c=V32):
    keys = min(n, c["topk"])
    attend = 2 * c["heads"] * keys * ((c["latent"] + c["rope"]) + c["latent"])
    index = 2 * c["index_heads"] * n * c["index_dim"]
    return c["layers"] * (attend + index)


def v4_cache(n, c=V4F):
    win = min(n, c["window"]) * c["head_dim"] * BF16
    e_csa, e_hca = n // c["m_csa"], n // c["m_hca"]
    csa = win + e_csa * (c["head_dim"] * BF16 + FP8_KEY(c["index_dim"]))
    hca = win + e_hca * c["head_dim"] * BF16
    return c["csa"] * csa + c["hca"] * hca + c["sliding"] * win


def v4_flops(n, c=V4F):
    per_key = 2 * c["heads"] * 2 * c["head_dim"]  # scores and values over one shared vector
    win = min(n, c["window"])
    e_csa, e_hca = n // c["m_csa"], n // c["m_hca"]
    csa = per_key * (win + min(c["topk"], e_csa)) + 2 * c["index_heads"] * e_csa * c["index_dim"]
    hca = per_key * (win + e_hca)
    return c["csa"] * csa + c["hca"] * hca + c["sliding"] * per_key * win


# ---- the same model at the simulator's sizes, beside its profile ---------------------------------
# One layer, one sequence of L tokens, fp16 everywhere (2 bytes, the index keys too: the kernels
# store them in the problem's dtype), sizes the instrumented simulator profiles in seconds.
SMALL = dict(layers=1, heads=2, head_dim=64, window=16, m_csa=4, m_hca=8, index_heads=16,
             index_dim=64, topk=4, L=64, rope_dim=16)
FP16 = 2
# (label, kind, the program's --kernel, what the run computes)
RUNS = [("CSA prefill attention", "csa", 3, "attention"),
        ("CSA prefill index + top-k", "csa", 2, "index"),
        ("CSA decode, token by token", "csa", 5, "decode"),
        ("HCA prefill attention", "hca", 4, "attention"),
        ("HCA decode, token by token", "hca", 5, "decode")]
KERNEL_NAMES = {2: "index_topk", 3: "csa_attention", 4: "hca_attention", 5: "decode"}
BEGIN2, END2 = "<!-- cost_model.py --profile: begin -->", "<!-- cost_model.py --profile: end -->"


def small_args(kind, kernel, c=SMALL):
    a = ["--kind", kind, "-B", "1", "-H", str(c["heads"]), "-L", str(c["L"]), "-D",
         str(c["head_dim"]), "-m", str(c["m_" + kind]), "--window", str(c["window"]), "--topk",
         str(c["topk"]), "--index-heads", str(c["index_heads"]), "--index-dim",
         str(c["index_dim"]), "--rope-dim", str(c["rope_dim"]), "--dtype", "f16"]
    return a + ["--kernel", str(kernel)]


def small_model(kind, what, c=SMALL):
    """The model's counts for one run over the L queries of the sequence: the key bytes attention
    reads (every query, every head: each key it attends, window and entries, D values of 2 bytes:
    a head reads the one shared vector itself) and the indexer's FLOPs (v4_flops's term: every
    visible entry, summed over the positions)."""
    m = c["m_" + kind]
    keys = idx = 0
    for n in range(1, c["L"] + 1):  # the query at position n - 1 sees n tokens
        e = n // m
        keys += min(n, c["window"]) + (min(c["topk"], e) if kind == "csa" else e)
        idx += 2 * c["index_heads"] * e * c["index_dim"] if kind == "csa" else 0
    attn_bytes = c["heads"] * keys * c["head_dim"] * FP16
    if what == "index":
        attn_bytes = 0
    if what == "attention":
        idx = 0
    return dict(attn_bytes=attn_bytes, index_flops=idx)


def profile_runs(program):
    """{label: the program's JSON record} of each run with --profile (an instrumented build)."""
    import json
    import subprocess
    import tempfile
    out = {}
    for label, kind, kernel, _ in RUNS:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.jsonl")
            cmd = [program, "--profile", "--check-only", "--quiet", "--json", path]
            cmd += small_args(kind, kernel)
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit(f"error: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
            recs = [json.loads(x) for x in open(path) if x.strip()]
            rec = next((x for x in recs if x.get("kernel") == KERNEL_NAMES[kernel]
                        and x.get("status") == "PASS" and "profile" in x), None)
            if rec is None:
                sys.exit(f"error: {' '.join(cmd)}: no checked, profiled record")
            out[label] = rec["profile"]
    return out


def profile_table(program):
    prof = profile_runs(program)
    c = SMALL
    rows = [f"| run (L = {c['L']}, {c['heads']} heads of {c['head_dim']}, window {c['window']}) "
            "| model: key bytes read | global bytes requested | ratio | DRAM bytes (L2 model) "
            "| model: indexer FLOPs | mma FLOPs | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, kind, _, what in RUNS:
        mod, p = small_model(kind, what), prof[label]
        mma = p["mma"] * 4096
        r1 = f"{p['global_bytes'] / mod['attn_bytes']:.2f}" if mod["attn_bytes"] else "–"
        r2 = f"{mma / mod['index_flops']:.1f}" if mod["index_flops"] else "–"
        kb = f"{mod['attn_bytes']:,}" if mod["attn_bytes"] else "–"
        fl = f"{mod['index_flops']:,}" if mod["index_flops"] else "–"
        rows.append(f"| {label} | {kb} | {p['global_bytes']:,} | {r1} "
                    f"| {int(p['dram_bytes']):,} | {fl} | {mma:,} | {r2} |")
    return "\n".join(rows) + "\n"


def label(n):
    return f"{n // 1048576}M" if n >= 1048576 else f"{n // 1024}K"


def table():
    rows = ["| context | KV cache: MLA | DSA (V3.2) | V4-Flash | V4 / V3.2 "
            "| FLOPs/token: MLA | DSA (V3.2) | V4-Flash | V4 / V3.2 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in LENGTHS:
        kv = [mla_cache(n), dsa_cache(n), v4_cache(n)]
        fl = [mla_flops(n), dsa_flops(n), v4_flops(n)]
        rows.append(f"| {label(n)} | " + " | ".join(f"{x / 2**30:.2f} GiB" for x in kv)
                    + f" | {100 * kv[2] / kv[1]:.1f} % | "
                    + " | ".join(f"{x / 1e9:.1f} G" for x in fl)
                    + f" | {100 * fl[2] / fl[1]:.1f} % |")
    return "\n".join(rows) + "\n"


def main(argv):
    if argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    args, program = list(argv[1:]), None
    if "--program" in args:
        i = args.index("--program")
        if i + 1 >= len(args):
            print("error: --program needs the path of deepseek_v4_sim (sim-check build)",
                  file=sys.stderr)
            return 2
        program = args[i + 1]
        del args[i:i + 2]
    plant = args[1:] == ["--plant"]
    if (args and args[0] not in ("--check", "--write")) or (len(args) > 1 and not plant) or \
            (plant and args[0] != "--check"):
        print("usage: cost_model.py [--check [--plant] | --write] [--program DEEPSEEK_V4_SIM]",
              file=sys.stderr)
        return 2
    if program is not None and not os.access(program, os.X_OK):
        print(f"error: --program {program}: not an executable", file=sys.stderr)
        return 2
    text = table() if program is None else profile_table(program)
    begin, end = (BEGIN, END) if program is None else (BEGIN2, END2)
    if not args:
        sys.stdout.write(text)
        return 0
    with open(README, encoding="utf-8") as f:
        doc = f.read()
    pat = re.compile(re.escape(begin) + r"\n(.*?)" + re.escape(end), re.S)
    m = pat.search(doc)
    if m is None:
        print(f"FAIL: README.md has no {begin} ... {end} block")
        return 1
    if args[0] == "--write":
        with open(README, "w", encoding="utf-8") as f:
            f.write(doc[:m.start(1)] + text + doc[m.end(1):])
        return 0
    got = m.group(1)
    if plant:  # the first digit of the table's first row, changed
        i = got.index("|---")
        i = next(j for j in range(got.index("\n", i), len(got)) if got[j].isdigit())
        got = got[:i] + str((int(got[i]) + 1) % 10) + got[i + 1:]
    if got != text:
        print(f"FAIL: README.md's table differs from cost_model.py's (run it with --write"
              f"{'' if program is None else ' --program ' + program})")
        return 1
    print(f"PASS README.md's {'cost' if program is None else 'profile'} table is current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
