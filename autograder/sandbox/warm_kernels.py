"""Warm parents for grading kernels: one per grading process and kernel configuration (kernel_zygote.py).

A grading process (nbgrader autograde, a class grader's Dask worker) starts its warm parent when its first
warm kernel is asked for and keeps it until it exits. The parent is a child of this process that imports
grading_environment.WARM_IMPORTS once (for the notebooks whose code imports a package of
grading_environment.WARM_PRELOADS or makes an optimizer, another that has imported those modules too); each kernel
is then forked from it into a sandbox bubblewrap built for it (sandboxed_kernel.run_warm), instead of a new Python
importing PyTorch in each sandbox.

- It gets the kernel's environment (sandboxed_kernel.kernel_environment: never this process's tokens or paths)
  and an empty folder of its own as its working folder, inside a folder only this user can enter, which also
  holds its socket. It answers only this user's processes; the kernels cannot reach the socket (it is not in
  their file system, and they share no network namespace with it).
- It ends when this process does, however: it waits on a pipe whose other end only this process holds.
- A parent that has imported more than WARM_IMPORTS (transformers, the compiler), asked for while the one that
  has imported WARM_IMPORTS runs, is forked from that one (kernel_zygote.become_heavier): it pays for its own
  imports only, not PyTorch's again. It gets a folder, a socket and a watch pipe of its own, as a parent started
  by this process does; where the fork fails, or no lighter parent runs yet, it is started as the others are.
- A parent that cannot start is remembered for this process's run (every kernel then starts cold, flagged);
  one that died is started again for the next kernel. A kernel whose parent fails it starts cold, flagged
  (sandboxed_kernel.main).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from autograder import grading_environment
from autograder.sandbox import sandboxed_kernel

ZYGOTE = Path(__file__).resolve().parent / "kernel_zygote.py"
# Started as a cold kernel's Python is (the same interpreter flags: ipykernel puts the working folder on the import
# path unless -P was given), with nothing of its own folder or working folder on its import path.
START = "import sys; del sys.path[0]; import runpy; runpy.run_path(sys.argv[1], run_name='__main__')"


class WarmParent:
    """One running kernel_zygote.py."""

    def __init__(self, environment: dict[str, str], imports: tuple[str, ...]):
        self.environment = environment
        self.imports = imports
        self.folder = Path(tempfile.mkdtemp(prefix="course-grading-warm-"))     # mode 0700
        self.socket = str(self.folder / "parent")
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None             # a parent forked from another: not this process's child
        self._pidfd: int | None = None
        self._watch: int | None = None

    def start(self, timeout: float, lighter: WarmParent | None = None) -> None:
        """Start the parent (forked from `lighter`, a running parent whose imports are a part of these, where it
        can be) and wait until it has imported everything; raise with what it said if it cannot."""
        if lighter is not None:
            try:
                (self.folder / "empty").mkdir()
                watched, self._watch = os.pipe()
                os.set_inheritable(self._watch, False)
                self.fork_from(lighter, watched, timeout)
                return
            except (OSError, RuntimeError, ValueError):
                self.stop_forked()                      # started below as any other, in a folder of its own
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = Path(tempfile.mkdtemp(prefix="course-grading-warm-"))
                self.socket = str(self.folder / "parent")
        empty = self.folder / "empty"
        empty.mkdir()
        watched, self._watch = os.pipe()
        os.set_inheritable(self._watch, False)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", START, str(ZYGOTE), self.socket, str(watched), json.dumps(list(self.imports))],
                cwd=empty, env=self.environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=[watched], start_new_session=True)
        finally:
            os.close(watched)
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        if line != b"ready\n":
            self.stop()
            said = self.process.stderr.read(4000).decode(errors="replace").strip().splitlines()
            raise RuntimeError(said[-1] if said else f"not ready within {timeout:g} s")
        self.process.stdout.close()
        self.process.stderr.close()       # it writes nothing more: its children write to their kernels' pipes

    def fork_from(self, lighter: WarmParent, watched: int, timeout: float) -> None:
        """Ask `lighter` for a child that imports what this parent has and it has not, and serves on this parent's
        socket (kernel_zygote.become_heavier); wait for its "ready"."""
        readable, ready = os.pipe()
        try:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
                    connection.settimeout(timeout)
                    connection.connect(lighter.socket)
                    request = {"parent": {"socket": self.socket,
                                          "imports": [name for name in self.imports if name not in lighter.imports]}}
                    socket.send_fds(connection, [json.dumps(request).encode()], [watched, ready])
                    reply = json.loads(connection.recv(4096) or b"{}")
            finally:
                os.close(watched)
                os.close(ready)
            if not isinstance(reply, dict) or not isinstance(reply.get("pid"), int):
                raise RuntimeError(str(reply.get("error", "no child") if isinstance(reply, dict) else "no child"))
            self.pid = reply["pid"]
            self._pidfd = os.pidfd_open(self.pid)
            said = b""
            while not said.endswith(b"\n"):
                if not select.select([readable], [], [], timeout)[0]:
                    raise RuntimeError(f"not ready within {timeout:g} s")
                chunk = os.read(readable, 4000)
                if not chunk:
                    break
                said += chunk
            if said != b"ready\n":
                raise RuntimeError(said.decode(errors="replace").strip() or "it ended before it was ready")
        finally:
            os.close(readable)

    def alive(self) -> bool:
        if self._pidfd is not None:
            return not ended(self._pidfd, 0)
        return self.process is not None and self.process.poll() is None

    def release(self) -> None:
        """Close the watch pipe: the parent ends (stop waits for it)."""
        if self._watch is not None:
            os.close(self._watch)
            self._watch = None

    def stop_forked(self) -> None:
        """Stop a parent forked from another: wait for it to end (its watch pipe closed), else kill it."""
        self.release()
        if self._pidfd is not None:
            if not ended(self._pidfd, 10):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            os.close(self._pidfd)
            self._pidfd = None

    def stop(self) -> None:
        self.stop_forked()                 # its watch pipe closed: the parent sees it and exits
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def ended(pidfd: int, timeout: float) -> bool:
    """Whether the process of `pidfd` has ended (its pidfd turns readable), waiting up to `timeout` seconds."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


