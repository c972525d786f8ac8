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
                                  attention's selection, shared by all heads of the layer).
                                  scorer(layer, q, k, h) -> rows(r, n): the scores [len(r), n] of
                                  query rows r against keys 0..n-1. oracle_scorer ranks keys by
                                  the true attention; indexer.scorer(...) by the trained indexer.

How it is computed: softmax(q k^T / sqrt(D)) over the kept keys of each query, in chunks of
CHUNK query rows; a chunk gathers only the key columns some of its rows keep (the union), so a
sparse pattern costs about its density of dense attention, and no [L, L] score matrix is ever
held (8,192 tokens: a chunk's scores are 9 x 256 x 8192 floats). A query that keeps no key
outputs 0 (the chapter's convention).

With record=True an attention also measures, per layer, against dense attention on its own q/k/v
(so errors of earlier layers are included): recall (per head: the share of the dense softmax mass
that the kept keys hold, averaged over queries) and the relative error ||o - o_dense|| / ||o_dense||
of the layer's attention output. Probe (below) measures many selections at once on the dense
model's q/k instead: every selection judged on the same attention.
"""
import importlib.util
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERNS_PY = os.path.join(ROOT, "examples", "04_sparse_patterns", "sparse_patterns.py")
LADDER_PY = os.path.join(ROOT, "examples", "06_custom_pattern", "ladder.py")
CHUNK = 256  # query rows per step
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


def causal_rows(rows, n):
    """Bool [len(rows), n]: key j <= query row."""
    return torch.arange(n).unsqueeze(0) <= rows.unsqueeze(1)


def scores(q, k):
    """Scaled logits [H, L, L] with each K head repeated for the query heads that share it."""
    rep = q.shape[0] // k.shape[0]
    return (q @ k.repeat_interleave(rep, 0).transpose(-2, -1)) / math.sqrt(q.shape[-1])


def softmax_rows(s, keep):
    """Softmax of s over the kept entries; rows that keep nothing are 0."""
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(p, nan=0.0)


def dense_rows(q, k, rows, n):
    """Causal softmax attention of query rows against keys 0..n-1: p [H, len(rows), n]."""
    rep = q.shape[0] // k.shape[0]
    s = q[:, rows] @ k[:, :n].repeat_interleave(rep, 0).transpose(-2, -1) / math.sqrt(q.shape[-1])
    return softmax_rows(s, causal_rows(rows, n))


def masked_attention(q, kk, vv, keep):
    """Softmax attention of q [H, C, D] over the kept columns of kk/vv [H, n, D] (keep [C, n] or
    [H, C, n]), gathering the columns some row keeps when they are few; rows that keep nothing
    are 0. (PyTorch's CPU kernel is faster with an additive float mask than with a bool one.)"""
    cols = keep.reshape(-1, keep.shape[-1]).any(0).nonzero().flatten()
    if cols.numel() == 0:
        return torch.zeros_like(q)
    if cols.numel() < 0.6 * keep.shape[-1]:
        kk, vv, keep = kk[:, cols], vv[:, cols], keep[..., cols]
    bias = torch.zeros(keep.shape).masked_fill_(~keep, float("-inf"))
    o = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=bias)
    return torch.where(keep.any(-1, keepdim=True), o, torch.zeros_like(o)).nan_to_num(0.0)


class Attention:
    """Base: subclasses say keep_rows(ctx, rows, n) -> bool [len(rows), n] (or [H, ...]): which of
    keys 0..n-1 query rows keep (causality is added here); prepare(layer, q, k, h) -> ctx runs once
    per layer call."""

    def __init__(self, record=False):
        self.record = record
        self.recall = {}  # layer -> list of [H] tensors (one per forward)
        self.rel_err = {}  # layer -> list of floats
        self.density = {}  # layer -> list of floats (kept entries / causal entries)
        self.kept = [0, 0]  # kept, causal entries over every layer and forward (density)

    def prepare(self, layer, q, k, h):
        return None

    def keep_rows(self, ctx, rows, n):
        raise NotImplementedError

    def keep(self, layer, q, k, h):
        """The whole mask [L, L] (small L only: tests and kernel_check)."""
        n = q.shape[1]
        return self.keep_rows(self.prepare(layer, q, k, h), torch.arange(n), n)

    def __call__(self, layer, q, k, v, h=None):
        n, heads = q.shape[1], q.shape[0]
        rep = heads // k.shape[0]
        kk, vv = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
        ctx = self.prepare(layer, q, k, h)
        out = torch.empty_like(q)
        kept = mass = err = ref = 0.0
        for r0 in range(0, n, CHUNK):
            r1 = min(n, r0 + CHUNK)
            rows = torch.arange(r0, r1)
            keep = self.keep_rows(ctx, rows, r1) & causal_rows(rows, r1)
            out[:, r0:r1] = masked_attention(q[:, r0:r1], kk[:, :r1], vv[:, :r1], keep)
            kept += float(keep.sum()) / (keep.shape[0] if keep.dim() == 3 else 1)
            if self.record:
                p = dense_rows(q, k, rows, r1)
                o_dense = p @ vv[:, :r1]
                mass = mass + (p * keep).sum(-1).sum(-1)  # [H]
                err += float((out[:, r0:r1] - o_dense).pow(2).sum())
                ref += float(o_dense.pow(2).sum())
        total = n * (n + 1) / 2
        self.kept[0] += kept
        self.kept[1] += total
        if self.record:
            self.recall.setdefault(layer, []).append(mass / n)
            self.rel_err.setdefault(layer, []).append(math.sqrt(err / ref) if ref else 0.0)
            self.density.setdefault(layer, []).append(kept / total)
        return out

    def density_seen(self):
        """Kept / causal entries over every layer and forward so far."""
        return self.kept[0] / self.kept[1] if self.kept[1] else float("nan")

    def recall_table(self):
        """[layers, heads]: mean recall over the forwards recorded."""
        return torch.stack([torch.stack(self.recall[i]).mean(0) for i in sorted(self.recall)])


class Dense(Attention):
    """Causal softmax attention (PyTorch's fused kernel when nothing is recorded)."""

    def keep_rows(self, ctx, rows, n):
        return torch.ones(len(rows), n, dtype=torch.bool)

    def __call__(self, layer, q, k, v, h=None):
        if self.record:
            return super().__call__(layer, q, k, v, h)
        n = q.shape[1]
        self.kept[0] += n * (n + 1) / 2
        self.kept[1] += n * (n + 1) / 2
        rep = q.shape[0] // k.shape[0]
        return torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0), is_causal=True)


