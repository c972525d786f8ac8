#!/usr/bin/env python3
"""grade.py -- the chapter's grader (its design and manual: grader/README.md). Python 3 standard
library.

  grade.py 01_mini_flash                          grade my exercise (exercises/01_mini_flash/)
  grade.py 01_mini_flash path/to/mini_flash.cu    grade one submission
  grade.py 01_mini_flash submissions/             grade a class: one folder (or <learner>.cu) each
                                                  -> class.csv + a report per learner

Every case runs in its own process with a timeout; a compile error, a crash, a hang or a NaN is a
failed case with a clear message. Results are written as they come (results.json, Gradescope's
format, rewritten after every case). Exit status: 0 full marks, 1 below full marks, 2 usage.
"""
import argparse
import concurrent.futures
import csv
import fcntl
import fnmatch
import glob
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXIT_USAGE = 2
EXIT_NO_GPU = 77
COMPILE_LINES = 40
# Symbols a submission may not use: the harness's oracle and checker (a "kernel" that returns the
# reference), the example driver, and ways to run other code. grading.json may replace the list.
DEFAULT_FORBIDDEN = ["attn_reference*", "attn_check_*", "attn_example_main", "attn_host_inputs_*",
                     "system", "popen", "fork", "execv*", "execl*", "dlopen", "dlsym",
                     "*_solution"]
# The variables a case process inherits (prefixes): never ATTN_GRADER_* (the secret, its path).
CHILD_ENV = ("PATH", "LANG", "LC_", "CUDASIM_", "OMP_", "CUDA_", "ASAN_", "TSAN_", "UBSAN_",
             "LSAN_", "LD_LIBRARY_PATH")
# Resource limits of a case process (prlimit; the CPU time is the case's timeout + 1 s).
LIMITS = {"--fsize": 256 << 20, "--nproc": 64, "--as": 8 << 30}
SANDBOX_ID = 65534  # nobody / nogroup: the user a case runs as when the grader is root
SANDBOX_NAMES = {"namespace": "each case as nobody in its own PID and mount namespace",
                 "user": "each case as nobody (no namespaces here: /tmp is shared)",
                 "none": "resource limits only (the grader is not root)"}


class UsageError(Exception):
    """A bad command line, a missing file: one line, exit status 2."""


def say(msg, quiet=False):
    if not quiet:
        print(msg, flush=True)


# ---- the exercise ------------------------------------------------------------------------------

class Case:
    def __init__(self, name, args, seed, points, visibility, env, kind):
        self.name, self.args, self.seed, self.points = name, args, seed, points
        self.visibility, self.env, self.kind = visibility, env or {}, kind


def load_spec(exercise):
    """grading.json of an exercise given as 01_mini_flash, 01, or a path to its folder."""
    folder = exercise.rstrip("/")
    if not os.path.isdir(folder):
        names = sorted(os.listdir(os.path.join(ROOT, "exercises")))
        matches = [n for n in names if n == folder or n.split("_")[0] == folder]
        if len(matches) != 1:
            raise UsageError(f"unknown exercise '{exercise}' (have: {', '.join(names)})")
        folder = os.path.join(ROOT, "exercises", matches[0])
    path = os.path.join(folder, "grading.json")
    if not os.path.isfile(path):
        raise UsageError(f"no grading.json in {folder}")
    with open(path) as f:
        spec = json.load(f)
    for key in ("exercise", "submission_file", "exports", "case_program", "timeout_s", "cases"):
        if key not in spec:
            raise UsageError(f"{path}: missing key '{key}'")
    spec["_dir"] = os.path.abspath(folder)
    return spec


class SecretRng:
    """Deterministic numbers from the instructor secret: HMAC-SHA256 in counter mode."""

    def __init__(self, secret, label):
        self.secret, self.label, self.counter, self.pool = secret, label, 0, b""

    def _u64(self):
        if len(self.pool) < 8:
            msg = f"{self.label}/{self.counter}".encode()
            self.pool += hmac.new(self.secret, msg, hashlib.sha256).digest()
            self.counter += 1
        value, self.pool = int.from_bytes(self.pool[:8], "little"), self.pool[8:]
        return value

    def uniform(self):
        return self._u64() / 2.0**64

    def integer(self, lo, hi):
        return lo + self._u64() % (hi - lo + 1)


