"""`nbgrader collect` that takes from nbgrader's exchange only what each student really handed in.

On a JupyterHub the exchange's `inbound` folder is writable by every student (mode 733: they may create entries,
not list them), and stock nbgrader's collect trusts what it finds there:

- the student id is the first part of the entry's name, and an owner who is not that student only raises a
  warning ("cheating attempt?", `check_owner`): bob could make `ada+01-layernorm+<a later time>+x/`, which collect
  took as ada's newest submission;
- the copy follows symbolic links (`shutil.copytree`), and collect runs as the grader account, which can read the
  course: a link to the master notebook, handed in as one's own, was copied in as the submission;
- a name whose time does not parse, or a folder over the size limit, stopped the collect for the whole class (an
  exception), and the time is parsed by dateutil, whose cost grows with the square of a long digit string.

- the time of a submission, which decides lateness, was the one in the entry's name and its timestamp.txt, both
  written by the student: a hand-made entry dated before the due date scored as on time;
- an entry without nbgrader's submission_secret.txt stopped release_feedback for the class.

This collector keeps nbgrader's choice of which submission is collected (the newest, or the newest before the due
date) and its copying rules (CourseDirectory.ignore, include, max_file_size, max_dir_size), and differs in what it
accepts: an entry must be a folder (not a link) owned by the student its name claims, named in the form nbgrader's
submit writes, with nbgrader's submission secret; only regular files owned by that student are copied, never
following a link, within the size limits and a folder depth, and within the hand-in limits autograde applies (a
notebook over its limit, and every file beside the notebooks when they are too many or too large, are left out).
Its time is when it last changed, as the file system records it (the latest change time, st_ctime, of the folder and its files, which no student can set back), and the
collected timestamp.txt is written from it, never copied. Anything else is skipped with a warning naming it, and
one student's entry never stops the collect of the others.

Configured in nbgrader_config.py: `c.ExchangeFactory.collect = "autograder.plugins.exchange_collect.OwnerCheckedCollect"`.
Where every student is one account (tools/lab.py's demo on one login), nbgrader's own `ExchangeCollect.check_owner
= False` turns the owner checks off; links are never followed and the limits always hold.
"""

from __future__ import annotations

import datetime
import glob
import os
import re
import shutil
import stat

from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import ignore_patterns, parse_utc

try:
    import pwd
except ImportError:                      # Windows: no owners to check, and no hub
    pwd = None

# The time nbgrader's submit writes into an entry's name (CourseDirectory.timestamp_format's default, in UTC or
# the hub's zone): anything else is not a submission this exchange made.
SUBMITTED_AT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})? ?[A-Za-z]{0,5}[+-]?\d{0,4}")
# A submission is the release's few notebooks and files; thousands of entries are not an answer to it, nor
# folders deeper than the release's.
MOST_FILES = 1000
DEEPEST = 16
SECRET = re.compile(rb"[0-9a-f]{128}")        # nbgrader's submit: secrets.token_hex(64)
Listed = tuple[str, os.stat_result]             # a file of an entry, and what lstat said of it


class NotASubmission(Exception):
    """An entry this collector does not take, with the reason."""