class Pattern(Attention):
    """A pattern of example 04 by spec string; the spec is checked on construction (ValueError,
    one line, for an unknown or malformed spec). The mask of a length is built once."""

    def __init__(self, spec, record=False):
        super().__init__(record)
        patterns().parse_pattern(spec)
        self.spec = spec
        self._mask = {}

    def mask(self, n):
        if n not in self._mask:
            self._mask = {n: patterns().pattern_mask(self.spec, n, n, causal=True)}
        return self._mask[n]

    def prepare(self, layer, q, k, h):
        return self.mask(q.shape[1])

    def keep_rows(self, ctx, rows, n):
        return ctx[rows, :n]


class Predicate(Attention):
    """keep(i, j) on broadcast integer tensors: query rows i [L, 1], keys j [1, L]."""

    def __init__(self, fn, record=False):
        super().__init__(record)
        self.fn = fn

    def keep_rows(self, ctx, rows, n):
        return self.fn(rows.unsqueeze(1), torch.arange(n).unsqueeze(0)).bool()


def oracle_scorer(layer, q, k, h):
    """The true attention, summed over the layer's heads: top-k of it is the best selection of k
    keys shared by all heads (the target the indexer is trained to imitate)."""
    return lambda rows, n: _summed_rows(q, k, rows, n)


_last_summed = [None, None]  # (q, k, rows, n) -> the scores of the last call (Probe's oracles)


def _summed_rows(q, k, rows, n):
    """dense_rows(...).sum(0), kept for the next call with the same arguments: the recall probe
    asks it once per oracle selection of a layer, on the same rows."""
    key, hit = _last_summed
    if (key is not None and key[0] is q and key[1] is k and key[3] == n
            and torch.equal(key[2], rows)):
        return hit
    out = dense_rows(q, k, rows, n).sum(0)
    _last_summed[:] = [(q, k, rows, n), out]
    return out


