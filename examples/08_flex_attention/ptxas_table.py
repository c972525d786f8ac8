#!/usr/bin/env python3
"""ptxas_table.py — what the compiler made of each modification of example 08, next to the plain
kernel (example 03's fa2_mma): registers per thread, spill stores and loads, stack frame, SASS
instructions, and the occupancy they allow on an H100 (sm_90) and an A100 (sm_80). No GPU needed:
it reads the gpu preset's binaries with the tools and rules of benchmarks/resource_usage.py
(cuobjdump's resource usage, the compile's own ptxas -v report for the spills,
cuda_occupancy.h's rules), and counts the SASS instructions of each kernel (cuobjdump -sass).

    python3 examples/08_flex_attention/ptxas_table.py            measure build/gpu, write
                                                                  results/ptxas.json and the
                                                                  README table
    python3 examples/08_flex_attention/ptxas_table.py --check    exit 1 if the README table
                                                                  differs from results/ptxas.json
    python3 examples/08_flex_attention/ptxas_table.py --verify   measure the fresh binaries; exit
                                                                  1 if a kernel spills or the JSON
                                                                  differs from them (77: no
                                                                  cuobjdump or ptxas here)
    --build DIR   the gpu preset's build folder (default build/gpu)
Standard library only.
"""
import datetime
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location(
    "resource_usage", os.path.join(ROOT, "benchmarks", "resource_usage.py"))
ru = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ru)

JSON_PATH = os.path.join(HERE, "results", "ptxas.json")
README = os.path.join(HERE, "README.md")
BINARIES = [  # (what, library relative to the gpu build)
    ("03", "examples/03_flash_attention_v2/libflash2_fwd_kernels_gpu.a"),
    ("08", "examples/08_flex_attention/libflex_attention_kernels_gpu.a"),
]
# The compiled modifications by their functor types (flex_attention.cu's typedefs), in the order
# of flex_attention.h's table.
MODS = [
    ("causal", "flex_mod<flex_causal, flex_identity>"),
    ("sliding_window", "flex_mod<flex_and<flex_causal, flex_window>, flex_identity>"),
    ("prefix_lm", "flex_mod<flex_or<flex_causal, flex_prefix>, flex_identity>"),
    ("document", "flex_mod<flex_and<flex_causal, flex_document>, flex_identity>"),
    ("alibi", "flex_mod<flex_causal, flex_alibi>"),
    ("softcap", "flex_mod<flex_causal, flex_softcap>"),
    ("rel_bias", "flex_mod<flex_all, flex_rel_bias>"),
]
THREADS = 128  # 4 warps, every kernel here


def smem_bytes(D):
    """flex_shape and fa2_mma_shape: Q, K, V tiles of 64 rows of D + 8 16-bit elements."""
    return (64 + 2 * 64) * (D + 8) * 2


