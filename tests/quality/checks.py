"""The quality tests' one-line checks: check(ok, what) prints ok/FAIL; finish() prints the count
and returns the exit status (0 when every check passed, 1 otherwise); rejects() and
process_rejects() check that a program turns bad input away with one line and exit status 2."""
import contextlib
import io
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from preload import python_command  # noqa: E402 (a script's process: tests/python/preload.py)

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)
    return ok


def finish():
    print(f"{len(failures)} failed")
    return 1 if failures else 0


def rejects(main, args, needle, env=None):
    """main(args) (a program's main, called in this process: a process each would spend seconds
    importing PyTorch) returns 2 with one line on stderr holding needle. env: variables set
    for the call (read when main runs, not when its module was imported)."""
    err = io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stderr(err):
            rc = main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    lines = err.getvalue().strip().splitlines()
    return check(rc == 2 and len(lines) == 1 and needle in lines[0],
                 f"{' '.join(args)} {env or ''}: exit {rc}, {err.getvalue().strip()!r}")


def process_rejects(script, args, needle, env=None):
    """The same, with script run as a program (for variables its modules read when imported)."""
    r = subprocess.run(python_command() + [script] + args, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    lines = r.stderr.strip().splitlines()
    return check(r.returncode == 2 and len(lines) == 1 and needle in lines[0],
                 f"{' '.join(args)} {env or ''}: exit {r.returncode}, {r.stderr.strip()!r}")
