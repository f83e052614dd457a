"""Where a grading kernel's messages enter the grader: a relay that bounds each one before the grader holds it.

ZeroMQ delivers a multipart message whole: the receiving process buffers every part before the first can be
read, and its only size option (ZMQ_MAXMSGSIZE) limits each part, not their number. So a kernel that sends one
signed message followed by hundreds of large buffers makes the grader allocate all of them. The relay sits
between the kernel's sockets and the grader's: one listening socket per channel in a folder the kernel never
sees, and for every connection the grader makes, a connection of its own to the kernel. From the grader to the
kernel bytes pass unchanged. From the kernel, it reads ZeroMQ's wire protocol (ZMTP 3, rfc.zeromq.org/spec/23:
a 64-byte greeting, then frames of a flags byte, a 1- or 8-byte size and the body) and keeps each message
until its last part arrives: a message within the limits goes on to the grader, one with too many parts or
bytes is dropped as it streams (nothing of it is kept, whatever its length) and reported. So the grader
never holds more than one message per channel beyond what its sockets queue (GuardedExecute sets their
receive queue short), and each of those within the limits.

A byte limit alone is not a memory limit: the grader decodes each message's JSON parts, and a few MB of
`[], ` decode to hundreds of MB of Python lists. So a message is also counted as the grader will decode it:
its JSON parts' values (the `[`, `{`, `,` and `:` outside strings, an upper bound on the values decoding
creates) and their nesting depth. One over either limit is dropped as well. What decoding can then allocate
is bounded: strings at most four times their bytes (one wide character makes a string four bytes a
character), every other value a fixed size, so about 4 x max_bytes + max_values x 200 bytes, beside the raw
message the sockets hold.

Runs as one thread of the grading process, from the kernel's start to its end (GuardedExecute).
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import socket
import tempfile
import threading

from autograder.sandbox.bridge_line import connect_unix

CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
GREETING = 64
MORE, LONG, COMMAND = 0x01, 0x02, 0x04
COMMAND_BYTES = 64 * 2**10   # the handshake's READY and a heartbeat's PING are a few dozen bytes
CHUNK = 2**20                # read into one reused buffer: a dropped message streams past at memory speed
BACKLOG = 2 * CHUNK          # bytes waiting for a slow reader before the relay stops reading the other side
DELIMITER = b"<IDS|MSG>"     # a Jupyter message's routing identities end here; then the signature, then 4 JSON parts
MAX_DEPTH = 32               # a Jupyter message nests a few levels; Python's JSON decoder fails on deep nesting
# A JSON string, escapes included, or an unterminated one to the end of the part: possessive, so that any input
# is stripped in one linear pass (a string that never ends is not searched for again from each later quote).
STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))      # deleted with bytes.translate: C speed


def json_values(bare: list[bytes]) -> int:
    """An upper bound on the values decoding creates from JSON parts whose strings are stripped (`bare`):
    the first value of each, then one for every `[`, `{`, `,` and `:`."""
    return sum(1 + sum(part.count(mark) for mark in (b"[", b"{", b",", b":")) for part in bare)


def opening_brackets(part: bytes) -> int:
    return part.count(b"[") + part.count(b"{")


def json_depth(bare: list[bytes]) -> int:
    """How deep the brackets of stripped JSON parts nest (a Python loop over the brackets alone: call it only
    once json_values has found them few)."""
    deepest = 0
    for part in bare:
        level = 0
        for bracket in part.translate(None, NOT_BRACKETS):
            level += 1 if bracket in b"[{" else -1
            deepest = max(deepest, level)
    return deepest


class ProtocolError(Exception):
    """The kernel's side broke ZMTP: its connection is reset (the grader's socket connects again)."""


class Downstream:
    """The kernel-to-grader byte stream of one connection, parsed frame by frame."""

    def __init__(self, max_bytes: int, max_parts: int, report, max_values: int | None = None):
        self.max_bytes, self.max_parts, self.report = max_bytes, max_parts, report
        self.max_values = max_values
        self.greeting = bytearray()
        self.header = bytearray()      # the flags byte and size of the frame being read
        self.left = 0                  # body bytes of the current frame still to come
        self.command = False
        self.more = False
        self.in_message = False
        self.parts = self.size = 0
        self.dropping = False
        self.pending = bytearray()     # the message being assembled (frames in wire format)
        self.bodies: list[tuple[int, int]] = []     # where each of its frames' bodies lies in `pending`

    def feed(self, view: memoryview, out: bytearray) -> None:
        """Parse `view`; append what may reach the grader to `out` (copied: `view` is reused)."""
        position = 0
        while position < len(view):
            if len(self.greeting) < GREETING:
                take = view[position:position + GREETING - len(self.greeting)]
                self.greeting += take
                out += take
                position += len(take)
                if len(self.greeting) == GREETING and not (self.greeting[0] == 0xFF and self.greeting[9] & 1
                                                           and self.greeting[10] >= 3):
                    raise ProtocolError("not a ZMTP 3 greeting")
                continue
            if self.left:
                take = view[position:position + self.left]
                if self.command:
                    out += take
                elif not self.dropping:
                    self.pending += take
                position += len(take)
                self.left -= len(take)
                if not self.left:
                    self.frame_done(out)
                continue
            self.header.append(view[position])
            position += 1
            flags = self.header[0]
            if flags & ~(MORE | LONG | COMMAND):
                raise ProtocolError(f"frame flags {flags:#x}")
            width = 8 if flags & LONG else 1
            if len(self.header) < 1 + width:
                continue
            size = int.from_bytes(self.header[1:], "big")
            self.frame_start(flags, size, bytes(self.header), out)
            self.header.clear()
            if not self.left:
                self.frame_done(out)

    def frame_start(self, flags: int, size: int, header: bytes, out: bytearray) -> None:
        self.command, self.more, self.left = bool(flags & COMMAND), bool(flags & MORE), size
        if self.command:
            if self.in_message or size > COMMAND_BYTES:
                raise ProtocolError("a command inside a message, or an oversized command")
            out += header
            return
        if not self.in_message:
            self.in_message, self.parts, self.size, self.dropping = True, 0, 0, False
            self.bodies = []
        self.parts += 1
        self.size += size
        if not self.dropping and (self.parts > self.max_parts or self.size > self.max_bytes):
            self.dropping = True             # reported now: the rest may stream for a while, or never end
            self.pending = bytearray()
            self.report()
        if not self.dropping:
            self.pending += header
            self.bodies.append((len(self.pending), len(self.pending) + size))

    def frame_done(self, out: bytearray) -> None:
        if self.command or self.more:
            return
        if not self.dropping:
            if self.decodes_within_limits():
                out += self.pending
            else:
                self.report()
        self.pending = bytearray()
        self.bodies = []
        self.in_message = self.dropping = False

    def decodes_within_limits(self) -> bool:
        """Whether the grader may decode the assembled message: its JSON parts (the four after the delimiter
        and the signature; every part, if there is no delimiter) within max_values values and MAX_DEPTH."""
        if self.max_values is None:
            return True
        frames = [bytes(self.pending[start:end]) for start, end in self.bodies]
        if DELIMITER in frames:
            after = frames.index(DELIMITER) + 2
            frames = frames[after:after + 4]
        # First from the raw parts (fast, and enough for almost every message): their counts bound the decoded
        # values and the depth from above, since a string's marks only add to them. The depth is bounded by the
        # opening brackets, not by how they nest: a `]` inside a string would hide nesting from that count.
        if json_values(frames) <= self.max_values and sum(map(opening_brackets, frames)) <= MAX_DEPTH:
            return True
        bare = [STRINGS.sub(b"", frame) for frame in frames]
        return json_values(bare) <= self.max_values and json_depth(bare) <= MAX_DEPTH


class Pair:
    """One grader connection and the relay's connection to the kernel for it."""

    def __init__(self, grader: socket.socket, kernel: socket.socket, downstream: Downstream):
        self.grader, self.kernel, self.downstream = grader, kernel, downstream
        self.to_grader, self.to_kernel = bytearray(), bytearray()


