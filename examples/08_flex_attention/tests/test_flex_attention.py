#!/usr/bin/env python3
"""test_flex_attention.py — checks of example 08's PyTorch reference (flex_attention.py) and, with
--c-dump PATH (the example's program, flex_attention_sim), of the C program's tensors.

  1. each modification through FlexAttention (eager, on the CPU) equals SDPA with the explicit
     mask and bias built from index grids (soft-capping: the softmax written out), float64,
     Lq = Lk and Lq != Lk both ways, rows that see no key (0, LSE -inf);
  2. ALiBi's slopes against values worked out by hand: the paper's rule (H = 8) and, for H not
     a power of two, the rule of the authors' code (H = 3, 6, 12);
  3. FlexAttention's create_block_mask (64 x 64) equals the tiles of the mask (at L a multiple
     of 64, where FlexAttention's padding rule and the C one agree);
  4. RoPE: the rotate-half formula against the complex-number form, and the scores' dependence
     on relative positions only;
  5. benchmarks' peers (bench_gpu.py, run on a GPU by benchmarks/gpu.sh): on the CPU, small,
     FlexAttention (eager) and SDPA with the explicit mask/bias pass the check the benchmark
     applies before timing them;
  6. the C program's dumps (--dump), per modification: PyTorch's FlexAttention on the dumped
     inputs equals the C double-precision reference (O and LSE), the kernels' outputs are within
     fp16/bf16 rounding of it, the dumped ALiBi slopes are the rule's, the dumped block mask is
     the tiles of PyTorch's mask, and with --rope the dumped rotated Q and K are PyTorch's RoPE
     of the dumped originals.
Prints "N passed, M failed"; exit status 1 on a failure.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "python"))
from attn_testing import load_attn_tensor, main, reference  # noqa: E402

fx = reference("flex_attention_ref")
warnings.filterwarnings("ignore")

SPECS = ("causal", "sliding_window:w=40", "prefix_lm:p=50", "document", "alibi",
         "softcap:cap=0.7", "rel_bias:r=6")


def inputs(B, H, lq, lk, D, seed):
    g = torch.Generator().manual_seed(seed)
    mk = lambda n: torch.rand(B, H, n, D, generator=g, dtype=torch.float64) * 2 - 1
    return mk(lq), mk(lk), mk(lk)


def documents(lk, lens):
    doc = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))
    assert doc.numel() == lk
    return doc


def close(c, got, want, atol, what):
    """|got - want| <= atol everywhere; equal infinities agree; NaN fails."""
    both_inf = torch.isinf(got) & torch.isinf(want) & (torch.sign(got) == torch.sign(want))
    err = torch.where(both_inf, torch.zeros_like(got), (got - want).abs())
    bad = int((~(err <= atol)).sum())
    bound = f"{atol:g}" if isinstance(atol, float) else "the tolerance"
    c.expect(bad == 0, f"{what}: {bad} of {err.numel()} beyond {bound}, max err "
                       f"{float(err.nan_to_num(float('inf')).max()):.2e}")


def check_against_sdpa(c):
    for (B, H, lq, lk) in ((2, 3, 130, 130), (1, 4, 70, 130), (1, 6, 130, 70)):
        q, k, v = inputs(B, H, lq, lk, 32, seed=lq + lk)
        doc = documents(lk, [1, 0, lk // 2 - 1, 0, lk - lk // 2])
        table = torch.rand(H, 13, dtype=torch.float64) * 2 - 1
        for spec in SPECS:
            o, lse = fx.flex(q, k, v, spec, doc, table)
            want, want_lse = fx.sdpa_explicit(q, k, v, spec, doc, table)
            close(c, o, want, 1e-12, f"{spec} B={B} H={H} Lq={lq} Lk={lk}: flex_attention O")
            close(c, lse, want_lse, 1e-12, f"{spec} Lq={lq} Lk={lk}: flex_attention LSE")
            if lq > lk and fx.parse_spec(spec)[0] != "rel_bias" and spec != "prefix_lm:p=50":
                empty = lq - lk  # queries before the first key see none: 0 and -inf
                c.expect(bool((o[:, :, :empty] == 0).all()) and
                         bool(torch.isneginf(lse[:, :, :empty]).all()),
                         f"{spec}: rows that see no key give 0 and LSE -inf")


def check_alibi_slopes(c):
    want = {8: [2.0 ** -(i + 1) for i in range(8)],
            3: [2.0 ** -4, 2.0 ** -8, 2.0 ** -2],
            6: [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3],
            12: [2.0 ** -(i + 1) for i in range(8)] + [2.0 ** -(k + 0.5) for k in range(4)]}
    for H, slopes in want.items():
        got = fx.alibi_slopes(H)
        c.expect(all(abs(a - b) <= 1e-15 * b for a, b in zip(got, slopes)) and len(got) == H,
                 f"ALiBi slopes for H={H}: {got} (want {slopes})")


def check_block_mask(c):
    from torch.nn.attention.flex_attention import create_block_mask
    for lq, lk in ((192, 192), (64, 256), (256, 128)):
        doc = documents(lk, [10, 0, lk - 70, 60])
        table = torch.zeros(2, 13, dtype=torch.float64)
        for spec in SPECS:
            mask_mod, _ = fx.modification(spec, 2, lq, lk, doc, table)
            if mask_mod is None:
                continue
            bm = create_block_mask(mask_mod, None, None, lq, lk, device="cpu", BLOCK_SIZE=64)
            mask, _ = fx.explicit_mask_and_bias(spec, 2, lq, lk, doc, table)
            full, partial = fx.tiles(mask)
            got_full = [bm.full_kv_indices[0, 0, i, :n].tolist()
                        for i, n in enumerate(bm.full_kv_num_blocks[0, 0].tolist())]
            got_part = [bm.kv_indices[0, 0, i, :n].tolist()
                        for i, n in enumerate(bm.kv_num_blocks[0, 0].tolist())]
            c.expect(got_full == full and got_part == partial,
                     f"{spec} Lq={lq} Lk={lk}: FlexAttention's BlockMask equals the mask's tiles "
                     f"(full {got_full} / {full}, partial {got_part} / {partial})")


def check_rope(c):
    x = torch.rand(3, 40, 16, dtype=torch.float64) * 2 - 1
    pos = torch.arange(40) * 7 + 3
    got = fx.rope(x, pos, base=500.0)
    inv = torch.tensor([500.0 ** (-2.0 * i / 16) for i in range(8)], dtype=torch.float64).float()
    angle = (pos.float().unsqueeze(-1) * inv).double()
    z = torch.complex(x[..., :8], x[..., 8:]) * torch.exp(1j * angle)  # (x1 + i x2) e^(i theta)
    want = torch.cat([z.real, z.imag], dim=-1)
    close(c, got, want, 1e-12, "RoPE rotate-half equals the complex-number rotation")
    q, k = x[:1], x[1:2]
    s0 = fx.rope(q, pos) @ fx.rope(k, pos).transpose(-1, -2)
    s1 = fx.rope(q, pos + 5) @ fx.rope(k, pos + 5).transpose(-1, -2)
    close(c, s1, s0, 1e-4, "RoPE scores depend on relative positions only (fp32 angles)")


def check_bench_peers(c):
    _b = importlib.util.spec_from_file_location("bench_gpu", os.path.join(HERE, "..", "bench_gpu.py"))
    bench = importlib.util.module_from_spec(_b)
    _b.loader.exec_module(bench)
    for spec in bench.MODS:
        impls, check = bench.peers(torch, fx, dict(mod=spec, L=200, D=64), "cpu", check_rows=16)
        for name, fn in impls.items():
            if fn is None:
                c.expect(spec.startswith("softcap") and name == "sdpa_explicit",
                         f"bench_gpu.py: only softcap has no SDPA form ({spec}, {name})")
                continue
            ok, err = check(fn())
            c.expect(ok, f"bench_gpu.py's {name} on {spec} (CPU, L=200): error {err:.2e}")


# ---- the C program's dumps ---------------------------------------------------------------------

RUNS = [  # (spec, extra flags, B, H, Lq, Lk, D, dtype)
    ("causal", [], 2, 2, 70, 129, 64, "f16"),
    ("sliding_window:w=33", [], 1, 2, 129, 129, 64, "bf16"),
    ("prefix_lm:p=70", [], 1, 2, 130, 64, 64, "f16"),
    ("document", ["--doc-lens", "1,1,0,50,0,1,60,17"], 1, 2, 130, 130, 128, "f16"),
    ("alibi", [], 1, 3, 100, 100, 64, "bf16"),
    ("alibi", ["--rope", "--rope-base", "500", "--rope-offset", "2000"], 1, 6, 64, 129, 64, "f16"),
    ("softcap:cap=3", ["--amplitude", "6"], 1, 2, 129, 129, 64, "f16"),
    ("rel_bias:r=5", ["--rope"], 1, 2, 100, 70, 64, "bf16"),
]


def c_dump(c, program):
    for spec, extra, B, H, lq, lk, D, dtype in RUNS:
        what = f"C {spec} {' '.join(extra)} B={B} H={H} Lq={lq} Lk={lk} D={D} {dtype}"
        with tempfile.TemporaryDirectory() as out:
            cmd = [program, "--check-only", "--quiet", "--dump", out, "--mod", spec, "-B", str(B),
                   "-H", str(H), "--lq", str(lq), "--lk", str(lk), "-D", str(D), "--dtype",
                   dtype] + extra
            r = subprocess.run(cmd, capture_output=True, text=True)
            c.expect(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr.strip()}")
            if r.returncode != 0:
                continue
            t = {n[:-4]: torch.from_numpy(load_attn_tensor(os.path.join(out, n))).double()
                 for n in os.listdir(out) if n.endswith(".bin")}
        shape = lambda x, n: x.reshape(B, H, n, D)
        q, k, v = shape(t["q"], lq), shape(t["k"], lk), shape(t["v"], lk)
        doc = t["doc_ids"].long() if "doc_ids" in t else None
        table = t.get("bias_table")
        o, lse = fx.flex(q, k, v, spec, doc, table)
        close(c, shape(t["o_ref"], lq), o, 2e-6, f"{what}: flex_attention = C reference (O)")
        close(c, t["lse_ref"].reshape(B, H, lq), lse, 2e-5, f"{what}: ... (LSE)")
        want, _ = fx.sdpa_explicit(q, k, v, spec, doc, table)
        close(c, shape(t["o_ref"], lq), want, 2e-6, f"{what}: SDPA explicit = C reference")
        tol = 4e-3 if dtype == "f16" else 3e-2  # the kernels' outputs, rounded to the dtype
        for kernel in ("flex", "flex_no_block_mask", "flex_rope"):
            if "o_" + kernel in t:
                close(c, shape(t["o_" + kernel], lq), o, tol, f"{what}: C {kernel} output")
                close(c, t["lse_" + kernel].reshape(B, H, lq), lse, 1e-2 * (1 + lse.abs()),
                      f"{what}: C {kernel} LSE")
        slopes = torch.tensor(fx.alibi_slopes(H), dtype=torch.float64)
        close(c, t["alibi_slopes"], slopes, 1e-7 * slopes, f"{what}: C ALiBi slopes = the rule's")
        mask, _ = fx.explicit_mask_and_bias(spec, H, lq, lk, doc, table)
        full, partial = fx.tiles(mask if mask is not None else torch.ones(lq, lk, dtype=bool))
        nq = len(full)
        for b in range(B):
            got_full = [t["full_kv_indices"][b, i, :int(t["full_kv_num_blocks"][b, i])].long()
                        .tolist() for i in range(nq)]
            got_part = [t["kv_indices"][b, i, :int(t["kv_num_blocks"][b, i])].long().tolist()
                        for i in range(nq)]
            c.expect(got_full == full and got_part == partial,
                     f"{what}: C block mask of sequence {b} = the tiles of PyTorch's mask")
        if mask is not None:
            c.expect(int(t["tile_counts"][0].sum()) == int(mask.sum()),
                     f"{what}: C visible entries per tile add up to the mask's")
        if "--rope" in extra:
            base = float(extra[extra.index("--rope-base") + 1]) if "--rope-base" in extra else 1e4
            offset = int(extra[extra.index("--rope-offset") + 1]) if "--rope-offset" in extra else 0
            tdt = torch.float16 if dtype == "f16" else torch.bfloat16
            qr = fx.rope(shape(t["q_raw"], lq), torch.arange(lq) + offset + lk - lq, base)
            kr = fx.rope(shape(t["k_raw"], lk), torch.arange(lk) + offset, base)
            for name, mine, theirs in (("Q", qr, q), ("K", kr, k)):
                diff = (mine.to(tdt).double() - theirs).abs()
                ulp = theirs.abs().clamp(min=2.0 ** -14) * (2.0 ** -10 if dtype == "f16" else 2.0 ** -7)
                c.expect(bool((diff <= ulp).all()),
                         f"{what}: C RoPE'd {name} = PyTorch's RoPE of the dumped original "
                         f"(within one {dtype} ulp; max diff {diff.max().item():.1e})")


if __name__ == "__main__":
    sys.exit(main(__doc__, [check_against_sdpa, check_alibi_slopes, check_block_mask, check_rope,
                            check_bench_peers],
                  c_dump=c_dump, c_dump_help="the example's program (flex_attention_sim): run "
                                             "with --dump, its tensors compared"))
