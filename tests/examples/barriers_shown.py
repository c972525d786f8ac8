#!/usr/bin/env python3
"""Every barrier of every kernel version shown to matter by a case of the checked build.

A __syncthreads() that no test needs can be deleted with every test green: the checked build
(sim-check) sees a deleted barrier only where a case makes two threads of a block use one shared
byte on both sides of it, one of them writing (the tile loop's end-of-tile barrier needs two or
more warps per block and two or more key tiles per row). The simulator's barrier record
(common/cudasim/README.md, "Checked mode") writes, for each launch label "<example>:<kernel
version>" (the harness labels every launch), each __syncthreads() site the blocks completed and
whether racecheck saw two such accesses ordered by that barrier alone.

    barriers_shown.py reset <record folder>
        empties the folder (the fixture that runs before the example cases);
    barriers_shown.py check <record folder> <exemptions> <program>...
        with the example cases' records in the folder: fails, one line per problem, unless every
        kernel version in the programs' registries (--list) ran in a case, and every barrier each
        version reached was shown to matter in one of that version's launches, or is exempt:
        <exemptions> has one line per barrier_not_shown() of the examples' tests (file, a text
        of the barrier's line, why), and an exemption whose barrier is gone fails too.

Registered in the sim-check build only (tests/examples/CMakeLists.txt); costs well under a second.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def registry(program):
    """(example name, [(kernel name, gpu_only)]) from `program --list`."""
    out = subprocess.run([program, "--list"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    example = lines[0].split(":", 1)[0]
    kernels = []
    for n, line in enumerate(lines):
        m = re.match(r"^\s*(\d+)  (\S+)", line)
        if m:
            supports = next((x for x in lines[n + 1:n + 4] if "supports:" in x), "")
            kernels.append((m.group(2), "GPU only" in supports))
    return example, kernels


def read_records(folder):
    """{label: {(file, line): shown}}; a launch without a barrier is (\"\", 0)."""
    records = {}
    for path in sorted(glob.glob(os.path.join(folder, "barriers.*.tsv"))):
        with open(path) as f:
            for row in f:
                label, _kernel, file, line, shown = row.rstrip("\n").split("\t")
                sites = records.setdefault(label, {})
                key = (file, int(line))
                sites[key] = sites.get(key, False) or shown == "1"
    return records


def site_text(file, line):
    """repo-relative path:line and the barrier's source line."""
    rel = os.path.relpath(file, ROOT) if os.path.isabs(file) else file
    try:
        with open(file) as f:
            text = f.readlines()[line - 1].strip()
    except (OSError, IndexError):
        text = "?"
    return f"{rel}:{line}", text


def read_exemptions(path):
    """[(repo-relative file, text of the barrier's line, why, kernel versions)]: the versions
    ("<example>:<kernel>") the exemption is limited to, or none (every version reaching it)."""
    out = []
    with open(path) as f:
        for row in f:
            if row.strip():
                file, text, why, *versions = row.rstrip("\n").split("\t")
                out.append((file, text, why, [v for v in versions if v]))
    return out


def exempt_why(exemptions, label, where, text):
    for file, needle, why, versions in exemptions:
        if where.startswith(file + ":") and needle in text and (not versions or label in versions):
            return why
    return None


def check(folder, exemptions_path, programs):
    records = read_records(folder)
    exemptions = read_exemptions(exemptions_path)
    problems, shown_count, versions = [], 0, 0
    for file, needle, _, _ in exemptions:
        try:
            with open(os.path.join(ROOT, file)) as f:
                found = any("__syncthreads" in line and needle in line for line in f)
        except OSError:
            found = False
        if not found:
            problems.append(f"barrier_not_shown: no __syncthreads() line of {file} contains "
                            f"'{needle}'")
    for program in programs:
        example, kernels = registry(program)
        for name, gpu_only in kernels:
            if gpu_only:
                continue
            versions += 1
            label = f"{example}:{name}"
            sites = records.get(label)
            if sites is None:
                problems.append(f"{label}: no case of the checked build runs this kernel version")
                continue
            for (file, line), shown in sorted(sites.items()):
                if not file:
                    continue
                where, text = site_text(file, line)
                if shown:
                    shown_count += 1
                    continue
                why = exempt_why(exemptions, label, where, text)
                if why is not None:
                    print(f"exempt  {label}: {where} `{text}`: {why}")
                    continue
                problems.append(
                    f"{label}: {where} `{text}` is reached but no checked case shows it matters: "
                    "add a case where threads of different warps use the shared memory on both "
                    "sides of it (>= 2 warps per block, >= 2 tiles per row)")
    for p in problems:
        print("FAIL  " + p)
    if not problems:
        print(f"PASS  {versions} kernel versions, {shown_count} (version, barrier) pairs shown to "
              "matter by a checked case, the others exempt (above)")
    return 1 if problems else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "reset":
        shutil.rmtree(argv[1], ignore_errors=True)
        os.makedirs(argv[1])
        return 0
    if len(argv) >= 4 and argv[0] == "check":
        return check(argv[1], argv[2], argv[3:])
    print("usage: barriers_shown.py reset FOLDER | check FOLDER EXEMPTIONS PROGRAM...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
