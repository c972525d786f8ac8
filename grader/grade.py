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
import errno
import fcntl
import fnmatch
import glob
import hashlib
import hmac
import json
import os
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXIT_USAGE = 2
EXIT_NO_GPU = 77
COMPILE_LINES = 40
LINE_CHARS = 300  # the most characters of one quoted line (compiler messages)
# Symbols a submission may not use: the harness's oracles and checker (a "kernel" that returns
# the reference, a builder that returns the exact block mask), the example driver, ways to run
# other code, the simulator's controls and the environment (the grader sets how a case runs).
# grading.json may replace the list.
DEFAULT_FORBIDDEN = ["attn_reference*", "attn_check_*", "attn_example_main", "attn_host_inputs_*",
                     "attn_block_mask_from_mask", "attn_block_mask_validate",
                     "attn_block_mask_count_empty", "attn_block_mask_lists",
                     "attn_block_mask_as_mask", "system", "popen", "fork", "execv*", "execl*",
                     "dlopen", "dlsym", "*_solution", "cudasim_set_*", "cudasim_lock_*",
                     "cudasim_prepare", "cudasim_*guard*", "setenv", "putenv", "unsetenv",
                     "clearenv"]
# The variables a case process inherits (prefixes): never ATTN_GRADER_* (the secret, its path).
CHILD_ENV = ("PATH", "LANG", "LC_", "CUDASIM_", "OMP_", "CUDA_", "ASAN_", "TSAN_", "UBSAN_",
             "LSAN_", "LD_LIBRARY_PATH")
SANDBOX_ID = 65534  # nobody / nogroup: the user a step runs as when the grader is root
SANDBOX_NAMES = {
    "namespace": "each compile and case as nobody in its own PID, mount, network and IPC "
                 "namespaces, with a root of its own (the system and what the step needs, "
                 "read-only) and a fresh /tmp, /var/tmp and /dev/shm",
    "userns": "each compile and case in its own user, PID, mount, network and IPC namespaces "
              "(the grader is not root), with a root of its own and a fresh /tmp, /var/tmp and "
              "/dev/shm",
    "user": "each compile and case as nobody (no namespaces here: cases one at a time, "
            "/tmp shared, the submission's program may write no file)",
    "none": "the grader's own user (not root, no namespaces): resource limits and seccomp "
            "filters only"}


class UsageError(Exception):
    """A bad command line, a missing file: one line, exit status 2."""


def say(msg, quiet=False):
    if not quiet:
        print(msg, flush=True)


# ---- the exercise ------------------------------------------------------------------------------

class Case:
    plain_only = False  # run only by the plain build (grading.json "plain_only")

    def __init__(self, name, args, seed, points, visibility, env, kind):
        self.name, self.args, self.seed, self.points = name, args, seed, points
        self.visibility, self.env, self.kind = visibility, env or {}, kind


# A case that only the plain build runs: what it checks (e.g. indexing past a grid's 65535
# rows) needs no checker, and the checked build's hooks or a sanitizer would make it several
# times slower than the case's time limit allows.
PLAIN_ONLY = ("not run in this build: a case for the plain simulator build (build/sim), which "
              "runs it in one to two seconds of CPU; the hooks of this one make it several "
              "times longer (0 of 0 points)")


# The performance case on the simulator: not run (its timings are not a GPU's; the case program
# would only say so after making the case's inputs).
NO_GPU_PERF = ("not run: performance points need a GPU; the simulator's timings are not GPU "
               "performance (0 of 0 points here)")


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
    for case, c in zip(cases, spec["cases"]):
        case.plain_only = bool(c.get("plain_only"))
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
        mode = os.stat(path).st_mode & 0o777
        if mode & 0o077:
            raise UsageError(f"the secret file {path} is readable by others (mode {mode:04o}): "
                             f"a submission could read it; make it its owner's only "
                             f"(chmod 600 {path})")
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

# Compile of ONE submission file, in the sandbox, as its user (README: "How a submission is
# built"): CPU seconds and wall seconds; then the address space and the files it may write.
COMPILE_CPU_S = 60
COMPILE_LIMITS = {"as": 4 << 30, "fsize": 64 << 20, "nproc": 64}
MAX_SOURCE_BYTES = 1 << 20
# Reads of other files a compile could make that the dependency file does not list, and
# assembler directives that read files: refused in the source (README: "What is refused").
SOURCE_REFUSALS = [
    (re.compile(r"incbin", re.I), ".incbin (the assembler copies a file into the program)"),
    (re.compile(r"\.include\b"), ".include (the assembler reads another file)"),
    (re.compile(r"__has_include"), "__has_include (it tells which files exist)"),
    (re.compile(r"#\s*pragma\s+(GCC\s+)?dependency"), "#pragma GCC dependency (it reads another "
     "file's date)"),
    (re.compile(r"#\s*(embed|include_next|import)\b"), "#embed, #include_next or #import"),
]
ASM_TOKEN = re.compile(r"(?<![\w$])(asm|__asm|__asm__)(?![\w$])")
# Ways to compile a function without the checked build's instrumentation (its memcheck, racecheck
# and initcheck see a kernel through -fsanitize-coverage's calls): a no_sanitize attribute in any
# spelling, and `#pragma clang attribute`, which applies one (or any other) to every function
# after it; searched in the learner's lines of the preprocessed file, so that a macro, _Pragma or
# token pasting is seen as the compiler saw it.
UNCHECKED = re.compile(r"(?<![\w$])(__)?(no_sanitize\w*|disable_sanitizer_instrumentation)"
                       r"(?![\w$])|#\s*pragma\s+clang\s+attribute")
# A submission defines its exports and nothing else with C linkage (no replacement of a library
# or harness function the submission's program calls: write, memcpy, prctl, attn_to_host ...);
# the simulator's built-in variables come with its headers. C++ functions of its own are fine,
# but not operator new/delete or definitions in std:: or cudasim:: (strong ones).
BUILTIN_DEFINITIONS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
FORBIDDEN_CXX = re.compile(r"^_Z(n[wa]|d[la]|NSt|St|NKSt|N7cudasim|NK7cudasim)")


def strip_comments(text):
    """The source without comments (string and character literals kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def literal_text(text):
    """The characters of every string literal, adjacent literals joined and escapes decoded
    (".inc" "bin" and "\x69ncbin" both read incbin)."""
    parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', text)
    joined = "".join(parts)
    try:
        return joined.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return joined


def source_refusal(text):
    """Why the submission's text is refused before it is compiled, or None."""
    code = strip_comments(text)
    for where in (code, literal_text(code)):
        for pattern, what in SOURCE_REFUSALS:
            if pattern.search(where):
                return (f"uses {what}: a submission may not make its compile read other files "
                        "(grader/README.md, 'What is refused')")
    return None


