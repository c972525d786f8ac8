#!/usr/bin/env python3
"""test_hf_equivalence.py — the double-precision reference (deepseek_v4.py) against Hugging Face
transformers' own DeepseekV4Attention (transformers/models/deepseek_v4/modeling_deepseek_v4.py),
on the CPU, a tiny random configuration, the same weights and inputs, in float64:

  1. prefill without a cache, CSA and HCA layers, L = 23 (windows left incomplete at the end),
     L = 3 (below one window: no compressed entry), B = 2 and 1;
  2. prefill with a cache, then token-by-token decode: every step's output;
  3. prefill -> decode -> prefill -> decode, chunk lengths that split windows, so the compressor's
     buffer (and CSA's overlap half) is handed over between calls;
  4. index_topk above the number of compressed entries;
  5. cost_model.py's V4-Flash configuration equals DeepseekV4Config()'s defaults;
  6. the check can fail: the reference with the entry causal rule shifted by one token, and with
     the sink left out, and CSA over every entry instead of the top-k, all differ from Hugging Face;
     no comparison had a tie at the top-k boundary (where the selection order is not defined).

Needs transformers (installed by scripts/setup.sh --quality, quality/requirements.txt).
Prints PASS/FAIL lines and "N passed, M failed"; exit status 1 on a failed check.
"""
import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("deepseek_v4",
                                               os.path.join(HERE, "..", "deepseek_v4.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)
sys.path.insert(0, os.path.join(HERE, ".."))
import v4_generate as v4g  # noqa: E402

from transformers import DeepseekV4Config  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf  # noqa: E402

torch.manual_seed(0)
passed, failed = 0, 0
# Hugging Face computes RoPE's cos/sin, the compressor's gate softmax and the indexer's scores in
# float32 even for a float64 module (2^-24 relative each); the outputs here are O(1).
TOL = 5e-6

# Ties at the top-k boundary: the indexer's score is a sum of ReLUs, so an entry whose every head
# is negative scores exactly 0, and two such entries tie. The reference breaks ties toward the
# lower index; torch.topk promises no order. The test counts boundary ties (it must see none for
# the comparison to be meaningful) rather than depending on torch.topk's order.
boundary_ties = [0]
_topk = ref.topk_lowest_index


def _counting_topk(scores, k):
    chosen = _topk(scores, k)
    if 0 < k < len(scores):
        kth = min(float(scores[i]) for i in chosen)
        if sum(float(s) == kth for s in scores) > sum(float(scores[i]) == kth for i in chosen):
            boundary_ties[0] += 1
    return chosen


ref.topk_lowest_index = _counting_topk


def check(name, ok, detail=""):
    global passed, failed
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}")
    if ok:
        passed += 1
    else:
        failed += 1


def make_config(topk=3):
    return DeepseekV4Config(
        vocab_size=32, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, head_dim=16,
        q_lora_rank=12, partial_rotary_factor=0.5, o_groups=2, o_lora_rank=6, index_n_heads=8,
        index_head_dim=12, index_topk=topk, sliding_window=6,
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        moe_intermediate_size=8, n_routed_experts=4, num_experts_per_tok=2,
        mlp_layer_types=["moe", "moe"], rope_theta=10000.0, compress_rope_theta=160000.0)


def make_layer(config, idx):
    layer = hf.DeepseekV4Attention(config, idx).double().eval()
    g = torch.Generator().manual_seed(100 + idx)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
        if layer.compressor is not None and hasattr(layer.compressor, "indexer"):
            # positive head weights and 8 heads: a zero score (every head's ReLU at zero)
            # is rare, so no ties at the top-k boundary (checked below)
            w = layer.compressor.indexer.scorer.weights_proj.weight
            w.copy_(w.abs())
    return layer


weights_of, cfg_of = ref.weights_of, ref.cfg_of


hf_step = v4g.hf_attention


def ref_outputs(W, cfg, kind, x, start, S):
    """The reference's outputs for tokens start..start+S-1 of the history x (one call per
    token: the reference is causal by construction, so each decode step is a prefix)."""
    return ref.attention_layer(W, cfg, kind, x[:, :start + S], S=S)


def compare(name, a, b):
    err = (a - b).abs().max().item() if a.numel() else 0.0
    check(name, err <= TOL, f"max |diff| {err:.2e} over {tuple(a.shape)}")


def run_schedule(config, idx, kind, x, chunks, label):
    """Feed x to HF in the given chunks with one cache; compare every chunk's output."""
    layer = make_layer(config, idx)
    rotary = hf.DeepseekV4RotaryEmbedding(config)
    W, cfg = weights_of(layer), cfg_of(config)
    cache = DynamicCache(config=config)
    start, worst = 0, 0.0
    for S in chunks:
        got = hf_step(layer, rotary, x[:, start:start + S], start, cache, config.sliding_window)
        want = ref_outputs(W, cfg, kind, x, start, S)
        worst = max(worst, (got - want).abs().max().item())
        start += S
    check(label, worst <= TOL, f"max |diff| {worst:.2e}, chunks {chunks}")
    return layer


def main():
    config = make_config()
    kinds = {0: "csa", 1: "hca"}
    for idx, kind in kinds.items():
        assert isinstance(DynamicCache(config=config).layers[idx],
                          hf.DeepseekV4CSACache if kind == "csa" else hf.DeepseekV4HCACache)
        for B, L in ((2, 23), (1, 3)):
            layer = make_layer(config, idx)
            rotary = hf.DeepseekV4RotaryEmbedding(config)
            x = torch.randn(B, L, config.hidden_size, dtype=torch.float64)
            got = hf_step(layer, rotary, x, 0, None, config.sliding_window)
            want = ref.attention_layer(weights_of(layer), cfg_of(config), kind, x)
            compare(f"{kind} prefill, no cache, B={B} L={L}", got, want)

        x = torch.randn(2, 21, config.hidden_size, dtype=torch.float64)
        run_schedule(config, idx, kind, x, [5] + [1] * 16, f"{kind} prefill 5 then decode 16")
        run_schedule(config, idx, kind, x, [6, 1, 1, 1, 7, 1, 1, 3],
                     f"{kind} prefill -> decode -> prefill -> decode (buffer hand-over)")

    # index_topk above the number of compressed entries (at most 21 // 4 = 5 here)
    big = make_config(topk=9)
    x = torch.randn(1, 21, big.hidden_size, dtype=torch.float64)
    run_schedule(big, 0, "csa", x, [13, 1, 1, 6], "csa index_topk 9 > entries")

    # cost_model.py's V4-Flash configuration is transformers' default DeepseekV4Config.
    _cm = importlib.util.spec_from_file_location("cost_model",
                                                 os.path.join(HERE, "..", "cost_model.py"))
    cm = importlib.util.module_from_spec(_cm)
    _cm.loader.exec_module(cm)
    d = DeepseekV4Config()
    got = dict(layers=d.num_hidden_layers, csa=d.layer_types.count("compressed_sparse_attention"),
               hca=d.layer_types.count("heavily_compressed_attention"),
               sliding=d.layer_types.count("sliding_attention"), heads=d.num_attention_heads,
               head_dim=d.head_dim, window=d.sliding_window,
               m_csa=d.compress_rates["compressed_sparse_attention"],
               m_hca=d.compress_rates["heavily_compressed_attention"],
               index_heads=d.index_n_heads, index_dim=d.index_head_dim, topk=d.index_topk)
    check("cost_model.py's V4-Flash configuration is DeepseekV4Config()'s", got == cm.V4F,
          str({k: (v, cm.V4F.get(k)) for k, v in got.items() if cm.V4F.get(k) != v}))

    # The check can fail: a reference with a wrong causal rule or no sink differs.
    layer = make_layer(config, 1)
    rotary = hf.DeepseekV4RotaryEmbedding(config)
    x = torch.randn(1, 23, config.hidden_size, dtype=torch.float64)
    got = hf_step(layer, rotary, x, 0, None, config.sliding_window)
    W, cfg = weights_of(layer), cfg_of(config)
    saved = ref.visible_entries
    ref.visible_entries = lambda t, m, n: min(n, (t + 2) // m)  # sees a window one token early
    early = ref.attention_layer(W, cfg, "hca", x)
    ref.visible_entries = saved
    check("planted: entry visible one token early differs", (got - early).abs().max() > 1e-3)
    dense = ref.attention_layer(weights_of(make_layer(config, 0)), dict(cfg, topk=99), "csa", x)
    csa = hf_step(make_layer(config, 0), rotary, x, 0, None, config.sliding_window)
    check("planted: CSA over every entry (no top-k) differs", (csa - dense).abs().max() > 1e-3)
    W2 = dict(W, sinks=torch.full_like(W["sinks"], -1e30))
    nosink = ref.attention_layer(W2, cfg, "hca", x)
    check("planted: no sink differs", (got - nosink).abs().max() > 1e-3)

    check("no tie at a top-k boundary in the comparisons", boundary_ties[0] == 0,
          f"{boundary_ties[0]} rows with a tie straddling the k-th score")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
