#!/usr/bin/env python3
"""Whether the rewritten kernel sources of a build compiled with the precompiled cuda_runtime.h
(ATTN_SIM_PCH, common/cudasim/CMakeLists.txt): CTest cudasim.precompiled_header_used.

    pch_used.py BUILD_DIR [--without NAME ...]

GCC takes the .gch silently where it can and the header's text where it cannot (another setting
of a flag or macro that the header reads): the build still works, only slower, so nothing else
would notice. A compile that used the .gch lists the copy of cuda_runtime.h beside it in its
dependency file (`<object>.d`, which CMake has GCC write) but none of the headers the .gch holds;
one that read the text lists cudasim/kernel.h, which only cuda_runtime.h includes. Every
rewritten source (cudasim_gen/...cu.cpp) must be of the first kind, but for the objects named
with --without (a source compiled on purpose with other settings: test_watchdog's -UNDEBUG),
which must be of the second. At least 10 such objects, or the check has nothing to look at; objects
older than the .gch files are another configuration's, left in the folder, and not looked at.
Exit 0 and PASS, or 1 with the objects that missed it; 2 on bad usage.
"""
import os
import sys

MARKER = os.path.join("cudasim", "include", "cudasim", "kernel.h")


def objects(build_dir, since):
    """{object's dependency file: its text} for every rewritten source's object written since
    `since` (each depends on the .gch files: one older than them is another configuration's,
    left in the folder)."""
    found = {}
    for root, _, files in os.walk(build_dir):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".cu.cpp.o.d") and "cudasim_gen" in root and \
                    os.path.getmtime(path) >= since:
                with open(path, errors="replace") as fh:
                    found[path] = fh.read()
    return found


def main(argv):
    if not argv or argv[0].startswith("-"):
        print("usage: pch_used.py BUILD_DIR [--without NAME ...]", file=sys.stderr)
        return 2
    build_dir, without = argv[0], []
    rest = argv[1:]
    while rest:
        if rest[0] != "--without" or len(rest) < 2:
            print(f"error: unknown argument '{rest[0]}'", file=sys.stderr)
            return 2
        without.append(rest[1])
        rest = rest[2:]
    gch = os.path.join(build_dir, "cudasim_pch", "cuda_runtime.h.gch")
    made = [os.path.getmtime(os.path.join(gch, f)) for f in
            (os.listdir(gch) if os.path.isdir(gch) else []) if f.endswith(".gch")]
    if not made:
        print(f"FAIL: no precompiled header in {gch}")
        return 1
    deps = objects(build_dir, max(made))
    problems = []
    if len(deps) < 10:
        problems.append(f"{len(deps)} rewritten objects' dependency files under {build_dir} "
                        "(at least 10: is it a built sim build?)")
    why = {False: "compiled from cuda_runtime.h's text, not the precompiled header",
           True: "named with --without, but compiled with the precompiled header"}
    exempted = 0
    for path, text in sorted(deps.items()):
        exempt = any(name in os.path.basename(path) for name in without)
        exempted += exempt
        if (MARKER in text) != exempt:
            problems.append(f"{os.path.relpath(path, build_dir)}: {why[exempt]}")
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print(f"{len(deps)} rewritten objects, {len(deps) - exempted} with the precompiled "
          f"header\nPASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
