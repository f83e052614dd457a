"""The grader's end of the line a check's calls of the student's code travel on.

A check cell runs in the checker; each time it calls the student's code, the checker sends a request that the
grader forwards to the student's kernel (bridge.py answers it). Sent as a Jupyter execute request, each call
cost the kernel's whole execute machinery, 8 to 12 ms, and a check makes hundreds (assignment 3's about 470):
most of a notebook's grading time. So the kernel listens on a socket of its own beside its Jupyter sockets (in
the sandbox's socket folder, linked into the grader's as they are, sandboxed_kernel.link_sockets), and for each
check cell the grader connects and asks the kernel, with one execute request, to serve that connection
(`_course_bridge.serve_line`): a request and its reply at a time, each its length and its bytes, until the grader
closes it. A call then costs what its own work costs. The connection opens with a token the execute request
names, so that a connection left waiting by an earlier check (one whose serving never began) is never served.

Nothing from the kernel is trusted here, as nothing on its Jupyter channels is: a reply's length is read before
its bytes and refused over the grader's message limit, every wait has the cell's deadline, and the socket is
opened without following a link the kernel planted in its own folder (through /proc/PID/root an absolute link
would be resolved in the grader's file system, a socket of the grader's choosing).
"""

from __future__ import annotations

import os
import select
import socket
import stat
import struct
import time

SUFFIX = "bridge"            # the line's socket: the kernel's connection `ip`, a dash and this (bridge.py's LINE_SUFFIX)
LENGTH = struct.Struct("!Q")
TOKEN_BYTES = 8              # the check's token: the execute request names it, the connection opens with it
TICK = 0.05                  # while a call runs, how often the grader looks whether the kernel still serves the line


class LineClosed(Exception):
    """The kernel closed the line or stopped serving it: this check's calls get no answer."""


def path(connection: dict) -> str | None:
    """Where the line's socket is linked into the grader's folder; None for a kernel without Unix sockets."""
    if connection.get("transport") != "ipc":
        return None
    return f"{os.path.abspath(connection['ip'])}-{SUFFIX}"


def connect_unix(sock: socket.socket, where: str) -> None:
    """Connect to the Unix socket at `where`, following the grader's own link there but not a link at the end of
    the path it points into (the kernel's own folder): only a socket the sandbox made is connected to."""
    target = os.readlink(where) if os.path.islink(where) else where
    fd = os.open(target, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ConnectionRefusedError(f"{target} is not a socket")
        sock.connect(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


class Line:
    """One check cell's connection to the kernel's bridge. `serving()` says whether the kernel still runs the
    execute request that serves it (the grader's Jupyter client reads that); `most_bytes` bounds a reply."""

    def __init__(self, where: str, most_bytes: int, number: int = 0):
        self.most_bytes = most_bytes
        # The check's number in its notebook: no secret (the kernel is the student's), and the same at a regrade,
        # since the student's code can see it in the execute request and print it.
        self.token = number.to_bytes(TOKEN_BYTES, "big")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Not blocking: a Unix socket's connect waits while the listener's queue is full (a kernel that stopped
        # accepting), with no time limit of its own; this way it fails at once.
        self.sock.setblocking(False)
        try:
            connect_unix(self.sock, where)
            self.sock.setblocking(True)
            self.sock.sendall(self.token)      # the kernel serves the connection that opens with its check's token
        except OSError:
            self.sock.close()
            raise

    def call(self, request: bytes, deadline: float, serving) -> bytes:
        """Send one request and return its reply. Raises TimeoutError past the deadline, LineClosed if the
        kernel closed the line or stopped serving it, ValueError for a reply over the limit."""
        self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            self.sock.sendall(LENGTH.pack(len(request)) + request)
        except socket.timeout:
            raise TimeoutError from None
        except OSError as error:
            raise LineClosed(str(error)) from None
        (size,) = LENGTH.unpack(self.receive(LENGTH.size, deadline, serving))
        if size > self.most_bytes:
            raise ValueError(f"an answer of {size / 2**20:.1f} MB, over the limit of {self.most_bytes / 2**20:g} MB")
        return self.receive(size, deadline, serving)

    def receive(self, size: int, deadline: float, serving) -> bytes:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        self.sock.setblocking(False)
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.sock], [], [], min(left, TICK))
            if not ready:
                if not serving():
                    raise LineClosed("the kernel stopped serving the check's calls")
                continue
            try:
                count = self.sock.recv_into(view[got:])
            except BlockingIOError:
                continue
            except OSError as error:
                raise LineClosed(str(error)) from None
            if count == 0:
                raise LineClosed("the kernel closed the line")
            got += count
        return bytes(buffer)

    def close(self) -> None:
        """The check has ended: the kernel's serve_line returns when it reads the end of the line."""
        self.sock.close()
