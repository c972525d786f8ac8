#!/usr/bin/env python3
"""cp_model.py — README.md's tables of example 11, computed (standard library only):

  work     the causal score entries each rank computes, contiguous (ring) against zigzag shards:
           the layout of cp_layout.h written again here, independently (the program measures the
           same counts on every run and fails when they differ from cp_layout.c's)
  bytes    what one rank sends per attention layer, per strategy
  hiding   when a ring step's attention hides the next shard's transfer: the model of the
           chapter's cost model (benchmarks/cost_model.py: FLOPs at eta_tensor x the H100's tensor
           peak) against bytes / link bandwidth, per link
  meta     the 1M-token Llama 3 405B prefill on 128 H100s of Yang et al. (2024), counted
  window   a sliding window under pass-KV: each rank's entries, ring steps computed and skipped,
           contiguous against zigzag shards (the program measures the same on every run)
  sparse_bytes  DeepSeek sparse attention across ranks: the bytes each rank receives (indexer
           keys and K/V all-gathered, against the most the fetch of the selected K/V rows can
           need) and the indexer's causal work per rank

  python3 examples/11_context_parallel/cp_model.py            rewrites README.md's tables
  python3 examples/11_context_parallel/cp_model.py --check    exit 1 if they differ
Each table sits between <!-- table:NAME --> and <!-- /table:NAME --> in README.md. Every number
here is a model or a count, never a measurement.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(HERE, "README.md")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import cost_model  # noqa: E402  (the chapter's device parameters)

H100 = cost_model.DEVICES["H100-SXM"]
RATE = H100["eta_tensor"] * H100["tensor_flops"]  # attention FLOP/s the model grants one H100

# Link bandwidths, one direction, per GPU (published peaks; a ring sends one way and receives
# the other at once).
LINKS = [
    ("NVLink 4 (H100 SXM, in a node)", 450e9,
     "900 GB/s total per GPU, both directions (NVIDIA H100 datasheet)"),
    ("PCIe Gen5 x16", 64e9, "32 GT/s x 16 lanes, 128b/130b coding: about 63 GB/s per direction"),
    ("InfiniBand NDR (one 400 Gb/s NIC per GPU)", 50e9, "400 Gb/s = 50 GB/s per direction"),
]


def chunks(strategy, L, P, r):
    """Rank r's chunks as (start, length), chunk c of n starting at floor(c L / n)."""
    def chunk(n, c):
        a, b = c * L // n, (c + 1) * L // n
        return a, b - a
    if strategy == "zigzag":
        return [chunk(2 * P, r), chunk(2 * P, 2 * P - 1 - r)]
    return [chunk(P, r)]


def causal_entries(q, k):
    """Entries of query chunk q against key chunk k: key position <= query position."""
    (qs, ql), (ks, kl) = q, k

    def upto(n):  # sum over queries i < n of min(kl, max(0, i - ks + 1)), in closed form
        ramp = max(0, min(n, ks + kl) - ks)  # queries ks .. min(n, ks + kl) - 1: 1, 2, ...
        return ramp * (ramp + 1) // 2 + max(0, n - (ks + kl)) * kl
    return upto(qs + ql) - upto(qs)


def window_entries(q, k, W):
    """Entries of query chunk q against key chunk k under a sliding window of W keys:
    i - W < j <= i."""
    (qs, ql), (ks, kl) = q, k
    return sum(max(0, min(ks + kl - 1, i) - max(ks, i - W + 1) + 1) for i in range(qs, qs + ql))


def rank_work(strategy, L, P, W=None):
    out = []
    for r in range(P):
        mine = chunks(strategy, L, P, r)
        entries, skipped = 0, 0
        for step in range(P):
            e = sum(causal_entries(q, k) if W is None else window_entries(q, k, W) for q in mine
                    for k in chunks(strategy, L, P, (r - step) % P))
            entries += e
            skipped += e == 0
        out.append((entries, skipped))
    return out


def work_table(L=4096, P=4):
    total = L * (L + 1) // 2
    rows = ["| rank | contiguous: entries | share | ring steps skipped | zigzag: entries | share "
            "| ring steps skipped |", "|---:|---:|---:|---:|---:|---:|---:|"]
    ring, zig = rank_work("ring", L, P), rank_work("zigzag", L, P)
    for r in range(P):
        rows.append(f"| {r} | {ring[r][0]:,} | {100 * ring[r][0] / total:.1f} % | {ring[r][1]} "
                    f"| {zig[r][0]:,} | {100 * zig[r][0] / total:.1f} % | {zig[r][1]} |")
    imb = [max(e for e, _ in w) * P / total for w in (ring, zig)]
    rows.append("")
    rows.append(f"L = {L:,}, P = {P}, one head, causal: {total:,} entries in all. The busiest rank "
                f"does {imb[0]:.2f}x the mean with contiguous shards and {imb[1]:.2f}x with "
                f"zigzag; a ring step is as long as its busiest rank's, so contiguous shards run "
                f"at {100 / imb[0]:.0f} % of the ranks' capacity.")
    return "\n".join(rows)


