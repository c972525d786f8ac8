#!/usr/bin/env python3
"""test_preload.py — the Python tests' fork server (tests/python/preload.py), on a server of its
own that preloads one small module (colorsys) instead of PyTorch (CTest python.preload):

  * its socket can be reached by this user only;
  * a test run through it sees what `python script args` would: its arguments, working directory,
    environment, PYTHONPATH, stdin, stdout and stderr, __file__, and exits with the script's
    status (sys.exit, an uncaught exception's 1, a signal);
  * it ran in the server's child (the preloaded module is there), and a test whose import-time
    environment differs (OMP_NUM_THREADS) ran in a Python of its own (the module is not there),
    as does every test once the server is stopped;
  * a test whose `run` is killed (CTest's timeout) takes its child with it;
  * stop reports how many tests its children ran;
  * python_command() (how a test starts scripts of its own) goes through the server it runs under.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attn_testing  # noqa: E402

PRELOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preload.py")
PROBE = r'''
import json, os, signal, sys, time
how = sys.argv[1]
if how == "sleep":
    with open(sys.argv[2], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
if how == "raise":
    raise RuntimeError("planted")
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "x": os.environ.get("ATTN_PROBE"),
                  "preloaded": "colorsys" in sys.modules, "stdin": sys.stdin.read(),
                  "file": __file__, "path0": sys.path[0], "extra": sys.path[1],
                  "name": __name__}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[2]))
'''


class Server:
    def __init__(self, tmp):
        self.sock = os.path.join(tmp, "s.sock")
        self.env = dict(os.environ, ATTN_PRELOAD_MODULES="colorsys")
        out = subprocess.run([sys.executable, PRELOAD, "start", self.sock,
                              os.path.join(tmp, "server.log")],
                             env=self.env, capture_output=True, text=True, timeout=120)
        self.started = out.returncode == 0

    def run(self, args, env=None, **kw):
        return subprocess.run([sys.executable, PRELOAD, "run", self.sock] + args,
                              env=dict(self.env, **(env or {})), capture_output=True, text=True,
                              timeout=60, **kw)

    def stop(self):
        return subprocess.run([sys.executable, PRELOAD, "stop", self.sock], env=self.env,
                              capture_output=True, text=True, timeout=60).stdout


def check_all(c):
    with tempfile.TemporaryDirectory() as tmp:
        probe_dir = os.path.join(tmp, "probe")
        lib_dir = os.path.join(tmp, "lib")
        os.makedirs(probe_dir)
        os.makedirs(lib_dir)
        probe = os.path.join(probe_dir, "probe.py")
        with open(probe, "w") as f:
            f.write(PROBE)
        server = Server(tmp)
        c.expect(server.started, "the server starts")
        mode = os.stat(server.sock).st_mode & 0o777 if server.started else None
        c.expect(mode == 0o600, f"its socket is this user's only (mode {mode and oct(mode)})")

        env = {"ATTN_PROBE": "42", "PYTHONPATH": lib_dir}
        out = server.run([probe, "ok", "3"], env=env, input="hello", cwd=lib_dir)
        got = json.loads(out.stdout) if out.stdout.startswith("{") else {}
        c.expect(out.returncode == 3, f"the script's exit status (got {out.returncode})")
        c.expect(got.get("argv") == [probe, "ok", "3"], f"its arguments ({got.get('argv')})")
        c.expect(got.get("cwd") == lib_dir, "its working directory")
        c.expect(got.get("x") == "42", "its environment")
        c.expect(got.get("stdin") == "hello", "its stdin")
        c.expect(out.stderr == "to stderr\n", f"its stderr ({out.stderr!r})")
        c.expect(got.get("file") == probe and got.get("name") == "__main__",
                 "__file__ and __name__ as `python script` sets them")
        c.expect(got.get("path0") == probe_dir and got.get("extra") == lib_dir,
                 "sys.path: the script's folder, then PYTHONPATH")
        c.expect(got.get("preloaded") is True, "it ran in the server's child")

        out = server.run([probe, "ok", "0"], env={"OMP_NUM_THREADS": "7"})
        got = json.loads(out.stdout) if out.stdout.startswith("{") else {}
        c.expect(out.returncode == 0 and got.get("preloaded") is False,
                 "another OMP_NUM_THREADS: a Python of its own")

        out = server.run([probe, "raise"])
        c.expect(out.returncode == 1 and "RuntimeError: planted" in out.stderr,
                 f"an uncaught exception: exit 1 and its traceback (got {out.returncode})")
        out = server.run([probe, "kill"])
        c.expect(out.returncode == -signal.SIGKILL, f"a signal is passed on ({out.returncode})")

        pid_file = os.path.join(tmp, "pid")
        client = subprocess.Popen([sys.executable, PRELOAD, "run", server.sock, probe, "sleep",
                                   pid_file], env=server.env)
        for _ in range(300):
            if os.path.exists(pid_file) and open(pid_file).read():
                break
            time.sleep(0.1)
        child = int(open(pid_file).read())
        client.kill()
        client.wait()
        gone = False
        for _ in range(100):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                gone = True
                break
            time.sleep(0.1)
        if not gone:
            os.kill(child, signal.SIGKILL)
        c.expect(gone, "the child of a killed run is killed with it")

        # a test's own scripts (python_command) go to the server it runs under
        sys.path.insert(0, os.path.dirname(PRELOAD))
        import preload  # noqa: PLC0415
        os.environ["ATTN_PY_PRELOAD"] = server.sock
        cmd = preload.python_command()
        del os.environ["ATTN_PY_PRELOAD"]
        c.expect(cmd == [sys.executable, PRELOAD, "run", server.sock], f"python_command: {cmd}")
        out = subprocess.run(cmd + [probe, "ok", "0"], env=server.env, capture_output=True,
                             text=True, timeout=60)
        c.expect('"preloaded": true' in out.stdout, "... and runs in the server's child")
        c.expect(preload.python_command() == [sys.executable], "python_command without a server")

        said = server.stop()
        c.expect("5 tests ran" in said, f"stop counts the tests its children ran ({said!r})")
        with open(os.path.join(tmp, "server.log")) as f:
            log = f.read()
        costs = re.findall(r"^cpu +[0-9]+\.[0-9] s  probe\.py (\S+)", log, re.M)
        c.expect(sorted(costs) == ["kill", "ok", "ok", "raise", "sleep"] and
                 log.rstrip().splitlines()[-1].startswith("cpu_seconds "),
                 f"its log: each test's CPU time, then the total ({costs})")
        out = server.run([probe, "ok", "0"])
        got = json.loads(out.stdout) if out.stdout.startswith("{") else {}
        c.expect(out.returncode == 0 and got.get("preloaded") is False,
                 "no server: a Python of its own")


if __name__ == "__main__":
    sys.exit(attn_testing.main(__doc__, [check_all]))
