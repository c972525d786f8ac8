#!/usr/bin/env python3
"""test_cost_model.py — benchmarks/cost_model.py and crossover.py on small inputs (CTest
python.cost_model, about 5 s):

  * the tile geometry of every pattern kind the model builds itself (bands, dilated windows, the
    ladder, BigBird without causality, dense causal) against example 04's PyTorch block masks
    (sparse_patterns.pattern_mask + block_mask at 64 x 64 tiles): kept entries, tiles visited,
    the busiest query tile, and the masked tiles where every tile is whole;
  * crossover.compute_geometry (the cache of the quality patterns' geometry) agrees with the
    model's own geometry where both exist;
  * the density solvers reach their target (window, ladder, DSA's k), and the DSA sums' closed
    forms equal the sums taken query by query;
  * fit_device recovers the times of a model whose parameters were changed, from those times
    alone (the fit is what gpu.sh's results go through), and a made-up GPU results folder in the
    benchmarks' schema goes through crossover.py's fit table (with the measured speed-ups), the
    128K table's measured column, and the tables then time with the fitted parameters and say
    so;
  * the quality-speed frontier of a made-up 2K window set in the quality toolkit's schema;
  * the break-even rule (first L from which every longer L is faster) on made-up rows;
  * crossover.py refuses a missing --quality folder with one line and exit status 2.
The profile records are checked against the count model by crossover.py --check (CTest
docs.crossover_tables), not here.
"""
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import attn_testing  # noqa: E402
from preload import python_command  # noqa: E402 (a script's process)
import cost_model as cm  # noqa: E402
import crossover  # noqa: E402


def torch_geometry(spec, L, causal):
    """Entries, visited tiles, partial tiles, the busiest query tile's tiles, from PyTorch."""
    sp = attn_testing.reference("sparse_patterns")
    if "ladder" not in sp.PARAMS:
        cm._ladder_module().register(sp)
    m = sp.pattern_mask(spec, L, L, causal)
    kv_num, _, full_num, _ = sp.block_mask(m, cm.TILE, cm.TILE)
    visited = kv_num + full_num
    return int(m.sum()), int(visited.sum()), int(kv_num.sum()), int(visited.max())


def check_geometry(c):
    cases = [("none", 300, True), ("none", 256, True), ("causal_window:w=100", 1000, True),
             ("causal_window:w=64", 512, True), ("window:w=70", 1000, False),
             ("window:w=70", 640, True), ("window:w=1", 200, False),
             ("dilated:w=5,d=4", 400, False), ("dilated:w=20,d=3", 512, False),
             ("ladder:b=64,s=1,w=2", 1024, True), ("ladder:b=64,s=2,w=3", 1280, True),
             ("bigbird:b=128,r=2,seed=1", 1024, False), ("bigbird:b=64,r=0,seed=1", 512, False)]
    for spec, L, causal in cases:
        g = cm.geometry_of(spec, L, causal)
        entries, tiles, partial, busiest = torch_geometry(spec, L, causal)
        what = f"{spec} L={L} causal={causal}"
        c.expect(g.entries == entries, f"entries of {what}: {g.entries} vs {entries}")
        c.expect(g.tiles == tiles, f"tiles of {what}: {g.tiles} vs {tiles}")
        c.expect(g.crit_tiles == busiest, f"busiest tile of {what}: {g.crit_tiles} vs {busiest}")
        if L % cm.TILE == 0:
            c.expect(g.masked == partial, f"masked tiles of {what}: {g.masked} vs {partial}")
    for bad in (("strided:l=4", 256, True), ("bigbird:b=64,r=1", 256, True)):
        try:
            cm.geometry_of(*bad)
            c.expect(False, f"geometry_of{bad} should refuse")
        except ValueError:
            c.expect(True, "")


def check_geometry_cache(c):
    got = crossover.compute_geometry([("causal_window:w=100", 1000), ("ladder:b=64,s=1,w=2", 1024)])
    for spec, L in (("causal_window:w=100", 1000), ("ladder:b=64,s=1,w=2", 1024)):
        g = cm.geometry_of(spec, L, True)
        cached = cm.Geometry(**got[crossover.geometry_key(spec, L)])
        for f in ("entries", "tiles", "crit_tiles", "qtiles", "meta_bytes"):
            c.expect(getattr(g, f) == getattr(cached, f),
                     f"{f} of {spec}: model {getattr(g, f)}, cache {getattr(cached, f)}")


