"""`nbgrader zip_collect` for Canvas's "Download Submissions" zip: students who work in Colab or on a laptop.

    autograder/downloaded/01-layernorm/archive/submissions.zip      # Canvas's zip, as downloaded
    autograder/roster.csv                                           # the course roster (the class report's too)
    nbgrader zip_collect 01-layernorm                               # from autograder/, as every nbgrader command

Canvas names each file in its zip `<lastfirst>_[LATE_]<user id>_<attachment id>_<file name>`, and a file a
student uploaded again under a name already used gets `-N` before its extension (`layernorm-1.ipynb`). nbgrader's
own plugins are configured for it (autograder/nbgrader_config.py) and kept small:

- `CanvasExtractor` opens Canvas's zip without trusting what students put in it: only notebooks are taken, each
  within the course's notebook limit (COURSE_GRADING_NOTEBOOK_MB) counted while it is read (a zip's declared sizes
  can lie), and never a name with a folder in it; a zip a student uploaded stays unopened (nbgrader's own
  extractor opens archives inside archives, to any depth). What is not taken is named in a warning.
- `CanvasCollector` reads Canvas's name, finds the student's nbgrader id in the roster by Canvas's user id (the
  roster's `ID` column beside `student_id`: the file `python -m autograder.report --roster` reads), strips Canvas's
  `-N` from a released notebook's name and keeps only the newest copy of each; a student's only notebook for an
  assignment of one notebook is collected under the released name (Colab's `Copy of layernorm.ipynb`). A user id
  not on the roster or a name Canvas did not make is skipped with a warning, never silently.

Canvas's zip carries no submission time, so nothing here invents one: the hand-ins are graded without a late
penalty, the students Canvas marked LATE are listed in a warning, and Canvas applies its own late policy to
the scores imported from the class report's Canvas file.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from traitlets import Unicode

from autograder.bounded import notebook_limit
from autograder.plugins.handins import shown

# <lastfirst>_[LATE_]<user id>_<attachment id>_<file name>, as Canvas's ContentZipper writes it: lastfirst is the
# sortable name, lowercased, with every character but word characters removed, so an underscore can stay in it;
# Canvas removes `_<digits>_` from names so that the first `_<digits>_<digits>_` is the ids (the lazy lastfirst).
# The attachment id grows with each upload.
CANVAS_NAME = re.compile(r"(?P<lastfirst>[^/\\]*?)_(?P<late>LATE_)?(?P<user_id>\d{1,20})_(?P<attachment_id>\d{1,20})_"
                         r"(?P<filename>[^/\\]+)")
COPY_SUFFIX = re.compile(r"(?P<stem>.+?)-(?P<copy>\d{1,4})(?P<extension>\.ipynb)")
# A class's zip holds a few files per student; hundreds of thousands of members are not a class.
MOST_MEMBERS = 100_000


# Longer names than a file system takes (255 bytes) stop the extraction of the member; Canvas's own are far shorter.
LONGEST_NAME = 200


def plain_name(name: str) -> bool:
    """A file name with no folder in it, nothing hidden, nothing a path could climb with, short enough to write,
    and printable: nbgrader's zip_collect logs each extracted name as it is, and a name carrying a terminal's
    escape sequences (a window title, the clipboard) or a bidirectional override would act on the instructor's
    terminal. Canvas's own names are printable."""
    return (bool(name) and name.isprintable() and "/" not in name and "\\" not in name and not name.startswith(".")
            and len(name.encode("utf-8", "surrogateescape")) <= LONGEST_NAME)


