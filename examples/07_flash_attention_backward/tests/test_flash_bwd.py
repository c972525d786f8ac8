#!/usr/bin/env python3
"""test_flash_bwd.py — the checks of Example 07's reference (flash_bwd.py) and of the C program
against it:

  - Algorithm 2 against autograd of F.scaled_dot_product_attention in float64 (tail tiles,
    Lq != Lk, causal, D = 32, 64, 80, 128, B and H > 1), and against autograd of the masked
    attention for causal Lq != Lk (SDPA aligns causality top-left), example 04's patterns and
    top-k selections in example 05's format (with -1 slots);
  - rows that see no key: zero gradients, no NaN; the tiles visited are exactly those with a
    visible entry; any tile size gives the same gradients;
  - with the C program (argument: flash_bwd_sim): its --dump of a dense fp32, a block-sparse
    fp16 and a top-k bf16 problem — the C double reference against autograd on the same tensors,
    the C kernels' gradients against Algorithm 2 run on the O and LSE the forward kernel wrote,
    the forward's O against PyTorch's — and the C kernels on tensors PyTorch wrote (--tensors).

    python examples/07_flash_attention_backward/tests/test_flash_bwd.py [build/sim/.../flash_bwd_sim]
"""
import math
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "04_sparse_patterns"))
sys.path.insert(0, os.path.join(HERE, ".."))
from attn_testing import Checks, load_attn_tensor  # noqa: E402
import flash_bwd as fb  # noqa: E402
import sparse_patterns  # noqa: E402  example 04's patterns

SHAPES = [  # (B, H, Lq, Lk, D): one entry, tails, one tile exactly, Lq != Lk both ways
    (1, 1, 1, 1, 64), (2, 1, 17, 17, 80), (1, 2, 64, 64, 64), (1, 1, 129, 129, 128),
    (1, 2, 64, 129, 64), (1, 2, 129, 64, 32), (2, 2, 100, 100, 32),
]


def rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1


def inputs(b, h, lq, lk, d, seed):
    return (rand(b, h, lq, d, seed=seed), rand(b, h, lk, d, seed=seed + 1),
            rand(b, h, lk, d, seed=seed + 2), rand(b, h, lq, d, seed=seed + 3))


def close_grads(c, got, want, tol, what):
    """Every gradient within tol * (1 + max|want|), no NaN."""
    for name, x, y in zip(("dQ", "dK", "dV"), got, want):
        scale = 1.0 + float(y.abs().max()) if y.numel() else 1.0
        c.close(x, y, tol * scale, 0.0, f"{what} {name}")


def check_against_autograd(c):
    """Algorithm 2 vs autograd (SDPA where it applies, the masked attention elsewhere)."""
    for b, h, lq, lk, d in SHAPES:
        for causal in (False, True):
            q, k, v, do = inputs(b, h, lq, lk, d, seed=lq * 1000 + lk + d)
            o, lse = fb.attention_forward(q, k, v, causal)
            got = fb.flash_bwd(q, k, v, o, do, lse, causal)
            want = fb.autograd_grads(q, k, v, do, causal)
            close_grads(c, got, want, 1e-12, f"autograd B={b} H={h} Lq={lq} Lk={lk} D={d} "
                        f"causal={causal}")


def check_masked_matches_sdpa(c):
    """The masked attention's autograd (used for masks and Lq != Lk) equals SDPA's with a
    boolean mask where every row sees a key: the reference of the references."""
    import torch.nn.functional as F
    for lq, lk in ((64, 129), (100, 100), (17, 30)):
        q, k, v, do = inputs(1, 2, lq, lk, 64, seed=lq + lk)
        keep = sparse_patterns.pattern_mask("window:w=8", lq, lk) | fb.visible(lq, lk, True)
        mask = fb.visible(lq, lk, True, keep)
        want = []
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        (F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask) * do).sum().backward()
        got = fb.autograd_grads(q, k, v, do, True, keep=keep)
        want = (qq.grad, kk.grad, vv.grad)
        close_grads(c, got, want, 1e-12, f"masked autograd vs SDPA Lq={lq} Lk={lk}")


def check_patterns_and_topk(c):
    """Algorithm 2 under example 04's patterns and top-k selections (-1 slots) vs autograd."""
    b, h, lq, lk, d = 2, 2, 100, 130, 64
    q, k, v, do = inputs(b, h, lq, lk, d, seed=7)
    masks = [(spec, sparse_patterns.pattern_mask(spec, lq, lk))
             for spec in ("window:w=16", "bigbird:b=16,r=2,seed=1", "strided:l=8",
                          "global:n=4+causal_window:w=20")]
    for kk in (1, 12, 200):
        masks.append((f"top-k {kk}", fb.selection_mask(fb.random_selection(b, lq, lk, kk, True),
                                                       b, lq, lk)))
    for name, keep in masks:
        o, lse = fb.attention_forward(q, k, v, True, keep=keep)
        got = fb.flash_bwd(q, k, v, o, do, lse, True, keep=keep)
        want = fb.autograd_grads(q, k, v, do, True, keep=keep)
        close_grads(c, got, want, 1e-12, f"{name} (causal)")


