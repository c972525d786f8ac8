#!/usr/bin/env python3
"""test_deepseek_sparse.py — checks of example 05's PyTorch pipeline (sparse_attention.py).

  1. with k >= L the selection is every visible key and sparse attention equals dense attention
     (PyTorch's SDPA), causal and not;
  2. the tie rule accepts torch.topk's selection and rejects a wrong one (the check can fail);
  3. on a planted-needle input the indexer's selection keeps the needles' softmax mass (recall
     near 1) and a random selection of the same size does not;
  4. the FP8 indexer: power-of-two row scales and nearest codes, scores within the derived error
     bound, most of the exact top-k kept, with and without an outlier channel; a doubled scale
     fails both checks;
  5. given the C program (argument 1, deepseek_sparse_<backend>), its dumped tensors: the C
     selection is right under the tie rule on the scores PyTorch computes, and PyTorch's
     attention over that selection equals the C double-precision reference; its FP8 indexer
     (version 8: codes, scales and scores read back from the device) equals PyTorch's
     (index_scores_fp8, torch.float8_e4m3fn) bit for bit in the codes and scales, and a
     doubled q scale on the PyTorch side fails that comparison.
Exit status 0 when every check passes, 1 otherwise.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..")
ROOT = os.path.join(EXAMPLE, "..", "..")
SCRIPT = os.path.join(EXAMPLE, "sparse_attention.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from preload import python_command  # noqa: E402 (a script's process: tests/python/preload.py)
_spec = importlib.util.spec_from_file_location("sparse_attention", SCRIPT)
dsa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dsa)

failures = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}")
    if not ok:
        failures.append(name)


def load_tensor(path):
    """A file of attn_tensor_save: 'attn-tensor v1 f32 <dims>\\n' then raw little-endian fp32."""
    with open(path, "rb") as f:
        header = f.readline().decode().split()
        dims = [int(x) for x in header[3:]]
        return torch.from_numpy(np.fromfile(f, dtype="<f4").reshape(dims).astype(np.float64))


def test_dense_when_k_covers_all():
    for causal in (False, True):
        q, k, v, qi, ki, w = dsa.random_inputs(H=3, L=50, D=16, HI=4, DI=8, seed=2)
        out, sel, _ = dsa.pipeline(q, k, v, qi, ki, w, topk=64, causal=causal)
        dense = dsa.dense_attention(q, k, v, causal)
        err = (out - dense).abs().max().item()
        check(f"k >= L equals SDPA (causal={causal})", err < 1e-10, f"max err {err:.2e}")


def test_tie_rule():
    q, k, v, qi, ki, w = dsa.random_inputs(H=1, L=80, D=16, HI=4, DI=8, seed=3)
    scores = dsa.index_scores(qi, ki, w, causal=True)
    sel = dsa.select_topk(scores, 10, causal=True)
    ok, why = dsa.selection_is_right(scores, sel, 10, causal=True)
    check("torch.topk selection is right", ok, why)
    bad = sel.clone()
    t = 60
    worst = scores[t, : t + 1].argmin()
    bad[t, 0] = worst                       # swap in the lowest-scoring key
    bad[t] = torch.cat([bad[t][bad[t] >= 0].unique(), bad[t][bad[t] < 0]])[: bad.shape[1]]
    ok, why = dsa.selection_is_right(scores, bad, 10, causal=True)
    check("a wrong selection is rejected", not ok, why)
    equal = torch.zeros(20, 20)
    ok, why = dsa.selection_is_right(equal, dsa.select_topk(equal, 5, False), 5, causal=False)
    check("all-equal scores: any 5 keys are right", ok, why)


def test_radix_worked_example():
    """The README's worked example of radix select, pass by pass."""
    row = [0.5, 3.0, -1.0, 3.0, 2.0, 2.0, 7.0, 2.0]
    sel, trace = dsa.radix_select(row, 4)
    check("radix select worked example", sel == [1, 3, 4, 6] and
          trace == [(0xC0, 4), (0x00, 1), (0x00, 1), (0x00, 1)], f"{sel} {trace}")
    g = torch.Generator().manual_seed(5)
    for trial in range(20):
        scores = torch.randint(-3, 4, (60,), generator=g).float() * 0.5   # many ties
        k = 1 + trial * 3 % 59
        sel, _ = dsa.radix_select(scores.tolist(), k)
        ok, why = dsa.selection_is_right(scores[None], torch.tensor([sel]), k, causal=False)
        if not ok:
            break
    check("radix select under the tie rule", ok, why)


