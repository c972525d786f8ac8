#!/usr/bin/env python3
"""test_decode.py — checks of example 09's PyTorch reference (decode.py), and of the C program
against it.

  1. decode_attention (SDPA with enable_gqa) equals the formula written row by row, for GQA
     ratios 1, 3 and 8, one and four new tokens, an empty sequence;
  2. paged_gather over pages handed out in a shuffled order gives back the contiguous cache;
  3. split-KV combined by LSE equals unsplit for 1, 2, 5 splits and more splits than tokens;
  4. with k at least every token, the DSA selection is every token and sparse decoding is dense;
  4b. MLA: the absorbed form over one latent row (latent_decode, scale 1/sqrt(192)) equals the
     per-head attention it stands for (keys [W_UK c; k_rope] of 192, values W_UV c of 128);
  5. given the C program (--c-dump PATH, decode_<backend>), its dumped pools, block table and
     references: decode.py's paged decoding equals the C double-precision reference, its indexer
     and top-k give the selection the C kernels made, and sparse decoding over it equals the C
     reference over the accepted selection; with --latent, latent_decode equals the C reference.
"""
import importlib.util
import math
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "python"))
import attn_testing as T  # noqa: E402

_spec = importlib.util.spec_from_file_location("decode", os.path.join(HERE, "..", "decode.py"))
dec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dec)


