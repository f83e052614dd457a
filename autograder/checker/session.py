"""The grader's side of the checker: one warm checker parent per grading process, one session per notebook.

The parent (process.py) imports PyTorch once; each session is a child forked for one notebook, which runs that
notebook's given cells and checks. The session forwards the child's bridge requests to the student's kernel
(`bridge`, given by GuardedExecute) and returns each cell's outcome. A child that overruns a cell's time is
killed, and the next cell gets a fresh one.

The parent runs in bubblewrap, as a kernel does (mounts.base_argv: the system and the Python
environment read-only, a private /tmp), with nothing of the course but the few files of the grading package it
imports, no network and no socket on disk: each notebook's connection is one end of a socket pair, handed to the
parent over a control socket it inherited.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from autograder.checker.process import receive, send

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])      # the folder `import autograder` needs
START = ("import sys; sys.path.insert(0, sys.argv[1]); from autograder.checker.process import main; "
         "main(int(sys.argv[-2]), __import__('json').loads(sys.argv[-1]))")
# What the checker's parent imports: PyTorch, NumPy, and what PyTorch imports the first time a program gives backward a
# gradient (`out.backward(dout)`: SymPy, 0.35 s), which assignment 1's checks do in every notebook.
IMPORTS = ("torch", "torch.fx.experimental.symbolic_shapes", "numpy")
# What the checker imports of the grading package: the only files of the course its sandbox holds.
PACKAGE_FILES = ("__init__.py", "bounded.py", "grading_environment.py", "sandbox/__init__.py", "sandbox/kernel_zygote.py",
                 "checker")


def sandbox() -> tuple[list[str], list[int]]:
    """bwrap's arguments for the checker's parent, up to its command, and the descriptors they name: a kernel's
    file system (no course, no home), the package files it imports read-only, and its own namespaces for the
    network, IPC and host name. (Not its own process ids: the grader stops a child that overran by its pid.)"""
    from autograder.sandbox import mounts
    from autograder.grading_environment import KEPT_ENVIRONMENT, grading_variables

    argv, fds = mounts.base_argv([])
    package = Path(PACKAGE_PARENT) / "autograder"
    for name in PACKAGE_FILES:
        argv += ["--ro-bind", str(package / name), str(package / name)]
    argv += mounts.closed_argv()
    argv += ["--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--new-session",
             "--cap-drop", "ALL", "--clearenv", "--chdir", "/tmp"]
    kept = {key: text for key, text in os.environ.items() if key in KEPT_ENVIRONMENT}
    kept |= grading_variables()                                                 # the limits, as the grader's
    for key, text in {**kept, "HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONNOUSERSITE": "1",
                      "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1",
                      "TORCHINDUCTOR_CACHE_DIR": "/tmp"}.items():     # as in a kernel (kernel_environment)
        argv += ["--setenv", key, text]
    return argv, fds


class CheckerTimeout(Exception):
    """A cell ran past its time in the checker (the child was stopped)."""


class CheckerParent:
    """A warm parent that has imported `imports` (PyTorch; transformers too for a notebook whose checks use it),
    forking one child per notebook, in its sandbox."""

    def __init__(self, imports: tuple = IMPORTS):
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sending = threading.Lock()
        argv, fds = sandbox()
        try:
            self.process = subprocess.Popen(
                [*argv, "--", sys.executable, "-c", START, PACKAGE_PARENT, str(theirs.fileno()),
                 json.dumps(list(imports))],
                cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=[theirs.fileno(), *fds], start_new_session=True)
        finally:
            for fd in fds:
                os.close(fd)
            theirs.close()
        ready, _, _ = select.select([self.process.stdout], [], [], 120)
        line = self.process.stdout.readline() if ready else b""
        if line != b"ready\n":
            said = self.process.stderr.read(4000).decode(errors="replace") if not ready or not line else ""
            self.stop()
            raise RuntimeError(f"the checker could not start: {said.strip()[-500:] or 'no answer'}")
        self.process.stdout.close()
        self.process.stderr.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def connect(self) -> socket.socket:
        """A connection to a new child: one end of a fresh socket pair; the other is handed to the parent."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._sending:
                socket.send_fds(self._control, [b"c"], [theirs.fileno()])
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours

    def stop(self) -> None:
        self._control.close()       # the parent ends when its control socket closes (as when the grader dies)
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_parents: dict[tuple, CheckerParent] = {}     # one per set of imports, started when a notebook first needs it
_lock = threading.Lock()


