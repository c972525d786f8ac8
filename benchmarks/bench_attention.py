#!/usr/bin/env python3
"""bench_attention.py — the benchmark is a C program (bench_attention.c, built as
build/<preset>/benchmarks/bench_attention_<backend>); this runs it for those who type
`python bench_attention.py`.

    python benchmarks/bench_attention.py            the course's comparison table
                                                    (--grid seed-table --table)
    python benchmarks/bench_attention.py ARGS...    bench_attention with ARGS (--help lists them)

It runs the GPU build (build/gpu) where a GPU answers (`nvidia-smi -L` lists one) and that build
has the program, otherwise the simulator build (build/sim), building it first when it is missing
(cmake --preset sim, about a minute on 2 cores). Standard library only; the exit status is the
program's (2 when it cannot be built).
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpu_answers():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    p = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.startswith("GPU ")


def program():
    """The built program to run, building the simulator's when there is none."""
    gpu = os.path.join(ROOT, "build", "gpu", "benchmarks", "bench_attention_gpu")
    if os.access(gpu, os.X_OK) and gpu_answers():
        return gpu
    sim = os.path.join(ROOT, "build", "sim", "benchmarks", "bench_attention_sim")
    if not os.access(sim, os.X_OK):
        if shutil.which("cmake") is None:
            sys.exit("error: bench_attention is a C program and cmake is missing: run "
                     "scripts/setup.sh, then this again (or scripts/run.sh, which builds it)")
        print("bench_attention is a C program: building build/sim/benchmarks/bench_attention_sim "
              "first (cmake --preset sim; about a minute on 2 cores)", file=sys.stderr, flush=True)
        for cmd in (["cmake", "--preset", "sim"],
                    ["cmake", "--build", "--preset", "sim", "-j", str(os.cpu_count() or 2),
                     "--target", "bench_attention_sim"]):
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
                print(f"error: {' '.join(cmd)} failed (above)", file=sys.stderr)
                sys.exit(2)
    return sim


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):  # this launcher's help, and the program's where built
        print(__doc__.strip(), flush=True)
        built = [p for p in (os.path.join(ROOT, "build", b, "benchmarks", f"bench_attention_{b}")
                             for b in ("sim", "gpu")) if os.access(p, os.X_OK)]
        return subprocess.call([built[0], "--help"]) if built else 0
    exe = program()
    args = argv or ["--grid", "seed-table", "--table"]
    print(f"running {os.path.relpath(exe)} {' '.join(args)}", file=sys.stderr, flush=True)
    return subprocess.call([exe] + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
