#!/usr/bin/env python3
"""plot_patterns.py — draws Example 04's patterns (Matplotlib, PNG) for the README.

  images/patterns_tokens.png   each pattern's token mask at L = 64 (kept entries dark)
  images/patterns_blocks.png   each pattern's block mask at L = 4096 in 64 x 64 tiles: full tiles
                               (no per-element work), partial tiles (predicate applied), skipped

The masks come from sparse_patterns.py (the PyTorch reference, checked against the C builders).

Run:  python plot_patterns.py [--out DIR]     (default: images/ beside this file)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import missing  # noqa: E402
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
except ModuleNotFoundError as e:  # a Python without the chapter's packages: one line
    sys.exit(missing(e.name, setup="--python"))

# This folder is on the module path when the script runs, so its reference imports directly.
from sparse_patterns import TILE, block_mask, pattern_mask  # noqa: E402

PATTERNS = [  # spec, causal, title
    ("window:w=6", False, "sliding window w=6\n(Longformer)"),
    ("causal_window:w=12", True, "causal window W=12\n(Mistral)"),
    ("dilated:w=4,d=3", False, "dilated w=4, d=3\n(Longformer)"),
    ("strided:l=8", True, "strided l=8\n(Sparse Transformer)"),
    ("fixed:l=8,c=2", True, "fixed l=8, c=2\n(Sparse Transformer)"),
    ("global:g=0,1,32+window:w=2", False, "global {0,1,32} + window 2\n(Longformer)"),
    ("bigbird:b=4,r=2,seed=1", False, "BigBird b=4, r=2\n(ITC)"),
    ("window:w=4+global:n=2+strided:l=16", True, "union: window + global\n+ strided"),
]

# The same patterns scaled to L = 4096 for the block layout (64 x 64 tiles).
PATTERNS_LARGE = [
    ("window:w=384", False),
    ("causal_window:w=768", True),
    ("dilated:w=128,d=3", False),
    ("strided:l=512", True),
    ("fixed:l=512,c=64", True),
    ("global:g=0-63,2048-2111+window:w=128", False),
    ("bigbird:b=64,r=3,seed=1", False),
    ("window:w=256+global:n=64+strided:l=1024", True),
]


def draw_tokens(path, L=64):
    fig, axes = plt.subplots(2, 4, figsize=(13, 8))
    for ax, (spec, causal, title) in zip(axes.flat, PATTERNS):
        m = pattern_mask(spec, L, L, causal)
        ax.imshow(m.numpy(), cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"{title}\ndensity {100 * float(m.float().mean()):.1f}%", fontsize=9)
        ax.set_xticks([0, L - 1])
        ax.set_yticks([0, L - 1])
        ax.set_xlabel("key j", fontsize=8)
        ax.set_ylabel("query i", fontsize=8)
    fig.suptitle(f"Token masks at L = {L} (dark = computed)", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_blocks(path, L=4096):
    cmap = ListedColormap(["#ffffff", "#f4a259", "#2a6f97"])  # skipped, partial, full
    fig, axes = plt.subplots(2, 4, figsize=(13, 8.4))
    for ax, (spec, causal) in zip(axes.flat, PATTERNS_LARGE):
        m = pattern_mask(spec, L, L, causal)
        kv_num, kv_idx, full_num, full_idx = block_mask(m, TILE, TILE)
        n = kv_num.numel()
        grid = [[0] * n for _ in range(n)]
        for r in range(n):
            for t in range(int(kv_num[r])):
                grid[r][int(kv_idx[r, t])] = 1
            for t in range(int(full_num[r])):
                grid[r][int(full_idx[r, t])] = 2
        # pattern_stats's density and visited tiles, from the mask and block mask drawn (it
        # would build them again)
        density = float(m.sum()) / (L * L)
        visited = float(kv_num.sum() + full_num.sum()) / (n * n)
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
        ax.set_title(f"{spec.replace('+', '+ ')}{' (causal)' if causal else ''}\n"
                     f"density {100 * density:.1f}%, tiles visited {100 * visited:.1f}%",
                     fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("#2a6f97", "#f4a259", "#ffffff")]
    fig.legend(handles, ["full tile (no mask work)", "partial tile (predicate)", "skipped"],
               loc="lower center", ncol=3, edgecolor="#999999")
    fig.suptitle(f"Block masks at L = {L} in {TILE} x {TILE} tiles ({L // TILE} x {L // TILE})",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "images"), help="output folder")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    draw_tokens(os.path.join(args.out, "patterns_tokens.png"))
    draw_blocks(os.path.join(args.out, "patterns_blocks.png"))
    print(f"wrote {args.out}/patterns_tokens.png and patterns_blocks.png")


if __name__ == "__main__":
    main()