def formula(q, k, v, lens):
    """O row by row: softmax(q . K^T / sqrt(D)) V over the tokens new token i sees."""
    B, Lq, H, D = q.shape
    g = H // k.shape[1]
    out = torch.zeros_like(q)
    for b in range(B):
        for i in range(Lq):
            n = max(int(lens[b]) - Lq + i + 1, 0) if lens[b] > 0 else 0
            for h in range(n and H):
                p = torch.softmax(k[b, h // g, :n] @ q[b, i, h] / math.sqrt(D), 0)
                out[b, i, h] = p @ v[b, h // g, :n]
    return out


def check_sdpa(c):
    for H, H_kv, Lq in ((4, 4, 1), (9, 3, 1), (8, 1, 4), (6, 2, 4)):
        lens = torch.tensor([23, 0, 64, 4])
        q = torch.randn(4, Lq, H, 32, dtype=torch.float64)
        k, v = (torch.randn(4, H_kv, 64, 32, dtype=torch.float64) for _ in range(2))
        c.close(dec.decode_attention(q, k, v, lens), formula(q, k, v, lens), 1e-12, 1e-12,
                f"SDPA enable_gqa = formula (H={H}, H_kv={H_kv}, Lq={Lq})")


def check_paged(c):
    P, lens = 16, torch.tensor([40, 0, 17])
    W = 3
    table = torch.randperm(3 * W).view(3, W)
    pages = torch.randn(3 * W, P, 2, 8, dtype=torch.float64)
    got = dec.paged_gather(pages, table, lens)
    want = torch.zeros_like(got)
    for b in range(3):
        for t in range(int(lens[b])):
            want[b, :, t] = pages[table[b, t // P], t % P]
    c.close(got, want, 0, 0, "paged_gather over out-of-order pages")


def check_split(c):
    lens = torch.tensor([33, 1, 0])
    q = torch.randn(3, 2, 6, 16, dtype=torch.float64)
    k, v = (torch.randn(3, 2, 33, 16, dtype=torch.float64) for _ in range(2))
    whole = dec.decode_attention(q, k, v, lens)
    for splits in (1, 2, 5, 40):
        o, _ = dec.combine(*dec.split_kv(q, k, v, lens, splits))
        c.close(o, whole, 1e-12, 1e-12, f"split-KV with {splits} splits, combined = unsplit")


def check_sparse_all(c):
    lens = torch.tensor([20, 7])
    B, Lq, H, H_kv, D, HI, DI, P = 2, 3, 4, 2, 16, 2, 8, 8
    table = torch.randperm(6).view(2, 3)
    kp, vp = (torch.randn(6, P, H_kv, D, dtype=torch.float64) for _ in range(2))
    kip = torch.randn(6, P, DI, dtype=torch.float64)
    q = torch.randn(B, Lq, H, D, dtype=torch.float64)
    qi, w = torch.randn(B, Lq, HI, DI, dtype=torch.float64), torch.rand(B, Lq, HI,
                                                                       dtype=torch.float64)
    sel = dec.select_topk(dec.index_scores(qi, kip, w, table, lens), lens, 20)
    c.expect(all(int((sel[b, i] >= 0).sum()) == max(int(lens[b]) - Lq + i + 1, 0)
                 for b in range(B) for i in range(Lq)), "k >= every cache: every token selected")
    c.close(dec.sparse_decode(q, kp, vp, table, lens, sel),
            dec.paged_decode(q, kp, vp, table, lens), 1e-12, 1e-12, "sparse over all = dense")


def check_latent(c):
    """DeepSeek-V3's MLA (128 + 64 dims per head for q.k, 128 for v, a 512 latent), small H."""
    B, Lq, H, P, lens = 3, 2, 4, 8, torch.tensor([19, 0, 5])
    f64 = dict(dtype=torch.float64)
    c_kv, k_rope = torch.randn(3, 19, 512, **f64), torch.randn(3, 19, 64, **f64)
    w_uk, w_uv = torch.randn(H, 128, 512, **f64) / 20, torch.randn(H, 128, 512, **f64) / 20
    q_nope, q_rope = torch.randn(B, Lq, H, 128, **f64), torch.randn(B, Lq, H, 64, **f64)
    want = torch.zeros(B, Lq, H, 128, **f64)  # per head: keys of 192, values of 128
    for b in range(B):
        for i in range(Lq):
            n = max(int(lens[b]) - Lq + i + 1, 0) if lens[b] > 0 else 0
            for h in range(n and H):
                k = torch.cat([c_kv[b, :n] @ w_uk[h].T, k_rope[b, :n]], -1)
                qh = torch.cat([q_nope[b, i, h], q_rope[b, i, h]])
                p = torch.softmax(k @ qh / math.sqrt(192), 0)
                want[b, i, h] = p @ (c_kv[b, :n] @ w_uv[h].T)
    table = torch.randperm(9).view(3, 3)  # the latent rows [c; k_rope], paged out of order
    pages = torch.zeros(9, P, 1, 576, **f64)
    for b in range(B):
        for t in range(int(lens[b])):
            pages[table[b, t // P], t % P, 0] = torch.cat([c_kv[b, t], k_rope[b, t]])
    o = dec.latent_decode(dec.absorb_query(q_nope, q_rope, w_uk), pages, table, lens)
    c.close(torch.einsum("bihc,hvc->bihv", o, w_uv), want, 1e-10, 1e-10,
            "MLA absorbed over one latent row = per-head attention with keys of 192")


def dumped(c, tool, args):
    """{name: tensor} of the C program's --dump with these flags (None if it failed)."""
    args = ["--check-only", "--quiet"] + args
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([tool, "--dump", out] + args, capture_output=True, text=True)
        c.expect(r.returncode == 0, f"{tool} {' '.join(args)}: exit {r.returncode} {r.stderr}")
        if r.returncode != 0:
            return None
        return {n[:-4]: torch.from_numpy(T.load_attn_tensor(os.path.join(out, n))).double()
                for n in os.listdir(out)}


def check_c(c, tool):
    t = dumped(c, tool, ["--cache-lens", "40,0,17,70", "--queries", "2", "-H", "6", "--kv-heads",
                         "2", "--page-size", "16", "--topk", "8", "--splits", "3"])
    if t is None:
        return
    lens, table = t["cache_seqlens"].long(), t["block_table"].long()
    o = dec.paged_decode(t["q"], t["k_pages"], t["v_pages"], table, lens)
    c.close(o, t["o_ref"], 1e-6, 1e-6, "decode.py's paged decoding = the C reference")
    # the C selection is a top-k of decode.py's scores (ties, e.g. the indexer's exact zeros
    # after ReLU, may go either way: example 05's tie rule), and equals decode.py's where the
    # k-th score is not tied
    scores = dec.index_scores(t["q_index"], t["ki_pages"], t["weights"], table, lens)
    k, csel = t["sel"].shape[-1], t["sel"].long()
    mine = dec.select_topk(scores, lens, k)
    right = untied = same = 0
    for b in range(len(lens)):
        for i in range(scores.shape[1]):
            seen = int((scores[b, i] > float("-inf")).sum())
            row = csel[b, i][csel[b, i] >= 0]
            kth = scores[b, i, :seen].sort(descending=True).values[min(k, seen) - 1] if seen else 0
            right += len(row) == min(k, seen) and bool((row.diff() > 0).all()) and \
                bool((scores[b, i, row] >= kth).all())
            tied = seen > k and int((scores[b, i, :seen] == kth).sum()) > 1
            untied += not tied
            same += not tied and torch.equal(mine[b, i], csel[b, i])
    n = scores.shape[0] * scores.shape[1]
    c.expect(right == n, f"the C selection is a top-{k} of decode.py's scores ({right}/{n} rows)")
    c.expect(same == untied, f"it is decode.py's where not tied ({same}/{untied} rows)")
    c.close(dec.sparse_decode(t["q"], t["k_pages"], t["v_pages"], table, lens, csel),
            t["o_sparse_ref"], 1e-6, 1e-6, "decode.py's sparse decoding = the C reference")
    # version 10's data: one latent pool, no V pool; decode.py's latent decoding = the C reference
    t = dumped(c, tool, ["--latent", "--cache-lens", "17,0,40", "--queries", "2", "-H", "4",
                         "--page-size", "7", "--splits", "2"])
    if t is None:
        return
    c.expect("v_pages" not in t and t["k_pages"].shape[-2:] == (1, 576) and
             t["o_ref"].shape[-1] == 512, "--latent dumps one latent pool, 576 wide; O 512 wide")
    o = dec.latent_decode(t["q"], t["k_pages"], t["block_table"].long(),
                          t["cache_seqlens"].long())
    c.close(o, t["o_ref"], 1e-6, 1e-6, "decode.py's latent decoding = the C reference")


if __name__ == "__main__":
    sys.exit(T.main(__doc__, [check_sdpa, check_paged, check_split, check_sparse_all,
                              check_latent],
                    c_dump=check_c, c_dump_help="the decode program (decode_sim)",
                    argv=["--c-dump", sys.argv[1]] if len(sys.argv) > 1 else []))
