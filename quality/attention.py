"""attention.py — the pluggable attention of smollm.SmolLM2: which keys each query keeps.

Every attention here is a callable attend(layer, q, k, v, h) -> o for the model's forward pass
(q [H, L, D], k/v [Hkv, L, D] after RoPE, h [L, d] the layer's normed input) and is causal:

    Dense()                       every earlier key (softmax attention as the model was trained)
    Pattern("window:w=64+global:n=4")
                                  a pattern of example 04 by its spec string: the mask is
                                  example 04's pattern_mask (the predicate its C kernels use),
                                  with causality
    Predicate(lambda i, j: ...)   your own rule on broadcast index tensors (query i, key j)
    TopK(k, scorer)               per query, the k keys with the highest score (DeepSeek sparse
                                  attention's selection, shared by all heads of the layer);
                                  scorer(layer, q, k, h) -> [L, L]. oracle_scorer ranks keys by the
                                  true attention; indexer.py's trained indexers are the other one.

With record=True an attention also measures, per layer, against dense attention on the same q/k/v:
recall (per head: the share of the dense softmax mass that the kept keys hold, averaged over
queries) and the relative error ||o - o_dense|| / ||o_dense|| of the layer's attention output.
"""
import importlib.util
import math
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERNS_PY = os.path.join(ROOT, "examples", "04_sparse_patterns", "sparse_patterns.py")
LADDER_PY = os.path.join(ROOT, "examples", "06_custom_pattern", "ladder.py")
_patterns = None


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def patterns():
    """Example 04's sparse_patterns.py as a module (loaded by file path), with example 06's own
    kind, the ladder, registered (its ladder.py). Used from it: parse_pattern(spec) (raises
    ValueError with a one-line reason) and pattern_mask(spec, lq, lk, causal) (the boolean
    [lq, lk] mask)."""
    global _patterns
    if _patterns is None:
        _patterns = _load("ladder_06", LADDER_PY).register(
            _load("sparse_patterns_04", PATTERNS_PY))
    return _patterns


def causal(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


def scores(q, k):
    """Scaled logits [H, L, L] with each K head repeated for the query heads that share it."""
    rep = q.shape[0] // k.shape[0]
    return (q @ k.repeat_interleave(rep, 0).transpose(-2, -1)) / math.sqrt(q.shape[-1])


def softmax_rows(s, keep):
    """Softmax of s over the kept entries; rows that keep nothing are 0."""
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(p, nan=0.0)


class Attention:
    """Base: subclasses say keep(layer, q, k, h) -> bool [L, L] (or [H, L, L]); causality is
    added here."""

    def __init__(self, record=False):
        self.record = record
        self.recall = {}  # layer -> list of [H] tensors (one per forward)
        self.rel_err = {}  # layer -> list of floats
        self.density = {}  # layer -> list of floats (kept entries / causal entries)

    def keep(self, layer, q, k, h):
        raise NotImplementedError

    def __call__(self, layer, q, k, v, h=None):
        n = q.shape[1]
        s = scores(q, k)
        cm = causal(n)
        keep = self.keep(layer, q, k, h) & cm
        rep = q.shape[0] // v.shape[0]
        vv = v.repeat_interleave(rep, 0)
        o = softmax_rows(s, keep) @ vv
        if self.record:
            dense = softmax_rows(s, cm)
            o_dense = dense @ vv
            kept = (dense * keep).sum(-1).mean(-1)  # [H]
            self.recall.setdefault(layer, []).append(kept)
            self.rel_err.setdefault(layer, []).append(
                float((o - o_dense).norm() / o_dense.norm()))
            self.density.setdefault(layer, []).append(
                float(keep.expand_as(s).sum() / (cm.sum() * s.shape[0])))
        return o

    def recall_table(self):
        """[layers, heads]: mean recall over the forwards recorded."""
        return torch.stack([torch.stack(self.recall[i]).mean(0) for i in sorted(self.recall)])


class Dense(Attention):
    def keep(self, layer, q, k, h):
        return causal(q.shape[1])


class Pattern(Attention):
    """A pattern of example 04 by spec string; the spec is checked on construction (ValueError,
    one line, for an unknown or malformed spec)."""

    def __init__(self, spec, record=False):
        super().__init__(record)
        patterns().parse_pattern(spec)
        self.spec = spec
        self._mask = {}

    def keep(self, layer, q, k, h):
        n = q.shape[1]
        if n not in self._mask:
            self._mask = {n: patterns().pattern_mask(self.spec, n, n, causal=True)}
        return self._mask[n]


class Predicate(Attention):
    """keep(i, j) on broadcast integer tensors: query rows i [L, 1], keys j [1, L]."""

    def __init__(self, fn, record=False):
        super().__init__(record)
        self.fn = fn

    def keep(self, layer, q, k, h):
        n = q.shape[1]
        return self.fn(torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)).bool()


def oracle_scorer(layer, q, k, h):
    """The true attention, summed over the layer's heads: top-k of it is the best selection of k
    keys shared by all heads (the target the indexer is trained to imitate)."""
    return softmax_rows(scores(q, k), causal(q.shape[1])).sum(0)


def top_k_mask(score, k):
    """Bool [L, L]: per row, the k highest-scoring causal keys (all of them when fewer)."""
    n = score.shape[-1]
    cm = causal(n)
    idx = score.masked_fill(~cm, float("-inf")).topk(min(k, n), dim=-1).indices
    return torch.zeros(n, n, dtype=torch.bool).scatter_(-1, idx, True) & cm


class TopK(Attention):
    """DeepSeek sparse attention's selection: per query the top-k keys of scorer's [L, L]."""

    def __init__(self, k, scorer=oracle_scorer, record=False):
        super().__init__(record)
        self.k, self.scorer = k, scorer

    def keep(self, layer, q, k, h):
        return top_k_mask(self.scorer(layer, q, k, h), self.k)


def sink_window(k, sinks=4):
    """The pattern of budget k per query: the first `sinks` tokens and the k - sinks latest."""
    return f"global:n={sinks}+causal_window:w={k - sinks}"


def make(spec, record=False):
    """An attention from a name: 'dense', 'oracle:k=K', or an example 04 pattern spec."""
    if spec == "dense":
        return Dense(record)
    if spec.startswith("oracle:k="):
        return TopK(int(spec[9:]), record=record)
    return Pattern(spec, record)
