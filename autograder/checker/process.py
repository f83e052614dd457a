"""The checker process: a warm parent that forks one child per graded notebook; the child runs the master's given
cells and checks, and never a line of the student's code.

The grader (session.py) connects to the parent's socket; the parent forks a child for the connection and the
child answers frames until the connection closes:

    grader -> child   R {"kind": "given" | "check", "name": ..., "source": ...}    run a cell here
    child  -> grader  B <a bridge request>                                      a call into the student's kernel
    grader -> child   b <the bridge's reply>                                    (the grader forwards both)
    child  -> grader  D {"ok": ..., "ename": ..., "evalue": ..., "stdout": ...} the cell is done

A frame is one kind byte, a 4-byte length and the payload. The child's namespace holds what the given cells
defined; before each check, the names the check reads that the checker lacks are looked up in the student's
notebook (remote.py): values are copied in, everything else is reached through handles. Hidden inputs are drawn
from `_course_seed(n)`, which the grader makes from a course secret and the hand-in itself (session.py).
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import hmac
import io
import json
import linecache
import os
import signal
import socket
import struct
import sys

HEADER = struct.Struct("<cI")
MOST_FRAME = 64 * 2**20
MOST_STDOUT = 256 * 2**10
SEED_NAME = "_course_seed"
NAMESPACE_NAME = "_course_namespace"     # the student's namespace, for a check that swaps a name for a while


def send(connection: socket.socket, kind: bytes, payload: bytes) -> None:
    connection.sendall(HEADER.pack(kind, len(payload)) + payload)


def receive(connection: socket.socket, most: int = MOST_FRAME) -> tuple[bytes, bytes]:
    header = receive_exactly(connection, HEADER.size)
    kind, length = HEADER.unpack(header)
    if length > most:
        raise ConnectionError(f"a frame of {length} bytes, over {most}")
    return kind, receive_exactly(connection, length)


def receive_exactly(connection: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 2**20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def global_names(code) -> set[str]:
    """The global names a cell's code (and every function and class in it) reads and does not define itself:
    what a check needs from the notebook (its own helpers, `_test_...`, are never looked up, so a lookup does
    not name the check)."""
    read, written, pending = set(), set(), [code]
    while pending:
        current = pending.pop()
        for instruction in dis.get_instructions(current):
            if not isinstance(instruction.argval, str):
                continue
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                read.add(instruction.argval)
            elif instruction.opname in ("STORE_GLOBAL", "STORE_NAME") and current is code or \
                    instruction.opname == "STORE_GLOBAL":
                written.add(instruction.argval)
        pending.extend(constant for constant in current.co_consts if hasattr(constant, "co_code"))
    return read - written


class BoundedText(io.TextIOBase):
    """What a cell prints, kept up to a limit (the rest counted, not held)."""

    def __init__(self, most: int):
        self.parts, self.kept, self.most, self.dropped = [], 0, most, 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.most - self.kept
        self.parts.append(text[:max(room, 0)])
        self.kept += min(len(text), max(room, 0))
        self.dropped += max(len(text) - max(room, 0), 0)
        return len(text)

    def text(self) -> str:
        return "".join(self.parts) + (f"\n[{self.dropped} characters of output not kept]\n" if self.dropped else "")


class Checks:
    """One notebook's given cells and checks, in one namespace; `send(request bytes) -> reply bytes` reaches the
    student's bridge (through the grader here; directly in the catalog's fast path, tools/mutation_grading.py);
    `key` is the hand-in's key for its hidden inputs."""

    def __init__(self, send, key: bytes):
        from autograder.checker.remote import Connection

        self.student = Connection(send)
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.from_student: set[str] = set()
        self.key = key

    def seed(self, number: int) -> int:
        """A hidden input's seed: the same for the same hand-in and number, another for any other hand-in."""
        digest = hmac.new(self.key, str(int(number)).encode(), "sha256").digest()
        return int.from_bytes(digest[:6], "little")

    def run(self, kind: str, name: str, source: str) -> dict:
        output = BoundedText(MOST_STDOUT)
        try:
            filename = f"<{name}>"
            # The check's lines, where inspect finds a class the check sends to the kernel (its visible part).
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            code = compile(source, filename, "exec")
            if kind == "check":
                self.student.new_check()
                own = (set(self.namespace) - self.from_student) | set(dir(builtins)) | {SEED_NAME, NAMESPACE_NAME}
                wanted = global_names(code) - own
                found = self.student.names(sorted(wanted)) if wanted else {}
                for gone in (wanted & self.from_student) - set(found):
                    self.namespace.pop(gone, None)
                self.namespace.update(found)
                self.from_student |= set(found)
            self.namespace[SEED_NAME] = self.seed
            self.namespace[NAMESPACE_NAME] = self.student.namespace
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                exec(code, self.namespace)
        except BaseException as error:                         # noqa: BLE001 (the check failed: said, not raised)
            return {"ok": False, "ename": type(error).__name__[:200], "evalue": str(error)[:4000],
                    "stdout": output.text()}
        return {"ok": True, "stdout": output.text()}


