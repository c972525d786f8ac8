"""test_fp8_library.py — the model's library (decode_api.h) with the FP8 cache
(dec_session_use_fp8), against PyTorch: K and V quantised here with PyTorch's float8_e4m3fn
(a power-of-two scale per token and K/V head, FlashMLA's rule), attention over them in float64.

  - a prompt of 37 tokens and 3 decoding steps of 1, 2 and 1 new tokens, 9 heads over 3, D = 64,
    f32 session (the dequantised cache is exact in fp32): every output within 1e-5 of PyTorch's
    over the quantised cache, and further than that from attention over the unquantised cache
    (the cache is FP8: a 16-bit cache would pass the first and fail the second check)
  - a planted wrong scale in the PyTorch side (2x one token's) is caught by the same check
  - a DSA step and an FP8 session with an index-key cache are refused (exit 2 of the library)

  .venv/bin/python examples/09_decode/tests/test_fp8_library.py build/sim/examples/09_decode/libdecode_attn_sim.so
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "quality"))
import decode_kernels  # noqa: E402

H, H_KV, D, LAYERS = 9, 3, 64, 2


def quantise(x, plant=False):
    """x [..., D] float64 -> the dequantised values, per row: s = 2^ceil(log2(max(amax/448,
    1e-4))), code = e4m3(x / s) by PyTorch's conversion; plant: token 0's scale read back 2x."""
    x32 = x.to(torch.float32)
    r = torch.clamp(x32.abs().amax(-1, keepdim=True) / 448.0, min=1e-4)
    s = torch.pow(2.0, torch.ceil(torch.log2(r)))
    codes = (x32 / s).to(torch.float8_e4m3fn).to(torch.float64)
    if plant:  # the codes read back with token 0's (head 0's) scale doubled
        s = s.clone()
        s.view(-1)[0] *= 2.0
    return codes * s.to(torch.float64)


def attention(q, k, v, L, n):
    """q [n, H, D] new tokens at positions L - n .. L - 1 over k, v [L, H_kv, D] (float64)."""
    g = H // H_KV
    out = torch.empty(n, H, D, dtype=torch.float64)
    for i in range(n):
        seen = L - n + i + 1
        for h in range(H):
            s = (k[:seen, h // g] @ q[i, h]) / D ** 0.5
            out[i, h] = torch.softmax(s, 0) @ v[:seen, h // g]
    return out


def main(path):
    lib = decode_kernels.DecodeKernels(path)
    gen = torch.Generator().manual_seed(45)
    s = lib.session(layers=LAYERS, heads=H, kv_heads=H_KV, head_dim=D, max_tokens=64,
                    dtype="f32", page_size=8, kv_fp8=True)
    steps = [37, 1, 2, 1]
    total = sum(steps)
    k_all = torch.rand(LAYERS, total, H_KV, D, generator=gen, dtype=torch.float64) * 2 - 1
    v_all = torch.rand(LAYERS, total, H_KV, D, generator=gen, dtype=torch.float64) * 2 - 1
    k_all[..., 7] *= 50.0  # an outlier channel
    k_all, v_all = k_all.float().double(), v_all.float().double()
    failures, L = 0, 0
    for step, n in enumerate(steps):
        s.begin(n)
        L += n
        q = (torch.rand(n, H, D, generator=gen, dtype=torch.float64) * 2 - 1).float().double()
        for layer in range(LAYERS):
            k, v = k_all[layer, :L], v_all[layer, :L]
            s.append(layer, k[L - n:].numpy()[None], v[L - n:].numpy()[None])
            if step == 0:
                continue  # the prompt: appended only
            got = torch.from_numpy(s.attend(layer, q.numpy()[None])[0]).double()
            want = attention(q, quantise(k), quantise(v), L, n)
            exact = attention(q, k, v, L, n)
            planted = attention(q, quantise(k, plant=True), quantise(v), L, n)
            err, err16 = (got - want).abs().max().item(), (got - exact).abs().max().item()
            err_planted = (got - planted).abs().max().item()
            ok = err <= 1e-5 and err16 > 1e-5 and err_planted > 1e-5
            print(f"step {step} layer {layer}: {n} new token(s) over {L}: max |out - PyTorch over "
                  f"the FP8 cache| {err:.2g}, over the unquantised cache {err16:.2g}, over a "
                  f"planted wrong scale {err_planted:.2g}: {'ok' if ok else 'FAIL'}")
            failures += not ok
        s.end()
    s.begin(1)
    try:
        s.attend(0, np.zeros((1, 1, H, D), np.float32), mode="selection",
                 sel=np.zeros((1, 1), np.int32))
        print("FAIL: a selection step over the FP8 cache was not refused")
        failures += 1
    except decode_kernels.DecodeError as e:
        print(f"refused, as it must be: {e}")
    s.close()
    ix = lib.session(layers=1, heads=H, kv_heads=H_KV, head_dim=D, max_tokens=8, dtype="f32",
                     index_heads=4, index_dim=32)
    try:
        ix._check(ix.lib.dec_session_use_fp8(ix.s))
        print("FAIL: an FP8 cache beside an index-key cache was not refused")
        failures += 1
    except decode_kernels.DecodeError as e:
        print(f"refused, as it must be: {e}")
    ix.close()
    print("PASS" if failures == 0 else f"FAIL: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