def demangled(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def kernel_of(plain):
    """(kernel, modification, dtype, D) of a demangled name, or None for the other kernels."""
    m = re.match(r"void (fa2_mma_kernel|flex_fa2_kernel)<(__half|__nv_bfloat16), (\d+)(, (.*))?>\(",
                 plain)
    if not m:
        return None
    mod = None
    if m.group(1) == "flex_fa2_kernel":
        mod = next((name for name, typ in MODS if m.group(5).strip() == typ), None)
        if mod is None:
            ru.die(f"{plain}: a modification not in ptxas_table.py's MODS")
    return (m.group(1).removesuffix("_kernel"), mod, ru.DTYPES[m.group(2)], int(m.group(3)))


def sass_counts(cuobjdump, binary):
    """{arch: {mangled: (SASS instructions, global loads LDG)}} from cuobjdump -sass."""
    out = {}
    for arch, func, line in ru.cuobjdump_lines(cuobjdump, "-sass", binary, r"\s*Function : (\S+)"):
        if func and re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+\S", line):
            counts = out.setdefault(arch, {}).setdefault(func, [0, 0])
            counts[0] += 1
            counts[1] += bool(re.search(r"\bLDG\b", line))
    return out


def measure(build, cuobjdump, ptxas):
    rows = []
    for what, rel in BINARIES:
        binary = os.path.join(build, rel)
        if not os.path.exists(binary):
            ru.die(f"{binary} not found: build the gpu preset first")
        usage, spills = ru.tabled_usage(cuobjdump, ptxas, binary)
        sass = sass_counts(cuobjdump, binary)
        names = demangled(sorted({f for per in usage.values() for f in per}))
        for mangled, plain in sorted(names.items(), key=lambda x: x[1]):
            k = kernel_of(plain)
            if k is None:
                continue
            kernel, mod, dtype, D = k
            per_arch = {}
            for arch in ("sm_90", "sm_80"):
                r, s = usage[arch][mangled], spills[arch][mangled]
                if s["registers"] != r["registers"]:
                    ru.die(f"{plain} ({arch}): ptxas gives {s['registers']} registers, the binary "
                           f"{r['registers']}")
                occ = ru.occupancy(arch, r["registers"], s["static_shared_bytes"], smem_bytes(D),
                                   THREADS, s["barriers"])
                per_arch[arch] = {"registers": r["registers"], "stack_bytes": r["stack_bytes"],
                                  "spill_store_bytes": s["spill_store_bytes"],
                                  "spill_load_bytes": s["spill_load_bytes"],
                                  "sass_instructions": sass[arch][mangled][0],
                                  "global_loads": sass[arch][mangled][1],
                                  "blocks_per_sm": occ["blocks_per_sm"],
                                  "occupancy": occ["occupancy"], "limited_by": occ["limited_by"]}
            rows.append({"example": what, "kernel": kernel, "mod": mod, "dtype": dtype, "D": D,
                         "mangled": mangled, "resources": per_arch})
    return rows


def table(data):
    """One row per kernel and D; f16 and bf16 side by side where they differ."""
    rows = data["kernels"]
    order = ["fa2_mma"] + [name for name, _ in MODS]
    key = lambda r: (r["D"], order.index(r["mod"] or "fa2_mma"))
    lines = ["| kernel | modification | D | registers sm_90 | registers sm_80 | spill stores / "
             "loads (B) | stack (B) | SASS instructions sm_90 | of which global loads (LDG) | "
             "blocks / SM sm_90 (limited by) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in sorted(rows, key=key):
        groups.setdefault((r["kernel"], r["mod"], r["D"]), {})[r["dtype"]] = r["resources"]
    for (kernel, mod, D), by in groups.items():
        def both(arch, field):
            v = {dt: by[dt][arch][field] for dt in ("f16", "bf16") if dt in by}
            return str(v["f16"]) if len(set(v.values())) == 1 else f"{v['f16']} / {v['bf16']}"
        r90 = by["f16"]["sm_90"]
        spill = max(by[dt][a]["spill_store_bytes"] for dt in by for a in by[dt])
        spill_l = max(by[dt][a]["spill_load_bytes"] for dt in by for a in by[dt])
        stack = max(by[dt][a]["stack_bytes"] for dt in by for a in by[dt])
        what = "plain (example 03)" if mod is None else f"`{mod}`"
        lines.append(f"| `{kernel}` | {what} | {D} | {both('sm_90', 'registers')} | "
                     f"{both('sm_80', 'registers')} | {spill} / {spill_l} | {stack} | "
                     f"{both('sm_90', 'sass_instructions')} | {both('sm_90', 'global_loads')} | "
                     f"{r90['blocks_per_sm']} "
                     f"({', '.join(r90['limited_by'])}) |")
    return "\n".join(lines)


def readme_block(data):
    return (ru.provenance(data, "examples/08_flex_attention/ptxas_table.py",
                          "f16 and bf16 compile alike where one figure is shown (f16 / bf16 "
                          "otherwise); the raw figures: `results/ptxas.json`")
            + "\n\n" + table(data) + "\n")


MARK = re.compile(r"(<!-- ptxas -->\n)(.*?)(<!-- /ptxas -->)", re.S)


def readme_stale(data, update):
    text = ru.read(README)
    m = MARK.search(text)
    if not m:
        return "README.md has no <!-- ptxas --> markers"
    want = readme_block(data)
    if m.group(2) == want:
        return None
    if update:
        ru.write(README, text[:m.start(2)] + want + text[m.end(2):])
    return "README.md's table differs from results/ptxas.json"


def tools():
    """cuobjdump and ptxas, found as resource_usage.py finds them; None where one is missing."""
    found = []
    for name in ("cuobjdump", "ptxas"):
        try:
            found.append(ru.find_tool(name, None))
        except SystemExit:  # find_tool's "not found" (it exits 2)
            found.append(None)
    return found


def main():
    args = sys.argv[1:]
    for a in args:
        if a.startswith("-") and a not in ("--check", "--verify", "--build", "-h", "--help"):
            ru.die(f"unknown option '{a}' (see --help)")
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    if "--check" in args:
        if not os.path.exists(JSON_PATH):
            ru.die(f"{JSON_PATH} not found: run ptxas_table.py on a gpu build")
        stale = readme_stale(json.loads(ru.read(JSON_PATH)), update=False)
        print(f"FAIL: {stale} (run python3 {os.path.relpath(__file__, ROOT)})" if stale
              else "PASS: README.md's table is results/ptxas.json's")
        return 1 if stale else 0
    build = ru.option(args, "--build", os.path.join(ROOT, "build", "gpu"))
    cuobjdump, ptxas = tools()
    if cuobjdump is None or ptxas is None:
        print("SKIP: cuobjdump or ptxas not found (the CUDA toolkit's; see "
              "benchmarks/resource_usage.py)")
        return 77
    rows = measure(build, cuobjdump, ptxas)
    spilling = [f"{r['kernel']} {r['mod']} {r['dtype']} D={r['D']} {a}"
                for r in rows for a, x in r["resources"].items()
                if x["spill_store_bytes"] or x["spill_load_bytes"]]
    if "--verify" in args:
        committed = json.loads(ru.read(JSON_PATH))
        problems = [f"spills: {s}" for s in spilling]
        if committed["kernels"] != rows:
            problems.append("results/ptxas.json differs from the binaries (run ptxas_table.py)")
        for p in problems:
            print(p)
        print(f"{len(rows)} kernels: " + ("FAIL" if problems else "PASS"))
        return 1 if problems else 0
    data = {"what": "example 08's kernels and example 03's fa2_mma: compile-time resources",
            "nvcc": ru.tool_version(shutil.which("nvcc") or ptxas.replace("ptxas", "nvcc")),
            "commit": ru.git("rev-parse", "--short=12", "HEAD")
            + ("-dirty" if ru.git("status", "--porcelain", "--untracked-files=no", "--",
                                   "examples/08_flex_attention", "examples/03_flash_attention_v2",
                                   "common/device") else ""),
            "date": datetime.date.today().isoformat(), "kernels": rows}
    os.makedirs(os.path.dirname(JSON_PATH), exist_ok=True)
    ru.write(JSON_PATH, json.dumps(data, indent=1) + "\n")
    stale = readme_stale(data, update=True)
    print(f"wrote {os.path.relpath(JSON_PATH, ROOT)}" + (f"; README: {stale}, updated" if stale
                                                          else "; README up to date"))
    for s in spilling:
        print("spills: " + s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