class CanvasExtractor(ExtractorPlugin):
    """Takes the notebooks out of Canvas's zip(s), each within the course's notebook limit; nothing else."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        archives = sorted(Path(archive_path).iterdir()) if os.path.isdir(archive_path) else []
        if not archives:
            self.log.warning("No files found in directory: %s", archive_path)
        for archive in archives:
            if archive.suffix == ".zip" and archive.is_file():
                try:
                    self.take_notebooks(archive, Path(extracted_path) / archive.stem)
                except (zipfile.BadZipFile, OSError) as error:
                    self.log.warning("Not extracted: %s is not a zip that can be read (%s)", shown(archive.name), error)
            elif archive.suffix == ".ipynb" and archive.is_file() and plain_name(archive.name):
                shutil.copy(archive, Path(extracted_path) / archive.name)      # a notebook downloaded on its own
            else:
                self.log.warning("Not extracted: %s (Canvas's zip or notebooks only)", shown(archive.name))

    def take_notebooks(self, archive: Path, target: Path) -> None:
        limit = notebook_limit()
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if len(members) > MOST_MEMBERS:
                self.log.warning("Not extracted: %s has %d members, more than a class hands in (%d)", archive.name,
                                 len(members), MOST_MEMBERS)
                return
            for member in members:
                name = member.filename
                if member.is_dir():
                    continue
                if not plain_name(name) or not name.endswith(".ipynb"):
                    self.log.warning("Not extracted from %s: %s (not a notebook at the zip's top level)",
                                     archive.name, shown(name))
                    continue
                try:
                    taken = member.file_size <= limit and self.copy_bounded(bundle, member, target / name, limit)
                # A damaged member (its compressed data too: zlib's and lzma's own errors), a size that lies (the CRC
                # check fails), encrypted or in an unknown compression: that member only.
                except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError, zlib.error,
                        lzma.LZMAError) as error:
                    try:
                        (target / name).unlink(missing_ok=True)
                    except OSError:
                        pass
                    self.log.warning("Not extracted from %s: %s cannot be read (%s)", archive.name, shown(name), error)
                    continue
                if not taken:
                    self.log.warning("Not extracted from %s: %s is over the notebook limit (%d MB)", archive.name,
                                     shown(name), limit // 2**20)

    @staticmethod
    def copy_bounded(bundle: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, limit: int) -> bool:
        """Copy a member, counting what it really decompresses to; False (and nothing left) past `limit`."""
        written = 0
        with bundle.open(member) as source, open(target, "wb") as out:
            while chunk := source.read(2**20):
                written += len(chunk)
                if written > limit:
                    break
                out.write(chunk)
        if written > limit:
            target.unlink()
            return False
        return True


class CanvasCollector(FileNameCollectorPlugin):
    """Canvas's file names -> the roster's student id and the released notebook's name."""

    roster = Unicode("roster.csv", help="The course roster: a CSV file with Canvas's user id in a column `ID` and "
                     "the nbgrader student id in a column `student_id` (the file the class report's --roster "
                     "reads); relative to the folder nbgrader runs in (autograder/).").tag(config=True)

    def collect(self, submitted_file: str) -> dict | None:
        name = os.path.basename(submitted_file)
        if not name.endswith(tuple(self.valid_ext)):
            return None
        match = CANVAS_NAME.fullmatch(name)
        if not match:
            self.log.warning("Skipped: %s is not named as Canvas names a submission", shown(name))
            return None
        student = self.students().get(match["user_id"])
        if student is None:
            self.log.warning("Skipped: %s (Canvas user %s) is not on the roster %s", shown(name), match["user_id"],
                             self.roster)
            return None
        file_id = self.released_name(match["filename"])
        newest = self.newest_copies(os.path.dirname(submitted_file))
        if newest.get((match["user_id"], file_id), name) != name:
            self.log.warning("Skipped: %s, an older copy than %s", shown(name),
                             shown(newest[(match["user_id"], file_id)]))
            return None
        file_id = self.the_one_notebook(match["user_id"], file_id, newest, name)
        if match["late"]:
            self.log.warning("Canvas marked %s's hand-in LATE (%s): graded without a late penalty here; Canvas's "
                             "late policy applies when the scores are imported", student, shown(name))
        return {"student_id": student, "file_id": file_id}

    def the_one_notebook(self, user_id: str, file_id: str, newest: dict, name: str) -> str:
        """A student's only notebook, for an assignment of one notebook, under the name it was released with:
        Colab saves a copy as `Copy of layernorm.ipynb`, which nbgrader would grade as no hand-in at all."""
        released = self.released()
        theirs = [key for key in newest if key[0] == user_id]
        if file_id in released or len(released) != 1 or len(theirs) != 1:
            return file_id
        (given,) = released
        self.log.warning("Collected %s as %s, the assignment's one notebook", shown(name), given)
        return given

    def released_name(self, filename: str) -> str:
        """`layernorm-1.ipynb` -> `layernorm.ipynb` where that is what the student was given; else unchanged."""
        copy = COPY_SUFFIX.fullmatch(filename)
        if copy and f"{copy['stem']}{copy['extension']}" in self.released():
            return f"{copy['stem']}{copy['extension']}"
        return filename

    def copy_number(self, filename: str) -> int:
        copy = COPY_SUFFIX.fullmatch(filename)
        return int(copy["copy"]) if copy and self.released_name(filename) != filename else 0

    @lru_cache(maxsize=None)
    def newest_copies(self, folder: str) -> dict[tuple[str, str], str]:
        """(user id, released name) -> the file name of the newest copy in `folder`: Canvas's highest -N, then the
        highest attachment id (two uploads of one name in one submission)."""
        newest: dict[tuple[str, str], tuple[tuple[int, int], str]] = {}
        for name in os.listdir(folder):
            match = CANVAS_NAME.fullmatch(name)
            if match:
                key = (match["user_id"], self.released_name(match["filename"]))
                order = (self.copy_number(match["filename"]), int(match["attachment_id"]))
                if key not in newest or order > newest[key][0]:
                    newest[key] = (order, name)
        return {key: name for key, (_, name) in newest.items()}

    @lru_cache(maxsize=None)
    def released(self) -> frozenset[str]:
        """The names of the assignment's released notebooks."""
        coursedir = getattr(self.parent, "coursedir", None)
        if coursedir is None:
            return frozenset()
        release = Path(coursedir.format_path(coursedir.release_directory, ".", coursedir.assignment_id))
        return frozenset(path.name for path in release.glob("*.ipynb"))

    @lru_cache(maxsize=None)
    def students(self) -> dict[str, str]:
        """Canvas user id -> nbgrader student id, from the roster; a student id that could not name a folder is
        refused."""
        from autograder.report.csv_files import read_roster

        ids = {}
        for entry in read_roster(Path(self.roster)):
            canvas_id = entry.lms.get("ID", "")
            if canvas_id and entry.student:
                if not plain_name(entry.student) or "+" in entry.student:
                    raise SystemExit(f"{self.roster}: student id {entry.student!r} cannot name a submission folder")
                ids[canvas_id] = entry.student
        return ids
