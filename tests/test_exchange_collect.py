"""autograder/plugins/exchange_collect.py: `nbgrader collect` takes from the exchange only what each student handed in.

An exchange is laid out as nbgrader's submit leaves it on a hub (each entry and its files owned by the student who
made it), with the machine's own accounts `nobody`, `daemon` and `bin` as students, and what a student can do to
`inbound` besides submitting: an entry in a classmate's name, a link to a file only the grader account may read, a
file another account owns, a name whose time does not parse, an entry over the size limit. The collector, run as
nbgrader runs it (its exchange factory, the course's settings), takes each student's own newest submission and
nothing else, and one student's entry never stops the collect of the others. Stock nbgrader's collect is run on
the same exchange for comparison: it takes the forged entry as daemon's.
"""

from __future__ import annotations

import datetime
import os
import pwd
import secrets
import shutil
from pathlib import Path

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange.default.collect import ExchangeCollect

from autograder.plugins.exchange_collect import OwnerCheckedCollect
from tools.course import COURSE, venv_on_path

pytestmark = pytest.mark.quick

COURSE_ID, A = COURSE.course_id, "01-layernorm"      # the course's own id (autograder/course_directory.py)


def when(minutes: int) -> str:
    moment = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc) + datetime.timedelta(minutes=minutes)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f %Z")


def entry(inbound: Path, name: str, owner: str, files: dict[str, bytes], minutes: int) -> Path:
    """An entry as nbgrader's submit makes it: the files, its timestamp.txt and its secret, owned by `owner`."""
    folder = inbound / f"{name}+{A}+{when(minutes)}+r{minutes}"
    folder.mkdir()
    account = pwd.getpwnam(owner)
    files = {**files, "timestamp.txt": when(minutes).encode(), "submission_secret.txt": secrets.token_hex(64).encode()}
    for filename, content in files.items():
        (folder / filename).write_bytes(content)
        os.chown(folder / filename, account.pw_uid, account.pw_gid)
    os.chown(folder, account.pw_uid, account.pw_gid)
    return folder


@pytest.fixture
def exchange(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("laying out an exchange owned by several accounts needs root")
    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    inbound.mkdir(parents=True)
    secret = tmp_path / "course" / "solutions" / "layernorm.ipynb"          # only the grader may read it
    secret.parent.mkdir(parents=True)
    secret.write_text("THE MASTER")
    secret.chmod(0o600)
    entry(inbound, "nobody", "nobody", {"layernorm.ipynb": b"nobody's first"}, 0)
    own = entry(inbound, "nobody", "nobody", {"layernorm.ipynb": b"nobody's answer", "notes.txt": b"mine"}, 10)
    (own / "master.ipynb").symlink_to(secret)                       # a link to what only the grader can read
    (own / "planted.txt").write_text("planted by root")             # a file another account owns
    entry(inbound, "daemon", "daemon", {"layernorm.ipynb": b"daemon's answer"}, 5)
    entry(inbound, "daemon", "nobody", {"layernorm.ipynb": b"nobody pretending to be daemon"}, 20)   # forged
    (inbound / f"nobody+{A}+99999999999999999999999+x").mkdir()       # a time that does not parse
    (inbound / f"bin+{A}+{when(30)}+link").symlink_to(own)            # an entry that is a link
    entry(inbound, "bin", "bin", {"layernorm.ipynb": b"x" * 40_000}, 3)                              # too large
    return tmp_path


def collect(root: Path, collector=OwnerCheckedCollect) -> dict[str, dict[str, bytes]]:
    coursedir = CourseDirectory(root=str(root / "course"), course_id=COURSE_ID, assignment_id=A,
                                db_url=f"sqlite:///{root / 'gradebook.db'}", max_dir_size=20)     # 20 KB
    with venv_on_path():                     # nbgrader's Gradebook calls alembic from PATH to make the database
        collector(coursedir=coursedir, authenticator=Authenticator(), root=str(root / "exchange")).start()
    submitted = root / "course" / "submitted"
    return {student.name: {path.name: path.read_bytes() for path in (student / A).iterdir()
                           if path.name not in ("timestamp.txt", "submission_secret.txt")}
            for student in submitted.iterdir() if (student / A).exists()} if submitted.exists() else {}


def test_each_student_gets_their_own_newest_submission_and_nothing_planted_or_linked(exchange):
    collected = collect(exchange)
    assert collected["nobody"] == {"layernorm.ipynb": b"nobody's answer", "notes.txt": b"mine"}
    assert collected["daemon"] == {"layernorm.ipynb": b"daemon's answer"}       # not the forgery, though newer
    assert "bin" not in collected                                               # over the limit, alone


def test_stock_collect_takes_the_forgery_as_the_classmates_work_and_follows_links(exchange):
    """What the course's collector is for (nbgrader 0.9.6): the stock one, on the same exchange, minus the two
    entries that stop it for the whole class."""
    inbound = exchange / "exchange" / COURSE_ID / "inbound"
    (inbound / f"nobody+{A}+99999999999999999999999+x").rmdir()
    for big in inbound.glob(f"bin+{A}+*"):
        big.unlink() if big.is_symlink() else [*map(Path.unlink, big.iterdir()), big.rmdir()]
    collected = collect(exchange, ExchangeCollect)
    assert collected["daemon"] == {"layernorm.ipynb": b"nobody pretending to be daemon"}
    assert collected["nobody"]["master.ipynb"] == b"THE MASTER"


def test_on_one_account_owners_are_not_checked_but_links_are_still_not_followed(exchange):
    """tools/lab.py's demo: every student is the one account, which sets nbgrader's check_owner off."""
    class OneAccount(OwnerCheckedCollect):
        check_owner = False

    collected = collect(exchange, OneAccount)
    assert collected["daemon"] == {"layernorm.ipynb": b"nobody pretending to be daemon"}      # the newest
    assert collected["nobody"] == {"layernorm.ipynb": b"nobody's answer", "notes.txt": b"mine",
                                   "planted.txt": b"planted by root"}


def test_a_file_swapped_for_a_link_after_the_check_is_not_copied(tmp_path):
    """The race the copy closes: a folder on the path made a link to what only the grader reads, after the walk."""
    from autograder.plugins.exchange_collect import copy_without_links

    (tmp_path / "hand-in" / "sub").mkdir(parents=True)
    checked = tmp_path / "hand-in" / "sub" / "answer.ipynb"
    checked.write_text("mine")
    seen = os.lstat(checked)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "answer.ipynb").write_text("THE MASTER")
    (tmp_path / "hand-in" / "sub").rename(tmp_path / "moved")
    (tmp_path / "hand-in" / "sub").symlink_to(tmp_path / "secret")
    with pytest.raises(OSError, match="changed since it was checked"):
        copy_without_links(str(checked), str(tmp_path / "copy.ipynb"), seen)
    assert not (tmp_path / "copy.ipynb").exists()


