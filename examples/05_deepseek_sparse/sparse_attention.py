#!/usr/bin/env python3
"""sparse_attention.py — DeepSeek Sparse Attention (DSA) in PyTorch, top to bottom.

The three stages of example 05, written for reading (the CUDA kernels are deepseek_sparse.cu):

    1. lightning indexer   I[t, s] = sum_j w[t, j] * relu(q_I[t, j] . k_I[s])
                           (1b: the same in FP8 e4m3 with per-row power-of-two scales)
    2. top-k selection     per query t, the k keys with the largest I[t, s] among those t sees
    3. sparse attention    softmax(scale * q_t K_sel^T) V_sel for every head, over the selected
                           keys only (one shared K/V head, as DeepSeek's MLA)

Definitions: DeepSeek-V3.2-Exp technical report, section 1, equations (1) and (2); the reference
inference code, inference/model.py (class Indexer) and inference/kernel.py (fp8_index).

Run:
  python sparse_attention.py            a demo: a planted-needle input, the recall of the selection
                                        (the share of each query's dense softmax mass that falls
                                        on its selected keys) against a random selection
  python sparse_attention.py --check    the checks of tests/test_deepseek_sparse.py
  PYTHONPATH=quality python sparse_attention.py --trained-indexer [--layer N] [--tokens L]
                                        [--topk K]
                                        the pipeline on a real model: one layer of SmolLM2-135M
                                        on Pride & Prejudice, selected by the lightning indexer
                                        trained for it (quality/README.md), against the oracle
                                        top-k and a sink + window selection of the same size
Exit status 0, 1 when a check fails, 2 on bad usage or a missing toolkit.
"""
import math
import struct
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--python")


# ----------------------------------------------------------------------------------------------
# 1. The lightning indexer
# ----------------------------------------------------------------------------------------------

def visible(Lq, Lk, causal):
    """[Lq, Lk] bool: query t sees key s. Causal is bottom-right aligned: s <= t + Lk - Lq."""
    if not causal:
        return torch.ones(Lq, Lk, dtype=torch.bool)
    t = torch.arange(Lq)[:, None]
    s = torch.arange(Lk)[None, :]
    return s <= t + (Lk - Lq)


def index_scores(q_index, k_index, weights, causal):
    """q_index [Lq, H_I, D_I], k_index [Lk, D_I] (ONE key per token, shared by the indexer heads),
    weights [Lq, H_I]  ->  I [Lq, Lk], -inf where the query may not look."""
    per_head = torch.einsum("thd,sd->ths", q_index, k_index)   # [Lq, H_I, Lk]
    scores = (weights[:, :, None] * per_head.relu()).sum(dim=1)  # ReLU, weighted sum over heads
    ok = visible(q_index.shape[0], k_index.shape[0], causal)
    return scores.masked_fill(~ok, float("-inf"))


# ----------------------------------------------------------------------------------------------
# 1b. The lightning indexer in FP8 (e4m3), as DeepSeek-V3.2 runs it (kernel version 8)
# ----------------------------------------------------------------------------------------------

E4M3_MAX = 448.0  # e4m3's largest value


def quantize_e4m3(x):
    """x [..., D] -> (codes [..., D] as torch.float8_e4m3fn, scales [...]): one scale per row, a
    power of two (DeepSeek's act_quant with scale_fmt ue8m0): a = max(amax |x|, 1e-4),
    s = 2^ceil(log2(a / 448)), codes = e4m3(x / s), rounded to nearest even."""
    a = x.abs().amax(dim=-1).float().clamp(min=1e-4)
    mant, exp = torch.frexp(a * (1.0 / E4M3_MAX))          # a / 448 = mant * 2^exp, mant in [0.5, 1)
    s = torch.ldexp(torch.ones_like(a), exp - (mant == 0.5).int())  # the power of two at or above
    return (x.float() / s[..., None]).to(torch.float8_e4m3fn), s


def index_scores_fp8(q_index, k_index, weights, causal):
    """index_scores on e4m3 codes: I[t, s] = k_scale[s] * sum_j (w[t, j] q_scale[t, j])
    * relu(q8[t, j] . k8[s]). The scales are positive, so they pass through the ReLU."""
    q8, q_scale = quantize_e4m3(q_index)                        # [Lq, H_I, D_I], [Lq, H_I]
    k8, k_scale = quantize_e4m3(k_index)                        # [Lk, D_I], [Lk]
    per_head = torch.einsum("thd,sd->ths", q8.double(), k8.double())  # exact: 4-bit significands
    w = weights.double() * q_scale.double()
    scores = (w[:, :, None] * per_head.relu()).sum(dim=1) * k_scale.double()[None, :]
    ok = visible(q_index.shape[0], k_index.shape[0], causal)
    return scores.masked_fill(~ok, float("-inf"))


