#!/usr/bin/env python3
"""kernel_check.py — the chapter's C kernels on a real layer's Q/K/V: the kernel that is fast is
the computation that was judged.

Runs SmolLM2 on a window of Pride & Prejudice, captures one layer's q, k, v (after RoPE; the 3
K/V heads repeated for the 9 query heads, as the harness's problem has one K/V head per query
head), writes them in attn_tensor_save's format, runs example 04's kernels on them through
tests/quality's kernel_on_tensors (simulator or GPU; the harness checks each against its C
reference), and checks every sparse kernel's output against PyTorch's masked attention
(attention.Pattern's mask: example 04's pattern_mask with causality) and the dense baseline's
against dense causal attention, on the same f16-rounded inputs, with the harness's f16 tolerance
2e-2 * (1 + |want|). Also printed: the difference to the float32 attention the toolkit judged.

    python quality/kernel_check.py --tool build/sim/tests/quality/kernel_on_tensors_sim
Exit 0 when every check passes, 1 otherwise, 77 when the tool has no device to run on.
"""
import argparse
import importlib
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

# NumPy, PyTorch and the toolkit's modules, imported by main() once the tool has a device: a run
# that skips (no GPU) needs none of them (importing them is seconds of CPU).
np = torch = attention = smollm = texts = None


def import_toolkit():
    global np, torch, attention, smollm, texts
    np, torch = require("numpy", "torch", setup="--quality")
    attention, smollm, texts = map(importlib.import_module, ("attention", "smollm", "texts"))


def save_tensor(path, x):
    """attn_tensor_save's format: 'attn-tensor v1 f32 <dims>\\n' + little-endian float32."""
    with open(path, "wb") as f:
        f.write(("attn-tensor v1 f32 " + " ".join(map(str, x.shape)) + "\n").encode())
        f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())


def load_tensor(path):
    with open(path, "rb") as f:
        dims = [int(d) for d in f.readline().split()[3:]]
        return torch.from_numpy(np.frombuffer(f.read(), dtype="<f4").copy().reshape(dims))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="kernel_on_tensors executable")
    ap.add_argument("--layer", type=int, default=12)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--start", type=int, default=5000, help="first token of the window")
    ap.add_argument("--pattern", nargs="+",
                    default=["global:n=4+causal_window:w=28", "causal_window:w=32"])
    args = ap.parse_args()
    probe = subprocess.run([args.tool, "--probe"], capture_output=True, text=True)
    if probe.returncode == 77:  # no device: known before the model is loaded
        print(probe.stderr.strip() or "no device: skipped")
        return 77
    if probe.returncode != 0:
        print(f"FAIL  {args.tool} --probe exited {probe.returncode}: {probe.stderr.strip()}")
        return 1
    import_toolkit()
    torch.set_num_threads(2)
    model, tok = smollm.load(), smollm.tokenizer()
    ids = tok.encode(texts.austen("Pride & Prejudice")).ids[args.start:args.start + args.window]
    captured = {}

    def observe(layer, h, q, k, v):
        if layer == args.layer:
            rep = q.shape[0] // k.shape[0]
            captured.update(q=q, k=k.repeat_interleave(rep, 0), v=v.repeat_interleave(rep, 0))

    model.hidden(torch.tensor(ids), observe=observe)
    failures = 0
    for spec in args.pattern:
        with tempfile.TemporaryDirectory() as tmp:
            ind, outd = os.path.join(tmp, "in"), os.path.join(tmp, "out")
            os.makedirs(ind)
            os.makedirs(outd)
            for name in "qkv":
                save_tensor(os.path.join(ind, name + ".bin"), captured[name].unsqueeze(0).numpy())
            r = subprocess.run([args.tool, "--in", ind, "--out", outd, "--pattern", spec,
                                "--causal"], capture_output=True, text=True)
            print(r.stdout.strip())
            if r.returncode == 77:
                print(r.stderr.strip() or "no device: skipped")
                return 77
            if r.returncode != 0:
                print(f"FAIL  {spec}: kernel_on_tensors exited {r.returncode}: {r.stderr.strip()}")
                failures += 1
            q, k, v = (load_tensor(os.path.join(outd, f"inputs_{n}.bin"))[0].double()
                       for n in "qkv")
            cm = attention.causal(len(ids))
            keep = attention.Pattern(spec).keep(args.layer, q, k, None) & cm
            want = {"kernel": attention.softmax_rows(attention.scores(q, k), keep) @ v,
                    "baseline": attention.softmax_rows(attention.scores(q, k), cm) @ v}
            judged = attention.Pattern(spec)(args.layer, captured["q"], captured["k"],
                                             captured["v"]).double()
            model_out = {"kernel": judged, "baseline": attention.Dense()(
                args.layer, captured["q"], captured["k"], captured["v"]).double()}
            outputs = sorted(f for f in os.listdir(outd) if f.split("_")[0] in want)
            kernels = [f for f in outputs if f.startswith("kernel_")]
            for f in outputs:
                kind = f.split("_")[0]
                got = load_tensor(os.path.join(outd, f))[0].double()
                err = (got - want[kind]).abs()
                ok = bool((err <= 2e-2 * (1 + want[kind].abs())).all())
                failures += not ok
                print(f"{'ok   ' if ok else 'FAIL '} {spec} layer {args.layer} L={len(ids)} "
                      f"{f[:-4]}: max |kernel - PyTorch "
                      f"{'masked' if kind == 'kernel' else 'dense'} attention| "
                      f"{float(err.max()):.2e}"
                      f" (f16 inputs); vs the model's float32 attention "
                      f"{float((got - model_out[kind]).abs().max()):.2e}")
            if not kernels:
                print(f"FAIL  {spec}: no kernel ran")
                failures += 1
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
