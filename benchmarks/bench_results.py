"""bench_results.py — reads the committed benchmark records, for every script that uses them
(update_tables.py, plot.py, memory_analysis.py); and run_main, the benchmark scripts' entry.

    benchmarks/results/<device>/bench_attention.jsonl   bench_attention's records
    benchmarks/results/<device>/bench_torch.jsonl       bench_torch.py's records
    benchmarks/results/<device>/foundation.jsonl        the simulator's own costs (foundation.sh)

One JSON object per line (the keys: benchmarks/README.md, "Output"); blank lines are skipped.
Standard library only.
"""
import glob
import json
import os
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
BENCH = ("bench_attention", "bench_torch")  # the files of the two benchmarks


def load(folder, names=BENCH):
    """The records of <folder>/<name>.jsonl for each name (those that exist), in that order."""
    records = []
    for name in names:
        path = os.path.join(folder, name + ".jsonl")
        if os.path.isfile(path):
            with open(path) as f:
                records += [json.loads(line) for line in f if line.strip()]
    return records


def load_devices(results=RESULTS, names=BENCH):
    """{device: records} over the device folders of `results` that hold any, devices sorted."""
    out = {}
    for folder in sorted(glob.glob(os.path.join(results, "*", ""))):
        records = load(folder, names)
        if records:
            out[os.path.basename(os.path.dirname(folder))] = records
    return out


def run_main(main):
    """Exits with main(the command line's arguments); where this Python lacks a package the
    script needs (Matplotlib for a plot), with one line naming the set-up instead of a
    traceback."""
    try:
        sys.exit(main(sys.argv[1:]))
    except ModuleNotFoundError as e:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../scripts"))
        from chapter_script import missing
        sys.exit(missing(e.name, setup="--python"))