def in_process(serve):
    """A bridge in this process (the catalog's fast path, the unit tests), as the grader reaches one in a kernel:
    what the student's code prints while a check calls it stays out of the check's output."""
    def send(request: bytes) -> bytes:
        with open(os.devnull, "w") as nowhere, contextlib.redirect_stdout(nowhere), contextlib.redirect_stderr(nowhere):
            return serve(request)

    return send


class Child:
    """A forked child of the checker parent: one notebook's Checks, answering the grader's frames."""

    def __init__(self, connection: socket.socket, key: bytes):
        self.connection = connection
        self.checks = Checks(self.bridge, key)

    def bridge(self, request: bytes) -> bytes:
        send(self.connection, b"B", request)
        try:
            kind, reply = receive(self.connection)
        except BaseException:                 # noqa: BLE001  (a frame not read whole, over the limit or out of
            # memory: what follows it on the connection would be read as frames, of the kernel's choosing. This
            # child ends here; the grader gives the next cell a fresh one.)
            self.connection.close()
            os._exit(1)
        if kind != b"b":
            self.connection.close()
            os._exit(1)
        return reply

    def serve(self) -> None:
        while True:
            try:
                kind, payload = receive(self.connection)
            except ConnectionError:
                return
            if kind != b"R":
                return
            request = json.loads(payload)
            answer = self.checks.run(request["kind"], request["name"], request["source"])
            send(self.connection, b"D", json.dumps(answer).encode())


def limit_memory() -> None:
    """The child holds the student's values (a returned tensor's size, a meta parameter's shape a check then
    fills): it gets the address space a submission's kernel gets, so values cannot spend the grader's memory."""
    import resource

    from autograder.grading_environment import value

    most = int(value("COURSE_GRADING_MEMORY_GB") * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (most, most))


def main(control_fd: int, imports: list[str]) -> None:
    """Serve the grader: each message on the control socket hands over one end of a new connection, for which a
    child is forked; the parent ends when the grader's end of the control socket closes (the grader stopped it,
    or is gone, killed too, where its exit handlers never ran)."""
    import importlib

    for module in imports:
        importlib.import_module(module)
    import autograder.checker.remote  # noqa: F401  (imported once, here, for every child)
    from autograder.sandbox.kernel_zygote import reap            # each child reaped as it ends, as the warm parent does

    signal.signal(signal.SIGCHLD, reap)
    control = socket.socket(fileno=control_fd)
    print("ready", flush=True)
    null = os.open(os.devnull, os.O_WRONLY)             # the grader reads nothing more: a full pipe would block
    os.dup2(null, 1)                                    # a child that writes to it (PyTorch's C++ warnings)
    os.dup2(null, 2)
    os.close(null)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 16, 4)
        except InterruptedError:
            continue
        if not message:                                  # the grader closed the control socket
            os._exit(0)                                  # no teardown: nothing to flush (0.7 s of PyTorch's)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        connection = socket.socket(fileno=fds[0])
        try:
            kind, key = receive(connection, 1024)             # the hand-in's key, then the child serves
        except (ConnectionError, OSError):
            connection.close()
            continue
        child = os.fork()
        if child == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                limit_memory()
                send(connection, b"P", str(os.getpid()).encode())
                Child(connection, key).serve()
            finally:
                os._exit(0)
        connection.close()


if __name__ == "__main__":
    main(int(sys.argv[-2]), json.loads(sys.argv[-1]))
