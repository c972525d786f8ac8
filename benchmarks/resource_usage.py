#!/usr/bin/env python3
"""resource_usage.py — what the compiler made of the GPU kernels: registers per thread, spill
stores/loads, stack frame, static and dynamic shared memory, and from them the theoretical
occupancy on H100 (sm_90) and A100 (sm_80). No GPU needed: it reads the gpu preset's binaries.

Where each figure comes from (every one measured on the built binaries, none typed by hand):
  registers, stack, local                  `cuobjdump --dump-resource-usage` of the binary
  spill stores / loads, barriers,          ptxas's own report of the compile (`-Xptxas=-v`, kept
  static shared                            beside each object by cmake/ptxas_log.sh for the
                                           targets of attn_tabled_architectures), or where the
                                           build kept none `ptxas -v` run again on the PTX
                                           embedded in the same binary, with the ptxas options
                                           recorded in it (the register and stack figures must
                                           then agree with the binary's: the script checks it;
                                           cuobjdump's shared figure for sm_90 adds the 1 KiB
                                           the driver reserves per block, which occupancy() adds
                                           for every arch)
  threads per block, dynamic shared        the kernels' registry entries (attn_kernel.launch_shape,
                                           which the launchers use): `bench_attention_gpu
                                           --launch-shapes`, no GPU needed; for the exercise
                                           solutions, which the benchmark does not run, the
                                           launcher's expressions (see LAUNCH)
  occupancy                                the rules of the CUDA toolkit's cuda_occupancy.h (the
                                           calculation behind cudaOccupancyMaxActiveBlocksPer-
                                           Multiprocessor) with the limits of the CUDA C++
                                           Programming Guide, "Technical Specifications per
                                           Compute Capability" (DEVICES below)

    python3 benchmarks/resource_usage.py                 measure build/gpu, write the results
                                                         (benchmarks/results/ptxas/) and the
                                                         README tables
    python3 benchmarks/resource_usage.py --update-readmes  README tables from the committed JSON
    python3 benchmarks/resource_usage.py --check         exit 1 if a README table differs from
                                                         the committed JSON
    python3 benchmarks/resource_usage.py --verify        measure the fresh binaries; exit 1 if a
                                                         kernel spills on sm_90 or sm_80,
                                                         or if the READMEs / the JSON differ from
                                                         what the binaries say (the CTest)
    --build DIR       the gpu preset's build folder (default build/gpu)
    --cuobjdump PATH  --ptxas PATH   the tools (default: searched, see find_tool)
Standard library only.
"""
import concurrent.futures
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join("benchmarks", "results", "ptxas")
JSON_NAME = "resource_usage.json"
MD_NAME = "resource_usage.md"

# The binaries, relative to the gpu build folder: (label, binary, kernel source, readme with a
# table). Every kernel of these (examples 02-04, the exercise solutions) must not spill.
BINARIES = [
    ("02", "examples/02_flash_attention_minimal/libflash_fwd_kernels_gpu.a",
     "examples/02_flash_attention_minimal/flash_fwd.cu", None),
    ("03", "examples/03_flash_attention_v2/libflash2_fwd_kernels_gpu.a",
     "examples/03_flash_attention_v2/flash2_fwd.cu", "examples/03_flash_attention_v2/README.md"),
    ("04", "examples/04_sparse_patterns/libsparse_patterns_kernels_gpu.a",
     "examples/04_sparse_patterns/sparse_patterns.cu", "examples/04_sparse_patterns/README.md"),
    ("solution 01", "solutions/01_mini_flash/mini_flash_solution_gpu",
     "solutions/01_mini_flash/mini_flash.cu", None),
    ("solution 02", "exercises/02_sparse_mask/libex02_solution_renamed_gpu.a",
     "solutions/02_sparse_mask/sparse_mask.cu", None),
]

# The examples' kernels report their launch shapes through their registries (launch_shapes()).
# The exercise solutions' kernels are not in the benchmark: for them, the block size and the
# dynamic shared memory as the C expressions written in the launcher. The script fails if an
# expression is no longer in the source (the launcher changed: update it here), and evaluates it
# with the file's #defines.
LAUNCH = {
    "mini_flash_kernel": ("MF_ROWS", "2 * MF_KEYS * (p->D + 1) * sizeof(float)"),
    "sparse_mask_kernel": ("BR", "(2 * BR + 2 * BC) * (p->D + 1) * sizeof(float)"),
}
# What the binaries are compiled from: "-dirty" is added to the commit when these differ from it.
KERNEL_INPUTS = ["status", "--porcelain", "--untracked-files=no", "--", "cmake",
                 "CMakePresets.json", "common/include", "common/device", "solutions",
                 "examples/03_flash_attention_v2/fa2_tile.cuh",
                 "exercises/02_sparse_mask/sparse_mask.h"] + [b[2] for b in BINARIES]