def check_empty_rows_and_tiles(c):
    """Rows that see no key: zero dQ, no NaN anywhere; the tiles visited are those with a
    visible entry; tile sizes do not change the result."""
    b, h, lq, lk, d = 1, 2, 150, 40, 32  # causal: rows 0..109 see no key
    q, k, v, do = inputs(b, h, lq, lk, d, seed=3)
    sel = fb.random_selection(b, lq, lk, 5, True)
    for name, keep in (("causal", None), ("top-k 5", fb.selection_mask(sel, b, lq, lk))):
        o, lse = fb.attention_forward(q, k, v, True, keep=keep)
        visited = []
        dq, dk, dv = fb.flash_bwd(q, k, v, o, do, lse, True, keep=keep,
                                  trace=lambda j0, i0: visited.append((i0, j0)))
        empty = ~fb.visible(lq, lk, True, keep).any(dim=-1).expand(b, h, lq)
        c.expect(bool(empty.any()) and bool((dq[empty] == 0).all()),
                 f"{name}: rows that see no key have dQ = 0")
        c.expect(not any(bool(t.isnan().any()) for t in (dq, dk, dv)), f"{name}: no NaN")
        vis = fb.visible(lq, lk, True, keep).expand(b, h, lq, lk)
        want = {(i0, j0) for i0 in range(0, lq, fb.BR) for j0 in range(0, lk, fb.BC)
                if bool(vis[..., i0:i0 + fb.BR, j0:j0 + fb.BC].any())}
        c.expect(set(visited) == want and len(visited) == len(want),
                 f"{name}: tiles visited {sorted(visited)}, want {sorted(want)}")
        other = fb.flash_bwd(q, k, v, o, do, lse, True, keep=keep, br=32, bc=16)
        close_grads(c, other, (dq, dk, dv), 1e-12, f"{name}: Br=32 Bc=16")


# ---- the C program ------------------------------------------------------------------------------

def run(program, args):
    r = subprocess.run([program] + args, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def load(folder, name, shape):
    return torch.from_numpy(load_attn_tensor(os.path.join(folder, name + ".bin"))).double() \
        .reshape(shape)


C_RUNS = [  # (what, dtype, arguments, kernels, tolerance of a kernel against Algorithm 2)
    ("dense fp32", None, ["-B", "2", "-H", "2", "--lq", "70", "--lk", "100", "-D", "32",
                          "--causal"], ["naive", "fa2_fp32"], 1e-5),
    ("block-sparse f16", "window:w=20", ["-B", "1", "-H", "2", "-L", "150", "-D", "64",
                                         "--causal", "--dtype", "f16", "--pattern",
                                         "window:w=20"], ["block_sparse"], 2e-2),
    ("top-k bf16", "topk", ["-B", "2", "-H", "1", "-L", "80", "-D", "64", "--causal",
                            "--dtype", "bf16", "--topk", "10"], ["topk"], 3e-2),
]


def check_c_dumps(c, program):
    for what, mode, args, kernels, tol in C_RUNS:
        with tempfile.TemporaryDirectory() as out:
            rc, text = run(program, ["--check-only", "--quiet", "--dump", out] + args)
            c.expect(rc == 0, f"C {what}: exit {rc}: {text[-500:]}")
            if rc != 0:
                continue
            b, h = int(args[1]), int(args[3])
            lq = int(args[args.index("--lq") + 1]) if "--lq" in args else int(args[5])
            lk = int(args[args.index("--lk") + 1]) if "--lk" in args else lq
            d = int(args[args.index("-D") + 1])
            q, o, do = (load(out, n, (b, h, lq, d)) for n in ("q", "o", "do"))
            k, v = (load(out, n, (b, h, lk, d)) for n in ("k", "v"))
            lse = load(out, "lse", (b, h, lq))
            keep = None
            if mode == "topk":
                sel = load(out, "sel", (b * lq, -1)).long()
                keep = fb.selection_mask(sel, b, lq, lk)
            elif mode is not None:
                keep = sparse_patterns.pattern_mask(mode, lq, lk)
            # the C double reference against autograd on the same tensors
            want = fb.autograd_grads(q, k, v, do, True, keep=keep)
            ref = [load(out, n + "_ref", t.shape) for n, t in zip(("dq", "dk", "dv"), want)]
            close_grads(c, ref, want, 1e-6, f"C {what}: C reference vs autograd")
            # the forward kernel's O against PyTorch's
            o_want, _ = fb.attention_forward(q, k, v, True, keep=keep)
            c.close(o, o_want, 1e-5 if mode is None else 1e-2, 0.0, f"C {what}: forward O")
            # each kernel against Algorithm 2 on the O and LSE the forward kernel wrote
            alg2 = fb.flash_bwd(q, k, v, o, do, lse, True, keep=keep)
            for kname in kernels:
                got = [load(out, f"{n}_{kname}", t.shape) for n, t in zip(("dq", "dk", "dv"), alg2)]
                close_grads(c, got, alg2, tol, f"C {what}: kernel {kname} vs Algorithm 2")


def check_c_inputs(c, program):
    """The C kernels on tensors PyTorch wrote (flash_bwd.py --write): every fp32 version PASS."""
    with tempfile.TemporaryDirectory() as out:
        fb.write_inputs(out, 1, 2, 70, 48, True, seed=5)
        rc, text = run(program, ["--check-only", "-B", "1", "-H", "2", "-L", "70", "-D", "48",
                                 "--causal", "--tensors", out])
        passed = [line for line in text.splitlines() if " backward  PASS" in line]
        c.expect(rc == 0 and len(passed) == 2,
                 f"C on PyTorch's tensors: exit {rc}, {len(passed)} PASS lines: {text[-800:]}")


def main(argv):
    c = Checks()
    for check in (check_against_autograd, check_masked_matches_sdpa, check_patterns_and_topk,
                  check_empty_rows_and_tiles):
        check(c)
    if argv:
        if not os.access(argv[0], os.X_OK):
            print(f"error: {argv[0]}: not an executable file", file=sys.stderr)
            return 2
        check_c_dumps(c, argv[0])
        check_c_inputs(c, argv[0])
    print(f"{c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    torch.set_num_threads(min(2, torch.get_num_threads()))
    sys.exit(main(sys.argv[1:]))