class KernelRelay:
    """Relay a kernel's five channels (its connection info, as the kernel manager has it) through limits:
    a message of more than `max_parts` parts or `max_bytes` bytes, or whose JSON would decode to more than
    `max_values` values or nest deeper than MAX_DEPTH, is dropped, and counted in `dropped()`."""

    def __init__(self, connection: dict, max_bytes: int, max_parts: int, max_values: int | None = None):
        self.max_bytes, self.max_parts, self.max_values = max_bytes, max_parts, max_values
        self.transport = connection["transport"]
        self._lock = threading.Lock()
        self._dropped = 0
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[socket.socket, object] = {}
        self._pairs: dict[socket.socket, Pair] = {}
        self._closing = False
        self._scratch = memoryview(bytearray(CHUNK))
        self.folder = tempfile.mkdtemp(prefix="course-grading-relay-") if self.transport == "ipc" else None
        # What the grader's client connects to instead of the kernel's own sockets.
        self.client_connection: dict = {"transport": self.transport}
        for channel in CHANNELS:
            port = connection[f"{channel}_port"]
            if self.transport == "ipc":
                target = f"{connection['ip']}-{port}"
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(os.path.join(self.folder, f"grader-{port}"))
                self.client_connection.update(ip=os.path.join(self.folder, "grader"), **{f"{channel}_port": port})
            else:
                target = (connection["ip"], port)
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.bind(("127.0.0.1", 0))
                self.client_connection.update(ip="127.0.0.1", **{f"{channel}_port": listener.getsockname()[1]})
            listener.listen(8)
            listener.setblocking(False)
            self._listeners[listener] = target
            self._selector.register(listener, selectors.EVENT_READ)
        # close() wakes the thread through this pair at once, rather than after its select's timeout (0.1 s a
        # notebook on average, which the grader waited for).
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="kernel-relay", daemon=True)
        self._thread.start()

    def dropped(self) -> int:
        """How many messages were dropped since the last call."""
        with self._lock:
            dropped, self._dropped = self._dropped, 0
        return dropped

    def _report(self) -> None:
        with self._lock:
            self._dropped += 1

    def close(self) -> None:
        self._closing = True
        try:
            self._waker.send(b"x")
        except OSError:
            pass
        self._thread.join(5)
        try:
            for pair in set(self._pairs.values()):      # each pair is there under both of its ends
                self._close_pair(pair)
            for listener in self._listeners:
                listener.close()
            self._selector.close()
            self._wake.close()
            self._waker.close()
        finally:
            if self.folder:
                shutil.rmtree(self.folder, ignore_errors=True)

    # --- the thread ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing:
            for key, events in self._selector.select(timeout=0.2):
                if key.fileobj is self._wake:
                    continue                                # close(): the loop ends
                if key.fileobj in self._listeners:
                    self._accept(key.fileobj)
                    continue
                pair = self._pairs.get(key.fileobj)
                if pair is None:
                    continue
                try:
                    self._pump(pair, key.fileobj, events)
                except (OSError, ProtocolError):
                    self._close_pair(pair)

    def _accept(self, listener: socket.socket) -> None:
        try:
            grader, _ = listener.accept()
        except BlockingIOError:
            return
        target = self._listeners[listener]
        kernel = socket.socket(socket.AF_UNIX if isinstance(target, str) else socket.AF_INET, socket.SOCK_STREAM)
        kernel.settimeout(2)              # a kernel's socket that never accepts must not hold the relay up
        try:
            # Local: immediate; refused until the kernel has bound its socket. Not through a link the kernel put
            # in its place: /proc/PID/root resolves an absolute one in the grader's file system (line.py).
            if isinstance(target, str):
                connect_unix(kernel, target)
            else:
                kernel.connect(target)
        except OSError:
            grader.close()                # the grader's ZeroMQ socket connects again shortly
            kernel.close()
            return
        pair = Pair(grader, kernel, Downstream(self.max_bytes, self.max_parts, self._report, self.max_values))
        for end in (grader, kernel):
            end.setblocking(False)
            self._pairs[end] = pair
            self._selector.register(end, selectors.EVENT_READ)

    def _pump(self, pair: Pair, end: socket.socket, events: int) -> None:
        if events & selectors.EVENT_READ:
            received = end.recv_into(self._scratch)
            if not received:
                raise OSError("closed")
            if end is pair.kernel:
                pair.downstream.feed(self._scratch[:received], pair.to_grader)
            else:
                pair.to_kernel += self._scratch[:received]
        for target, buffer in ((pair.grader, pair.to_grader), (pair.kernel, pair.to_kernel)):
            while buffer:
                try:
                    sent = target.send(buffer[:CHUNK])
                except BlockingIOError:
                    break
                del buffer[:sent]
        # Read from a side only while what it sent can be passed on: a slow reader slows the writer down.
        for end, backlog, outgoing in ((pair.kernel, pair.to_grader, pair.to_kernel),
                                       (pair.grader, pair.to_kernel, pair.to_grader)):
            self._watch(end, (selectors.EVENT_READ if len(backlog) < BACKLOG else 0)
                        | (selectors.EVENT_WRITE if outgoing else 0))

    def _watch(self, end: socket.socket, events: int) -> None:
        """Select `end` for `events` (none: not at all)."""
        if end.fileno() < 0:
            return                                  # closed already
        try:
            if events:
                self._selector.modify(end, events)
            else:
                self._selector.unregister(end)
        except KeyError:
            if events:
                self._selector.register(end, events)

    def _close_pair(self, pair: Pair) -> None:
        for end in (pair.grader, pair.kernel):
            self._pairs.pop(end, None)
            self._watch(end, 0)
            end.close()
