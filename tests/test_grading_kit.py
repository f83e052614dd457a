"""What a grading worker gets from the client, and what comes back (autograder/classgrader/grading_kit.py).

The kit is packed from a scratch course laid out by hand (this course's nbgrader configuration files, a
master and a release of one assignment, a SQLite gradebook written with nbgrader's API), so no assignment is
generated and nothing is graded. Checked: what the kit holds and leaves out (links, owners, times, students),
that it is the same for the same course, that a worker unpacks it once per digest and never outside its
folder (tarfile's "data" filter), and that a hand-in travels as the intake rule says: the files it takes,
read with their modes, links never followed, and the names and sizes of those it leaves out. Files come back
through read_folder and write_folder, which refuse to write outside their folder.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import warnings

import pytest

from autograder.classgrader import grading_kit
from autograder.course import CATALOG_FILE, CONFIGURATION_FILES, SECRET_FILE
from autograder.course import Course, venv_on_path
from autograder.classgrader.grading_kit import KIT_GRADEBOOK, build_kit, handed_in_files, read_folder, unpack_kit, write_folder
from autograder.plugins.handins import REFUSED_TIMESTAMP

pytestmark = pytest.mark.quick

ASSIGNMENT = "a1"
NOTEBOOK = "a1.ipynb"
# Its own course id: empty_gradebook caches one gradebook per course id for the whole process, and this one is
# stamped in-process (below), so it is kept apart from the course's own.
KIT_COURSE_ID = "grading-kit-tests"


@pytest.fixture(autouse=True)
def kit_alembic_head_in_process(monkeypatch):
    """nbgrader stamps a new gradebook with its migrations' head, which it asks a subprocess running `alembic`
    for (about 2 CPU-s); the same head is read here in-process from nbgrader's own migration scripts."""
    import nbgrader.api

    head = grading_kit.alembic_head()
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", lambda: head)


