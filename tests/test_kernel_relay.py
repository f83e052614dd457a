"""The relay bounds what the grader decodes, not only what it receives (autograder/sandbox/kernel_relay.py).

Messages are written as a kernel's ZeroMQ socket writes them (ZMTP 3 frames) and fed to the relay's parser
directly: an honest message passes byte for byte; one whose JSON would decode to hundreds of MB, or nest too
deep for Python's decoder, is dropped and reported, however it is spread over the reads.
"""

from __future__ import annotations

import json
import time

import pytest

from autograder.sandbox.kernel_relay import GREETING, LONG, MORE, STRINGS, Downstream, json_values

pytestmark = pytest.mark.quick

LIMITS = {"max_bytes": 8 * 2**20, "max_parts": 64, "max_values": 10_000}


def frame(body: bytes, more: bool) -> bytes:
    flags = (MORE if more else 0) | (LONG if len(body) > 255 else 0)
    return bytes([flags]) + len(body).to_bytes(8 if len(body) > 255 else 1, "big") + body


def message(content: object, metadata: object = None, raw_content: bytes | None = None) -> bytes:
    """A Jupyter message on the wire: an identity, the delimiter, a signature and its four JSON parts."""
    parts = [b"kernel", b"<IDS|MSG>", b"0" * 64, json.dumps({"msg_type": "stream", "msg_id": "1"}).encode(),
             b"{}", json.dumps(metadata or {}).encode(), raw_content or json.dumps(content).encode()]
    return b"".join(frame(part, more=index < len(parts) - 1) for index, part in enumerate(parts))


def relay(*messages: bytes, read: int = 65536) -> tuple[bytes, int]:
    """What reaches the grader of `messages` sent after a greeting, fed in reads of `read` bytes; and how many
    messages were reported dropped."""
    dropped = []
    downstream = Downstream(**{k: v for k, v in LIMITS.items() if k != "max_values"}, report=lambda: dropped.append(1),
                            max_values=LIMITS["max_values"])
    greeting = bytes([0xFF]) + bytes(8) + bytes([0x7F, 3]) + bytes(GREETING - 11)
    stream, out = greeting + b"".join(messages), bytearray()
    for start in range(0, len(stream), read):
        downstream.feed(memoryview(stream[start:start + read]), out)
    return bytes(out[GREETING:]), len(dropped)


HONEST = message({"name": "stdout", "text": "step 1: loss 2.31, 2.29, [ok]\n" * 2000})


def test_honest_messages_pass_unchanged_whatever_commas_their_text_holds():
    csv = message({"name": "stdout", "text": ",".join(str(i) for i in range(200_000))})   # 200,000 commas
    nested_text = message({"name": "stdout", "text": "[" * 5000})
    out, dropped = relay(HONEST, csv, nested_text, read=777)
    assert (out, dropped) == (HONEST + csv + nested_text, 0)


@pytest.mark.parametrize("name, bomb", [
    # about 7 MB each on the wire: a grader decoding them would hold about 2 million lists, dicts or numbers
    ("lists", message({"name": "stdout", "text": ""}, metadata={"x": [[]] * 1_800_000})),
    ("dicts", message(None, raw_content=b'{"data": [' + b"{}, " * 1_800_000 + b"{}]}")),
    ("numbers", message({"data": [0] * 2_300_000})),
    # deeper than Python's JSON decoder goes (a RecursionError, not a ValueError)
    ("deep", message(None, raw_content=b"[" * 100_000 + b"]" * 100_000)),
])
def test_a_message_that_decodes_to_too_much_is_dropped_and_reported(name, bomb):
    assert len(bomb) <= LIMITS["max_bytes"]            # within the byte limit: only the decoding is too much
    out, dropped = relay(HONEST, bomb, HONEST)
    assert (out, dropped) == (HONEST + HONEST, 1)


def test_counting_a_message_is_linear_whatever_its_quotes():
    """Strings are stripped in one pass: an unterminated string, or quotes and escapes alone, never make the
    relay search again from every later quote."""
    for payload in (b'"\\"' * 2_000_000, b'"' * 6_000_000, b'"\\' * 3_000_000):
        started = time.thread_time()                    # this thread's: the session's background threads run too
        assert json_values([STRINGS.sub(b"", payload)]) <= 1
        assert time.thread_time() - started < 2.0       # about 0.4 CPU-s measured for 6 MB; quadratic: hours


def test_an_honest_print_flood_streams_through_at_memory_speed():
    """The count costs little per byte of an honest message: a print flood's 40 messages of 1 MB pass in well
    under the cell's time (a character-by-character count took 8 s and stopped the kernel's replies)."""
    flood = message({"name": "stdout", "text": ("y" * 1023 + "\n") * 1024})
    started = time.thread_time()                        # this thread's: the session's background threads run too
    out, dropped = relay(*[flood] * 40, read=2**20)
    assert (len(out), dropped) == (40 * len(flood), 0)
    assert time.thread_time() - started < 2.0           # about 0.3 CPU-s measured
