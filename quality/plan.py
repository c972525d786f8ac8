"""plan.py — the quality experiments' plan: which attention configurations run on which window
sets, the passkey trials, the phases they run in, and the raw records the jobs write. The runner
(recompute.py) runs it; the tables (report.py, examples/06_custom_pattern/make_tables.py) read it
to name and count what was planned. Needs no torch.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import attention  # noqa: E402
import texts  # noqa: E402
import windowsets  # noqa: E402

SINKS = 4

# ----------------------------------------------------------------------------------------------
# The configurations: (spec, family, target density)
# ----------------------------------------------------------------------------------------------

# Example 06: the ladder against its contenders at about 23 % of the causal entries of a
# 512-token window, and its ablations (examples/06_custom_pattern/REPORT.md).
LADDER_512 = [("ladder:b=8,s=1,w=4", "ladder"),
              ("global:n=4+causal_window:w=60", "sink+window"),
              ("strided:l=5", "strided"),
              ("bigbird:b=8,r=8,seed=1", "bigbird"),
              ("oracle:k=64", "oracle"),
              ("indexer:k=64", "indexer"),
              ("ladder:b=8,s=0,w=6", "ablation: no sink block"),
              ("ladder:b=1,s=4,w=56", "ablation: token granularity (b=1)"),
              ("ladder:b=4,s=2,w=12", "ablation: finer blocks (b=4)")]

FAMILIES = ("window", "sink+window", "strided", "bigbird", "ladder", "oracle", "indexer")
# The parameters of strided, BigBird and the ladder at each length L and density point k
# (`--solve L`); window, sink+window, oracle and indexer keep k keys.
FRONTIER_PARAMS = {
    2048: {128: ("strided:l=9", "bigbird:b=32,r=1,seed=1", "ladder:b=16,s=1,w=1"),
           256: ("strided:l=4", "bigbird:b=64,r=1,seed=1", "ladder:b=32,s=1,w=4"),
           512: ("strided:l=2", "bigbird:b=128,r=1,seed=1", "ladder:b=64,s=1,w=6")},
    8192: {512: ("strided:l=8", "bigbird:b=128,r=1,seed=1", "ladder:b=64,s=1,w=1"),
           1024: ("strided:l=4", "bigbird:b=256,r=1,seed=1", "ladder:b=128,s=1,w=4"),
           2048: ("strided:l=2", "bigbird:b=512,r=1,seed=1", "ladder:b=256,s=1,w=6")},
}


def frontier_specs(L, k):
    """{family: spec} of the density point k at length L."""
    strided, bigbird, ladder = FRONTIER_PARAMS[L][k]
    return {"window": f"causal_window:w={k}", "sink+window": attention.sink_window(k, SINKS),
            "strided": strided, "bigbird": bigbird, "ladder": ladder, "oracle": f"oracle:k={k}",
            "indexer": f"indexer:k={k}"}


# FRONTIER[L][k] = {family: spec}: density of top-k with k = L/16, L/8, L/4.
FRONTIER = {L: {k: frontier_specs(L, k) for k in ks} for L, ks in FRONTIER_PARAMS.items()}


# FP8 (examples 05 and 09): the model over an FP8 KV cache against dense, and the trained
# indexer in FP8 against itself in 16 bits at the indexer's k of the set's existing rows (the DSA
# table at 2,048 tokens, example 06's table at 512). Not probed by dense's recall probe (the
# committed probes predate them): judged by their NLL only.
FP8_CONFIGS = {512: [("dense-fp8", "fp8 cache", None), ("indexer-fp8:k=64", "fp8 indexer", 64)],
               2048: [("dense-fp8", "fp8 cache", None),
                      ("indexer-fp8:k=256", "fp8 indexer", 256)]}
FP8_SETS = ("austen-2k", "austen-512", "kjv-512", "go-512")
FP8_FAMILIES = ("fp8 cache", "fp8 indexer")


def fp8_configs(name):
    """The FP8 configurations of a window set ([] where none run)."""
    return FP8_CONFIGS[windowsets.SETS[name].length] if name in FP8_SETS else []


def frontier(L, k, families=FAMILIES):
    return [(FRONTIER[L][k][f], f, k) for f in families]


def set_configs(name):
    """Every configuration of a window set, dense first: [(spec, family, k of the density point
    or None)]. The dense job's probe judges all of them."""
    ws = windowsets.SETS[name]
    if ws.length == 512:
        return [("dense", "dense", None)] + [(s, f, 64) for s, f in LADDER_512] + fp8_configs(
            name)
    L = ws.length
    out = [("dense", "dense", None)]
    for k in (L // 8, L // 16, L // 4) if L in FRONTIER else ():
        out += frontier(L, k)
    return out + fp8_configs(name)


# ----------------------------------------------------------------------------------------------
# The plan
# ----------------------------------------------------------------------------------------------

PASSKEY_LENGTHS = (1024, 2048)
PASSKEY_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)
PASSKEY_KEYS = (51937, 82046, 37415, 60283, 24759)
PASSKEY_FILLER = ("Pride & Prejudice", 8192)  # filler text: the novel from this token on
TRAIN_WINDOWS, VAL_WINDOWS, EPOCHS = 52, 8, 2


