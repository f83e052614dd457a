"""Reading what a student sent: its size from the listing first, then at most that many bytes, then a parse
whose every failure is that student's alone.

Every file the grader reads from a hand-in (the notebook, nbgrader's timestamp.txt and submission_secret.txt)
and everything the class commands read back from a graded notebook passes here. The rule: nothing a student
sends is parsed before its size is known. The size comes from `lstat` (a link or a special file is refused
without being opened), the read stops one byte past the cap (a file that grew since is refused too), and a
parse raises only `Refused`, with a message for the instructor: never the RecursionError of deeply nested
JSON, the OverflowError of a number too large for a float, or minutes of dateutil on a long digit string.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

# nbgrader submit writes `2026-12-03 10:15:42.123456 UTC` (its default Exchange.timestamp_format): about 30
# bytes, 60 with the longest time-zone name. dateutil's parser is quadratic on long digit strings (2 MB of
# digits: minutes), so the file is refused from its listing above this many bytes and never read.
TIMESTAMP_MAX_BYTES = 100
# What dateutil is given: one line of the characters a date, a time, an offset or a zone name is written with,
# and no run of digits longer than a compact date and time (20261203101542) plus microseconds.
TIMESTAMP_SHAPE = re.compile(r"[0-9A-Za-z :.,+\-/_]+")
TIMESTAMP_DIGITS = 20
# nbgrader submit writes secrets.token_hex(64): 128 characters.
SECRET_MAX_BYTES = 1024
# A JSON file the grader reads that a student's data could have shaped. A few MB of `[],` decode into hundreds
# of MB of Python objects, so the cap is on bytes, and tight.
JSON_MAX_BYTES = 2**20


# A notebook's JSON has a few containers (objects and arrays) per cell: the masters about 200, depth 5. Bytes do
# not bound what a parse holds: 4.9 MB of `{}` in one cell's metadata (1.7 M objects) took a worker to 3.75 GB
# and 50 s in nbformat before the notebook could be refused. So the containers are counted first, outside
# strings, in one pass that stops at the limit, and only a file within both bounds is parsed.
MOST_CONTAINERS = 20_000
DEEPEST = 64
JSON_TOKENS = re.compile(r'["\[\]{}]')
STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)     # after an opening quote, to its closing one


class Refused(Exception):
    """What a student sent cannot be used; str() says why, for the instructor and the student."""


def size_of(path: Path) -> int:
    """The size of a regular file from its listing (lstat: a link is never followed); Refused otherwise."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise Refused(f"{Path(path).name} cannot be listed ({type(error).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{Path(path).name} is not a regular file")
    return info.st_size


def read_capped(path: Path, cap: int) -> bytes:
    """A regular file's bytes, if it holds at most `cap`: checked from the listing before it is opened, and
    read no further than one byte past the cap (a file that grew in between is refused as well)."""
    size = size_of(path)
    if size > cap:
        raise Refused(f"{Path(path).name} is {describe(size)}, over the limit of {describe(cap)}; it was not read")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as error:
        raise Refused(f"{Path(path).name} cannot be read ({type(error).__name__})") from None
    if len(data) > cap:
        raise Refused(f"{Path(path).name} grew past the limit of {describe(cap)} while it was read")
    return data


def check_structure(data: bytes | str, most: int = MOST_CONTAINERS, deepest: int = DEEPEST) -> None:
    """Refused if the JSON text holds more than `most` objects and arrays, or nests them deeper than `deepest`:
    counted before any parse, in time linear in the text (a string is skipped in one match from its opening
    quote; one never closed ends the count, since no parse could read it)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    containers = depth = 0
    position = 0
    while (token := JSON_TOKENS.search(text, position)) is not None:
        character, position = token.group(), token.end()
        if character == '"':
            rest = STRING_REST.match(text, position)
            if rest is None:
                raise Refused("not readable JSON (a string is never closed)")
            position = rest.end()
        elif character in "[{":
            containers, depth = containers + 1, depth + 1
            if containers > most:
                raise Refused(f"its JSON holds more than {most:,} objects and arrays; a notebook holds a few per cell")
            if depth > deepest:
                raise Refused(f"its JSON nests deeper than {deepest} levels")
        else:
            depth -= 1


def parse_json(data: bytes | str, cap: int = JSON_MAX_BYTES):
    """JSON a student's data could have shaped: its size first, then its structure counted, then every way json
    fails as Refused."""
    if len(data) > cap:
        raise Refused(f"{describe(len(data))} of JSON, over the limit of {describe(cap)}")
    check_structure(data)
    try:
        return json.loads(data)
    except (ValueError, RecursionError, OverflowError, TypeError, MemoryError) as error:
        raise Refused(f"not readable JSON ({type(error).__name__})") from None


def parse_timestamp(text: str):
    """nbgrader's own reading of a submission time (nbgrader.utils.parse_utc: a naive UTC datetime), given only
    a string of a bounded length and shape."""
    from nbgrader.utils import parse_utc

    text = text.strip()
    if not text:
        return None
    if (len(text.encode()) > TIMESTAMP_MAX_BYTES or not TIMESTAMP_SHAPE.fullmatch(text) or ".." in text
            or max(map(len, re.findall(r"\d+", text)), default=0) > TIMESTAMP_DIGITS):
        raise Refused(f"{text[:40]!r} is not written as a time")
    try:
        return parse_utc(text)
    except (ValueError, OverflowError, TypeError, LookupError, AttributeError) as error:
        raise Refused(f"{text[:40]!r} is not a time ({type(error).__name__})") from None


def read_timestamp(path: Path):
    """The time in a hand-in's timestamp.txt (a naive UTC datetime), None when there is none; Refused when it
    is not a regular file, over TIMESTAMP_MAX_BYTES (never read then) or not a time."""
    if not os.path.lexists(path):
        return None
    data = read_capped(path, TIMESTAMP_MAX_BYTES)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise Refused(f"{Path(path).name} is not text") from None
    return parse_timestamp(text)


def describe(size: int) -> str:
    if size >= 2**20:
        return f"{size / 2**20:.1f} MB"
    if size >= 2**10:
        return f"{size / 2**10:.1f} KB"
    return f"{size} bytes"


def notebook_limit() -> int:
    """The most bytes a submitted notebook may have (COURSE_GRADING_NOTEBOOK_MB, grading_environment.py)."""
    from autograder.grading_environment import value

    return int(value("COURSE_GRADING_NOTEBOOK_MB") * 2**20)


def autograded_limit() -> int:
    """The most bytes an autograded notebook may have: a submitted notebook at its limit, the outputs the grader
    keeps (COURSE_GRADING_OUTPUT_NOTEBOOK_MB) and the cells the grader puts back. A larger one was written by
    no grader, and the class commands do not read it."""
    from autograder.grading_environment import value

    return int((value("COURSE_GRADING_NOTEBOOK_MB") + 2 * value("COURSE_GRADING_OUTPUT_NOTEBOOK_MB") + 1) * 2**20)


def autograded_notebook(path: Path):
    """An autograded notebook as the class commands read one back (the report, the per-check export): within
    autograded_limit(), its objects and arrays counted before nbformat parses it (what the student wrote is in
    it); a file over either bound, or one that is not a notebook, is Refused."""
    import nbformat

    data = read_capped(path, autograded_limit())
    check_structure(data)
    try:
        return nbformat.reads(data.decode("utf-8"), as_version=4)
    except (ValueError, RecursionError, OverflowError, TypeError, MemoryError) as error:
        raise Refused(f"{Path(path).name} is not a readable notebook ({type(error).__name__})") from None