@pytest.fixture
def kit_course(tmp_path) -> Course:
    """A scratch course with one assignment's master, release and definitions in the gradebook, and one hand-in."""
    root = tmp_path / "course"
    (root / "autograder").mkdir(parents=True)
    for name in CONFIGURATION_FILES:
        shutil.copy(Course().autograder / name, root / "autograder" / name)
    with open(root / "autograder" / "course_directory.py", "a") as layout:
        layout.write(f"\nc.CourseDirectory.course_id = {KIT_COURSE_ID!r}\n")
    course = Course(root)
    course.prepare()
    for step in ("source", "release"):
        folder = course.path(step, ".", ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_text(f'{{"step": "{step}"}}')
    (course.path("release", ".", ASSIGNMENT) / "data.csv").write_text("x,y\n1,2\n")
    from nbgrader.api import Gradebook

    with warnings.catch_warnings(), Gradebook(course.db_url, course.course_id) as gradebook:
        warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
        gradebook.update_or_create_assignment(ASSIGNMENT)
        gradebook.update_or_create_notebook("a1", ASSIGNMENT)
        gradebook.update_or_create_grade_cell("check", "a1", ASSIGNMENT, max_score=2, cell_type="code")
        gradebook.update_or_create_source_cell("check", "a1", ASSIGNMENT, cell_type="code", locked=True,
                                               source="assert answer == 42", checksum="0" * 64)
        gradebook.update_or_create_student("alice")
        gradebook.update_or_create_submission(ASSIGNMENT, "alice")
    return course


def kit_members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def tar_gz(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """A hand-made kit: gzipped tar of the given members (a crafted one may hold what build_kit never writes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, content in members:
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content else None)
    return buffer.getvalue()


def tar_member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, target, mode
    return info


# --- the kit ---------------------------------------------------------------------------------------------------

def test_the_kit_holds_the_configuration_the_assignment_and_its_definitions_but_no_student(kit_course, tmp_path):
    from nbgrader.api import Gradebook, MissingEntry

    (kit_course.path("source", ".", ASSIGNMENT) / "linked.ipynb").symlink_to(tmp_path / "outside.ipynb")
    (tmp_path / "outside.ipynb").write_text("never packed")
    (kit_course.path("source", ".", ASSIGNMENT) / CATALOG_FILE).write_text("correct: []\n")   # the instructors'
    checkpoints = kit_course.path("release", ".", ASSIGNMENT) / ".ipynb_checkpoints"
    checkpoints.mkdir()                       # a previewed release: the worker surveys a hand-in against all of it
    (checkpoints / "a1-checkpoint.ipynb").write_text("{}")
    kit = build_kit(kit_course, [ASSIGNMENT])
    members = kit_members(kit.data)
    # The course's grading secret too: the workers draw the same hidden inputs as nbgrader autograde.
    assert sorted(members) == sorted([f"autograder/{KIT_GRADEBOOK}", *(f"autograder/{n}" for n in CONFIGURATION_FILES),
                                      f"autograder/{SECRET_FILE}", "solutions/a1", "solutions/a1/a1.ipynb",
                                      "exercises/a1", "exercises/a1/.ipynb_checkpoints",
                                      "exercises/a1/.ipynb_checkpoints/a1-checkpoint.ipynb", "exercises/a1/a1.ipynb",
                                      "exercises/a1/data.csv"])
    for name, member in members.items():
        if name != f"autograder/{KIT_GRADEBOOK}":           # the files the course has: no owner, no time
            assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (0, 0, 0, "", ""), name
    root = unpack_kit(kit.data, kit.digest, tmp_path / "worker")
    with Gradebook(f"sqlite:///{root / 'autograder' / KIT_GRADEBOOK}", KIT_COURSE_ID) as gradebook:
        (cell,) = gradebook.find_notebook("a1", ASSIGNMENT).source_cells
        assert (cell.name, cell.locked, cell.source) == ("check", True, "assert answer == 42")
        assert gradebook.find_grade_cell("check", "a1", ASSIGNMENT).max_score == 2
        assert gradebook.students == []
        with pytest.raises(MissingEntry):
            gradebook.find_submission(ASSIGNMENT, "alice")


def test_the_kits_empty_gradebook_is_the_one_nbgrader_makes(tmp_path, monkeypatch):
    """The kit's gradebook is stamped from nbgrader's migration scripts in this process, not by the `alembic`
    command nbgrader runs: the same head, the same tables and columns as a gradebook nbgrader makes itself."""
    import sqlite3

    from nbgrader.api import Gradebook

    from autograder.classgrader.grading_kit import empty_gradebook

    monkeypatch.undo()                                   # nbgrader's own stamp, by its subprocess, for the reference
    with venv_on_path(), Gradebook(f"sqlite:///{tmp_path / 'nbgraders.db'}", "stamped-course"):
        pass
    (tmp_path / "ours.db").write_bytes(empty_gradebook("stamped-course"))

    def contents(path):
        with contextlib.closing(sqlite3.connect(path)) as db:
            tables = sorted(db.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
            return tables, db.execute("SELECT * FROM alembic_version").fetchall(), db.execute(
                "SELECT * FROM course").fetchall()

    ours, theirs = contents(tmp_path / "ours.db"), contents(tmp_path / "nbgraders.db")
    assert ours == theirs and len(ours[1]) == 1 and ours[2] == [("stamped-course",)]


def test_an_assignment_not_packed_is_left_out(kit_course):
    from nbgrader.api import Gradebook

    with Gradebook(kit_course.db_url, kit_course.course_id) as gradebook:
        gradebook.update_or_create_assignment("a2")
    for step in ("source", "release"):
        (kit_course.path(step, ".", "a2")).mkdir()
        (kit_course.path(step, ".", "a2") / "a2.ipynb").write_text("{}")
    assert not [name for name in kit_members(build_kit(kit_course, [ASSIGNMENT]).data) if "a2" in name]


def test_the_same_course_packs_to_the_same_digest(kit_course):
    """The digest names the unpacked kit on a worker: the same course must reuse it. (The bytes may differ in
    the kit's gradebook alone: nbgrader draws each copied row's id at random.)"""
    first = build_kit(kit_course, [ASSIGNMENT])
    os.utime(kit_course.path("source", ".", ASSIGNMENT) / NOTEBOOK, (1, 1))    # times of files never count
    second = build_kit(kit_course, [ASSIGNMENT])
    assert second.digest == first.digest
    assert kit_files(second.data, but="kit-gradebook.db") == kit_files(first.data, but="kit-gradebook.db")


def kit_files(data: bytes, but: str) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {member.name: tar.extractfile(member).read() for member in tar
                if member.isfile() and not member.name.endswith(but)}


def test_a_changed_notebook_or_cell_definition_changes_the_digest(kit_course):
    from nbgrader.api import Gradebook

    before = build_kit(kit_course, [ASSIGNMENT]).digest
    notebook = kit_course.path("release", ".", ASSIGNMENT) / NOTEBOOK
    original = notebook.read_bytes()
    notebook.write_bytes(original + b" ")
    assert build_kit(kit_course, [ASSIGNMENT]).digest != before
    notebook.write_bytes(original)
    assert build_kit(kit_course, [ASSIGNMENT]).digest == before
    with Gradebook(kit_course.db_url, kit_course.course_id) as gradebook:
        cell = gradebook.find_assignment(ASSIGNMENT).notebooks[0].grade_cells[0]
        cell.max_score += 1
        gradebook.db.commit()
    assert build_kit(kit_course, [ASSIGNMENT]).digest != before


# --- unpacking on a worker -----------------------------------------------------------------------------------

def test_a_kit_is_unpacked_once_per_digest_and_then_reused(tmp_path):
    kit = tar_gz((tar_member("autograder/nbgrader_config.py"), b"c = 1\n"))
    into = tmp_path / "worker"
    root = unpack_kit(kit, "digest1", into)
    assert root == into / "digest1" / "course"
    assert (root / "autograder" / "nbgrader_config.py").read_bytes() == b"c = 1\n"
    (root / "autograder" / "written by a task").write_text("kept")
    # The digest names the folder: a second call does not unpack again, whatever data it is given.
    other = tar_gz((tar_member("autograder/nbgrader_config.py"), b"c = 2\n"))
    assert unpack_kit(other, "digest1", into) == root
    assert (root / "autograder" / "nbgrader_config.py").read_bytes() == b"c = 1\n"
    assert (root / "autograder" / "written by a task").read_text() == "kept"
    # Another digest, another folder; no staging folder is left behind.
    assert (unpack_kit(other, "digest2", into) / "autograder" / "nbgrader_config.py").read_bytes() == b"c = 2\n"
    assert sorted(path.name for path in into.iterdir()) == ["digest1", "digest2"]


def test_a_folder_left_by_an_interrupted_unpack_is_not_taken_for_the_kit(tmp_path):
    """Until the unpacked folder is moved into place, the kit is not there: an interrupted unpack leaves at
    most the digest's empty folder, and the next call unpacks."""
    into = tmp_path / "worker"
    (into / "digest1").mkdir(parents=True)
    kit = tar_gz((tar_member("autograder/course_directory.py"), b"layout"))
    root = unpack_kit(kit, "digest1", into)
    assert (root / "autograder" / "course_directory.py").read_bytes() == b"layout"


@pytest.mark.parametrize("name, member, error", [
    ("a path up", tar_member("../escaped.txt"), tarfile.OutsideDestinationError),
    ("a path up inside", tar_member("autograder/../../escaped.txt"), tarfile.OutsideDestinationError),
    ("an absolute link", tar_member("autograder/passwd", tarfile.SYMTYPE, "/etc/passwd"), tarfile.AbsoluteLinkError),
    ("a link up", tar_member("autograder/up", tarfile.SYMTYPE, "../../../escaped.txt"),
     tarfile.LinkOutsideDestinationError),
    ("a hard link up", tar_member("autograder/hard", tarfile.LNKTYPE, "../escaped.txt"),
     tarfile.LinkOutsideDestinationError),
    ("a device", tar_member("autograder/null", tarfile.CHRTYPE), tarfile.SpecialFileError),
])
def test_a_kit_member_that_would_land_outside_its_folder_is_refused(tmp_path, name, member, error):
    into = tmp_path / "deep" / "worker"
    kit = tar_gz((tar_member("autograder/nbgrader_config.py"), b"c = 1\n"), (member, b""))
    with pytest.raises(error):
        unpack_kit(kit, "digest", into)
    assert not (into / "digest" / "course").exists(), "a refused kit is never taken for unpacked"
    assert [path for path in tmp_path.rglob("*") if path != into and into not in path.parents] == [tmp_path / "deep"]
    # Nor anywhere inside the worker's folder: the member was refused, not written somewhere else.
    assert not any(path.name in ("escaped.txt", "passwd", "up", "hard", "null") for path in tmp_path.rglob("*"))


@pytest.mark.parametrize("member", [tar_member("../escaped.txt"), tar_member("/autograder/absolute.py"),
                                    tar_member("autograder/up", tarfile.SYMTYPE, "../../../escaped.txt"),
                                    tar_member("autograder/hard", tarfile.LNKTYPE, "../escaped.txt"),
                                    tar_member("autograder/null", tarfile.CHRTYPE)])
def test_without_extraction_filters_the_same_members_are_refused(tmp_path, monkeypatch, member):
    """Python before 3.11.4 (Debian 12's own Python, on a hub) has no tarfile filters: the kit is checked by hand."""
    monkeypatch.delattr(tarfile, "data_filter")
    into = tmp_path / "worker"
    kit = tar_gz((tar_member("autograder/nbgrader_config.py"), b"c = 1\n"), (member, b""))
    with pytest.raises(ValueError, match="a grading kit never holds"):
        unpack_kit(kit, "digest", into)
    assert not (into / "digest" / "course").exists()
    assert not any(path.name in ("escaped.txt", "absolute.py", "up", "hard", "null") for path in tmp_path.rglob("*"))
    ordinary = tar_gz((tar_member("autograder/nbgrader_config.py"), b"c = 1\n"))
    assert (unpack_kit(ordinary, "other", into) / "autograder" / "nbgrader_config.py").read_bytes() == b"c = 1\n"


def test_an_absolute_member_is_unpacked_inside_the_folder_and_modes_lose_their_special_bits(tmp_path):
    kit = tar_gz((tar_member("/autograder/absolute.py"), b"inside"),
                 (tar_member("autograder/setuid", mode=0o4777), b"#!/bin/sh\n"),
                 (tar_member("autograder/inside-link", tarfile.SYMTYPE, "absolute.py"), b""))
    root = unpack_kit(kit, "digest", tmp_path / "worker")
    assert (root / "autograder" / "absolute.py").read_bytes() == b"inside"
    assert (root / "autograder" / "setuid").stat().st_mode & 0o7777 == 0o755     # no setuid, no write for others
    assert os.readlink(root / "autograder" / "inside-link") == "absolute.py"       # a link within the kit stays


# --- a hand-in, and the files that come back ---------------------------------------------------------------

def test_a_hand_in_travels_as_the_intake_rule_says(kit_course, tmp_path):
    folder = kit_course.path("submitted", "alice", ASSIGNMENT)
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text('{"cells": []}')
    (folder / NOTEBOOK).chmod(0o600)
    (folder / "timestamp.txt").write_text("2024-03-01 12:00:00")
    (folder / "timestamp.txt").chmod(0o644)
    (folder / "data.csv").write_text("x,y\n3,4\n")                  # the release ships it: taken
    (folder / "data.csv").chmod(0o640)
    (folder / "notes.txt").write_text("my own notes")               # it does not: left out, with its size
    (tmp_path / "secret").write_text("the instructor's")
    (folder / "linked.csv").symlink_to(tmp_path / "secret")        # a link: never read
    (folder / REFUSED_TIMESTAMP).write_text("not a time")          # moved aside by autograde's hook: flagged
    files, not_sent = handed_in_files(kit_course, ASSIGNMENT, "alice")
    assert files == {NOTEBOOK: (b'{"cells": []}', 0o600), "timestamp.txt": (b"2024-03-01 12:00:00", 0o644),
                     "data.csv": (b"x,y\n3,4\n", 0o640)}
    assert not_sent == {"notes.txt": 12, "linked.csv": os.lstat(folder / "linked.csv").st_size,
                        REFUSED_TIMESTAMP: 10}


def test_a_hand_in_whose_notebook_or_timestamp_is_a_link_or_oversized_sends_it_unread(kit_course, tmp_path):
    folder = kit_course.path("submitted", "alice", ASSIGNMENT)
    folder.mkdir(parents=True)
    (tmp_path / "secret.ipynb").write_text('{"answers": "the instructor\'s"}')
    (folder / NOTEBOOK).symlink_to(tmp_path / "secret.ipynb")
    (folder / "timestamp.txt").write_text("2024-03-01 12:00:00" + " " * 200)       # over its 100-byte cap
    files, not_sent = handed_in_files(kit_course, ASSIGNMENT, "alice")
    assert files == {}
    assert not_sent == {NOTEBOOK: os.lstat(folder / NOTEBOOK).st_size, "timestamp.txt": 219}


def test_read_folder_keeps_modes_and_skips_links(tmp_path):
    folder, outside = tmp_path / "graded", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("never read")
    (folder / "a1.ipynb").write_text("graded")
    (folder / "a1.ipynb").chmod(0o644)
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o750)
    (folder / "sub" / "data.bin").write_bytes(b"\x00\xff")
    (folder / "sub" / "data.bin").chmod(0o600)
    (folder / "file-link").symlink_to(outside / "secret")
    (folder / "dir-link").symlink_to(outside, target_is_directory=True)
    (folder / "inner-link").symlink_to(folder / "a1.ipynb")
    assert read_folder(folder) == {"a1.ipynb": (b"graded", 0o644), "run.sh": (b"#!/bin/sh\n", 0o750),
                                   "sub/data.bin": (b"\x00\xff", 0o600)}


def test_write_folder_writes_what_read_folder_read(tmp_path):
    files = {"a1.ipynb": (b"graded", 0o644), "run.sh": (b"#!/bin/sh\n", 0o750), "sub/deeper/x": (b"", 0o600)}
    write_folder(tmp_path / "copy", files)
    assert read_folder(tmp_path / "copy") == files


@pytest.mark.parametrize("name", ["../escaped", "sub/../../escaped", "..", "ABSOLUTE"])
def test_write_folder_refuses_a_name_outside_its_folder(tmp_path, name):
    target = tmp_path / "graded"
    name = str(tmp_path / "escaped") if name == "ABSOLUTE" else name      # an absolute path into tmp_path
    with pytest.raises(ValueError, match="refusing to write .* outside"):
        write_folder(target, {name: (b"x", 0o644)})
    assert not (tmp_path / "escaped").exists()
    assert not target.exists(), "refused before anything was written"