def bytes_rows(L, P, H, Hkv, D, size=2):
    """Bytes one rank sends per layer: pass-KV forwards P-1 K/V shards; its backward P-1 shards of
    K, V, dK, dV and a last hop of dK, dV home (cp_ring.c); Ulysses sends (P-1)/P of its Q, K, V
    and of the O it computed for the others; its backward (P-1)/P of Q, K, V, O, dO, LSE and of
    the dQ, dK, dV it computed for the others (cp_ulysses)."""
    shard = L // P
    pass_kv = (P - 1) * 2 * shard * Hkv * D * size
    backward = ((P - 1) * 4 + 2) * shard * Hkv * D * size if P > 1 else 0
    ulysses = (P - 1) * shard * D * size * (2 * H + 2 * Hkv) // P
    # its backward: Q, O, dO (H heads), K, V (H_kv) and the fp32 LSE (H) there; dQ (H), dK, dV
    # (H_kv) back
    ulysses_bwd = (P - 1) * shard * (D * size * (4 * H + 4 * Hkv) + 4 * H) // P
    return pass_kv, backward, ulysses, ulysses_bwd


def bytes_table():
    rows = ["| shape (per layer) | P | pass-KV (ring, zigzag) | its backward | Ulysses all-to-all "
            "| its backward |", "|---|---:|---:|---:|---:|---:|"]
    for name, L, H, Hkv, D in [("L = 128k, H = 32, H_kv = 8, D = 128 (bf16)", 131072, 32, 8, 128),
                               ("L = 128k, H = H_kv = 32, D = 128 (bf16, no GQA)", 131072, 32, 32,
                                128)]:
        for P in (4, 8):
            kv, bw, ul, ub = bytes_rows(L, P, H, Hkv, D)
            rows.append(f"| {name} | {P} | {kv / 2**20:,.0f} MiB | {bw / 2**20:,.0f} MiB "
                        f"| {ul / 2**20:,.0f} MiB | {ub / 2**20:,.0f} MiB |")
    return "\n".join(rows)


def step_times(shard, H, Hkv, D, bw, size=2, causal_half=True):
    """One ring step: attention of a shard's queries against one visiting K/V shard (half the
    block under zigzag causality), against that shard's transfer."""
    entries = shard * shard / (2 if causal_half else 1)
    compute = 4 * entries * D * H / RATE
    comm = 2 * shard * Hkv * D * size / bw
    return compute, comm


def hiding_table(H=32, Hkv=8, D=128):
    rows = ["| link | GB/s (one way) | shortest shard that hides its transfer | compute / "
            "transfer at 4k | at 16k | at 64k |", "|---|---:|---:|---:|---:|---:|"]
    for name, bw, _ in LINKS:
        # compute = 2 shard^2 D H / RATE (zigzag: half a block), comm = 4 shard Hkv D / bw
        threshold = 2 * Hkv * RATE / (H * bw)
        ratios = []
        for s in (4096, 16384, 65536):
            c, m = step_times(s, H, Hkv, D, bw)
            ratios.append(f"{c / m:,.1f}x")
        rows.append(f"| {name} | {bw / 1e9:.0f} | {threshold:,.0f} positions | "
                    + " | ".join(ratios) + " |")
    rows.append("")
    rows.append(f"H = {H} query heads, H_kv = {Hkv}, D = {D}, bf16, causal with zigzag shards "
                f"(a step is half a block); compute at {H100['eta_tensor']:.2f} x "
                f"{H100['tensor_flops'] / 1e12:.1f} TFLOP/s = {RATE / 1e12:.0f} TFLOP/s "
                "(benchmarks/cost_model.py's H100). Links: "
                + "; ".join(f"{n}: {src}" for n, _, src in LINKS) + ".")
    return "\n".join(rows)


# Llama 3 405B (Llama Team, "The Llama 3 Herd of Models", 2024, table 3): 126 layers, model
# dimension 16,384, 128 query heads, 8 key/value heads, so D = 128; 405e9 parameters.
LLAMA = {"layers": 126, "H": 128, "Hkv": 8, "D": 128, "params": 405e9}
META = {"tokens": 2**20, "gpus": 128, "nodes": 16, "seconds": 77, "efficiency": 0.93}


