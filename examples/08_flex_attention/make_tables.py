#!/usr/bin/env python3
"""make_tables.py — the measured tables of example 08's README, from committed result files
(never typed by hand):

  results/sim_profile.jsonl       the simulator's measurements: each modification on one problem,
                                  the plain kernel (dense_fa2), flex and flex_no_block_mask, with
                                  the mask_mod calls per tile class counted on the device and the
                                  simulator's profile of the launch (--profile, sim-check build)
  benchmarks/results/<device>/flex08.jsonl
                                  a GPU's: ours beside compiled FlexAttention and SDPA
                                  (bench_gpu.py, benchmarks/gpu.sh's step example08)

    python3 examples/08_flex_attention/make_tables.py                  the README tables
    python3 examples/08_flex_attention/make_tables.py --run build/sim-check
                                  measure on the simulator first (about 10 minutes on 2 cores)
    python3 examples/08_flex_attention/make_tables.py --check          exit 1 if a README table
                                                                       differs from the files
Standard library only.
"""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(HERE, "README.md")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import readme_tables  # noqa: E402
SIM = os.path.join(HERE, "results", "sim_profile.jsonl")
SIM_MODS = ["causal", "sliding_window:w=64", "prefix_lm:p=96", "document", "alibi",
            "softcap:cap=30", "rel_bias:r=16"]
SIM_EXTRA = {"document": ["--doc-lens", "128,64,64"]}  # the tour's documents
SIM_PROBLEM = ["-B", "1", "-H", "1", "-L", "256", "-D", "64", "--dtype", "f16"]


def read(path):
    with open(path) as f:
        return f.read()


def records(path):
    return [json.loads(line) for line in read(path).splitlines() if line.strip()]


def run(build):
    """The simulator's measurements, into SIM: every modification with kernels 1-3, and the fused
    RoPE kernel (4) beside flex on one of them."""
    program = os.path.join(build, "examples", "08_flex_attention", "flex_attention_sim")
    if not os.access(program, os.X_OK):
        sys.exit(f"error: {program} not found: build the sim-check preset (--profile needs it)")
    if os.path.exists(SIM):
        os.remove(SIM)
    runs = [(m, k, []) for m in SIM_MODS for k in (1, 2, 3)] + \
           [("alibi", k, ["--rope"]) for k in (2, 4)]
    for n, (mod, kernel, extra) in enumerate(runs):
        cmd = [program, "--profile", "--quiet", "--mod", mod, "--kernel", str(kernel),
               "--json", SIM] + SIM_PROBLEM + SIM_EXTRA.get(mod, []) + extra
        print(f"[{n + 1}/{len(runs)}] {' '.join(cmd[1:])}", file=sys.stderr)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} exited {r.returncode}:\n{r.stderr}{r.stdout}")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                            "--", "examples/08_flex_attention", "common"],
                           capture_output=True, text=True).stdout.strip()
    recs = [dict(r, commit=commit + ("-dirty" if dirty else "")) for r in records(SIM)]
    with open(SIM, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))


# ---- tables --------------------------------------------------------------------------------------

def mb(x):
    return f"{x * 1e-6:.3g}"


def sim_table(recs):
    by = {(r["mod"], r["kernel"], r["rope"]): r for r in recs}
    lines = [
        "| modification | tiles per head: FULL / PARTIAL / EMPTY | flex: mask_mod calls in FULL "
        "/ PARTIAL tiles | flex_no_block_mask: calls | global requests: dense_fa2 / flex / "
        "no block mask | mma: dense_fa2 / flex | DRAM MB: dense_fa2 / flex |",
        "|---|---|---|---|---|---|---|"]
    for mod in SIM_MODS:
        d, f, n = (by.get((mod, k, False)) for k in ("dense_fa2", "flex", "flex_no_block_mask"))
        if not (d and f and n):
            continue
        H = f["H"]
        tiles = (n["tiles_partial"]) // H  # flex_no_block_mask visits every tile
        full, part = f["tiles_full"] // H, f["tiles_partial"] // H
        lines.append(
            f"| `{mod}` | {full} / {part} / {tiles - full - part} | {f['mask_calls_full']:,} / "
            f"{f['mask_calls_partial']:,} | {n['mask_calls_partial']:,} | "
            f"{d['profile']['global_requests']:,} / {f['profile']['global_requests']:,} / "
            f"{n['profile']['global_requests']:,} | {d['profile']['mma']:,} / "
            f"{f['profile']['mma']:,} | {mb(d['profile']['dram_bytes'])} / "
            f"{mb(f['profile']['dram_bytes'])} |")
    return "\n".join(lines)


