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

This collector keeps nbgrader's choice of which submission is collected (the newest, or the newest before the due
date) and its copying rules (CourseDirectory.ignore, include, max_file_size, max_dir_size), and differs in what it
accepts: an entry must be a folder (not a link) owned by the student its name claims, with a time in the form
nbgrader's submit writes; only regular files owned by that student are copied, never following a link, within
the size limits. Anything else is skipped with a warning naming it, and the rest of the class is collected.

Configured in nbgrader_config.py: `c.ExchangeFactory.collect = "autograder.exchange_collect.OwnerCheckedCollect"`.
Where every student is one account (tools/lab.py's demo on one login), nbgrader's own `ExchangeCollect.check_owner
= False` turns the owner checks off; links are never followed and the limits always hold.
"""

from __future__ import annotations

import glob
import os
import re
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
# A submission is the release's few notebooks and files; thousands of entries are not an answer to it.
MOST_FILES = 1000


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
        return {"username": parts[0], "filename": name, "timestamp": parse_utc(parts[2]), "uid": info.st_uid}

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
        owners = {record["filename"]: record["uid"] for record in self.src_records}
        self._owners = owners
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        """Copy the regular files the submission's owner owns, never following a link, within the size limits;
        a submission over them is not collected (a warning), and the others are."""
        owner = self._owners.get(os.path.basename(src))
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        budget, files = 1000 * self.coursedir.max_dir_size, 0
        chosen = []
        for root, dirs, names in os.walk(src, followlinks=False):
            skipped = set(ignore(root, dirs + names))
            dirs[:] = [d for d in dirs if d not in skipped and not os.path.islink(os.path.join(root, d))]
            for name in names:
                if name in skipped:
                    continue
                path = os.path.join(root, name)
                try:
                    info = os.lstat(path)
                except OSError:                     # gone since the listing: the student is still changing it
                    continue
                if not stat.S_ISREG(info.st_mode) or (self.check_owner and info.st_uid != owner):
                    self.log.warning("Not collected from %s: %r (a link, or a file another account owns)",
                                     os.path.basename(src)[:200], os.path.relpath(path, src)[:200])
                    continue
                budget -= info.st_size
                files += 1
                if budget < 0 or files > MOST_FILES:
                    self.log.warning("Not collected: %s is over the size limit (CourseDirectory.max_dir_size, "
                                     "%d files at most)", os.path.basename(src)[:200], MOST_FILES)
                    return
                chosen.append((path, info))
        for path, info in chosen:
            target = os.path.join(dest, os.path.relpath(path, src))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                copy_without_links(path, target, info)
            except OSError as error:               # made a link, or removed, since it was checked: not copied
                self.log.warning("Not collected from %s: %r (%s)", os.path.basename(src)[:200],
                                 os.path.relpath(path, src)[:200], error.strerror)


def copy_without_links(path: str, target: str, seen: os.stat_result) -> None:
    """Copy one file opened without following a link, and only if it is still the file that was checked."""
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
    finally:
        os.close(fd)
