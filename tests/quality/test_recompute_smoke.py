#!/usr/bin/env python3
"""The recompute pipeline end to end at toy sizes (CTest quality.recompute_smoke):
`recompute.py --smoke DIR` trains an indexer on 2 windows of 64 tokens (2 epochs, a held-out
window), runs 3 windows of 64 tokens of Pride & Prejudice under dense (with the recall probe) and
four selections, and 4 passkey trials, and collects the result files; then the checks: the files
have the format quality/README.md documents (per-window values, n, density, the paired tests,
recall both ways with the trivial queries apart, Wilson intervals); the oracle's set recall is 1
and its mass recall the highest; a second run finds every job done and runs none; a run stopped
in the middle (a line of a finished job removed) runs only that job again; `--verify 3` runs
three finished jobs again and finds them equal, and finds them changed once the lines are
(NLL + 0.002, a passkey hit flipped); bad input (an unknown
phase) is one line and exit status 2. Every run is recompute.main called in this process (the
model, the tokenizer and PyTorch loaded once, not once per run), with --threads OMP_NUM_THREADS
(1 under CTest, which already runs a test per core: a second thread only added CPU time, 31 s
against 26 s; 2 where it is unset): about 26 s of CPU. Exit 0 when every check passes."""
import contextlib
import io
import json
import os
import sys
import tempfile
import types

import recompute
import smollm
from checks import check, finish, rejects


def run(*args):
    """recompute.main(args) in this process: (returncode, stdout, stderr) as a run's."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = recompute.main(list(args) + ["--threads", str(smollm.threads())])
    return types.SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def main():
    with tempfile.TemporaryDirectory() as tmp:
        r = run("--smoke", tmp)
        check(r.returncode == 0, f"smoke run: exit {r.returncode} {r.stderr[-300:]!r}")
        with open(os.path.join(tmp, "austen-smoke.json")) as f:
            d = json.load(f)
        cfg = d["configs"]
        check(set(cfg) == {"dense", "global:n=2+causal_window:w=14", "ladder:b=4,s=1,w=2",
                           "oracle:k=16", "indexer:k=16"}, f"configs {sorted(cfg)}")
        check(all(c["n"] == 3 and c["complete"] and len(c["window_nll"]) == 3 for c in
                  cfg.values()), "n = 3 per-window values per config")
        sw = cfg["global:n=2+causal_window:w=14"]
        vs = sw["vs_dense"]
        check({"n", "mean", "ci95_t", "p_t", "p_signflip", "ci95_boot", "verdict"} <= set(vs)
              and vs["n"] == 3 and vs["p_signflip"] >= 0.25
              and vs["verdict"] == "no significant difference",
              f"paired tests against dense (3 windows: sign-flip p >= 1/4, no verdict): {vs}")
        rec = {s: c["recall"] for s, c in cfg.items() if s != "dense"}
        check(all(r_["rows"] == 3 * 64 and 0 < r_["nontrivial"] < r_["rows"]
                  for r_ in rec.values()), "recall over the 64 rows of 3 windows (per layer), the "
              "queries that keep every key apart")
        check(abs(rec["oracle:k=16"]["set"] - 1) < 1e-9 and all(
            rec["oracle:k=16"]["mass"] >= r_["mass"] - 1e-9 for r_ in rec.values()),
            "oracle: set recall 1, the highest mass recall")
        check(abs(sw["density"] - 0.4346) < 1e-3, f"density {sw['density']:.4f} (16 keys of 64)")
        with open(os.path.join(tmp, "passkey.json")) as f:
            pk = json.load(f)["lengths"]["96"]
        check(set(pk) == {"dense", "oracle:k=16"} and all(
            c["trials"] == 2 and c["wilson95"][0] <= c["accuracy"] <= c["wilson95"][1]
            for c in pk.values()), "passkey: 2 trials per attention, Wilson interval")
        with open(os.path.join(tmp, "indexer_training.json")) as f:
            t = json.load(f)
        check(len(t["val_loss"]) == 3 and len(t["train_loss"]) == 2
              and t["adam_steps_per_layer"] == 4, "training log: held-out loss per epoch")
        r = run("--smoke", tmp)
        check(r.returncode == 0 and "0 jobs to run" in r.stderr, "a second run runs no job")
        raw = os.path.join(tmp, "raw", "austen-smoke.jsonl")
        with open(raw) as f:
            lines = f.readlines()
        with open(raw, "w") as f:
            f.writelines(lines[:-1])
        r = run("--smoke", tmp)
        check(r.returncode == 0 and "1 jobs to run" in r.stderr, "a lost line: that job again")
        r = run("--smoke", tmp, "--verify", "3")
        check(r.returncode == 0 and "3 of 3 jobs agree" in r.stdout
              and [len(v["jobs"]) for v in json.load(open(os.path.join(tmp, "verify.json")))
                   ["runs"].values()] == [3],
              f"--verify 3: three jobs run again agree: {r.stdout[-300:]!r}")
        for name, change in (("austen-smoke", lambda x: dict(x, nll=x["nll"] + 0.002)),
                             ("passkey", lambda x: dict(x, hit=not x["hit"]))):
            path = os.path.join(tmp, "raw", f"{name}.jsonl")
            with open(path) as f:
                recs = [change(json.loads(line)) for line in f]
            with open(path, "w") as f:
                f.writelines(json.dumps(x) + "\n" for x in recs)
        r = run("--smoke", tmp, "--verify", "3")
        check(r.returncode == 1 and "0 of 3 jobs agree" in r.stdout,
              f"--verify: lines changed by 0.002 nats or a flipped hit are caught: "
              f"{r.stdout[-300:]!r}")
    rejects(recompute.main, ["--phases", "nonsense", "--list"], "unknown phase 'nonsense'")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
