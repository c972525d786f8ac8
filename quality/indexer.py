"""indexer.py — DeepSeek's lightning indexer for SmolLM2, trained with the dense warm-up
objective.

DeepSeek-V3.2-Exp (DeepSeek-AI, 2025, section 2.1) selects, per query token t, the top-k keys s of
an index score computed by a small "lightning indexer" from the layer's hidden states:

    I(t, s) = sum_j  w(t, j) * ReLU( q_I(t, j) . k_I(s) )        j = 1 .. H_I indexer heads

    q_I(t, j) = RoPE(Wq_j h_t),  k_I(s) = RoPE(Wk h_s),  w(t, j) = Ww_j h_t

(h: the layer's normed input, [L, 576] here; RoPE rotates the first rope_dim of the D_I dimensions,
base rope_base, rotate-half layout; the keys are shared by the indexer heads). Its dense warm-up
trains the indexer alone, the model frozen, to imitate the layer's attention: the target p(t, .)
is the layer's softmax attention summed over its heads and L1-normalised, and the loss is
KL(p(t, .) || softmax(I(t, .))) over the causal keys, averaged over queries.

Weights file (numpy .npz; float16 arrays, the rest scalars):
    layers, d_model, heads (H_I), dim (D_I), rope_dim, rope_base
    wq{i} [H_I * D_I, d_model]   layer i's query projection (rows: head j's D_I rows in turn)
    wk{i} [D_I, d_model]         key projection
    ww{i} [H_I, d_model]         head weights
    load(path) -> [LightningIndexer] (one per layer, float32); indexer(h) -> I [L, L];
    indexer.project(h) -> (q_index, k_index, weights) in example 05's index_scores layout
    scorer(indexers) -> attention.TopK's scorer; the committed file is WEIGHTS.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

np, torch = require("numpy", "torch", setup="--quality")

from smollm import rope, rope_tables

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "results", "indexer_smollm2.npz")


class LightningIndexer(torch.nn.Module):
    def __init__(self, d_model=576, heads=4, dim=32, rope_dim=16, rope_base=100000.0):
        super().__init__()
        self.heads, self.dim, self.rope_dim, self.rope_base = heads, dim, rope_dim, rope_base
        self.wq = torch.nn.Parameter(torch.randn(heads * dim, d_model) * d_model ** -0.5)
        self.wk = torch.nn.Parameter(torch.randn(dim, d_model) * d_model ** -0.5)
        self.ww = torch.nn.Parameter(torch.randn(heads, d_model) * d_model ** -0.5 / heads)

    def keys(self, h):
        """k_index [L, D_I]: the indexer's keys of every position (RoPE applied)."""
        cos, sin = rope_tables(h.shape[0], self.rope_dim, self.rope_base)
        r = self.rope_dim
        k = h @ self.wk.T
        return torch.cat([rope(k[:, :r], cos, sin), k[:, r:]], dim=-1)

    def queries(self, h, rows):
        """(q_index [T, H_I, D_I], weights [T, H_I]) of query rows (a tensor of positions), RoPE
        applied and 1/sqrt(D_I) folded into q_index (ReLU(c x) = c ReLU(x) for c > 0)."""
        cos, sin = rope_tables(int(rows.max()) + 1, self.rope_dim, self.rope_base)
        r = self.rope_dim
        hq = h[rows]
        q = (hq @ self.wq.T).view(-1, self.heads, self.dim)  # [T, H_I, D_I]
        q = torch.cat([rope(q[..., :r].transpose(0, 1), cos[rows], sin[rows]).transpose(0, 1),
                       q[..., r:]], -1)
        return q / math.sqrt(self.dim), hq @ self.ww.T

    def project(self, h, rows=None):
        """(q_index [T, H_I, D_I], k_index [L, D_I], weights [T, H_I]) of the query rows (all by
        default): I[t, s] = sum_j weights[t, j] * ReLU(q_index[t, j] . k_index[s]), the layout of
        example 05's index_scores."""
        rows = torch.arange(h.shape[0]) if rows is None else torch.as_tensor(rows)
        q, w = self.queries(h, rows)
        return q, self.keys(h), w

    @staticmethod
    def combine(q, k, w):
        """I [T, S] = sum_j w[t, j] ReLU(q[t, j] . k[s])."""
        return torch.einsum("th,ths->ts", w, torch.relu(torch.einsum("thd,sd->ths", q, k)))

    def forward(self, h, rows=None):
        """I [len(rows) or L, L]: index scores of the query rows (all by default) against every
        key (no causal mask here)."""
        q, k, w = self.project(h, rows)
        return self.combine(q, k, w)


