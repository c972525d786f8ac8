#!/usr/bin/env python3
"""check_mask_png.py — the show program's image of a mask (exercise 02, README step 4) is a PNG
any viewer opens, and it is the mask: runs SHOW_PROGRAM -L 200 --tokens --png OUT, then checks the
text (the block mask exact, the tile heatmap, "wrote OUT") and decodes OUT with the standard
library: the PNG signature, every chunk's CRC-32, a 1-bit greyscale 200 x 200 IHDR, the zlib
stream (its Adler-32), one filter byte per line, and as many black pixels as the program counted
visible entries ("token density: N of ..."), each where the --tokens heatmap has a '#'.

    check_mask_png.py SHOW_PROGRAM OUT.png
Prints PASS, or one line per failed check and FAIL; exit 0 or 1.
"""
import re
import struct
import subprocess
import sys
import zlib

L = 200


def decode(path):
    """(width, height, rows of 0/1 pixels, 1 = black) of a 1-bit greyscale PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    at, chunks = 8, {}
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        crc, = struct.unpack(">I", data[at + 8 + n:at + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"chunk {kind!r}: bad CRC")
        chunks.setdefault(kind, b"")
        chunks[kind] += body
        at += 12 + n
    if b"IEND" not in chunks:
        raise ValueError("no IEND chunk")
    w, h, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    if (depth, colour, comp, filt, interlace) != (1, 0, 0, 0, 0):
        raise ValueError(f"not a plain 1-bit greyscale PNG: {depth, colour, comp, filt, interlace}")
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + (w + 7) // 8
    if len(raw) != stride * h:
        raise ValueError(f"{len(raw)} bytes of image data, not {stride * h}")
    rows = []
    for y in range(h):
        line = raw[y * stride:(y + 1) * stride]
        if line[0] != 0:
            raise ValueError(f"line {y}: filter {line[0]}, not 0")
        rows.append([0 if line[1 + x // 8] >> (7 - x % 8) & 1 else 1 for x in range(w)])
    return w, h, rows


def main(argv):
    if len(argv) != 2:
        print("usage: check_mask_png.py SHOW_PROGRAM OUT.png", file=sys.stderr)
        return 2
    p = subprocess.run([argv[0], "-L", str(L), "--tokens", "--png", argv[1]],
                       capture_output=True, text=True, timeout=120)
    out, problems = p.stdout, []
    if p.returncode != 0:
        problems.append(f"exit status {p.returncode}: {p.stderr.strip()}")
    for text in ("block mask: exact for the pattern", "tile heatmap",
                 f"wrote {argv[1]} (PNG, {L} x {L}, black = visible)"):
        if text not in out:
            problems.append(f"the output lacks {text!r}")
    m = re.search(r"token density: (\d+) of", out)
    heat = [line for line in out.splitlines() if re.fullmatch(r"[#.]{%d}" % L, line)]
    if not m or len(heat) != L:
        problems.append("no token density line or no 200-line token heatmap")
    if not problems:
        try:
            w, h, rows = decode(argv[1])
        except (OSError, ValueError, zlib.error) as e:
            problems.append(f"{argv[1]}: {e}")
        else:
            black = sum(map(sum, rows))
            if (w, h) != (L, L):
                problems.append(f"{w} x {h} pixels, not {L} x {L}")
            elif black != int(m.group(1)):
                problems.append(f"{black} black pixels, but {m.group(1)} visible entries")
            elif any(rows[i][j] != (heat[i][j] == "#") for i in range(L) for j in range(L)):
                problems.append("the image differs from the token heatmap")
    for problem in problems:
        print(problem)
    print("FAIL" if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