def test_recall():
    H, L, D, HI, DI, topk = 2, 256, 32, 4, 16, 16
    needles = [(t, t // 3) for t in range(40, L, 24)]
    q, k, v, qi, ki, w = dsa.planted_needles(H, L, D, HI, DI, needles, seed=4)
    _, sel, _ = dsa.pipeline(q, k, v, qi, ki, w, topk, causal=True)
    rows = [t for t, _ in needles]
    rec = dsa.recall(q, k, sel, causal=True)[:, rows].mean().item()
    first = torch.stack([torch.arange(topk)] * L)          # the first k keys: misses the needles
    rec_first = dsa.recall(q, k, first, causal=True)[:, rows].mean().item()
    check("needle recall of the indexer's selection", rec > 0.95, f"{rec:.3f}")
    check("needle recall of the first k keys is low", rec_first < 0.5, f"{rec_first:.3f}")


def readme_block(name):
    """The lines of the README between '<!-- NAME' and '<!-- end NAME -->'."""
    text = open(os.path.join(EXAMPLE, "README.md")).read()
    start = text.index("\n", text.index("<!-- " + name)) + 1
    return text[start:text.index("<!-- end " + name + " -->")].strip()


def test_readme_numbers():
    """The README's tables are the scripts' output, not typed numbers."""
    out = subprocess.run(python_command() + [os.path.join(EXAMPLE, "cost_model.py")],
                         capture_output=True, text=True).stdout.strip()
    check("README cost table = cost_model.py", readme_block("cost-table") == out)
    results = os.path.join(ROOT, "benchmarks", "results", "cudasim-AMD-EPYC-2-cores",
                           "deepseek.jsonl")
    if os.path.exists(results):
        out = subprocess.run(python_command() + [os.path.join(ROOT, "benchmarks", "bench_deepseek.py"),
                                                 "--table", results], capture_output=True, text=True).stdout.strip()
        check("README simulator table = bench_deepseek.py --table",
              readme_block("sim-table") == out)


def fp8_violations(x, codes, scales):
    """Rows whose scale is not the power of two at or above max(amax, 1e-4) / 448, or elements
    not within half an e4m3 spacing of x / scale (what nearest rounding guarantees)."""
    a = x.abs().amax(dim=-1).clamp(min=1e-4)
    pow2 = torch.log2(scales) == torch.round(torch.log2(scales))
    bad_scale = ~pow2 | (scales < a / 448) | (scales / 2 >= a / 448)
    y = x / scales[..., None]
    e = torch.floor(torch.log2(y.abs().clamp(min=2.0 ** -6)))  # e4m3's binade (subnormals: -6)
    bad_code = (codes.double() - y).abs() > 2.0 ** (e - 3) / 2
    return int(bad_scale.sum()) + int(bad_code.sum())


def test_fp8_indexer():
    """The FP8 indexer (sparse_attention.index_scores_fp8): its quantization, its scores within
    the error bound derived in deepseek_fp8.c, and its selection against the exact one's, on
    random inputs and on inputs with an outlier channel; a doubled scale breaks both checks."""
    u = 2.0 ** -4
    for outlier in (False, True):
        _, _, _, q_index, k_index, weights = dsa.random_inputs(1, 300, 64, 16, 64, seed=5)
        if outlier:  # one channel 30x the rest, in every key: its row scale flattens the others
            k_index[:, 7] *= 30.0
        q8, qs = dsa.quantize_e4m3(q_index)
        k8, ks = dsa.quantize_e4m3(k_index)
        check(f"FP8 quantization: power-of-two scales, nearest codes (outlier={outlier})",
              fp8_violations(q_index, q8, qs.double()) + fp8_violations(k_index, k8,
                                                                      ks.double()) == 0)
        exact = dsa.index_scores(q_index, k_index, weights, causal=True)
        fp8 = dsa.index_scores_fp8(q_index, k_index, weights, causal=True)
        mag = torch.einsum("th,thd,sd->ts", weights.abs(), q_index.abs(), k_index.abs())
        q1 = torch.einsum("th,thd->t", weights.abs(), q_index.abs())
        dq = torch.einsum("th,th->t", weights.abs(),
                          2 * q_index.abs().amax(-1).clamp(min=1e-4) / 448 * 2.0 ** -10)
        dk = 2 * k_index.abs().amax(-1).clamp(min=1e-4) / 448 * 2.0 ** -10
        k1 = k_index.abs().sum(-1)
        bound = ((2 * u + u * u) * mag + (1 + u) * dk[None] * q1[:, None]
                 + (1 + u) * k1[None] * dq[:, None] + 64 * dk[None] * dq[:, None])
        ok = torch.isfinite(exact)
        ratio = ((fp8 - exact).abs() / bound)[ok].max().item()
        check(f"FP8 scores within the derived bound (outlier={outlier})", ratio <= 1.0,
              f"largest error {ratio:.3g} of the bound")
        sel, sel8 = (dsa.select_topk(x, 32, True) for x in (exact, fp8))
        rows = torch.arange(300) >= 32
        agree = dsa.set_agreement(sel[rows], sel8[rows])
        check(f"FP8 top-32 keeps most exact keys (outlier={outlier})", agree > 0.8,
              f"agreement {agree:.3f}")
        wrong = fp8 * 2.0  # a planted doubled scale
        check(f"a doubled scale breaks the bound (outlier={outlier})",
              ((wrong - exact).abs() > bound)[ok & (exact.abs() > bound)].any().item())
        check("and the quantization check",
              fp8_violations(k_index, k8, ks.double() * 2) > 0)


def test_c_dump(program):
    with tempfile.TemporaryDirectory() as d:
        H, L, D, topk = 2, 100, 64, 12
        args = [program, "--check-only", "--quiet", "-B", "1", "-H", str(H), "-L", str(L),
                "-D", str(D), "--topk", str(topk), "--causal", "--dump", d]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode == 77:
            print("SKIP  C dump: no GPU for this build")
            return
        check("C program runs", r.returncode == 0, r.stdout + r.stderr)
        if r.returncode:
            return
        t = {n: load_tensor(os.path.join(d, n + ".bin"))
             for n in ("q_index", "k_index", "weights", "q", "k", "v", "o_ref", "sel")}
        scores = dsa.index_scores(t["q_index"], t["k_index"], t["weights"], causal=True)
        sel = t["sel"].long()
        # the C indexer accumulates in fp32: allow its rounding at the k-th place
        ok, why = dsa.selection_is_right(scores, sel, topk, causal=True, tol=1e-5)
        check("C selection is right on PyTorch's scores", ok, why)
        out, _ = dsa.sparse_attention(t["q"].reshape(H, L, D), t["k"], t["v"], sel)
        err = (out - t["o_ref"].reshape(H, L, D)).abs().max().item()
        check("PyTorch attention over the C selection = C reference", err < 1e-5,
              f"max err {err:.2e}")
        fp8 = {n: load_tensor(os.path.join(d, n + ".bin"))
               for n in ("q_index8", "k_index8", "q_scale", "k_scale", "fp8_scores")}
        check_fp8_dump(t, fp8, topk)


def fp8_dump_mismatches(t, c, q_scale_factor=1.0):
    """What differs between PyTorch's FP8 indexer (sparse_attention.py: quantize_e4m3,
    index_scores_fp8) on the dumped inputs and the C program's version 8 (its codes and scales
    read back from the device, its scores of every row): codes and scales bit for bit, scores
    within fp32 accumulation of exact products (1e-5 of the sum of |terms|). q_scale_factor
    multiplies PyTorch's q scales (a planted wrong scale: q_I / s quantized, read back with
    s * factor). Returns [what differs]."""
    q8, qs = dsa.quantize_e4m3(t["q_index"])
    k8, ks = dsa.quantize_e4m3(t["k_index"])
    qs, ks = qs.double() * q_scale_factor, ks.double()
    out = []
    for name, want, got in (("q codes", q8.double(), c["q_index8"]),
                            ("k codes", k8.double(), c["k_index8"].reshape(k8.shape)),
                            ("q scales", qs, c["q_scale"].reshape(qs.shape)),
                            ("k scales", ks, c["k_scale"].reshape(ks.shape))):
        if not torch.equal(want, got):
            bad = tuple((want != got).nonzero()[0].tolist())
            out.append(f"{name} differ at {list(bad)}: PyTorch {want[bad]:.6g}, C {got[bad]:.6g}")
    # index_scores_fp8 with the q scales times the factor: the weights carry it (w * s_q)
    want = dsa.index_scores_fp8(t["q_index"], t["k_index"], t["weights"] * q_scale_factor, True)
    terms = torch.einsum("th,thd,sd->ts", (t["weights"] * qs).abs(), q8.double().abs(),
                         k8.double().abs()) * ks[None]
    ok = torch.isfinite(want)
    diff = (c["fp8_scores"] - want).abs()
    if not bool((diff <= 1e-5 * terms)[ok].all()):
        out.append(f"scores differ by up to {float(diff[ok].max()):.3g}")
    return out


def check_fp8_dump(t, c, topk):
    """The PyTorch FP8 indexer against the CUDA path's (version 8), and a planted wrong scale on
    the PyTorch side (one query row's q scales doubled) failing the same comparison."""
    why = fp8_dump_mismatches(t, c)
    check("PyTorch FP8 indexer = C indexer_fp8 (codes, scales, scores)", not why, "; ".join(why))
    factor = torch.ones(c["q_scale"].shape, dtype=torch.float64)
    factor[50] = 2.0
    why = fp8_dump_mismatches(t, c, factor)
    check("a doubled q scale on the PyTorch side fails the scales and the scores",
          len(why) == 2 and why[0].startswith("q scales") and why[1].startswith("scores"),
          "; ".join(why))
    sel, sel_c = (dsa.select_topk(x, topk, True) for x in (
        dsa.index_scores_fp8(t["q_index"], t["k_index"], t["weights"], True),
        c["fp8_scores"].nan_to_num(nan=float("-inf"))))  # NaN: keys the kernel did not score
    agree = dsa.set_agreement(sel_c, sel)
    check("top-k of PyTorch's FP8 scores = top-k of C's (ties aside)", agree > 0.99,
          f"agreement {agree:.4f}")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    test_dense_when_k_covers_all()
    test_tie_rule()
    test_radix_worked_example()
    test_recall()
    test_readme_numbers()
    test_fp8_indexer()
    if len(sys.argv) > 1:
        test_c_dump(sys.argv[1])
    print("FAIL: " + ", ".join(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)