def set_agreement(sel_a, sel_b):
    """The share of the keys selection a keeps that selection b keeps too (rows with keys)."""
    shared = kept = 0
    for a, b in zip(sel_a.tolist(), sel_b.tolist()):
        a = {x for x in a if x >= 0}
        shared += len(a & {x for x in b if x >= 0})
        kept += len(a)
    return shared / max(kept, 1)


# ----------------------------------------------------------------------------------------------
# 2. Top-k selection
# ----------------------------------------------------------------------------------------------

def select_topk(scores, k, causal):
    """scores [Lq, Lk] -> sel [Lq, k] int64: each query's top-k visible keys in ascending order,
    then -1. A query that sees n <= k keys takes all of them."""
    Lq, Lk = scores.shape
    n = visible(Lq, Lk, causal).sum(dim=1)                     # visible keys per query
    kk = min(k, Lk)
    top = scores.topk(kk, dim=1).indices                       # largest first
    sel = torch.full((Lq, k), -1, dtype=torch.long)
    for t in range(Lq):
        take = min(k, int(n[t]))
        # a query that sees fewer than k keys takes exactly the visible ones
        keys = top[t, :take] if take < int(n[t]) else torch.arange(int(n[t]))
        sel[t, :take] = keys.sort().values
    return sel


def order_key(x):
    """The float's bits as an unsigned integer in the same order as the floats: flip the sign bit
    of a positive number, every bit of a negative one."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (~u & 0xFFFFFFFF) if u & 0x80000000 else u | 0x80000000


def radix_select(row, k):
    """The radix select of the top-k kernel, one byte per pass, written out: returns the selected
    positions (ascending) and, per pass, (threshold bin, keys still needed inside it)."""
    keys = [order_key(float(x)) for x in row]
    prefix, known, need, trace = 0, 0, k, []
    for shift in (24, 16, 8, 0):
        hist = [0] * 256
        for key in keys:
            if key & known == prefix:
                hist[(key >> shift) & 255] += 1
        above = 0
        for b in range(255, -1, -1):                  # from the top bin down
            if above + hist[b] >= need:
                break
            above += hist[b]
        prefix |= b << shift
        known |= 255 << shift
        need -= above
        trace.append((b, need))
    # every key above the k-th largest (prefix), then the first `need` keys equal to it
    sel, ties = [], 0
    for pos, key in enumerate(keys):
        if key > prefix or (key == prefix and ties < need):
            ties += key == prefix
            sel.append(pos)
    return sel, trace


def selection_is_right(scores, sel, k, causal, tol=0.0):
    """The tie rule: min(k, n) distinct visible keys, ascending, each scoring >= the true k-th
    largest (minus tol), -1 after them. Returns (True, "") or (False, reason)."""
    n_vis = visible(*scores.shape, causal).sum(dim=1)
    for t in range(scores.shape[0]):
        n = int(n_vis[t])
        want = min(k, n)
        row = sel[t]
        if (row[want:] != -1).any():
            return False, f"query {t}: slots past {want} are not -1"
        keys = row[:want]
        if want and ((keys < 0).any() or (keys >= n).any()):
            return False, f"query {t}: a key outside the {n} visible ones"
        if want > 1 and (keys[1:] <= keys[:-1]).any():
            return False, f"query {t}: keys not strictly ascending"
        if n > k:
            kth = scores[t, :n].topk(k).values[-1]
            if (scores[t, keys] < kth - tol).any():
                return False, f"query {t}: a chosen key scores below the k-th largest"
    return True, ""


# ----------------------------------------------------------------------------------------------
# 3. Attention over the selected keys
# ----------------------------------------------------------------------------------------------

def sparse_attention(q, k, v, sel, scale=None):
    """q [H, Lq, D]; k, v [Lk, D] (one head shared by the H query heads); sel [Lq, topk].
    Returns O [H, Lq, D] and LSE [H, Lq] (natural log; -inf and O = 0 for a query with no key)."""
    H, Lq, D = q.shape
    scale = scale if scale is not None else 1.0 / math.sqrt(D)
    ok = sel >= 0                                                # [Lq, topk]
    idx = sel.clamp(min=0)
    k_sel, v_sel = k[idx], v[idx]                                # gather: [Lq, topk, D]
    s = torch.einsum("hqd,qkd->hqk", q, k_sel) * scale           # [H, Lq, topk]
    s = s.masked_fill(~ok[None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)                             # [H, Lq]
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)            # rows with no key: all 0
    return torch.einsum("hqk,qkd->hqd", p, v_sel), lse


def dense_attention(q, k, v, causal, scale=None):
    """The same problem, every visible key (PyTorch's SDPA, K/V broadcast to every head)."""
    H, Lq, D = q.shape
    mask = visible(Lq, k.shape[0], causal)
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.expand(H, -1, -1), v.expand(H, -1, -1), attn_mask=mask, scale=scale)


