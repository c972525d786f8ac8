"""A fork server for the Python tests: PyTorch imported once, each test a forked child.

Importing PyTorch costs about 7 s of CPU on the 2-core machines this suite is timed on (PyPI's
wheel, with its CUDA libraries), and some forty tests (labels python and quality) each
start a Python that imports it: about a tenth of the CPU time of `scripts/test.sh`. Here one
server imports the third-party modules the tests share (PRELOAD) and each test is a child it
forks, which starts with them imported and runs the test's script as `python script args` would.

    preload.py start SOCKET LOG     starts the server (CTest fixture python_preload's setup test)
    preload.py stop SOCKET          stops it once its running tests end (the fixture's cleanup);
                                    says how many tests ran and the CPU time of the server and
                                    its children (a daemon: no caller's CPU time counts it; its
                                    LOG's line `cpu_seconds N` is what scripts/test.sh adds;
                                    a line `cpu S s  SCRIPT ARGS` per test before it)
    preload.py run SOCKET SCRIPT [ARGS...]
                                    `python SCRIPT ARGS` in a child of the server: the child gets
                                    this process's stdin, stdout, stderr, working directory and
                                    environment; this process exits as the child did

A test that starts Python scripts of its own starts them with python_command() (tests/python is on
every Python test's path), in children of the same server. `run` never depends on the server:
where none answers, or where it differs in what a test's environment sets at import time
(OMP_NUM_THREADS and the like, the interpreter), it becomes a plain `python SCRIPT ARGS` (exec).
A test killed by CTest (its timeout) takes its child with it: the server kills a child's process
group when its `run` goes away. The server exits on `stop`,
or when it has been idle for IDLE_S seconds (a test run that was interrupted).
"""

import json
import os
import select
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from chapter_script import run_as_main  # noqa: E402 (standard library only)

del sys.path[0]  # the tests' children get the path `python script` would give them

# torch._dynamo: PyTorch imports it at a test's first optimizer (torch.optim.Adam) or
# flex_attention, about 3 s of CPU each time; imported here once, the server's children took 204 s
# of CPU instead of 223 s (`ctest --preset sim -L "python|quality" -j2`, one run after the other).
PRELOAD = ("numpy", "torch", "torch._dynamo", "matplotlib.pyplot", "transformers")
# (ATTN_PRELOAD_MODULES=a,b,... in the server's environment replaces the list: its own test)
# Read by the preloaded libraries when they are imported: a test whose environment differs in
# one of these runs in a Python of its own.
LOAD_TIME_ENV = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "CUDA_", "TORCH_", "PYTORCH_",
                 "MPLBACKEND", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "TRANSFORMERS_", "HF_")
IDLE_S = 1800


def load_time_env(env):
    return {k: v for k, v in env.items() if k.startswith(LOAD_TIME_ENV)}


def send_msg(conn, obj):
    data = json.dumps(obj).encode()
    conn.sendall(struct.pack("!I", len(data)) + data)


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            raise EOFError("connection closed")
        buf += part
    return buf


def recv_msg(conn):
    (n,) = struct.unpack("!I", recv_exact(conn, 4))
    return json.loads(recv_exact(conn, n))


# ---- the child: `python script args` in a process that has the preloaded modules ----------


def run_child(request, base_path, fds):
    """In the forked child: takes over the client's stdio, directory and environment, runs the
    script as __main__ and exits as Python would (never returns)."""
    status = 1
    try:
        os.setpgid(0, 0)  # its own group: the server kills the group with the test
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        script = request["argv"][0]
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [os.path.dirname(os.path.abspath(script))] + extra + base_path
        signal.signal(signal.SIGINT, signal.default_int_handler)
        status = run_as_main(script, request["argv"][1:])
    finally:
        try:
            import atexit  # noqa: PLC0415
            import threading  # noqa: PLC0415

            threading._shutdown()  # non-daemon threads end first, as at a normal exit
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status & 0xFF)


# ---- the server ----------------------------------------------------------------------------


