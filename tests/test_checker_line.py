"""The line a check's calls travel on to the student's kernel (autograder/sandbox/bridge_line.py), against a kernel side
played by a thread: its replies read as lengths before bytes, its limits, its deadline, a kernel that stops
serving, and a socket the kernel replaced by a link into the grader's file system.

The whole path, a real sandboxed kernel serving it, is graded by every test that grades an assignment; the hostile
class has a kernel whose line answers with a terabyte's length (tests/attacks.py, MISSHAPEN_REPLIES).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

from autograder.sandbox import bridge_line as line

pytestmark = pytest.mark.quick
LENGTH = struct.Struct("!Q")


def kernel_side(listener: socket.socket, answer) -> threading.Thread:
    """A stand-in for the kernel's serve_line: `answer(connection, request)` for each request, until closed."""
    def serve():
        connection, _ = listener.accept()
        with connection:
            connection.recv(line.TOKEN_BYTES, socket.MSG_WAITALL)           # the check's token
            while header := connection.recv(LENGTH.size, socket.MSG_WAITALL):
                (size,) = LENGTH.unpack(header)
                request = connection.recv(size, socket.MSG_WAITALL) if size else b""
                if answer(connection, request) is False:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def listening(tmp_path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / f"kernel-{line.SUFFIX}"))
    listener.listen(1)
    yield str(tmp_path / "kernel"), listener
    listener.close()


def always_serving():
    return True


def test_a_request_gets_its_reply_whatever_its_size(listening):
    ip, listener = listening
    kernel_side(listener, lambda connection, request: connection.sendall(LENGTH.pack(len(request) * 2) + request * 2))
    with_line = line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**24)
    for request in (b"", b"x", os.urandom(3 * 2**20)):
        assert with_line.call(request, time.monotonic() + 10, always_serving) == request * 2
    with_line.close()


def test_a_reply_over_the_limit_is_refused_by_its_length_before_its_bytes_are_read(listening):
    ip, listener = listening
    kernel_side(listener, lambda connection, request: connection.sendall(LENGTH.pack(2**40)))
    with_line = line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**20)
    with pytest.raises(ValueError, match="over the limit of 1 MB"):
        with_line.call(b"request", time.monotonic() + 10, always_serving)
    with_line.close()


def test_a_kernel_that_never_answers_costs_the_deadline_and_no_more(listening):
    ip, listener = listening
    kernel_side(listener, lambda connection, request: None)
    with_line = line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**20)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        with_line.call(b"request", time.monotonic() + 0.5, always_serving)
    assert time.monotonic() - started < 2
    with_line.close()


def test_a_kernel_that_stops_serving_or_closes_the_line_is_seen_at_once(listening):
    ip, listener = listening
    kernel_side(listener, lambda connection, request: None)
    with_line = line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**20)
    started = time.monotonic()
    with pytest.raises(line.LineClosed, match="stopped serving"):
        with_line.call(b"request", time.monotonic() + 30, lambda: False)
    assert time.monotonic() - started < 2
    with_line.close()

    kernel_side(listener, lambda connection, request: False)       # closes the connection instead of answering
    with_line = line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**20)
    with pytest.raises(line.LineClosed, match="closed the line"):
        with_line.call(b"request", time.monotonic() + 30, always_serving)
    with_line.close()


def test_a_socket_the_kernel_replaced_by_a_link_is_not_followed(tmp_path):
    """Through /proc/PID/root, an absolute link in the kernel's own socket folder would be resolved in the
    grader's file system: the grader (its relay too) connects only to a socket, never through the kernel's link."""
    elsewhere = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    elsewhere.bind(str(tmp_path / "graders-own.sock"))
    elsewhere.listen(1)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / f"kernel-{line.SUFFIX}").symlink_to(tmp_path / "graders-own.sock")      # planted by the kernel
    graders = tmp_path / "graders-folder"
    graders.mkdir()
    (graders / f"kernel-{line.SUFFIX}").symlink_to(sandbox / f"kernel-{line.SUFFIX}")  # the grader's own link
    with pytest.raises(ConnectionRefusedError, match="not a socket"):
        line.Line(line.path({"transport": "ipc", "ip": str(graders / "kernel")}), most_bytes=2**20)
    elsewhere.close()


def test_the_kernel_and_the_grader_name_the_line_alike():
    """bridge.py (in the kernel, with PyTorch) and line.py (in the grader, without) cannot import each other."""
    from autograder.checker import bridge

    assert bridge.LINE_SUFFIX == line.SUFFIX and bridge.LENGTH.format == line.LENGTH.format


def test_a_kernel_that_stops_accepting_fails_the_connection_at_once(listening):
    """A Unix socket's connect waits, with no limit of its own, while the listener's queue is full: a kernel that
    never accepts must cost the grader nothing but that check's calls."""
    ip, listener = listening
    waiting = []
    started = time.monotonic()
    with pytest.raises(OSError):
        for _ in range(64):                   # the queue (listen(1)) fills; the next connect fails, not waits
            waiting.append(line.Line(line.path({"transport": "ipc", "ip": ip}), most_bytes=2**20))
    assert time.monotonic() - started < 2
    for left in waiting:
        left.close()


def test_the_kernel_serves_only_the_connection_that_opens_with_its_checks_token(tmp_path):
    """A connection an earlier check left in the queue (its serving never began) is closed unread: the kernel's
    serve_line (bridge.py) answers only the one whose token its execute request names."""
    from autograder.checker.bridge import Bridge

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / f"kernel-{line.SUFFIX}"))
    listener.listen(8)
    where = line.path({"transport": "ipc", "ip": str(tmp_path / "kernel")})
    stale, current = line.Line(where, 2**20, number=1), line.Line(where, 2**20, number=2)
    served = []
    bridge = Bridge({})
    bridge.serve = lambda request: served.append(request) or b"reply"
    thread = threading.Thread(target=bridge.serve_line, args=(listener, current.token.hex()), daemon=True)
    thread.start()
    assert current.call(b"request", time.monotonic() + 10, always_serving) == b"reply"
    current.close()
    thread.join(10)
    assert served == [b"request"] and not thread.is_alive()
    stale.close()
    listener.close()