def hidden_cases(spec, secret, nonce=None):
    """The hidden cases: shapes drawn from the secret, seeds from the secret and the run's nonce
    (README: "Hidden cases"); without a nonce, seeds from the secret alone."""
    hid = spec.get("hidden")
    if not hid or secret is None:
        return []
    if hid.get("generator", "shapes") != "shapes":
        raise UsageError(f"grading.json: unknown hidden generator '{hid.get('generator')}'")
    cases = []
    for n in range(1, int(hid["count"]) + 1):
        rng = SecretRng(secret, f"{spec['exercise']}/hidden/{n}")
        args, values = [], {}
        for prm in hid["params"]:
            flag = prm["flag"]
            if "p" in prm:
                if rng.uniform() < prm["p"]:
                    args.append(flag)
                continue
            same = prm.get("same_as")
            if same in values and rng.uniform() < prm.get("p_same", 0.0):
                value = values[same]
            elif "range" in prm:
                value = rng.integer(*prm["range"])
            else:
                value = prm["choices"][rng.integer(0, len(prm["choices"]) - 1)]
            values[flag] = value
            args += [flag, str(value)]
        seed = rng.integer(1, 2**31 - 1)
        if nonce is not None:  # fresh inputs every run: an answer kept from another run is wrong
            seed = SecretRng(secret, f"{spec['exercise']}/hidden/{n}/{nonce.hex()}").integer(
                1, 2**31 - 1)
        cases.append(Case(f"hidden_{n:02d}", args + list(hid.get("extra_args", [])),
                          seed, float(hid["points_each"]),
                          hid.get("visibility", "after_due_date"), hid.get("env"), "hidden"))
    return cases


def all_cases(spec, secret, backend, nonce=None):
    cases = [Case(c["name"], c["args"], c.get("seed", n + 1), float(c["points"]),
                  c.get("visibility", "visible"), c.get("env"), "public")
             for n, c in enumerate(spec["cases"])]
    cases += hidden_cases(spec, secret, nonce)
    perf = spec.get("performance")
    if perf:
        cases.append(Case(perf.get("name", "performance"), perf["args"], perf.get("seed", 1),
                          float(perf["points"]) if backend == "gpu" else 0.0,
                          perf.get("visibility", "visible"), perf.get("env"), "performance"))
    return cases


def read_secret(args):
    if args.secret_file or os.environ.get("ATTN_GRADER_SECRET_FILE"):
        path = args.secret_file or os.environ["ATTN_GRADER_SECRET_FILE"]
        if not os.path.isfile(path):
            raise UsageError(f"secret file not found: {path}")
        with open(path, "rb") as f:
            secret = f.read().strip()
    elif os.environ.get("ATTN_GRADER_SECRET"):
        secret = os.environ["ATTN_GRADER_SECRET"].encode()
    else:
        return None
    if not secret:
        raise UsageError("the instructor secret is empty")
    return secret


# ---- building a submission ---------------------------------------------------------------------

