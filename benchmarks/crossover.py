#!/usr/bin/env python3
"""crossover.py — when does sparse attention pay? The crossover lab and the quality-speed frontier
(benchmarks/README.md, "When does sparse attention pay?"). Every time and speed-up it prints is a
MODEL (cost_model.py), built on counts the simulator's profile measured.

    .venv/bin/python benchmarks/crossover.py        every table (benchmarks/README.md, example 06's
                                                    README) and figure (results/model/*.png) from
                                                    the committed records: the one command. The
                                                    tile geometry of quality patterns the model
                                                    does not build itself comes from example 04's
                                                    PyTorch block masks, cached in
                                                    results/model/geometry.json
    python3 benchmarks/crossover.py --check         exit 1 if a table is out of date or the count
                                                    model's error against the profile is above what
                                                    the README claims (CTest docs.crossover_tables)
    python3 benchmarks/crossover.py --no-plot       the tables only (standard library; the cached
                                                    geometry)
    python3 benchmarks/crossover.py --run build/sim-check [--only 04,05,06]
                                                    profile the plan on the simulator (hours on 2
                                                    shared cores; resumable): writes
                                                    results/profile/crossover.jsonl
    --quality DIR       the quality toolkit's results (default quality/results)
    --device DIR        GPU results of gpu.sh's 'crossover' step (default: every
                        benchmarks/results/<device>/crossover.jsonl): measured columns, and the
                        model's parameters fitted to them (cost_model.fit_device)

The lab: each sparse kernel of examples 04, 05 and 06 against dense FA2 (causal), B = 1, 16 heads
of D = 128, fp16, L from 256 to 128K, density (of the causal entries) from 1 % to 100 %.
"""
import argparse
import glob
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cost_model as cm  # noqa: E402
import io_complexity  # noqa: E402  (the profile runner, JSON Lines and README-block helpers)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "quality"))
import stats  # noqa: E402  (the quality toolkit's paired t-test; standard library only)

ROOT = os.path.dirname(HERE)
PROFILE_FILE = os.path.join(ROOT, "benchmarks", "results", "profile", "crossover.jsonl")
MODEL_DIR = os.path.join(ROOT, "benchmarks", "results", "model")
GEOMETRY_FILE = os.path.join(MODEL_DIR, "geometry.json")
SWEEP_FILE = os.path.join(MODEL_DIR, "crossover.json")
QUALITY_DIR = os.path.join(ROOT, "quality", "results")
READMES = ["benchmarks/README.md", "examples/06_custom_pattern/README.md"]
COMMAND = ".venv/bin/python benchmarks/crossover.py"

# What the README claims of the count model (checked by --check against the profile records):
# the largest relative error of a modelled time (counts from the count model against counts the
# profile measured, both timed by the same model), and of each count.
CLAIM_TIME_ERR = 0.05
CLAIM_COUNT_ERR = 0.10

# ---- the simulator's counts: what is profiled ---------------------------------------------------
# (example, program, kernel id or None for all, extra arguments). B = 1, f16; example 05 runs its
# 16 heads sharing one selection (MQA, its kernels' shape), examples 04 and 06 one head.
PROFILE_LENGTHS = (256, 512, 1024, 2048)
PROFILE_DIMS = (64, 128)
KERNEL_NAMES = {"05_deepseek_sparse": {1: "indexer", 3: "topk_radix", 4: "sparse_mma",
                                       6: "end_to_end"}}