def open_regular(path, base=None, path_only=False):
    """A file descriptor of `path` for reading, opened without following a link anywhere below
    `base` (the folder the grader was given; default the file's own folder): every folder on the
    way and the file itself are opened with O_NOFOLLOW, one at a time. path_only: an O_PATH
    descriptor, which names the file but cannot read it (read_submission reopens it as the
    sandbox user). Raises OSError (ELOOP or ENOTDIR for a link, ENOENT, ...) or ValueError
    (outside base, or not a regular file)."""
    path = os.path.abspath(path)
    base = os.path.abspath(base or os.path.dirname(path))
    rel = os.path.relpath(path, base)
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir:
        raise ValueError("it is outside the submission's folder")
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parts = rel.split(os.sep)
        for part in parts[:-1]:
            sub = os.open(part, nofollow | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        # O_NONBLOCK: a FIFO opens at once (and is refused below), never waits for a writer.
        # O_PATH | O_NOFOLLOW opens a final link itself instead of failing: ELOOP below.
        last = (os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC) if path_only else \
            (nofollow | os.O_NONBLOCK | os.O_NOCTTY)
        sub = os.open(parts[-1], last, dir_fd=fd)
    finally:
        os.close(fd)
    st = os.fstat(sub)
    if stat.S_ISLNK(st.st_mode):
        os.close(sub)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(sub)
        raise ValueError("it is not a regular file" if not stat.S_ISREG(st.st_mode) else
                         f"it has {st.st_nlink} names (a hard link)")
    return sub


def read_submission(path, base=None, limit=MAX_SOURCE_BYTES + 1):
    """(the first `limit` bytes of a learner's file, None) or (None, one line saying why it is
    refused). A submission is a regular file of its own in its folder: a symbolic link (to the
    solution, the secret, /proc/self/environ ...), a file in a linked folder, a hard link, a
    device, a pipe or a socket is refused before a byte of it is read (grade.py runs as root)."""
    name = os.path.basename(path)
    why = "a submission must be a regular file in the submission's folder, not a link"
    try:
        fd = open_regular(path, base, path_only=True)
    except ValueError as e:
        return None, f"{name} is refused: {e}; {why}"
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, (f"{name} is refused: it is a symbolic link or lies in a linked "
                          f"folder; {why}")
        return None, f"{name}: cannot be read ({e.strerror})"
    try:
        return read_with_sandbox_rights(fd, name, limit)
    finally:
        os.close(fd)


def read_with_sandbox_rights(fd, name, limit):
    """The first `limit` bytes of the file that the O_PATH descriptor fd names, read with the
    rights of the user a step runs as, never root's: as root, a `head` running as the sandbox
    user (nobody) reopens it through /proc/self/fd, which checks the file's own permissions and
    not its folders' (a submission in a private folder, mktemp -d's 0700 or /root, still reads).
    (bytes, None) or (None, one line saying why it is refused)."""
    if os.geteuid() != 0:
        try:
            own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as e:
            return None, f"{name}: cannot be read ({e.strerror})"
        with os.fdopen(own, "rb") as f:
            return f.read(limit), None
    head = shutil.which("head") or "/usr/bin/head"
    try:
        done = subprocess.run([head, "-c", str(limit), f"/proc/self/fd/{fd}"], pass_fds=(fd,),
                              user=SANDBOX_ID, group=SANDBOX_ID, extra_groups=[], env={},
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, f"{name}: cannot be read (reading it took over 60 s)"
    if done.returncode != 0:
        return None, (f"{name} is refused: the sandbox user (uid {SANDBOX_ID}) may not read it; "
                      "the grader reads a submission with that user's rights, never root's: "
                      "make the file readable to others (chmod o+r; its folders may stay "
                      "private)")
    return done.stdout, None


def read_own(path, limit=1 << 30):
    """The text of a file the compile wrote in its folder (the sandbox user's), never through a
    link and with the sandbox user's rights; None if it is not a regular file there."""
    try:
        fd = open_regular(path, path_only=True)
    except (OSError, ValueError):
        return None
    try:
        body, _ = read_with_sandbox_rights(fd, os.path.basename(path), limit)
    finally:
        os.close(fd)
    return None if body is None else body.decode("utf-8", "replace")


def submission_lines(preprocessed, source):
    """The lines of a preprocessed file (.ii) that come from `source` (its line markers)."""
    own, out = False, []
    for line in preprocessed.splitlines():
        m = re.match(r'#\s*\d+\s+"([^"]*)"', line)
        if m:
            own = os.path.realpath(m.group(1)) == source if m.group(1) else False
        elif own:
            out.append(line)
    return out


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
        if "compile_commands" not in self.info:
            self._configure()  # a build configured before the compile sandbox: once more
            with open(self.info_path) as f:
                self.info = json.load(f)
        self.backend = backend
        self._command = None

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
        if done.returncode == 0 and cache_value(self.build_dir, "ATTN_PARTS") == "examples":
            # a sanitizer preset's build, made without the exercises and the grader
            # (cmake/attn.cmake): grading in it adds them
            say(f"adding the exercises and the grader to {self.build_dir} (ATTN_PARTS=all)",
                self.quiet)
            done = subprocess.run(["cmake", "-DATTN_PARTS=all", self.build_dir], cwd=ROOT,
                                  capture_output=True, text=True)
        if done.returncode != 0:
            raise UsageError("cmake configure failed:\n" + (done.stdout + done.stderr)[-3000:])

    def lock(self):
        """The build's lock: one make at a time in this build tree (graders of the same build
        take turns to bring it up to date and to link; compiles run without it)."""
        f = open(os.path.join(self.build_dir, "grader", "build.lock"), "w")
        fcntl.flock(f, fcntl.LOCK_EX)
        return f

    def prepare(self):
        """Brings the grader's programs up to date once per run (a fresh build: all of them,
        the rewriter a compile needs among them); then each submission only relinks the
        submission's program (compile())."""
        fresh = not all(os.path.isfile(self.info[k]) for k in ("program", "runner", "exec"))
        # ATTN_GRADER_BUILT=1: the caller brought the build up to date itself just before (the
        # grader's own tests, which CTest runs after the build: tests/exercises/test_grader.py);
        # no make then, which costs half a second of CPU a run (grader/README.md).
        if not fresh and os.environ.get("ATTN_GRADER_BUILT") == "1":
            return
        if fresh:
            say("building the grader's programs (once) ...", self.quiet)
        targets = [self.info["target"], "grader_exec"] + ([self.info["runner_target"]] if fresh
                                                          else [])
        with self.lock():
            done = subprocess.run(["cmake", "--build", self.build_dir, "--target"] + targets,
                                  capture_output=True, text=True)
        if done.returncode != 0:
            raise UsageError("the grader's programs do not build:\n" +
                             (done.stdout + done.stderr)[-3000:])

    def link_target(self):
        """The target that relinks the submission's program. prepare() has brought everything
        it links up to date in this run, so with Makefiles its "/fast" target (CMake's: the
        target's own rules, without walking its dependencies again) does the same link without
        a second dependency scan of the harness and the simulator (a quarter of a second a
        submission on 2 cores, under the build's lock, which the other graders of the build wait
        for). Other generators (Ninja) check quickly themselves."""
        target = self.info["runner_target"]
        if (cache_value(self.build_dir, "CMAKE_GENERATOR") or "").endswith("Makefiles"):
            return target + "/fast"
        return target

    def compile_command(self):
        """The compiler's command line for the submission's file (the skeleton's entry of
        compile_commands.json, which the build writes for that target only), as a list."""
        if self._command is None:
            marker = f"grader_{self.spec['exercise']}_submission_{self.backend}.dir"
            try:
                with open(self.info["compile_commands"]) as f:
                    entries = json.load(f)
            except (OSError, ValueError):
                entries = []
            for e in entries:
                args = e.get("arguments") or shlex.split(e.get("command", ""))
                if any(marker in a for a in args):
                    # paths relative to the build's folder (nvcc's --options-file) made absolute
                    where = e.get("directory", self.build_dir)
                    self._command = [os.path.join(where, args[n]) if n > 0 and
                                     args[n - 1] == "--options-file" else a
                                     for n, a in enumerate(args)]
                    break
            if self._command is None:
                raise UsageError(f"{self.info['compile_commands']} has no compile command of "
                                 "the submission: reconfigure the build (cmake --preset ...)")
        return list(self._command)

    def compile(self, submission, workdir, cpu_s=COMPILE_CPU_S, base=None):
        """Compiles the learner's file in the sandbox (its own folder, as the sandbox user,
        with CPU, time and memory limits), checks it, links the submission's program and copies
        the programs of a case into workdir. base: the folder the learner's file was found in
        (no link below it is followed). Returns ((checker, submission's program, grader_exec)
        or None, lines for the learner)."""
        name = os.path.basename(submission)
        body, why = read_submission(submission, base)
        if body is None:
            return None, [why]
        if len(body) > MAX_SOURCE_BYTES:
            return None, [f"{name} is larger than {MAX_SOURCE_BYTES >> 20} MiB: refused"]
        text = body.decode("utf-8", "replace")
        why = source_refusal(text)
        if why:
            return None, [f"{name} {why}"]
        cdir = os.path.join(workdir, "compile")
        os.makedirs(cdir)
        src = os.path.join(cdir, self.spec["submission_file"])
        with open(src, "wb") as f:
            f.write(body)
        obj, dep, lib = (os.path.join(cdir, n) for n in ("submission.o", "submission.d",
                                                         "libsubmission.a"))
        tu = src + ".cpp" if self.backend == "sim" else src
        cmd = self.compile_command()
        compiler = []
        skip = False
        for a in cmd:  # the skeleton's command with this file, object and dependency file
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MT", "-MQ"):
                skip = True
            elif a in ("-c", "-MD", "-MMD") or a.startswith(("-MF", "-MT", "-MQ")) or \
                    os.path.basename(a) == os.path.basename(tu):
                pass
            else:
                compiler.append(a)
        compiler += ["-MD", "-MF", dep, "-o", obj, "-c", tu]
        if self.backend == "sim":
            compiler.insert(1, "-save-temps=obj")
        steps = []
        if self.backend == "sim":
            steps.append([self.info["rewriter"], src, tu])
        steps.append(compiler)
        steps.append([self.info["ar"], "qc", lib, obj])
        script = "set -e\n" + "\n".join(" ".join(shlex.quote(a) for a in s) for s in steps)
        if sandbox_mode() in ("namespace", "user"):
            os.chown(cdir, SANDBOX_ID, SANDBOX_ID)
        limits = dict(COMPILE_LIMITS, cpu=int(cpu_s))
        if self.info.get("sanitizer"):  # its rewriter is sanitized: terabytes of address space
            del limits["as"]
        binds = compile_binds(self, cmd)
        sh = sandboxed(["/bin/sh", "-c", script], cdir, limits, self.info["exec"], ro=binds,
                       rw=[cdir])
        env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "LC_"))}
        env.update({"HOME": cdir, "TMPDIR": "/tmp" if sandbox_private() else cdir})
        with tempfile.TemporaryFile("w+", errors="replace") as out:
            proc = subprocess.Popen(sh, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cdir,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=cpu_s * 1.5)
            except subprocess.TimeoutExpired:
                rc = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the compiler's own processes too
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            out.seek(0)
            log = out.read(1 << 20)
        if rc is None:
            return None, [f"the compile of {name} took longer than {cpu_s * 1.5:g} s (a "
                          "constexpr or template computation that does not end?): refused"]
        if rc in (128 + signal.SIGXCPU, -signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGKILL) \
                or re.search(r"Killed signal terminated program|CPU time limit", log):
            return None, [f"the compile of {name} used more than {cpu_s:g} s of CPU or too "
                          "much memory (a constexpr or template computation that does not end?)"]
        lines = learner_lines(log, src, name)
        if self.backend == "sim":  # also when the compile failed: the assembler may be why
            ii = next((os.path.join(cdir, n) for n in os.listdir(cdir) if n.endswith(".ii")), None)
            own = []
            if ii is not None:
                own = submission_lines(read_own(ii) or "", os.path.realpath(src))
            own = [strip_comments(l) for l in own]
            if any(ASM_TOKEN.search(l) for l in own):
                return None, [f"{name} uses inline assembly (asm): a kernel on the simulator has "
                              "no use for it, and it could read files at assembly time"]
            blind = next((m for m in map(UNCHECKED.search, own) if m), None)
            if blind:
                return None, [f"{name} uses {blind.group(0).strip()}: it would compile the code "
                              "without the checked build's instrumentation (memcheck, racecheck "
                              "and initcheck would not see its accesses); a submission may not "
                              "turn the checkers off"]
            if ii is None and rc == 0:
                return None, ["(no preprocessed file of the compile: the checks cannot be made)"]
        if rc != 0:
            return None, compile_errors(lines, log, self.spec)
        for made in (obj, lib):  # the compile's own files, read and changed below as root
            try:
                os.close(open_regular(made))
            except (OSError, ValueError):
                return None, [f"(the compile of {name} left no regular {os.path.basename(made)})"]
        bad = forbidden_symbols(obj, self.spec)
        if bad:
            return None, [f"{name} uses {', '.join(bad)}: a submission must compute the output "
                          "in its kernel (the harness's reference, checker and process "
                          "functions are off limits)"]
        bad = foreign_definitions(obj, self.spec)
        if bad:
            return None, [f"{name} defines {', '.join(bad)}: a submission may define only "
                          f"{', '.join(self.spec['exports'])} outside 'static' (make the others "
                          "static; the C library's and the harness's functions stay theirs)"]
        foreign = foreign_includes(self.build_dir, self.spec, self.backend, dep)
        if foreign:
            return None, [f"{name} includes {', '.join(foreign)}: a submission may include the "
                          "exercise folder's headers, the harness's public headers and system "
                          "headers only"]
        if self.backend == "sim":  # its static initialisers run after the set-up (README)
            why = defer_initialisers(obj, lib, self.build_dir)
            if why:
                return None, [f"{name} {why}"]
        with self.lock():  # one slot per exercise and build: one link at a time
            tmp = self.info["slot_library"] + ".tmp"
            shutil.copyfile(lib, tmp)
            os.replace(tmp, self.info["slot_library"])
            done = subprocess.run(["cmake", "--build", self.build_dir, "--target",
                                   self.link_target()], capture_output=True, text=True,
                                  errors="replace")
            if done.returncode != 0:
                return None, compile_errors(learner_lines(done.stdout + done.stderr, src, name),
                                            done.stdout + done.stderr, self.spec, link=True)
            programs = []
            for key in ("program", "runner", "exec"):  # checker, submission's program, launcher
                programs.append(os.path.join(workdir, os.path.basename(self.info[key])))
                shutil.copy2(self.info[key], programs[-1])
                # the checker is the grader's (never the sandbox user's to read or replace)
                os.chmod(programs[-1], 0o700 if key == "program" and os.geteuid() == 0 else 0o755)
        return tuple(programs), warnings_of(lines, name)