def top_k_rows(score, rows, k):
    """Bool [len(rows), n]: per row, the k highest-scoring causal keys (all of them when fewer);
    among equal scores at the k-th place the lowest key indices (example 05's tie rule), so that
    the selection does not depend on how the rows were chunked."""
    n = score.shape[-1]
    cm = causal_rows(rows, n)
    s = score.masked_fill(~cm, float("-inf"))
    kk = min(k, n)
    thr = s.topk(kk, dim=-1).values[:, -1:]  # the k-th largest score of each row
    above = s > thr
    tied = (s == thr) & cm
    need = kk - above.sum(-1, keepdim=True)
    return (above | (tied & (tied.cumsum(-1) <= need))) & cm


def top_k_mask(score, k):
    """Bool [L, L]: per row, the k highest-scoring causal keys (all of them when fewer)."""
    return top_k_rows(score, torch.arange(score.shape[0]), k)


class TopK(Attention):
    """DeepSeek sparse attention's selection: per query the top-k keys of scorer's scores."""

    def __init__(self, k, scorer=oracle_scorer, record=False):
        super().__init__(record)
        self.k, self.scorer = k, scorer

    def prepare(self, layer, q, k, h):
        return self.scorer(layer, q, k, h)

    def keep_rows(self, ctx, rows, n):
        return top_k_rows(ctx(rows, n), rows, self.k)


# ----------------------------------------------------------------------------------------------
# FP8: the KV cache of example 09 (versions 11-12) and the indexer of example 05 (version 8)
# ----------------------------------------------------------------------------------------------

E4M3_MAX = 448.0  # e4m3's largest value


def e4m3_rows(x):
    """(codes as torch.float8_e4m3fn, scales [..., 1] float32) of x [..., D]: one scale per row
    of the last dimension, FlashMLA's rule as example 09's cache applies it per token and K/V
    head: s = 2^ceil(log2(max(amax / 448, 1e-4))), codes = e4m3(x / s) (PyTorch's conversion:
    nearest, ties to even). x / s is exact (s is a power of two) and lands in [-448, 448]."""
    x32 = x.to(torch.float32)
    r = (x32.abs().amax(-1, keepdim=True) / E4M3_MAX).clamp(min=1e-4)
    mant, exp = torch.frexp(r)  # r = mant * 2^exp, mant in [0.5, 1): 2^exp is at or above r
    s = torch.ldexp(torch.ones_like(r), exp - (mant == 0.5).int())
    return (x32 / s).to(torch.float8_e4m3fn), s


def fp8_cache(x):
    """x [..., D] as an FP8 cache holds it: e4m3_rows' codes times their scales, in x's dtype."""
    codes, s = e4m3_rows(x)
    return (codes.to(torch.float32) * s).to(x.dtype)


class DenseFP8(Dense):
    """Dense attention over an FP8 KV cache, emulated: K (after RoPE) and V rounded through e4m3
    with a scale per token and K/V head (fp8_cache) before attending; q is not quantised. What
    example 09's versions 11 (append) and 12 (attention) compute in an f32 session
    (tests/quality/test_fp8_emulation.py holds them to this on every layer of SmolLM2; a 16-bit
    session rounds K and V to 16 bits before quantising)."""

    def __call__(self, layer, q, k, v, h=None):
        return super().__call__(layer, q, fp8_cache(k), fp8_cache(v), h)


def sink_window(k, sinks=4):
    """The pattern of budget k per query: the first `sinks` tokens and the k - sinks latest."""
    return f"global:n={sinks}+causal_window:w={k - sinks}"


def make(spec, record=False):
    """An attention from a name: 'dense', 'dense-fp8' (over an FP8 KV cache, DenseFP8),
    'oracle:k=K', 'indexer:k=K' (the trained lightning indexer of indexer.py, its committed
    weights), 'indexer-fp8:k=K' (the same indexer in FP8, as example 05's version 8), or an
    example 04 pattern spec (ValueError, one line, when malformed)."""
    if spec == "dense":
        return Dense(record)
    if spec == "dense-fp8":
        return DenseFP8(record)
    for prefix in ("oracle:k=", "indexer:k=", "indexer-fp8:k="):
        if spec.startswith(prefix):
            value = spec[len(prefix):]
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"'{spec}': k must be a positive integer")
            if prefix == "oracle:k=":
                return TopK(int(value), record=record)
            import indexer
            return TopK(int(value), indexer.scorer(indexer.load(), fp8=prefix != "indexer:k="),
                        record=record)
    return Pattern(spec, record)


