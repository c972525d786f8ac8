#!/usr/bin/env python3
"""The recall probe (CTest quality.probe): attention.Probe's mass recall, set recall, trivial
queries and output error against the same measures written out query by query in plain Python
loops, on random q/k/v (3 query heads sharing one K/V head, 96 tokens, every row probed) for a
window pattern, the oracle top-k and a pattern with ties in the true attention; and the oracle's
summed scores, which the probe computes once per layer, equal to dense_rows(...).sum(0) for any
order of calls (other rows, another length, another layer's q). Exit 0 when every check passes."""
import math
import sys

import torch

import attention
from checks import check, finish

H, HKV, N, D = 3, 1, 96, 16


def by_hand(q, k, v, keep_fn):
    """Per query t: mass recall per head, set recall, trivial or not, o_sel - o per head."""
    scale = 1 / math.sqrt(D)
    mass, setr, trivial, err, ref = [], [], [], 0.0, 0.0
    for t in range(N):
        p = [torch.softmax(torch.tensor([float(q[h, t] @ k[0, j]) * scale
                                         for j in range(t + 1)], dtype=torch.float64), 0)
             for h in range(H)]
        P = sum(p)
        kept = [j for j in range(t + 1) if keep_fn(t, j)]
        trivial.append(len(kept) == t + 1)
        mass.append([float(p[h][kept].sum()) for h in range(H)])
        # the len(kept) keys of highest summed attention (ties: any of them counts)
        thr = sorted(P.tolist(), reverse=True)[len(kept) - 1] if kept else math.inf
        setr.append(min(len(kept), sum(1 for j in kept if P[j] >= thr)) / len(kept)
                    if kept else 0.0)
        if t % 4 == 0:
            for h in range(H):
                o = sum(float(p[h][j]) * v[0, j].double() for j in range(t + 1))
                m = float(p[h][kept].sum())
                o_sel = sum(float(p[h][j]) / m * v[0, j].double() for j in kept)
                err += float(((o_sel - o) ** 2).sum())
                ref += float((o ** 2).sum())
    nt = [t for t in range(N) if not trivial[t]]
    return dict(mass=sum(sum(mass[t]) / H for t in nt) / len(nt),
                set=sum(setr[t] for t in nt) / len(nt),
                mass_all=sum(sum(m) / H for m in mass) / N,
                nontrivial=len(nt), rel_err=math.sqrt(err / ref))


def main():
    torch.manual_seed(1)
    q, k, v = torch.randn(H, N, D), torch.randn(HKV, N, D), torch.randn(HKV, N, D)
    oracle_keep = attention.TopK(12).keep(0, q, k, None)
    cases = {"causal_window:w=20": lambda t, j: t - j < 20,
             "global:n=4+causal_window:w=9": lambda t, j: j < 4 or t - j < 9,
             "oracle:k=12": lambda t, j: bool(oracle_keep[t, j])}
    probe = attention.Probe({s: attention.make(s) for s in cases}, rows=N)
    out = probe(0, q, k, v)
    dense = attention.Dense()(0, q, k, v)
    check(torch.equal(out, dense), "the probe's output is dense attention's")
    got = probe.summary()
    for spec, fn in cases.items():
        want, g = by_hand(q, k, v, fn), got[spec]
        check(g["nontrivial"] == want["nontrivial"] and g["rows"] == N,
              f"{spec}: {g['nontrivial']} non-trivial queries of {g['rows']} "
              f"(by hand {want['nontrivial']} of {N})")
        for key in ("mass", "set", "mass_all", "rel_err"):
            gv = g[key][0] if isinstance(g[key], list) else g[key]
            check(abs(gv - want[key]) < 1e-5,
                  f"{spec}: {key} {gv:.6f}, by hand {want[key]:.6f}")
    check(got["oracle:k=12"]["set"][0] == 1.0, "the oracle's set recall is 1")

    # Ties: a key repeated, so that its copies have equal attention.
    k2 = k.clone()
    k2[:, 1::2] = k2[:, 0::2]
    probe = attention.Probe({"oracle:k=7": attention.make("oracle:k=7")}, rows=N)
    probe(0, q, k2, v)
    check(probe.summary()["oracle:k=7"]["set"][0] == 1.0,
          "ties in the true attention: the oracle's set recall is still 1")

    # The oracle's cached scores: any order of calls gives dense_rows(...).sum(0).
    scorer = attention.oracle_scorer(0, q, k, None)
    other = attention.oracle_scorer(1, q * 0.5, k, None)
    r1, r2 = torch.arange(0, N, 3), torch.arange(5, 40)
    ok = True
    for fn, qq, rows, n in ((scorer, q, r1, N), (scorer, q, r1, N), (scorer, q, r2, 40),
                            (other, q * 0.5, r2, 40), (scorer, q, r1, N), (scorer, q, r1, 64)):
        want = attention.dense_rows(qq, k, rows, n).sum(0)
        ok &= torch.equal(fn(rows, n), want)
    check(ok, "the oracle's scores: cached calls equal dense_rows(...).sum(0) in any order")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
