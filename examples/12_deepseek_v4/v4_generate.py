#!/usr/bin/env python3
"""v4_generate.py — a tiny random DeepSeek-V4 model (Hugging Face transformers' own
DeepseekV4ForCausalLM) generating greedily through example 12's kernels, beside the same model
with its own attention.

Example 09's generation path for SmolLM2 (quality/generate.py over libdecode_attn_<backend>.so)
in the shape V4 needs: every CSA and HCA layer's DeepseekV4Attention keeps its projections (in
PyTorch, its own weights) and hands what they produce to a session of
libdeepseek_v4_attn_<backend>.so (v4_api.h), which runs the kernels of deepseek_v4.cu — a prompt
as one prefill chunk (kernels 1-4), then one decoding step per token (kernel 5's streaming
compressor, indexer and top-k, attention through the page table) — and the grouped output
projection follows in PyTorch. Everything else (hyper-connections, MoE, norms, head) is the
model's, unchanged.

    python3 examples/12_deepseek_v4/v4_generate.py [--lib PATH] [--prompt N] [--new N]
                                                    [--dtype f16|bf16] [--seed S]

prints both token sequences and the largest logit difference. Needs transformers (scripts/setup.sh
--quality) and the library (cmake --build --preset sim --target deepseek_v4_attn_sim).
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))
from chapter_script import require  # noqa: E402

np, torch = require("numpy", "torch", setup="--python")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DTYPES = {"f16": 1, "bf16": 2}
KINDS = {"compressed_sparse_attention": 0, "heavily_compressed_attention": 1}
sys.path.insert(0, os.path.join(ROOT, "quality"))
from decode_kernels import _f32, _ptr  # noqa: E402  (example 09's ctypes helpers)


class V4Error(RuntimeError):
    """A refusal or failure of the library (the message is one line)."""


def default_path(backend="sim"):
    return os.path.join(ROOT, "build", backend, "examples", "12_deepseek_v4",
                        f"libdeepseek_v4_attn_{backend}.so")


class V4Kernels:
    """The library (v4_api.h), loaded once."""

    def __init__(self, path=None):
        path = path or os.environ.get("ATTN_V4_LIB") or default_path()
        if not os.path.isfile(path):
            raise V4Error(f"{path}: no such library (build it: cmake --build --preset sim "
                          f"--target deepseek_v4_attn_sim)")
        lib = self.lib = ctypes.CDLL(path)
        f, i, d, p = ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_double, ctypes.c_void_p
        lib.v4_session_open.restype = p
        lib.v4_session_open.argtypes = [i] * 10 + [d, d, i, i, i] + [f] * 5 + [ctypes.c_char_p, i]
        lib.v4_session_close.argtypes = [p]
        lib.v4_session_error.restype = ctypes.c_char_p
        lib.v4_session_error.argtypes = [p]
        lib.v4_session_length.argtypes = [p]
        lib.v4_session_step.argtypes = [p, i] + [f] * 9
        lib.v4_session_backend.restype = ctypes.c_char_p

    def session(self, **kw):
        return Session(self, **kw)


class Session:
    """One CSA or HCA layer's state on the device (v4_session_open)."""

    def __init__(self, kernels, kind, heads, head_dim, m, window, topk, index_heads, index_dim,
                 rope_dim, rope_theta, eps, max_tokens, cbias, cnorm, sinks, ibias=None,
                 inorm=None, batch=1, page=3, dtype="f16"):
        self.k, self.heads, self.head_dim = kernels, heads, head_dim
        self._keep = [_f32(w) for w in (cbias, cnorm, ibias, inorm, sinks)]
        err = ctypes.create_string_buffer(512)
        self.s = kernels.lib.v4_session_open(kind, batch, heads, head_dim, m, window, topk,
                                             index_heads, index_dim, rope_dim, rope_theta, eps,
                                             page, max_tokens, DTYPES[dtype],
                                             *[_ptr(w) for w in self._keep], err, 512)
        if not self.s:
            raise V4Error(err.value.decode())

    def close(self):
        if self.s:
            self.k.lib.v4_session_close(self.s)
            self.s = None

    def __del__(self):
        self.close()

    def length(self):
        return self.k.lib.v4_session_length(self.s)

    def step(self, q, kv, ckv, cgate, ikv=None, igate=None, qI=None, wI=None):
        """n new tokens (q [B, n, H, D] ...) -> the attention output [B, n, H, D] (float32)."""
        arrs = [_f32(a) for a in (q, kv, ckv, cgate, ikv, igate, qI, wI)]
        B, n = arrs[0].shape[:2]
        out = np.zeros((B, n, self.heads, self.head_dim), dtype=np.float32)
        rc = self.k.lib.v4_session_step(self.s, n, *[_ptr(a) for a in arrs], _ptr(out))
        if rc != 0:
            raise V4Error(self.k.lib.v4_session_error(self.s).decode())
        return out


