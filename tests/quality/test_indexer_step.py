#!/usr/bin/env python3
"""The lightning indexer (CTest quality.indexer_step): one Adam step of the dense warm-up lowers
the KL loss on a tiny batch; the loss is 0 when the indexer's distribution is the target; the
weights file round-trips (save, load: same scores within float16 rounding); the scores of query
rows computed in chunks (the scorer TopK uses) equal the whole matrix's; the training split gives
each novel its share of distinct, non-overlapping windows and holds the validation ones out; the
committed weights load as 30 indexers. Exit 0 when every check passes, 1 otherwise."""
import os
import sys
import tempfile

import torch

import indexer
import train_indexer
from checks import check, finish



def main():
    torch.manual_seed(0)
    n, rows = 48, torch.arange(0, 48, 3)
    h = torch.randn(n, 576)
    q, k = 3 * torch.randn(9, n, 64), torch.randn(3, n, 64)  # a peaked target
    ix = indexer.LightningIndexer()
    opt = torch.optim.Adam(ix.parameters(), lr=1e-4)
    before = indexer.train_step(ix, opt, h, q, k, rows)
    with torch.no_grad():
        after = float(indexer.kl_loss(ix(h, rows), indexer.target(q, k, rows), rows))
    check(after < before, f"one step lowers the KL loss: {before:.4f} -> {after:.4f}")
    p = indexer.target(q, k, rows)
    check(torch.allclose(p.sum(-1), torch.ones(len(rows))) and
          bool((p[torch.arange(n).unsqueeze(0) > rows.unsqueeze(1)] == 0).all()),
          "target: rows sum to 1, nothing on future keys")
    check(abs(float(indexer.kl_loss(torch.log(p.clamp_min(1e-30)), p, rows))) < 1e-5,
          "KL(p || p) = 0")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.npz")
        indexer.save([ix, ix], path)
        back = indexer.load(path)
        with torch.no_grad():
            a, b = ix(h), back[1](h)
        check(len(back) == 2 and float((a - b).abs().max()) <= 1e-2 * float(a.abs().max()),
              "weights file round-trip (float16)")
    whole = ix(h).detach()
    rows_fn = indexer.scorer([ix])(0, None, None, h)
    part = torch.cat([rows_fn(torch.arange(r, min(n, r + 20)), n) for r in range(0, n, 20)])
    check(torch.allclose(whole, part, atol=1e-5), "scores of row chunks = the whole matrix")
    novels = [(f"novel {i}", list(range(n_tok))) for i, n_tok in
              enumerate((40000, 33000, 41000, 95000))]
    train, val = train_indexer.split(novels, 2048, 52, 8)
    both = train + val
    check(len(set(both)) == 60 and not set(train) & set(val) and len(val) == 8
          and {d for d, _ in val} == {d for d, _ in train} and all(
              s % 2048 == 0 and s + 2048 <= len(dict(novels)[d]) for d, s in both),
          f"split: 52 training + 8 held-out windows, distinct, whole, every novel in both")
    if os.path.exists(indexer.WEIGHTS):
        w = indexer.load()
        check(len(w) == 30 and w[0].heads * w[0].dim == w[0].wq.shape[0],
              f"committed weights: {len(w)} indexers, H_I={w[0].heads}, D_I={w[0].dim}")
    else:
        check(False, f"committed weights {indexer.WEIGHTS} missing")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