class Build:
    """The chapter build that holds the exercise's grader targets (grader/CMakeLists.txt)."""

    def __init__(self, spec, build_dir, backend, quiet):
        self.spec, self.quiet = spec, quiet
        self.build_dir = os.path.abspath(build_dir)
        ex = spec["exercise"]
        self.info_path = os.path.join(self.build_dir, "grader", f"{ex}.{backend}.json")
        if not os.path.isfile(self.info_path):
            self._configure()
        if not os.path.isfile(self.info_path):
            raise UsageError(f"{self.build_dir} has no grader targets for {ex} on the {backend} "
                             "backend (is the solution there? see grader/README.md)")
        with open(self.info_path) as f:
            self.info = json.load(f)
        self.backend = backend

    def _configure(self):
        preset = os.path.basename(self.build_dir)
        if os.path.isfile(os.path.join(self.build_dir, "CMakeCache.txt")):
            cmd = ["cmake", self.build_dir]
        elif os.path.dirname(self.build_dir) == os.path.join(ROOT, "build"):
            cmd = ["cmake", "--preset", preset]
        else:
            raise UsageError(f"no build in {self.build_dir}: run 'cmake --preset sim' first")
        say(f"configuring {self.build_dir} (once) ...", self.quiet)
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise UsageError("cmake configure failed:\n" + (done.stdout + done.stderr)[-3000:])

    def compile(self, submission, workdir):
        """Builds the case program with `submission` in the slot; copies it into workdir.
        Returns (program path or None, log lines for the learner)."""
        slot = self.info["slot"]
        with open(os.path.join(self.build_dir, "grader", self.spec["exercise"] + ".lock"),
                  "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one slot per build: one build at a time
            with open(submission, "rb") as f:
                body = f.read()
            old = open(slot, "rb").read() if os.path.isfile(slot) else None
            if old != body:
                with open(slot, "wb") as f:
                    f.write(body)
            done = subprocess.run(["cmake", "--build", self.build_dir, "--target",
                                   self.info["runner_target"], self.info["target"]],
                                  capture_output=True, text=True)
            log = done.stdout + done.stderr
            if done.returncode != 0:
                if old is not None:  # the slot's last good file: the build tree stays buildable
                    with open(slot, "wb") as f:
                        f.write(old)
                return None, compile_errors(log, slot, submission, self.spec)
            bad = forbidden_symbols(self.info["submission_library"], self.spec)
            if bad:
                return None, [f"{os.path.basename(submission)} uses {', '.join(bad)}: a submission "
                              "must compute the output in its kernel (the harness's reference, "
                              "checker and process functions are off limits)"]
            foreign = foreign_includes(self.build_dir, self.spec, self.backend)
            if foreign:
                return None, [f"{os.path.basename(submission)} includes {', '.join(foreign)}: a "
                              "submission may include the exercise folder's headers, the "
                              "harness's public headers and system headers only"]
            programs = []
            for key in ("program", "runner"):  # the checker, the submission's program
                programs.append(os.path.join(workdir, os.path.basename(self.info[key])))
                shutil.copy2(self.info[key], programs[-1])
                os.chmod(programs[-1], 0o755)
        return tuple(programs), warnings_of(log, slot, submission)


NOISE = re.compile(r"^(\[\s*\d+%\]|g?make(\[\d+\])?:|ninja:|FAILED:|Consolidate compiler|"
                   r"cudasim: rewriting|-- |Scanning dependencies|Built target|\s*$)")


def learner_lines(log, slot, submission):
    name = os.path.basename(submission)
    lines = []
    for line in log.splitlines():
        if NOISE.match(line):
            continue
        lines.append(line.replace(slot, name).replace(os.path.dirname(slot) + "/", ""))
    return lines


def compile_errors(log, slot, submission, spec):
    lines = learner_lines(log, slot, submission)
    if any("multiple definition of" in l for l in lines):
        lines.append("hint: make every function and variable of your file 'static' except "
                     + ", ".join(spec["exports"]))
    if not lines:
        lines = ["the build failed with no compiler message; the build log ends:"]
        lines += log.splitlines()[-10:]
    if len(lines) > COMPILE_LINES:
        lines = lines[:COMPILE_LINES] + [f"... ({len(lines) - COMPILE_LINES} more lines)"]
    return lines


def warnings_of(log, slot, submission):
    return [l for l in learner_lines(log, slot, submission) if os.path.basename(submission) in l
            and "warning" in l][:10]


def forbidden_symbols(library, spec):
    patterns = spec.get("forbidden_symbols", DEFAULT_FORBIDDEN)
    try:
        done = subprocess.run(["nm", "-u", "--format=posix", library], capture_output=True,
                              text=True)
    except FileNotFoundError:
        return []  # no binutils: the check is skipped (the case checks still apply)
    used = {line.split()[0] for line in done.stdout.splitlines() if line.strip()
            and not line.endswith(":")}
    return sorted(s for s in used if any(fnmatch.fnmatchcase(s, p) for p in patterns))


def source_dir_of(build_dir):
    """The chapter folder a CMake build was configured from (its CMakeCache.txt)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return os.path.realpath(line.split("=", 1)[1].strip())
    except OSError:
        pass
    return ROOT


def cuda_root(build_dir):
    """The CUDA toolkit a GPU build compiles with (CMakeCache.txt: nvcc's folder's parent)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_CUDA_COMPILER:"):
                    nvcc = os.path.realpath(line.split("=", 1)[1].strip())
                    return os.path.join(os.path.dirname(os.path.dirname(nvcc)), "")
    except OSError:
        pass
    return None


def foreign_includes(build_dir, spec, backend):
    """The files the submission's compile read (the compiler's dependency file: g++ on the
    simulator, nvcc on a GPU) outside the exercise folder, the public headers, the CUDA toolkit
    and the system: e.g. the solution, or its translation unit generated in the build tree. A
    missing dependency file refuses the submission (the check cannot be made)."""
    pattern = os.path.join(build_dir, "grader", "CMakeFiles", f"grader_{spec['exercise']}_"
                           f"submission_{backend}.dir", "**", "*.o.d")
    roots = {os.path.realpath(ROOT), source_dir_of(build_dir)}  # the build: maybe another copy
    allowed = ["/usr/"] + [os.path.join(root, d, "") for root in roots for d in (
        os.path.join("exercises", spec["exercise"]), "common/include", "common/cudasim/include",
        "common/device")]
    if cuda_root(build_dir):
        allowed.append(cuda_root(build_dir))
    depfiles = glob.glob(pattern, recursive=True)
    if not depfiles:
        return ["(no dependency file of the compile: the include check cannot be made)"]
    foreign = []
    for depfile in depfiles:
        with open(depfile) as f:
            words = f.read().replace("\\\n", " ").split()
        # "<object>:" or "<object> :" (nvcc), then the submission's own translation unit
        colon = next((n for n, w in enumerate(words) if w.endswith(":")), len(words))
        for word in words[colon + 2:]:
            path = os.path.realpath(os.path.join(build_dir, word))
            if not path.startswith(tuple(allowed)):
                foreign.append(os.path.relpath(path, ROOT) if path.startswith(ROOT) else path)
    return sorted(set(foreign))


# ---- running the cases -------------------------------------------------------------------------

# Lines kept in a failure message wherever they are in stderr: the simulator's report (kernel,
# block, thread, file:line) and the runner's guard-page report (grader_runner.c).
OWN_REPORTS = ("cudasim: error:", "grader: out-of-bounds read")
SANITIZER = re.compile(r"(ThreadSanitizer|AddressSanitizer|UndefinedBehaviorSanitizer|"
                       r"LeakSanitizer|runtime error:)")


def tail(text, lines=6, chars=700):
    """The end of a case's stderr for a message; a sanitizer report: its first lines instead."""
    all_lines = [l for l in text.splitlines() if l.strip()]
    first = next((n for n, l in enumerate(all_lines) if SANITIZER.search(l)), None)
    if first is not None:
        frame = next((l.strip() for l in all_lines[first:] if l.strip().startswith("#0")), "")
        summary = next((l for l in all_lines if l.startswith("SUMMARY:")), "")
        kept = [all_lines[first].strip("= "), frame, summary]
    else:
        kept = all_lines[-lines:]
        # the simulator's own report (kernel, block, thread, file:line) stays in the message
        sim = next((l for l in all_lines if l.startswith(OWN_REPORTS)), None)
        if sim is not None and sim not in kept:
            kept = [sim] + all_lines[-1:]
        if sim is not None:
            return " | ".join(kept)[:chars]
    out = " | ".join(kept)
    return out if len(out) <= chars else "..." + out[-chars:]


def run_case(programs, case, timeout, jobs, rename):
    """One case in its own processes. Returns (score fraction, status, message, details).
    programs: (checker, submission's program); rename: (slot path, learner's file name) for the
    paths in the simulator's reports."""
    fraction, status, message, result = _run_case(programs, case, timeout, jobs)
    return fraction, status, message.replace(rename[0], rename[1]), result


def with_stderr(message, err, lines=6, chars=700):
    shown = tail(err, lines, chars)
    return f"{message}; stderr: {shown}" if shown else message


_SANDBOX = []


def sandbox_mode():
    """What this machine allows (probed once): "namespace" (root, unshare works: PID and mount
    namespaces, private /tmp, user nobody), "user" (root, no namespaces: user nobody only) or
    "none" (not root: limits only). README: "The sandbox"."""
    if not _SANDBOX:
        mode = "none"
        drop = ["setpriv", f"--reuid={SANDBOX_ID}", f"--regid={SANDBOX_ID}", "--clear-groups",
                "--no-new-privs", "--", "true"]
        ns = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
              "--propagation", "private", "--", "/bin/sh", "-c", "mount -t tmpfs tmpfs /tmp"]
        if os.geteuid() == 0 and shutil.which("setpriv") and shutil.which("prlimit"):
            if subprocess.run(drop, capture_output=True).returncode == 0:
                mode = "user"
                if shutil.which("unshare") and subprocess.run(ns, capture_output=True).returncode \
                        == 0:
                    mode = "namespace"
        _SANDBOX.append(mode)
    return _SANDBOX[0]


