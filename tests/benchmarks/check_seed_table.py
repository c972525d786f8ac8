#!/usr/bin/env python3
"""check_seed_table.py — runs the course's comparison table on the simulator
(bench_attention_sim --grid seed-table --table, what scripts/run.sh ends with) and checks that it
teaches what it claims:

  * every row (naive, flash, flash-v2, sparse) timed at both simulator lengths, under the
    simulator's warning, each quantity in its own column with its unit;
  * the dense rows see every key (keys per query = L) and the sparse row a small share of them
    (window w=64: 121 and 125 keys per query at L = 512 and 1024, at most a quarter of L);
  * memory: naive's L x L scores grow with L^2 and exceed flash's at every L;
  * with --model (an instrumented sim-check build): the modelled DRAM bytes, FLOPs, FLOP per DRAM
    byte and H100 bound in their own columns; the sparse row doing at most 40 % of flash-v2's
    FLOPs with an H100 bound no higher; naive moving more DRAM bytes than flash (its L x L
    scores); without --model, no modelled column and the line that says how to get them.

    check_seed_table.py BENCH_BINARY [--model] [--L 512]
--L 512: that length only (the sim-check build's test: its instrumented launches are slow).
Exit 0 when every check passes, 1 otherwise (one line per failed check). Standard library.
"""
import re
import subprocess
import sys

LENGTHS = (512, 1024)
ROWS = ("naive (01)", "flash (02)", "flash-v2 (03 fa2_mma, f16)",
        "sparse k=129 (04 window w=64, f16)")
SPARSE_KEYS = {512: 121, 1024: 125}  # (L(2w+1) - w(w+1)) / L for w = 64, rounded
HEADER = "| L | implementation | keys per query | time (ms) | memory (MiB) |"
MODEL = (" DRAM (MB, model) | work (MFLOP, model) | FLOP per DRAM byte (model) |"
         " H100 bound (µs, model) |")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def main(argv):
    global LENGTHS
    opts = argv[1:]
    if not argv or any(a not in ("--model", "--L", "512") for a in opts) or \
            ("512" in opts) != ("--L" in opts):
        print("usage: check_seed_table.py BENCH_BINARY [--model] [--L 512]", file=sys.stderr)
        return 2
    model = "--model" in opts
    extra = []
    if "--L" in opts:
        LENGTHS, extra = (512,), ["--L", "512"]
    p = subprocess.run([argv[0], "--grid", "seed-table", "--table", "--reps", "1"] + extra,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout
    check(p.returncode == 0, f"exit status {p.returncode}: {p.stderr[-2000:]}")
    check("CPU-simulator timings, not GPU performance." in out, "no simulator warning")
    check((HEADER + MODEL if model else HEADER + "\n") in out + "\n",
          f"header is not {HEADER + (MODEL if model else '')!r}")
    if not model:
        check("No modelled columns (DRAM bytes, FLOPs, FLOP per DRAM byte, roofline bound on an "
              "H100): the profile needs kernels compiled with the simulator's instrumentation" in out,
              "no line saying how to get the modelled columns")
    table = {}
    for line in out.splitlines():
        m = re.match(r"^\| (\d+) \| ([^|]+) \| (.*) \|$", line)
        if m:
            table[(int(m.group(1)), m.group(2).strip())] = [c.strip() for c in
                                                            m.group(3).split(" | ")]
    ncols = 7 if model else 3
    check(len(table) == len(LENGTHS) * len(ROWS),
          f"{len(table)} rows, not {len(LENGTHS) * len(ROWS)}: {sorted(table)}")
    num = {}
    for L in LENGTHS:
        for row in ROWS:
            cells = table.get((L, row))
            if cells is None or len(cells) != ncols:
                check(False, f"L={L} {row}: cells {cells}")
                continue
            try:
                num[L, row] = [float(c) for c in cells]
            except ValueError:
                check(False, f"L={L} {row}: a cell is not a number: {cells}")
                continue
            check(all(v > 0 for v in num[L, row]), f"L={L} {row}: a cell is not positive {cells}")
    if failures:
        return finish()
    for L in LENGTHS:
        for row in ROWS[:3]:
            check(num[L, row][0] == L, f"L={L} {row}: {num[L, row][0]} keys per query, not {L}")
        keys = num[L, ROWS[3]][0]
        check(keys == SPARSE_KEYS[L] and keys <= L / 4,
              f"L={L} sparse: {keys} keys per query, not {SPARSE_KEYS[L]}: the row is not sparse")
        check(num[L, ROWS[0]][2] > num[L, ROWS[1]][2],
              f"L={L}: naive's memory {num[L, ROWS[0]][2]} MiB is not above flash's")
        if model:
            dram, work, bound = ({row: num[L, row][n] for row in ROWS} for n in (3, 4, 6))
            check(work[ROWS[3]] <= 0.4 * work[ROWS[2]],
                  f"L={L}: sparse does {work[ROWS[3]]} MFLOP, more than 40 % of flash-v2's "
                  f"{work[ROWS[2]]}")
            check(bound[ROWS[3]] <= bound[ROWS[2]],
                  f"L={L}: sparse's H100 bound {bound[ROWS[3]]} us is above flash-v2's "
                  f"{bound[ROWS[2]]}")
            check(dram[ROWS[0]] > 2 * dram[ROWS[1]],
                  f"L={L}: naive moves {dram[ROWS[0]]} MB, not over twice flash's {dram[ROWS[1]]}")
    if len(LENGTHS) > 1:
        growth = num[LENGTHS[1], ROWS[0]][2] / num[LENGTHS[0], ROWS[0]][2]
        check(growth > 3, f"naive's memory grew {growth:.2f}x from L=512 to 1024, not ~4x (L x L)")
    return finish()


def finish():
    for f in failures:
        print("FAIL: " + f)
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
