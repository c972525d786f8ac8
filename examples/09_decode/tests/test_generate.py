#!/usr/bin/env python3
"""test_generate.py — SmolLM2-135M generating through example 09's kernels (quality/generate.py
over libdecode_attn_sim.so, argument 1), against PyTorch's own decoding loop.

  1. the decoding loop itself: its first step's logits (PyTorch attention) equal the model's
     full forward over the prompt;
  2. greedy decoding with the dense decode kernel (version 5, paged cache, fp32) gives the
     reference's NEW = 8 tokens, token for token, with the logits within 1e-3 (measured: ~2e-5):
     the prompt's 63 prefilled tokens and the first step fill 4 pages of 16, the next 7 steps
     write into a fifth (the paging across a page boundary);
  3. with an fp16 cache, the logits of the first 4 steps stay within 0.1 of the reference (fp16
     K/V rounding: relative 2^-11, through 30 layers; measured: ~8e-3) and their argmax agrees;
  4. DSA with k at least the cache selects every token, and its logits equal the dense kernel's
     bit for bit (the same tiles, splits and order of arithmetic);
  5. sink + window and DSA with a small k run, and keep the attention's budget;
  6. the library refuses bad input with one line: a selection outside the cache, a sequence
     longer than the session holds, attention before a step begins.
A prompt of 64 tokens of Pride & Prejudice; 13 s of CPU and 1.5 GB (measured on 2 shared cores,
OMP_WAIT_POLICY=PASSIVE as CTest runs it).
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "quality"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import attn_testing as T  # noqa: E402
import decode_kernels  # noqa: E402
import generate as G  # noqa: E402
import indexer  # noqa: E402
import smollm  # noqa: E402
import texts  # noqa: E402

LIB = sys.argv[1] if len(sys.argv) > 1 else None
torch.set_num_threads(smollm.threads())
model, tok = smollm.load(), smollm.tokenizer()
prompt = tok.encode(texts.austen("Pride & Prejudice")).ids[2000:2064]
lib = decode_kernels.DecodeKernels.find(LIB)
ref = {}
NEW = 8  # greedy steps of the dense comparison (positions 63 to 70: across a page boundary)


def reference(new):
    if new not in ref:
        ref[new] = G.generate(model, G.TorchCache(model), prompt, new)
    return ref[new]


def kernel(mode="dense", new=NEW, **kw):
    cache = G.KernelCache(model, lib, mode, max_tokens=len(prompt) + new + 1, **kw)
    return G.generate(model, cache, prompt, new), cache


def check_loop(c):
    full = model(torch.tensor(prompt))[-1]
    first = reference(NEW)[1][0]
    c.close(first, full, 1e-3, 0, "the decoding loop's first logits = the model's forward")


def check_dense(c):
    tokens, logits, _, _ = reference(NEW)
    (got, glogits, _, secs), _ = kernel("dense", NEW)
    same = next((n for n in range(NEW) if got[n] != tokens[n]), NEW)
    c.expect(same == NEW, f"dense kernel: {same} of {NEW} tokens equal to PyTorch's")
    err = c.close(glogits, logits, 1e-3, 0, "dense kernel: logits within 1e-3 of PyTorch's")
    print(f"dense kernel, fp32 cache: {same}/{NEW} tokens equal, max |logit difference| "
          f"{err:.3g}, {NEW / secs:.2f} tokens/s (simulator: CPU time)")


def check_f16(c):
    tokens, logits, _, _ = reference(NEW)
    (got, glogits, _, _), _ = kernel("dense", 4, dtype="f16")
    err = c.close(glogits, logits[:4], 0.1, 0, "fp16 cache: logits within 0.1 over 4 steps")
    c.expect(got == tokens[:4], "fp16 cache: the same 4 tokens")
    print(f"dense kernel, fp16 cache: max |logit difference| {err:.3g} over 4 steps")


def check_dsa_all(c):
    ix = indexer.load()
    (_, dense, _, _), _ = kernel("dense", 2)
    (_, dsa, _, _), cache = kernel("dsa", 2, k=4096, indexers=ix)
    c.expect(torch.equal(dense, dsa), "DSA with k >= the cache: logits = dense, bit for bit")
    sel = cache.s.selection()
    c.expect(sel.shape[1] == len(prompt) + 1 and (sel[0] == np.arange(len(prompt) + 1)).all(),
             "DSA with k >= the cache selects every token")


def check_budgets(c):
    ix = indexer.load()
    (_, dsa, _, _), cache = kernel("dsa", 2, k=16, indexers=ix)
    sel = cache.s.selection()[0]
    c.expect(sel.shape == (16,) and (np.diff(sel) > 0).all() and sel.max() < len(prompt) + 1,
             "DSA k=16: 16 ascending tokens of the cache")
    (_, sw, _, _), cache = kernel("sink", 2, sinks=4, window=12)
    c.expect(list(cache.selection()[0]) == [0, 1, 2, 3] + list(range(len(prompt) - 11,
                                                                      len(prompt) + 1)),
             "sink + window: the 4 first and the 12 latest tokens")
    c.expect(bool(torch.isfinite(dsa).all() and torch.isfinite(sw).all()), "finite logits")


def check_library_errors(c):
    s = lib.session(layers=1, heads=2, kv_heads=1, head_dim=64, max_tokens=4)
    kv = np.zeros((1, 1, 1, 64), dtype=np.float32)
    q = np.zeros((1, 1, 2, 64), dtype=np.float32)

    def refused(what, fn, text):
        try:
            fn()
            c.expect(False, f"{what}: accepted")
        except decode_kernels.DecodeError as e:
            c.expect(text in str(e) and "\n" not in str(e), f"{what}: '{e}'")

    refused("attention before a step", lambda: s.attend(0, q), "no step is open")
    s.begin(1)
    s.append(0, kv, kv)
    refused("a selection outside the cache",
            lambda: s.attend(0, q, mode="selection", sel=[[0, 5]]),
            "slot 1 holds 5, not -1 nor an ascending position in [0, 1)")
    s.end()
    refused("more tokens than the session holds", lambda: s.begin(4),
            "sequence 0 would hold 5 tokens, more than the session's 4")


if __name__ == "__main__":
    sys.exit(T.main(__doc__, [check_loop, check_dense, check_f16, check_dsa_all, check_budgets,
                     check_library_errors],
                    argv=[]))