def sandboxed(cmd, case_dir, timeout, program):
    """The command line of one case: resource limits (prlimit); when the grader is root, the
    unprivileged user nobody (setpriv) and, where the kernel allows it, a private /tmp and /proc
    and a PID namespace (unshare: every process of the case dies with it)."""
    limits = dict(LIMITS, **{"--cpu": int(timeout) + 1})
    with open(program, "rb") as f:
        if re.search(rb"__(asan|tsan)_init", f.read()):
            del limits["--as"]  # the sanitizers reserve terabytes of address space
    if shutil.which("prlimit"):
        cmd = ["prlimit"] + [f"{k}={v}" for k, v in limits.items()] + ["--"] + cmd
    mode = sandbox_mode()
    if mode == "none":
        return cmd
    os.chown(case_dir, SANDBOX_ID, SANDBOX_ID)
    drop = ["setpriv", f"--reuid={SANDBOX_ID}", f"--regid={SANDBOX_ID}", "--clear-groups",
            "--no-new-privs", "--"]
    if mode == "user":
        return drop + cmd
    # sh stays the namespace's first process (the kernel ignores some signals sent to that one,
    # e.g. abort()'s SIGABRT); a signal death comes back as 128 + the signal (see _run_case_in).
    # The fresh /tmp would hide the program's folder when the build tree itself lies under /tmp
    # (a clone in /tmp): that folder is then carried over the new /tmp by a bind mount via /mnt.
    tmpfs = "mount -t tmpfs -o size=256m,mode=1777 tmpfs /tmp"
    script = ('w="$1"; shift; case "$w" in /tmp/*) mkdir -p /mnt && mount --bind "$w" /mnt && '
              + tmpfs + ' && mkdir -p "$w" && mount --bind /mnt "$w" && umount /mnt ;; *) '
              + tmpfs + ' ;; esac && ' + " ".join(drop) + ' "$@"')
    work = os.path.dirname(os.path.realpath(program))
    return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
            "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", work] + cmd


