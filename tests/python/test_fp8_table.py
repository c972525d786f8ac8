#!/usr/bin/env python3
"""test_fp8_table.py — tests/cudasim/fp8_table.txt (the CUDA toolkit's FP8 conversions, which the
simulator must equal bit for bit: tests/cudasim/test_fp8.cu) against PyTorch's float8 types, a
second implementation (CTest python.fp8_table):

  * every code of e4m3 and e5m2 decodes to the same float (NaN codes to NaN);
  * every binary32 encoding of a number (not NaN) agrees where the two libraries share a rule:
    torch.float8_e4m3fn saturates out-of-range values to +-448 as CUDA's __NV_SATFINITE does, and
    torch.float8_e5m2 overflows to infinity as CUDA's __NV_NOSAT does; both round to nearest
    even. (NaN inputs are left out: PyTorch does not document the sign or payload it keeps.)
"""
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attn_testing  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tests", "cudasim", "fp8_table.txt")
TORCH_TYPE = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
SHARED_MODE = {"e4m3": "satfinite", "e5m2": "nosat"}  # the mode PyTorch's cast follows


def rows(kind):
    with open(TABLE) as f:
        for line in f:
            if line.startswith(kind + " "):
                yield line.split()[1:]


def f32(bits_hex):
    return struct.unpack("<f", struct.pack("<I", int(bits_hex, 16)))[0]


def decode_table(fmt):
    return {int(code, 16): f32(fbits) for f, code, _, fbits in rows("decode") if f == fmt}


def decode_mismatches(fmt, table):
    """The codes whose PyTorch value differs from the table's (NaN equals NaN)."""
    got = torch.arange(256, dtype=torch.uint8).view(TORCH_TYPE[fmt]).to(torch.float32).tolist()
    return [code for code in range(256)
            if not (got[code] == table[code] or (got[code] != got[code]
                                                 and table[code] != table[code]))]


def check_decode(c):
    for fmt in TORCH_TYPE:
        table = decode_table(fmt)
        c.expect(len(table) == 256, f"{fmt}: 256 decode rows")
        bad = decode_mismatches(fmt, table)
        c.expect(not bad, f"{fmt}: codes {bad[:5]} decode differently in PyTorch")


def encode_rows(fmt):
    inputs, codes = [], []
    for f, mode, xbits, code in rows("encode_f32"):
        x = f32(xbits)
        if f == fmt and mode == SHARED_MODE[fmt] and x == x:
            inputs.append(x)
            codes.append(int(code, 16))
    return inputs, codes


def encode_mismatches(fmt, inputs, codes):
    got = torch.tensor(inputs, dtype=torch.float32).to(TORCH_TYPE[fmt]).view(torch.uint8).tolist()
    return [(inputs[i], got[i], codes[i]) for i in range(len(inputs)) if got[i] != codes[i]]


def check_encode(c):
    for fmt in TORCH_TYPE:
        inputs, codes = encode_rows(fmt)
        c.expect(len(inputs) > 1000, f"{fmt}: {len(inputs)} encoding rows to compare")
        bad = encode_mismatches(fmt, inputs, codes)
        c.expect(not bad, f"{fmt}: {len(bad)} inputs encode differently, e.g. "
                          f"{[(x, hex(g), hex(w)) for x, g, w in bad[:3]]} (input, torch, table)")


def check_planted(c):
    """The comparisons can fail: one decode row and one encode row changed are each caught."""
    table = decode_table("e4m3")
    table[0x38] = table[0x39]  # 1.0 planted as 1.125
    c.expect(decode_mismatches("e4m3", table) == [0x38], "a planted wrong decode row is seen")
    inputs, codes = encode_rows("e5m2")
    codes[10] ^= 1  # one code's last bit
    c.expect(len(encode_mismatches("e5m2", inputs, codes)) == 1,
             "a planted wrong encode row is seen")


if __name__ == "__main__":
    sys.exit(attn_testing.main(__doc__, [check_decode, check_encode, check_planted]))