def pipeline(q, k, v, q_index, k_index, weights, topk, causal):
    """The whole of DSA: indexer, top-k, attention over the selection."""
    scores = index_scores(q_index, k_index, weights, causal)
    sel = select_topk(scores, topk, causal)
    out, lse = sparse_attention(q, k, v, sel)
    return out, sel, scores


def recall(q, k, sel, causal, scale=None):
    """Per head and query: the share of the DENSE softmax mass that falls on the selected keys
    (1 = the selection loses nothing). Returns [H, Lq]."""
    H, Lq, D = q.shape
    scale = scale if scale is not None else 1.0 / math.sqrt(D)
    s = torch.einsum("hqd,kd->hqk", q, k) * scale
    s = s.masked_fill(~visible(Lq, k.shape[0], causal)[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    chosen = torch.zeros(Lq, k.shape[0], dtype=torch.bool)
    for t in range(Lq):
        keys = sel[t][sel[t] >= 0]
        chosen[t, keys] = True
    return (p * chosen[None]).sum(dim=-1)


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------

def random_inputs(H, L, D, HI, DI, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.rand(*shape, generator=g, dtype=dtype) * 2 - 1  # noqa: E731
    q, k, v = r(H, L, D), r(L, D), r(L, D)
    q_index, k_index = r(L, HI, DI), r(L, DI)
    weights = r(L, HI) / math.sqrt(HI * DI)   # DeepSeek scales w by H_I^-1/2 (and D_I^-1/2)
    return q, k, v, q_index, k_index, weights


def planted_needles(H, L, D, HI, DI, needles, seed=0, strength=8.0):
    """Random inputs where query t of each (t, s) in needles is made to match key s, both in the
    indexer (q_I[t, j] along k_I[s] for every head, positive weights) and in attention
    (q_t along k_s for every head): a learned indexer that agrees with attention."""
    q, k, v, q_index, k_index, weights = random_inputs(H, L, D, HI, DI, seed)
    for t, s in needles:
        q_index[t] = strength * k_index[s] / k_index[s].norm()
        weights[t] = weights[t].abs()
        q[:, t] = strength * math.sqrt(D) * k[s] / k[s].norm()
    return q, k, v, q_index, k_index, weights


# ----------------------------------------------------------------------------------------------
# Demo
# ----------------------------------------------------------------------------------------------

def demo():
    H, L, D, HI, DI, topk = 4, 512, 64, 8, 32, 32
    g = torch.Generator().manual_seed(1)
    needles = [(t, int(torch.randint(0, t + 1, (1,), generator=g))) for t in range(64, L, 16)]
    q, k, v, q_index, k_index, weights = planted_needles(H, L, D, HI, DI, needles)
    out, sel, scores = pipeline(q, k, v, q_index, k_index, weights, topk, causal=True)
    dense = dense_attention(q, k, v, causal=True)
    rows = torch.tensor([t for t, _ in needles])
    rec = recall(q, k, sel, causal=True)[:, rows].mean().item()
    rand_sel = torch.stack([torch.randperm(t + 1, generator=g)[:topk].sort().values
                            if t + 1 > topk else torch.arange(topk).masked_fill(
                                torch.arange(topk) > t, -1) for t in range(L)])
    rec_rand = recall(q, k, rand_sel, causal=True)[:, rows].mean().item()
    err = (out[:, rows] - dense[:, rows]).abs().max().item()
    print(f"DSA demo: H={H} L={L} D={D}, indexer {HI} heads x {DI}, top-{topk}, causal")
    print(f"  {len(needles)} planted needles: recall of the indexer's selection {rec:.3f}, "
          f"of a random selection of the same size {rec_rand:.3f}")
    print(f"  on the needle rows, max |sparse - dense| = {err:.2e}")
    print(f"  attention work: {topk} of up to {L} keys per query "
          f"({100 * topk / ((L + 1) / 2):.1f}% of the causal average)")



# ----------------------------------------------------------------------------------------------
# On a real model: SmolLM2-135M and its trained lightning indexer (quality/)
# ----------------------------------------------------------------------------------------------

def sink_window_selection(n, topk, sinks=4):
    """[n, topk]: query t keeps the first `sinks` keys and the most recent ones, topk in all."""
    sel = torch.full((n, topk), -1, dtype=torch.long)
    for t in range(n):
        keys = sorted(set(range(min(sinks, t + 1))) |
                      set(range(max(0, t - (topk - sinks) + 1), t + 1)))
        sel[t, :len(keys)] = torch.tensor(keys)
    return sel


def on_smollm2(layer=12, tokens=512, topk=64, start=1000):
    """Recall of three selections of topk keys on one layer of SmolLM2 (mean over its 9 heads and
    the queries that see more than topk keys): the trained indexer's, the oracle's (the keys with
    the most dense attention mass, summed over heads: the best any shared selection can do), and
    4 sinks + the most recent keys. Returns {name: recall}."""
    import indexer
    import smollm
    import texts
    model, tok = smollm.load(), smollm.tokenizer()
    ids = tok.encode(texts.text("austen")).ids[start:start + tokens]
    seen = {}
    model.hidden(ids, observe=lambda i, h, q, k, v: seen.update(h=h, q=q, k=k) if i == layer
                 else None)
    h, q, k = seen["h"], seen["q"].double(), seen["k"].double()
    ixs = indexer.load(indexer.WEIGHTS)
    q_index, k_index, weights = (x.double() for x in ixs[layer].project(h))
    groups = q.shape[0] // k.shape[0]  # query heads per K/V head (GQA): each group shares a key
    rec = lambda sel: torch.cat([recall(q[g * groups:(g + 1) * groups], k[g], sel, True)  # noqa
                                 for g in range(k.shape[0])])
    n, scale = len(ids), 1.0 / math.sqrt(q.shape[-1])
    dense = torch.cat([torch.softmax((q[g * groups:(g + 1) * groups] @ k[g].T * scale).masked_fill(
        ~visible(n, n, True), float("-inf")), -1) for g in range(k.shape[0])])
    sels = {"trained indexer": select_topk(index_scores(q_index, k_index, weights, True), topk,
                                           True),
            "trained indexer, FP8": select_topk(index_scores_fp8(q_index, k_index, weights, True),
                                                topk, True),
            "oracle top-k": select_topk(dense.sum(0).masked_fill(
                ~visible(n, n, True), float("-inf")), topk, True),
            "4 sinks + window": sink_window_selection(n, topk)}
    rows = torch.arange(n) >= topk  # queries that see more than topk keys
    result = {name: rec(sel)[:, rows].mean().item() for name, sel in sels.items()}
    # how many of the fp16 indexer's keys the FP8 indexer selects too (same rows)
    result["FP8 = fp16 selection"] = set_agreement(sels["trained indexer"][rows],
                                                   sels["trained indexer, FP8"][rows])
    return result


def trained_indexer_main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="sparse_attention.py --trained-indexer")
    ap.add_argument("--layer", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--topk", type=int, default=64)
    a = ap.parse_args(argv)
    if not 0 <= a.layer < 30 or a.topk < 1 or a.tokens <= a.topk:
        ap.error("need 0 <= --layer < 30, --topk >= 1 and --tokens > --topk")
    try:
        result = on_smollm2(a.layer, a.tokens, a.topk)
    except ImportError as e:
        sys.exit(f"error: {e.name} not found: run with PYTHONPATH=quality (the quality toolkit, "
                 f"installed by scripts/setup.sh --quality)")
    except RuntimeError as e:  # the model or text package is missing
        sys.exit(f"error: {e}")
    print(f"SmolLM2-135M layer {a.layer}, {a.tokens} tokens of Pride & Prejudice, top-{a.topk}: "
          f"recall (share of the dense attention mass kept), mean over heads and queries; and the "
          f"share of the fp16 indexer's keys the FP8 indexer selects too")
    for name, r in result.items():
        print(f"  {name:22s} {r:.3f}")
    return result


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        import runpy
        import os
        here = os.path.dirname(os.path.abspath(__file__))
        test = os.path.join(here, "tests", "test_deepseek_sparse.py")
        sys.argv = [test] + [a for a in sys.argv[1:] if a != "--check"]
        runpy.run_path(test, run_name="__main__")
    elif "--trained-indexer" in sys.argv[1:]:
        trained_indexer_main([a for a in sys.argv[1:] if a != "--trained-indexer"])
    else:
        demo()
