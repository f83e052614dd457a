"""The relay's parser fed the frames a hostile kernel could write (autograder/sandbox/kernel_relay.py).

The relay reads untrusted bytes: ZeroMQ's wire protocol as the graded notebook's kernel writes it. Here its
parser (`Downstream`) is fed malformed frames (a greeting that is not ZMTP 3, unknown flag bits, a command
inside a message or over its size), oversized and crowded messages, truncated ones, and JSON parts that are
invalid, deep, wide or one huge number, each spread over reads of every size. What the module promises is
checked exactly: a message within the limits reaches the grader byte for byte; one over a limit is dropped
whole, reported once, and nothing of it is kept while it streams past; a broken protocol raises
ProtocolError, which resets the kernel's connection. One test runs the relay's thread on real TCP sockets to
show the same from the grader's side. tests/test_kernel_relay.py holds the decoding bombs and the timings.
"""

from __future__ import annotations

import json
import socket

import pytest

from autograder.sandbox.kernel_relay import (COMMAND, COMMAND_BYTES, DELIMITER, GREETING, LONG, MAX_DEPTH, MORE, STRINGS,
                                     Downstream, KernelRelay, ProtocolError, json_depth)

pytestmark = pytest.mark.quick

# Small limits, so that every bound is crossed with a few bytes.
MAX_BYTES, MAX_PARTS, MAX_VALUES = 1000, 8, 100
# What a ZMTP 3 peer sends first: the signature (0xFF, 8 bytes of padding, 0x7F), then version 3.0.
ZMTP_GREETING = bytes([0xFF]) + bytes(8) + bytes([0x7F, 3, 0]) + bytes(GREETING - 12)
READ_SIZES = [1, 2, 9, 64, 1 << 20]            # one byte at a time up to everything at once


def wire_frame(body: bytes, more: bool = False, long: bool | None = None, command: bool = False) -> bytes:
    """One ZMTP 3 frame: flags, a 1- or 8-byte size (8 when asked, or when the body needs it), the body."""
    long = len(body) > 255 if long is None else long
    flags = (MORE if more else 0) | (LONG if long else 0) | (COMMAND if command else 0)
    return bytes([flags]) + len(body).to_bytes(8 if long else 1, "big") + body


def wire_message(*parts: bytes) -> bytes:
    """A multipart message: every part but the last carries the MORE flag."""
    return b"".join(wire_frame(part, more=index < len(parts) - 1) for index, part in enumerate(parts))


def jupyter_message(content: bytes, metadata: bytes = b"{}", buffers: tuple[bytes, ...] = ()) -> bytes:
    """A Jupyter message as a kernel sends it: an identity, the delimiter, a signature, its four JSON parts
    (header, parent header, metadata, content) and any raw buffers."""
    return wire_message(b"kernel", DELIMITER, b"0" * 64, b'{"msg_type": "stream"}', b"{}", metadata, content,
                        *buffers)


class Parsed:
    """A Downstream after the kernel's greeting, and what it passed on and reported."""

    def __init__(self, max_bytes: int = MAX_BYTES, max_parts: int = MAX_PARTS, max_values: int | None = MAX_VALUES):
        self.reports = 0
        self.out = bytearray()
        self.downstream = Downstream(max_bytes, max_parts, self.count_report, max_values)
        self.feed(ZMTP_GREETING)

    def count_report(self) -> None:
        self.reports += 1

    def feed(self, data: bytes, read: int = 1 << 20) -> None:
        # The relay reuses one buffer for every read: a copy per read stands for that.
        for start in range(0, len(data), read):
            self.downstream.feed(memoryview(bytearray(data[start:start + read])), self.out)

    @property
    def passed(self) -> bytes:
        """What reached the grader after the greeting."""
        assert bytes(self.out[:GREETING]) == ZMTP_GREETING
        return bytes(self.out[GREETING:])


HONEST = jupyter_message(b'{"name": "stdout", "text": "loss [2.31], {ok}, \\"quoted\\": yes\\n"}')


# --- what passes ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("read", READ_SIZES)
def test_honest_messages_pass_byte_for_byte_however_the_reads_split_them(read):
    empty_parts = wire_message(b"", b"", b"")            # zero-length frames end on their header alone
    parsed = Parsed()
    parsed.feed(HONEST + empty_parts + HONEST, read)
    assert (parsed.passed, parsed.reports) == (HONEST + empty_parts + HONEST, 0)