def entry_files(src: str) -> list[tuple[str, os.stat_result]]:
    """Every folder and file under an entry, from lstat only, never following a link, with an explicit stack
    (os.walk recurses, and a student can nest folders past Python's recursion limit)."""
    found, stack = [], [(src, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth > DEEPEST:
            raise NotASubmission(f"folders nested deeper than {DEEPEST}")
        with os.scandir(folder) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                found.append((entry.path, info))
                if len(found) > MOST_FILES:
                    raise NotASubmission(f"more than {MOST_FILES} files and folders")
                if stat.S_ISDIR(info.st_mode):
                    stack.append((entry.path, depth + 1))
    return found


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's collect, taking only folders a student owns and only the files they own, never through a link."""

    def _record(self, path: str) -> dict | None:
        """nbgrader's record of an inbound entry, or None (with a warning) where it is not a real submission."""
        name = os.path.basename(path)
        parts = name.rsplit("+", 3)
        if len(parts) not in (3, 4) or not SUBMITTED_AT.fullmatch(parts[2]):
            self.log.warning("Not collected: %r is not named as nbgrader's submit names a submission", name[:200])
            return None
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            self.log.warning("Not collected: %r is not a folder (a link or a file)", name[:200])
            return None
        if self.check_owner and pwd is not None and owner_name(info.st_uid) != parts[0]:
            self.log.warning("Not collected: %r claims to be %s's submission but belongs to %s", name[:200],
                             parts[0], owner_name(info.st_uid))
            return None
        try:
            parse_utc(parts[2])                     # the form nbgrader writes, and a date that exists
            files = entry_files(path)
            secret = dict(files).get(os.path.join(path, "submission_secret.txt"))
            if secret is None or not stat.S_ISREG(secret.st_mode) or secret.st_size != 128:
                raise NotASubmission("no submission_secret.txt as nbgrader's submit writes it")
            fd = os.open(os.path.join(path, "submission_secret.txt"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not SECRET.fullmatch(os.read(fd, 129)):
                    raise NotASubmission("no submission_secret.txt as nbgrader's submit writes it")
            finally:
                os.close(fd)
        except (NotASubmission, ValueError, OverflowError, OSError) as error:
            self.log.warning("Not collected: %r (%s)", name[:200], error)
            return None
        # When it last changed: no student can set a change time back (utime sets the others).
        changed = max([info.st_ctime, *(seen.st_ctime for _, seen in files)])
        return {"username": parts[0], "filename": name, "timestamp": utc(changed), "changed": changed,
                "uid": info.st_uid}

    def init_src(self):
        # nbgrader's own init_src, reading the entries through _record (which may refuse one) instead of
        # _path_to_record (which stops the collect on the first name it cannot read).
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        student_id = self.coursedir.student_id or "*"             # the instructor's --student, a glob as in nbgrader
        pattern = os.path.join(self.inbound_path, f"{student_id}+{self.coursedir.assignment_id}+*")
        records = [record for record in map(self._record, glob.glob(pattern)) if record]
        self.duedate = self._duedate()
        self.src_records = []
        for submissions in groupby(records, lambda record: record["username"]).values():
            newest_first = self._sort_by_timestamp(submissions)
            on_time = [record for record in newest_first if self.duedate and record["timestamp"] <= self.duedate]
            self.src_records.append(on_time[0] if self.before_duedate and on_time else newest_first[0])

    def _duedate(self):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                return gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def copy_files(self):
        self._records = {record["filename"]: record for record in self.src_records}
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        """Copy the regular files the submission's owner owns, never following a link, within the size limits, and
        write its timestamp.txt; a submission over the limits, or one that changes under the copy in a way that
        cannot be copied, is not collected (a warning), and the others are."""
        record = self._records[os.path.basename(src)]
        try:
            chosen = self.files_to_copy(src, record["uid"])
            os.makedirs(dest, exist_ok=True)
            # The time written is when what was copied last changed, read from each file as it was copied and
            # from the folder after: a file changed after the entry was first looked at (the due date passed in
            # between) is late by its own time.
            changed = record["changed"]
            for path, info in chosen:
                target = os.path.join(dest, os.path.relpath(path, src))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                try:
                    changed = max(changed, copy_without_links(path, target, info))
                except OSError as error:               # made a link, or removed, since it was checked: not copied
                    self.log.warning("Not collected from %s: %r (%s)", os.path.basename(src)[:200],
                                     os.path.relpath(path, src)[:200], error.strerror)
            changed = max(changed, os.lstat(src).st_ctime)
            with open(os.path.join(dest, "timestamp.txt"), "w") as handle:
                handle.write(utc(changed).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
        except (NotASubmission, OSError, ValueError) as error:
            self.log.warning("Not collected: %s (%s)", os.path.basename(src)[:200], error)
            shutil.rmtree(dest, ignore_errors=True)

    def files_to_copy(self, src: str, owner: int) -> list[Listed]:
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        budget, chosen = 1000 * self.coursedir.max_dir_size, []
        files = entry_files(src)
        left_out = {path for path, info in files
                    if os.path.basename(path) in ignore(os.path.dirname(path), [os.path.basename(path)])}
        for path, info in files:
            relative = os.path.relpath(path, src)
            if any(path == skipped or path.startswith(skipped + os.sep) for skipped in left_out):
                continue
            if relative == "timestamp.txt" or relative.startswith("timestamp.txt" + os.sep):
                continue                                     # the time is the file system's, written by do_copy
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode) or (self.check_owner and info.st_uid != owner):
                self.log.warning("Not collected from %s: %r (a link, or a file another account owns)",
                                 os.path.basename(src)[:200], relative[:200])
                continue
            budget -= info.st_size
            if budget < 0:
                raise NotASubmission("over the size limit (CourseDirectory.max_dir_size)")
            chosen.append((path, info))
        return self.within_handin_limits(src, chosen)

    def within_handin_limits(self, src: str, chosen: list[Listed]) -> list[Listed]:
        """What of `chosen` the grader may take, by the hand-in limits autograde's intake applies
        (autograder/plugins/handins.py), applied here so that `submitted/` never holds more: a notebook over
        COURSE_GRADING_NOTEBOOK_MB is left out (intake grades the release in its place, flagged), and when the files
        beside the notebooks are more than COURSE_GRADING_HANDIN_FILES or COURSE_GRADING_HANDIN_MB, none of them
        is taken. Each is a warning naming the student; the student's Submit said so already (tools/lab_student.py)."""
        from autograder.bounded import notebook_limit
        from autograder.grading_environment import value
        from autograder.plugins.handins import NBGRADER_FILES

        name = os.path.basename(src)[:200]
        most_notebook = notebook_limit()
        most_files, most_bytes = int(value("COURSE_GRADING_HANDIN_FILES")), value("COURSE_GRADING_HANDIN_MB") * 2**20
        kept, beside = [], []
        for path, info in chosen:
            relative = os.path.relpath(path, src)
            if relative.endswith(".ipynb") and os.sep not in relative:
                if info.st_size > most_notebook:
                    self.log.warning("Not collected from %s: %r (%.1f MB, over the notebook limit of %g MB)", name,
                                     relative[:200], info.st_size / 2**20, most_notebook / 2**20)
                    continue
                kept.append((path, info))
            elif relative in NBGRADER_FILES:
                kept.append((path, info))
            else:
                beside.append((path, info))
        total = sum(info.st_size for _, info in beside)
        if len(beside) > most_files or total > most_bytes:
            self.log.warning("Not collected from %s: the %d files of %.1f MB beside the notebooks (over the hand-in "
                             "limit of %d files and %g MB; the notebooks were collected)", name, len(beside),
                             total / 2**20, most_files, most_bytes / 2**20)
            return kept
        return kept + beside


def utc(seconds: float) -> datetime.datetime:
    """A file system time as nbgrader keeps times: naive, in UTC."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(tzinfo=None)


def copy_without_links(path: str, target: str, seen: os.stat_result) -> float:
    """Copy one file opened without following a link, and only if it is still the file that was checked; returns
    its change time as it was once read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino) or not stat.S_ISREG(now.st_mode):
            # Another file than the one checked (a folder on its path swapped for a link since): not this one.
            raise OSError(0, "changed since it was checked")
        with open(target, "wb") as out:
            remaining = seen.st_size
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 2**20))
                if not chunk:
                    break
                out.write(chunk)
                remaining -= len(chunk)
        return os.fstat(fd).st_ctime
    finally:
        os.close(fd)