def _run_case(programs, case, timeout, jobs):
    work = os.path.dirname(programs[1])
    with tempfile.TemporaryDirectory(prefix=f"case-{case.name}-", dir=work) as case_dir:
        return _run_case_in(programs, case, timeout, jobs, case_dir)


def _run_case_in(programs, case, timeout, jobs, case_dir):
    """The case as two processes joined by two pipes (grader/README.md, "Case programs"): the
    checker (trusted: the reference, the solution, the comparison; its JSON line is the verdict)
    and the submission's program (sandboxed; it only answers the checker's requests). Nothing the
    submission's program prints is read as a result."""
    checker, runner = programs
    env = {k: v for k, v in os.environ.items() if k.startswith(CHILD_ENV)}
    env.update({"HOME": case_dir, "TMPDIR": case_dir})
    env.update({k: str(v) for k, v in case.env.items()})
    if jobs > 1:  # cases run side by side: one OS thread each (the reference, the simulator)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("CUDASIM_THREADS", "1")
    to_runner = os.pipe()    # checker -> runner
    from_runner = os.pipe()  # runner -> checker
    run_cmd = sandboxed([runner, "--rpc", f"{to_runner[0]},{from_runner[1]}"], case_dir, timeout,
                        runner)
    chk_cmd = [checker, "--case", case.name, "--seed", str(case.seed)] + list(case.args) + [
        "--json", "--rpc", f"{to_runner[1]},{from_runner[0]}"]
    in_namespace = run_cmd[0] == "unshare"
    start = time.monotonic()
    # stdout and stderr go to files of the grader, not pipes: a process the case leaves behind
    # cannot hold the grader up by keeping a pipe open.
    files = [tempfile.TemporaryFile("w+", errors="replace") for _ in range(4)]
    procs = []
    try:
        procs.append(subprocess.Popen(run_cmd, stdout=files[0], stderr=files[1],
                                      stdin=subprocess.DEVNULL, env=env, cwd=case_dir,
                                      start_new_session=True,
                                      pass_fds=(to_runner[0], from_runner[1])))
        procs.append(subprocess.Popen(chk_cmd, stdout=files[2], stderr=files[3],
                                      stdin=subprocess.DEVNULL, env=env, cwd=case_dir,
                                      start_new_session=True,
                                      pass_fds=(to_runner[1], from_runner[0])))
    finally:
        for fd in to_runner + from_runner:
            os.close(fd)
    run_proc, chk_proc = procs
    timed_out = False
    try:
        chk_proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    try:  # the runner ends when the checker closes the channel (or now, if it holds on)
        run_proc.wait(timeout=max(0.5, min(5.0, timeout - (time.monotonic() - start))))
    except subprocess.TimeoutExpired:
        pass
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group, also after a normal exit
        except ProcessLookupError:
            pass
        proc.wait()
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read(1 << 20))
        f.close()
    err = texts[1] or texts[3]  # the submission's program's stderr (the simulator's reports)
    if timed_out:
        return 0.0, "failed", (f"timed out after {timeout:g} s (an endless loop, or a "
                               "__syncthreads() that some threads never reach?)"), None
    seconds = time.monotonic() - start
    result = None
    for line in reversed(texts[2].splitlines()):  # the checker's verdict, never the runner's
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    run_rc = run_proc.returncode
    if in_namespace and 128 < run_rc < 128 + 65:
        run_rc = 128 - run_rc  # the shell's 128 + N: killed by signal N
    rc = chk_proc.returncode
    if result is not None and result.get("runner_gone"):
        if run_rc < 0 and run_rc != -signal.SIGKILL:
            try:
                sig = signal.Signals(-run_rc).name
            except ValueError:
                sig = f"signal {-run_rc}"
            hint = {"SIGSEGV": ": an out-of-bounds access?", "SIGABRT": ": the simulator or the "
                    "C library stopped the program", "SIGFPE": ": an integer division by zero?"}
            return 0.0, "failed", with_stderr(f"crashed ({sig}{hint.get(sig, '')})", err), None
        if "grader: out-of-bounds read" in err:
            return 0.0, "failed", with_stderr("read past the end of an input", err), None
        how = (f" (exit status {run_rc}; exit() in a constructor?)" if run_rc >= 0 else "")
        return 0.0, "failed", with_stderr(
            f"{result.get('message', 'the submission stopped')}{how}", err), None
    if rc < 0:
        return 0.0, "failed", with_stderr(f"grader error (please report): the checker ended by "
                                          f"signal {-rc}", texts[3] + texts[1]), None
    if rc == EXIT_NO_GPU:
        msg = result["message"] if result else tail(texts[3])
        return 0.0, "skipped", msg, result
    if result is None:
        return 0.0, "failed", with_stderr(f"grader error (please report): the checker printed "
                                          f"no result (exit status {rc})", texts[3]), None
    message = str(result.get("message", ""))
    if rc == EXIT_USAGE:
        return 0.0, "failed", with_stderr(f"grader error (please report): {message}",
                                          texts[3]), result
    if rc not in (0, 1):
        return 0.0, "failed", with_stderr(f"grader error (please report): the checker exited "
                                          f"with status {rc}", texts[3]), result
    if rc == 0 and run_rc not in (0, -signal.SIGKILL) and SANITIZER.search(err):
        return 0.0, "failed", with_stderr(f"the submission's program exited with status {run_rc} "
                                          "(a sanitizer report)", err), result
    fraction = float(result.get("fraction", 0.0))
    fraction = min(1.0, max(0.0, fraction))
    status = "passed" if rc == 0 and result.get("passed") else "failed"
    if status == "failed":
        message = with_stderr(message, err, 3, 400)
    result["seconds"] = seconds
    return fraction, status, message, result