def test_a_message_exactly_at_each_limit_passes():
    at_bytes = wire_message(b"x" * (MAX_BYTES - 10), b"y" * 10)                # body bytes, headers not counted
    at_parts = wire_message(*[b"0"] * MAX_PARTS)
    at_values = wire_message(b"[" + b",".join([b"0"] * (MAX_VALUES - 1)) + b"]")   # a list and 99 numbers
    at_depth = wire_message(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    parsed = Parsed()
    parsed.feed(at_bytes + at_parts + at_values + at_depth, read=3)
    assert (parsed.passed, parsed.reports) == (at_bytes + at_parts + at_values + at_depth, 0)


def test_a_command_between_messages_passes_unchanged():
    ping = wire_frame(b"\x04PING" + bytes(6), command=True)      # a heartbeat, as ZMTP 3.1 writes it
    parsed = Parsed()
    parsed.feed(HONEST + ping + HONEST, read=5)
    assert (parsed.passed, parsed.reports) == (HONEST + ping + HONEST, 0)


def test_only_the_four_json_parts_of_a_jupyter_message_are_counted():
    """Identities and raw buffers are never decoded by the grader, so brackets in them cost nothing."""
    message = wire_message(b"[" * 200, DELIMITER, b"{" * 64, b"{}", b"{}", b"{}", b"{}", b"[" * 300)
    parsed = Parsed()
    parsed.feed(message)
    assert (parsed.passed, parsed.reports) == (message, 0)


def test_a_message_without_the_delimiter_has_every_part_counted():
    # 79 values a part (a list of 39 lists): each part alone within MAX_VALUES, the three together over it.
    parts = [b"[" + b",".join([b"[]"] * 39) + b"]"] * 3
    parsed = Parsed()
    parsed.feed(wire_message(*parts) + HONEST)
    assert (parsed.passed, parsed.reports) == (HONEST, 1)


def test_without_a_value_limit_only_bytes_and_parts_are_checked():
    deep = wire_message(b"[" * 400 + b"]" * 400)
    parsed = Parsed(max_values=None)
    parsed.feed(deep)
    assert (parsed.passed, parsed.reports) == (deep, 0)


def test_invalid_json_and_invalid_utf8_within_the_limits_pass_unchanged():
    """The relay bounds what the grader decodes; it does not validate it: the grader's own decoder refuses
    these parts, with memory bounded by the counts the relay made."""
    broken = [b"\xff\xfe\x80 not utf-8", b'{"open": ', b'"never closed', b"]]]}}}", b'\\"\\', b"\x00" * 50]
    messages = [jupyter_message(part) for part in broken]
    parsed = Parsed()
    parsed.feed(b"".join(messages), read=7)
    assert (parsed.passed, parsed.reports) == (b"".join(messages), 0)


def test_a_huge_number_passes_and_python_refuses_to_decode_it():
    """One number of 7 MB counts as one value; decoding it holds no more than its text, because Python refuses
    integers of over 4300 digits (a ValueError, at once) instead of converting them in quadratic time."""
    digits = b"1" * 7_000_000
    message = wire_message(digits)
    parsed = Parsed(max_bytes=8 * 2**20)
    parsed.feed(message)
    assert (parsed.passed, parsed.reports) == (message, 0)
    with pytest.raises(ValueError, match="4300 digits"):
        json.loads(digits)


# --- what is dropped -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("read", READ_SIZES)
def test_a_message_over_the_byte_limit_is_dropped_whole_and_reported_once(read):
    oversized = wire_message(b"a" * 600, b"b" * 401)              # 1001 body bytes, one over
    parsed = Parsed()
    parsed.feed(HONEST + oversized + HONEST, read)
    assert (parsed.passed, parsed.reports) == (HONEST + HONEST, 1)


@pytest.mark.parametrize("read", READ_SIZES)
def test_a_message_of_too_many_parts_is_dropped_whole_and_reported_once(read):
    crowded = wire_message(*[b""] * (MAX_PARTS + 1))       # empty parts: only their number is over
    very_crowded = wire_message(*[b"x"] * 500)
    parsed = Parsed()
    parsed.feed(HONEST + crowded + HONEST + very_crowded + HONEST, read)
    assert (parsed.passed, parsed.reports) == (HONEST * 3, 2)


def test_a_message_over_both_limits_is_reported_once():
    parsed = Parsed()
    parsed.feed(wire_message(*[b"z" * 200] * 20) + HONEST, read=11)
    assert (parsed.passed, parsed.reports) == (HONEST, 1)


@pytest.mark.parametrize("name, part", [
    ("values", b"[" + b",".join([b"0"] * MAX_VALUES) + b"]"),          # one value over
    ("objects", b"{" + b",".join(b'"%d":{}' % i for i in range(60)) + b"}"),
    ("depth", b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)),
    ("mixed depth", b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1)),
])
def test_a_message_that_would_decode_to_too_much_is_dropped_and_reported(name, part):
    parsed = Parsed()
    parsed.feed(HONEST + jupyter_message(part) + HONEST, read=13)
    assert (parsed.passed, parsed.reports) == (HONEST + HONEST, 1)


