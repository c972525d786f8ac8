#!/usr/bin/env python3
"""test_generate_v4.py — example 12's kernels (libdeepseek_v4_attn_sim.so, argument 1, through
v4_generate.py) against Hugging Face transformers' DeepseekV4 (float64, CPU), on a tiny random
configuration (v4_generate.tiny_config: 4 layers, CSA and HCA alternating, fp16 on the device):

  1. the kernels on one DeepseekV4Attention module's own weights and inputs (B = 2), against the
     module itself: prefill without a cache (L = 23: the last window incomplete; L = 3: below one
     window), a 5-token prefill then 16 decoding steps, and prefill -> decode -> prefill -> decode
     in chunks that split windows (the compressor's state handed over both ways); CSA and HCA;
  2. the generation loop itself: Hugging Face's token-by-token logits equal its full forward
     over the same tokens (no cache); no step's two largest logits are closer than twice the
     tolerance below;
  3. greedy generation, the model with every attention through the kernels (the prompt one
     prefill chunk, then one decoding step per token) against the model with its own: 20 tokens,
     equal token for token, logits within LOGIT_TOL; the prompt in chunks 5, 1, 1, 5 the same;
     bf16 on the device too (its own tolerance);
  4. the checks can fail: a kernel output perturbed by 1 % (one head of every layer), and the
     streaming compressor's state dropped between calls (V4_PLANT=ring), each fail 3.
Prints PASS/FAIL lines and "N passed, M failed"; exit status 1 on a failed check.
--modules-only: part 1 alone (with the checked build's library: its sessions under memcheck,
racecheck and initcheck).
"""
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import v4_generate as G  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf  # noqa: E402

torch.set_num_threads(1)  # tiny tensors: more threads only wait on each other
LIB = next((a for a in sys.argv[1:] if not a.startswith("--")), None)
MODULES_ONLY = "--modules-only" in sys.argv[1:]  # part 1 only (the checked build's library)
# fp16 on the device: inputs rounded to 2^-11 relative, the entries and outputs stored in fp16;
# the module outputs and the logits here are O(1)-O(10). Measured: see the PASS lines.
MODULE_TOL = {"f16": 1e-2, "bf16": 6e-2}
LOGIT_TOL = {"f16": 2e-2, "bf16": 1e-1}
# the model's and the prompt's seed: its smallest gap between the two largest logits of a step
# (checked below) is well above the logits' error through the kernels, so equal tokens mean
# something and a flip would not be noise
SEED = 2
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)
    passed, failed = passed + bool(ok), failed + (not ok)


def module_schedules(kernels, model, config):
    """Part 1: each kind's first layer, the kernels against the HF module on the same chunks."""
    rotary = hf.DeepseekV4RotaryEmbedding(config).double()
    g = torch.Generator().manual_seed(7)
    for idx in (0, 1):
        layer = model.model.layers[idx].self_attn
        kind = "CSA" if idx == 0 else "HCA"
        for chunks, what in (([23], "prefill L=23"), ([3], "prefill L=3"),
                             ([5] + [1] * 16, "prefill 5 then decode 16"),
                             ([6, 1, 1, 1, 7, 1, 1, 3],
                              "prefill -> decode -> prefill -> decode")):
            L = sum(chunks)
            x = torch.randn(2, L, config.hidden_size, generator=g, dtype=torch.float64)
            cache = DynamicCache(config=config) if len(chunks) > 1 else None
            session = G.open_session(kernels, layer, config, L, batch=2)
            start, worst, scale = 0, 0.0, 0.0
            for n in chunks:
                xs = x[:, start:start + n]
                want = G.hf_attention(layer, rotary, xs, start, cache, config.sliding_window)
                got = G.kernel_attention(layer, session, rotary, xs, start)
                worst = max(worst, (got - want).abs().max().item())
                scale = max(scale, want.abs().max().item())
                start += n
            session.close()
            check(f"module {kind}: {what}, B=2", worst <= MODULE_TOL["f16"],
                  f"max |diff| {worst:.2e} (outputs up to {scale:.2f}), chunks {chunks}")


def compare(name, want, got, dtype="f16"):
    (wt, wl), (gt, gl) = want, got
    err = max((a - b).abs().max().item() for a, b in zip(wl, gl))
    ok = wt == gt and err <= LOGIT_TOL[dtype]
    first = next((i for i, (a, b) in enumerate(zip(wt, gt)) if a != b), None)
    check(name, ok, f"{len(gt)} tokens, {'equal' if wt == gt else f'first differs at {first}'}, "
          f"max logit |diff| {err:.2e} (tolerance {LOGIT_TOL[dtype]:g})")
    return ok


def main():
    global passed, failed
    t0 = time.time()
    kernels = G.V4Kernels(LIB)
    config = G.tiny_config()
    model = G.tiny_model(config, seed=SEED)
    module_schedules(kernels, model, config)
    if MODULES_ONLY:
        print(f"{passed} passed, {failed} failed ({time.time() - t0:.1f} s)")
        return 1 if failed else 0

    prompt = torch.randint(0, config.vocab_size, (12,),
                           generator=torch.Generator().manual_seed(SEED + 1)).tolist()
    new = 20
    want = G.hf_greedy(model, prompt, new)
    # part 2: the decoding loop's logits equal the full forward over the same tokens
    with torch.no_grad():
        full = model(input_ids=torch.tensor([prompt + want[0]]), use_cache=False).logits[0]
    err = max((full[len(prompt) - 1 + i] - want[1][i]).abs().max().item() for i in range(new))
    margin = min((lambda s: (s[0] - s[1]).item())(l.sort(descending=True).values)
                 for l in want[1])
    # (Hugging Face computes RoPE's cos/sin and two softmaxes in float32 in a float64 model)
    check("HF decoding loop equals its full forward", err <= 1e-5, f"max |diff| {err:.1e}")
    check("the greedy choices are not near-ties", margin > 2 * LOGIT_TOL["f16"],
          f"smallest top-2 logit gap {margin:.3f} > {2 * LOGIT_TOL['f16']:g}")

    # part 3: generation through the kernels
    compare("greedy through the kernels (fp16): tokens and logits", want,
            G.kernel_greedy(model, kernels, prompt, new))
    chunks = [5, 1, 1, 5]
    compare(f"greedy, prompt in chunks {chunks} (HF the same)",
            G.hf_greedy(model, prompt, new, chunks),
            G.kernel_greedy(model, kernels, prompt, new, chunks))
    compare("greedy through the kernels (bf16)", want,
            G.kernel_greedy(model, kernels, prompt, new, dtype="bf16"), "bf16")

    # part 4: the checks fail on a wrong kernel output or a lost compressor state
    def perturb(o):
        o = o.copy()
        o[:, :, 0] *= 1.01
        return o
    bad = [not compare("  (planted, must FAIL) output of head 0 x 1.01", want,
                       G.kernel_greedy(model, kernels, prompt, new, perturb=perturb))]
    os.environ["V4_PLANT"] = "ring"
    bad.append(not compare("  (planted, must FAIL) compressor ring dropped between calls", want,
                           G.kernel_greedy(model, kernels, prompt, new)))
    del os.environ["V4_PLANT"]
    failed -= sum(bad)  # the planted lines' FAILs are the expected outcome
    passed -= 2 - sum(bad)
    check("planted errors fail the comparison", all(bad), f"{sum(bad)} of 2")
    print(f"{passed} passed, {failed} failed ({time.time() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