def serve(path):
    t0 = time.time()
    names = [m for m in os.environ.get("ATTN_PRELOAD_MODULES", "").split(",") if m] or PRELOAD
    for name in names:
        try:
            __import__(name)
        except ImportError:
            pass  # the test that needs it says so
    print(f"preload: {', '.join(m for m in names if m in sys.modules)} imported in "
          f"{time.time() - t0:.1f} s", flush=True)
    # sys.path without this file's folder and the server's own PYTHONPATH: each child puts its
    # script's folder and its PYTHONPATH in front, as `python script` does
    own = {os.path.dirname(os.path.abspath(__file__))}
    own |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path[1:] if p not in own]
    hello = {"python": os.path.realpath(sys.executable), "env": load_time_env(os.environ)}

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    umask = os.umask(0o177)  # the socket rw for this user only: a child runs what it is sent
    listener.bind(path)
    os.umask(umask)
    listener.listen(16)
    children = {}  # pid -> the connection of its `run`
    scripts = {}  # pid -> its script and arguments, for the log's line of its CPU time
    served = 0
    stopping = False
    idle_since = time.time()
    while not (stopping and not children):
        watched = list(children.values()) + ([] if stopping else [listener])
        ready, _, _ = select.select(watched, [], [], 0.2)
        for conn in ready:
            if conn is listener:
                conn, request, fds = accept(listener, hello)
                if conn is None:
                    continue
                if request.get("stop"):
                    stopping = True
                    t = os.times()  # the server's and its (reaped) children's
                    cpu = t.user + t.system + t.children_user + t.children_system
                    # A daemon: no caller waits for it, so it says its CPU time (scripts/test.sh
                    # adds it to its own figure)
                    print(f"preload: stopped after {served} tests\ncpu_seconds {cpu:.1f}",
                          flush=True)
                    send_msg(conn, {"served": served, "cpu": cpu})
                    conn.close()
                    continue
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for c in children.values():
                        c.close()
                    conn.close()
                    run_child(request, base_path, fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                scripts[pid] = " ".join(os.path.basename(a) for a in request["argv"])
                served += 1
                send_msg(conn, {"pid": pid})
            else:  # a `run` went away (CTest's timeout): its test with it
                pid = next(p for p, c in children.items() if c is conn)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass  # gone already
        while children:
            pid, wait, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            # what each test cost (the child and the processes it waited for), for whoever
            # looks for the costly ones
            print(f"cpu {usage.ru_utime + usage.ru_stime:7.1f} s  {scripts.pop(pid, '?')}",
                  flush=True)
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    send_msg(conn, {"status": os.waitstatus_to_exitcode(wait)})
                except OSError:
                    pass
                conn.close()
            idle_since = time.time()
        if not children and time.time() - idle_since > IDLE_S:
            print(f"preload: idle for {IDLE_S} s, exiting", flush=True)
            break
    listener.close()
    if os.path.exists(path):
        os.unlink(path)


def accept(listener, hello):
    """One connection: the hello, then the request and, for a test, its three descriptors:
    (connection, request, descriptors), or (None, None, []) for a probe or a broken one."""
    conn, _ = listener.accept()
    try:
        conn.settimeout(10)
        send_msg(conn, hello)
        msg, fds, _, _ = socket.recv_fds(conn, 1, 3)
        if not msg:
            raise EOFError("no request")
        request = recv_msg(conn)
        if not request.get("stop") and len(fds) != 3:
            raise ValueError("a test's request without its three descriptors")
        conn.settimeout(None)
        return conn, request, fds
    except EOFError:  # a probe: start's, or a `run` that went its own way
        conn.close()
        return None, None, []
    except (OSError, ValueError) as e:
        print(f"preload: a connection dropped: {e}", flush=True)
        conn.close()
        return None, None, []


# ---- the commands --------------------------------------------------------------------------


def python_command():
    """How a test starts `python` for a script of its own: through the server where the test is
    one of its children (CTest gives those ATTN_PY_PRELOAD, the server's socket), else this
    interpreter."""
    sock = os.environ.get("ATTN_PY_PRELOAD")
    return [sys.executable, os.path.abspath(__file__), "run", sock] if sock else [sys.executable]



def connect(path):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(path)
    return conn, recv_msg(conn)


def run(path, argv):
    def plain():  # the same test in a Python of its own
        os.execv(sys.executable, [sys.executable] + argv)

    try:
        conn, hello = connect(path)
    except (OSError, EOFError, ValueError):
        plain()
    if (hello["python"] != os.path.realpath(sys.executable)
            or hello["env"] != load_time_env(os.environ)):
        conn.close()
        plain()
    try:
        socket.send_fds(conn, [b"r"], [0, 1, 2])
        send_msg(conn, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
        recv_msg(conn)  # the child's pid: it runs
    except (OSError, EOFError, ValueError):
        conn.close()
        plain()  # nothing ran yet
    conn.settimeout(None)
    try:
        status = recv_msg(conn)["status"]
    except (OSError, EOFError, ValueError, KeyError) as e:
        print(f"preload: the server went away before the test ended ({e})", file=sys.stderr)
        sys.exit(1)
    if status < 0:  # killed by a signal: so is this process, for CTest to see
        try:
            signal.signal(-status, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP: never handled
        os.kill(os.getpid(), -status)
    sys.exit(status)


def stop(path):
    try:
        conn, _ = connect(path)
        socket.send_fds(conn, [b"s"], [])
        send_msg(conn, {"stop": True})
        reply = recv_msg(conn)
        conn.close()
        served = f"{reply['served']} tests ran in its children, {reply['cpu']:.1f} s of CPU"
    except (OSError, EOFError, ValueError, KeyError):
        return None  # none running
    for _ in range(600):  # until its running tests end and it is gone
        if not os.path.exists(path):
            break
        time.sleep(0.1)
    return served


def start(path, log):
    stop(path)  # one left by an interrupted run
    if os.fork() == 0:  # the daemon: a session of its own, out of CTest's way
        os.setsid()
        if os.fork() == 0:
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
            try:
                serve(path)
            finally:
                sys.stdout.flush()
                os._exit(0)
        os._exit(0)
    t0 = time.time()
    while time.time() - t0 < 600:
        try:
            conn, _ = connect(path)
            conn.close()
            print(f"preload: the server answers at {path} ({time.time() - t0:.1f} s)")
            return 0
        except (OSError, EOFError, ValueError):
            time.sleep(0.2)
    print(f"error: the preload server did not start (its log: {log})", file=sys.stderr)
    with open(log) as f:
        sys.stderr.write(f.read())
    return 1


def main(argv):
    usage = "usage: preload.py start SOCKET LOG | stop SOCKET | run SOCKET SCRIPT [ARGS...]"
    if len(argv) >= 3 and argv[0] == "start":
        return start(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "stop":
        served = stop(argv[1])
        print("preload: no server was running" if served is None else
              f"preload: stopped; {served}")
        return 0
    if len(argv) >= 3 and argv[0] == "run":
        run(argv[1], argv[2:])
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
