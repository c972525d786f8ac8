#!/usr/bin/env python3
"""The toolkit's FP8 KV cache (attention.DenseFP8: K and V through attention.fp8_cache, which the
window-set tables of examples 05 and 09 run) against example 09's kernels on a real model's
q/k/v (CTest quality.fp8_cache_real_qkv: the simulator's library).

SmolLM2 runs a window of Pride & Prejudice; in every one of its 30 layers the window's K and V
(after RoPE) are appended to the model's library (decode_api.h) with the FP8 cache
(dec_session_use_fp8: version 11 quantises, version 12 attends) as a prompt and NEW decoding
tokens, whose queries then attend over the cache. Checks, per layer:

  - f32 session: the kernels' output within 1e-5 of PyTorch's attention over attention.fp8_cache's
    K and V (the emulation), and further than that from attention over the unquantised K and V
  - a planted wrong scale in the emulation (token 0's K scales doubled) is caught by the same
    comparison
Printed, not checked: the f16 session's distance from the emulation (it rounds K and V to f16
before quantising, which moves some codes by one step) beside the FP8 error itself.

    python tests/quality/test_fp8_emulation.py --lib build/sim/examples/09_decode/libdecode_attn_sim.so
Exit 0 when every check passes, 1 otherwise."""
import argparse
import os
import sys

import torch

from checks import check, finish

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "quality"))
import attention  # noqa: E402
import decode_kernels  # noqa: E402
import smollm  # noqa: E402
import texts  # noqa: E402

TOKENS, NEW, START = 96, 3, 5000


def rows(x):
    """[H, n, D] (the model's layout) -> [1, n, H, D] (decode.h's), as numpy."""
    return x.transpose(0, 1)[None].contiguous().numpy()


def attend(q, k, v, first):
    """q [H, n, D] at positions first.. over k, v [Hkv, first + n, D], causal, float64."""
    rep = q.shape[0] // k.shape[0]
    kk, vv = (x.repeat_interleave(rep, 0).double() for x in (k, v))
    s = q.double() @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5
    pos = torch.arange(first, first + q.shape[1]).unsqueeze(1)
    s = s.masked_fill(torch.arange(k.shape[1]).unsqueeze(0) > pos, float("-inf"))
    return torch.softmax(s, -1) @ vv


def kernels(lib, dtype, q, k, v):
    """The library's FP8 cache: the first TOKENS - NEW tokens appended as a prompt, then one
    decoding step of NEW tokens attending over it; their outputs [H, NEW, D] float64."""
    first = k.shape[1] - NEW
    s = lib.session(layers=1, heads=q.shape[0], kv_heads=k.shape[0], head_dim=q.shape[2],
                    max_tokens=k.shape[1] + 16, dtype=dtype, page_size=16, kv_fp8=True)
    try:
        s.begin(first)
        s.append(0, rows(k[:, :first]), rows(v[:, :first]))
        s.end()
        s.begin(NEW)
        s.append(0, rows(k[:, first:]), rows(v[:, first:]))
        o = s.attend(0, rows(q[:, first:]))
        s.end()
    finally:
        s.close()
    return torch.from_numpy(o)[0].transpose(0, 1).double()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libdecode_attn_<backend>.so")
    args = ap.parse_args()
    torch.set_num_threads(smollm.threads())
    lib = decode_kernels.DecodeKernels(args.lib)
    model, tok = smollm.load(), smollm.tokenizer()
    ids = tok.encode(texts.austen("Pride & Prejudice")).ids[START:START + TOKENS]
    qkv = {}
    model.hidden(torch.tensor(ids), observe=lambda layer, h, q, k, v: qkv.__setitem__(
        layer, (q, k, v)))
    first = TOKENS - NEW
    worst = dict(emu=0.0, exact=float("inf"), planted=float("inf"), f16=0.0, fp8=0.0)
    for layer, (q, k, v) in sorted(qkv.items()):
        got = kernels(lib, "f32", q, k, v)
        kq, vq = attention.fp8_cache(k), attention.fp8_cache(v)
        emu = attend(q[:, first:], kq, vq, first)
        exact = attend(q[:, first:], k, v, first)
        codes, s = attention.e4m3_rows(k)
        s = s.clone()
        s[:, 0] *= 2.0  # token 0's K scales (every K/V head) read back doubled
        planted = attend(q[:, first:], (codes.float() * s), vq, first)
        got16 = kernels(lib, "f16", q, k, v)
        worst["emu"] = max(worst["emu"], (got - emu).abs().max().item())
        worst["exact"] = min(worst["exact"], (got - exact).abs().max().item())
        worst["planted"] = min(worst["planted"], (got - planted).abs().max().item())
        worst["f16"] = max(worst["f16"], (got16 - emu).abs().max().item())
        worst["fp8"] = max(worst["fp8"], (emu - exact).abs().max().item())
    print(f"{len(qkv)} layers, {NEW} new tokens over {TOKENS}: largest |kernels (f32) - "
          f"emulation| {worst['emu']:.2g}; smallest |kernels - attention over the unquantised "
          f"cache| {worst['exact']:.2g}; smallest |kernels - emulation with a planted wrong scale| "
          f"{worst['planted']:.2g}; f16 session: largest |kernels - emulation| {worst['f16']:.2g} "
          f"(the FP8 error itself: up to {worst['fp8']:.2g})")
    check(worst["emu"] <= 1e-5, "the f32 kernels over the FP8 cache = the emulation within 1e-5 "
          "in every layer")
    check(worst["exact"] > 1e-5, "and differ from attention over the unquantised cache in every "
          "layer (the cache is FP8)")
    check(worst["planted"] > 1e-5, "a planted wrong K scale in the emulation is caught in every "
          "layer")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
