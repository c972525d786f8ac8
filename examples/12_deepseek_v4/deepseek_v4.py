#!/usr/bin/env python3
"""deepseek_v4.py — DeepSeek-V4's attention layer in double precision, written as the algorithm.

One layer of V4 attention (README.md, "What is computed") for a batch of token histories:

  compressed entries  every m tokens one entry, pooled with a per-channel softmax gate:
                        CSA (overlap): window w-1's "a" half + window w's "b" half (2m slots)
                        HCA:           slots = window w (m slots)
                      then RMSNorm and RoPE at the window's first position w*m;
  causal rule         query at position t sees entry w iff (w+1)*m <= t+1 (its window is complete);
  indexer (CSA only)  its own compressed keys (same rule, index_head_dim wide), score
                        I(t, w) = sum_h weight_h(t) * relu(q_h(t) . K_w) / sqrt(index_head_dim),
                      top-k over the visible entries (ties: the lower entry index first);
  attention           shared-KV MQA: one kv vector per token is both key and value; every head
                      attends to the sliding window (the last n_win tokens, itself included)
                      plus the compressed set (CSA: the top-k; HCA: every visible entry) under
                      one softmax whose denominator also holds the head's sink exp(sink_h);
  output              the rotary part of each head's output rotated back by its own position,
                      then the grouped output projection.

The functions take a dict of weights with the same names as Hugging Face's DeepseekV4Attention
(tests/test_hf_equivalence.py loads both from one random state). Everything is float64 torch.
Only what this layer computes is here: no MoE, no hyper-connections, no training.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--python")

DT = torch.float64


def rms_norm(x, weight, eps):
    """x / rms(x) * weight over the last axis (weight None: unweighted)."""
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def rope(x, positions, theta, rope_dim, inverse=False):
    """Interleaved RoPE on the LAST rope_dim channels of x (pairs 2i, 2i+1; frequency
    theta^(-2i/rope_dim)); x is [..., T, d] and positions [T]. inverse: rotate by -angle."""
    half = torch.arange(0, rope_dim, 2, dtype=DT) / rope_dim
    inv_freq = 1.0 / (theta**half)
    angle = positions.to(DT)[:, None] * inv_freq[None, :]  # [T, rope_dim/2]
    if inverse:
        angle = -angle
    cos, sin = torch.cos(angle), torch.sin(angle)
    out = x.clone()
    r = x[..., -rope_dim:]
    even, odd = r[..., 0::2], r[..., 1::2]
    rot = torch.empty_like(r)
    rot[..., 0::2] = even * cos - odd * sin
    rot[..., 1::2] = odd * cos + even * sin
    out[..., -rope_dim:] = rot
    return out


def compress(kv, gate, bias, m, overlap, norm_w, eps, theta, rope_dim):
    """Every complete window of m tokens -> one entry (the buffer's remainder emits nothing).

    kv, gate: [B, L, c] (c = 2d with overlap, else d) — the projections of every token so far;
    bias: [m, c], added to the gate of the window's slot j. Entry w pools, per channel, with
    weights softmax over its slots of (gate + bias):
      overlap (CSA): slots j < m hold window w-1's token j, first half of the channels ("a");
                     slots m + j hold window w's token j, second half ("b"); window -1 is empty;
      HCA:           slots j hold window w's token j.
    Then RMSNorm (weight norm_w) and RoPE at position w*m. Returns [B, L // m, d]."""
    B, L, c = kv.shape
    d = c // 2 if overlap else c
    n = L // m
    out = torch.zeros(B, n, d, dtype=DT)
    for w in range(n):
        cur = slice(w * m, (w + 1) * m)
        if overlap:
            vals = [kv[:, cur, d:]]
            logits = [gate[:, cur, d:] + bias[:, d:]]
            if w > 0:
                prev = slice((w - 1) * m, w * m)
                vals.insert(0, kv[:, prev, :d])
                logits.insert(0, gate[:, prev, :d] + bias[:, :d])
            vals, logits = torch.cat(vals, 1), torch.cat(logits, 1)
        else:
            vals, logits = kv[:, cur], gate[:, cur] + bias
        p = torch.softmax(logits, dim=1)  # over the slots, each channel on its own
        out[:, w] = (p * vals).sum(1)
    out = rms_norm(out, norm_w, eps)
    return rope(out, torch.arange(n) * m, theta, rope_dim)


def visible_entries(t, m, n):
    """How many of the n compressed entries the query at position t may see: entry w covers
    tokens w*m .. w*m+m-1 and is visible once the last of them has arrived."""
    return min(n, (t + 1) // m)


def topk_lowest_index(scores, k):
    """Indices of the k largest scores, ties broken toward the lower index."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    return sorted(order[:k])


def index_scores(W, cfg, x, q_res, positions):
    """CSA's lightning indexer over its own compressed keys: [B, S, n_entries] scores
    (n_entries from the whole history x; the query rows are the last S = len(positions))."""
    theta, rd, eps = cfg["compress_rope_theta"], cfg["rope_dim"], cfg["eps"]
    m, dI, nI = cfg["m_csa"], cfg["index_head_dim"], cfg["index_n_heads"]
    K = compress(x @ W["idx.kv_proj"].T, x @ W["idx.gate_proj"].T, W["idx.position_bias"], m,
                 True, W["idx.kv_norm"], eps, theta, rd)  # [B, n, dI]
    S = len(positions)
    xq, qr = x[:, -S:], q_res[:, -S:]
    q = (qr @ W["idx.q_b_proj"].T).view(x.shape[0], S, nI, dI).transpose(1, 2)  # [B, nI, S, dI]
    q = rope(q, positions, theta, rd)
    w = (xq @ W["idx.weights_proj"].T) / math.sqrt(nI)  # [B, S, nI]
    s = torch.relu(torch.einsum("bhsd,bnd->bhsn", q, K)) / math.sqrt(dI)
    return torch.einsum("bhsn,bsh->bsn", s, w)


def attention_layer(W, cfg, kind, x, S=None):
    """One V4 attention layer ("csa", "hca" or "sliding") over the history x [B, L, hidden]:
    the outputs of its last S tokens (all of them by default), [B, S, hidden]. Because every
    compressed entry is a function of the history alone, decoding token t is this with S = 1
    over x[:, :t+1] — the reference needs no cache."""
    B, L, _ = x.shape
    S = L if S is None else S
    H, d, rd, eps = cfg["heads"], cfg["head_dim"], cfg["rope_dim"], cfg["eps"]
    nwin = cfg["sliding_window"]
    theta = cfg["rope_theta"] if kind == "sliding" else cfg["compress_rope_theta"]
    pos = torch.arange(L - S, L)
    all_pos = torch.arange(L)

    q_res = rms_norm(x @ W["q_a_proj"].T, W["q_a_norm"], eps)  # [B, L, q_lora_rank]
    q = (q_res[:, -S:] @ W["q_b_proj"].T).view(B, S, H, d).transpose(1, 2)  # [B, H, S, d]
    q = rope(rms_norm(q, None, eps), pos, theta, rd)
    kv = rope(rms_norm(x @ W["kv_proj"].T, W["kv_norm"], eps), all_pos, theta, rd)  # [B, L, d]

    comp = None
    if kind in ("csa", "hca"):
        m = cfg["m_csa"] if kind == "csa" else cfg["m_hca"]
        comp = compress(x @ W["c.kv_proj"].T, x @ W["c.gate_proj"].T, W["c.position_bias"], m,
                        kind == "csa", W["c.kv_norm"], eps, theta, rd)  # [B, n, d]
        scores = index_scores(W, cfg, x, q_res, pos) if kind == "csa" else None

    out = torch.zeros(B, H, S, d, dtype=DT)
    for b in range(B):
        for i, t in enumerate(pos.tolist()):
            keys = [kv[b, s] for s in range(max(0, t - nwin + 1), t + 1)]  # the window
            if comp is not None:
                n_vis = visible_entries(t, m, comp.shape[1])
                if kind == "csa":
                    chosen = topk_lowest_index(scores[b, i, :n_vis], min(cfg["topk"], n_vis))
                else:
                    chosen = range(n_vis)
                keys += [comp[b, w] for w in chosen]
            Kt = torch.stack(keys)  # [n_keys, d]: keys and values alike
            logits = (q[b, :, i] @ Kt.T) / math.sqrt(d)  # [H, n_keys]
            sink = W["sinks"][:, None]
            mx = torch.maximum(logits.max(-1, keepdim=True).values, sink)
            p = torch.exp(logits - mx)
            denom = p.sum(-1, keepdim=True) + torch.exp(sink - mx)
            out[b, :, i] = (p / denom) @ Kt
    out = rope(out, pos, theta, rd, inverse=True)  # [B, H, S, d]

    g, r = cfg["o_groups"], cfg["o_lora_rank"]
    grouped = out.transpose(1, 2).reshape(B, S, g, H * d // g)
    Wa = W["o_a_proj"].view(g, r, H * d // g)
    y = torch.einsum("bsgi,gri->bsgr", grouped, Wa).reshape(B, S, g * r)
    return y @ W["o_b_proj"].T


def weights_of(layer):
    """The weight dict of the functions above from a Hugging Face DeepseekV4Attention module (the
    same names; the compressor's under c., its indexer's under idx.)."""
    sd = {k: v.detach() for k, v in layer.state_dict().items()}
    W = {k.replace(".weight", ""): v for k, v in sd.items() if not k.startswith("compressor")}
    for k, v in sd.items():
        if k.startswith("compressor.indexer."):
            k2 = k[len("compressor.indexer."):].replace("scorer.", "")
            W["idx." + k2.replace(".weight", "")] = v
        elif k.startswith("compressor."):
            W["c." + k[len("compressor."):].replace(".weight", "")] = v
    return W


def cfg_of(config):
    """The configuration dict of the functions above from a Hugging Face DeepseekV4Config."""
    return dict(heads=config.num_attention_heads, head_dim=config.head_dim,
                rope_dim=config.qk_rope_head_dim, eps=config.rms_norm_eps,
                sliding_window=config.sliding_window, rope_theta=config.rope_theta,
                compress_rope_theta=config.compress_rope_theta,
                m_csa=config.compress_rates["compressed_sparse_attention"],
                m_hca=config.compress_rates["heavily_compressed_attention"],
                index_head_dim=config.index_head_dim, index_n_heads=config.index_n_heads,
                topk=config.index_topk, o_groups=config.o_groups, o_lora_rank=config.o_lora_rank)


def demo():
    """A random CSA and HCA layer over 21 tokens: the outputs' shapes and norms."""
    g = torch.Generator().manual_seed(0)
    cfg = dict(heads=2, head_dim=16, rope_dim=8, eps=1e-6, sliding_window=6, rope_theta=1e4,
               compress_rope_theta=1.6e5, m_csa=4, m_hca=8, index_head_dim=12, index_n_heads=4,
               topk=2, o_groups=2, o_lora_rank=6)
    hid, r, d, dI = 24, 10, 16, 12
    shapes = {"q_a_proj": (r, hid), "q_a_norm": (r,), "q_b_proj": (2 * d, r), "kv_proj": (d, hid),
              "kv_norm": (d,), "o_a_proj": (12, d), "o_b_proj": (hid, 12), "sinks": (2,),
              "idx.kv_proj": (2 * dI, hid), "idx.gate_proj": (2 * dI, hid),
              "idx.position_bias": (4, 2 * dI), "idx.kv_norm": (dI,), "idx.q_b_proj": (4 * dI, r),
              "idx.weights_proj": (4, hid)}
    x = torch.randn(1, 21, hid, generator=g, dtype=DT)
    for kind, m in (("csa", 4), ("hca", 8)):
        c = 2 * d if kind == "csa" else d
        W = {k: torch.randn(v, generator=g, dtype=DT) * 0.5 for k, v in shapes.items()}
        W.update({"c.kv_proj": torch.randn(c, hid, generator=g, dtype=DT) * 0.5,
                  "c.gate_proj": torch.randn(c, hid, generator=g, dtype=DT) * 0.5,
                  "c.position_bias": torch.randn(m, c, generator=g, dtype=DT) * 0.5,
                  "c.kv_norm": torch.ones(d, dtype=DT)})
        y = attention_layer(W, cfg, kind, x)
        print(f"{kind}: output {tuple(y.shape)}, {21 // m} compressed entries, "
              f"norm {y.norm().item():.4f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(__doc__)
        sys.exit(0 if sys.argv[1] in ("-h", "--help") else 2)
    demo()