def layer_inputs(attn, x, cos, sin):
    """What the kernels take for the tokens x [B, S, hidden] of one DeepseekV4Attention (its own
    modules, as its forward computes them): q and kv normed and rotated, the compressor's (and
    CSA's indexer's) projections, the indexer's rotated queries and scaled head weights."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import apply_rotary_pos_emb
    B, S, _ = x.shape
    H, D = attn.num_heads, attn.head_dim
    q_res = attn.q_a_norm(attn.q_a_proj(x))
    q = attn.q_b_norm(attn.q_b_proj(q_res).view(B, S, H, D).transpose(1, 2))
    q = apply_rotary_pos_emb(q, cos, sin).transpose(1, 2)  # [B, S, H, D]
    kv = attn.kv_norm(attn.kv_proj(x)).view(B, S, 1, D).transpose(1, 2)
    kv = apply_rotary_pos_emb(kv, cos, sin)[:, 0]  # [B, S, D]
    c = attn.compressor
    out = dict(q=q, kv=kv, ckv=c.kv_proj(x), cgate=c.gate_proj(x))
    if hasattr(c, "indexer"):
        ix = c.indexer
        qI = ix.q_b_proj(q_res).view(B, S, ix.num_heads, ix.head_dim).transpose(1, 2)
        out.update(ikv=ix.kv_proj(x), igate=ix.gate_proj(x),
                   qI=apply_rotary_pos_emb(qI, cos, sin).transpose(1, 2),
                   wI=ix.scorer.weights_proj(x) * ix.scorer.weights_scaling
                   * ix.scorer.softmax_scale)
    return out


def open_session(kernels, attn, config, max_tokens, dtype="f16", batch=1):
    """A session for the layer attn (its constant weights: gate biases, norms, sinks) holding
    max_tokens (at least the window: example 12's configuration rule)."""
    c = attn.compressor
    max_tokens = max(max_tokens, config.sliding_window)
    csa = hasattr(c, "indexer")
    m = config.compress_rates[attn.layer_type]
    return kernels.session(
        kind=KINDS[attn.layer_type], heads=attn.num_heads, head_dim=attn.head_dim, m=m,
        window=config.sliding_window, topk=config.index_topk if csa else 1,
        index_heads=config.index_n_heads if csa else 16,
        index_dim=config.index_head_dim if csa else 64, rope_dim=config.qk_rope_head_dim,
        rope_theta=config.compress_rope_theta, eps=config.rms_norm_eps, max_tokens=max_tokens,
        cbias=c.position_bias, cnorm=c.kv_norm.weight, sinks=attn.sinks,
        ibias=c.indexer.position_bias if csa else None,
        inorm=c.indexer.kv_norm.weight if csa else None, batch=batch, dtype=dtype)


def output_projection(attn, o):
    """The grouped low-rank output projection of DeepseekV4Attention over o [B, S, H, D]."""
    B, S = o.shape[:2]
    grouped = o.reshape(B, S, attn.config.o_groups, -1)
    return attn.o_b_proj(attn.o_a_proj(grouped).flatten(2))


class KernelAttention:
    """The forward of one DeepseekV4Attention through a session (installed on the module)."""

    def __init__(self, attn, session, perturb=None):
        self.attn, self.session, self.perturb = attn, session, perturb

    def __call__(self, hidden_states, position_embeddings, position_ids=None,
                 attention_mask=None, cache=None, **kwargs):
        attn = self.attn
        cos, sin = position_embeddings[attn.rope_layer_type]
        with torch.no_grad():
            inp = layer_inputs(attn, hidden_states, cos, sin)
            o = self.session.step(**inp)
        if self.perturb is not None:
            o = self.perturb(o)
        o = torch.from_numpy(o).to(hidden_states.dtype)
        return output_projection(attn, o), None


class Kernelized:
    """model's CSA/HCA attention replaced by sessions of the library while inside the block."""

    def __init__(self, model, kernels, max_tokens, dtype="f16", perturb=None):
        self.model, self.k, self.max_tokens, self.dtype = model, kernels, max_tokens, dtype
        self.perturb = perturb

    def __enter__(self):
        self.saved = []
        for layer in self.model.model.layers:
            a = layer.self_attn
            if a.layer_type not in KINDS:
                raise V4Error(f"layer {a.layer_idx}: {a.layer_type} has no kernel here")
            s = open_session(self.k, a, self.model.config, self.max_tokens, self.dtype)
            self.saved.append((a, a.forward))
            a.forward = KernelAttention(a, s, self.perturb)
        return self

    def __exit__(self, *exc):
        for a, fwd in self.saved:
            a.forward.session.close()
            a.forward = fwd


def hf_attention(layer, rotary, x, start, cache, nwin):
    """Hugging Face's layer on the chunk x (absolute positions start..), with its cache (or
    None): the sliding-window mask built here for the keys the cache hands back."""
    B, S, _ = x.shape
    pos = torch.arange(start, start + S)
    kept = 0 if cache is None else min(start, nwin - 1)
    kpos = torch.arange(start - kept, start + S)
    ok = (kpos[None, :] <= pos[:, None]) & (pos[:, None] - kpos[None, :] < nwin)
    mask = torch.zeros(B, 1, S, len(kpos), dtype=torch.float64).masked_fill(~ok, float("-inf"))
    pid = pos[None, :].expand(B, -1)
    pe = {t: rotary(x, pid, layer_type=t) for t in ("main", "compress")}
    with torch.no_grad():
        out, _ = layer(x, position_embeddings=pe, position_ids=pid, attention_mask=mask,
                       cache=cache)
    return out


def kernel_attention(layer, session, rotary, x, start):
    """The same layer on the chunk x through its session (the next rows of the session)."""
    pid = torch.arange(start, start + x.shape[1])[None, :].expand(x.shape[0], -1)
    pe = {t: rotary(x, pid, layer_type=t) for t in ("main", "compress")}
    with torch.no_grad():
        return KernelAttention(layer, session)(x, pe)[0]


def tiny_config(layers=4, **kw):
    """A tiny V4: CSA and HCA layers alternating, 2 heads of 32 (16 rotary channels), window 8,
    CSA m = 4 (indexer: 16 heads of 64, top-k 2), HCA m = 8; sizes example 05's indexer and
    example 12's kernels take (D a multiple of 32, 16-64 index heads of 64 or 128)."""
    from transformers import DeepseekV4Config
    kinds = ["compressed_sparse_attention", "heavily_compressed_attention"]
    args = dict(
        vocab_size=96, hidden_size=64, num_hidden_layers=layers, num_attention_heads=2,
        head_dim=32, q_lora_rank=24, partial_rotary_factor=0.5, o_groups=2, o_lora_rank=8,
        index_n_heads=16, index_head_dim=64, index_topk=2, sliding_window=8,
        layer_types=[kinds[i % 2] for i in range(layers)],
        compress_rates={kinds[0]: 4, kinds[1]: 8}, moe_intermediate_size=16,
        n_routed_experts=4, num_experts_per_tok=2, mlp_layer_types=["moe"] * layers,
        rope_theta=10000.0, compress_rope_theta=160000.0,
        experts_implementation="eager", attn_implementation="eager")  # float64 on the CPU
    args.update(kw)
    return DeepseekV4Config(**args)


def tiny_model(config, seed=0):
    """DeepseekV4ForCausalLM in float64 with seeded random weights: matrices N(0, 1/fan_in) (so
    activations stay O(1) and the logits' gaps are large against fp16 rounding), vectors and
    biases N(0, 0.25), norm weights 1 + N(0, 0.01)."""
    from transformers import DeepseekV4ForCausalLM
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(config).double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if "norm" in name and p.dim() == 1:
                p.copy_(1.0 + 0.1 * r)
            elif p.dim() >= 2:
                p.copy_(r / p.shape[-1] ** 0.5)
            else:
                p.copy_(0.5 * r)
    return model


def greedy(model, prompt, new, chunks=None, cache=None):
    """Greedy decoding: the prompt (in the given chunks, default one), then `new` tokens one at a
    time; each step's logits of its last token. Returns (tokens, [logits...])."""
    ids = list(prompt)
    chunks = chunks or [len(prompt)]
    assert sum(chunks) == len(prompt)
    logits, pos = [], 0
    with torch.no_grad():
        for n in chunks:
            x = torch.tensor([ids[pos:pos + n]])
            out = model(input_ids=x, position_ids=torch.arange(pos, pos + n)[None], cache=cache,
                        use_cache=cache is not None)
            pos += n
        for _ in range(new):
            last = out.logits[0, -1]
            logits.append(last.clone())
            ids.append(int(last.argmax()))
            x = torch.tensor([[ids[-1]]])
            out = model(input_ids=x, position_ids=torch.tensor([[pos]]), cache=cache,
                        use_cache=cache is not None)
            pos += 1
    return ids[len(prompt):], logits


def hf_greedy(model, prompt, new, chunks=None):
    from transformers.cache_utils import DynamicCache
    return greedy(model, prompt, new, chunks, DynamicCache(config=model.config))


def kernel_greedy(model, kernels, prompt, new, chunks=None, dtype="f16", perturb=None):
    with Kernelized(model, kernels, len(prompt) + new, dtype, perturb):
        return greedy(model, prompt, new, chunks)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", help="libdeepseek_v4_attn_<backend>.so (default: build/sim's)")
    ap.add_argument("--prompt", type=int, default=12, help="prompt tokens (random ids)")
    ap.add_argument("--new", type=int, default=20, help="tokens to generate")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args(argv)
    if args.prompt < 2 or args.new < 1:
        ap.error("--prompt must be at least 2 and --new at least 1")
    torch.set_num_threads(1)  # tiny tensors: more threads only wait on each other
    try:
        import transformers  # noqa: F401
    except ModuleNotFoundError:
        print(f"error: transformers is not installed for {sys.executable}: run "
              f"scripts/setup.sh --quality", file=sys.stderr)
        return 1
    try:
        kernels = V4Kernels(args.lib)
    except V4Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    config = tiny_config()
    model = tiny_model(config, args.seed)
    prompt = torch.randint(0, config.vocab_size, (args.prompt,),
                           generator=torch.Generator().manual_seed(args.seed + 1)).tolist()
    want, wl = hf_greedy(model, prompt, args.new)
    got, gl = kernel_greedy(model, kernels, prompt, args.new, dtype=args.dtype)
    err = max((a - b).abs().max().item() for a, b in zip(wl, gl))
    print(f"Hugging Face: {want}")
    print(f"kernels ({kernels.lib.v4_session_backend().decode()}, {args.dtype}): {got}")
    print(f"tokens equal: {want == got}; largest logit difference {err:.2e}")
    return 0 if want == got else 1


if __name__ == "__main__":
    sys.exit(main())
