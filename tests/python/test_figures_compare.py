#!/usr/bin/env python3
"""test_figures_compare.py — the figure comparison of benchmarks/figures.py (CTest
python.figures_compare): a committed figure drawn again from the same data is the same figure,
and stays so with a few pixels of another machine's antialiasing; drawn from changed data it is
another figure; --check's comparison fails for a figure that its command did not draw again.
Uses the committed memory model figure (benchmarks/memory_analysis.py) and writes only into a
scratch folder. Prints "N passed, M failed"; exit 0 or 1.
"""
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import figures  # noqa: E402
import memory_analysis as ma  # noqa: E402

COMMITTED = os.path.join(ROOT, "benchmarks", "results", "memory_model", "memory_model.png")


def redraw(tmp, name, points=None, model=None):
    """The memory model figure drawn into tmp/name, optionally from changed data."""
    saved = ma.model
    if model is not None:
        ma.model = model
    try:
        return ma.plot(os.path.join(tmp, name), points or {})
    finally:
        ma.model = saved


def with_pixels(src, dst, y, x, h, w, value):
    """src with an h x w block at (y, x) set to value (another machine's antialiasing)."""
    a = np.array(Image.open(src).convert("RGBA"))
    a[y:y + h, x:x + w, :3] = value
    Image.fromarray(a).save(dst)
    return dst


def main():
    results = []

    def check(name, expected, actual, same):
        why = figures.differs(expected, actual)
        ok = (why == "") == same
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {'same figure' if not why else why}")

    with tempfile.TemporaryDirectory() as tmp:
        again = redraw(tmp, "again")
        check("drawn again from the committed data", COMMITTED, again, True)
        # 8 pixels of another machine (a 2 x 4 block near y = 396, x = 283), black or white
        for value in (0, 255):
            noisy = with_pixels(COMMITTED, os.path.join(tmp, f"noisy{value}.png"), 396, 283, 2, 4,
                                value)
            check(f"8 pixels set to {value}", COMMITTED, noisy, True)
        # ... but a block the size of a marker's (8 x 10) is more than antialiasing
        blot = with_pixels(COMMITTED, os.path.join(tmp, "blot.png"), 396, 283, 8, 10, 0)
        check("an 8 x 10 block set to black", COMMITTED, blot, False)
        # drawn from changed data: the flash model 10 % higher; one measured point more
        model = ma.model
        higher = redraw(tmp, "higher", model=lambda L, BH, D, dtype: tuple(
            v * (1.1 if i == 1 else 1.0) for i, v in enumerate(model(L, BH, D, dtype))))
        check("the flash model's bytes 10 % higher", COMMITTED, higher, False)
        c = ma.CONFIGS[0]
        point = redraw(tmp, "point", points={(c["BH"], c["D"], c["dtype"], "flash"):
                                             [(4096, ma.model(4096, c["BH"], c["D"],
                                                              c["dtype"])[1] * 3)]})
        check("one measured point added", COMMITTED, point, False)
        # another size is another figure
        small = os.path.join(tmp, "small.png")
        Image.open(COMMITTED).crop((0, 0, 1000, 400)).save(small)
        check("cropped", COMMITTED, small, False)
        # the same file, bytes and all
        copy = os.path.join(tmp, "copy.png")
        shutil.copyfile(COMMITTED, copy)
        check("a copy", COMMITTED, copy, True)
        # --check's comparison of a scratch copy: a figure its command did not draw again (the
        # copy's figures are removed before the commands run) is missing there, and fails
        root, scratch = os.path.dirname(COMMITTED), os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        name = os.path.basename(COMMITTED)
        got = figures.compared(root, scratch, [name])
        ok = len(got) == 1 and "not drawn again" in got[0]
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} a figure not drawn again: {got}")
        shutil.copyfile(COMMITTED, os.path.join(scratch, name))
        got = figures.compared(root, scratch, [name])
        results.append(got == [])
        print(f"{'ok  ' if got == [] else 'FAIL'} the same figure drawn again: {got or 'no problem'}")
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