def test_the_time_is_when_the_entry_last_changed_not_what_the_student_wrote(exchange):
    """A hand-made entry dated before the due date, with a timestamp.txt to match, made today: collected with
    today's time (a review graded such an entry on time with stock nbgrader's trust in both)."""
    inbound = exchange / "exchange" / COURSE_ID / "inbound"
    for old in inbound.glob(f"daemon+{A}+*"):
        shutil.rmtree(old) if not old.is_symlink() else old.unlink()
    entry(inbound, "daemon", "daemon", {"layernorm.ipynb": b"made today"}, -10_000_000)        # in 2007
    collect(exchange)
    stamp = (exchange / "course" / "submitted" / "daemon" / A / "timestamp.txt").read_text()
    assert stamp.startswith(str(datetime.date.today().year)), stamp


def test_entries_without_a_secret_with_an_impossible_date_or_nested_too_deep_are_skipped_alone(exchange):
    inbound = exchange / "exchange" / COURSE_ID / "inbound"
    no_secret = entry(inbound, "daemon", "daemon", {"layernorm.ipynb": b"no secret"}, 40)
    (no_secret / "submission_secret.txt").unlink()
    impossible = entry(inbound, "bin", "bin", {"layernorm.ipynb": b"month 13"}, 50)
    impossible.rename(inbound / f"bin+{A}+2024-13-45 00:00:00.000000 UTC+x")
    deep = entry(inbound, "nobody", "nobody", {"layernorm.ipynb": b"deep"}, 60)
    folder = deep
    for _ in range(40):
        folder = folder / "d"
        folder.mkdir()
    collected = collect(exchange)
    assert collected["daemon"] == {"layernorm.ipynb": b"daemon's answer"}          # its older, real submission
    assert collected["nobody"]["layernorm.ipynb"] == b"nobody's answer"            # not the nested one
    assert "bin" not in collected


def test_a_folder_named_timestamp_txt_is_not_copied_and_stops_nothing(exchange):
    """The collected timestamp.txt is the collector's: a folder of that name in an entry once stopped the collect,
    and every later one, for the whole class."""
    inbound = exchange / "exchange" / COURSE_ID / "inbound"
    made = entry(inbound, "bin", "bin", {"layernorm.ipynb": b"bin's answer"}, 70)
    (made / "timestamp.txt").unlink()
    (made / "timestamp.txt").mkdir()
    (made / "timestamp.txt" / "x").write_text("x")
    collected = collect(exchange)
    assert collected["bin"] == {"layernorm.ipynb": b"bin's answer"} and "nobody" in collected
    assert (exchange / "course" / "submitted" / "bin" / A / "timestamp.txt").is_file()


def test_collect_keeps_to_the_hand_in_limits_autograde_applies(exchange, monkeypatch):
    """A hand-in of a notebook and 25 small files (over COURSE_GRADING_HANDIN_FILES): the notebook is collected,
    none of the files beside it, as autograde's intake would take them (issue 56: 300 files and a 60 MB file once
    reached `submitted/`); a notebook over its own limit is not collected."""
    inbound = exchange / "exchange" / COURSE_ID / "inbound"
    many = {f"data{i}.txt": b"x" for i in range(25)}
    entry(inbound, "daemon", "daemon", {"layernorm.ipynb": b"daemon's answer, then files", **many}, 40)
    entry(inbound, "bin", "bin", {"layernorm.ipynb": b"b" * 3000, "notes.txt": b"kept"}, 50)
    monkeypatch.setenv("COURSE_GRADING_NOTEBOOK_MB", str(2000 / 2**20))          # 2000 bytes a notebook
    collected = collect(exchange)
    assert collected["daemon"] == {"layernorm.ipynb": b"daemon's answer, then files"}
    assert collected["bin"] == {"notes.txt": b"kept"}                            # its notebook left out
    assert collected["nobody"] == {"layernorm.ipynb": b"nobody's answer", "notes.txt": b"mine"}   # within them