RUNTIME_D = (64, 128)  # head dims shown for kernels whose D is a run-time argument
MACRO_HEADERS = ["common/include/attn/*.h", "common/device/*.cuh",
                 "examples/03_flash_attention_v2/fa2_tile.cuh",
                 "exercises/02_sparse_mask/sparse_mask.h"]

# Per-SM limits (CUDA C++ Programming Guide, Technical Specifications per Compute Capability;
# cudaDeviceProp of H100 SXM5 and A100). Shared memory: what an SM has, what one block may opt in
# to, and the 1 KiB the driver reserves per block since sm_80.
DEVICES = {
    "sm_90": {"device": "H100", "regs_per_sm": 65536, "regs_per_block": 65536,
              "threads_per_sm": 2048, "threads_per_block": 1024, "blocks_per_sm": 32,
              "smem_per_sm": 233472, "smem_per_block_optin": 232448, "smem_reserved": 1024},
    "sm_80": {"device": "A100", "regs_per_sm": 65536, "regs_per_block": 65536,
              "threads_per_sm": 2048, "threads_per_block": 1024, "blocks_per_sm": 32,
              "smem_per_sm": 167936, "smem_per_block_optin": 166912, "smem_reserved": 1024},
}
REG_GRANULARITY = 256  # registers are allocated per warp in units of 256 (sm_50 and later)
SUB_PARTITIONS = 4     # register files per SM (warp schedulers)
SMEM_GRANULARITY = 128 # shared memory allocation unit, sm_80 and sm_90
TABLE_ARCH = "sm_90"


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(2)