def pch_dir(build_dir):
    """The build's precompiled cuda_runtime.h (its folder: the .gch files and a copy of the
    header; ATTN_SIM_PCH, common/cudasim/CMakeLists.txt), which the submission's compile command
    names like the skeleton's (-I, first), or None where the build has none (clang, a GPU)."""
    d = os.path.join(os.path.realpath(build_dir), "cudasim_pch")
    return d if os.path.isdir(os.path.join(d, "cuda_runtime.h.gch")) else None


def compile_binds(build, cmd):
    """What a compile needs to see (the sandbox's root holds nothing else): the exercise
    folder, the harness's public headers, cudasim's headers and their precompiled form, the
    device helpers, the rewriter, and on a GPU the CUDA toolkit; the system directories come with
    every sandbox."""
    roots = {os.path.realpath(ROOT), source_dir_of(build.build_dir)}
    binds = [os.path.join(r, d) for r in roots for d in (
        os.path.join("exercises", build.spec["exercise"]), "common/include",
        "common/cudasim/include", "common/device")]
    pch = pch_dir(build.build_dir)
    if pch:
        binds.append(pch)
    for tool in (build.info.get("rewriter"), cmd[0], build.info["ar"]):
        if tool and os.path.isabs(tool) and not tool.startswith(SYSTEM_DIRS):
            binds.append(tool)
    binds += [cmd[n + 1] for n in range(len(cmd) - 1) if cmd[n] == "--options-file"]
    if cuda_root(build.build_dir):
        binds.append(cuda_root(build.build_dir).rstrip("/"))
    return sorted({b for b in binds if os.path.exists(b)})