def rope_table(recs):
    by = {(r["mod"], r["kernel"], r["rope"]): r for r in recs}
    f, r = by.get(("alibi", "flex", True)), by.get(("alibi", "flex_rope", True))
    if not (f and r):
        return "(no RoPE records)"
    row = lambda name, x: (f"| `{name}` | {x['profile']['global_requests']:,} | "
                           f"{mb(x['profile']['global_bytes'])} | {mb(x['profile']['dram_bytes'])}"
                           f" | {x['profile']['shared_requests']:,} | {x['status']} |")
    return "\n".join(["| kernel (`alibi`, `--rope`) | global requests | global MB (lanes' "
                      "bytes) | DRAM MB | shared requests | check |",
                      "|---|---|---|---|---|---|", row("flex", f), row("flex_rope", r)])


def sim_block(recs):
    r0 = recs[0]
    head = (f"`flex_attention_sim {' '.join(SIM_PROBLEM)} --mod M --profile` in the sim-check "
            f"build (`document`: `--doc-lens 128,64,64`; commit {r0.get('commit', '?')}); a model "
            f"of the memory system, not a GPU measurement. Every run passed its check: "
            f"{'yes' if all(r['status'] == 'PASS' for r in recs) else 'NO'}.")
    return head + "\n\n" + sim_table(recs) + "\n"


def gpu_block():
    files = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*", "flex08.jsonl")))
    if not files:
        return ("No GPU results yet: to be measured (`benchmarks/gpu.sh --steps build,example08,"
                "plots`). Every GPU figure of this example is **not measured** until then.\n")
    out = []
    for path in files:
        recs = records(path)
        device = os.path.basename(os.path.dirname(path))
        out.append(f"**{device}** ({recs[0].get('commit', '?')}): TFLOP/s over the visible "
                   f"entries (4 D each), B=1 H=16 fp16; ours / compiled FlexAttention in the last "
                   f"column (goal ≥ 1.0).\n")
        out.append("| modification | L | D | flex (ours) | dense_fa2 (plain) | FlexAttention "
                   "compiled | SDPA explicit mask/bias | ours / FlexAttention |")
        out.append("|---|---|---|---|---|---|---|---|")
        key = lambda r: (r.get("mod"), r.get("Lq"), r.get("D"))
        table = {}
        for r in recs:
            table.setdefault(key(r), {})[r.get("impl") or r.get("kernel")] = r
        for (mod, L, D), row in sorted(table.items(), key=lambda x: (x[0][0], x[0][2], x[0][1])):
            def t(name):
                r = row.get(name)
                if r is None:
                    return "—"
                return f"{r['tflops']:.1f}" if r.get("status") == "PASS" and r.get("tflops") \
                    else r.get("status", "—")
            ours = row.get("flex") or row.get("08_flex_attention/flex")
            peer = row.get("torch/flex_compiled")
            ratio = (f"{ours['tflops'] / peer['tflops']:.2f}" if ours and peer and
                     ours.get("tflops") and peer.get("tflops") else "—")
            out.append(f"| `{mod}` | {L} | {D} | {t('flex')} | {t('dense_fa2')} | "
                       f"{t('torch/flex_compiled')} | {t('torch/sdpa_explicit')} | {ratio} |")
        out.append("")
    return "\n".join(out)


def blocks():
    sim = records(SIM) if os.path.exists(SIM) else []
    return {"sim": sim_block(sim) if sim else "(no simulator records: run make_tables.py --run)\n",
            "rope": rope_table(sim) + "\n" if sim else "(no simulator records)\n",
            "gpu": gpu_block()}


def update(check):
    text = read(README)
    stale = []
    for name, want in blocks().items():
        new, missing = readme_tables.fill(text, {f"table:{name}": want})
        if missing:
            stale.append(f"no <!-- table:{name} --> markers")
        elif new != text:
            stale.append(name)
            text = new
    if check:
        print(f"FAIL: README.md's tables {', '.join(stale)} differ from the result files (run "
              f"python3 examples/08_flex_attention/make_tables.py)" if stale
              else "PASS: README.md's tables are the result files'")
        return 1 if stale else 0
    with open(README, "w") as f:
        f.write(text)
    print("updated: " + (", ".join(stale) if stale else "nothing (up to date)"))
    return 0


def main():
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if args[:1] == ["--run"]:
        if len(args) != 2:
            sys.exit("error: --run needs the sim-check build folder (e.g. build/sim-check)")
        run(args[1])
        return update(check=False)
    if args and args != ["--check"]:
        sys.exit(f"error: unknown arguments {' '.join(args)} (see --help)")
    return update(check=args == ["--check"])


if __name__ == "__main__":
    sys.exit(main())