# ---- tools -------------------------------------------------------------------------------------
def find_tool(name, given):
    """The tool given, else on PATH, next to nvcc, in the CUDA toolkit, or shipped inside a Python
    package of the project's .venv (PyTorch's triton and the nvidia-cuda-* wheels carry
    cuobjdump)."""
    if given:
        return given
    found = shutil.which(name)
    if found:
        return found
    nvcc = shutil.which("nvcc")
    dirs = [os.path.dirname(nvcc)] if nvcc else []
    dirs += [os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin")]
    for d in dirs:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    for pattern in ("lib/python3*/site-packages/nvidia/*/bin/" + name,
                    "lib/python3*/site-packages/nvidia/*/*/bin/" + name,
                    "lib/python3*/site-packages/triton/backends/nvidia/bin/" + name):
        hits = sorted(glob.glob(os.path.join(ROOT, ".venv", pattern)))
        if hits:
            return hits[0]
    die(f"{name} not found: it is part of the CUDA toolkit (and of PyTorch's triton in .venv); "
        f"give it with --{name} PATH")


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return r.stdout + r.stderr


def tool_version(path):
    m = re.search(r"release ([\d.]+), V([\d.]+)", run([path, "--version"]))
    return m.group(2) if m else "?"


# ---- names -------------------------------------------------------------------------------------
DTYPES = {"__half": "f16", "__nv_bfloat16": "bf16", "f": "f32"}


def demangle(mangled):
    """(kernel, template args) of an Itanium-mangled kernel name such as
    _Z14fa2_mma_kernelI6__halfLi128EEv... -> ("fa2_mma_kernel", ["__half", 128]). Covers what our
    kernels use: a plain or internal-linkage (L) name, type names (their own template arguments
    left out) and integer literals."""
    m = re.match(r"_ZL?(\d+)", mangled)
    if not m:
        return mangled, []
    n = int(m.group(1))
    name = mangled[m.end():m.end() + n]
    rest = mangled[m.end() + n:]
    args = []
    if rest.startswith("I"):
        rest = rest[1:]
        while rest and not rest.startswith("E"):
            lit = re.match(r"L[a-z](-?\d+)E", rest)
            typ = re.match(r"(\d+)", rest)
            if lit:
                args.append(int(lit.group(1)))
                rest = rest[lit.end():]
            elif typ:
                k = int(typ.group(1))
                args.append(rest[typ.end():typ.end() + k])
                rest = rest[typ.end() + k:]
                if rest.startswith("I"):  # the type's own template arguments: left out
                    depth, i = 0, 0
                    while i < len(rest):
                        if rest[i] == "I":
                            depth += 1
                        elif rest[i] == "E":
                            depth -= 1
                            if depth == 0:
                                break
                        elif rest[i].isdigit():  # a length-prefixed name may hold I or E
                            d = re.match(r"\d+", rest[i:])
                            i += d.end() + int(d.group(0))
                            continue
                        i += 1
                    rest = rest[i + 1:]
            else:
                args.append(rest[0])
                rest = rest[1:]
    return name, args


def describe(mangled):
    """kernel (without _kernel), dtype, D (None: run-time), variant (other template types)."""
    name, args = demangle(mangled)
    dtype = next((DTYPES[a] for a in args if a in DTYPES), None)
    D = next((a for a in args if isinstance(a, int)), None)
    variant = "".join(a for a in args if isinstance(a, str) and a not in DTYPES)
    if dtype is None:  # no type argument: the fp32 kernels (float pointers first)
        dtype = "f32" if re.search(r"PKf", mangled) else "?"
    return name, dtype, D, variant


# ---- launch configuration ----------------------------------------------------------------------
def macros(paths):
    """#define NAME VALUE of the files, later files winning, comments stripped."""
    out = {}
    for path in paths:
        for m in re.finditer(r"^#define\s+(\w+)\s+([^\n]*)$", read(path), re.M):
            value = re.sub(r"/\*.*?\*/|//.*", "", m.group(2)).strip()
            if value:
                out[m.group(1)] = value
    return out


def evaluate(expr, defs, D, elem_bytes):
    e = expr.replace("attn_padded_layout<D>::LD", "(D + ATTN_SMEM_PAD)")
    e = e.replace("sizeof(T)", str(elem_bytes)).replace("sizeof(float)", "4")
    e = e.replace("p->D", "D")
    for _ in range(8):
        e = re.sub(r"\b[A-Z][A-Z0-9_]+\b", lambda m: f"({defs.get(m.group(0), m.group(0))})", e)
    if not re.fullmatch(r"[\d\s()+*/D-]*", e):
        die(f"cannot evaluate the launch expression '{expr}' (became '{e}')")
    return int(eval(e, {"__builtins__": {}}, {"D": D}))


def parse_launch_shapes(text):
    """{(kernel, dtype, D): (threads, dynamic shared bytes)} from `bench_attention --launch-shapes`
    (one JSON line per registry entry, dtype and D). Two entries that launch the same kernel must
    agree."""
    shapes = {}
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key, value = (r["global"], r["dtype"], r["D"]), (r["threads"], r["dynamic_shared_bytes"])
        if shapes.setdefault(key, value) != value:
            die(f"two registry entries launch {key} with different shapes: {shapes[key]}, {value}")
    return shapes


def launch_shapes(build):
    """The registries' launch shapes, from the gpu build's bench_attention (no GPU needed)."""
    program = os.path.join(build, "benchmarks", "bench_attention_gpu")
    if not os.path.exists(program):
        die(f"{program} not found: build the gpu preset first")
    return parse_launch_shapes(run([program, "--launch-shapes"]))


def launch_config(kernel, source, D, dtype, shapes=None):
    """(threads per block, dynamic shared bytes) as the launcher sets them: from the registry's
    shapes, else (the exercise solutions) from the launcher's expressions."""
    if shapes and (kernel, dtype, D) in shapes:
        return shapes[(kernel, dtype, D)]
    if kernel not in LAUNCH:
        die(f"kernel {kernel} of {source} ({dtype}, D={D}) has no launch shape: neither in "
            f"bench_attention --launch-shapes (its registry entry's launch_shape) nor in LAUNCH")
    threads, smem = LAUNCH[kernel]
    text = read(os.path.join(ROOT, source))
    launch = rf"<<<[^,;]+,\s*{re.escape(threads)}\s*,\s*"
    if not re.search(launch, text):
        die(f"no launch in {source} uses '{threads}' threads any more: "
            f"update LAUNCH[{kernel!r}] in benchmarks/resource_usage.py")
    if smem == "0" and not re.search(launch + r"0\s*,", text) or smem != "0" and smem not in text:
        die(f"the launcher of {kernel} in {source} no longer sets '{smem}' bytes of dynamic "
            f"shared memory: update LAUNCH[{kernel!r}] in benchmarks/resource_usage.py")
    headers = [p for g in MACRO_HEADERS for p in sorted(glob.glob(os.path.join(ROOT, g)))]
    defs = macros(headers + [os.path.join(ROOT, source)])
    elem = {"f16": 2, "bf16": 2, "f32": 4}[dtype]
    return evaluate(threads, defs, D, elem), evaluate(smem, defs, D, elem)


# ---- occupancy (cuda_occupancy.h) --------------------------------------------------------------
def round_up(x, y):
    return (x + y - 1) // y * y


def occupancy(arch, regs, static_smem, dyn_smem, threads, barriers):
    dev = DEVICES[arch]
    warps = (threads + 31) // 32
    # registers: allocated per warp, in each of the 4 sub-partitions' register files
    regs_per_warp = round_up(regs * 32, REG_GRANULARITY)
    if regs_per_warp * round_up(warps, SUB_PARTITIONS) > dev["regs_per_block"] or regs > 256:
        by_regs = 0
    else:
        per_sub = dev["regs_per_sm"] // SUB_PARTITIONS // regs_per_warp if regs else 10**9
        by_regs = per_sub * SUB_PARTITIONS // warps
    by_warps = dev["threads_per_sm"] // 32 // warps
    by_blocks = dev["blocks_per_sm"]
    # shared memory: static + dynamic + the driver's reserve, in 128-byte units, against the
    # SM's shared memory (the default carveout preference lets the driver give blocks all of it)
    smem = round_up(static_smem + dyn_smem + dev["smem_reserved"], SMEM_GRANULARITY)
    if smem > dev["smem_per_block_optin"] + dev["smem_reserved"]:
        by_smem = 0
    else:
        by_smem = dev["smem_per_sm"] // smem
    by_barriers = (2 * by_blocks) // barriers if barriers and arch == "sm_90" else 10**9
    limits = {"registers": by_regs, "shared memory": by_smem, "warps": by_warps,
              "blocks": by_blocks, "barriers": by_barriers}
    blocks = min(limits.values())
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": round(blocks * warps / (dev["threads_per_sm"] // 32), 4),
            "limited_by": [k for k, v in limits.items() if v == blocks],
            "smem_per_block_allocated": smem}


