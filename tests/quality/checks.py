"""The quality tests' one-line checks: check(ok, what) prints ok/FAIL; finish() prints the count
and returns the exit status (0 when every check passed, 1 otherwise)."""
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)
    return ok


def finish():
    print(f"{len(failures)} failed")
    return 1 if failures else 0
