#!/usr/bin/env python3
"""The quality toolkit's model checks (CTest quality.model): the GGUF loader (tensor shapes, a few
known values, the Q/K un-permutation), the weights kept in smollm.CACHE against the file, the
tokenizer round-trip, the dense perplexity of a short fixed window against its recorded value,
and the pluggable attention (a pattern that keeps every causal key and a top-k with k >= L equal
dense attention; dense attention's recall is 1).
Exit 0 when every check passes, 1 otherwise."""
import sys

import numpy as np
import torch

import attention
import smollm
import texts
from checks import check, finish

# Recorded on this project's machine (PyTorch 2.x, float32, x86-64): dense perplexity of Pride &
# Prejudice's tokens 1000..1127. Different BLAS builds round differently: a change of the model
# code moves it by far more than the tolerance.
RECORDED_PPL, PPL_TOL = 33.5724, 0.01
WINDOW = (1000, 1128)



def main():
    torch.set_num_threads(smollm.threads())
    meta, raw = smollm.read_gguf(cached=False)
    kept_meta, kept = smollm.read_gguf()  # what smollm.CACHE keeps for every other process

    def same(m, t):
        return m == meta and t.keys() == raw.keys() and all(np.array_equal(t[n], raw[n])
                                                             for n in raw)
    check(same(kept_meta, kept),
          "the cached weights are the GGUF's (same metadata, every tensor equal)")
    planted = dict(kept, **{"blk.7.ffn_up.weight": kept["blk.7.ffn_up.weight"].copy()})
    planted["blk.7.ffn_up.weight"][3, 5] = np.nextafter(planted["blk.7.ffn_up.weight"][3, 5],
                                                        np.float32(1))
    check(not same(kept_meta, planted) and not same(dict(kept_meta, **{"llama.block_count": 29}),
                                                    kept),
          "planted: a cache one ulp off in one weight, or with another layer count, differs")
    check(meta["llama.block_count"] == 30 and meta["llama.embedding_length"] == 576
          and meta["llama.attention.head_count"] == 9
          and meta["llama.attention.head_count_kv"] == 3
          and meta["llama.rope.freq_base"] == 100000.0, "metadata: 30 layers, 576, 9/3 heads, 1e5")
    shapes = {"token_embd.weight": (49152, 576), "blk.0.attn_q.weight": (576, 576),
              "blk.0.attn_k.weight": (192, 576), "blk.0.attn_v.weight": (192, 576),
              "blk.29.ffn_down.weight": (576, 1536), "blk.29.ffn_gate.weight": (1536, 576),
              "output_norm.weight": (576,)}
    check(all(raw[n].shape == s for n, s in shapes.items()) and len(raw) == 272,
          "tensor shapes (272 tensors; embedding tied to the output)")
    # Values read once from the file (Q8_0 embedding, Q4_1 blocks, dequantised by gguf.quants).
    check(np.allclose(raw["token_embd.weight"][0, :3], [-0.10654449, 0.03297806, 0.0481987])
          and np.allclose(raw["blk.0.attn_q.weight"][0, :3], [-0.09631348, 0.15734863,
                                                              -0.09631348]), "known values")
    model = smollm.SmolLM2(meta, raw)
    wq = model.blocks[0]["wq"]
    gq = torch.from_numpy(raw["blk.0.attn_q.weight"])
    check(torch.equal(wq[0], gq[0]) and torch.equal(wq[32], gq[1]) and torch.equal(wq[1], gq[2])
          and torch.equal(wq[64 + 32], gq[64 + 1]), "Q rows un-permuted (GGUF row 2i+1 -> i+32)")

    tok = smollm.tokenizer()
    text = texts.austen("Pride & Prejudice")
    ids = tok.encode(text).ids
    check(tok.decode(ids) == text, f"tokenizer round-trip on Pride & Prejudice ({len(ids)} tokens)")
    check(len(tok.encode("12345").ids) == 5, "digits are single tokens")
    fresh = smollm.tokenizer(cached=False)  # the one in smollm.CACHE against one rebuilt now
    check(fresh.encode(text).ids == ids and fresh.to_str() == tok.to_str(),
          "the cached tokenizer is the GGUF's (same JSON, same ids on Pride & Prejudice)")

    w = torch.tensor(ids[WINDOW[0]:WINDOW[1]])
    nll = model.token_nll(w)
    ppl = smollm.perplexity(nll)
    check(abs(ppl - RECORDED_PPL) < PPL_TOL,
          f"dense perplexity {ppl:.4f} (recorded {RECORDED_PPL} +- {PPL_TOL})")
    full = attention.Pattern(f"window:w={len(w)}", record=True)
    nll_full = model.token_nll(w, full)
    check(float((nll_full - nll).abs().max()) < 1e-4, "a pattern keeping every key equals dense")
    check(float(full.recall_table().min()) > 1 - 1e-6 and max(max(e) for e in full.rel_err.values())
          < 1e-5, "recall of dense attention is 1 and its output error 0")
    topk = attention.TopK(len(w), record=True)
    check(float((model.token_nll(w, topk) - nll).abs().max()) < 1e-4, "top-k with k >= L is dense")
    window = attention.Pattern("causal_window:w=16", record=True)
    nll_w = model.token_nll(w, window)
    r = window.recall_table()
    check(float(r.max()) < 1 and float(r.min()) > 0 and smollm.perplexity(nll_w) > ppl,
          f"a 16-key window loses mass (recall {float(r.mean()):.3f}) and perplexity "
          f"({smollm.perplexity(nll_w):.2f})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