NOISE = re.compile(r"^(\[\s*\d+%\]|g?make(\[\d+\])?:|ninja:|FAILED:|Consolidate compiler|"
                   r"cudasim: rewriting|-- |Scanning dependencies|Built target|\s*$)")
# A compiler message's location: "file:line[:col]: ", "file: In function", "file(line): " (nvcc).
LOCATION = re.compile(r"^(?:In file included from |\s+from )?(?P<file>[^\s:(][^:(]*?)"
                      r"(?::\d+(?::\d+)?[:,]|: (?:In |At )|\(\d+\): )")
TOOL_LINE = re.compile(r"^(cc1plus|cc1|clang|g\+\+|gcc|c\+\+|nvcc|ptxas|as|ld|collect2|"
                       r"/usr/bin/ld)[^:]*: ")


def learner_lines(log, src, name):
    """The compiler's messages about the learner's own file, and only those: a message located
    in another file (a header, the solution, a file read by mistake) is left out with the lines
    that quote it, so that no other file's text reaches the learner; paths become `name`."""
    own, kept, dropped = False, [], 0
    real_src = os.path.realpath(src)
    for line in log.splitlines():
        if NOISE.match(line):
            continue
        m = LOCATION.match(line)
        if m:
            f = m.group("file").strip()
            own = f in (src, name) or os.path.realpath(f) == real_src
        elif TOOL_LINE.match(line):
            own = False
        elif line.startswith("compilation terminated"):
            own = True
        if own:
            line = line.replace(src, name).replace(os.path.dirname(src) + "/", "")
            if len(line) > LINE_CHARS:
                line = f"{line[:LINE_CHARS]} ... ({len(line) - LINE_CHARS} more characters)"
            kept.append(line)
        else:
            dropped += 1
    if dropped and kept:
        kept.append(f"({dropped} lines about other files left out)")
    return kept


def compile_errors(lines, log, spec, link=False):
    lines = list(lines)
    if any("multiple definition of" in l for l in log.splitlines()):
        lines.append("hint: make every function and variable of your file 'static' except "
                     + ", ".join(spec["exports"]))
    if any("undefined reference to" in l for l in log.splitlines()) and link:
        names = sorted(set(re.findall(r"undefined reference to [`']([^']+)'", log)))[:5]
        lines.append("the link failed: undefined " + ", ".join(names))
    if not lines:
        lines = ["the build failed; its messages are about other files than yours (left out)"]
    if len(lines) > COMPILE_LINES:
        lines = lines[:COMPILE_LINES] + [f"... ({len(lines) - COMPILE_LINES} more lines)"]
    return lines


def warnings_of(lines, name):
    return [l for l in lines if name in l and "warning" in l][:10]


def nm_symbols(path, *flags):
    try:
        done = subprocess.run(["nm", "--format=posix"] + list(flags) + [path],
                              capture_output=True, text=True)
    except FileNotFoundError:
        return None  # no binutils: the check is skipped (the case checks still apply)
    rows = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            rows.append((parts[0], parts[1]))
    return rows


def forbidden_symbols(obj, spec):
    patterns = spec.get("forbidden_symbols", DEFAULT_FORBIDDEN)
    rows = nm_symbols(obj, "-u")
    used = {name for name, _ in rows or []}
    return sorted(s for s in used if any(fnmatch.fnmatchcase(s, p) for p in patterns))


def foreign_definitions(obj, spec):
    """Global symbols the submission defines that would replace the C library's, the harness's
    or the simulator's in its program (README: "What is refused")."""
    rows = nm_symbols(obj, "--defined-only", "--extern-only")
    bad = set()
    for name, kind in rows or []:
        if name in spec["exports"] or name in BUILTIN_DEFINITIONS:
            continue
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue  # the compiler's own (DW.ref.__gxx_personality_v0): no function can call it
        if not name.startswith("_Z"):
            bad.add(name)
        elif FORBIDDEN_CXX.match(name) and kind in "TDBR":
            bad.add(name)
    return sorted(bad)


# Code that runs before main(): the submission's static initialisers (constructors, C++ dynamic
# initialisation) are moved to a section of this name, which the submission's program runs after
# its set-up (grader_runner.c, run_submission_init); what cannot be moved is refused.
INIT_SECTION = "attn_submission_init"
SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY = 14, 15, 16


