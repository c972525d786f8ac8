#!/usr/bin/env python3
"""ladder.py — the ladder pattern of example 06 in plain Python: its block rule, its exact density
and cost, the parameters that reach a target density, and its heatmaps.

    ladder:b=B,s=S,w=W   blocks of b tokens; query block I = floor(a/b), key block J = floor(j/b),
                         D = |I - J|: keep iff J < s, or D < w, or D is a power of two (or 0)

The rule is the one of ladder.h (ladder_block_keep), which the C kernels and the CPU reference use
through its registration as a pattern kind of this example's own; register() gives example 04's
sparse_patterns.py the same kind in PyTorch (quality/ runs it in the model; tests/test_ladder.py
compares the two). Causality (j <= a) is applied on top, as everywhere in the chapter.

    python ladder.py --table            parameters for 50 % @ 4K, 25 % @ 8K, 10 % @ 16K (b = 64)
    python ladder.py --plot images/     the heatmaps of README.md (tokens and tiles)
"""
import argparse
import functools
import os
import sys


def block_keep(I, J, s, w):
    """Query block I keeps key block J."""
    D = abs(I - J)
    return J < s or D < w or D & (D - 1) == 0


def register(patterns):
    """Adds "ladder:b=B,s=S,w=W" (s defaults to 1) to example 04's sparse_patterns module (its
    register_kind), with the rule above on index tensors, so that its parser, masks and
    FlexAttention checks take the ladder like its own kinds."""
    import torch

    def predicate(part):
        b, s, w = part["b"], part["s"], part["w"]

        def keep(a, j):
            I = torch.div(a, b, rounding_mode="floor")
            J = torch.div(j, b, rounding_mode="floor")
            D = (I - J).abs()
            return (J < s) | (D < w) | ((D & (D - 1)) == 0)
        return keep
    patterns.register_kind("ladder", ("b", "s", "w"), {"s": 1}, {"b": 1, "w": 1}, predicate)
    return patterns


def kept_blocks(I, s, w):
    """Key blocks J <= I that causal query block I keeps, ascending."""
    return [J for J in range(I + 1) if block_keep(I, J, s, w)]


def rungs(I, s, w):
    """How many key blocks query block I keeps under causality (closed form, checked against
    kept_blocks): the local blocks I-w+1 .. I, then the sinks 0 .. s-1 below them, then the rungs
    I - 2^m with 2^m >= w (so below the local blocks) that are not sinks (I - 2^m >= s): one for
    each power of two from the first >= w up to I - s."""
    local = min(w, I + 1)
    sinks = max(0, min(s, I + 1 - local))
    top = I - s  # the largest 2^m a rung may take
    ladder = max(0, top.bit_length() - (w - 1).bit_length()) if top >= 1 else 0
    return local + sinks + ladder


@functools.lru_cache(maxsize=None)
def density(L, b, s, w):
    """Kept causal entries / causal entries (L(L+1)/2) for Lq = Lk = L: exact, block by block
    (a full block pair below the diagonal counts b*b entries, the diagonal one b(b+1)/2).
    Kept per process: the tables ask for the same few parameter sets hundreds of times."""
    nb = (L + b - 1) // b
    kept = 0
    for I in range(nb):
        rows = min(b, L - I * b)
        for J in kept_blocks(I, s, w):
            cols = min(b, L - J * b)
            kept += rows * (rows + 1) // 2 if J == I else rows * cols
    return kept / (L * (L + 1) / 2)


def params_for(L, target, b=64, s=1):
    """The smallest w whose density reaches target (None if even w = 1 exceeds it)."""
    for w in range(1, L // b + 2):
        if density(L, b, s, w) >= target:
            return w
    return None


def plot(folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    # tokens: L = 256, b = 8 (32 blocks) with its ablations; the same rule at every scale
    L = 256
    cases = [("ladder b=8, s=1, w=4", 8, 1, 4), ("no sinks: s=0", 8, 0, 4),
             ("no ladder: sink + local", 8, 1, 4, False), ("token level: b=1, s=4, w=32", 1, 4, 32)]
    fig, axes = plt.subplots(1, len(cases), figsize=(4 * len(cases), 4.2))
    for ax, case in zip(axes, cases):
        title, b, s, w = case[:4]
        with_ladder = case[4] if len(case) > 4 else True
        i = np.arange(L)[:, None]
        j = np.arange(L)[None, :]
        I, J = i // b, j // b
        D = np.abs(I - J)
        keep = (J < s) | (D < w) | (with_ladder & ((D & (D - 1)) == 0))
        keep &= j <= i
        ax.imshow(keep, cmap="Greys", interpolation="nearest")
        ax.set_title(f"{title}\ndensity {keep.sum() / (L * (L + 1) / 2):.3f}", fontsize=9)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "ladder_tokens.png"), dpi=80)
    # tiles: the block mask the kernel visits at L = 4096, b = 64 (64 x 64 tiles)
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    for ax, (L, target) in zip(axes, [(4096, 0.5), (8192, 0.25), (16384, 0.10)]):
        w = params_for(L, target)
        nb = L // 64
        m = np.array([[J <= I and block_keep(I, J, 1, w) for J in range(nb)] for I in range(nb)])
        ax.imshow(m, cmap="Greys", interpolation="nearest")
        ax.set_title(f"L={L}, ladder:b=64,s=1,w={w}\ndensity {density(L, 64, 1, w):.3f} "
                     f"({m.sum()} of {nb * (nb + 1) // 2} causal tiles)", fontsize=9)
        ax.set_xlabel("key tile")
        ax.set_ylabel("query tile")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "ladder_tiles.png"), dpi=80)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", action="store_true", help="parameters for the brief's densities")
    ap.add_argument("--plot", metavar="FOLDER", help="write the heatmaps there")
    args = ap.parse_args(argv)
    if args.table:
        print("| L | target | pattern | density | blocks kept by the last query block |")
        print("|---:|---:|---|---:|---:|")
        for L, target in [(4096, 0.5), (8192, 0.25), (16384, 0.10), (32768, 0.05)]:
            w = params_for(L, target)
            print(f"| {L} | {target:.2f} | `ladder:b=64,s=1,w={w}` | {density(L, 64, 1, w):.3f} "
                  f"| {rungs(L // 64 - 1, 1, w)} of {L // 64} |")
    if args.plot:
        plot(args.plot)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "benchmarks"))
    import bench_results  # the one __main__ wrapper: a missing package is one line
    bench_results.run_main(main)
