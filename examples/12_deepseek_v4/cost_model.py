#!/usr/bin/env python3
"""cost_model.py — the arithmetic of V4's design: the KV cache a sequence of N tokens holds and
the attention FLOPs of decoding the token at position N, for dense MLA (DeepSeek-V3), V3.2's DSA
and V4-Flash's CSA/HCA, from their configurations, N = 8K .. 1M.

  python3 examples/12_deepseek_v4/cost_model.py            # the table (Markdown)
  python3 examples/12_deepseek_v4/cost_model.py --check    # README.md's copy is current (exit 1)
  python3 examples/12_deepseek_v4/cost_model.py --write    # rewrite README.md's copy
  python3 examples/12_deepseek_v4/cost_model.py --check --plant   # the check on a copy with one
                                                                   # number changed: must FAIL

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
    text = table()
    if len(argv) == 1:
        sys.stdout.write(text)
        return 0
    plant = argv[2:] == ["--plant"]
    if argv[1] not in ("--check", "--write") or (len(argv) != 2 and not plant) or \
            (plant and argv[1] != "--check"):
        print("usage: cost_model.py [--check [--plant] | --write]", file=sys.stderr)
        return 2
    with open(README, encoding="utf-8") as f:
        doc = f.read()
    if plant:  # the last digit of the table's first percentage, changed
        i = doc.index(" %", doc.index(BEGIN)) - 1
        doc = doc[:i] + str((int(doc[i]) + 1) % 10) + doc[i + 1:]
    pat = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)
    m = pat.search(doc)
    if m is None:
        print(f"FAIL: README.md has no {BEGIN} ... {END} block")
        return 1
    if argv[1] == "--write":
        with open(README, "w", encoding="utf-8") as f:
            f.write(doc[:m.start(1)] + text + doc[m.end(1):])
        return 0
    if m.group(1) != text:
        print("FAIL: README.md's table differs from cost_model.py's (run it with --write)")
        return 1
    print("PASS README.md's cost table is current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
