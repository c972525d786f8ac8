"""generate.py — SmolLM2-135M continuing a passage of a packaged text one token at a time, with
every layer's attention computed by example 09's decode kernels (examples/09_decode): a paged K/V
cache per layer kept across the steps in the C library (decode_kernels.py), the new token's K/V
written into its page by the append kernel, then its query attending over the cache.

    .venv/bin/python quality/generate.py                   # dense kernel vs PyTorch, 32 tokens
    .venv/bin/python quality/generate.py --prompt 512 --new 32 --nll \\
        --attention dense dsa:k=64 sink:n=4,w=60

The prompt is processed once by the model's own (PyTorch) forward, the prefill; its keys and values
(and, for DSA, the trained indexer's keys, indexer.py) are appended to the paged cache, and every
token after it is a decoding step through the kernels. The reference is the same loop with PyTorch
attention: decode.py's SDPA with enable_gqa over a PyTorch cache. Attentions (--attention):

    torch             the reference (always run first)
    dense             example 09's version 5: GQA tiles over the paged cache, split-KV
    dense-fp8         the same over the FP8 cache: appends quantise to e4m3 with a scale per
                      token and K/V head (version 11), attention dequantises (version 12)
    dsa:k=K           DeepSeek sparse attention: the trained lightning indexer (version 6),
                      example 05's radix top-k, attention over the K tokens (version 9)
    sink:n=S,w=W      the S first tokens and the W latest (a selection made here, version 9)

For each it prints the continuation, the tokens it shares with the reference, the largest logit
difference, its tokens per second (simulator timings are CPU time, not GPU performance) and, with
--nll, the negative log-likelihood per token of the text's own continuation (teacher forcing).
Bad input: one line, exit 2.
"""
import argparse
import importlib.util
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

np, torch = require("numpy", "torch", setup="--quality")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import decode_kernels  # noqa: E402
import smollm  # noqa: E402
import texts  # noqa: E402
from smollm import rms_norm, rope_tables  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "decode_09", os.path.join(ROOT, "examples", "09_decode", "decode.py"))
decode_py = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(decode_py)


# ----------------------------------------------------------------------------------------------
# Attention backends: what a decoding step calls in every layer
# ----------------------------------------------------------------------------------------------

class TorchCache:
    """The reference: a PyTorch cache per layer, decode.py's SDPA (enable_gqa) over it."""
    name = "torch"

    def __init__(self, model):
        self.k, self.v = [None] * model.n_layers, [None] * model.n_layers

    def prefill(self, states):
        for layer, (h, k, v) in states.items():
            self.k[layer], self.v[layer] = k, v

    def begin(self, pos):
        pass

    def end(self):
        pass

    def attend(self, layer, q, k, v, h):
        self.k[layer] = torch.cat([self.k[layer], k], 1)
        self.v[layer] = torch.cat([self.v[layer], v], 1)
        o = decode_py.decode_attention(q.transpose(0, 1)[None], self.k[layer][None],
                                       self.v[layer][None], [self.k[layer].shape[1]])
        return o[0].transpose(0, 1)

    def seconds(self):
        return 0.0


class KernelCache:
    """Example 09's kernels: a session of the C library, one paged cache per layer.
    mode: "dense", "dense-fp8" (the FP8 cache), "dsa" (k tokens chosen by the trained indexer) or
    "sink" (n first + w last)."""

    def __init__(self, model, lib, mode="dense", k=0, sinks=0, window=0, dtype="f32",
                 page_size=16, max_tokens=2048, seed=1, indexers=None):
        self.model, self.mode, self.k, self.sinks, self.window = model, mode, k, sinks, window
        self.ix = indexers if mode == "dsa" else None
        ix0 = self.ix[0] if self.ix else None
        self.s = lib.session(layers=model.n_layers, heads=model.n_heads, kv_heads=model.n_kv,
                             head_dim=model.head_dim, max_tokens=max_tokens, dtype=dtype,
                             page_size=page_size, index_heads=ix0.heads if ix0 else 0,
                             index_dim=ix0.dim if ix0 else 0, seed=seed,
                             kv_fp8=mode == "dense-fp8")
        self.name = {"dense": "dense", "dense-fp8": "dense-fp8", "dsa": f"dsa:k={k}",
                     "sink": f"sink:n={sinks},w={window}"}[mode]
        self.pos = 0

    @staticmethod
    def rows(x):
        """[H, n, D] (the model's layout) -> [1, n, H, D] (decode.h's)."""
        return x.transpose(0, 1)[None]

    def index(self, layer, h, pos):
        """The trained indexer's (q_index, k_index, weights) of the rows of h at positions
        pos .. pos + len(h) - 1 (indexer.project numbers positions from 0: the rows go at the
        end of a zero-padded input, whose other rows are not used)."""
        pad = torch.zeros(pos + h.shape[0], h.shape[1])
        pad[pos:] = h
        rows = torch.arange(pos, pos + h.shape[0])
        q, k, w = self.ix[layer].project(pad, rows)
        return q, k[pos:], w

    def prefill(self, states):
        n = next(iter(states.values()))[1].shape[1]
        self.s.begin(n)
        for layer, (h, k, v) in sorted(states.items()):
            ki = self.index(layer, h, 0)[1][None] if self.ix else None
            self.s.append(layer, self.rows(k), self.rows(v), ki)
        self.s.end()
        self.pos = n

    def begin(self, pos):
        self.s.begin(1)
        self.pos = pos

    def end(self):
        self.s.end()

    def selection(self):
        """sink: the first `sinks` tokens and the `window` latest, ascending, -1 padded."""
        n = self.pos + 1
        keep = sorted(set(range(min(self.sinks, n))) | set(range(max(0, n - self.window), n)))
        return np.array([keep + [-1] * (self.sinks + self.window - len(keep))], dtype=np.int32)

    def attend(self, layer, q, k, v, h):
        qi = w = ki = None
        if self.ix:
            qi, ki, w = self.index(layer, h, self.pos)
        self.s.append(layer, self.rows(k), self.rows(v), None if ki is None else ki[None])
        if self.mode in ("dense", "dense-fp8"):
            o = self.s.attend(layer, self.rows(q))
        elif self.mode == "dsa":
            o = self.s.attend(layer, self.rows(q), mode="dsa", topk=self.k, q_index=qi[None],
                              weights=w[None])
        else:
            o = self.s.attend(layer, self.rows(q), mode="selection", sel=self.selection())
        return torch.from_numpy(o)[0].transpose(0, 1)

    def seconds(self):
        return self.s.seconds()


