#!/usr/bin/env python3
"""io_complexity.py — the chapter's memory claims measured with the simulator's profile
(common/cudasim/README.md, "The profile"), without a GPU.

1. The IO complexity of the FlashAttention paper (Dao et al., NeurIPS 2022, Theorem 2): standard
   attention makes Theta(N d + N^2) HBM accesses, FlashAttention Theta(N^2 d^2 / M) for an SRAM
   of M elements (d <= M <= N d). Examples 01 (standard), 02 and 03 (flash) are profiled over L
   and D; the traffic is fitted against each formula (least squares on relative error) and the
   fit's largest error is reported.
2. Shared-memory bank conflicts of example 03's versions 2 (padded rows) and 3 (XOR swizzle), and
   the coalescing (sectors per request) of the sparse kernels of examples 04 and 05.

Measured quantities (per launch, summed over a kernel's launches, B = H = 1):
    global bytes  32-byte sectors of every global request x 32: what the paper's model counts,
                  in which every load and store of global memory goes to HBM (no cache)
    DRAM bytes    what reaches DRAM under the profile's L2 model (LRU, 50 MiB, cold per launch)
    M             the kernel's dynamic shared memory per block, in elements of its dtype

    python3 benchmarks/io_complexity.py --run build/sim-check   profile the programs; writes
                                                                 benchmarks/results/profile/*.jsonl
    python3 benchmarks/io_complexity.py          rewrite the README tables from the records
    python3 benchmarks/io_complexity.py --check  exit 1 if a README table is out of date (CTest
                                                 docs.profile_tables_up_to_date)
    python3 benchmarks/io_complexity.py --plot   the figures (matplotlib), examples/*/images/
    --lengths 256,512,...  --dims 64,128        the grid of --run (default below)
    --only 01:1,03:2 (or memory)                 a part of the grid; parts can run at once
The whole grid (6 kernels, L = 256...4096, D = 64 and 128) took 37 minutes on a 2-core x86-64
machine as two jobs at once split with --only; its largest runs (L = 4096, D = 128) take 2 to 9
minutes each.
    python3 benchmarks/io_complexity.py --overhead build/sim build/sim-check
                                                 the profile's cost: CPU time of one program in
                                                 the plain build, the instrumented one, and with
                                                 --profile (benchmarks/results/profile/overhead.jsonl)
The tables and the fit use the standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "profile")
IO_FILE = os.path.join(RESULTS, "io_complexity.jsonl")
MEMORY_FILE = os.path.join(RESULTS, "memory_claims.jsonl")
OVERHEAD_FILE = os.path.join(RESULTS, "overhead.jsonl")

# (example folder, program, kernel id, dtype, formula)
IO_KERNELS = [
    ("03_flash_attention_v2", "flash2_fwd", 2, "f16", "flash"),
    ("03_flash_attention_v2", "flash2_fwd", 3, "f16", "flash"),
    ("02_flash_attention_minimal", "flash_fwd", 1, "f32", "flash"),
    ("03_flash_attention_v2", "flash2_fwd", 1, "f32", "flash"),
    ("01_attention_basics", "naive_attention", 1, "f32", "standard"),
    ("01_attention_basics", "naive_attention", 2, "f32", "standard"),
]
LENGTHS = [256, 512, 1024, 2048, 4096]
DIMS = [64, 128]
# The other claims, one problem each: (example, program, extra arguments).
MEMORY_RUNS = [
    ("03_flash_attention_v2", "flash2_fwd", ["--kernel", "2", "--dtype", "f16", "-L", "512",
                                             "-D", "64"]),
    ("03_flash_attention_v2", "flash2_fwd", ["--kernel", "3", "--dtype", "f16", "-L", "512",
                                             "-D", "64"]),
    ("04_sparse_patterns", "sparse_patterns", ["-L", "1024", "-D", "64", "--dtype", "f16",
                                               "--pattern", "bigbird:b=64,r=3,seed=1"]),
    ("05_deepseek_sparse", "deepseek_sparse", []),
    ("01_attention_basics", "naive_attention", ["-L", "128", "-D", "64"]),
    ("02_flash_attention_minimal", "flash_fwd", ["-L", "128", "-D", "64"]),
]
ELT = {"f32": 4, "f16": 2, "bf16": 2}


# ---- running ----------------------------------------------------------------------------------

def program_path(build, example, program):
    """The simulator build of an example program; exits with a clear error when it is missing."""
    exe = os.path.join(build, "examples", example, program + "_sim")
    if not os.access(exe, os.X_OK):
        sys.exit(f"error: {exe} is missing: build that tree first (for --run and the second "
                 "--overhead tree: cmake --preset sim-check && cmake --build --preset sim-check; "
                 "for the first --overhead tree: cmake --preset sim && cmake --build --preset sim)")
    return exe


def run_checked(cmd, env):
    """Runs cmd (output discarded); exits with its error output when it fails."""
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")


def run_program(build, example, program, args):
    """The JSON records of one run of a program with --profile (B = H = 1 unless args say)."""
    exe = program_path(build, example, program)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.jsonl")
        cmd = [exe, "--profile", "--quiet", "--json", out] + args
        start = time.time()
        # the checkers off (CUDASIM_CHECK=0): the profile alone observes the stream
        run_checked(cmd, dict(os.environ, CUDASIM_CHECK="0"))
        print(f"{time.time() - start:7.1f} s  {' '.join(cmd[:1] + args)}", flush=True)
        with open(out) as f:
            return [json.loads(line) for line in f if line.strip()]


# The overhead problem: example 02, checked once, no timing loop.
OVERHEAD_RUN = ("02_flash_attention_minimal", "flash_fwd",
                ["-B", "1", "-H", "1", "-L", "512", "-D", "64", "--check-only"])


def cpu_seconds(cmd, env):
    """CPU seconds of one run of cmd and its children; exits on failure."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run_checked(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def measure_overhead(sim_build, check_build, repeats=3):
    """The cost of the profile: the same run in the plain sim build, in the instrumented build
    with the checkers off, and with --profile; the least CPU time of `repeats` runs each."""
    example, program, args = OVERHEAD_RUN
    env = dict(os.environ, CUDASIM_CHECK="0", CUDASIM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.jsonl")
        for config, build, extra in (("sim", sim_build, []), ("sim-check", check_build, []),
                                     ("sim-check --profile", check_build,
                                      ["--profile", "--json", out])):
            exe = program_path(build, example, program)
            runs = [cpu_seconds([exe, "--quiet"] + args + extra, env) for _ in range(repeats)]
            cpu = round(min(runs), 2)
            print(f"{cpu:7.2f} s CPU  {config}: {' '.join([exe] + args + extra[:1])}", flush=True)
            rows.append({"config": config, "cpu_s": cpu, "repeats": repeats})
        with open(out) as f:
            prof = json.loads(f.readline())["profile"]
    rec = {"example": example, "args": " ".join(args), "threads": 1, "runs": rows,
           "requests": prof["global_requests"] + prof["shared_requests"],
           "machine": f"{os.cpu_count()} cores, {os.uname().machine}",
           "date": time.strftime("%Y-%m-%d")}
    write_jsonl(OVERHEAD_FILE, [rec])


def overhead_table(_example):
    recs = read_jsonl(OVERHEAD_FILE)
    if not recs:
        return ("(no record: run `python3 benchmarks/io_complexity.py --overhead build/sim "
                "build/sim-check`)\n")
    r = recs[0]
    cpu = {x["config"]: x["cpu_s"] for x in r["runs"]}
    out = ["| build | CPU s |", "|---|---|"]
    out += [f"| {x['config']} | {x['cpu_s']:.2f} |" for x in r["runs"]]
    lanes = 32 * r["requests"]  # every warp of example 02's kernel is whole (Br = 32 threads)
    per = (cpu["sim-check --profile"] - cpu["sim-check"]) / lanes * 1e9
    out.append("")
    out.append(f"Example 02, `{r['args']}`, `CUDASIM_THREADS=1 CUDASIM_CHECK=0`, the least of "
               f"{r['runs'][0]['repeats']} runs on {r['machine']} ({r['date']}). The profile "
               f"saw {r['requests']:,} warp requests of 32 lanes: "
               f"{per:.0f} ns per lane access profiled, over the instrumented build.")
    return "\n".join(out) + "\n"


def slim(r):
    keys = ("example", "kernel", "kernel_id", "dtype", "Lq", "Lk", "D", "B", "H", "causal",
            "status", "profile")
    return {k: r.get(k) for k in keys}


def record_key(r):
    return (r["example"], r["kernel"], r["dtype"], r["Lq"], r["D"])


def merge_into(path, new, key=record_key):
    """Replaces the records of path that new measures again (same key: kernel and problem), under
    a lock: jobs running parts of the grid at once (--only) share the file."""
    import fcntl
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keys = {key(r) for r in new}
        old = [r for r in read_jsonl(path) if key(r) not in keys]
        write_jsonl(path, sorted(old + new, key=key))


def run_all(build, lengths, dims, only):
    """Profiles the IO-complexity grid (kernels named by only, "01:2,03:1"; None: all) and the
    one-problem runs of MEMORY_RUNS (when only is None or names "memory"), record by record."""
    os.makedirs(RESULTS, exist_ok=True)
    for example, program, kid, dtype, _ in IO_KERNELS:
        if only is not None and f"{example[:2]}:{kid}" not in only:
            continue
        for d in dims:
            for n in lengths:
                args = ["--kernel", str(kid), "--dtype", dtype, "-B", "1", "-H", "1", "-L", str(n),
                        "-D", str(d)]
                merge_into(IO_FILE, [slim(r) for r in run_program(build, example, program, args)])
    if only is None or "memory" in only:
        for example, program, args in MEMORY_RUNS:
            merge_into(MEMORY_FILE, [slim(r) for r in run_program(build, example, program, args)])


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- the fit ----------------------------------------------------------------------------------

def global_bytes(r):
    return 32 * r["profile"]["global_sectors"]


def dram_bytes(r):
    return r["profile"]["dram_bytes"]


# The terms of the formulas (N = L, d = D, M = SRAM elements per block).
TERMS = {
    "N·d": lambda n, d, m: n * d,
    "N²": lambda n, d, m: n * n,
    "N²·d": lambda n, d, m: n * n * d,
    "N²·d²/M": lambda n, d, m: n * n * d * d / m,
}
# What is fitted, per family: (measured quantity, its name, terms). Standard attention: the
# paper's Theta(N d + N^2) is the DRAM traffic once a cache holds the operands a matrix product
# re-reads; the global requests of kernels whose products do not reuse data on chip add N^2 d.
# FlashAttention: the paper's Theta(N^2 d^2 / M) is the global traffic (tiles through shared
# memory); the DRAM traffic under a 50 MiB L2 is the compulsory N d.
FITS = {
    "standard": [(global_bytes, "global", ["N·d", "N²", "N²·d"]),
                 (dram_bytes, "DRAM", ["N·d", "N²"])],
    "flash": [(global_bytes, "global", ["N·d", "N²·d²/M"]), (dram_bytes, "DRAM", ["N·d"])],
}


def terms_of(r, names):
    n, d = r["Lq"], r["D"]
    m = r["profile"]["smem_bytes"] / ELT[r["dtype"]] if r["profile"]["smem_bytes"] else 1.0
    return [TERMS[t](n, d, m) for t in names]


def solve(a, b):
    """Gaussian elimination with partial pivoting: x with a x = b (a small and regular)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(measure, names, records):
    """Least squares of measure ≈ sum(c_i term_i) on relative error: (coefficients, largest
    |error| in %)."""
    rows = [[t / measure(r) for t in terms_of(r, names)] for r in records]
    k = len(names)
    a = [[sum(x[i] * x[j] for x in rows) for j in range(k)] for i in range(k)]
    b = [sum(x[i] for x in rows) for i in range(k)]
    c = solve(a, b)
    worst = max(abs(sum(ci * ti for ci, ti in zip(c, terms_of(r, names))) - measure(r))
                / measure(r) for r in records)
    return c, 100.0 * worst


def formula_text(coef, names):
    return " + ".join(f"{c:.3g}·{t}" for c, t in zip(coef, names))


# ---- the tables -------------------------------------------------------------------------------

def mb(x):
    return f"{x / 1e6:.3g}"


def io_table(example):
    recs = [r for r in read_jsonl(IO_FILE) if r["example"] == example and r.get("profile")]
    if not recs:
        return "(no records: run `python3 benchmarks/io_complexity.py --run build/sim-check`)\n"
    lengths = sorted({r["Lq"] for r in recs})
    out = ["| kernel | D | M (elements) | " + " | ".join(f"L={n}" for n in lengths) + " |",
           "|---|---|---|" + "---|" * len(lengths)]
    fits = []
    for _, _, kid, dtype, family in [k for k in IO_KERNELS if k[0] == example]:
        mine = [r for r in recs if r["kernel_id"] == kid]
        if not mine:
            continue
        name = mine[0]["kernel"]
        for measure, what, names in FITS[family]:
            if len({(r["Lq"], r["D"]) for r in mine}) <= len(names):
                fits.append(f"{name} ({dtype}), {what} bytes: too few problems to fit")
                continue
            coef, err = fit(measure, names, mine)
            fits.append(f"{name} ({dtype}), {what} bytes ≈ {formula_text(coef, names)}: largest "
                        f"error {err:.2f}% over {len(mine)} problems")
        for d in sorted({r["D"] for r in mine}):
            by_n = {r["Lq"]: r for r in mine if r["D"] == d}
            smem = {r["profile"]["smem_bytes"] // ELT[dtype] for r in by_n.values()}
            cells = ["–" if by_n.get(n) is None else
                     f"{mb(global_bytes(by_n[n]))} / {mb(dram_bytes(by_n[n]))}" for n in lengths]
            m_text = ", ".join(str(x) for x in sorted(smem)) if any(smem) else "static"
            out.append(f"| {name} ({dtype}) | {d} | {m_text} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Cells: MB of global-memory sectors requested (every load and store of global "
               "memory, as the paper's model counts HBM accesses, with no cache) / MB reaching "
               "DRAM under the profile's 50 MiB L2 model. M: the kernel's dynamic shared memory "
               "per block in elements. Least-squares fits on relative error:")
    out.append("")
    out += [f"- {f}" for f in fits]
    return "\n".join(out) + "\n"


def memory_table(example):
    recs = [r for r in read_jsonl(MEMORY_FILE) if r["example"] == example and r.get("profile")]
    if not recs:
        return "(no records: run `python3 benchmarks/io_complexity.py --run build/sim-check`)\n"
    out = ["| kernel | L | D | dtype | global requests | sectors/request | sector efficiency | "
           "shared requests | wavefronts | bank conflicts | DRAM MB | H100 bound µs |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        p = r["profile"]
        spr = p["global_sectors"] / p["global_requests"] if p["global_requests"] else 0.0
        out.append(f"| {r['kernel']} | {r['Lq']} | {r['D']} | {r['dtype']} | "
                   f"{p['global_requests']} | {spr:.2f} | {100 * p['sector_efficiency']:.1f}% | "
                   f"{p['shared_requests']} | "
                   f"{p['shared_wavefronts']} | {p['shared_conflicts']} | "
                   f"{mb(p['dram_bytes'])} | {p['bound_h100_s'] * 1e6:.3g} |")
    return "\n".join(out) + "\n"


BLOCKS = {"io_complexity": io_table, "memory": memory_table, "overhead": overhead_table}
READMES = [f"examples/{e}/README.md" for e in
           ["01_attention_basics", "02_flash_attention_minimal", "03_flash_attention_v2",
            "04_sparse_patterns", "05_deepseek_sparse"]] + ["common/cudasim/README.md"]


def update_blocks(rels, tag, render, check, command):
    """Rewrites every block <!-- TAG:NAME --> ... <!-- /TAG:NAME --> of the files rels (paths
    from the repository root) with render(NAME, rel); with check, writes nothing and returns 1
    (naming the command that regenerates them) when a block is out of date."""
    stale = []
    for rel in rels:
        path = os.path.join(ROOT, rel)
        with open(path) as f:
            text = f.read()

        def repl(m):
            return f"{m.group(1)}\n{render(m.group(2), rel)}{m.group(3)}"
        new = re.sub(rf"(<!-- {tag}:(\w+) -->)\n.*?(<!-- /{tag}:\2 -->)", repl, text, flags=re.S)
        if new != text:
            stale.append(rel)
            if not check:
                with open(path, "w") as f:
                    f.write(new)
    if check and stale:
        print(f"out of date ({command}): " + ", ".join(stale))
        return 1
    return 0


def update(check):
    return update_blocks(READMES, "profile", lambda name, rel: BLOCKS[name](rel.split("/")[1]),
                         check, "python3 benchmarks/io_complexity.py")


# ---- the figures ------------------------------------------------------------------------------

def plot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = [r for r in read_jsonl(IO_FILE) if r.get("profile")]
    for example in sorted({r["example"] for r in recs}):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for _, _, kid, dtype, formula in [k for k in IO_KERNELS if k[0] == example]:
            mine = [r for r in recs if r["example"] == example and r["kernel_id"] == kid]
            if not mine:
                continue
            measure, what, names = FITS[formula][0]
            if len(mine) <= len(names):
                continue
            coef, err = fit(measure, names, mine)
            for d in sorted({r["D"] for r in mine}):
                pts = sorted(((r["Lq"], r) for r in mine if r["D"] == d), key=lambda x: x[0])
                xs = [n for n, _ in pts]
                line, = ax.plot(xs, [measure(r) / 1e6 for _, r in pts], "o",
                                label=f"{mine[0]['kernel']} D={d} (measured)")
                ax.plot(xs, [sum(c * t for c, t in zip(coef, terms_of(r, names))) / 1e6
                             for _, r in pts], "-", color=line.get_color(),
                        label=f"fit {' + '.join(names)} (max err {err:.2f}%)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N (B = H = 1)")
        ax.set_ylabel("global memory traffic, MB (sectors x 32 B)")
        ax.set_title(f"{example}: measured on the simulator's profile vs the IO-complexity formula",
                     fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        out = os.path.join(ROOT, "examples", example, "images", "io_complexity.png")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        fig.tight_layout()
        fig.savefig(out, dpi=110)
        print("wrote", os.path.relpath(out, ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", metavar="BUILD", help="profile the programs of this build tree")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--dims", default=",".join(map(str, DIMS)))
    ap.add_argument("--only", help="with --run: these kernels (e.g. 01:1,03:2) and/or 'memory'")
    ap.add_argument("--overhead", nargs=2, metavar=("SIM_BUILD", "CHECK_BUILD"),
                    help="measure the profile's cost (plain build, instrumented build)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--plot", action="store_true")
    a = ap.parse_args()
    if a.run:
        run_all(a.run, [int(x) for x in a.lengths.split(",")], [int(x) for x in a.dims.split(",")],
                a.only.split(",") if a.only else None)
    if a.overhead:
        measure_overhead(*a.overhead)
    if a.plot:
        plot()
    return update(a.check)


if __name__ == "__main__":
    import bench_results  # the one __main__ wrapper: a missing package is one line
    bench_results.run_main(lambda argv: main())
