"""attn_testing.py — what the examples' Python checks share (examples/NN_name/tests/test_*.py).

  reference(name)     an example's PyTorch reference as a module, loaded from its file
  Checks              counts checks; close() compares tensors with absolute + relative tolerance
  random_qkv          reproducible random Q, K, V in [-amplitude, amplitude)
  visible_rows        the query rows that see at least one key
  attn_uniform        the C harness's input generator, bit for bit (common/src/tensor.c)
  dump(tool, ...)     runs the dump_reference tool and reads back the tensors it wrote
  main(doc, checks)   the command line of every test file: runs the checks, prints
                      "N passed, M failed", exit status 1 on a failure

A test file is run as `python examples/NN_name/tests/test_NAME.py [--c-dump PATH]` (CTest does
this, with tests/python on PYTHONPATH; the file also adds it itself; so does
`python examples/.../NAME.py --all`). The example folders (01_attention_basics, ...) are not
Python identifiers, so the references are loaded from their files rather than imported as
packages.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCES = {
    "naive_attention": "examples/01_attention_basics/naive_attention.py",
    "flash_fwd": "examples/02_flash_attention_minimal/flash_fwd.py",
    "flash2_fwd": "examples/03_flash_attention_v2/flash2_fwd.py",
    "sparse_patterns": "examples/04_sparse_patterns/sparse_patterns.py",
    "flex_attention_ref": "examples/08_flex_attention/flex_attention.py",
    "context_parallel": "examples/11_context_parallel/context_parallel.py",
}


def reference(name):
    """The reference `name` (a key of REFERENCES) as a module, loaded once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, REFERENCES[name]))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def expect(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")

    def close(self, got, want, atol, rtol, what):
        """Every |got - want| <= atol + rtol |want| (infinities of the same sign agree, NaN
        never passes); returns the largest error."""
        got = torch.as_tensor(got, dtype=torch.float64)
        want = torch.as_tensor(want, dtype=torch.float64)
        both_inf = torch.isinf(got) & torch.isinf(want) & (torch.sign(got) == torch.sign(want))
        err = torch.where(both_inf, torch.zeros_like(got), (got - want).abs())
        bad = ~(err <= atol + rtol * want.abs().nan_to_num(0.0))  # NaN counts as bad
        n_bad = int(bad.sum())
        max_err = float(err.nan_to_num(float("inf")).max()) if err.numel() else 0.0
        self.expect(n_bad == 0,
                    f"{what}: {n_bad}/{err.numel()} out of tolerance, max err {max_err:.3e}")
        return max_err


def random_qkv(b, h, lq, lk, d, dtype=torch.float64, amplitude=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda l: (torch.rand(b, h, l, d, generator=g, dtype=torch.float64) * 2 - 1) * amplitude
    return mk(lq).to(dtype), mk(lk).to(dtype), mk(lk).to(dtype)


def visible_rows(lq, lk, causal):
    """Boolean [lq]: the rows that see a key (SDPA gives NaN on the others)."""
    if not causal:
        return torch.ones(lq, dtype=torch.bool)
    return reference("naive_attention").causal_mask(lq, lk).any(dim=-1)


# ----------------------------------------------------------------------------------------------
# The C side: the harness's inputs, and the tensors dump_reference writes
# ----------------------------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def attn_uniform(seed, stream, count):
    """The C harness's attn_uniform(seed, stream, n) for n = 0 .. count-1, as float32:
    SplitMix64's finaliser over x = (seed ^ stream*0x9E3779B97F4A7C15) + n*0xBF58476D1CE4E5B9
    (mod 2^64), top 24 bits mapped to k * 2^-23 - 1 in [-1, 1)."""
    base = np.uint64((seed ^ ((stream * 0x9E3779B97F4A7C15) & MASK64)) & MASK64)
    with np.errstate(over="ignore"):
        x = base + np.arange(count, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float64) * 2.0**-23 - 1.0).astype(np.float32)


def load_attn_tensor(path):
    """Reads a file written by attn_tensor_save: 'attn-tensor v1 f32 <dims>\\n' + raw fp32."""
    with open(path, "rb") as f:
        header = f.readline().decode("ascii").split()
        if header[:3] != ["attn-tensor", "v1", "f32"]:
            raise ValueError(f"{path}: not an attn-tensor v1 f32 file")
        dims = [int(x) for x in header[3:]]
        data = np.frombuffer(f.read(), dtype="<f4").copy()
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} values, header says {dims}")
    return data.reshape(dims)


def dump(c, what, tool, args, names, texts=()):
    """Runs `tool --out DIR args` (tests/python/dump_reference.c) and returns {name: numpy array}
    of the tensors `names` it wrote, plus {text: stripped contents} of the text files `texts`;
    None (and a failed check) when the tool fails."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [tool, "--out", out] + [str(a) for a in args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            c.expect(False, f"{what}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
            return None
        got = {n: load_attn_tensor(os.path.join(out, n + ".bin")) for n in names}
        for t in texts:
            with open(os.path.join(out, t)) as f:
                got[t] = f.read().strip()
        return got


# ----------------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------------


def main(doc, checks, c_dump=None, c_dump_help=None, argv=None):
    """Runs each check(c), then c_dump(c, tool) if given and --c-dump PATH names the
    dump_reference tool (help: c_dump_help); prints "N passed, M failed". Exit status 0 when every
    check passed, 1 otherwise, 2 when PATH is not an executable."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    if c_dump:
        ap.add_argument("--c-dump", metavar="PATH", help=c_dump_help)
    args = ap.parse_args(argv)
    tool = getattr(args, "c_dump", None)
    if tool and not os.access(tool, os.X_OK):
        print(f"error: --c-dump {tool}: not an executable file", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    c = Checks()
    for check in checks:
        check(c)
    if tool:
        c_dump(c, tool)
    print(f"{c.passed} passed, {c.failed} failed")
    return 0 if c.failed == 0 else 1