# ----------------------------------------------------------------------------------------------
# The decoding loop
# ----------------------------------------------------------------------------------------------

@torch.no_grad()
def step(model, cache, token, pos):
    """Logits [vocab] after token `token` at position `pos`: the model's layers with the cache's
    attention (SmolLM2's block: attention, then the SwiGLU MLP, each on the residual)."""
    x = model.embed[[token]]
    cos, sin = rope_tables(1, model.head_dim, model.rope_base, offset=pos)
    cache.begin(pos)
    for i, b in enumerate(model.blocks):
        h, q, k, v = model.qkv(i, x, cos, sin)
        o = cache.attend(i, q, k, v, h)
        x = x + o.transpose(0, 1).reshape(1, model.d_model) @ b["wo"].T
        hm = rms_norm(x, b["ffn_norm"], model.eps)
        x = x + (torch.nn.functional.silu(hm @ b["gate"].T) * (hm @ b["up"].T)) @ b["down"].T
    cache.end()
    return (rms_norm(x, model.out_norm, model.eps) @ model.lm_head.T)[0]


@torch.no_grad()
def generate(model, cache, prompt, new, force=None):
    """Greedy decoding of `new` tokens after `prompt` (or, with force, the tokens given: teacher
    forcing). The prompt but its last token is the prefill; each new token's logits come from a
    decoding step. Returns tokens, logits [new, vocab], the NLL of each token, decode seconds."""
    states = {}
    model.hidden(torch.tensor(prompt[:-1]),
                 observe=lambda layer, h, q, k, v: states.__setitem__(layer, (h, k, v)))
    cache.prefill(states)
    token, pos = prompt[-1], len(prompt) - 1
    tokens, logits, nll = [], [], []
    t0 = time.perf_counter()
    for n in range(new):
        lg = step(model, cache, token, pos)
        token = int(force[n]) if force is not None else int(lg.argmax())
        tokens.append(token)
        logits.append(lg)
        nll.append(float(-torch.log_softmax(lg.double(), -1)[token]))
        pos += 1
    return tokens, torch.stack(logits), nll, time.perf_counter() - t0


# ----------------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------------

def parse_attention(spec):
    """('torch'|'dense'|'dense-fp8'|'dsa'|'sink', k, sinks, window) of an --attention entry."""
    if spec in ("torch", "dense", "dense-fp8"):
        return spec, 0, 0, 0
    try:
        if spec.startswith("dsa:k="):
            k = int(spec[6:])
            if k >= 1:
                return "dsa", k, 0, 0
        if spec.startswith("sink:"):
            kv = dict(p.split("=") for p in spec[5:].split(","))
            n, w = int(kv.pop("n")), int(kv.pop("w"))
            if not kv and n >= 0 and w >= 1:
                return "sink", 0, n, w
    except (ValueError, KeyError):
        pass
    raise ValueError(f"--attention: '{spec}' is not torch, dense, dense-fp8, dsa:k=K or "
                     f"sink:n=S,w=W")