def test_brackets_inside_strings_are_not_counted_but_the_structure_around_them_is():
    inside = jupyter_message(b'{"text": "' + b"[{,:" * 200 + b'"}')                 # 800 marks, all in a string
    escaped = jupyter_message(b'{"text": "\\"' + b"[" * 200 + b'"}')                # an escaped quote opens nothing
    # "\\" is an escaped backslash: the string closes after it, and the 60 lists after it count.
    outside = jupyter_message(b'{"text": "\\\\", "data": [' + b",".join([b"[1]"] * 60) + b"]}")
    parsed = Parsed()
    parsed.feed(inside + escaped + outside)
    assert (parsed.passed, parsed.reports) == (inside + escaped, 1)


def test_closing_brackets_inside_a_string_do_not_hide_deep_nesting():
    """2000 levels: Python's decoder raises RecursionError on it (past MAX_DEPTH, the relay's limit). Counted
    with the string in, its 2000 `]` take the level down before the real brackets take it back up."""
    deep = 2000
    content = b'{"text": "' + b"]" * deep + b'", "data": ' + b"[" * deep + b"]" * deep + b"}"
    # The premises fail the test outright (pytest.fail, not an assertion): only the relay's verdict is expected
    # to fail.
    with pytest.raises(RecursionError):
        json.loads(content)                            # what the grader would do with it
    if (json_depth([STRINGS.sub(b"", content)]), json_depth([content])) != (deep + 1, 1):
        pytest.fail("the counts this test relies on changed")
    # Bytes and values well within the limits (about 8 KB, 2000 values): only the depth is over.
    parsed = Parsed(max_bytes=2**20, max_values=10_000)
    parsed.feed(HONEST + jupyter_message(content) + HONEST)
    assert (parsed.passed, parsed.reports) == (HONEST + HONEST, 1)


def test_a_frame_announcing_more_than_the_limit_is_reported_at_its_header_and_nothing_of_it_is_kept():
    """A size field of 2^62: the report comes before the body does (it may never end), and the body streams
    past without being held, however much of it arrives."""
    header = bytes([LONG]) + (2**62).to_bytes(8, "big")
    parsed = Parsed()
    parsed.feed(HONEST + header)
    assert (parsed.passed, parsed.reports) == (HONEST, 1)
    for _ in range(4):
        parsed.feed(b"[" * 2**20)
        assert len(parsed.downstream.pending) == 0 and parsed.passed == HONEST
    assert parsed.reports == 1


def test_a_dropped_message_is_not_kept_while_its_later_parts_stream():
    parsed = Parsed()
    parsed.feed(wire_frame(b"a" * (MAX_BYTES + 1), more=True))
    for _ in range(50):
        parsed.feed(wire_frame(b"b" * 900, more=True), read=100)
        assert len(parsed.downstream.pending) == 0
    parsed.feed(wire_frame(b"end") + HONEST)
    assert (parsed.passed, parsed.reports) == (HONEST, 1)


# --- truncated -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 2, 9, len(HONEST) // 2, len(HONEST) - 1])
def test_a_truncated_message_is_never_passed_on_in_part(cut):
    """A kernel that stops mid-message (or dies) leaves it incomplete: none of it reaches the grader, and what
    is held is within the byte limit (the relay closes the connection, and the held part with it)."""
    parsed = Parsed()
    parsed.feed(HONEST + HONEST[:cut], read=3)
    assert (parsed.passed, parsed.reports) == (HONEST, 0)
    assert len(parsed.downstream.pending) <= len(HONEST)


