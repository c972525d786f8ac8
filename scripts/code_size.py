#!/usr/bin/env python3
"""code_size.py — how much of each example is kernels and how much is plumbing, and the largest
host module and function (the consolidation's yardstick; run it after a change that adds code).

    python3 scripts/code_size.py            the table, for every examples/NN_name/ folder
    python3 scripts/code_size.py --json     the same as JSON

Counted: lines that are not blank and not only a comment. Kernels (the lesson's side): the
example's .cu and .cuh files (device code, its launchers and its registry), and its host files
marked as lesson code: a .c or .h whose first line, its header comment's title, says "lesson
code" (e.g. "/* cp_ring.c — lesson code: pass-KV round the ring ..."), for an example whose lesson
is host code, such as example 11's schedules across ranks; the mark belongs only on the code a
learner studies, not on its set-up or checks. Plumbing: its other C sources and headers (.c, .h:
main.c, modules, stages, options, transports), without its CPU references (*reference*.c) and its
tests/ folder. The largest module and function are taken over every host file (.c, .h), lesson
code or plumbing. A function: a definition starting at column 0 and ending at the first "}" in
column 0 (clang-format's layout). Exit 0; 2 on a bad flag."""
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def code_lines(text):
    """The lines of C/C++ text that hold code: block and line comments and blank lines removed."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return [l for l in (re.sub(r"//.*", "", l).strip() for l in text.splitlines()) if l]


def functions(text):
    """(name, lines) of each function defined at column 0."""
    out, name, start = [], None, 0
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if name is None:
            m = re.match(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;]*$", line)
            if m and not line.startswith(("typedef", "struct", "static const", "#")):
                name, start = m.group(1), n
        elif line.startswith("}"):
            out.append((name, n - start + 1))
            name = None
        elif line and not line[0].isspace() and not line.startswith(("{", "#")) and \
                "(" not in line and ")" not in line:
            name = None  # a declaration, not a definition
    return out


LESSON_MARK = re.compile(r"^/\*.*\blesson code\b", re.I)


def is_lesson_host(text):
    """A host file whose first line (its header comment's title) marks it as lesson code."""
    return bool(LESSON_MARK.match(text.split("\n", 1)[0]))


def example_sizes(folder):
    kernels = plumbing = 0
    largest_file, largest_fn = ("", 0), ("", 0)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        n = len(code_lines(text))
        if name.endswith((".cu", ".cuh")):
            kernels += n
        elif name.endswith((".c", ".h")) and "reference" not in name:
            if is_lesson_host(text):
                kernels += n
            else:
                plumbing += n
            total = len(text.splitlines())
            if total > largest_file[1]:
                largest_file = (name, total)
            for fn, size in functions(text):
                if size > largest_fn[1]:
                    largest_fn = (f"{name}:{fn}", size)
    return {"kernels": kernels, "plumbing": plumbing, "largest_module": largest_file,
            "largest_function": largest_fn}


def main(argv):
    if any(a not in ("--json",) for a in argv):
        print(f"error: unknown option {[a for a in argv if a != '--json'][0]!r} "
              "(code_size.py [--json])", file=sys.stderr)
        return 2
    base = os.path.join(ROOT, "examples")
    rows = {d: example_sizes(os.path.join(base, d)) for d in sorted(os.listdir(base))
            if re.match(r"\d\d_", d) and os.path.isdir(os.path.join(base, d))}
    if "--json" in argv:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'example':28} {'kernels':>8} {'plumbing':>9} {'ratio':>6}  largest module (lines), "
          "largest function (lines)")
    tk = tp = 0
    for d, r in rows.items():
        tk, tp = tk + r["kernels"], tp + r["plumbing"]
        ratio = r["plumbing"] / r["kernels"] if r["kernels"] else float("nan")
        print(f"{d:28} {r['kernels']:8d} {r['plumbing']:9d} {ratio:6.2f}  "
              f"{r['largest_module'][0]} ({r['largest_module'][1]}), "
              f"{r['largest_function'][0]} ({r['largest_function'][1]})")
    print(f"{'all':28} {tk:8d} {tp:9d} {tp / tk:6.2f}")
    print("kernels: .cu, .cuh and host files whose first line says \"lesson code\"")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
