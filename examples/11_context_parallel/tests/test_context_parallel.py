#!/usr/bin/env python3
"""test_context_parallel.py — checks of example 11's PyTorch reference (context_parallel.py):
ring attention (contiguous and zigzag shards) and the Ulysses all-to-all over 1 to 4 gloo
processes, causal and not, L = 37 (no rank count above 1 divides it; at 4 ranks a zigzag chunk
is 4 or 5 positions, and Ulysses' H = 3 leaves a rank without a head), gathered and compared in
double precision with scaled_dot_product_attention (the output) and logsumexp (the LSE) of the
whole problem in one process (and, for ring and zigzag, under a document mask and under a
sliding window of 6 keys: SDPA with the same mask); DeepSeek sparse attention across 1 to 4
processes (indexer keys all-gathered, the selected K/V fetched), its selection against torch.topk
on the whole problem's index scores and its output against SDPA over that selection; and the
LSE merge alone: splitting the keys anywhere and merging gives the unsplit result, in either
order."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "python"))
import attn_testing as T  # noqa: E402

cp = T.reference("context_parallel")


def check_merge(c):
    torch.manual_seed(1)
    q, k, v = (torch.rand(2, 5, 30, 8, dtype=torch.float64) for _ in range(3))
    pos = torch.arange(30)
    o, lse = cp.partial_attention(q, k, v, pos, pos, True)
    for cut in (0, 1, 17, 29, 30):
        a = cp.partial_attention(q, k[:, :, :cut], v[:, :, :cut], pos, pos[:cut], True)
        b = cp.partial_attention(q, k[:, :, cut:], v[:, :, cut:], pos, pos[cut:], True)
        for first, second, order in ((a, b, "a then b"), (b, a, "b then a")):
            om, lm = cp.merge(*first, *second)
            c.close(om, o, 1e-12, 0, f"merge at key {cut}, {order}: output")
            c.close(lm, lse, 1e-12, 0, f"merge at key {cut}, {order}: LSE")
    # the check sees a wrong merge: the two halves averaged instead of weighted by their LSEs
    a = cp.partial_attention(q, k[:, :, :17], v[:, :, :17], pos, pos[:17], True)
    b = cp.partial_attention(q, k[:, :, 17:], v[:, :, 17:], pos, pos[17:], True)
    wrong = torch.where(torch.isinf(b[1])[..., None], a[0], (a[0] + b[0]) / 2)
    c.expect((wrong - o).abs().max() > 1e-3, "a merge without the LSE weights differs from it")


def check_ranks(c):
    cases = [cp.case(s, causal) for s in ("ring", "zigzag", "ulysses") for causal in (False, True)]
    cases += [cp.case(s, True, docs=[5, 20, 1, 11]) for s in ("ring", "zigzag")]
    cases += [cp.case(s, True, window=6) for s in ("ring", "zigzag")]
    # DeepSeek sparse attention: its selection against torch.topk's (err_o is inf otherwise), its
    # output against SDPA over it; k = L: every visible key
    cases += [cp.case(s, True, B=2, dsa=5) for s in ("ring", "zigzag")]
    cases += [cp.case("zigzag", True, dsa=37)]
    for ranks in (1, 2, 3, 4):
        for cs, (err_o, err_l) in zip(cases, cp.run(ranks, cases, port=29611 + ranks)):
            what = (f"{cs.strategy}{' causal' if cs.causal else ''}"
                    f"{f' documents {cs.docs}' if cs.docs else ''}"
                    f"{f' window {cs.window}' if cs.window else ''}"
                    f"{f' DSA top-{cs.dsa}' if cs.dsa else ''}, {ranks} rank(s)")
            c.expect(err_o < 1e-12, f"{what}: max |O - SDPA| {err_o:.2e}")
            c.expect(err_l < 1e-12, f"{what}: max |LSE - logsumexp| {err_l:.2e}")


def check_dsa_planted(c):
    # the check sees a wrong selection: the first k visible positions instead of the best k (the
    # forked processes inherit the planted function)
    right = cp.select_topk
    cp.select_topk = lambda scores, q_pos, k: right(
        -torch.arange(scores.shape[-1], dtype=scores.dtype).expand_as(scores), q_pos, k)
    try:
        [(err_o, _)] = cp.run(3, [cp.case("zigzag", True, dsa=5)], port=29640)
    finally:
        cp.select_topk = right
    c.expect(err_o == float("inf"), "a selection of the first k keys fails the check")


if __name__ == "__main__":
    sys.exit(T.main(__doc__, [check_merge, check_ranks, check_dsa_planted]))