def top_k_density(k, n):
    """Kept / causal entries of a top-k selection on n tokens (query t keeps min(k, t + 1))."""
    kept = sum(min(k, t + 1) for t in range(n))
    return kept / (n * (n + 1) / 2)


class Probe(Dense):
    """Dense attention that also judges selections on the dense model's own q/k (every selection
    on the same attention; one dense forward for all of them). In each layer, `rows` query rows
    evenly spaced over the window: p the causal softmax per head, P = p summed over heads. For a
    selection keeping n_t of query t's t + 1 causal keys:

        mass recall   sum of p over the kept keys (per head; 1 when everything is kept)
        set recall    share of the n_t keys of highest P that the selection keeps (set recall@k
                      with k = n_t: for top-k selections, of the true per-query top-k)
        output error  ||o_sel - o|| / ||o|| over every 4th of the rows, o_sel the softmax over
                      the kept keys times V

    Queries that keep every key they see (n_t = t + 1: the first k queries of a top-k, the first
    w of a window) are trivial (recall 1): mass and set recall are averaged over the others;
    mass_all also counts them (the measure earlier tables reported)."""

    def __init__(self, selections, rows=256):
        super().__init__()
        self.selections, self.rows = selections, rows
        self.stats = {name: {} for name in selections}

    def __call__(self, layer, q, k, v, h=None):
        out = super().__call__(layer, q, k, v, h)
        n = q.shape[1]
        rows = torch.linspace(0, n - 1, min(self.rows, n)).round().long().unique()
        p = dense_rows(q, k, rows, n)  # [H, R, n]
        P = p.sum(0)
        ordered = P.sort(dim=-1, descending=True).values
        vv = v.repeat_interleave(q.shape[0] // v.shape[0], 0)
        er = slice(None, None, 4)  # the output error on every 4th probed row (its cost: p @ v)
        o = p[:, er] @ vv
        for name, sel in self.selections.items():
            keep = sel.keep_rows(sel.prepare(layer, q, k, h), rows, n) & causal_rows(rows, n)
            kept = keep.sum(-1)  # n_t
            trivial = kept >= rows + 1
            pk = p * keep
            mass = pk.sum(-1)  # [H, R]
            thr = ordered.gather(1, (kept - 1).clamp(min=0).unsqueeze(1))
            inter = (keep & (P >= thr)).sum(-1).minimum(kept)
            setr = torch.where(kept > 0, inter / kept.clamp(min=1), torch.zeros_like(mass[0]))
            o_sel = (pk[:, er] / mass[:, er].clamp_min(1e-30).unsqueeze(-1)) @ vv
            s = self.stats[name].setdefault(layer, dict(mass=0.0, set=0.0, mass_all=0.0, rows=0,
                                                        nontrivial=0, err=0.0, ref=0.0))
            nt = ~trivial
            s["mass"] += float(mass[:, nt].mean(0).sum()) if nt.any() else 0.0
            s["set"] += float(setr[nt].sum())
            s["mass_all"] += float(mass.mean(0).sum())
            s["rows"] += len(rows)
            s["nontrivial"] += int(nt.sum())
            s["err"] += float((o_sel - o).pow(2).sum())
            s["ref"] += float(o.pow(2).sum())
        return out

    def summary(self):
        """{selection: {mass, set, mass_all, rel_err: [per layer], nontrivial, rows}}; recall
        of a layer where every probed query was trivial is None."""
        out = {}
        for name, layers in self.stats.items():
            ls = [layers[i] for i in sorted(layers)]
            out[name] = dict(
                mass=[s["mass"] / s["nontrivial"] if s["nontrivial"] else None for s in ls],
                set=[s["set"] / s["nontrivial"] if s["nontrivial"] else None for s in ls],
                mass_all=[s["mass_all"] / s["rows"] for s in ls],
                rel_err=[math.sqrt(s["err"] / s["ref"]) if s["ref"] else 0.0 for s in ls],
                nontrivial=ls[0]["nontrivial"] if ls else 0, rows=ls[0]["rows"] if ls else 0)
        return out
