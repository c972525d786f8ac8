#!/usr/bin/env python3
"""flash2_fwd.py — PyTorch reference for Example 03 (FlashAttention-2 forward).

The loop order of flash2_fwd.cu written with PyTorch tensors, so that a reader can step through it
(in a debugger, or through the trace callback). One pass of the outer loop is one thread block of
the kernel; it owns Br = 64 query rows from start to finish:

    for each tile Q_i of Br query rows:                    one block (4 warps x 16 rows)
        m_i = -inf, l_i = 0, O_i = 0                        never leave the block
        n = keys the tile's last row may see                causal: i_last + Lk - Lq + 1
        for each tile K_j, V_j of Bc keys with j0 < n:      tiles above the diagonal: skipped
            S_ij  = scale * Q_i K_j^T                       [Br, Bc], masked entries -inf
            m_new = max(m_i, rowmax(S_ij))
            alpha = exp(m_i - m_new)                        rescales what was summed so far
            P_ij  = exp(S_ij - m_new)                       NOT divided by l
            l_i   = alpha * l_i + rowsum(P_ij)
            O_i   = alpha * O_i + P_ij V_j                  unnormalised
            m_i   = m_new
        O_i = O_i / l_i                                     once, after the last tile (deferred)
        LSE_i = m_i + log(l_i)                              rows that saw no key: 0 and -inf

Notation of Dao, "FlashAttention-2", 2023 (arXiv:2307.08691), Algorithm 1. Conventions shared
with the C harness (common/README.md, "Conventions"): layout [B, H, L, D]; scale defaults to
1/sqrt(D); causal is bottom-right aligned (query i sees key j iff j <= i + Lk - Lq).

Variable length (flash2_fwd_varlen): FlashAttention's varlen layout, as the C harness's
--seqlens: Q packed [total_q, H, D], K/V [total_k, H, D], cu_seqlens_q/k of B+1 prefix offsets
(sequence b owns rows cu[b] .. cu[b+1]-1, a zero-length sequence owns none), LSE [H, total_q].
Each sequence runs the same tile loops on its own rows, causality aligned per sequence, as the
kernel's blocks do (attn_seq_head_at in kernel_common.cuh).

dtype=torch.float16 / torch.bfloat16 emulates version 2 (fa2_mma): Q, K, V rounded to the 16-bit
type, S accumulated in fp32, P rounded to the 16-bit type before P V (the kernel packs P into
the A fragments of the tensor-core mma), O accumulated in fp32 and rounded once at the end.

Run:
  python flash2_fwd.py             a short demo: tiles visited with and without causal, errors
                                   against F.scaled_dot_product_attention, the fp16/bf16 emulation
  python flash2_fwd.py --all       every check: against SDPA and against example 01's naive
                                   reference in float64 (tail tiles, Lq != Lk, causal, D = 64,
                                   80, 128), the causal tile skipping, the fp16/bf16 emulation by
                                   FlashAttention's 2x rule, any tile size, varlen batches (with
                                   an empty sequence) against SDPA per sequence; runs
                                   tests/test_flash2_fwd.py
Exit status 0 when every check passes, 1 otherwise.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import reference_main, require  # noqa: E402

torch, F = require("torch", "torch.nn.functional", setup="--python")

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "test_flash2_fwd.py")
USAGE = "flash2_fwd.py [--all]   (--all: every check, by tests/test_flash2_fwd.py)"

BR = 64  # query rows per tile = one thread block (both versions of flash2_fwd.cu)
BC_FP32 = 32  # keys per K/V tile, version 1 (fa2_fp32): one key per lane
BC_MMA = 64  # keys per K/V tile, version 2 (fa2_mma)
LOWP = (torch.float16, torch.bfloat16)

# ----------------------------------------------------------------------------------------------
# The reference
# ----------------------------------------------------------------------------------------------


def visible_keys(i, lq, lk, causal):
    """Keys 0 .. n-1 are the ones query row i may see (attn_visible_keys in kernel_common.cuh).
    A tile of rows needs the keys below visible_keys(its last row): that row sees the most."""
    if not causal:
        return lk
    return min(lk, max(0, i + lk - lq + 1))


def flash2_fwd(q, k, v, causal=False, scale=None, dtype=None, br=BR, bc=None, trace=None):
    """Returns (O, LSE) for q [B,H,Lq,D], k/v [B,H,Lk,D]; LSE is [B,H,Lq] (natural log).

    dtype None: computes in the inputs' precision (float64 or float32), Bc = 32 as fa2_fp32.
    dtype float16/bfloat16: emulates fa2_mma (Bc = 64); O comes back in that dtype, LSE in fp32.
    trace, if given, is called after every K/V tile as trace(i0, j0, m_i, l_i, o_i) with the
    running state of query tile i0 (o_i unnormalised).
    """
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    lowp = dtype is not None
    if lowp:
        assert dtype in LOWP, f"dtype must be one of {LOWP}"
        # The kernel's inputs are 16-bit; all arithmetic below is fp32 on the rounded values.
        q, k, v = (t.to(dtype).float() for t in (q, k, v))
    bc = (BC_MMA if lowp else BC_FP32) if bc is None else bc
    acc = q.dtype  # accumulation type: fp32 in the emulation, else the inputs' type
    neg_inf = float("-inf")

    o = torch.zeros(q.shape, dtype=acc)
    lse = torch.full(q.shape[:-1], neg_inf, dtype=acc)
    for i0 in range(0, lq, br):  # ---- outer loop: one thread block per query tile ----
        q_i = q[..., i0:i0 + br, :]  # [B,H,rows,D]; the last tile may have fewer rows
        rows = torch.arange(i0, i0 + q_i.shape[-2])
        m_i = torch.full(q_i.shape[:-1], neg_inf, dtype=acc)  # [B,H,rows] running max
        l_i = torch.zeros(q_i.shape[:-1], dtype=acc)  # running sum of exp(S - m_i)
        o_i = torch.zeros(q_i.shape, dtype=acc)  # unnormalised output
        # Causal: stop at the last key the tile's last row i_last = i0 + Br - 1 sees, so the
        # tiles wholly above the diagonal are never visited (the kernel never loads them).
        kv_end = visible_keys(i0 + br - 1, lq, lk, causal)
        for j0 in range(0, kv_end, bc):  # ---- inner loop: K/V tiles streamed past ----
            k_j, v_j = k[..., j0:j0 + bc, :], v[..., j0:j0 + bc, :]
            s_ij = scale * (q_i @ k_j.transpose(-2, -1))  # [B,H,rows,cols], fp32 accumulation
            if causal:  # only the tiles crossing the diagonal have masked entries
                cols = torch.arange(j0, j0 + k_j.shape[-2])
                s_ij = s_ij.masked_fill(cols[None, :] > rows[:, None] + (lk - lq), neg_inf)
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))
            # A row that has seen no visible key has m_new = -inf: subtract 0 instead, so that no
            # exponent is -inf - (-inf) = NaN (its P_ij is exp(-inf) = 0, its alpha 1 or 0).
            m_use = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m_i - m_use)
            p_ij = torch.exp(s_ij - m_use.unsqueeze(-1))  # in [0, 1], not normalised
            l_i = alpha * l_i + p_ij.sum(dim=-1)  # l from the fp32 P, as the kernel does
            if lowp:  # the kernel packs P to 16 bits as the A operand of the P V mma
                p_ij = p_ij.to(dtype).float()
            o_i = alpha.unsqueeze(-1) * o_i + p_ij @ v_j
            m_i = m_new
            if trace is not None:
                trace(i0, j0, m_i, l_i, o_i)
        # Deferred normalisation: one division per row, after the last tile.
        seen = l_i > 0
        inv_l = torch.where(seen, 1.0 / torch.where(seen, l_i, torch.ones_like(l_i)), 0.0)
        o[..., i0:i0 + br, :] = o_i * inv_l.unsqueeze(-1)
        lse[..., i0:i0 + br] = torch.where(seen, m_i + torch.log(l_i), neg_inf)
    if lowp:
        return o.to(dtype), lse
    return o, lse


def flash2_fwd_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False, scale=None,
                      dtype=None, br=BR, bc=None):
    """Returns (O, LSE) for a packed batch: q [total_q,H,D], k/v [total_k,H,D], cu_seqlens_q/k
    lists of B+1 offsets; O is [total_q,H,D], LSE [H,total_q]. Sequence b is flash2_fwd on its
    own rows (moved to [1,H,L,D]); a sequence with no keys gives 0 and LSE -inf."""
    o = torch.zeros(q.shape, dtype=q.dtype if dtype is None else dtype)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"),
                     dtype=q.dtype if dtype is None else torch.float32)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = cu_seqlens_q[b], cu_seqlens_q[b + 1]
        k0, k1 = cu_seqlens_k[b], cu_seqlens_k[b + 1]
        if q1 == q0:  # an empty sequence: no block of the kernel visits it
            continue
        seq = lambda t, r0, r1: t[r0:r1].transpose(0, 1).unsqueeze(0)  # [1,H,L,D]
        o_b, lse_b = flash2_fwd(seq(q, q0, q1), seq(k, k0, k1), seq(v, k0, k1), causal=causal,
                                scale=scale, dtype=dtype, br=br, bc=bc)
        o[q0:q1] = o_b[0].transpose(0, 1)
        lse[:, q0:q1] = lse_b[0]
    return o, lse


def plain_lowp_attention(q, k, v, dtype, causal=False, scale=None):
    """A plain (untiled) implementation in the same precision, the yardstick of FlashAttention's
    error rule (attn_reference_lowp in common/src/reference.c): inputs in dtype, fp32 arithmetic,
    every stored intermediate — S, P = softmax(S), O — rounded to dtype."""
    lq, lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    r = lambda t: t.to(dtype).float()  # round to dtype, keep computing in fp32
    q, k, v = r(q), r(k), r(v)
    s = r(scale * (q @ k.transpose(-2, -1)))
    if causal:  # bottom-right aligned: key j visible iff j <= i + lk - lq
        s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isneginf(m), torch.zeros_like(m), m))
    l = e.sum(dim=-1, keepdim=True)
    p = r(torch.where(l > 0, e / torch.where(l > 0, l, torch.ones_like(l)), 0.0))
    return (p @ v).to(dtype)


# ----------------------------------------------------------------------------------------------
# Demo
# ----------------------------------------------------------------------------------------------


def visited_tiles(lq, lk, causal, br=BR, bc=BC_FP32):
    """The (i0, j0) tiles flash2_fwd visits, recorded by its trace callback (tiny D: only the
    loop structure matters here)."""
    seen = []
    q, k, v = torch.zeros(1, 1, lq, 1), torch.zeros(1, 1, lk, 1), torch.zeros(1, 1, lk, 1)
    flash2_fwd(q, k, v, causal=causal, br=br, bc=bc,
               trace=lambda i0, j0, *_: seen.append((i0, j0)))
    return seen


def demo():
    for bc in (BC_FP32, BC_MMA):
        full = len(visited_tiles(1024, 1024, False, bc=bc))
        causal = len(visited_tiles(1024, 1024, True, bc=bc))
        print(f"L=1024, Br={BR} Bc={bc}: K/V tiles visited {full} non-causal, {causal} causal "
              f"({causal / full:.2f})")
    torch.manual_seed(1)
    q, k, v = (torch.rand(2, 4, 300, 64) * 2 - 1 for _ in range(3))  # B=2 H=4 L=300 D=64
    for causal in (False, True):
        o, _ = flash2_fwd(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        print(f"fp32 vs F.scaled_dot_product_attention, B=2 H=4 L=300 D=64 causal={causal}: "
              f"max abs err {(o - want).abs().max().item():.2e}")
    for dtype in LOWP:
        q16, k16, v16 = (t.to(dtype).double() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(q16, k16, v16)  # float64 on the rounded inputs
        o, _ = flash2_fwd(q16, k16, v16, dtype=dtype)
        plain = plain_lowp_attention(q16, k16, v16, dtype)
        print(f"{str(dtype).replace('torch.', '')} emulation (fa2_mma): max abs err "
              f"{(o.double() - ref).abs().max().item():.2e}, plain same-precision "
              f"{(plain.double() - ref).abs().max().item():.2e}")


if __name__ == "__main__":
    reference_main(demo, TESTS, USAGE, __doc__)