def meta_table():
    m, t = LLAMA, META
    L, P, tp = t["tokens"], t["nodes"], t["gpus"] // t["nodes"]
    H, Hkv = m["H"] // tp, max(1, m["Hkv"] // tp)  # heads per GPU with tensor parallelism in a node
    shard = L // (2 * P)  # a zigzag chunk: each step is two half-shard blocks
    per_step_entries = (L // P) ** 2 / 2  # zigzag, causal: half a block per step
    compute = 4 * per_step_entries * m["D"] * H / RATE
    comm = 2 * (L // P) * Hkv * m["D"] * 2 / LINKS[2][1]
    attn_flops = 4 * (L * (L + 1) / 2) * m["D"] * m["H"] * m["layers"]
    linear_flops = 2 * m["params"] * L
    peak = t["gpus"] * H100["tensor_flops"]
    rows = ["| quantity | value |", "|---|---:|",
            f"| context-parallel ranks (nodes of {tp} H100s, tensor parallel inside) | {P} |",
            f"| positions per rank (two zigzag chunks of {shard:,}) | {L // P:,} |",
            f"| heads per GPU: query / key-value | {H} / {Hkv} |",
            f"| one ring step per GPU, attention (model) | {1e3 * compute:,.0f} ms |",
            f"| one ring step per GPU, K/V transfer over InfiniBand (model) | {1e3 * comm:,.1f} ms |",
            f"| attention hides its transfer by | {compute / comm:,.0f}x |",
            f"| attention FLOPs of the prefill (126 layers, causal) | {attn_flops:.2e} |",
            f"| linear-layer FLOPs (2 x parameters x tokens) | {linear_flops:.2e} |",
            f"| time at the 128 GPUs' dense bf16 peak | {(attn_flops + linear_flops) / peak:,.0f} s |",
            f"| published time (Yang et al. 2024) | {t['seconds']} s |",
            f"| published parallel efficiency (Yang et al. 2024) | {100 * t['efficiency']:.0f} % |",
            f"| fraction of peak the published time implies | "
            f"{100 * (attn_flops + linear_flops) / peak / t['seconds']:.0f} % |"]
    return "\n".join(rows)


def window_table(L=4096, P=4, W=1024):
    rows = ["| rank | contiguous: entries | ring steps computed | skipped | zigzag: entries "
            "| ring steps computed | skipped |", "|---:|---:|---:|---:|---:|---:|---:|"]
    ring, zig = rank_work("ring", L, P, W), rank_work("zigzag", L, P, W)
    for r in range(P):
        rows.append(f"| {r} | {ring[r][0]:,} | {P - ring[r][1]} | {ring[r][1]} | {zig[r][0]:,} "
                    f"| {P - zig[r][1]} | {zig[r][1]} |")
    total = sum(e for e, _ in ring)
    imb = [max(e for e, _ in w) * P / total for w in (ring, zig)]
    rows.append("")
    rows.append(f"L = {L:,}, P = {P}, one head, a window of W = {W:,} keys: {total:,} entries in "
                f"all (dense causal: {L * (L + 1) // 2:,}). The busiest rank does {imb[0]:.2f}x "
                f"the mean with contiguous shards and {imb[1]:.2f}x with zigzag; contiguous "
                f"ranks compute {max(P - s for _, s in ring)} of the {P} steps at most, zigzag "
                f"ranks {max(P - s for _, s in zig)}.")
    return "\n".join(rows)


def dsa_rows(L, P, k, DI=128, D=128, size=2):
    """Bytes one rank receives per layer under DeepSeek sparse attention across P ranks, this
    example's way (cp_dsa.c): the indexer keys of the other ranks' positions (one D_I row each),
    K and V of the other ranks' positions (--kv gather: one head of D each); and the most the
    fetch of the selected rows (--kv fetch) can need: the visible positions the busiest contiguous
    rank does not own (rank P-1: (P-1) L / P), and no more than its queries x k."""
    others = L - L // P
    index = others * DI * size
    gather = others * 2 * D * size
    fetch = min(others, (L // P) * k) * 2 * D * size
    return index, gather, fetch


def dsa_table():
    rows = ["| L | P | k | indexer keys in (all-gather) | K/V in (all-gather) | K/V fetched, "
            "at most | indexer work, busiest rank / mean: contiguous | zigzag |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for L, P, k in [(131072, 8, 2048), (131072, 32, 2048)]:
        idx, gat, fet = dsa_rows(L, P, k)
        total = L * (L + 1) // 2
        imb = [max(e for e, _ in rank_work(s, L, P)) * P / total for s in ("ring", "zigzag")]
        rows.append(f"| {L:,} | {P} | {k:,} | {idx / 2**20:,.2f} MiB | {gat / 2**20:,.2f} MiB "
                    f"| {fet / 2**20:,.2f} MiB | {imb[0]:.2f}x | {imb[1]:.2f}x |")
    rows.append("")
    rows.append("Per layer and sequence: indexer keys D_I = 128, K and V one head of D = 128 each, "
                "bf16 (this example's layout; DeepSeek-V3.2 stores its indexer keys in FP8 and "
                "one 576-wide latent for K and V). The indexer scores every visible key of every "
                "query, so its work has the causal imbalance of dense attention.")
    return "\n".join(rows)


TABLES = {"work": work_table, "bytes": bytes_table, "hiding": hiding_table, "meta": meta_table,
          "window": window_table, "sparse_bytes": dsa_table}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md's tables differ")
    args = ap.parse_args()
    text = open(README).read()
    new = text
    for name, make in TABLES.items():
        pat = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
        if not pat.search(new):
            print(f"FAIL README.md has no <!-- table:{name} --> block")
            return 1
        new = pat.sub(lambda mt: mt.group(1) + make() + "\n" + mt.group(2), new)
    if args.check:
        if new != text:
            print("FAIL README.md's tables differ from cp_model.py's (run it to rewrite them)")
            return 1
        print("PASS README.md's tables are cp_model.py's")
        return 0
    if new != text:
        open(README, "w").write(new)
    print("README.md's tables written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