# ---- measuring ---------------------------------------------------------------------------------
def cuobjdump_lines(cuobjdump, option, binary, header):
    """(arch, function, line) for each line cuobjdump option binary prints: the last `arch = sm_NN`
    and function header (the regex header, group 1 the mangled name) seen so far, None before."""
    arch = func = None
    for line in run([cuobjdump, option, binary]).splitlines():
        m = re.match(r"\s*arch = (sm_\d+)", line)
        if m:
            arch = m.group(1)
        m = re.match(header, line)
        if m:
            func = m.group(1)
        yield arch, func, line


def resource_usage(cuobjdump, binary):
    """{arch: {mangled: {registers, stack, local, static_shared}}} from cuobjdump."""
    out = {}
    for arch, func, line in cuobjdump_lines(cuobjdump, "--dump-resource-usage", binary,
                                            r"\s*Function (\S+):"):
        m = re.match(r"\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
        if m:
            out.setdefault(arch, {})[func] = {
                "registers": int(m.group(1)), "stack_bytes": int(m.group(2)),
                "static_shared_bytes": int(m.group(3)), "local_bytes": int(m.group(4))}
    return out


def ptxas_info(ptxas, ptx, options):
    """{mangled: {registers, stack, spill_stores, spill_loads, barriers}} from ptxas -v."""
    log = run([ptxas] + options + ["-v", ptx, "-o", os.devnull])
    return {k: v for per_arch in parse_ptxas_report(log).values() for k, v in per_arch.items()}


def tabled_usage(cuobjdump, ptxas, binary):
    """(resource_usage, spill_info) of a binary whose kernels are tabled for every architecture
    of DEVICES: exits with what is missing when its SASS or PTX lacks one (its target is compiled
    for them by attn_tabled_architectures, cmake/attn.cmake, called beside the test)."""
    usage, spills = resource_usage(cuobjdump, binary), spill_info(cuobjdump, ptxas, binary)
    for arch in sorted(DEVICES):
        for what, found in (("SASS", usage), ("PTX", spills)):
            if arch not in found:
                die(f"{binary} has no {arch} {what}: its target must be compiled for "
                    f"{' and '.join(sorted(DEVICES))} (attn_tabled_architectures in cmake/attn.cmake, "
                    f"called beside the test that reads it)")
    return usage, spills


def compile_reports(binary):
    """{arch: ptxas_info} from the reports ptxas wrote when the binary's objects were compiled
    (-Xptxas=-v, kept beside each object as <object>.ptxas by cmake/ptxas_log.sh: the targets of
    attn_tabled_architectures), or None where an object has none or an older one."""
    name = os.path.basename(binary)
    if name.startswith("lib") and name.endswith(".a"):
        name = name[3:-2]
    objects = glob.glob(os.path.join(os.path.dirname(binary), "CMakeFiles", name + ".dir", "**",
                                     "*.cu.o"), recursive=True)
    if not objects:
        return None
    out = {}
    for obj in objects:
        report = obj + ".ptxas"
        if not os.path.exists(report) or os.path.getmtime(report) < os.path.getmtime(obj):
            return None
        with open(report) as f:
            for arch, info in parse_ptxas_report(f.read()).items():
                out.setdefault(arch, {}).update(info)
    return out


def parse_ptxas_report(log):
    """{arch: {mangled: {registers, stack, spill_stores, spill_loads, barriers}}} of ptxas -v's
    report ("Compiling entry function '...' for 'sm_90'" starts each kernel's lines)."""
    out, func = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(\w+)'", line)
        if m:
            func = out.setdefault(m.group(2), {}).setdefault(m.group(1), {})
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m and func is not None:
            func.update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                        spill_load_bytes=int(m.group(3)))
        m = re.search(r"Used (\d+) registers(?:, used (\d+) barriers)?", line)
        if m and func is not None:
            func.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0))
            m = re.search(r"(\d+) bytes smem", line)
            func["static_shared_bytes"] = int(m.group(1)) if m else 0
    return out