class Results:
    """One submission's results, written as they come (Gradescope results.json) + a report."""

    def __init__(self, spec, backend, submission, path, secret_given):
        self.spec, self.backend, self.submission, self.path = spec, backend, submission, path
        self.secret_given = secret_given
        self.tests = []
        self.start = time.time()
        self.sandbox = None
        self.hint = None

    def add(self, name, score, max_score, status, output, visibility, case=None):
        self.tests.append({"name": name, "score": round(score, 4), "max_score": max_score,
                           "status": status, "output": output, "visibility": visibility,
                           "_case": case})
        self.write()

    @property
    def score(self):
        return sum(t["score"] for t in self.tests)

    @property
    def max_score(self):
        return sum(t["max_score"] for t in self.tests)

    def summary(self):
        where = ("by the GPU build: correctness and performance points (a case that finds no "
                 "GPU is skipped)" if self.backend == "gpu" else
                 "on the CPU simulator: correctness points only (performance points need a GPU)")
        line = (f"{self.spec['exercise']}: {self.score:g} / {self.max_score:g} points, "
                f"graded {where}")
        if not self.secret_given and self.spec.get("hidden"):
            line += "; hidden cases not run (no instructor secret)"
        return line

    def write(self):
        if not self.path:
            return
        doc = {"score": round(self.score, 4), "output": self.summary(), "visibility": "visible",
               "stdout_visibility": "hidden", "execution_time": round(time.time() - self.start, 1),
               "tests": [{k: v for k, v in t.items() if not k.startswith("_")}
                         for t in self.tests]}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
        os.replace(tmp, self.path)

    def report(self):
        lines = [f"# Grade report: {self.spec.get('title', self.spec['exercise'])}", "",
                 f"- submission: `{self.submission}`", f"- {self.summary()}",
                 f"- sandbox: {SANDBOX_NAMES.get(self.sandbox, 'not used (no case ran)')}",
                 f"- score: **{self.score:g} / {self.max_score:g}**", "",
                 "| test | score | status | message |", "|---|---:|---|---|"]
        for t in self.tests:
            msg = t["output"].splitlines()[0] if t["output"] else ""
            msg = msg.replace("|", "\\|")
            lines.append(f"| {t['name']} | {t['score']:g} / {t['max_score']:g} | {t['status']} | "
                         f"{msg[:300]} |")
        details = [t for t in self.tests if t["status"] == "failed"]
        if details:
            lines += ["", "## Failures", ""]
            if self.hint:
                lines += [f"Hint: {self.hint}", ""]
            for t in details:
                case = t["_case"]
                how = (f" (`--seed {case.seed} {' '.join(case.args)}`)" if case else "")
                lines += [f"### {t['name']}{how}", "", "```", t["output"], "```", ""]
        return "\n".join(lines) + "\n"


