#!/usr/bin/env python3
"""flash_bwd.py — PyTorch reference for Example 07 (the backward pass of attention).

FlashAttention-2's backward (Dao 2023, arXiv:2307.08691, Algorithm 2; FlashAttention, Dao et al.
2022, Appendix B) written with PyTorch tensors, the loop order of flash_bwd.cu's versions 2-5.
One pass of the outer loop is one thread block of the kernel; it owns Bc keys from start to end:

    D = rowsum(dO * O)                                  [B, H, Lq]: the preprocessing kernel
    for each tile K_j, V_j of Bc keys:                  one block; dK_j, dV_j never leave it
        dK_j = 0, dV_j = 0
        for each tile Q_i, dO_i of Br query rows        causal: from the first row that sees
            that sees a key of the tile:                 key j0 (i >= j0 - (Lk - Lq))
            S_ij  = scale * Q_i K_j^T
            P_ij  = exp(S_ij - LSE_i)                   recomputed: the forward kept only LSE
            dV_j += P_ij^T dO_i
            dP_ij = dO_i V_j^T
            dS_ij = P_ij * (dP_ij - D_i)
            dQ_i += scale * dS_ij K_j                   the kernel: atomicAdd (version 3) or a
            dK_j += scale * dS_ij^T Q_i                 second pass per Q_i (versions 4, 5)
        write dK_j, dV_j

No Lq x Lk matrix exists at any time: the memory beyond the inputs is D (one value per row) and
dQ. Conventions of the C harness (common/include/attn/problem.h): layout [B, H, L, D], scale
1/sqrt(D) by default, causal bottom-right aligned (query i sees key j iff j <= i + Lk - Lq), a
row that sees no key outputs 0, LSE -inf, and gets zero gradients. A mask (`keep`, boolean,
broadcast to [B, H, Lq, Lk]) restricts the entries further: a block-sparse pattern (example 04's
sparse_patterns.py) or a top-k selection (selection_mask, example 05's format).

Run:
  python flash_bwd.py              a short demo: the gradients of SDPA by autograd against
                                   Algorithm 2, dense, causal, a pattern and a top-k selection
  python flash_bwd.py --all        every check (tests/test_flash_bwd.py; with --program PATH the
                                   C program's dumps and --tensors too)
  python flash_bwd.py --write DIR [-B 1 -H 2 -L 40 -D 64 --causal --seed 0]
                                   writes q, k, v, do and the forward's o, lse as attn tensor files
                                   for the C program's --tensors DIR (fp32): the C kernels on
                                   PyTorch's tensors
Exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch, F = require("torch", "torch.nn.functional", setup="--python")

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "test_flash_bwd.py")
BR = 64  # query rows per tile (versions 3-5; version 2 uses 32)
BC = 64  # keys per tile = one thread block


def visible(lq, lk, causal, keep=None, device=None):
    """Boolean [..., lq, lk]: the entries computed, causality (bottom-right) and the mask."""
    i = torch.arange(lq, device=device).unsqueeze(1)
    j = torch.arange(lk, device=device).unsqueeze(0)
    vis = (j <= i + (lk - lq)) if causal else torch.ones(lq, lk, dtype=torch.bool, device=device)
    return vis if keep is None else vis & keep


def attention_forward(q, k, v, causal=False, scale=None, keep=None):
    """O and LSE (natural log, [B, H, Lq]) in the inputs' precision: what the forward hands the
    backward. A row that sees no key: O = 0, LSE = -inf."""
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    vis = visible(lq, lk, causal, keep, q.device)
    s = (scale * (q @ k.transpose(-2, -1))).masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)  # -inf - -inf: an empty row
    return p @ v, lse


def flash_bwd(q, k, v, o, do, lse, causal=False, scale=None, keep=None, br=BR, bc=BC, trace=None):
    """dQ, dK, dV by Algorithm 2 (above), in the inputs' precision, for q, o, do [B,H,Lq,D],
    k, v [B,H,Lk,D], lse [B,H,Lq]. Tiles in which no entry is visible are skipped, as the
    block-sparse kernel skips the tiles its mask does not list. trace, if given, is called as
    trace(j0, i0) for every tile visited."""
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    vis = visible(lq, lk, causal, keep, q.device)
    D = (do * o).sum(dim=-1)  # [B,H,Lq]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, lk, bc):  # ---- outer loop: one thread block per key tile ----
        k_j, v_j = k[..., j0:j0 + bc, :], v[..., j0:j0 + bc, :]
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)
        i_first = max(0, j0 - (lk - lq)) if causal else 0
        for i0 in range(i_first - i_first % br, lq, br):  # ---- the query tiles ----
            vis_ij = vis[..., i0:i0 + br, j0:j0 + bc]
            if not bool(vis_ij.any()):
                continue  # no entry of this tile is computed (block-sparse: not listed)
            if trace is not None:
                trace(j0, i0)
            q_i, do_i = q[..., i0:i0 + br, :], do[..., i0:i0 + br, :]
            lse_i, D_i = lse[..., i0:i0 + br, None], D[..., i0:i0 + br, None]
            s_ij = scale * (q_i @ k_j.transpose(-2, -1))
            # masked entries and rows that see no key (LSE = -inf) contribute P = 0
            p_ij = torch.where(vis_ij, torch.exp(s_ij - lse_i), torch.zeros_like(s_ij))
            dv_j += p_ij.transpose(-2, -1) @ do_i
            dp_ij = do_i @ v_j.transpose(-2, -1)
            ds_ij = p_ij * (dp_ij - D_i)
            dq[..., i0:i0 + br, :] += scale * (ds_ij @ k_j)  # the kernel: atomicAdd
            dk_j += scale * (ds_ij.transpose(-2, -1) @ q_i)
        dk[..., j0:j0 + bc, :] = dk_j
        dv[..., j0:j0 + bc, :] = dv_j
    return dq, dk, dv


def autograd_grads(q, k, v, do, causal=False, scale=None, keep=None):
    """The gradients of sum(dO * O) by autograd of F.scaled_dot_product_attention, or of the
    masked attention when a mask (or causality with Lq != Lk, which SDPA aligns top-left) is
    given. Rows that see no key get zero gradients (masked_fill's backward zeroes them)."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    lq, lk = q.shape[-2], k.shape[-2]
    if keep is None and (not causal or lq == lk):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    else:
        scale_ = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        vis = visible(lq, lk, causal, keep, q.device)
        s = (scale_ * (q @ k.transpose(-2, -1))).masked_fill(~vis, float("-inf"))
        p = torch.softmax(s, dim=-1)
        p = torch.where(vis.any(dim=-1, keepdim=True), p, torch.zeros_like(p))
        o = p @ v
    (o * do).sum().backward()
    return q.grad, k.grad, v.grad


def selection_mask(sel, b, lq, lk):
    """Boolean [B, 1, Lq, Lk] from a selection in example 05's format: sel [B*Lq, K] (row b*Lq +
    i), ascending key positions, then -1; shared by the heads."""
    sel = torch.as_tensor(sel).reshape(b, lq, -1).long()
    keep = torch.zeros(b, lq, lk + 1, dtype=torch.bool)
    keep.scatter_(2, torch.where(sel < 0, lk, sel), True)  # -1 lands in the extra column
    return keep[..., :lk].unsqueeze(1)


def random_selection(b, lq, lk, k, causal, seed=0):
    """A selection in example 05's format: min(k, visible) distinct visible keys per query,
    ascending, then -1; [B*Lq, k]."""
    g = torch.Generator().manual_seed(seed)
    sel = torch.full((b * lq, k), -1, dtype=torch.long)
    for r in range(b * lq):
        n = min(lk, max(0, r % lq + lk - lq + 1)) if causal else lk
        keys = torch.randperm(n, generator=g)[:min(k, n)].sort().values
        sel[r, :keys.numel()] = keys
    return sel


def write_inputs(folder, b, h, l, d, causal, seed):
    """q, k, v, do and the forward's o, lse as attn tensor files (float32) for --tensors."""
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = ((torch.rand(b, h, l, d, generator=g, dtype=torch.float64) * 2 - 1).float()
                   for _ in range(4))
    o, lse = attention_forward(q.double(), k.double(), v.double(), causal)
    tensors = {"q": q, "k": k, "v": v, "do": do, "o": o.float(), "lse": lse.float()}
    os.makedirs(folder, exist_ok=True)
    for name, t in tensors.items():
        shape = [t.numel()] if name == "lse" else [t.numel() // d, d]
        with open(os.path.join(folder, name + ".bin"), "wb") as f:
            f.write(("attn-tensor v1 f32 " + " ".join(map(str, shape)) + "\n").encode())
            f.write(t.contiguous().numpy().astype("<f4").tobytes())


def demo():
    torch.manual_seed(0)
    b, h, lq, lk, d = 1, 2, 100, 130, 64
    q, k, v, do = (torch.rand(b, h, n, d, dtype=torch.float64) * 2 - 1 for n in (lq, lk, lk, lq))
    sparse = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "04_sparse_patterns")
    sys.path.insert(0, sparse)
    import sparse_patterns  # noqa: E402  example 04's patterns
    cases = [("dense", False, None), ("causal (bottom-right)", True, None),
             ("pattern window:w=16", True, sparse_patterns.pattern_mask("window:w=16", lq, lk)),
             ("top-k 12", True, selection_mask(random_selection(b, lq, lk, 12, True), b, lq, lk))]
    print("Algorithm 2 against autograd (float64), B=1 H=2 Lq=100 Lk=130 D=64:")
    for name, causal, keep in cases:
        o, lse = attention_forward(q, k, v, causal, keep=keep)
        tiles = []
        got = flash_bwd(q, k, v, o, do, lse, causal, keep=keep, trace=lambda j, i: tiles.append(1))
        want = autograd_grads(q, k, v, do, causal, keep=keep)
        errs = ", ".join(f"{n} {float((x - y).abs().max()):.1e}"
                         for n, x, y in zip(("dQ", "dK", "dV"), got, want))
        print(f"  {name:24s} {errs}   tiles visited: {len(tiles)} of "
              f"{math.ceil(lq / BR) * math.ceil(lk / BC)}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every check (tests/test_flash_bwd.py)")
    ap.add_argument("--program", help="with --all: the C program (flash_bwd_sim) for its checks")
    ap.add_argument("--write", metavar="DIR", help="write tensors for the C program's --tensors")
    ap.add_argument("-B", type=int, default=1)
    ap.add_argument("-H", type=int, default=2)
    ap.add_argument("-L", type=int, default=40)
    ap.add_argument("-D", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.all:
        cmd = [sys.executable, TESTS] + ([args.program] if args.program else [])
        return subprocess.call(cmd)
    if args.write:
        write_inputs(args.write, args.B, args.H, args.L, args.D, args.causal, args.seed)
        print(f"wrote q, k, v, do, o, lse to {args.write}: run the C program with -B {args.B} "
              f"-H {args.H} -L {args.L} -D {args.D}{' --causal' if args.causal else ''} "
              f"--tensors {args.write}")
        return 0
    demo()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