def target(q, k, rows=None):
    """p [T, L]: the layer's causal attention of query rows (all by default), summed over heads and
    L1-normalised. q [H, L, D], k [Hkv, L, D]."""
    n = q.shape[1]
    rows = torch.arange(n) if rows is None else rows
    rep = q.shape[0] // k.shape[0]
    s = q[:, rows] @ k.repeat_interleave(rep, 0).transpose(-2, -1) / math.sqrt(q.shape[-1])
    keep = torch.arange(n).unsqueeze(0) <= rows.unsqueeze(1)
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), -1).sum(0)
    return p / p.sum(-1, keepdim=True)


def kl_loss(index, p, rows):
    """mean over rows of KL(p || softmax(I)) over the causal keys."""
    n = index.shape[1]
    keep = torch.arange(n).unsqueeze(0) <= rows.unsqueeze(1)
    logq = torch.log_softmax(index.masked_fill(~keep, float("-inf")), -1)
    logp = torch.log(p.clamp_min(1e-30))
    return torch.where(p > 0, p * (logp - logq), torch.zeros_like(p)).sum(-1).mean()


def train_step(indexer, opt, h, q, k, rows):
    """One Adam step of the warm-up on query rows of one window; returns the loss before it."""
    p = target(q, k, rows)
    loss = kl_loss(indexer(h, rows), p, rows)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())


def save(indexers, path, **extra):
    first = indexers[0]
    arrays = dict(layers=len(indexers), d_model=first.wq.shape[1], heads=first.heads,
                  dim=first.dim, rope_dim=first.rope_dim, rope_base=first.rope_base, **extra)
    for i, ix in enumerate(indexers):
        for name in ("wq", "wk", "ww"):
            arrays[f"{name}{i}"] = getattr(ix, name).detach().numpy().astype(np.float16)
    np.savez_compressed(path, **arrays)


def load(path=WEIGHTS):
    """[LightningIndexer] of a weights file (float32, inference mode)."""
    z = np.load(path)
    out = []
    for i in range(int(z["layers"])):
        ix = LightningIndexer(int(z["d_model"]), int(z["heads"]), int(z["dim"]),
                              int(z["rope_dim"]), float(z["rope_base"]))
        for name in ("wq", "wk", "ww"):
            getattr(ix, name).data = torch.from_numpy(z[f"{name}{i}"].astype(np.float32))
        out.append(ix.requires_grad_(False))
    return out


def fp8_scores():
    """Example 05's PyTorch FP8 indexer (sparse_attention.py, index_scores_fp8: q_I per row and
    head, k_I per key in e4m3 with power-of-two scales, as its version 8; loaded by file path)."""
    import attention
    return attention._load("sparse_attention_05", os.path.join(
        HERE, "..", "examples", "05_deepseek_sparse", "sparse_attention.py")).index_scores_fp8


def scorer(indexers, keys_transform=None, fp8=False):
    """attention.TopK's scorer: the layer's indexer scores of its normed input h, as a function
    rows(r, n) -> I [len(r), n] (the keys projected once per layer; keys_transform(ix, keys), if
    given, returns the keys to score with instead: rope_probe.py's ablations; fp8: the scores of
    example 05's FP8 indexer on the same q_I, k_I and weights, fp8_scores)."""
    combine = fp8_scores() if fp8 else None

    def score(layer, q, k, h):
        ix = indexers[layer]
        with torch.no_grad():
            keys = ix.keys(h)
            if keys_transform is not None:
                keys = keys_transform(ix, keys)

        def rows(r, n):
            with torch.no_grad():
                qi, w = ix.queries(h, r)
                if combine is not None:  # causality: TopK masks the keys past each row
                    return combine(qi, keys[:n], w, causal=False)
                return ix.combine(qi, keys[:n], w)
        return rows
    return score
