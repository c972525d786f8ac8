#!/usr/bin/env python3
"""cost_model.py — the FLOP and byte model of DeepSeek Sparse Attention against dense attention,
per token, as a function of the token's position t (the number of keys it may see).

Shapes are DeepSeek-V3.2-Exp's (its config and reference inference code):
  attention: H = 128 heads; dense prefill in MHA mode, D_qk = 192 (128 + 64 RoPE), D_v = 128;
             sparse attention and decoding in MLA's MQA mode over the 512-dim latent, D_qk = 576
             (512 + 64 RoPE), D_v = 512, one latent shared by all heads
  indexer:   H_I = 64 heads of D_I = 128, FP8 (e4m3) q_I and k_I, k = 2048 selected keys

Per query token at position t (FLOPs counted as 2 per multiply-add, FlashMLA's convention
2 * Lq * keys * H * (D_qk + D_v) for attention):
  prefill, dense   2 t H (192 + 128)
  prefill, DSA     2 t H_I D_I / 2  +  2 min(t, k) H (576 + 512)
                   (the indexer's FP8 FLOPs count half: FP8 tensor cores run at twice the BF16
                   rate on Hopper, so the figure is in BF16-equivalent FLOPs)
  decode, dense    t * 656 bytes of KV cache read (latent 512 B FP8 + 16 B of scales + RoPE
                   64 x 2 B), and 2 t H (576 + 512) FLOPs
  decode, DSA      t * 132 bytes (k_I: 128 B FP8 + a 4 B scale) + min(t, k) * 656 bytes
The indexer is still O(t) per token, O(L^2) per sequence, but with a slope several times smaller
than dense attention's (the table's last line); attention itself is O(min(t, k)).

Run:
  python cost_model.py                 the README's table (markdown)
  python cost_model.py --plot FILE     also the cost curves (PNG)
"""
import sys
import textwrap

H, D_QK_MHA, D_V_MHA, D_QK_MQA, D_V_MQA = 128, 192, 128, 576, 512
H_I, D_I, TOPK = 64, 128, 2048
KV_BYTES = 512 + 16 + 64 * 2       # one token of the FP8 latent cache
INDEX_KEY_BYTES = 128 + 4          # one token of the FP8 indexer key cache


def prefill_flops(t, sparse):
    if not sparse:
        return 2 * t * H * (D_QK_MHA + D_V_MHA)
    return 2 * t * H_I * D_I / 2 + 2 * min(t, TOPK) * H * (D_QK_MQA + D_V_MQA)


def decode_bytes(t, sparse):
    if not sparse:
        return t * KV_BYTES
    return t * INDEX_KEY_BYTES + min(t, TOPK) * KV_BYTES


def crossover(cost):
    """First position where DSA is cheaper than dense."""
    t = 1
    while cost(t, True) >= cost(t, False):
        t += 1
    return t


def table():
    rows = ["| position t | prefill GFLOP/token, dense | DSA | ratio | "
            "decode KB read/token, dense | DSA | ratio |",
            "|---:|---:|---:|---:|---:|---:|---:|"]
    for t in (4096, 8192, 32768, 65536, 131072):
        pd, ps = prefill_flops(t, False), prefill_flops(t, True)
        dd, ds = decode_bytes(t, False), decode_bytes(t, True)
        rows.append(f"| {t // 1024}K | {pd / 1e9:.2f} | {ps / 1e9:.2f} | {pd / ps:.1f}x | "
                    f"{dd / 1e3:.0f} | {ds / 1e3:.0f} | {dd / ds:.1f}x |")
    rows.append("")
    slope_p = prefill_flops(1, False) / (H_I * D_I)            # the indexer's FP8 slope
    slope_d = decode_bytes(1, False) / INDEX_KEY_BYTES
    rows += textwrap.wrap(
        f"DSA is cheaper than dense from position {crossover(prefill_flops)} (prefill FLOPs) and "
        f"{crossover(decode_bytes)} (decode bytes); the indexer's slope is {slope_p:.0f}x "
        f"(prefill) and {slope_d:.1f}x (decode) shallower than dense's.", 96)
    return "\n".join(rows)


def plot(path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ts = list(range(0, 131073, 1024))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, cost, unit, scale, title in (
            (axes[0], prefill_flops, "GFLOP per token", 1e9, "prefill (FLOPs)"),
            (axes[1], decode_bytes, "MB read per token", 1e6, "decode (KV bytes)")):
        ax.plot([t / 1024 for t in ts], [cost(t, False) / scale for t in ts], label="dense")
        ax.plot([t / 1024 for t in ts], [cost(t, True) / scale for t in ts],
                label=f"DSA (top-{TOPK})")
        ax.set_xlabel("token position (K)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Cost per token vs position: a FLOP/byte model of DeepSeek-V3.2-Exp's shapes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    print(table())
    if "--plot" in argv:
        plot(argv[argv.index("--plot") + 1])
    return 0


if __name__ == "__main__":
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "benchmarks"))
    import bench_results  # the one __main__ wrapper: a missing package is one line
    bench_results.run_main(main)
