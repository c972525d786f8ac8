"""decode_kernels.py — example 09's decode kernels from Python: a ctypes binding of
libdecode_attn_<backend>.so (examples/09_decode/decode_api.h), the library built by example 09's
CMakeLists.txt (`cmake --build --preset sim --target decode_attn_sim`; the gpu preset builds
decode_attn_gpu where nvcc is).

    lib = DecodeKernels.find()                 # build/sim (or $ATTN_DECODE_LIB)
    s = lib.session(layers=30, heads=9, kv_heads=3, head_dim=64, max_tokens=1024,
                    index_heads=4, index_dim=32)   # a paged cache per layer, one block table
    s.begin(n)                                 # n new tokens: pages, lengths + n
    s.append(layer, k, v, ki)                  # k, v [B, n, H_kv, D], ki [B, n, D_I] (or None)
    o = s.attend(layer, q)                     # q [B, n, H, D] -> [B, n, H, D] (dense, version 5)
    o = s.attend(layer, q, mode="dsa", topk=64, q_index=qi, weights=w)
    o = s.attend(layer, q, mode="selection", sel=sel)   # e.g. sink + window
    s.end()

Arrays are float32 numpy arrays or torch tensors (copied to contiguous float32); the cache keeps
them in the session's dtype ("f32", "f16", "bf16"). Errors raise DecodeError with the library's
one-line message.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

np = require("numpy", setup="--quality")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"f32": 0, "f16": 1, "bf16": 2}
MODES = {"dense": 0, "dsa": 1, "selection": 2}


class DecodeError(RuntimeError):
    """A refusal or failure of the library (the message is one line)."""


def default_path(backend="sim"):
    return os.path.join(ROOT, "build", backend, "examples", "09_decode",
                        f"libdecode_attn_{backend}.so")


def _f32(x):
    if x is None:
        return None
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def _ptr(a, ctype=ctypes.c_float):
    return None if a is None else a.ctypes.data_as(ctypes.POINTER(ctype))


class DecodeKernels:
    """The library, loaded once."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise DecodeError(f"{path}: no such library (build it: cmake --build --preset sim "
                              f"--target decode_attn_sim)")
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        f, i, p = ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_void_p
        lib.dec_session_open.restype = p
        lib.dec_session_open.argtypes = [i] * 10 + [ctypes.c_ulonglong, ctypes.c_char_p, i]
        lib.dec_session_close.argtypes = [p]
        lib.dec_session_use_fp8.argtypes = [p]
        lib.dec_session_error.restype = ctypes.c_char_p
        lib.dec_session_error.argtypes = [p]
        lib.dec_session_length.argtypes = [p, i]
        lib.dec_session_begin.argtypes = [p, i]
        lib.dec_session_end.argtypes = [p]
        lib.dec_session_append.argtypes = [p, i, f, f, f]
        lib.dec_session_attend.argtypes = [p, i, i, i, f, f, f, ctypes.POINTER(ctypes.c_int32),
                                           f, f]
        lib.dec_session_selection.argtypes = [p, ctypes.POINTER(ctypes.c_int32)]
        lib.dec_session_seconds.restype = ctypes.c_double
        lib.dec_session_seconds.argtypes = [p]
        lib.dec_session_backend.restype = ctypes.c_char_p
        lib.dec_session_device.restype = ctypes.c_char_p
        lib.dec_session_device.argtypes = [p]
        self.backend = lib.dec_session_backend().decode()

    @staticmethod
    def find(path=None):
        """The library at path, $ATTN_DECODE_LIB, or the sim build's."""
        return DecodeKernels(path or os.environ.get("ATTN_DECODE_LIB") or default_path())

    def session(self, **kw):
        return Session(self, **kw)


class Session:
    def __init__(self, kernels, layers, heads, kv_heads, head_dim, max_tokens, batch=1,
                 dtype="f32", page_size=16, index_heads=0, index_dim=0, seed=1, kv_fp8=False):
        """kv_fp8: the FP8 cache (e4m3, a scale per token and K/V head; dense attention only)."""
        self.k, self.lib = kernels, kernels.lib
        self.B, self.H, self.H_kv, self.D = batch, heads, kv_heads, head_dim
        self.HI, self.DI = index_heads, index_dim
        err = ctypes.create_string_buffer(512)
        self.s = self.lib.dec_session_open(layers, batch, heads, kv_heads, head_dim,
                                           DTYPES[dtype], page_size, max_tokens, index_heads,
                                           index_dim, seed, err, 512)
        if not self.s:
            raise DecodeError(err.value.decode())
        if kv_fp8:
            self._check(self.lib.dec_session_use_fp8(self.s))
        self.n = 0
        self.last_topk = 0

    def close(self):
        if self.s:
            self.lib.dec_session_close(self.s)
            self.s = None

    def __del__(self):
        self.close()

    def _check(self, rc):
        if rc != 0:
            raise DecodeError(self.lib.dec_session_error(self.s).decode())

    def length(self, b=0):
        return self.lib.dec_session_length(self.s, b)

    def begin(self, n):
        self._check(self.lib.dec_session_begin(self.s, n))
        self.n = n

    def end(self):
        self._check(self.lib.dec_session_end(self.s))
        self.n = 0

    def append(self, layer, k, v, ki=None):
        k, v, ki = _f32(k), _f32(v), _f32(ki)
        self._check(self.lib.dec_session_append(self.s, layer, _ptr(k), _ptr(v), _ptr(ki)))

    def attend(self, layer, q, mode="dense", topk=0, q_index=None, weights=None, sel=None,
               want_lse=False):
        """[B, n, H, D] (and the LSE [H, B * n] with want_lse)."""
        q, qi, w = _f32(q), _f32(q_index), _f32(weights)
        s = None if sel is None else np.ascontiguousarray(sel, dtype=np.int32)
        if s is not None:
            topk = s.shape[-1]
        out = np.empty((self.B, self.n, self.H, self.D), dtype=np.float32)
        lse = np.empty((self.H, self.B * self.n), dtype=np.float32) if want_lse else None
        self._check(self.lib.dec_session_attend(
            self.s, layer, MODES[mode], topk, _ptr(q), _ptr(qi), _ptr(w),
            _ptr(s, ctypes.c_int32), _ptr(out), _ptr(lse)))
        if mode == "dsa":
            self.last_topk = min(topk, max(self.length(b) for b in range(self.B)))
        return (out, lse) if want_lse else out

    def selection(self):
        """The last DSA selection, [B * n, k] int32."""
        out = np.empty((self.B * max(self.n, 1), self.last_topk), dtype=np.int32)
        self._check(self.lib.dec_session_selection(self.s, _ptr(out, ctypes.c_int32)))
        return out

    def seconds(self):
        """Time spent in the library's kernels and copies so far."""
        return self.lib.dec_session_seconds(self.s)

    def device(self):
        return self.lib.dec_session_device(self.s).decode()