def profile_plan(lengths=PROFILE_LENGTHS, dims=PROFILE_DIMS):
    plan = []
    for D in dims:
        for L in lengths:
            base = ["-B", "1", "-L", str(L), "-D", str(D), "--dtype", "f16", "--check-rows", "64"]
            for w in (L // 16, L // 4):
                plan.append(("04_sparse_patterns", "sparse_patterns", None,
                             base + ["-H", "1", "--causal", "--pattern", f"causal_window:w={w}"]))
            if L >= 512:
                plan.append(("04_sparse_patterns", "sparse_patterns", None,
                             base + ["-H", "1", "--pattern", f"window:w={L // 16}"]))
                plan.append(("04_sparse_patterns", "sparse_patterns", None,
                             base + ["-H", "1", "--pattern", f"dilated:w={L // 64},d=4"]))
                plan.append(("06_custom_pattern", "custom_pattern", None,
                             base + ["-H", "1", "--causal", "--pattern", "ladder:b=64,s=1,w=2"]))
            # example 05: the indexer (16 x 64: D does not enter it, nor does k) and the top-k
            # (k does) at D = 64, the attention at both D, the whole pipeline once per k
            for k in (64, 256) if L <= 1024 else ():
                args = base + ["-H", "16", "--causal", "--topk", str(k)]
                kids = ([1] if k == 64 and D == 64 else []) + ([3] if D == 64 else []) + [4] + (
                    [6] if L == 256 and D == 64 else [])
                plan += [("05_deepseek_sparse", "deepseek_sparse", kid, args) for kid in kids]
    return plan


def record_key(r):
    return (r["example"], r["kernel"], r["dtype"], r["Lq"], r["D"], r["H"], r["causal"],
            r.get("pattern") or "", r.get("topk") or 0)


def arg(args, flag, default=None, cast=str):
    return cast(args[args.index(flag) + 1]) if flag in args else default


def slim(r, args):
    keys = ("example", "kernel", "kernel_id", "dtype", "Lq", "Lk", "D", "B", "H", "causal",
            "status", "profile", "topk", "index_heads", "index_dim", "chunk")
    out = {k: r.get(k) for k in keys if k in r}
    out["pattern"] = arg(args, "--pattern")
    return out


def run_profiles(build, only=None):
    """Profiles the plan (the entries whose example starts with one of `only`), one program run at
    a time, merging each run's records into PROFILE_FILE at once: a restart skips the runs whose
    records are there."""
    plan = profile_plan()
    have = {record_key(r) for r in io_complexity.read_jsonl(PROFILE_FILE)}
    for n, (example, program, kid, args) in enumerate(plan):
        if only and not any(example.startswith(o) for o in only):
            continue
        full = args + (["--kernel", str(kid)] if kid else [])
        problem = ("f16", arg(args, "-L", cast=int), arg(args, "-D", cast=int),
                   arg(args, "-H", cast=int), "--causal" in args, arg(args, "--pattern", ""),
                   arg(args, "--topk", 0, int))
        if any(k[0] == example and k[2:] == problem
               and (kid is None or k[1] == KERNEL_NAMES[example][kid]) for k in have):
            continue
        print(f"[{n + 1}/{len(plan)}]", end=" ", flush=True)
        recs = [slim(r, args) for r in io_complexity.run_program(build, example, program, full)
                if r.get("status") != "SKIP"]  # a kernel that does not serve the pattern
        bad = [r for r in recs if r.get("status") != "PASS" or not r.get("profile")]
        if bad:
            sys.exit(f"error: {program} {' '.join(full)}: {bad[0]['kernel']} {bad[0]['status']}")
        io_complexity.merge_into(PROFILE_FILE, recs, key=record_key)
        have |= {record_key(r) for r in recs}


# ---- the count model against the profile ---------------------------------------------------------

def profile_records():
    return [r for r in io_complexity.read_jsonl(PROFILE_FILE) if r.get("profile")]


def model_errors(records, coef, dev):
    """Per record: the relative error of each count (model vs profile) and of the modelled time
    (count model's counts vs the profile's, one model timing both)."""
    out = []
    for r in records:
        mc = cm.model_counts_of_record(r, coef)
        me = cm.measured_counts(r, mc)
        # a kernel without mma: the profile counts no FLOPs (its figure is the harness's count)
        flops = (mc.flops_tc - me.flops_tc) / me.flops_tc if me.flops_tc else None
        out.append(dict(
            r=r, flops=flops,
            dram=(mc.dram - me.dram) / me.dram, l1=(mc.l1 - me.l1) / me.l1,
            launches=mc.launches - me.launches,
            time=(cm.time_s(mc, dev) - cm.time_s(me, dev)) / cm.time_s(me, dev)))
    return out


def error_summary(errs):
    """{kernel: dict(n, L, worst errors, held-out L)} over records, kernels in a fixed order."""
    order = ["dense_fa2", "block_sparse", "window", "gather", "indexer", "topk_radix",
             "sparse_mma", "end_to_end"]
    out = {}
    for e in errs:
        k = e["r"]["kernel"]
        s = out.setdefault(k, dict(n=0, Ls=set(), Ds=set(), flops=None, dram=0.0, l1=0.0,
                                   time=0.0, launches=0, held=0.0, examples=set()))
        s["n"] += 1
        s["Ls"].add(e["r"]["Lq"])
        s["Ds"].add(e["r"]["D"])
        s["examples"].add(e["r"]["example"][:2])
        for q in ("dram", "l1", "time"):
            s[q] = max(s[q], abs(e[q]))
        if e["flops"] is not None:
            s["flops"] = max(s["flops"] or 0.0, abs(e["flops"]))
        s["launches"] = max(s["launches"], abs(e["launches"]))
    for e in errs:
        s = out[e["r"]["kernel"]]
        if e["r"]["Lq"] == max(s["Ls"]):
            s["held"] = max(s["held"], abs(e["time"]))
    return {k: out[k] for k in order if k in out}


def worst_errors(summary):
    return (max((s["time"] for s in summary.values()), default=0.0),
            max((max(s["flops"] or 0.0, s["dram"], s["l1"]) for s in summary.values()),
                default=0.0))


def pct(x):
    return f"{100 * x:.2f} %"


def error_table(summary, coef):
    out = ["| kernel | examples | profiled L | D | records | FLOPs | DRAM bytes | L1 wavefronts "
           "| launches | modelled time | time at the largest L (held out of the fit) |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k, s in summary.items():
        Ls = sorted(s["Ls"])
        out.append(f"| `{k}` | {', '.join(sorted(s['examples']))} | {Ls[0]}–{Ls[-1]} | "
                   f"{', '.join(map(str, sorted(s['Ds'])))} | {s['n']} | "
                   f"{'no mma' if s['flops'] is None else pct(s['flops'])} | "
                   f"{pct(s['dram'])} | {pct(s['l1'])} | {s['launches']} | {pct(s['time'])} | "
                   f"{pct(s['held'])} |")
    t, c = worst_errors(summary)
    out.append("")
    out.append(f"Largest relative errors of the count model against the simulator's profile, "
               f"over {sum(s['n'] for s in summary.values())} profiled runs "
               f"(`results/profile/crossover.jsonl`): modelled time {pct(t)}, a count "
               f"{pct(c)} (claimed: at most {pct(CLAIM_TIME_ERR)} and {pct(CLAIM_COUNT_ERR)}; "
               f"`--check` fails above). Tensor FLOPs (the profile's mma count; *no mma*: a "
               f"CUDA-core kernel, whose FLOPs the profile does not count), launches and the "
               f"compulsory DRAM bytes are formulas; L1 wavefronts are fitted (least squares "
               f"on relative error) on the runs below each kernel's largest L, whose error is "
               f"the last column. Fitted "
               f"coefficients (wavefronts per term, per head):")
    out.append("")
    for k, c_ in coef.items():
        terms = cm.COUNT_TERMS[cm.FAMILY[k]]
        # a coefficient below 1e-6 is the solver's rounding of a term the data do not need
        out.append(f"- `{k}`: " + " + ".join(f"{a:.4g}·{t}" for a, t in zip(c_, terms)
                                              if abs(a) > 1e-6).replace("+ -", "− "))
    return "\n".join(out) + "\n"


def params_table():
    out = ["| parameter | value | source |", "|---|---:|---|"]
    fmt = {"FLOP/s": lambda v: f"{v / 1e12:g} TFLOP/s", "B/s": lambda v: f"{v / 1e12:g} TB/s",
           "B": lambda v: f"{v / 2 ** 20:g} MiB", "Hz": lambda v: f"{v / 1e9:g} GHz",
           "s": lambda v: f"{v * 1e6:g} µs"}
    for name, (v, unit, src) in cm.H100_PARAMS.items():
        out.append(f"| `{name}` | {fmt.get(unit, lambda x: f'{x:g} {unit}'.strip())(v)} | {src} |")
    out.append(f"| `MASK_OPS` | {cm.MASK_OPS} INT32 ops per entry | assumed (the per-element "
               f"mask of a masked tile) |")
    out.append(f"| `TILE_TEST_OPS` | {cm.TILE_TEST_OPS} INT32 ops per tile | assumed (a block-mask "
               f"builder's test of one tile) |")
    return "\n".join(out) + "\n"


# ---- the lab: every sparse kernel against dense FA2 --------------------------------------------

LAB_SHAPE = dict(B=1, H=16, D=128, dtype="f16")  # causal; example 05: 16 heads share one K/V
LAB_LENGTHS = [256 << i for i in range(10)]    # 256 ... 131072
LAB_DENSITIES = [0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.00]
PROFILED_MAX_L = max(PROFILE_LENGTHS)           # above it the counts are extrapolated


def dense_stages(L, coef, shape=LAB_SHAPE, causal=True):
    s = shape
    geo = cm.dense_geometry(L, causal)
    return {"attention": cm.fa2_counts("dense_fa2", geo, s["B"], s["H"], s["D"], s["dtype"], coef)}


def tile_kernel_stages(kernel, geo, coef, shape, build):
    """A tile kernel of example 04/06 over geometry geo; build: its metadata made per call
    ("mask": the block mask, "csr": the CSR lists) or not (None: cached, or none needed)."""
    s = shape
    st = {}
    if build == "mask":
        st["mask build"] = cm.mask_build_counts(geo, s["B"])
    elif build == "csr":
        st["CSR build"] = cm.csr_build_counts(geo, s["B"])
    if kernel == "gather":
        st["attention"] = cm.gather_counts(geo, s["B"], s["H"], s["D"], s["dtype"], coef)
    else:
        st["attention"] = cm.fa2_counts(kernel, geo, s["B"], s["H"], s["D"], s["dtype"], coef,
                                        metadata=kernel == "block_sparse")
    return st


def dsa_stages(L, k, coef, shape, HI=16, DI=64, oracle=False):
    s = shape
    st = cm.dsa_stage_counts(s["B"], s["H"], L, s["D"], k, s["dtype"], coef, HI, DI)
    return {"attention": st["attention"]} if oracle else st


def causal_window(L, density, coef, shape, kernel, build):
    w = cm.window_w_for(L, density)
    geo = cm.band_geometry(L, 1 - w, 0, True)
    return tile_kernel_stages(kernel, geo, coef, shape, build), geo.density, f"causal_window:w={w}"


def ladder(L, density, coef, shape):
    w = cm.ladder_w_for(L, density)
    if w is None:
        return None
    geo = cm.ladder_geometry(L, w)
    return (tile_kernel_stages("block_sparse", geo, coef, shape, "mask"), geo.density,
            f"ladder:b=64,s=1,w={w}")


def dsa(L, density, coef, shape):
    k = cm.dsa_k_for(L, density)
    sums = cm.dsa_sums(L, k)
    return dsa_stages(L, k, coef, shape), sums.selected / (L * (L + 1) / 2), f"top-k k={k}"


# (key, label, example, function(L, density, coef, shape) -> (stages, density, parameters) | None)
LAB = [
    ("window", "04 `window` (causal window, no metadata)", "04",
     lambda L, d, c, s: causal_window(L, d, c, s, "window", None)),
    ("block_sparse_cached", "04 `block_sparse` (causal window, mask cached)", "04",
     lambda L, d, c, s: causal_window(L, d, c, s, "block_sparse", None)),
    ("block_sparse", "04 `block_sparse` (causal window, mask built per call)", "04",
     lambda L, d, c, s: causal_window(L, d, c, s, "block_sparse", "mask")),
    ("gather", "04 `gather` (causal window, CSR built per call)", "04",
     lambda L, d, c, s: causal_window(L, d, c, s, "gather", "csr")),
    ("ladder", "06 `block_sparse` (ladder, mask built per call)", "06", ladder),
    ("dsa", "05 DSA end to end (indexer 16×64, `topk_radix`, `sparse_mma`)", "05", dsa),
]
LABELS = {k: label for k, label, _, _ in LAB}


def stage_split(stages, dev):
    """{stage: (launch seconds, body seconds)} of a pipeline."""
    out = {}
    for name, c in stages.items():
        p = cm.time_parts(c, dev)
        out[name] = (p["launch"], p["body"], p["bound"])
    return out


def sweep(coef, dev, lengths=LAB_LENGTHS, densities=LAB_DENSITIES, shape=LAB_SHAPE):
    """The lab's grid: {key: {density: {L: cell}}}, cell = None (the pattern cannot reach the
    density at this L) or dict(density, params, t_dense, t, speedup, stages)."""
    dense = {L: cm.pipeline_time(dense_stages(L, coef, shape), dev)[1] for L in lengths}
    out = {}
    for key, _, _, fn in LAB:
        out[key] = {}
        for d in densities:
            row = out[key][d] = {}
            for L in lengths:
                got = fn(L, d, coef, shape)
                if got is None:
                    row[L] = None
                    continue
                stages, dens, params = got
                per, total = cm.pipeline_time(stages, dev)
                row[L] = dict(density=dens, params=params, t_dense=dense[L], t=total,
                              speedup=dense[L] / total, stages=stage_split(stages, dev))
    return out


def share(x):
    """A fraction as a percentage: whole percents from 1 %, two significant digits below."""
    return f"{100 * x:.0f} %" if x >= 0.01 else f"{100 * x:.2g} %"


def fmt_x(x):
    """A speed-up: two decimals below 2 (so that 0.96× and 1.04× are not both "1.0×")."""
    return f"{x:.2f}×" if x < 2 else f"{x:.1f}×"


def fmt_L(L):
    return f"{L // 1024}K" if L >= 1024 and L % 1024 == 0 else str(L)


FIXED_DENSITY_NOTE = 0.10  # the density of the notes under the break-even table


def break_even(row, margin=0.0):
    """The smallest L of the grid from which the kernel is faster than dense at every larger L
    the pattern reaches (by more than the relative margin); 'never' when it is not at the
    largest; None when never reachable."""
    Ls = sorted(L for L, c in row.items() if c is not None)
    if not Ls:
        return None
    if row[Ls[-1]]["speedup"] <= 1.0 + margin:
        return "never"
    first = Ls[-1]
    for L in reversed(Ls):
        if row[L]["speedup"] <= 1.0 + margin:
            break
        first = L
    return first


def device_label(dev):
    """Whose parameters a figure uses: the named GPU's (the parameter table), or those fitted to a
    GPU's measurements (fitted_device)."""
    label = dev["name"].split(",")[0] + " parameters"
    return label + (f" fitted to {dev['fitted_to']}" if dev.get("fitted_to") else "")


DEVICE_LABEL = device_label(cm.DEVICES[cm.DEFAULT_DEVICE])  # main() sets it to the device used


def model_caption():
    return f"*Model* (`cost_model.py`, {DEVICE_LABEL}; not measured)."


def break_even_table(sw, margin=0.0):
    """The break-even table; a cell whose break-even rests on speed-ups within `margin` (the count
    model's largest error against the profile) gives the break-even with that margin beside it."""
    flagged = []
    out = [model_caption(), "",
           "| kernel | " + " | ".join(f"{100 * d:g} %" for d in LAB_DENSITIES) + " |",
           "|---|" + "---:|" * len(LAB_DENSITIES)]
    for key, label, _, _ in LAB:
        cells = []
        for d in LAB_DENSITIES:
            row = sw[key][d]
            b = break_even(row)
            reach = min((L for L, c in row.items() if c is not None), default=None)
            if b is None:
                cells.append("—")
            elif b == "never":
                best = max(c["speedup"] for c in row.values() if c is not None)
                cells.append(f"never (best {fmt_x(best)})")
            else:
                top = row[max(LAB_LENGTHS)]
                bm = break_even(row, margin)
                within = "" if bm == b else (
                    f" (†: {row[b]['speedup']:.3f}× there; "
                    + (f"{fmt_L(bm)} with the margin)" if isinstance(bm, int)
                       else "never with the margin)"))
                if within:
                    flagged.append(label)
                cells.append(f"{fmt_L(b)}" + (f" (reached from {fmt_L(reach)})"
                                              if reach and reach > LAB_LENGTHS[0] and reach == b
                                              else "") + within
                             + f"; {fmt_x(top['speedup'])} at 128K")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    if flagged:
        out += ["", f"†: the break-even rests on modelled speed-ups within the count model's "
                    f"largest error against the profile ({pct(margin)}, above): the cell gives "
                    f"the speed-up at that L and the smallest L from which the kernel is faster "
                    f"than dense by more than that margin."]
    return "\n".join(out) + "\n"


def dsa_reread_note(coef, dev, density=FIXED_DENSITY_NOTE):
    """Where DSA's speed-up drops between two lengths of the grid, and how much of the drop is the
    top-k's stated re-read assumption (rows longer than its shared-memory candidates read again
    from DRAM once the rows in flight exceed the L2): the same cells with the re-read left out."""
    s = LAB_SHAPE
    dense = {L: cm.pipeline_time(dense_stages(L, coef, s), dev)[1] for L in LAB_LENGTHS}
    with_, without = {}, {}
    for L in LAB_LENGTHS:
        k = cm.dsa_k_for(L, density)
        st = dsa_stages(L, k, coef, s)
        with_[L] = dense[L] / cm.pipeline_time(st, dev)[1]
        st2 = dict(st, **{"top-k": cm.dsa_stage_counts(
            s["B"], s["H"], L, s["D"], k, s["dtype"], coef, l2_bytes=float("inf"))["top-k"]})
        without[L] = dense[L] / cm.pipeline_time(st2, dev)[1]
    Ls = list(LAB_LENGTHS)
    drops = [(with_[a] - with_[b], a, b) for a, b in zip(Ls, Ls[1:])]
    _, a, b = max(drops)
    return (f"DSA at {100 * density:g} % density drops from {fmt_x(with_[a])} at {fmt_L(a)} to "
            f"{fmt_x(with_[b])} at {fmt_L(b)}: that is the top-k's re-read assumption (stated "
            f"above: rows longer than its shared-memory candidates are read three more times "
            f"once the rows in flight exceed the L2), which the model switches on between those "
            f"lengths. Without it the same cells give {fmt_x(without[a])} and "
            f"{fmt_x(without[b])}, and {fmt_x(without[max(Ls)])} at 128K instead of "
            f"{fmt_x(with_[max(Ls)])}. The profile never saw such rows (at most 1,024 long): "
            f"the cliff is an assumption's, not a measurement's.\n")


ETA_FACTOR = 0.8


def eta_sensitivity(sw, coef, dev, density=FIXED_DENSITY_NOTE, L=131072):
    """The lab's speed-ups at one length and density with the sparse kernels' efficiencies
    (eta_tensor, eta_cuda) lowered by ETA_FACTOR while dense FA2 keeps the device's."""
    slow = dict(dev, eta_tensor=ETA_FACTOR * dev["eta_tensor"],
                eta_cuda=ETA_FACTOR * dev["eta_cuda"])
    dense = cm.pipeline_time(dense_stages(L, coef, LAB_SHAPE), dev)[1]
    parts = []
    for key, label, _, fn in LAB:
        got = fn(L, density, coef, LAB_SHAPE)
        if got is None or sw[key][density].get(L) is None:
            continue
        parts.append(f"{label} {fmt_x(sw[key][density][L]['speedup'])} → "
                     f"{fmt_x(dense / cm.pipeline_time(got[0], slow)[1])}")
    return (f"**Sensitivity to the one η.** Every kernel, dense and sparse, gets the same "
            f"efficiencies (η_tensor, η_cuda above), so the model makes them equally good at "
            f"their own work by construction; a sparse kernel's gathers, masks and shorter rows "
            f"may well reach less. With the sparse kernels at {ETA_FACTOR:g}× those efficiencies "
            f"and dense FA2 unchanged, the speed-ups at {fmt_L(L)} and {100 * density:g} % "
            f"become: " + "; ".join(parts) + " (stages bound by memory traffic do not move). A GPU "
            f"fit (below) measures the efficiencies instead.\n")


FIXED_LENGTHS = [256, 1024, 4096, 16384, 65536, 131072]
FIXED_DENSITY = 0.10
FIXED_KERNELS = ["block_sparse", "gather", "ladder", "dsa"]


def overheads(cell):
    """What a sparse kernel pays beyond its attention stage's work, in seconds: every launch, the
    metadata built per call, the indexer and the top-k."""
    st = cell["stages"]
    out = {"launches": sum(launch for launch, _, _ in st.values())}
    for name in ("mask build", "CSR build", "indexer", "top-k"):
        if name in st:
            out[name] = st[name][1]
    return out


def fixed_cost_table(sw):
    out = [model_caption(), "",
           "| L | " + " | ".join(LABELS[k] for k in FIXED_KERNELS) + " |",
           "|---:|" + "---|" * len(FIXED_KERNELS)]
    for L in FIXED_LENGTHS:
        cells = []
        for k in FIXED_KERNELS:
            c = sw[k][FIXED_DENSITY].get(L)
            if c is None:
                cells.append("— (the pattern is denser at this L)")
                continue
            ov = overheads(c)
            name = max(ov, key=ov.get)
            cells.append(f"{fmt_x(c['speedup'])}; {name} {share(ov[name] / c['t'])}, "
                         f"attention {share(c['stages']['attention'][1] / c['t'])}")
        out.append(f"| {fmt_L(L)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


# ---- the seed's 128K table --------------------------------------------------------------------
# The course's table: PyTorch dense against our kernels at 128K at the seed's sparsities, not
# causal, B = 1, 16 heads of D = 128, fp16. (row, pattern spec, our kernels for it, sparsity label)
SEED_SHAPE = dict(B=1, H=16, D=128, dtype="f16")
SEED_L = 131072
SEED_ROWS = [("Sliding window", "window:w=655", ("window",), "99 %"),
             ("Block-sparse (BigBird, b = 256)", "bigbird:b=256,r=9,seed=1", ("block_sparse",),
              "97 %"),
             ("Dilated (d = 4)", "dilated:w=1310,d=4", ("block_sparse", "gather"), "98 %")]
SEED_TARGET = "5–10×"


def torch_sparse_counts(geo, B, H, D, dtype):
    """A model of PyTorch's CSR path (torch.sparse.sampled_addmm for the scores, a softmax over
    each row's values, a sparse x dense product with V), per head: CUDA-core FLOPs 4 nnz D; per
    kept entry a K row and a V row through L1, the value written and read back by each of the
    three steps (fp32 scores, 2 bytes after the cast) and the int64 column index read twice;
    six launches per head. Not profiled: PyTorch's kernels are not the chapter's."""
    nnz, L = geo.entries, geo.L
    e = cm.ELT[dtype]
    per_head = nnz * (4 + 4 + 4 + 2 + 2 + 8 + 8) + e * 4 * L * D + 8 * (L + 1)
    return cm.Counts(flops_cc=4.0 * B * H * nnz * D, dram=B * H * per_head,
                   l1=B * H * 2 * nnz * D * e / 128.0, launches=6 * B * H)



def seed_table_model(coef, dev):
    """Rows of the 128K table by the model: (row, spec, density, dense ms, torch.sparse ms,
    {kernel: ms}, best kernel, speed-up of the best over PyTorch dense)."""
    s = SEED_SHAPE
    dense = cm.time_s(cm.fa2_counts("dense_fa2", cm.dense_geometry(SEED_L, False), s["B"], s["H"],
                                    s["D"], s["dtype"], coef), dev)
    rows = []
    for name, spec, kernels, sparsity in SEED_ROWS:
        geo = cm.geometry_of(spec, SEED_L, False)
        ours = {}
        for k in kernels:
            build = None if k == "window" else ("csr" if k == "gather" else "mask")
            ours[k] = cm.pipeline_time(tile_kernel_stages(k, geo, coef, s, build), dev)[1]
        best = min(ours, key=ours.get)
        ts = cm.time_s(torch_sparse_counts(geo, s["B"], s["H"], s["D"], s["dtype"]), dev)
        rows.append(dict(row=name, spec=spec, sparsity=sparsity, density=geo.density,
                         dense=dense, torch_sparse=ts, ours=ours, best=best,
                         speedup=dense / ours[best]))
    return rows


def ms(t):
    return f"{t * 1e3:.3g} ms"


# ---- measured on a GPU (gpu.sh, step crossover) -------------------------------------------------
# bench_attention --grid crossover,seed-128k and bench_torch.py --grid seed-128k write
# benchmarks/results/<device>/crossover.jsonl and crossover_torch.jsonl.

def device_dirs(given=None):
    if given:
        return [given]
    return sorted(os.path.dirname(p) for p in glob.glob(
        os.path.join(ROOT, "benchmarks", "results", "*", "crossover.jsonl")))


def gpu_records(folder):
    recs = []
    for name in ("crossover.jsonl", "crossover_torch.jsonl"):
        recs += [r for r in io_complexity.read_jsonl(os.path.join(folder, name))
                 if r.get("status") == "PASS" and r.get("median_ms") and not r.get("simulated")]
    return recs


def record_stages(r, coef):
    """The model's stages for a measured bench_attention record (a kernel of examples 04/06 on
    its pattern, or the dense baseline), or None when the model has no geometry for it."""
    shape = dict(B=r["B"], H=r["H"], D=r["D"], dtype=r["dtype"])
    kernel = r["impl"].split("/")[-1]
    pattern = r.get("pattern") or "dense"
    try:
        if kernel in ("dense_fa2", "fa2_mma") or pattern == "dense":
            return dense_stages(r["Lq"], coef, shape, r["causal"])
        geo = cm.geometry_of(pattern, r["Lq"], r["causal"])
    except ValueError:
        return None
    if kernel not in ("block_sparse", "window", "gather"):
        return None
    # as bench_attention runs them: the block mask and the CSR are built before the timing
    return tile_kernel_stages(kernel, geo, coef, shape, None)


def fit_samples(folder, coef):
    out = []
    for r in gpu_records(folder):
        if r["impl"].startswith("torch/"):
            continue
        st = record_stages(r, coef)
        if st is not None:
            out.append((st, r["median_ms"] * 1e-3, r))
    return out


def device_fits(coef, dev):
    """[(device folder name, runs, fitted parameters, errors, samples)] of every GPU results
    folder with enough runs for a fit (cost_model.fit_device)."""
    rows = []
    for folder in device_dirs(ARGS.device if ARGS else None):
        samples = fit_samples(folder, coef)
        if len(samples) >= 4:
            fitted, err = cm.fit_device([(st, t) for st, t, _ in samples], dev)
            rows.append((os.path.basename(folder), len(samples), fitted, err, samples))
    return rows


def fitted_device(dev, fits):
    """The device whose parameters the tables use: dev, or dev fitted to the first GPU's runs."""
    if not fits:
        return dev
    name, _, fitted, _, _ = fits[0]
    d = cm.with_fit(dev, [fitted[p] for p in cm.FIT_PARAMS])
    d["fitted_to"] = name
    return d


def measured_speedups(samples, dev):
    """{(L, pattern): {kernel: (measured speed-up over dense FA2, the model's with dev)}} of the
    causal runs whose dense baseline was measured at the same L and shape (the fastest of its
    runs)."""
    dense = {}
    for st, t, r in samples:
        key = (r["Lq"], r["B"], r["H"], r["D"], r["dtype"])
        if r["impl"].endswith("/dense_fa2") and r["causal"] and t < dense.get(key, (1e30,))[0]:
            dense[key] = (t, cm.pipeline_time(st, dev)[1])
    out = {}
    for st, t, r in samples:
        key = (r["Lq"], r["B"], r["H"], r["D"], r["dtype"])
        kernel = r["impl"].split("/")[-1]
        if kernel == "dense_fa2" or not r["causal"] or key not in dense:
            continue
        td, md = dense[key]
        out.setdefault((r["Lq"], r.get("pattern")), {})[kernel] = (
            td / t, md / cm.pipeline_time(st, dev)[1])
    return out


def measured_table(name, samples, dev):
    rows = measured_speedups(samples, dev)
    if not rows:
        return []
    kernels = [k for k in ("window", "block_sparse", "gather")
               if any(k in v for v in rows.values())]
    out = [f"Measured on {name}: speed-up over dense FA2 (causal), the fitted model's in "
           f"brackets (the block mask and the CSR built before the timing):", "",
           "| L | pattern | density | " + " | ".join(f"`{k}`" for k in kernels) + " |",
           "|---:|---|---:|" + "---:|" * len(kernels)]
    dens = {key: cm.geometry_of(key[1], key[0], True).density for key in rows}
    for (L, pattern), v in sorted(rows.items(), key=lambda x: (x[0][0], dens[x[0]])):
        out.append(f"| {fmt_L(L)} | `{pattern}` | {100 * dens[L, pattern]:.1f} % | " + " | ".join(
            f"{fmt_x(v[k][0])} ({fmt_x(v[k][1])})" if k in v else "—" for k in kernels) + " |")
    return ["", *out]


def fit_table(fits, dev=cm.DEVICES[cm.DEFAULT_DEVICE]):
    if not fits:
        return ("No GPU measurements yet: every figure of this section is the model with the "
                "parameters above. On a GPU, `benchmarks/gpu.sh --steps build,crossover` measures "
                "the lab's kernels and the 128K table; this block then shows the parameters "
                "fitted to them, the fit's error and the measured speed-ups beside the fitted "
                "model's, and the 128K table gains its measured columns.\n")
    out = ["| device | runs | eta_tensor | eta_cuda | t_launch | L1 rate × | mask ops × | "
           "fit error (largest, RMS) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, n, f, err, _ in fits:
        out.append(f"| {name} | {n} | {f['eta_tensor']:.3f} | {f['eta_cuda']:.3f} | "
                   f"{f['t_launch'] * 1e6:.2f} µs | {f['l1_scale']:.2f} | {f['mask_scale']:.2f} | "
                   f"{pct(err['max'])}, {pct(err['rms'])} |")
    for name, _, f, _, samples in fits:
        out += measured_table(name, samples, cm.with_fit(dev, [f[p] for p in cm.FIT_PARAMS]))
    out.append("")
    out.append(f"The tables and figures of this section use the parameters fitted to "
               f"{fits[0][0]}: still a model (its counts and its form), now calibrated.")
    return "\n".join(out) + "\n"


def measured_seed(folder):
    """{(impl, spec or 'dense'): median ms} of the 128K problems measured in folder."""
    out = {}
    for r in gpu_records(folder):
        if r["Lq"] == SEED_L and not r["causal"]:
            out[(r["impl"], r.get("pattern") or "dense")] = r["median_ms"]
    return out


def seed_table(coef, dev):
    rows = seed_table_model(coef, dev)
    measured = [(os.path.basename(f), measured_seed(f)) for f in device_dirs(
        ARGS.device if ARGS else None)]
    measured = [(n, m) for n, m in measured if m]
    head = ("| pattern (seed's sparsity) | spec | density | PyTorch dense (SDPA flash), model | "
            "torch.sparse (CSR), model | ours, model | speed-up over PyTorch dense, model | "
            "seed's target |")
    out = [head + "".join(f" measured on {n} |" for n, _ in measured),
           "|---|---|---:|---:|---:|---|---:|---|" + "---|" * len(measured)]
    for r in rows:
        ours = ", ".join(f"`{k}` {ms(t)}" for k, t in sorted(r["ours"].items(), key=lambda x: x[1]))
        cells = [f"| {r['row']} ({r['sparsity']}) | `{r['spec']}` | {100 * r['density']:.2f} % | "
                 f"{ms(r['dense'])} | {ms(r['torch_sparse'])} | {ours} | "
                 f"{r['speedup']:.1f}× (`{r['best']}`) | {SEED_TARGET} |"]
        for _, m in measured:
            dense = m.get(("torch/sdpa_flash", "dense"))
            mine = {k: m.get((f"04_sparse_patterns/{k}", r["spec"])) for k in r["ours"]}
            mine = {k: v for k, v in mine.items() if v}
            ts = m.get(("torch/torch_sparse", r["spec"]))
            if not mine or not dense:
                cells.append(" not measured |")
                continue
            k = min(mine, key=mine.get)
            cells.append(f" dense {dense:.3g} ms, torch.sparse "
                         f"{f'{ts:.3g} ms' if ts else '—'}, `{k}` {mine[k]:.3g} ms: "
                         f"{dense / mine[k]:.1f}× |")
        out.append("".join(cells))
    out.append("")
    out.append(f"L = {SEED_L:,}, not causal, B = {SEED_SHAPE['B']}, H = {SEED_SHAPE['H']}, "
               f"D = {SEED_SHAPE['D']}, fp16. PyTorch dense is modelled as dense FA2 (its "
               f"FLASH_ATTENTION backend is FlashAttention-2); torch.sparse by its passes over the "
               f"kept entries (`torch_sparse_counts`); ours: the masks and CSR built per call. "
               + ("Measured: not yet (no GPU was available): `benchmarks/gpu.sh --steps "
                  "build,crossover` measures every cell." if not measured else ""))
    return "\n".join(out) + "\n"


# ---- the quality-speed frontier -----------------------------------------------------------------
# Quality: the quality toolkit's results (quality/README.md): per text window set of L tokens, per
# attention spec, the paired NLL change against dense with its 95 % interval. Speed: the model, on
# SmolLM2-135M's attention shape (9 query heads of D = 64, causal; B = 1), for the chapter's kernel
# that serves the pattern best. Block masks and CSR lists are built once per length and reused by
# every layer: not counted.
FRONTIER_SHAPE = dict(B=1, H=9, D=64, dtype="f16")
FRONTIER_LENGTHS = (2048, 8192, 32768)
MODEL_CONTEXT = 8192  # SmolLM2-135M's context: no quality beyond it
# The text of the frontier: its window sets run every family at every density (quality/recompute.py,
# FRONTIER); a front mixes no texts, so the other texts' sets at these lengths are not read here.
FRONTIER_TEXT = "austen"
FAMILY_ORDER = ["window", "sink+window", "strided", "bigbird", "ladder", "oracle", "indexer"]
FAMILY_KERNELS = {"window": ("window",), "sink+window": ("block_sparse",),
                  "strided": ("block_sparse", "gather"), "bigbird": ("block_sparse",),
                  "ladder": ("block_sparse",), "oracle": ("sparse_mma",),
                  "indexer": ("DSA end to end",)}
TRAINED_INDEXER = (4, 32)  # H_I x D_I of the quality toolkit's trained indexer (quality/indexer.py)
# The oracle selects with the dense model's own scores, a selection whose cost its modelled speed
# leaves out and that no deployed model can make: the bound of the top-k families, not a choice.
BOUND_FAMILIES = ("oracle",)
# SmolLM2-135M's shape (its config.json, HuggingFaceTB/SmolLM2-135M): what its forward computes
# besides attention, for the whole model's share of attention at a length.
SMOLLM2 = dict(layers=30, d_model=576, heads=9, kv_heads=3, head_dim=64, mlp=1536, vocab=49152)


def quality_sets(folder):
    """{L: [(set name, its JSON)]} of the quality results with a frontier length."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or "configs" not in d or "set" not in d:
            continue
        L = d["set"].get("length")
        if L in FRONTIER_LENGTHS and d["set"].get("text", FRONTIER_TEXT) == FRONTIER_TEXT:
            out.setdefault(L, []).append((d["set"].get("name", os.path.basename(path)), d))
    return out


def load_geometry_cache():
    if not os.path.exists(GEOMETRY_FILE):
        return {}
    with open(GEOMETRY_FILE) as f:
        return json.load(f)


def geometry_key(spec, L, causal=True):
    return f"{spec}|{L}|{'causal' if causal else 'full'}"


def frontier_geometry(spec, L, cache):
    """The tile geometry of a quality spec: this model's own where it has one, else the cache
    (--geometry, example 04's block masks in PyTorch); None when neither has it."""
    try:
        return cm.geometry_of(spec, L, True)
    except ValueError:
        pass
    g = cache.get(geometry_key(spec, L))
    return cm.Geometry(**g) if g else None


def frontier_speed(family, spec, L, coef, dev, cache):
    """(modelled speed-up over dense FA2, kernel) of a quality configuration, or (None, why)."""
    s = FRONTIER_SHAPE
    dense = cm.pipeline_time(dense_stages(L, coef, s), dev)[1]
    if family in ("oracle", "indexer"):
        k = int(spec.split("k=")[1])
        HI, DI = TRAINED_INDEXER
        st = dsa_stages(L, k, coef, s, HI, DI, oracle=family == "oracle")
        return dense / cm.pipeline_time(st, dev)[1], FAMILY_KERNELS[family][0]
    geo = frontier_geometry(spec, L, cache)
    if geo is None:
        return None, "no tile geometry (run crossover.py with PyTorch)"
    times = {k: cm.pipeline_time(tile_kernel_stages(k, geo, coef, s, None), dev)[1]
             for k in FAMILY_KERNELS[family]}
    best = min(times, key=times.get)
    return dense / times[best], best


def frontier_points(sets, coef, dev, cache):
    """{L: [point]} with point = dict(family, spec, density, nll, ci, speedup, kernel, set)."""
    out = {}
    for L, lst in sorted(sets.items()):
        pts = []
        for name, d in lst:
            for spec, c in d["configs"].items():
                fam, vs = c.get("family"), c.get("vs_dense")
                if fam not in FAMILY_KERNELS or not vs or not c.get("complete", True):
                    continue
                sp, kernel = frontier_speed(fam, spec, L, coef, dev, cache)
                if sp is None:
                    continue
                pts.append(dict(family=fam, spec=spec, density=c.get("density"),
                                nll=vs["mean"], ci=vs.get("ci95_t") or vs.get("ci95_boot"),
                                n=vs.get("n"), speedup=sp, kernel=kernel, set=name,
                                windows=c.get("window_nll")))
        if pts:
            built = [q for q in pts if q["family"] not in BOUND_FAMILIES]
            for p in pts:
                p["front"] = p["family"] not in BOUND_FAMILIES and not any(
                    q is not p and q["speedup"] >= p["speedup"] and q["nll"] <= p["nll"]
                    and (q["speedup"] > p["speedup"] or q["nll"] < p["nll"]) for q in built)
            out[L] = sorted(pts, key=lambda p: (FAMILY_ORDER.index(p["family"]), p["density"]))
    return out


def describe_point(p):
    return (f"{p['family']} `{p['spec']}` ({100 * p['density']:.0f} %: {p['speedup']:.2f}×, "
            f"{p['nll']:+.3f} nats per token)")


def choices(pts):
    """Which configuration to choose, by the question asked of the front: among the families that
    can be built (the oracle is shown as the bound it is)."""
    out = []
    bound = [p for p in pts if p["family"] in BOUND_FAMILIES]
    pts = [p for p in pts if p["family"] not in BOUND_FAMILIES]
    faster = [p for p in pts if p["speedup"] > 1.0]
    if faster:
        out.append("the best quality among those faster than dense: "
                   + describe_point(min(faster, key=lambda p: p["nll"])))
    for budget in (0.05, 0.2):
        ok = [p for p in pts if p["ci"] and p["ci"][1] <= budget]
        out.append(f"the fastest whose NLL change is at most {budget:g} nats (upper end of its "
                   f"interval): " + (describe_point(max(ok, key=lambda p: p["speedup"])) if ok
                                     else "none"))
    out.append("the fastest of all: " + describe_point(max(pts, key=lambda p: p["speedup"])))
    slower = [p for p in pts if p["speedup"] <= 1.0]
    if slower:
        fams = sorted({p["family"] for p in slower}, key=FAMILY_ORDER.index)

        def which(f):
            ds = [p["density"] for p in slower if p["family"] == f]
            if len(ds) == sum(p["family"] == f for p in pts):
                return f"{f} (at every density)" if len(ds) > 1 else f
            return f + " at " + ", ".join(f"{100 * d:.0f} %" for d in sorted(ds))
        out.append("slower than dense at this length (the model): "
                   + "; ".join(which(f) for f in fams))
    if bound:
        out.append("the bound, not a choice: the oracle selects with the dense model's own "
                   "scores (its speed-up leaves that selection out, and no deployed model can "
                   "make it): " + "; ".join(
                       f"{100 * p['density']:.0f} % {p['nll']:+.3f} nats" for p in
                       sorted(bound, key=lambda p: p["density"]))
                   + ", what keeping the k highest dense scores loses at each budget")
    return out


def front_ties(front):
    """Pairs of front points whose per-window NLL do not differ significantly (paired t-test over
    the same windows, p >= stats.ALPHA): [(a, b, p)]."""
    out = []
    for i, a in enumerate(front):
        for b in front[i + 1:]:
            if a["windows"] and b["windows"] and len(a["windows"]) == len(b["windows"]):
                _, p = stats.t_test(a["windows"], b["windows"])
                if p >= stats.ALPHA:
                    out.append((a, b, p))
    return out


def attention_share(L, m=SMOLLM2):
    """Attention's share of SmolLM2-135M's forward FLOPs at L tokens (causal, dense): the matrix
    products of the projections, the MLP and the output layer against QK^T and PV."""
    d, kv = m["d_model"], m["kv_heads"] * m["head_dim"]
    rest = m["layers"] * 2 * (2 * d * d + 2 * d * kv + 3 * d * m["mlp"]) + 2 * d * m["vocab"]
    att = m["layers"] * 4 * m["heads"] * m["head_dim"] * (L + 1) / 2
    return att / (att + rest)


def short(p):
    return f"{p['family']} at {100 * p['density']:.0f} %"


def frontier_table(points, sets):
    if not points:
        return ("No quality results at 2K or 8K tokens yet (`quality/results/*.json`, "
                "quality/README.md): the frontier appears here when they are committed.\n")
    out = []
    for L, pts in points.items():
        names = sorted({p["set"] for p in pts})
        n = max((p["n"] or 0) for p in pts)
        out.append(f"**L = {L:,}** ({', '.join(names)}; {n} windows; quality on SmolLM2-135M, "
                   f"speed-up by the model on its shape: 9 heads of D = 64, causal)")
        out.append("")
        out.append(f"![quality against modelled speed at {fmt_L(L)} tokens](../../benchmarks/"
                   f"results/model/frontier_{fmt_L(L)}.png)")
        out.append("")
        out.append("| family | spec | density | NLL change vs dense [95 % CI] | modelled speed-up "
                   "| kernel | on the front |")
        out.append("|---|---|---:|---:|---:|---|---|")
        front = sorted((p for p in pts if p["front"]), key=lambda p: -p["speedup"])
        ties = front_ties(front)
        tied = {id(x) for a, b, _ in ties for x in (a, b)}
        for p in pts:
            ci = f" [{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}]" if p["ci"] else ""
            mark = ("bound (not buildable)" if p["family"] in BOUND_FAMILIES else
                    "yes, tied (below)" if id(p) in tied else "yes" if p["front"] else "")
            out.append(f"| {p['family']} | `{p['spec']}` | {100 * p['density']:.1f} % | "
                       f"{p['nll']:+.3f}{ci} | {p['speedup']:.2f}× | {p['kernel']} | "
                       f"{mark} |")
        out.append("")
        out.append("The front of the buildable families, fastest first: " + "; ".join(
            f"{p['family']} at {100 * p['density']:.0f} % ({p['speedup']:.2f}×, "
            f"{p['nll']:+.3f} nats)" for p in front) + ".")
        if ties:
            out.append("")
            out.append("Not ordered in quality (paired t-test over the same windows, p ≥ "
                       f"{stats.ALPHA:g}; the front's staircase draws them as if they were): "
                       + "; ".join(f"{short(a)} and {short(b)} (p = {p:.2f})"
                                   for a, b, p in ties) + ".")
        out.append("")
        out += [f"- {line}" for line in choices(pts)]
        out.append("")
        f = attention_share(L)
        fast = max((p for p in pts if p["family"] not in BOUND_FAMILIES),
                   key=lambda p: p["speedup"])
        out.append(f"The speed-up is attention's alone. At {L:,} tokens attention is "
                   f"{100 * f:.0f} % of SmolLM2-135M's forward FLOPs (the projections, the MLP "
                   f"and the output layer are the rest), so if time followed FLOPs, s× on "
                   f"attention would be 1 / (1 − {f:.2f} + {f:.2f} / s) on the whole forward: "
                   f"the fastest point above ({short(fast)}, {fast['speedup']:.2f}×) would give "
                   f"about {1 / (1 - f + f / fast['speedup']):.2f}×.")
        out.append("")
        absent = [f for f in FAMILY_ORDER if f not in {p["family"] for p in pts}]
        if absent:
            out.append(f"Not yet at L = {L:,}: {', '.join(absent)} (their quality results are "
                       "not committed yet; the front above is among the points that are).")
            out.append("")
    missing = [L for L in FRONTIER_LENGTHS if L not in points and L <= MODEL_CONTEXT]
    if missing:
        out.append("Not yet: " + ", ".join(f"L = {L:,}" for L in missing)
                   + " (its quality results are not committed yet).")
    beyond = [L for L in FRONTIER_LENGTHS if L > MODEL_CONTEXT]
    if beyond:
        out.append("No frontier at " + ", ".join(f"L = {L:,}" for L in beyond)
                   + f": beyond SmolLM2-135M's context of {MODEL_CONTEXT:,} tokens, so no "
                   "quality can be measured there.")
    return "\n".join(out).rstrip("\n") + "\n"


def compute_geometry(specs_L):
    """Tile statistics of (spec, L) pairs, causal, from example 04's PyTorch reference
    (sparse_patterns.pattern_mask and block_mask at 64 x 64, example 06's ladder registered):
    {geometry_key: Geometry fields}."""
    import bench_torch
    sp = bench_torch.patterns()
    if "ladder" not in sp.PARAMS:
        cm._ladder_module().register(sp)
    out = {}
    for spec, L in specs_L:
        m = sp.pattern_mask(spec, L, L, True)
        kv_num, _, full_num, _ = sp.block_mask(m, cm.TILE, cm.TILE)
        visited = kv_num + full_num
        busiest = int(visited.argmax())
        nq, nk = kv_num.numel(), -(-L // cm.TILE)
        out[geometry_key(spec, L)] = dict(
            L=L, causal=True, entries=int(m.sum()), tiles=int(visited.sum()),
            masked=int(kv_num.sum()), crit_tiles=int(visited[busiest]),
            crit_masked=int(kv_num[busiest]), qtiles=nq, meta_bytes=4 * (2 * nq + 2 * nq * nk))
        print(f"geometry: {spec} at L={L}: {out[geometry_key(spec, L)]['tiles']} tiles",
              flush=True)
    return out


def update_geometry(sets):
    """Adds to GEOMETRY_FILE the quality specs the model has no geometry of (PyTorch needed)."""
    cache = load_geometry_cache()
    need = []
    for L, lst in sets.items():
        for _, d in lst:
            for spec, c in d["configs"].items():
                if c.get("family") in FAMILY_KERNELS and c.get("family") not in (
                        "oracle", "indexer") and geometry_key(spec, L) not in cache:
                    try:
                        cm.geometry_of(spec, L, True)
                    except ValueError:
                        need.append((spec, L))
    if need:
        cache.update(compute_geometry(sorted(set(need))))
        os.makedirs(MODEL_DIR, exist_ok=True)
        with open(GEOMETRY_FILE, "w") as f:
            json.dump(dict(sorted(cache.items())), f, indent=1)
            f.write("\n")
    return cache


# ---- figures ------------------------------------------------------------------------------------

def model_note():
    return f"MODEL (benchmarks/cost_model.py, {DEVICE_LABEL}): not a measurement"


def plot_all(sw, points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(MODEL_DIR, exist_ok=True)
    written = []

    def save(fig, name, legend_from=None):
        fig.text(0.5, 0.005, model_note(), ha="center", color="firebrick", fontsize=8)
        bottom = 0.03
        if legend_from is not None:  # one legend for all panels, under them
            handles, labels = legend_from.get_legend_handles_labels()
            fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8,
                       bbox_to_anchor=(0.5, 0.03))
            bottom = 0.2
        fig.tight_layout(rect=(0, bottom, 1, 1))
        path = os.path.join(MODEL_DIR, name)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(os.path.relpath(path, ROOT))

    # 1. speed-up against density at three lengths, with the ideal 1 / density
    Ls = [4096, 32768, 131072]
    fig, axes = plt.subplots(1, len(Ls), figsize=(15, 5.6), sharey=True)
    for ax, L in zip(axes, Ls):
        xs = [d for d in LAB_DENSITIES]
        ax.plot(xs, [1 / d for d in xs], "k--", lw=1, label="ideal: 1 / density")
        ax.axhline(1.0, color="grey", lw=0.8)
        for key, label, _, _ in LAB:
            cells = [(c["density"], c["speedup"]) for c in
                     (sw[key][d].get(L) for d in LAB_DENSITIES) if c]
            if cells:
                ax.plot(*zip(*cells), "o-", ms=4, label=label.replace("`", ""))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("density (kept / causal entries)")
        ax.set_title(f"L = {fmt_L(L)}" + (" (counts extrapolated)" if L > PROFILED_MAX_L else ""))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("speed-up over dense FA2 (causal)")
    fig.suptitle("Modelled speed-up against density: B=1, 16 heads of D=128, fp16, causal")
    save(fig, "speedup_vs_density.png", axes[0])

    # 2. speed-up against L at three densities: where sparse starts to win
    ds = [0.01, 0.10, 0.50]
    fig, axes = plt.subplots(1, len(ds), figsize=(15, 5.6), sharey=True)
    for ax, d in zip(axes, ds):
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(1 / d, color="k", ls="--", lw=1, label="ideal: 1 / density")
        ax.axvspan(LAB_LENGTHS[0], PROFILED_MAX_L, color="green", alpha=0.07,
                   label="counts checked against the simulator's profile")
        for key, label, _, _ in LAB:
            cells = [(L, c["speedup"]) for L, c in sw[key][d].items() if c]
            if cells:
                ax.plot(*zip(*cells), "o-", ms=4, label=label.replace("`", ""))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_title(f"density {100 * d:g} %")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("speed-up over dense FA2 (causal)")
    fig.suptitle("Modelled speed-up against L (B=1, 16 heads of D=128, fp16, causal): where "
                 "sparse starts to win")
    save(fig, "speedup_vs_length.png", axes[0])

    # 3. what the time is spent on, at 10 % density
    fig, axes = plt.subplots(1, len(FIXED_KERNELS), figsize=(16, 4.4), sharey=True)
    parts = ["attention", "launches", "mask build", "CSR build", "indexer", "top-k"]
    colors = ["tab:blue", "tab:grey", "tab:orange", "tab:brown", "tab:purple", "tab:red"]
    for ax, key in zip(axes, FIXED_KERNELS):
        Ls = [L for L in LAB_LENGTHS if sw[key][FIXED_DENSITY].get(L)]
        bottom = [0.0] * len(Ls)
        for part, color in zip(parts, colors):
            vals = []
            for L in Ls:
                c = sw[key][FIXED_DENSITY][L]
                v = (c["stages"]["attention"][1] if part == "attention" else
                     overheads(c).get(part, 0.0))
                vals.append(v / c["t"])
            if any(vals):
                ax.bar(range(len(Ls)), vals, bottom=bottom, color=color, label=part)
                bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(Ls)))
        ax.set_xticklabels([fmt_L(L) for L in Ls], rotation=45)
        ax.set_title(LABELS[key].replace("`", ""), fontsize=8)
        ax.set_xlabel("L")
    axes[0].set_ylabel("share of the modelled time")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"Where the time goes at {100 * FIXED_DENSITY:g} % density (fixed costs vs "
                 f"attention)")
    save(fig, "fixed_costs.png")

    # 4. the quality-speed frontier, one figure per length (a length without results: none)
    for path in glob.glob(os.path.join(MODEL_DIR, "frontier_*.png")):
        if os.path.basename(path) not in {f"frontier_{fmt_L(L)}.png" for L in points}:
            os.remove(path)
    fam_color = dict(zip(FAMILY_ORDER, ["tab:blue", "tab:cyan", "tab:olive", "tab:orange",
                                        "tab:green", "tab:red", "tab:purple"]))
    for L, pts in points.items():
        fig, ax = plt.subplots(figsize=(8, 5.2))
        for fam in FAMILY_ORDER:
            mine = [p for p in pts if p["family"] == fam]
            if not mine:
                continue
            ax.errorbar([p["speedup"] for p in mine], [p["nll"] for p in mine],
                        yerr=[[p["nll"] - p["ci"][0] for p in mine],
                              [p["ci"][1] - p["nll"] for p in mine]] if all(
                            p["ci"] for p in mine) else None,
                        fmt="o", color=fam_color[fam], label=fam, capsize=3)
            for p in mine:
                ax.annotate(f"{100 * p['density']:.0f}%", (p["speedup"], p["nll"]),
                            fontsize=7, xytext=(3, 3), textcoords="offset points")
        front = sorted((p for p in pts if p["front"]), key=lambda p: p["speedup"])
        xs, ys = [], []
        for p in front:  # a staircase: better quality to the left, more speed to the right
            if xs:
                xs.append(p["speedup"])
                ys.append(ys[-1])
            xs.append(p["speedup"])
            ys.append(p["nll"])
        ax.plot(xs, ys, "k-", lw=1, alpha=0.6, label="Pareto front")
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.annotate("dense", (1.0, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", fontsize=7, color="grey")
        ax.set_xscale("log")
        # most points lie within 0.1 nats of dense: linear up to 0.01, logarithmic above
        ax.set_yscale("symlog", linthresh=0.01, linscale=0.5)
        low = min([0.0] + [p["ci"][0] if p["ci"] else p["nll"] for p in pts])
        ax.set_ylim(bottom=min(-0.002, 1.5 * low))
        ax.set_xlabel("modelled speed-up over dense FA2 (9 heads of D=64, causal)")
        ax.set_ylabel("NLL change vs dense, nats/token (95 % CI; log above 0.01)")
        ax.set_title(f"Quality (SmolLM2-135M, measured) vs speed (model), L = {L:,}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        save(fig, f"frontier_{fmt_L(L)}.png")
    return written


# ---- the lesson's numbers -----------------------------------------------------------------------

def lesson(sw, seed_rows, margin=0.0):
    """The numbers the lesson quotes, as sentences (regenerated with the tables)."""
    d = FIXED_DENSITY
    cell = lambda key, L, dens=d: sw[key][dens].get(L)  # noqa: E731
    w = {L: cell("window", L) for L in LAB_LENGTHS}
    out = [model_caption(), ""]
    W4 = int(w[4096]["params"].split("=")[1])
    g4 = cm.band_geometry(4096, 1 - W4, 0, True)
    H, sms = LAB_SHAPE["H"], cm.DEVICES[cm.DEFAULT_DEVICE]["sms"]
    out.append(
        f"- **A band costs nothing to describe.** At {100 * d:g} % density the `window` kernel "
        f"is {w[256]['speedup']:.2f}× faster than dense FA2 at L = 256, "
        f"{w[4096]['speedup']:.1f}× at 4K and {w[131072]['speedup']:.1f}× at 128K (ideal "
        f"{1 / w[131072]['density']:.1f}×). At L = 256 both kernels are bound by their busiest "
        f"thread block (the `span` term: {256 // 64} query tiles × {H} heads = "
        f"{256 // 64 * H} blocks for {sms} SMs), and dense FA2's last query tile visits every "
        f"key tile. At 4K the band (w = {W4} keys) straddles {g4.tiles / g4.qtiles:.1f} key tiles "
        f"per query tile for {g4.entries / (g4.qtiles * cm.TILE * cm.TILE):.1f} tiles' worth of "
        f"kept entries: its edges are computed and masked for nothing.")
    bs, bc = cell("block_sparse", 256), cell("block_sparse_cached", 256)
    top_ratio = cell("block_sparse", 131072)["t"] / cell("block_sparse_cached", 131072)["t"]
    ov = overheads(bs)
    out.append(
        f"- **Metadata is a fixed cost.** Building the block mask on every call adds a launch "
        f"and a pass over the (L/64)² tiles: at L = 256 it is "
        f"{100 * (ov['mask build'] + bs['stages']['mask build'][0]) / bs['t']:.0f} % of the "
        f"block-sparse kernel's time, which falls from {bc['speedup']:.2f}× (mask cached) to "
        f"{bs['speedup']:.2f}×; at 128K the two differ by "
        f"{100 * abs(1 - top_ratio):.2f} %.")
    g1 = sw["gather"][0.01]
    be = break_even(g1)
    be_m = break_even(g1, margin)
    out.append(
        f"- **Tokens are not tiles.** The `gather` kernel (CUDA cores, one warp per query row, its "
        f"CSR built per call) is slower than dense at every density of 2 % and above; at 1 % it "
        + (f"passes dense from L = {fmt_L(be)} and reaches {fmt_x(g1[131072]['speedup'])} at "
           f"128K" if isinstance(be, int) else "never passes dense")
        + (f" ({'from ' + fmt_L(be_m) if isinstance(be_m, int) else 'never'} by more than the "
           f"model's {pct(margin)} error)" if be_m != be else "")
        + f" (ideal {1 / g1[131072]['density']:.0f}×). Its L1 traffic (a K and a V row per kept "
        f"entry, no reuse between queries) is what the model charges it for.")
    lad = sw["ladder"][d]
    reach = min(L for L, c in lad.items() if c)
    out.append(
        f"- **Some patterns cannot be sparse at short L.** The ladder keeps at least its sink, "
        f"its local blocks and log2(L/64) rungs: {100 * d:g} % density is out of its reach below "
        f"L = {fmt_L(reach)}, where it is {lad[reach]['speedup']:.1f}× faster than dense; "
        f"{lad[131072]['speedup']:.1f}× at 128K.")
    ds = {L: cell("dsa", L) for L in LAB_LENGTHS}
    top = ds[131072]
    ovd = overheads(top)
    be = break_even(sw["dsa"][d])
    be_m = break_even(sw["dsa"][d], margin)
    best1 = max(c["speedup"] for c in sw["dsa"][0.01].values() if c)
    out.append(
        f"- **A learned selector costs an O(L²) pass.** DSA at {100 * d:g} % density (top-k "
        f"k = {top['params'].split('=')[1]} at 128K) "
        + (f"passes dense from L = {fmt_L(be)}" if isinstance(be, int) else "never passes dense")
        + (f" ({'from ' + fmt_L(be_m) if isinstance(be_m, int) else 'never'} by more than the "
           f"model's {pct(margin)} error)" if be_m != be else "")
        + f" and reaches only {top['speedup']:.2f}× at 128K: the indexer (16 heads × 64) is "
        f"{100 * ovd['indexer'] / top['t']:.0f} % of the pipeline's time and the top-k "
        f"{100 * ovd['top-k'] / top['t']:.0f} %, the attention over the selection "
        f"{100 * top['stages']['attention'][1] / top['t']:.0f} %. Even at 1 % density it is at "
        f"best {best1:.2f}×. With 16 heads of D = 128 a dense (query, key) pair costs 4 × 16 × "
        f"128 tensor FLOPs (2·D for its score and 2·D for its share of P·V, per head); the "
        f"indexer's 2 × 16 × 64 are a quarter of that, before its scores make a round trip "
        f"through DRAM for the top-k.")
    dg = cm.geometry_of(seed_rows[2]["spec"], SEED_L, False)
    dil_fill = dg.entries / (dg.tiles * cm.TILE * cm.TILE)
    win = seed_rows[0]
    out.append(
        f"- **At 128K the seed's table is far past its target.** By the model, the sliding "
        f"window at {100 * win['density']:.1f} % density runs {win['speedup']:.0f}× faster than "
        f"PyTorch's dense SDPA (target {SEED_TARGET}), BigBird at "
        f"{100 * seed_rows[1]['density']:.1f} % {seed_rows[1]['speedup']:.0f}×, the dilated "
        f"window at {100 * seed_rows[2]['density']:.1f} % {seed_rows[2]['speedup']:.0f}× "
        f"(`{seed_rows[2]['best']}`; its entries fill "
        f"{100 * dil_fill:.0f} % of the tiles it visits, so it stays far from its ideal "
        f"{1 / seed_rows[2]['density']:.0f}×): the tiles skipped are most of the work. "
        f"torch.sparse's "
        f"CSR path is modelled at {ms(win['torch_sparse'])} for the window, against "
        f"{ms(win['dense'])} dense and {ms(win['ours'][win['best']])} for ours.")
    return "\n".join(out) + "\n"


# ---- the README blocks --------------------------------------------------------------------------

ARGS = None


def blocks(coef, dev, fits, sw, points, sets):
    summary = error_summary(model_errors(profile_records(), coef, dev))
    seed_rows = seed_table_model(coef, dev)
    margin = worst_errors(summary)[0]
    return {"params": params_table(), "error": error_table(summary, coef),
            "breakeven": break_even_table(sw, margin) + "\n" + dsa_reread_note(coef, dev)
            + "\n" + eta_sensitivity(sw, coef, dev),
            "fixed": fixed_cost_table(sw),
            "seed128k": seed_table(coef, dev), "lesson": lesson(sw, seed_rows, margin),
            "fit": fit_table(fits, cm.DEVICES[cm.DEFAULT_DEVICE]),
            "frontier": frontier_table(points, sets)}, summary


def sweep_json(sw):
    """The lab's grid as written to results/model/crossover.json (rounded: a stable file)."""
    def r(x):
        return float(f"{x:.4g}")
    out = {}
    for key, rows in sw.items():
        out[key] = {f"{d:g}": {str(L): None if c is None else dict(
            density=r(c["density"]), params=c["params"], t_dense_ms=r(c["t_dense"] * 1e3),
            t_ms=r(c["t"] * 1e3), speedup=r(c["speedup"]),
            stages={n: dict(launch_ms=r(a * 1e3), body_ms=r(b * 1e3), bound=bound)
                    for n, (a, b, bound) in c["stages"].items()})
            for L, c in row.items()} for d, row in rows.items()}
    return json.dumps(dict(model=model_note(), shape=LAB_SHAPE, causal=True, lab=out), indent=1,
                      sort_keys=True) + "\n"


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", metavar="BUILD", help="profile the plan with this sim-check build")
    ap.add_argument("--only", help="with --run: examples, e.g. 04,06")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--quality", default=QUALITY_DIR)
    ap.add_argument("--device", help="a benchmarks/results/<device> folder with crossover.jsonl")
    a = ARGS = ap.parse_args()
    if a.run:
        run_profiles(a.run, a.only.split(",") if a.only else None)
        return 0
    if not os.path.isdir(a.quality):
        print(f"error: --quality {a.quality}: no such folder", file=sys.stderr)
        return 2
    if a.device and not os.path.exists(os.path.join(a.device, "crossover.jsonl")):
        print(f"error: --device {a.device}: no crossover.jsonl there", file=sys.stderr)
        return 2
    records = profile_records()
    if not records:
        print(f"error: {os.path.relpath(PROFILE_FILE, ROOT)} has no records: run "
              "--run build/sim-check first", file=sys.stderr)
        return 2
    global DEVICE_LABEL
    coef = cm.fit_counts(records)
    fits = device_fits(coef, cm.DEVICES[cm.DEFAULT_DEVICE])
    dev = fitted_device(cm.DEVICES[cm.DEFAULT_DEVICE], fits)
    DEVICE_LABEL = device_label(dev)
    sets = quality_sets(a.quality)
    cache = load_geometry_cache()
    if not a.check:
        try:
            import torch  # noqa: F401  (example 04's block masks)
            cache = update_geometry(sets)
        except ImportError:
            print("note: no PyTorch here: the cached geometry only (.venv/bin/python computes "
                  "what is missing)", file=sys.stderr)
    print("crossover: the lab's grid ...", file=sys.stderr, flush=True)
    sw = sweep(coef, dev)
    points = frontier_points(sets, coef, dev, cache)
    text, summary = blocks(coef, dev, fits, sw, points, sets)
    rc = io_complexity.update_blocks(READMES, "crossover", lambda name, rel: text[name], a.check,
                                     COMMAND)
    js = sweep_json(sw)
    old = open(SWEEP_FILE).read() if os.path.exists(SWEEP_FILE) else None
    if a.check:
        if old != js:
            print(f"out of date ({COMMAND}): {os.path.relpath(SWEEP_FILE, ROOT)}")
            rc = 1
        t, c = worst_errors(summary)
        if t > CLAIM_TIME_ERR or c > CLAIM_COUNT_ERR:
            print(f"the count model's error against the profile is above the README's claim: "
                  f"time {pct(t)} (claim {pct(CLAIM_TIME_ERR)}), count {pct(c)} "
                  f"(claim {pct(CLAIM_COUNT_ERR)})")
            rc = 1
        print("PASS" if rc == 0 else "FAIL")
        return rc
    os.makedirs(MODEL_DIR, exist_ok=True)
    if old != js:
        with open(SWEEP_FILE, "w") as f:
            f.write(js)
    if not a.no_plot:
        for path in plot_all(sw, points):
            print("wrote", path)
    return rc


if __name__ == "__main__":
    sys.exit(main())