def passkey_configs(L):
    """dense and four selections at the density of top-k with k = L/8 (about 23 %)."""
    k = L // 8
    return [("dense", "dense"), (attention.sink_window(k, SINKS), "sink+window"),
            (ladder_for(L, attention.top_k_density(k, L)), "ladder"),
            (f"oracle:k={k}", "oracle"), (f"indexer:k={k}", "indexer")]


def ladder_for(L, target):
    """The ladder of L/64-token blocks (64 blocks, example 06's structure), one sink block, whose
    density is closest to target."""
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "06_custom_pattern"))
    import ladder
    b = max(1, L // 64)
    w = min(range(1, 65), key=lambda w: abs(ladder.density(L, b, 1, w) - target))
    return f"ladder:b={b},s=1,w={w}"


def nll_jobs(set_name, specs):
    ws = windowsets.SETS[set_name]
    return [("nll", set_name, spec, i) for spec in specs for i in range(ws.count)]


def phases():
    """[(name, [job])] in the order they run."""
    texts512 = [f"{t}-512" for t in texts.SCENARIOS]
    ladder_specs = [s for s, f in LADDER_512 if f != "indexer"]
    p = [("512", [j for s in texts512 for j in nll_jobs(s, ladder_specs)]),
         ("train", [("train",)]),
         ("512-dsa", [j for s in texts512 for j in nll_jobs(s, ["dense", "indexer:k=64"])])]
    f2 = FRONTIER[2048]
    p.append(("2k", nll_jobs("austen-2k", ["dense"] + [f2[256][f] for f in (
        "sink+window", "indexer", "oracle", "ladder", "window", "strided", "bigbird")])))
    p.append(("passkey", [("passkey", L, spec, d, key) for L in PASSKEY_LENGTHS
                          for spec, _ in passkey_configs(L) for d in PASSKEY_DEPTHS
                          for key in PASSKEY_KEYS]))
    p.append(("2k-more", nll_jobs("austen-2k", [f2[k][f] for k in (128, 512) for f in FAMILIES])))
    p.append(("2k-texts", [j for t in ("kjv", "go") for j in nll_jobs(
        f"{t}-2k", ["dense"] + [f2[256][f] for f in ("sink+window", "ladder", "oracle",
                                                    "indexer")])]))
    f8 = FRONTIER[8192]
    p.append(("8k", nll_jobs("austen-8k", ["dense", f8[1024]["sink+window"],
                                           f8[1024]["ladder"], f8[2048]["indexer"],
                                           f8[2048]["oracle"]])))
    # sink+window at DSA's k first (the DSA table's comparison at 8K), then the fixed patterns
    # of the 23 % point (a forward under them costs less than under a top-k selection)
    p.append(("8k-more", nll_jobs("austen-8k", [f8[2048]["sink+window"]] + [f8[1024][f] for f in (
        "window", "strided", "bigbird", "indexer", "oracle")] + [
        f8[k][f] for k in (512, 2048) for f in FAMILIES if (k, f) not in (
            (2048, "indexer"), (2048, "oracle"), (2048, "sink+window"))])))
    # FP8 last (run by itself: --phases fp8): 2,048 tokens first, then the three texts at 512
    p.append(("fp8", [j for s in FP8_SETS for j in nll_jobs(s, [c for c, _, _ in
                                                              fp8_configs(s)])]))
    return p


def forwards(job):
    """(tokens per forward, forwards) of a job, for --list."""
    if job[0] == "nll":
        return windowsets.SETS[job[1]].length, 1
    if job[0] == "passkey":
        return job[1], 1
    return 2048, (TRAIN_WINDOWS + VAL_WINDOWS) * EPOCHS + VAL_WINDOWS


# ----------------------------------------------------------------------------------------------
# The raw records (results/raw/*.jsonl): one JSON line per finished job
# ----------------------------------------------------------------------------------------------

def read_lines(path):
    """The records of a JSONL file (a last line still being written by another run is skipped)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if line.endswith("\n"):
                    raise
    return out
