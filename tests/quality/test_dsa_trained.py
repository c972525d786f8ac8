#!/usr/bin/env python3
"""Example 05's pipeline with the trained lightning indexer on a real model (CTest
quality.dsa_trained): sparse_attention.py --trained-indexer's function on layer 12 of SmolLM2,
256 tokens of Pride & Prejudice, top-32. Every recall is a share of softmax mass (in [0, 1]); the
oracle selection (the keys with the most attention mass summed over the heads) is the best a
shared selection can do, so no other selection may beat it; the trained indexer keeps more of the
mass than the fixed 4 sinks + window selection of the same size; the FP8 indexer (example 05's
version 8 in PyTorch) keeps within 0.01 of the fp16 indexer's mass and more than 90 % of its
keys. Exit 0 when every check passes."""
import importlib.util
import os
import sys

from checks import check, finish

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "sparse_attention",
    os.path.join(HERE, "..", "..", "examples", "05_deepseek_sparse", "sparse_attention.py"))
sparse_attention = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sparse_attention)


def main():
    r = sparse_attention.on_smollm2(layer=12, tokens=256, topk=32)
    print(r)
    ix, oracle, window = r["trained indexer"], r["oracle top-k"], r["4 sinks + window"]
    check(all(0.0 <= x <= 1.0 for x in r.values()), "recalls are shares of the softmax mass")
    check(oracle >= ix - 1e-12 and oracle >= window - 1e-12,
          f"the oracle keeps the most mass ({oracle:.3f} >= {ix:.3f}, {window:.3f})")
    check(ix > window, f"the trained indexer beats 4 sinks + window ({ix:.3f} > {window:.3f})")
    fp8, agree = r["trained indexer, FP8"], r["FP8 = fp16 selection"]
    check(oracle >= fp8 - 1e-12, f"the oracle keeps more mass than the FP8 indexer too ({fp8:.3f})")
    check(abs(fp8 - ix) < 0.01 and agree > 0.9,
          f"the FP8 indexer (e4m3, power-of-two row scales) selects nearly as the fp16 one: "
          f"recall {fp8:.3f} against {ix:.3f}, {agree:.3f} of its keys")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