# Wrong values, which a race (a missing __syncthreads()) gives on a plain simulator build, where
# only the checked build (sim-check) names the race's two source lines. (A read past an input's
# end is named by input, thread and byte in both builds: no hint for it.)
WRONG_VALUES = ("differs from the", "NaN/inf")


def checked_build_hint(spec, build, tests):
    """One line pointing to the sim-check build after wrong values, or None (a GPU or a checked
    build already, or no wrong values)."""
    if build.backend != "sim" or build.info.get("sim_check", "").upper() in ("ON", "1", "TRUE"):
        return None
    if not any(t["status"] == "failed" and any(w in t["output"] for w in WRONG_VALUES)
               for t in tests):
        return None
    return (f"wrong values can come from a race (a missing __syncthreads()), which this build "
            f"cannot see; the checked build names the race's two source lines: "
            f"scripts/grade.sh {spec['exercise']} --build-dir build/sim-check (it configures "
            f"build/sim-check the first time; clang-14)")


def grade_submission(spec, build, submission, outdir, args, secret, label=None):
    """Grades one file. Returns the Results."""
    os.makedirs(outdir, exist_ok=True)
    results_path = args.results or os.path.join(outdir, "results.json")
    res = Results(spec, build.backend, submission, results_path, secret is not None)
    cases = all_cases(spec, secret, build.backend, os.urandom(16))
    if args.cases:
        wanted = args.cases.split(",")
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.name, w) for w in wanted)]
        if not cases:
            raise UsageError(f"--cases {args.cases}: no such case")
    timeout = args.timeout or float(spec["timeout_s"])
    prefix = f"{label}: " if label else ""
    work_root = os.path.join(build.build_dir, "grader", "work")
    os.makedirs(work_root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grade-", dir=work_root) as work:
        os.chmod(work, 0o711)  # a sandboxed case may run the program, not list or write here
        program, log = build.compile(submission, work)
        if program is None:
            res.add("compile", 0, 0, "failed", "\n".join(log), "visible")
            say(f"{prefix}compile: FAILED\n  " + "\n  ".join(log[:COMPILE_LINES]), args.quiet)
            for c in cases:
                res.add(c.name, 0, c.points, "failed", "not run: the submission does not compile "
                        "(see the compile test)", c.visibility, c)
        else:
            res.add("compile", 0, 0, "passed", "\n".join(log) or "compiled", "visible")
            say(f"{prefix}compile: ok", args.quiet)
            jobs = max(1, args.jobs)
            res.sandbox = sandbox_mode()
            with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
                rename = (build.info["slot"], os.path.basename(submission))
                futures = {pool.submit(run_case, program, c, timeout, jobs, rename): c
                           for c in cases}
                for fut in concurrent.futures.as_completed(futures):
                    c = futures[fut]
                    fraction, status, message, _ = fut.result()
                    if c.kind == "performance" and build.backend != "gpu":
                        status = "skipped"
                        message = ("not run: performance points need a GPU; the simulator's "
                                   "timings are not GPU performance (0 of 0 points here)")
                    out_status = "passed" if status in ("passed", "skipped") else "failed"
                    res.add(c.name, c.points * fraction, c.points, out_status, message,
                            c.visibility, c)
                    shown = message if c.kind != "hidden" or status != "passed" else "passed"
                    say(f"{prefix}{c.name}: {status.upper()} {c.points * fraction:g}/{c.points:g}"
                        f"  {shown}", args.quiet)
    order = {c.name: n for n, c in enumerate(cases)}
    res.tests.sort(key=lambda t: order.get(t["name"], -1))
    res.hint = checked_build_hint(spec, build, res.tests)
    if res.hint:
        say(f"{prefix}hint: {res.hint}", args.quiet)
    res.write()
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write(res.report())
    return res


# ---- a class -----------------------------------------------------------------------------------

def find_one(folder, filename):
    hits = [os.path.join(d, filename) for d, _, files in os.walk(folder) if filename in files]
    if len(hits) > 1:
        raise UsageError(f"{folder}: {len(hits)} files named {filename}; expected one")
    return hits[0] if hits else None


def class_submissions(folder, filename):
    """(learner, path or None) per entry: a sub-folder holding <filename>, or a <learner>.cu."""
    entries = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not name.startswith("."):
            try:
                entries.append((name, find_one(path, filename)))
            except UsageError:
                entries.append((name, None))
        elif name.endswith(".cu"):
            entries.append((name[:-3], path))
    if not entries:
        raise UsageError(f"no submissions in {folder}: expected one folder per learner holding "
                         f"{filename}, or files <learner>.cu")
    return entries


def grade_class(spec, build, folder, outdir, args, secret):
    entries = class_submissions(folder, spec["submission_file"])
    os.makedirs(outdir, exist_ok=True)
    csv_path = os.path.join(outdir, "class.csv")
    cases = all_cases(spec, secret, build.backend)
    names = ["compile"] + [c.name for c in cases]
    all_full = True
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "score", "max_score", "note"] + names)
        f.flush()
        for n, (learner, path) in enumerate(entries, 1):
            if path is None:
                writer.writerow([learner, 0, "", f"no single {spec['submission_file']} found"])
                say(f"[{n}/{len(entries)}] {learner}: no {spec['submission_file']}", args.quiet)
                all_full = False
                continue
            sub_args = argparse.Namespace(**vars(args))
            sub_args.results, sub_args.quiet = None, True
            res = grade_submission(spec, build, path, os.path.join(outdir, learner), sub_args,
                                   secret)
            scores = {t["name"]: t["score"] for t in res.tests}
            note = "does not compile" if res.tests and res.tests[0]["status"] == "failed" else ""
            writer.writerow([learner, round(res.score, 4), res.max_score, note] +
                            [scores.get(nm, "") for nm in names])
            f.flush()
            all_full &= res.score >= res.max_score
            say(f"[{n}/{len(entries)}] {learner}: {res.score:g} / {res.max_score:g}", args.quiet)
    say(f"class results: {csv_path} (reports: {outdir}/<learner>/report.md)", args.quiet)
    return all_full