def parent(imports: tuple = IMPORTS) -> CheckerParent:
    with _lock:
        running = _parents.get(imports)
        if running is None or not running.alive():
            if running is not None:
                running.stop()
            running = _parents[imports] = CheckerParent(imports)
        return running


@atexit.register
def stop_parent() -> None:
    with _lock:
        for running in _parents.values():
            running.stop()
        _parents.clear()


class Session:
    """The checks of one notebook, in a child of the checker parent. `key`: the hand-in's key for hidden inputs."""

    def __init__(self, key: bytes, imports: tuple = IMPORTS):
        self.key, self.imports = key, tuple(imports)
        self.connection: socket.socket | None = None
        self.pid: int | None = None
        self.cells: list[tuple[str, str, str]] = []      # the given cells run so far, replayed in a new child
        self.start_seconds = 0.0                          # spent waiting for the parent and a child (make bench)

    def prepare(self) -> None:
        """Start the checker parent this session needs, if none runs, in the background: its imports (seconds)
        overlap the kernel's start. A parent that cannot start is reported by start(), which tries again."""
        def start_parent():
            try:
                parent(self.imports)
            except Exception:      # noqa: BLE001  (start() says why, in the notebook's grading)
                pass

        threading.Thread(target=start_parent, name="checker-parent", daemon=True).start()

    def start(self) -> None:
        connection = parent(self.imports).connect()
        send(connection, b"K", self.key)
        kind, pid = receive(connection, 64)
        if kind != b"P":
            raise RuntimeError("the checker did not start a child")
        self.connection, self.pid = connection, int(pid)

    def run(self, kind: str, name: str, source: str, bridge, timeout: float) -> dict:
        """Run one cell in the checker; its bridge requests go to `bridge(bytes) -> bytes`."""
        if self.connection is None:
            started = time.perf_counter()
            self.start()
            self.start_seconds += time.perf_counter() - started
            for replayed in self.cells:
                self._run(*replayed, bridge, timeout)
        if kind == "given":
            self.cells.append((kind, name, source))
        return self._run(kind, name, source, bridge, timeout)

    def _run(self, kind: str, name: str, source: str, bridge, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        try:
            send(self.connection, b"R", json.dumps({"kind": kind, "name": name, "source": source}).encode())
            while True:
                self.connection.settimeout(max(0.01, deadline - time.monotonic()))
                frame, payload = receive(self.connection)
                self.connection.settimeout(None)
                if frame == b"B":
                    try:
                        answer = bridge(payload)
                    except BaseException:
                        self.close(kill=True)      # it waits for this answer: no later cell may be read as one
                        raise
                    send(self.connection, b"b", answer)
                elif frame == b"D":
                    return json.loads(payload)
                else:
                    raise ConnectionError(f"an unknown frame {frame!r}")
        except (socket.timeout, TimeoutError):
            self.close(kill=True)                         # still running the check: its pid is still its own
            raise CheckerTimeout(f"the check ran for more than {timeout:g} s") from None
        except (ConnectionError, OSError, ValueError) as error:
            self.close()
            return {"ok": False, "ename": "CheckerError", "evalue": f"the checker stopped ({error})", "stdout": ""}

    def close(self, kill: bool = False) -> None:
        """End the child: it exits when its connection closes, or, stuck in a check, is killed."""
        if kill and self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.pid = None
        if self.connection is not None:
            self.connection.close()
            self.connection = None