def test_a_truncated_greeting_is_passed_on_as_it_arrives_and_checked_when_whole():
    reports = []
    out = bytearray()
    downstream = Downstream(MAX_BYTES, MAX_PARTS, lambda: reports.append(1), MAX_VALUES)
    downstream.feed(memoryview(ZMTP_GREETING[:30]), out)
    assert bytes(out) == ZMTP_GREETING[:30]
    downstream.feed(memoryview(ZMTP_GREETING[30:] + HONEST), out)
    assert (bytes(out), reports) == (ZMTP_GREETING + HONEST, [])


# --- malformed: the connection is reset ----------------------------------------------------------------------

@pytest.mark.parametrize("name, greeting", [
    ("no signature", bytes(GREETING)),
    ("signature without 0x7F", bytes([0xFF]) + bytes(8) + bytes([0x7E, 3]) + bytes(GREETING - 11)),
    ("ZMTP 2", bytes([0xFF]) + bytes(8) + bytes([0x7F, 2]) + bytes(GREETING - 11)),
    ("HTTP", b"GET / HTTP/1.1\r\n".ljust(GREETING, b" ")),
])
def test_a_greeting_that_is_not_zmtp_3_raises_protocol_error(name, greeting):
    downstream = Downstream(MAX_BYTES, MAX_PARTS, lambda: None, MAX_VALUES)
    with pytest.raises(ProtocolError, match="not a ZMTP 3 greeting"):
        downstream.feed(memoryview(greeting + HONEST), bytearray())


@pytest.mark.parametrize("flags", [0x08, 0x10, 0x80, 0xFF, MORE | 0x40])
def test_a_frame_with_unknown_flag_bits_raises_protocol_error_naming_them(flags):
    parsed = Parsed()
    with pytest.raises(ProtocolError, match=f"frame flags {flags:#x}"):
        parsed.feed(HONEST + bytes([flags, 0]))
    assert parsed.passed == HONEST


def test_a_command_inside_a_message_raises_protocol_error():
    parsed = Parsed()
    with pytest.raises(ProtocolError, match="a command inside a message"):
        parsed.feed(wire_frame(b"first", more=True) + wire_frame(b"\x04PING", command=True))
    assert (parsed.passed, parsed.reports) == (b"", 0)


def test_a_command_over_its_size_raises_protocol_error_at_its_header():
    """Commands pass straight to the grader, so their size is checked before their body is read."""
    parsed = Parsed()
    with pytest.raises(ProtocolError, match="oversized command"):
        parsed.feed(bytes([COMMAND | LONG]) + (COMMAND_BYTES + 1).to_bytes(8, "big"))
    assert parsed.passed == b""


# --- the relay's thread, on real sockets ---------------------------------------------------------------------

def receive_exactly(end: socket.socket, size: int) -> bytes:
    received = b""
    while len(received) < size:
        chunk = end.recv(size - len(received))
        assert chunk, f"closed after {len(received)} of {size} bytes"
        received += chunk
    return received


def test_the_relay_drops_an_oversized_message_and_resets_a_kernel_that_breaks_the_protocol():
    """A fake kernel behind the relay on TCP: the grader's bytes reach it unchanged, an oversized message
    never reaches the grader (counted in dropped()), and a malformed frame closes the grader's connection."""
    kernel_listeners = {}
    for channel in ("shell", "iopub", "stdin", "control", "hb"):
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(5)
        kernel_listeners[channel] = listener
    connection = {"transport": "tcp", "ip": "127.0.0.1",
                  **{f"{channel}_port": listener.getsockname()[1] for channel, listener in kernel_listeners.items()}}
    relay = KernelRelay(connection, MAX_BYTES, MAX_PARTS, MAX_VALUES)
    try:
        grader = socket.create_connection(("127.0.0.1", relay.client_connection["shell_port"]), timeout=5)
        kernel, _ = kernel_listeners["shell"].accept()
        kernel.settimeout(5)
        grader.sendall(b"from the grader")
        assert receive_exactly(kernel, 15) == b"from the grader"

        kernel.sendall(ZMTP_GREETING + wire_message(b"x" * (MAX_BYTES + 1)) + HONEST)
        assert receive_exactly(grader, GREETING + len(HONEST)) == ZMTP_GREETING + HONEST
        assert relay.dropped() == 1 and relay.dropped() == 0       # counted once, and reset by the call

        kernel.sendall(bytes([0x80, 0]))                           # unknown flags: the pair is closed
        assert grader.recv(100) == b""
        grader.close()
        kernel.close()
    finally:
        relay.close()
        for listener in kernel_listeners.values():
            listener.close()