def spill_info(cuobjdump, ptxas, binary):
    """{arch: ptxas_info} for every PTX embedded in the binary: the build's own ptxas reports
    (compile_reports), else ptxas run again on the embedded PTX with its options."""
    reports = compile_reports(binary)
    if reports is not None:
        return reports
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for line in run([cuobjdump, "-xptx", "all", os.path.abspath(binary)], cwd=tmp).splitlines():
            m = re.search(r"Extracting PTX file and ptxas options\s+\d+:\s+(\S+)\s+(.*)$", line)
            if m:
                options = m.group(2).split()
                arch = next(o.split("=")[1] for o in options if o.startswith("-arch="))
                jobs.append((arch, os.path.join(tmp, m.group(1)), options))
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            results = pool.map(lambda j: (j[0], ptxas_info(ptxas, j[1], j[2])), jobs)
            return dict(results)


def measure(build, cuobjdump, ptxas):
    kernels = []
    shapes = launch_shapes(build)
    for label, rel, source, _ in BINARIES:
        binary = os.path.join(build, rel)
        if not os.path.exists(binary):
            die(f"{binary} not found: build the gpu preset first "
                f"(cmake --preset gpu && cmake --build --preset gpu)")
        usage, spills = tabled_usage(cuobjdump, ptxas, binary)
        archs = sorted(usage)
        for mangled in sorted(usage[archs[0]]):
            per_arch = {}
            for arch in archs:
                r = dict(usage[arch][mangled])
                s = spills.get(arch, {}).get(mangled)
                if s is None:
                    die(f"no PTX of {mangled} for {arch} in {binary}")
                for key in ("registers", "stack_bytes"):
                    if s[key] != r[key]:
                        die(f"{mangled} ({arch}): ptxas on the embedded PTX gives {key} = "
                            f"{s[key]}, the binary has {r[key]}: the figures would not be the "
                            f"binary's")
                # cuobjdump's SHARED counts, on sm_90, the 1 KiB that the driver reserves per
                # block (reservedSharedMemPerBlock, added in occupancy()); ptxas's figure is the
                # kernel's own static shared memory (cudaFuncAttributes::sharedSizeBytes).
                extra = r["static_shared_bytes"] - s["static_shared_bytes"]
                if extra not in (0, DEVICES.get(arch, {}).get("smem_reserved", 0)):
                    die(f"{mangled} ({arch}): cuobjdump gives {r['static_shared_bytes']} B of "
                        f"shared memory, ptxas {s['static_shared_bytes']} B")
                r.update(cuobjdump_shared_bytes=r["static_shared_bytes"],
                         static_shared_bytes=s["static_shared_bytes"])
                r.update(spill_store_bytes=s["spill_store_bytes"],
                         spill_load_bytes=s["spill_load_bytes"], barriers=s["barriers"])
                per_arch[arch] = r
            kernel, dtype, D, variant = describe(mangled)
            for d in ([D] if D is not None else RUNTIME_D):
                threads, dyn = launch_config(kernel, source, d, dtype, shapes)
                occ = {arch: occupancy(arch, per_arch[arch]["registers"],
                                       per_arch[arch]["static_shared_bytes"], dyn, threads,
                                       per_arch[arch]["barriers"])
                       for arch in DEVICES if arch in per_arch}
                kernels.append({
                    "example": label, "kernel": kernel.removesuffix("_kernel"),
                    "variant": variant, "dtype": dtype, "D": d, "D_is_template": D is not None,
                    "mangled": mangled, "binary": rel, "source": source,
                    "threads": threads, "dynamic_shared_bytes": dyn,
                    "resources": per_arch, "occupancy": occ})
    return kernels


