"""What of a grading kernel's own stdout and stderr reaches the grader's log (sandbox/drainer.py: PassOn): lines
prefixed and escaped, and at most STDIO_BYTES of log in all, prefixes and escapes counted, whatever the kernel
writes (the second review of issue 41: 16 KB of empty lines and NUL bytes took 368 KB of log)."""

import pytest

from autograder.sandbox import drainer
from autograder.sandbox.drainer import STDIO_BYTES, PassOn

pytestmark = pytest.mark.quick


@pytest.fixture
def log(monkeypatch) -> list[bytes]:
    written: list[bytes] = []
    monkeypatch.setattr(drainer, "tell", written.append)
    return written


def passed_on(chunks: list[bytes]) -> PassOn:
    output = PassOn("kernel-1")
    for chunk in chunks:
        output.take(chunk)
    output.end()
    return output


def test_ordinary_output_reaches_the_log_prefixed_and_escaped(log):
    passed_on([b"hello\nwor", b"ld \x1b[31mred\x07\n", b"no newline at the end"])
    assert log == [b"[grading kernel kernel-1] hello\n", b"[grading kernel kernel-1] world \\x1b[31mred\\x07\n",
                   b"[grading kernel kernel-1] no newline at the end\n"]


@pytest.mark.parametrize("chunks", [
    [b"\n" * 16384, b"\x00" * 4096 + b"\n"],           # an empty line costs 1 byte and is a prefix in the log
    [b"\x01" * 2**16] * 4,                             # one long line of control characters: 4 bytes each
    [b"z" * 2**16] * 64,                               # 4 MB
    [b"ab\n"] * 20_000,
])
def test_the_log_gets_at_most_the_budget_and_one_line_saying_what_was_dropped(log, chunks):
    output = passed_on(chunks)
    *kept, last = log
    assert sum(map(len, kept)) <= STDIO_BYTES
    assert all(line.startswith(b"[grading kernel kernel-1] ") and line.endswith(b"\n") for line in log)
    assert b"more bytes of its stdout and stderr dropped" in last and output.dropped > 0
    assert len(last) < 200