def elf_sections(path):
    """[(name, type)] of the sections of a 64-bit little-endian ELF object, or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return None
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + n * shentsize)
                   for n in range(shnum)]
        names = headers[shstrndx][4]
        return [(data[names + h[0]:data.index(b"\0", names + h[0])].decode("latin-1"), h[1])
                for h in headers[1:]]
    except (OSError, struct.error, IndexError, ValueError):
        return None


def defer_initialisers(obj, lib, build_dir):
    """Renames the submission's .init_array sections (in its library) to INIT_SECTION, so that
    no code of it runs before the submission's program has fixed its settings and installed its
    run filter. Returns why the submission is refused, or None: code that would still run
    before main() (.preinit_array, .ctors, .init, an initialiser table under another name, an
    indirect function's resolver)."""
    sections = elf_sections(obj)
    if sections is None or not sections:
        return "(its object file cannot be read: the check of its static initialisers fails)"
    move = sorted({n for n, _ in sections if n == ".init_array" or n.startswith(".init_array.")})
    early = [n for n, t in sections if n not in move and not n.startswith(".rela") and (
        n.startswith((".preinit_array", ".ctors", ".dtors")) or n == ".init" or
        t in (SHT_INIT_ARRAY, SHT_PREINIT_ARRAY))]
    if early:
        return (f"has code that would run before main() (section {early[0]}): make it a "
                "constructor or a static initialisation of C++")
    rows = nm_symbols(obj, "--defined-only") or []
    ifuncs = [n for n, kind in rows if kind == "i"]
    if ifuncs:
        return (f"defines {ifuncs[0]} as an indirect function (ifunc), whose resolver would run "
                "before main(): refused")
    if not move:
        return None
    objcopy = cache_value(build_dir, "CMAKE_OBJCOPY") or shutil.which("objcopy") or "objcopy"
    cmd = [objcopy] + [a for n in move for a in ("--rename-section", f"{n}={INIT_SECTION}")]
    try:
        done = subprocess.run(cmd + [lib], capture_output=True, text=True, errors="replace")
    except OSError:
        done = None
    if done is None or done.returncode != 0:
        return ("has static initialisers, which cannot be moved after the set-up here (no "
                "objcopy): make them constants or compute the values where they are used")
    return None


def cache_value(build_dir, key):
    """A variable of a CMake build's CMakeCache.txt ("KEY:TYPE=value"), or None."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def source_dir_of(build_dir):
    """The chapter folder a CMake build was configured from (its CMakeCache.txt)."""
    home = cache_value(build_dir, "CMAKE_HOME_DIRECTORY")
    return os.path.realpath(home) if home else ROOT


def cuda_root(build_dir):
    """The CUDA toolkit a GPU build compiles with (CMakeCache.txt: nvcc's folder's parent)."""
    nvcc = cache_value(build_dir, "CMAKE_CUDA_COMPILER")
    if not nvcc:
        return None
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "")


def foreign_includes(build_dir, spec, backend, depfile):
    """The files the submission's compile read (the compiler's dependency file: g++ on the
    simulator, nvcc on a GPU) outside the exercise folder, the public headers (the copy of
    cuda_runtime.h beside the build's precompiled one among them), the CUDA toolkit and the
    system: e.g. the solution, or its translation unit generated in the build tree. A missing
    dependency file refuses the submission (the check cannot be made)."""
    roots = {os.path.realpath(ROOT), source_dir_of(build_dir)}  # the build: maybe another copy
    allowed = ["/usr/"] + [os.path.join(root, d, "") for root in roots for d in (
        os.path.join("exercises", spec["exercise"]), "common/include", "common/cudasim/include",
        "common/device")]
    pch = pch_dir(build_dir)
    if pch:
        allowed.append(os.path.join(pch, ""))
    if cuda_root(build_dir):
        allowed.append(cuda_root(build_dir))
    text = read_own(depfile)
    if text is None:
        return ["(no dependency file of the compile: the include check cannot be made)"]
    words = text.replace("\\\n", " ").split()
    # "<object>:" or "<object> :" (nvcc), then the submission's own translation unit
    colon = next((n for n, w in enumerate(words) if w.endswith(":")), len(words))
    foreign = []
    for word in words[colon + 2:]:
        path = os.path.realpath(os.path.join(os.path.dirname(depfile), word))
        if not path.startswith(tuple(allowed)):
            foreign.append(os.path.relpath(path, ROOT) if path.startswith(ROOT) else path)
    return sorted(set(foreign))


# ---- running the cases -------------------------------------------------------------------------

# Lines kept in a failure message wherever they are in stderr: the simulator's report (kernel,
# block, thread, file:line) and the runner's guard-page report (grader_runner.c).
OWN_REPORTS = ("cudasim: error:", "grader: out-of-bounds")
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


def run_case(programs, case, timeout, jobs, rename, checked):
    """One case in its own processes. Returns (score fraction, status, message, details).
    programs: (checker, submission's program, grader_exec); rename: (a path, the learner's file
    name) for the paths in the simulator's reports. Never raises: a failure of the grader itself
    (a checker that is gone or changed, ...) is a failed case that says so."""
    try:
        if not checker_intact(programs[0]):
            return 0.0, "failed", ("grader error: the checker program was removed or changed "
                                   "while grading (by a process of the submission?); this case "
                                   "is not graded"), None
        work = os.path.dirname(programs[1])
        with tempfile.TemporaryDirectory(prefix=f"case-{case.name}-", dir=work) as case_dir:
            fraction, status, message, result = _run_case_in(programs, case, timeout, jobs,
                                                             case_dir, checked)
    except Exception as e:  # noqa: BLE001 -- a case must never end the grading
        return 0.0, "failed", f"grader error (please report): {type(e).__name__}: {e}", None
    return fraction, status, message.replace(rename[0], rename[1]), result


def with_stderr(message, err, lines=6, chars=700):
    shown = tail(err, lines, chars)
    return f"{message}; stderr: {shown}" if shown else message


# ---- the sandbox --------------------------------------------------------------------------------

_SANDBOX = []
_CHECKERS = {}  # a checker copy -> its sha256 when it was copied (checker_intact)
SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/", "/libx32/")
MODE_ORDER = {"namespace": 3, "userns": 2, "user": 1, "none": 0}


def _works(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sandbox_mode():
    """What this machine allows (probed once; README: "The sandbox"): "namespace" (root, and
    unshare works: PID, mount, network and IPC namespaces, a root of the case's own, user
    nobody), "userns" (not root, but user namespaces work: the same namespaces, the grader's
    own user inside with no capabilities), "user" (root, no namespaces: user nobody, cases one
    at a time) or "none" (neither: the grader's user). ATTN_GRADER_SANDBOX picks a weaker one
    (tests, or an instructor who wants to see what each mode does)."""
    if not _SANDBOX:
        unshare = shutil.which("unshare") is not None
        probe = ["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child", "--",
                 "/bin/sh", "-c", "mount -t tmpfs tmpfs /tmp"]
        if os.geteuid() == 0:  # root: grader_exec drops to nobody wherever it runs
            best = "namespace" if unshare and _works(["unshare"] + probe) else "user"
        else:
            best = "userns" if unshare and _works(["unshare", "--user", "--map-root-user"] +
                                                  probe) else "none"
        forced = os.environ.get("ATTN_GRADER_SANDBOX")
        if forced:
            if forced not in MODE_ORDER:
                raise UsageError(f"ATTN_GRADER_SANDBOX={forced}: one of "
                                 f"{', '.join(MODE_ORDER)}")
            allowed = {"namespace": ("namespace", "user", "none"), "user": ("user", "none"),
                       "userns": ("userns", "none"), "none": ("none",)}[best]
            if forced not in allowed:
                raise UsageError(f"ATTN_GRADER_SANDBOX={forced}: this machine allows "
                                 f"{', '.join(allowed)}")
            best = forced
        _SANDBOX.append(best)
    return _SANDBOX[0]


def sandbox_private():
    """True when every step has its own /tmp (and /dev/shm, /var/tmp, network)."""
    return sandbox_mode() in ("namespace", "userns")


def sandboxed(cmd, cwd, limits, helper, ro=(), rw=(), gpu=False, filtered=False,
              symbolizer=False):
    """The command line of one step of a submission (its compile, or its program in a case)
    under the sandbox of this machine, through grader_exec (`helper`, grader/cases/
    grader_exec.c): resource limits; when the grader is root, the user nobody; where namespaces
    work, a root, PID, network, IPC and UTS namespace of its own (unshare) whose root shows the
    step only the system directories, the read-only paths `ro` and its folders `rw` (its cwd
    among them); `filtered`: the base seccomp filter from the program's first instruction."""
    mode = sandbox_mode()
    opts = []
    for key, value in limits.items():
        if value is not None:
            opts += ["--limit", f"{key}={int(value)}"]
    if mode in ("namespace", "user"):
        opts += ["--uid", str(SANDBOX_ID)]
    elif mode == "userns":  # the namespace's root is the grader's user outside: no capabilities
        opts += ["--drop-caps"]
    if filtered:
        opts += ["--filter"] + (["--gpu"] if gpu else []) + (["--symbolizer"] if symbolizer
                                                             else [])
    if mode in ("user", "none"):
        return [helper] + opts + ["--"] + cmd
    root = os.path.join(os.path.dirname(os.path.realpath(cwd)), ".root")
    os.makedirs(root, exist_ok=True)
    where = ["--root", root, "--wd", os.path.realpath(cwd)]
    for flag, paths in (("--ro", ro), ("--rw", rw)):
        for path in paths:
            where += [flag, os.path.realpath(path)]
    if gpu:
        where.append("--devices")
    ns = ["unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child",
          "--propagation", "private"]
    if mode == "userns":
        ns[1:1] = ["--user", "--map-root-user"]
    return ns + ["--", helper] + where + opts + ["--"] + cmd


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checker_intact(path):
    """The checker copy is still the one the grader made (a submission that runs as the
    grader's user, in "none" mode, could replace it)."""
    try:
        return file_digest(path) == _CHECKERS.get(path)
    except OSError:
        return False


def readable_by_others(path):
    """True if a user other than the file's owner and group (nobody) can read path."""
    try:
        parts = os.path.realpath(path).split("/")
        for n in range(2, len(parts)):
            st = os.stat("/".join(parts[:n]) or "/")
            if not st.st_mode & 0o001:
                return False
        return bool(os.stat(path).st_mode & 0o004)
    except OSError:
        return False


# Resource limits of a case's processes (setrlimit by grader_exec; the CPU time is the case's timeout + 1 s):
# the submission's program, and the checker (trusted, but it reads what the submission sends).
RUN_LIMITS = {"fsize": 256 << 20, "nproc": 64, "as": 8 << 30}
CHECKER_LIMITS = {"fsize": 64 << 20, "as": 8 << 30}


def _run_case_in(programs, case, timeout, jobs, case_dir, checked):
    """The case as two processes joined by two pipes (grader/README.md, "Case programs"): the
    checker (trusted: the reference, the solution, the comparison; its JSON line is the verdict)
    and the submission's program (sandboxed; it only answers the checker's requests). Nothing the
    submission's program prints is read as a result."""
    checker, runner, launcher = programs
    env = {k: v for k, v in os.environ.items() if k.startswith(CHILD_ENV)}
    env.update({"HOME": case_dir, "TMPDIR": "/tmp" if sandbox_private() else case_dir,
                "MALLOC_ARENA_MAX": "1"})
    env.update({k: str(v) for k, v in case.env.items()})
    if jobs > 1:  # cases run side by side: one OS thread each (the reference, the simulator)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("CUDASIM_THREADS", "1")
    with open(runner, "rb") as f:
        sanitized = re.search(rb"__(asan|tsan)_init", f.read()) is not None
    run_limits = dict(RUN_LIMITS, cpu=int(timeout) + 1)
    chk_limits = dict(CHECKER_LIMITS, cpu=int(timeout) + 1)
    if sanitized:  # the sanitizers reserve terabytes of address space
        del run_limits["as"], chk_limits["as"]
        # LeakSanitizer stops the world with ptrace from a process of its own, which the
        # submission's seccomp filter forbids: no leak check there (the checker keeps its own)
        run_env = dict(env, ASAN_OPTIONS=(env.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
                       .lstrip(":"))
    else:
        run_env = env
    if sandbox_mode() in ("none", "userns"):
        del run_limits["nproc"]  # it would count every process of the grader's user
    if sandbox_mode() in ("namespace", "user"):
        os.chown(case_dir, SANDBOX_ID, SANDBOX_ID)
    to_runner = os.pipe()    # checker -> runner
    from_runner = os.pipe()  # runner -> checker
    gpu = os.path.basename(runner).endswith("_gpu")
    run_cmd = sandboxed([runner, "--rpc", f"{to_runner[0]},{from_runner[1]}"], case_dir,
                        run_limits, launcher, ro=[runner], rw=[case_dir], gpu=gpu,
                        filtered=True,
                        symbolizer=checked and shutil.which("llvm-symbolizer-14") is not None)
    chk_cmd = [launcher] + [a for k, v in chk_limits.items() for a in ("--limit", f"{k}={v}")]
    chk_cmd += ["--", checker, "--case", case.name, "--seed", str(case.seed)] + list(
        case.args) + ["--json", "--rpc", f"{to_runner[1]},{from_runner[0]}"]
    in_namespace = run_cmd[0] == "unshare"
    start = time.monotonic()
    # stdout and stderr go to files of the grader, not pipes: a process the case leaves behind
    # cannot hold the grader up by keeping a pipe open.
    files = [tempfile.TemporaryFile("w+", errors="replace") for _ in range(4)]
    procs = []
    try:
        procs.append(subprocess.Popen(run_cmd, stdout=files[0], stderr=files[1],
                                      stdin=subprocess.DEVNULL, env=run_env, cwd=case_dir,
                                      start_new_session=True,
                                      pass_fds=(to_runner[0], from_runner[1])))
        procs.append(subprocess.Popen(chk_cmd, stdout=files[2], stderr=files[3],
                                      stdin=subprocess.DEVNULL, env=env, cwd=case_dir,
                                      start_new_session=True,
                                      pass_fds=(to_runner[1], from_runner[0])))
    except OSError:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
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
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
            try:  # the whole group, also after a normal exit; the process itself if it left it
                kill()
            except (ProcessLookupError, PermissionError):
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
        # SIGPIPE: it wrote to a checker that had already given up on it (the checker says why)
        if run_rc < 0 and run_rc not in (-signal.SIGKILL, -signal.SIGPIPE):
            try:
                sig = signal.Signals(-run_rc).name
            except ValueError:
                sig = f"signal {-run_rc}"
            hint = {"SIGSEGV": ": an out-of-bounds access?", "SIGABRT": ": the simulator or the "
                    "C library stopped the program", "SIGFPE": ": an integer division by zero?",
                    "SIGSYS": ": a system call the sandbox forbids"}
            return 0.0, "failed", with_stderr(f"crashed ({sig}{hint.get(sig, '')})", err), None
        if "grader: out-of-bounds" in err:
            return 0.0, "failed", with_stderr("an access past the end of a buffer", err), None
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
        if not checked and "out-of-bounds" in message and "past the end of" in message:
            message += BOUNDS_HINT
    result["seconds"] = seconds
    return fraction, status, message, result


# A result that depends on the thread order is the mark of a missing __syncthreads(); the
# checked build names both accesses of the race (racecheck) in every order. barrier_hints
# decides, after every case has run, by running a failed shuffled-order case again.
BARRIER_HINT = ("wrong in shuffled thread order, {default} in the default order on the same "
                "inputs: a missing __syncthreads()? grade with --build-dir build/sim-check to have "
                "racecheck name both lines")


def barrier_hints(program, cases, outcomes, timeout, jobs, rename):
    """{case name: hint} for the cases that failed by their values in a shuffled thread order
    (env CUDASIM_ORDER) and whose result depends on it: run again on the same inputs in the
    default order, the case passes or fails with another message. A failure that does not
    depend on the order (a wrong formula, a tile skipped, the untouched skeleton) gets no hint,
    however the other cases went. outcomes: {case name: (fraction, status, message, details)}
    of the plain build (the checked build reports races itself)."""
    hints = {}
    for c in cases:
        _, status, message, details = outcomes[c.name]
        if status != "failed" or "CUDASIM_ORDER" not in c.env or " differs from " not in message:
            continue
        env = {k: v for k, v in c.env.items() if k not in ("CUDASIM_ORDER", "CUDASIM_SEED")}
        again = Case(c.name, c.args, c.seed, c.points, c.visibility, env, c.kind)
        _, status2, _, details2 = run_case(program, again, timeout, jobs, rename, False)
        if status2 == "passed":
            default = "right"
        elif details and details2 and details.get("message") != details2.get("message"):
            default = "different"
        else:
            continue
        others = all(o[1] in ("passed", "skipped") for n, o in outcomes.items() if n != c.name)
        hints[c.name] = (f" ({'right in the other cases, ' if others else ''}"
                         f"{BARRIER_HINT.format(default=default)})")
    return hints


# An access past a buffer's end is stopped by its guard page in every build; the checked build
# also names the source line of the access.
BOUNDS_HINT = (" (grade with --build-dir build/sim-check to have the checked build name the "
               "source line of this access)")


class Results:
    """One submission's results, written as they come (Gradescope results.json) + a report."""

    def __init__(self, spec, backend, submission, path, secret_given):
        self.spec, self.backend, self.submission, self.path = spec, backend, submission, path
        self.secret_given = secret_given
        self.tests = []
        self.start = time.time()
        self.sandbox = None
        self.setup = None      # the submission's program's set-up (GRADER_SETUP_* of a case)
        self.finished = False  # until the end: a stopped grader leaves "did not finish"
        self.notes = []        # lines for the end of the output and the report

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
        if not self.finished:
            line += "; grading did not finish (so far)"
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
                 f"- the submission's program: {setup_text(self.setup)}",
                 f"- score: **{self.score:g} / {self.max_score:g}**", ""] + [
                 f"- {n}" for n in self.notes] + ["",
                 "| test | score | status | message |", "|---|---:|---|---|"]
        for t in self.tests:
            msg = t["output"].splitlines()[0] if t["output"] else ""
            msg = msg.replace("|", "\\|")
            lines.append(f"| {t['name']} | {t['score']:g} / {t['max_score']:g} | {t['status']} | "
                         f"{msg[:300]} |")
        details = [t for t in self.tests if t["status"] == "failed"]
        if details:
            lines += ["", "## Failures", ""]
            for t in details:
                case = t["_case"]
                how = (f" (`--seed {case.seed} {' '.join(case.args)}`)" if case else "")
                lines += [f"### {t['name']}{how}", "", "```", t["output"], "```", ""]
        return "\n".join(lines) + "\n"


# GRADER_SETUP_* of grader/cases/grader_rpc.h: what the submission's program had in place.
SETUP_BITS = ((1, "the simulator's settings fixed"), (2, "seccomp filter"),
              (4, "every buffer ends at an inaccessible page"), (8, "reports name source lines"))


def setup_text(setup):
    if setup is None:
        return "not started (no case ran)"
    parts = [text for bit, text in SETUP_BITS if setup & bit]
    return ", ".join(parts) if parts else "none of its protections (a GPU build?)"


def grade_submission(spec, build, submission, outdir, args, secret, label=None, base=None):
    """Grades one file (found in the folder `base`: no link below it is followed). Returns the
    Results. results.json exists from the start and says "did not finish" until the end, so a
    stopped grader never leaves an older run's."""
    os.makedirs(outdir, exist_ok=True)
    results_path = args.results or os.path.join(outdir, "results.json")
    res = Results(spec, build.backend, submission, results_path, secret is not None)
    res.write()
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
    checked = bool(build.info.get("checked"))
    with tempfile.TemporaryDirectory(prefix="grade-", dir=work_root) as work:
        os.chmod(work, 0o711)  # a sandboxed step may run a program here, not list or write
        program, log = build.compile(submission, work, args.compile_timeout, base)
        if program is None:
            res.add("compile", 0, 0, "failed", "\n".join(log), "visible")
            say(f"{prefix}compile: FAILED\n  " + "\n  ".join(log[:COMPILE_LINES]), args.quiet)
            for c in cases:
                res.add(c.name, 0, c.points, "failed", "not run: the submission does not compile "
                        "(see the compile test)", c.visibility, c)
        else:
            _CHECKERS[program[0]] = file_digest(build.info["program"])
            res.add("compile", 0, 0, "passed", "\n".join(log) or "compiled", "visible")
            say(f"{prefix}compile: ok", args.quiet)
            # user mode shares /tmp, /var/tmp, /dev/shm (where the submission's program cannot
            # write, but may read): cases one at a time
            jobs = 1 if sandbox_mode() == "user" else max(1, args.jobs)
            res.sandbox = sandbox_mode()
            rename = (os.path.join(work, "compile", spec["submission_file"]),
                      os.path.basename(submission))
            outcomes = {}
            plain = not checked and not build.info.get("sanitizer")
            runs = [c for c in cases if (plain or not c.plain_only) and
                    (c.kind != "performance" or build.backend == "gpu")]
            for c in cases:
                if c in runs:
                    continue
                why = PLAIN_ONLY if c.plain_only else NO_GPU_PERF
                res.add(c.name, 0, 0, "passed", why, c.visibility, c)
                say(f"{prefix}{c.name}: SKIPPED 0/0  {why}", args.quiet)
            with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = {pool.submit(run_case, program, c, timeout, jobs, rename, checked): c
                           for c in runs}
                for fut in concurrent.futures.as_completed(futures):
                    c = futures[fut]
                    fraction, status, message, details = fut.result()
                    if details and res.setup is None and "runner_setup" in details:
                        res.setup = int(details["runner_setup"])
                    outcomes[c.name] = (fraction, status, message, details)
                    out_status = "passed" if status in ("passed", "skipped") else "failed"
                    res.add(c.name, c.points * fraction, c.points, out_status, message,
                            c.visibility, c)
                    shown = message if c.kind != "hidden" or status != "passed" else "passed"
                    say(f"{prefix}{c.name}: {status.upper()} {c.points * fraction:g}/{c.points:g}"
                        f"  {shown}", args.quiet)
            hints = {} if checked else barrier_hints(program, runs, outcomes, timeout, jobs,
                                                     rename)
            for t in res.tests:
                if t["name"] in hints:
                    t["output"] += hints[t["name"]]
                    say(f"{prefix}{t['name']}: hint:{hints[t['name']]}", args.quiet)
            if hints:
                res.notes.append(
                    "hint: a case in shuffled thread order failed, and its result depends on "
                    "the thread order: a missing __syncthreads()? Grade again with `--build-dir "
                    "build/sim-check` (the checked build: clang-14; the first time builds it, a "
                    "few minutes): its racecheck names both lines of the race")
                say(prefix + res.notes[-1], args.quiet)
    order = {c.name: n for n, c in enumerate(cases)}
    res.tests.sort(key=lambda t: order.get(t["name"], -1))
    res.finished = True
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
                                   secret, base=folder)
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
    ap.add_argument("--compile-timeout", type=float, default=COMPILE_CPU_S,
                    help=f"seconds of CPU for the compile of a submission (default "
                    f"{COMPILE_CPU_S}; its wall time may be half as long again)")
    ap.add_argument("--cases", help="only these cases (comma-separated names, * allowed)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="cases run at the same time (default 2)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap.parse_args(argv)


def refuse_unsafe(spec, build, secret):
    """Set-ups in which the hidden cases would not stay hidden (README: "What is refused"):
    one line saying how to grade safely, exit status 2."""
    if secret is None or not spec.get("hidden"):
        return
    mode = sandbox_mode()
    if mode == "none":
        raise UsageError("hidden cases are refused in the 'none' sandbox (the grader is not root "
                         "and has no user namespaces, or ATTN_GRADER_SANDBOX=none): the "
                         "submission would run as the grader's own user, who can read the "
                         "secret; grade as root or where user namespaces work, or without the "
                         "secret (the public cases only)")
    if mode == "user":
        name = spec["submission_file"]
        texts = [os.path.join(ROOT, "solutions", spec["exercise"], name),
                 os.path.join(build.build_dir, "cudasim_gen", "solutions", spec["exercise"],
                              name + ".cpp")]
        readable = [p for p in texts if os.path.exists(p) and readable_by_others(p)]
        if readable:
            raise UsageError(f"without namespaces the submission runs as nobody, who can read "
                             f"{' and '.join(readable)}: make them unreadable to others "
                             f"(chmod -R o-rwx on their folders, as the Gradescope zip's "
                             f"run_autograder does) or grade where namespaces work")


NOBODY = 65534  # the sandbox user's uid and gid (grader_exec)


def closed_to_nobody(path):
    """The first folder on the way to path (resolved) that the sandbox user may not enter (no
    execute permission for it: other, or its group or owner bits when it is nogroup or nobody),
    else None. A checkout inside a folder of mode 0700 (as `mktemp -d` makes) is out of reach."""
    parts = os.path.realpath(path).split("/")
    for n in range(2, len(parts) + 1):
        folder = "/".join(parts[:n])
        try:
            st = os.stat(folder)
        except OSError:
            return None
        bit = 0o100 if st.st_uid == NOBODY else 0o010 if st.st_gid == NOBODY else 0o001
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & bit:
            return folder
    return None


def refuse_unreachable(spec, build):
    """In the 'user' sandbox the compile and the cases run as nobody in the machine's own file
    tree: the chapter's folder and the build must be open to it (one line, exit status 2)."""
    if sandbox_mode() != "user":
        return
    for path in (spec["_dir"], build.build_dir):
        folder = closed_to_nobody(path)
        if folder is not None:
            mode = os.stat(folder).st_mode & 0o7777
            raise UsageError(f"in the 'user' sandbox the compile and the cases run as nobody, "
                             f"who cannot enter {folder} (mode {mode:04o}), so {path} is out of "
                             f"its reach: chmod o+x {folder} (or grade from a checkout outside "
                             f"it), or grade where namespaces work")


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
        refuse_unsafe(spec, build, secret)
        refuse_unreachable(spec, build)
        build.prepare()
        ex = spec["exercise"]
        target = args.submission or os.path.join(spec["_dir"], spec["submission_file"])
        if not os.path.exists(target):
            raise UsageError(f"no such file or folder: {target}")
        if os.path.isdir(target) and not args.one:
            outdir = args.out or os.path.join(build.build_dir, "grading", ex + "-class")
            return 0 if grade_class(spec, build, target, outdir, args, secret) else 1
        base = None  # one file: its own folder; --one: the folder given (no link below it)
        if os.path.isdir(target):
            found = find_one(target, spec["submission_file"])
            if found is None:
                raise UsageError(f"no {spec['submission_file']} in {target}")
            base, target = os.path.abspath(target), found
        outdir = args.out or os.path.join(build.build_dir, "grading", ex)
        res = grade_submission(spec, build, os.path.abspath(target), outdir, args, secret,
                               base=base)
        say(res.summary(), args.quiet)
        say(f"report: {os.path.join(outdir, 'report.md')}", args.quiet)
        return 0 if res.score >= res.max_score else 1
    except UsageError as e:
        print(f"grade: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
