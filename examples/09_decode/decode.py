"""decode.py — example 09's decoding step in PyTorch, reading like the algorithm: what each
version of decode.cu computes, in the layouts of decode.h.

    decode_attention(q, k, v, cache_seqlens)        SDPA with enable_gqa over a contiguous cache
    paged_gather(pages, block_table, cache_seqlens) the paged cache as a contiguous one
    paged_decode(q, k_pages, v_pages, block_table, cache_seqlens)
    split_kv(q, k, v, cache_seqlens, splits)        flash-decoding: partial O and LSE per split
    combine(o_parts, lse_parts)                     ... merged by their LSE
    index_scores(q_index, ki_pages, weights, block_table, cache_seqlens)   DSA's indexer
    select_topk(scores, cache_seqlens, k)           the k best tokens of each new token
    sparse_decode(q, k_pages, v_pages, block_table, cache_seqlens, sel)
    absorb_query(q_nope, q_rope, w_uk)              MLA: the query moved into the latent space
    latent_decode(q, latent_pages, block_table, cache_seqlens)   MLA over one latent row (v10)

Layouts (decode.h): q, o [B, Lq, H, D]; a contiguous cache [B, H_kv, L_cap, D]; pages
[num_pages, P, H_kv, D] with block_table [B, W] and cache_seqlens [B]; query head h reads K/V head
h // (H // H_kv). New token i of sequence b sees the tokens t < cache_seqlens[b] - Lq + i + 1
(bottom-right causal); a sequence with no token outputs 0. Run `python decode.py` for a demo:
a paged, grouped, speculative step against the plain formula, and split-KV against unsplit.
Latent (version 10, DeepSeek's MLA in FlashMLA's layout): q [B, Lq, H, 576], one latent row per
token in pages [num_pages, P, 1, 576] read as K, its first 512 columns as V; o [B, Lq, H, 512].
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--python")


def visible(lq, length):
    """Bool [Lq, L]: new token i sees token t (bottom-right causal)."""
    i = torch.arange(lq).unsqueeze(1)
    t = torch.arange(length).unsqueeze(0)
    return t < length - lq + i + 1


def decode_attention(q, k, v, cache_seqlens, scale=None):
    """O [B, Lq, H, D] of new queries q over a contiguous cache k, v [B, H_kv, L_cap, D]:
    per sequence, SDPA with enable_gqa (K/V head h // g for query head h) on its L_b tokens."""
    B, Lq, H, D = q.shape
    out = q.new_zeros(B, Lq, H, v.shape[-1])  # V may be narrower than K (latent: 512 of 576)
    for b in range(B):
        n = int(cache_seqlens[b])
        if n == 0:
            continue
        mask = visible(Lq, n)
        out[b] = torch.nn.functional.scaled_dot_product_attention(
            q[b].transpose(0, 1), k[b, :, :n], v[b, :, :n], attn_mask=mask, scale=scale,
            enable_gqa=True).transpose(0, 1)
    return out


def paged_gather(pages, block_table, cache_seqlens):
    """[B, H_kv, L_cap, D] from pages [num_pages, P, H_kv, D]: token t of sequence b is slot
    t % P of page block_table[b, t // P] (zeros past each sequence's tokens)."""
    P, L_cap = pages.shape[1], int(max(cache_seqlens))
    out = pages.new_zeros(len(cache_seqlens), pages.shape[2], L_cap, pages.shape[3])
    for b, n in enumerate(cache_seqlens):
        t = torch.arange(int(n))
        out[b, :, :int(n)] = pages[block_table[b, t // P].long(), t % P].transpose(0, 1)
    return out


def paged_decode(q, k_pages, v_pages, block_table, cache_seqlens, scale=None):
    return decode_attention(q, paged_gather(k_pages, block_table, cache_seqlens),
                            paged_gather(v_pages, block_table, cache_seqlens), cache_seqlens,
                            scale)


def attend_rows(q, k, v, keep, scale):
    """Softmax attention of q [R, D] over k, v [L, D] where keep [R, L]: O [R, D] and the
    natural-log LSE [R] (0 and -inf for a row that keeps nothing)."""
    s = (q @ k.T) * scale
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse.unsqueeze(-1)), nan=0.0)
    return p @ v, lse


def split_kv(q, k, v, cache_seqlens, splits, scale=None):
    """Flash-decoding's first kernel: the cache cut into `splits` slices of ceil(L_cap / splits)
    tokens; slice s of each row gives (O_s, LSE_s) over its own tokens. Returns o_parts
    [splits, B, Lq, H, D] and lse_parts [splits, B, Lq, H]."""
    B, Lq, H, D = q.shape
    g = H // k.shape[1]
    scale = scale or 1.0 / math.sqrt(D)
    chunk = -(-k.shape[2] // splits)
    o_parts = q.new_zeros(splits, B, Lq, H, D)
    lse_parts = q.new_full((splits, B, Lq, H), float("-inf"))
    for s in range(splits):
        for b in range(B):
            n = int(cache_seqlens[b])
            if s * chunk >= n:
                continue
            t = torch.arange(s * chunk, min((s + 1) * chunk, n))
            keep = visible(Lq, n)[:, t]
            for h in range(H):
                o, lse = attend_rows(q[b, :, h], k[b, h // g, t], v[b, h // g, t], keep, scale)
                o_parts[s, b, :, h], lse_parts[s, b, :, h] = o, lse
    return o_parts, lse_parts


def combine(o_parts, lse_parts):
    """The combine kernel: O = sum_s exp(LSE_s - LSE) O_s with LSE = log sum_s exp(LSE_s)."""
    lse = torch.logsumexp(lse_parts, 0)
    w = torch.nan_to_num(torch.exp(lse_parts - lse), nan=0.0)
    return (w.unsqueeze(-1) * o_parts).sum(0), lse


def index_scores(q_index, ki_pages, weights, block_table, cache_seqlens):
    """I [B, Lq, L_cap] = sum_j w(i, j) ReLU(q_I(i, j) . k_I(t)) (example 05's eq. 1) over the
    paged index keys ki_pages [num_pages, P, D_I]; -inf where token i does not see t."""
    B, Lq = q_index.shape[:2]
    ki = paged_gather(ki_pages.unsqueeze(2), block_table, cache_seqlens)[:, 0]  # [B, L, D_I]
    dots = torch.relu(torch.einsum("bijd,btd->bijt", q_index, ki))
    scores = torch.einsum("bij,bijt->bit", weights, dots)
    for b, n in enumerate(cache_seqlens):
        keep = visible(Lq, int(n))
        scores[b, :, :int(n)] = scores[b, :, :int(n)].masked_fill(~keep, float("-inf"))
        scores[b, :, int(n):] = float("-inf")
    return scores


def select_topk(scores, cache_seqlens, k):
    """sel [B, Lq, k]: the k best tokens each new token sees, ascending, then -1 (all of them
    when it sees fewer)."""
    B, Lq, _ = scores.shape
    sel = torch.full((B, Lq, k), -1, dtype=torch.int64)
    for b, n in enumerate(cache_seqlens):
        for i in range(Lq):
            seen = int(visible(Lq, int(n))[i].sum()) if int(n) > 0 else 0
            top = scores[b, i, :seen].topk(min(k, seen)).indices.sort().values
            sel[b, i, :len(top)] = top
    return sel


def sparse_decode(q, k_pages, v_pages, block_table, cache_seqlens, sel, scale=None):
    """Attention of each new token over its selected tokens only (shared by its heads)."""
    B, Lq, H, D = q.shape
    k = paged_gather(k_pages, block_table, cache_seqlens)
    v = paged_gather(v_pages, block_table, cache_seqlens)
    g = H // k.shape[1]
    scale = scale or 1.0 / math.sqrt(D)
    out = torch.zeros_like(q)
    for b in range(B):
        for i in range(Lq):
            t = sel[b, i][sel[b, i] >= 0].long()
            if len(t) == 0:
                continue
            for h in range(H):
                out[b, i, h] = torch.softmax((k[b, h // g, t] @ q[b, i, h]) * scale, 0) @ \
                    v[b, h // g, t]
    return out


MLA_SCALE = 1.0 / math.sqrt(128 + 64)  # DeepSeek-V3: q.k over 128 (no RoPE) + 64 (RoPE) dims


def absorb_query(q_nope, q_rope, w_uk):
    """MLA's absorbed query: head h's key is k_h(t) = [W_UK[h] c(t); k_rope(t)], so
    q_h . k_h(t) = (W_UK[h]^T q_nope[h]) . c(t) + q_rope[h] . k_rope(t) = q'_h . [c(t); k_rope(t)]
    with q'_h = [W_UK[h]^T q_nope[h]; q_rope[h]]. q_nope [..., H, 128], q_rope [..., H, 64],
    w_uk [H, 128, 512]: q' [..., H, 576]."""
    return torch.cat([torch.einsum("...hn,hnc->...hc", q_nope, w_uk), q_rope], -1)


def latent_decode(q, latent_pages, block_table, cache_seqlens, d_v=512, scale=MLA_SCALE):
    """MLA decode over one latent row per token (H_kv = 1): K is the row (576 wide), V its first
    d_v columns (the compressed c(t)); O [B, Lq, H, d_v] is still in the latent space (the model
    multiplies it by W_UV[h], then W_O, outside attention)."""
    k = paged_gather(latent_pages, block_table, cache_seqlens)  # [B, 1, L_cap, 576]
    return decode_attention(q, k, k[..., :d_v], cache_seqlens, scale)


def demo():
    torch.manual_seed(0)
    B, H, H_kv, D, P, Lq = 3, 9, 3, 64, 16, 2
    lens = torch.tensor([37, 0, 100])
    W = -(-int(lens.max()) // P)
    pages = torch.randperm(B * W)  # the pool's pages, out of order
    table = pages.view(B, W)
    k_pages, v_pages = torch.randn(B * W, P, H_kv, D), torch.randn(B * W, P, H_kv, D)
    q = torch.randn(B, Lq, H, D)
    o = paged_decode(q, k_pages, v_pages, table, lens)
    k, v = paged_gather(k_pages, table, lens), paged_gather(v_pages, table, lens)
    # the formula, one row at a time
    worst = 0.0
    for b in range(B):
        for i in range(Lq):
            n = max(int(lens[b]) - Lq + i + 1, 0) if lens[b] > 0 else 0
            for h in range(H):
                if n == 0:
                    ref = torch.zeros(D)
                else:
                    s = k[b, h // 3, :n] @ q[b, i, h] / math.sqrt(D)
                    ref = torch.softmax(s, 0) @ v[b, h // 3, :n]
                worst = max(worst, float((o[b, i, h] - ref).abs().max()))
    print(f"paged, grouped ({H} heads over {H_kv}), {Lq} new tokens: max |SDPA - formula| = "
          f"{worst:.2e}")
    for splits in (1, 3, 7, 20):
        o_split, _ = combine(*split_kv(q, k, v, lens, splits))
        print(f"split-KV, {splits:2d} splits, combined: max |split - unsplit| = "
              f"{float((o_split - o).abs().max()):.2e}")


if __name__ == "__main__":
    demo()