def make_cache(model, lib, spec, args, indexers):
    mode, k, sinks, window = parse_attention(spec)
    if mode == "torch":
        return TorchCache(model)
    return KernelCache(model, lib, mode, k, sinks, window, dtype=args.dtype,
                       page_size=args.page_size, max_tokens=args.prompt + args.new + 1,
                       indexers=indexers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", help="libdecode_attn_<backend>.so (default: $ATTN_DECODE_LIB, else "
                    "build/sim/examples/09_decode/libdecode_attn_sim.so)")
    ap.add_argument("--text", default="austen", help="austen or kjv")
    ap.add_argument("--start", type=int, default=2000, help="token offset of the prompt")
    ap.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    ap.add_argument("--new", type=int, default=32, help="tokens to generate")
    ap.add_argument("--attention", nargs="+", default=["dense"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"],
                    help="the cache's element type")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--nll", action="store_true",
                    help="also the NLL of the text's own continuation under each attention")
    ap.add_argument("--reps", type=int, default=1,
                    help="decode each attention's tokens this many times; tokens/s from the "
                    "fastest (the chapter tour passes 1)")
    ap.add_argument("--out", help="write the results as JSON")
    args = ap.parse_args(argv)
    try:
        for spec in args.attention:
            parse_attention(spec)
        if args.prompt < 2 or min(args.new, args.page_size, args.reps) < 1 or args.start < 0:
            raise ValueError("--prompt must be at least 2, --new, --page-size and --reps at "
                             "least 1, --start at least 0")
        lib = decode_kernels.DecodeKernels.find(args.lib)
        model, tok = smollm.load(), smollm.tokenizer()
        ids = tok.encode(texts.text(args.text)).ids
        if args.start + args.prompt + args.new > len(ids):
            raise ValueError(f"--start + --prompt + --new goes past the text ({len(ids)} tokens)")
        model.check_length(args.prompt + args.new)
        indexers = None
        if any(s.startswith("dsa") for s in args.attention):
            import indexer
            indexers = indexer.load()
    except (ValueError, decode_kernels.DecodeError, smollm.ModelMissing,
            texts.TextMissing) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    prompt = ids[args.start:args.start + args.prompt]
    truth = ids[args.start + args.prompt:args.start + args.prompt + args.new]
    torch.set_num_threads(smollm.threads())
    sim = lib.backend == "sim"
    print(f"SmolLM2-135M, {args.text} tokens {args.start}..{args.start + args.prompt - 1} as the "
          f"prompt, {args.new} new tokens, greedy; cache {args.dtype}, pages of "
          f"{args.page_size}; kernels: {lib.path} ({lib.backend})")
    print("prompt (end): ..." + tok.decode(prompt[-40:]).replace("\n", " "))
    results, ref = [], None
    for spec in ["torch"] + [s for s in args.attention if s != "torch"]:
        cache = make_cache(model, lib, spec, args, indexers)
        tokens, logits, _, secs = generate(model, cache, prompt, args.new)
        for _ in range(args.reps - 1):
            secs = min(secs, generate(model, make_cache(model, lib, spec, args, indexers),
                                      prompt, args.new)[3])
        r = {"attention": cache.name, "tokens": tokens, "text": tok.decode(tokens),
             "decode_seconds": secs, "kernel_seconds": cache.seconds(),
             "tokens_per_second": args.new / secs}
        if ref is None:
            ref = (tokens, logits)
        else:
            same = 0
            while same < args.new and tokens[same] == ref[0][same]:
                same += 1
            r["tokens_matched"] = same
            r["max_logit_diff"] = float((logits - ref[1]).abs().max()) if same == args.new \
                else float((logits[:same + 1] - ref[1][:same + 1]).abs().max())
        if args.nll:
            cache = make_cache(model, lib, spec, args, indexers)
            r["nll"] = generate(model, cache, prompt, args.new, force=truth)[2]
        results.append(r)
        timing = "simulator (CPU) timing, not GPU performance" if sim and spec != "torch" else \
            "PyTorch on the CPU" if spec == "torch" else "GPU"
        print(f"\n[{cache.name}] {r['text']!r}")
        line = f"  {r['tokens_per_second']:.2f} tokens/s ({timing}"
        line += f"; {r['kernel_seconds']:.1f} s of it in the kernels)" if spec != "torch" else ")"
        print(line)
        if "tokens_matched" in r:
            print(f"  tokens equal to the reference's: {r['tokens_matched']} of {args.new}; "
                  f"max |logit difference| {r['max_logit_diff']:.3g} (over the tokens before the "
                  f"first difference)")
        if args.nll:
            print(f"  NLL of the text's continuation: mean {np.mean(r['nll']):.3f} nats; per "
                  f"token " + " ".join(f"{x:.2f}" for x in r["nll"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"text": args.text, "start": args.start, "prompt": args.prompt,
                       "new": args.new, "dtype": args.dtype, "page_size": args.page_size,
                       "backend": lib.backend, "truth": tok.decode(truth),
                       "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), "
                                  f"torch {torch.__version__}, {torch.get_num_threads()} threads",
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