# ---- main --------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="grade", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exercise", help="01_mini_flash, 02_sparse_mask (or 01, 02, or its folder)")
    ap.add_argument("submission", nargs="?",
                    help="a file, or a folder of submissions (default: your exercise file)")
    ap.add_argument("--one", action="store_true",
                    help="the folder holds ONE submission (searched for the file; Gradescope)")
    ap.add_argument("--build-dir", default=os.environ.get("ATTN_GRADER_BUILD"),
                    help="the chapter build with the grader targets (default build/sim)")
    ap.add_argument("--backend", choices=["sim", "gpu"], help="default: from the build dir")
    ap.add_argument("--out", help="folder for report.md/results.json (class: class.csv too)")
    ap.add_argument("--results", help="where results.json goes (default: in --out)")
    ap.add_argument("--secret-file", help="instructor secret for the hidden cases (or env "
                    "ATTN_GRADER_SECRET / ATTN_GRADER_SECRET_FILE)")
    ap.add_argument("--timeout", type=float, help="seconds per case (default: grading.json)")
    ap.add_argument("--cases", help="only these cases (comma-separated names, * allowed)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="cases run at the same time (default 2)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    try:
        spec = load_spec(args.exercise)
        secret = read_secret(args)
        build_dir = args.build_dir or os.path.join(ROOT, "build", "gpu" if args.backend == "gpu"
                                                   else "sim")
        backend = args.backend or ("gpu" if os.path.isfile(os.path.join(
            build_dir, "grader", f"{spec['exercise']}.gpu.json")) and not os.path.isfile(
            os.path.join(build_dir, "grader", f"{spec['exercise']}.sim.json")) else "sim")
        build = Build(spec, build_dir, backend, args.quiet)
        ex = spec["exercise"]
        target = args.submission or os.path.join(spec["_dir"], spec["submission_file"])
        if not os.path.exists(target):
            raise UsageError(f"no such file or folder: {target}")
        if os.path.isdir(target) and not args.one:
            outdir = args.out or os.path.join(build.build_dir, "grading", ex + "-class")
            return 0 if grade_class(spec, build, target, outdir, args, secret) else 1
        if os.path.isdir(target):
            found = find_one(target, spec["submission_file"])
            if found is None:
                raise UsageError(f"no {spec['submission_file']} in {target}")
            target = found
        outdir = args.out or os.path.join(build.build_dir, "grading", ex)
        res = grade_submission(spec, build, os.path.abspath(target), outdir, args, secret)
        say(res.summary(), args.quiet)
        say(f"report: {os.path.join(outdir, 'report.md')}", args.quiet)
        return 0 if res.score >= res.max_score else 1
    except UsageError as e:
        print(f"grade: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