def git(*args):
    """git's output in ROOT ("?" if git fails)."""
    r = subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


# ---- tables ------------------------------------------------------------------------------------
def table(kernels, label):
    rows = [k for k in kernels if k["example"] == label]
    source = read(os.path.join(ROOT, rows[0]["source"])) if rows else ""
    order = {name: n for n, name in enumerate(re.findall(r"__global__ void (\w+)", source))}
    rows.sort(key=lambda k: (order.get(k["kernel"] + "_kernel", 99), k["variant"], k["D"],
                             k["dtype"]))
    a = TABLE_ARCH
    lines = [
        f"| kernel | dtype | D | threads | registers | spill stores / loads (B) | stack (B) "
        f"| shared, static + dynamic (B) | blocks / SM | occupancy {a} (limited by) "
        f"| occupancy sm_80 |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in rows:
        r, o, o80 = k["resources"][a], k["occupancy"][a], k["occupancy"]["sm_80"]
        name = k["kernel"] + (f" ({k['variant']})" if k["variant"] else "")
        smem = r["static_shared_bytes"] + k["dynamic_shared_bytes"]
        lines.append(
            f"| `{name}` | {k['dtype']} | {k['D']}{'' if k['D_is_template'] else ' (run time)'} "
            f"| {k['threads']} | {r['registers']} | {r['spill_store_bytes']} / "
            f"{r['spill_load_bytes']} | {r['stack_bytes']} | {smem} | {o['blocks_per_sm']} "
            f"| {o['occupancy']:.0%} ({', '.join(o['limited_by'])}) | {o80['occupancy']:.0%} |")
    return "\n".join(lines)


def provenance(data, script="benchmarks/resource_usage.py",
               rest=f"all architectures and the raw figures: `{RESULTS}/{JSON_NAME}`"):
    """The sentence above a table of data: the compiler, commit and date, the script, then rest
    (example 08's ptxas_table.py says its own)."""
    return (f"Measured from the gpu preset's binaries (nvcc {data['nvcc']}, commit "
            f"{data['commit']}, {data['date']}) by `python3 {script}`; {rest}.")


def readme_block(data, label):
    return provenance(data) + "\n\n" + table(data["kernels"], label)


def marker(label):
    return re.compile(rf"(<!-- resources:{label} -->\n)(.*?)(<!-- /resources:{label} -->)", re.S)


def readme_tables(data, update, compare_rows_only=False):
    """README paths whose table differs from data (rewritten when update)."""
    stale = []
    for label, _, _, readme in BINARIES:
        if readme is None:
            continue
        path = os.path.join(ROOT, readme)
        text = read(path)
        m = marker(label).search(text)
        if not m:
            stale.append(f"{readme} (no <!-- resources:{label} --> markers)")
            continue
        want = readme_block(data, label) + "\n"
        if compare_rows_only:
            same = [l for l in m.group(2).splitlines() if l.startswith("|")] == \
                   [l for l in want.splitlines() if l.startswith("|")]
        else:
            same = m.group(2) == want
        if not same:
            stale.append(readme)
            if update:
                write(path, text[:m.start(2)] + want + text[m.end(2):])
    return stale


def markdown(data):
    parts = ["# Registers, spills and occupancy of the GPU kernels (ptxas)", "",
             provenance(data), ""]
    for label, _, _, _ in BINARIES:
        parts += [f"## {label}", "", table(data["kernels"], label), ""]
    return "\n".join(parts)


# ---- main --------------------------------------------------------------------------------------
def option(args, name, default=None):
    if name in args:
        i = args.index(name)
        if i + 1 >= len(args):
            die(f"{name} needs a value")
        return args[i + 1]
    return default


def load_json():
    path = os.path.join(ROOT, RESULTS, JSON_NAME)
    if not os.path.exists(path):
        die(f"{path} not found: run python3 benchmarks/resource_usage.py on a gpu build first")
    return json.loads(read(path))


def spilling(kernels):
    return [f"{k['example']} {k['kernel']} {k['variant']} {k['dtype']} D={k['D']} {arch}: "
            f"{r['spill_store_bytes']} B spill stores, {r['spill_load_bytes']} B spill loads"
            for k in kernels for arch, r in k["resources"].items()
            if arch in DEVICES and (r["spill_store_bytes"] or r["spill_load_bytes"])]


def main():
    args = sys.argv[1:]
    known = {"--update-readmes", "--check", "--verify", "--build", "--cuobjdump", "--ptxas", "-h",
             "--help"}
    for i, a in enumerate(args):
        if a.startswith("-") and a not in known:
            die(f"unknown option '{a}' (see --help)")
    if "-h" in args or "--help" in args:
        print(__doc__)
        return 0
    if "--update-readmes" in args or "--check" in args:
        stale = readme_tables(load_json(), update="--update-readmes" in args)
        if "--check" in args and stale:
            print("out of date (run python3 benchmarks/resource_usage.py --update-readmes): " +
                  ", ".join(stale))
            return 1
        print(("checked: " if "--check" in args else "updated: ") +
              (", ".join(stale) if stale else "all up to date"))
        return 0

    build = option(args, "--build", os.path.join(ROOT, "build", "gpu"))
    cuobjdump = find_tool("cuobjdump", option(args, "--cuobjdump"))
    ptxas = find_tool("ptxas", option(args, "--ptxas"))
    kernels = measure(build, cuobjdump, ptxas)

    if "--verify" in args:
        failures = spilling(kernels)
        for f in failures:
            print("spills: " + f)
        committed = load_json()
        fresh = {"kernels": kernels, "nvcc": committed["nvcc"], "commit": committed["commit"],
                 "date": committed["date"]}
        strip = lambda ks: [{x: k[x] for x in k if x != "binary"} for k in ks]
        if strip(committed["kernels"]) != strip(kernels):
            failures.append(f"{RESULTS}/{JSON_NAME} differs from the binaries in {build}")
        failures += [f"{p}: table differs from the binaries"
                     for p in readme_tables(fresh, update=False, compare_rows_only=True)]
        n = len(kernels)
        for f in failures[len(spilling(kernels)):]:
            print("stale: " + f + " (run python3 benchmarks/resource_usage.py)")
        print(f"{n} kernel configurations, {len(failures)} problem(s): "
              + ("FAIL" if failures else "PASS"))
        return 1 if failures else 0

    data = {
        "what": "compile-time resources of the GPU kernels and their theoretical occupancy",
        "nvcc": tool_version(shutil.which("nvcc") or ptxas.replace("ptxas", "nvcc")),
        "ptxas": tool_version(ptxas), "cuobjdump": tool_version(cuobjdump),
        "commit": git("rev-parse", "--short=12", "HEAD")
        + ("-dirty" if git(*KERNEL_INPUTS) else ""),
        "date": datetime.date.today().isoformat(),
        "device_limits": DEVICES, "kernels": kernels}
    out = os.path.join(ROOT, RESULTS)
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, JSON_NAME), json.dumps(data, indent=1) + "\n")
    write(os.path.join(out, MD_NAME), markdown(data))
    stale = readme_tables(data, update=True)
    print(f"wrote {RESULTS}/{JSON_NAME}, {RESULTS}/{MD_NAME}; updated: "
          + (", ".join(stale) if stale else "nothing"))
    for s in spilling(kernels):
        print("spills: " + s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