_parents: dict[tuple, WarmParent] = {}
_failed: dict[tuple, str] = {}
_lock = threading.Lock()


def parent_socket(imports: tuple[str, ...] | None = None) -> tuple[str | None, str | None]:
    """(the socket of this process's warm parent for kernels started now that has imported `imports`, by default
    grading_environment.WARM_IMPORTS, None) or (None, why there is none)."""
    imports = tuple(imports or grading_environment.WARM_IMPORTS)
    environment = sandboxed_kernel.kernel_environment()
    key = (sys.executable, tuple(sorted(environment.items())), imports)
    with _lock:
        timeout = grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")
        plain, lighter = tuple(grading_environment.WARM_IMPORTS), None
        # Forked from the lighter parent where that one runs already (a class's earlier notebooks started it);
        # otherwise started on its own, as soon as possible (a first notebook would wait for both in turn).
        running = _parents.get((sys.executable, key[1], plain))
        if imports != plain and set(plain) <= set(imports) and running is not None and running.alive():
            lighter = running
        parent, why = _running(key, environment, imports, timeout, lighter)
        return (parent.socket, None) if parent is not None else (None, why)


def _running(key: tuple, environment: dict[str, str], imports: tuple[str, ...], timeout: float,
             lighter: WarmParent | None = None) -> tuple[WarmParent | None, str | None]:
    """The running parent of `key`, started now if there is none (called with _lock held)."""
    if key in _failed:
        return None, _failed[key]
    parent = _parents.get(key)
    if parent is not None and parent.alive():
        return parent, None
    if parent is not None:                     # it died: started again for this kernel and the next
        parent.stop()
    parent = WarmParent(environment, imports)
    try:
        parent.start(timeout, lighter)
    except (OSError, RuntimeError) as error:
        _failed[key] = f"the warm parent could not start ({error})"
        return None, _failed[key]
    _parents[key] = parent
    return parent, None


def running() -> list[WarmParent]:
    """This process's warm parents that are running (for tests and benchmarks)."""
    with _lock:
        return [parent for parent in _parents.values() if parent.alive()]


@atexit.register
def stop_all() -> None:
    """Every parent told to end at once, then waited for: a plain parent waits for the heavier ones forked from it
    (kernel_zygote.wait_for_heavier_parents), which end only when their own pipes close (found by a review: 5 s at
    every grading process's exit while they were closed one parent at a time)."""
    with _lock:
        for parent in _parents.values():
            parent.release()
        for parent in _parents.values():
            parent.stop()
        _parents.clear()