def check_solvers(c):
    for L in (1024, 16384):
        for d in (0.02, 0.1, 0.5):
            w = cm.window_w_for(L, d)
            got = cm.band_geometry(L, 1 - w, 0, True).density
            c.expect(abs(got - d) < 2.0 / L, f"window_w_for({L}, {d}): density {got}")
            k = cm.dsa_k_for(L, d)
            s = cm.dsa_sums(L, k)
            c.expect(abs(s.selected / (L * (L + 1) / 2) - d) < 2.0 / L, f"dsa_k_for({L}, {d})")
    w = cm.ladder_w_for(4096, 0.5)
    c.expect(w == 18, f"ladder_w_for(4096, 0.5) = {w} (example 06's table: 18)")
    c.expect(cm.ladder_w_for(256, 0.1) is None, "the ladder cannot be 10 % dense at L = 256")
    s = cm.dsa_sums(200, 64)
    c.expect((s.visible, s.select_rows, s.selected) == (200 * 201 // 2, 200 - 64,
                                                       64 * 65 // 2 + 136 * 64),
             f"dsa_sums(200, 64): {s}")


def dsa_sums_differ(sums):
    """Where sums(L, k, causal) (a DsaSums) differs from the sums taken query by query (the
    visible keys v of each query: a + 1 for query a under causality, else L): a list of lines."""
    out = []
    for L in (1, 63, 64, 65, 200, 4097, 5000):
        for k in (0, 1, 64, 100, 4096, 6000):
            for causal in (True, False):
                vis = [a + 1 if causal else L for a in range(L)]
                sel = [v for v in vis if v > k]
                want = (sum(vis), sum(-(-v // cm.TILE) for v in vis), sum(sel), len(sel),
                        sum(min(v, k) for v in vis), sum(-(-min(v, k) // cm.TILE) for v in vis),
                        sum(v for v in sel if v > cm.TOPK_CAND))
                s = sums(L, k, causal)
                got = (s.visible, s.ktiles, s.select_visible, s.select_rows, s.selected,
                       s.atiles, s.long_visible)
                if got != want:
                    out.append(f"dsa_sums({L}, {k}, causal={causal}): {got}, query by query {want}")
    return out


def check_dsa_sums(c):
    """The closed forms of cost_model's DSA sums against the sums taken query by query; and the
    comparison itself, against a planted closed form whose key tiles round down (v // TILE)."""
    bad = dsa_sums_differ(cm.dsa_sums)
    c.expect(not bad, "the DSA sums' closed forms equal the sums query by query"
                      + ("".join("\n  " + b for b in bad[:5])))

    def planted(L, k, causal):
        s = cm.dsa_sums(L, k, causal)
        s.ktiles = L * L // cm.TILE if not causal else sum(v // cm.TILE for v in range(1, L + 1))
        return s
    c.expect(bool(dsa_sums_differ(planted)),
             "a planted closed form (key tiles rounded down) is caught")


def check_fit(c):
    dev = cm.DEVICES[cm.DEFAULT_DEVICE]
    coef = {"dense_fa2": [14.0, 0, 5.0, 0], "window": [14.0, 0, 5.0, 0],
            "block_sparse": [15.0, 0, 5.0, 0], "gather": [0.3, 0, 0.7, 0]}
    shape = dict(B=1, H=16, D=128, dtype="f16")
    truth = cm.with_fit(dev, [0.5, 0.2, 3e-6, 1.3, 0.7])
    samples = []
    for L in (256, 1024, 4096, 16384):
        samples.append(crossover.dense_stages(L, coef, shape))
        for w in (L // 64, L // 8, L // 2):
            geo = cm.band_geometry(L, 1 - w, 0, True)
            for kernel in ("window", "block_sparse", "gather"):
                samples.append(crossover.tile_kernel_stages(kernel, geo, coef, shape, None))
    data = [(st, cm.pipeline_time(st, truth)[1]) for st in samples]
    fitted, err = cm.fit_device(data, dev)
    c.expect(err["max"] < 0.01, f"fit_device: largest error {err['max']:.4f} on exact data")
    c.expect(abs(fitted["eta_tensor"] / 0.5 - 1) < 0.05
             and abs(fitted["t_launch"] / 3e-6 - 1) < 0.1,
             f"fit_device recovers eta_tensor and t_launch: {fitted}")


def check_gpu_results(c):
    """A made-up GPU folder (records in bench_attention's and bench_torch.py's schema, timed by
    the model with changed parameters): the fit recovers those times and the 128K table gains a
    measured column."""
    import json
    import tempfile
    import types
    dev = cm.DEVICES[cm.DEFAULT_DEVICE]
    coef = cm.fit_counts(crossover.profile_records())
    truth = cm.with_fit(dev, [0.3, 0.2, 2e-6, 0.8, 1.0])
    recs = []

    def add(impl, L, causal, pattern, stages):
        recs.append(dict(impl=impl, B=1, H=16, Lq=L, D=128, dtype="f16", causal=causal,
                         pattern=pattern, status="PASS", simulated=False,
                         median_ms=cm.pipeline_time(stages, truth)[1] * 1e3))
    shape = crossover.SEED_SHAPE
    for L in (1024, 4096, 16384):
        add("04_sparse_patterns/dense_fa2", L, True, f"causal_window:w={L // 8}",
            crossover.dense_stages(L, coef, shape))
        for w in (L // 64, L // 8, L // 2):
            geo = cm.band_geometry(L, 1 - w, 0, True)
            for k in ("block_sparse", "window", "gather"):
                add(f"04_sparse_patterns/{k}", L, True, f"causal_window:w={w}",
                    crossover.tile_kernel_stages(k, geo, coef, shape, None))
    L = crossover.SEED_L
    for _, spec, kernels, _ in crossover.SEED_ROWS:
        geo = cm.geometry_of(spec, L, False)
        for k in kernels:
            add(f"04_sparse_patterns/{k}", L, False, spec,
                crossover.tile_kernel_stages(k, geo, coef, shape, None))
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "NVIDIA-TEST")
        os.makedirs(folder)
        with open(os.path.join(folder, "crossover.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
        with open(os.path.join(folder, "crossover_torch.jsonl"), "w") as f:
            f.write(json.dumps(dict(impl="torch/sdpa_flash", Lq=L, causal=False,
                                    pattern="dense", status="PASS", median_ms=400.0)) + "\n")
        crossover.ARGS = types.SimpleNamespace(device=folder)
        try:
            fits = crossover.device_fits(coef, dev)
            fit = crossover.fit_table(fits, dev)
            fitted = crossover.fitted_device(dev, fits)
            seed = crossover.seed_table(coef, fitted)
        finally:
            crossover.ARGS = None
    # the tables time with the fitted parameters: the 128K window row as the made-up GPU would
    geo = cm.geometry_of(crossover.SEED_ROWS[0][1], L, False)
    want = cm.pipeline_time(crossover.tile_kernel_stages("window", geo, coef, shape, None),
                            truth)[1]
    got = crossover.seed_table_model(coef, fitted)[0]["ours"]["window"]
    c.expect(abs(got / want - 1) < 0.02 and abs(
        crossover.seed_table_model(coef, dev)[0]["ours"]["window"] / want - 1) > 0.1,
        f"the 128K window modelled with the fitted parameters: {got} s, the GPU's {want} s")
    # the measured speed-ups: at 4K and w = 512 (12 % of the causal entries) each kernel against
    # the made-up GPU's dense time, and the fitted model's beside it
    row = next((x for x in fit.splitlines() if x.startswith("| 4K | `causal_window:w=512` |")), "")
    want = {}
    g = cm.band_geometry(4096, 1 - 512, 0, True)
    td = cm.pipeline_time(crossover.dense_stages(4096, coef, shape), truth)[1]
    for k in ("window", "block_sparse", "gather"):
        want[k] = crossover.fmt_x(td / cm.pipeline_time(
            crossover.tile_kernel_stages(k, g, coef, shape, None), truth)[1])
    c.expect(row.count("|") == 7 and all(f" {want[k]} (" in row for k in want),
             f"the measured speed-ups at 4K, w = 512: {row!r}, want {want}")
    c.expect(crossover.device_label(fitted).endswith("parameters fitted to NVIDIA-TEST"),
             f"the figures' label: {crossover.device_label(fitted)}")
    c.expect("| NVIDIA-TEST | " in fit, f"fit table:\n{fit}")
    largest = float(fit.split("| NVIDIA-TEST |")[1].split("\n")[0].split("|")[-2].split("%")[0])
    c.expect(largest < 2.0, f"the fit's largest error on model-made times: {largest} %")
    c.expect("measured on NVIDIA-TEST" in seed and "dense 400 ms" in seed,
             f"the 128K table's measured column:\n{seed}")


def check_frontier(c):
    """A made-up 2K window set in the quality toolkit's schema (quality/README.md: per spec its
    family, density, completeness and the paired NLL change against dense) through the frontier:
    one point per complete configuration, the Pareto front neither dominated nor missing a
    point, the table with its figure, the lengths and families still to come."""
    L = 2048
    specs = {"window": "causal_window:w=256", "sink+window": "global:n=4+causal_window:w=252",
             "strided": "strided:l=4", "bigbird": "bigbird:b=64,r=1,seed=1",
             "ladder": "ladder:b=32,s=1,w=4", "oracle": "oracle:k=256",
             "indexer": "indexer:k=256"}
    nll = dict(zip(specs, (0.30, 0.10, 0.25, 0.20, 0.12, 0.02, 0.05)))
    configs = {s: dict(family=f, density=0.234, complete=True,
                       vs_dense=dict(mean=nll[f], ci95_t=[nll[f] - 0.01, nll[f] + 0.01], n=32))
               for f, s in specs.items()}
    configs["causal_window:w=128"] = dict(family="window", density=0.12, complete=False,
                                          vs_dense=dict(mean=0.5, ci95_t=[0.4, 0.6], n=8))
    sets = {L: [("made-up-2k", dict(set=dict(name="made-up-2k", length=L), configs=configs))]}
    need = [(s, L) for f, s in specs.items() if f not in ("window", "oracle", "indexer")]
    cache = crossover.compute_geometry(need)
    coef = cm.fit_counts(crossover.profile_records())
    dev = cm.DEVICES[cm.DEFAULT_DEVICE]
    pts = crossover.frontier_points(sets, coef, dev, cache)[L]
    c.expect(sorted(p["spec"] for p in pts) == sorted(specs.values()),
             f"one point per complete configuration: {[p['spec'] for p in pts]}")

    def dominates(q, p):
        return (q["speedup"] >= p["speedup"] and q["nll"] <= p["nll"]
                and (q["speedup"] > p["speedup"] or q["nll"] < p["nll"]))
    # The front is of the buildable families: the oracle (a bound on what a shared selection can
    # keep, its choosing cost left out) is never on it and beats no point.
    built = [q for q in pts if q["family"] not in crossover.BOUND_FAMILIES]
    for p in pts:
        beaten = [q["spec"] for q in built if dominates(q, p)]
        on = p["family"] not in crossover.BOUND_FAMILIES and not beaten
        c.expect(p["front"] == on, f"{p['spec']}: on the front {p['front']}, beaten by {beaten}")
    by = {p["family"]: p for p in pts}
    c.expect(by["oracle"]["speedup"] > by["indexer"]["speedup"],
             "the trained indexer costs more than the oracle's selection alone")
    table = crossover.frontier_table({L: pts}, sets)
    c.expect("**L = 2,048**" in table and "frontier_2K.png" in table
             and "L = 8,192 (its quality results" in table
             and "No frontier at L = 32,768: beyond" in table and "Not yet at L" not in table,
             f"the frontier table:\n{table}")
    part = crossover.frontier_table({L: [p for p in pts if p["family"] != "strided"]}, sets)
    c.expect("Not yet at L = 2,048: strided (" in part,
             f"a family without results at a length is named:\n{part}")


def check_break_even(c):
    row = {256: dict(speedup=0.8), 512: dict(speedup=1.2), 1024: dict(speedup=0.9),
           2048: dict(speedup=1.5), 4096: dict(speedup=2.0)}
    c.expect(crossover.break_even(row) == 2048, "break-even: after the last loss")
    c.expect(crossover.break_even({256: None, 512: dict(speedup=1.1)}) == 512, "reachable only")
    c.expect(crossover.break_even({256: dict(speedup=2.0), 512: dict(speedup=0.9)}) == "never",
             "a loss at the largest L: never")
    c.expect(crossover.break_even({256: None}) is None, "never reachable")


def check_bad_input(c):
    p = subprocess.run(python_command() + [os.path.join(ROOT, "benchmarks", "crossover.py"),
                                           "--check", "--quality", "/nonexistent/q"],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    c.expect(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --quality"),
             f"a missing --quality folder: exit {p.returncode}, {p.stderr!r}")


if __name__ == "__main__":
    sys.exit(attn_testing.main(__doc__, [check_geometry, check_geometry_cache, check_solvers,
                                         check_dsa_sums, check_fit, check_gpu_results, check_frontier,
                                         check_break_even,
                                         check_bad_input]))
