"""What a grading worker needs from the course, packed on the client, and how its results come back.

A worker shares no file system with the instructor's machine. The client packs a *kit* once per run: the
course's nbgrader configuration (its two files in `autograder/`; the code they load is this package), the
masters and the releases of the assignments being graded, and a small SQLite gradebook that holds only
those assignments' definitions (their cells and the source of every locked cell, which nbgrader restores
before grading). Each task then carries one student's submitted files. The worker grades into its own
copy of that small gradebook and sends back the autograded folder; the client, the only process that
writes the course's gradebook (SQLite or any SQLAlchemy URL nbgrader accepts) and its `autograded/`
folder, runs nbgrader's gradebook writers on it (record.py).
"""

from __future__ import annotations

import fnmatch
import functools
import gzip
import hashlib
import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.course import CONFIGURATION_FILES, SECRET_FILE

KIT_GRADEBOOK = "kit-gradebook.db"         # in the kit's autograder/ folder
# The kit carries the course's CONFIGURATION_FILES; the worker loads autograder/nbgrader_config.py by this name.
CONFIGURATION = "nbgrader_config"


# --- the kit -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kit:
    """The packed course for a set of assignments: a tar archive and its digest (its identity on workers: the
    same course packs to the same digest, so a worker that unpacked it once reuses it)."""
    data: bytes
    digest: str


def content_digest(data: bytes, definitions: list[str]) -> str:
    """The kit's identity: every member's name and bytes but the gradebook's, whose rows nbgrader gives new
    random ids each time they are copied, and the definitions copied into it, as nbgrader reads them."""
    hasher = hashlib.sha256("\n".join(definitions).encode())
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            if member.name != f"autograder/{KIT_GRADEBOOK}":
                hasher.update(f"\0{member.name}\0{member.mode:o}\0".encode())
                if member.isfile():
                    hasher.update(tar.extractfile(member).read())
    return hasher.hexdigest()[:16]


def copy_assignment_definitions(source, target, assignment: str) -> str:
    """The assignment, its notebooks and cells, from one nbgrader Gradebook into another (no students); returns
    what was copied, as text that is the same for the same definitions."""
    found = source.find_assignment(assignment)
    target.update_or_create_assignment(found.name, duedate=found.duedate)
    for notebook in found.notebooks:
        target.update_or_create_notebook(notebook.name, found.name, kernelspec=notebook.kernelspec)
        for cell in notebook.grade_cells:
            target.update_or_create_grade_cell(cell.name, notebook.name, found.name,
                                               max_score=cell.max_score, cell_type=cell.cell_type)
        for cell in notebook.solution_cells:
            target.update_or_create_solution_cell(cell.name, notebook.name, found.name)
        for cell in notebook.task_cells:
            target.update_or_create_task_cell(cell.name, notebook.name, found.name,
                                              max_score=cell.max_score, cell_type=cell.cell_type)
        for cell in notebook.source_cells:
            target.update_or_create_source_cell(cell.name, notebook.name, found.name, cell_type=cell.cell_type,
                                                locked=cell.locked, source=cell.source, checksum=cell.checksum)
    copied = target.find_assignment(assignment)
    rows = [copied, *copied.notebooks, *(cell for notebook in copied.notebooks for cell in
                                         [*notebook.grade_cells, *notebook.solution_cells, *notebook.task_cells,
                                          *notebook.source_cells])]
    # Every row without its id, which nbgrader draws at random.
    return "\n".join(sorted(json.dumps([type(row).__name__, {key: value for key, value in row.to_dict().items()
                                                              if key != "id"}], sort_keys=True, default=str)
                             for row in rows))


@functools.cache
def alembic_head() -> str:
    """The head of nbgrader's migrations, read from its own migration scripts (nbgrader asks the `alembic` command,
    a process that imports nbgrader: 1.7 s)."""
    import nbgrader.dbutil
    from alembic.script import ScriptDirectory

    return ScriptDirectory(nbgrader.dbutil.ALEMBIC_DIR).get_current_head()


@functools.cache
def empty_gradebook(course_id: str) -> bytes:
    """An empty SQLite gradebook of the course, made once per process. nbgrader stamps every gradebook it creates
    with the head of its migrations, which it asks the `alembic` command for (a process that imports nbgrader:
    1.7 s of every grading run's start); the same head is read here from nbgrader's own migration scripts and the
    table written first, as nbgrader writes it, so that nbgrader finds a stamped database and only adds its tables."""
    import sqlalchemy
    from nbgrader.api import Gradebook

    head = alembic_head()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / KIT_GRADEBOOK
        engine = sqlalchemy.create_engine(f"sqlite:///{path}")
        try:
            with engine.begin() as connection:
                connection.execute(sqlalchemy.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
                connection.execute(sqlalchemy.text("INSERT INTO alembic_version (version_num) VALUES (:head)"),
                                   {"head": head})
        finally:
            engine.dispose()
        with Gradebook(f"sqlite:///{path}", course_id):
            pass
        return path.read_bytes()


def build_kit(course, assignments: list[str]) -> Kit:
    """Pack what workers need to grade `assignments` of `course`."""
    from nbgrader.api import Gradebook

    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch, gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w") as tar:
        template = Path(scratch) / KIT_GRADEBOOK
        template.write_bytes(empty_gradebook(course.course_id))
        with Gradebook(course.db_url, course.course_id) as source, \
                Gradebook(f"sqlite:///{template}", course.course_id) as target:
            definitions = [copy_assignment_definitions(source, target, assignment) for assignment in assignments]

        def keep(info: tarfile.TarInfo):
            if info.issym() or info.islnk():
                return None
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""    # the same kit, the same bytes
            return info

        ignored = course.coursedir.ignore

        def keep_source(info: tarfile.TarInfo):
            """A master's files but those nbgrader never copies from a source folder (CourseDirectory.ignore, the
            instructors' catalog of known submissions among them): no worker reads them. (The release goes whole:
            the worker's survey of a hand-in must see the release the client's saw.)"""
            below = Path(info.name).parts[2:]                  # below solutions/NAME
            return None if any(fnmatch.fnmatch(part, pattern) for part in below for pattern in ignored) else keep(info)

        tar.add(template, f"autograder/{KIT_GRADEBOOK}", filter=keep)
        for name in CONFIGURATION_FILES:
            tar.add(course.autograder / name, f"autograder/{name}", filter=keep)
        course.grading_secret()                 # the workers draw the same hidden inputs as nbgrader autograde
        tar.add(course.autograder / SECRET_FILE, f"autograder/{SECRET_FILE}", filter=keep)
        for step in ("source", "release"):
            for assignment in assignments:
                folder = course.path(step, ".", assignment)
                if folder.is_dir():
                    tar.add(folder, str(folder.relative_to(course.root)),
                            filter=keep_source if step == "source" else keep)
    data = buffer.getvalue()
    return Kit(data, content_digest(data, definitions))


def kit_contents(data: bytes) -> bytes:
    """The task that holds a kit on the cluster (its argument is part of the graph, so it can run again)."""
    return data


def unpack_kit(kit_data: bytes, digest: str, into: Path) -> Path:
    """Unpack a kit once (its digest names the folder); returns the course root there."""
    root = into / digest / "course"
    if not (root / "autograder").is_dir():
        into.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="unpacking-", dir=into))
        with tarfile.open(fileobj=io.BytesIO(kit_data), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(staging, filter="data")
            else:
                # Python before 3.11.4 (Debian 12's own 3.11.2, which every account of a hub can run) has no
                # extraction filters: the kit's members are checked by hand for what the "data" filter refuses.
                for member in tar.getmembers():
                    if not (member.isfile() or member.isdir()) or member.name.startswith("/") or ".." in Path(
                            member.name).parts:
                        raise ValueError(f"a grading kit never holds {member.name!r} ({member.type!r})")
                tar.extractall(staging)
        (into / digest).mkdir(exist_ok=True)
        os.replace(staging, root)
    return root


# --- a submission and its results ---------------------------------------------------------------------------

def read_folder(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every regular file under `folder` (links are never followed): relative path -> (content, mode)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and not any(p.is_symlink() for p in path.relative_to(folder).parents
                                                                 if str(p) != "."):
            files[str(path.relative_to(folder))] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return files


def handed_in_files(course, assignment: str, student: str) -> tuple[dict[str, tuple[bytes, int]], dict[str, int]]:
    """What a task carries of a student's hand-in: only the files the course's intake rule takes (autograder/
    handins.py; an oversized or crowded hand-in costs a listing, never a read), each read with its cap
    (autograder/bounded.py), and the files left out (name -> size), which travel in the task's arguments, so the
    worker's intake flags the submission as nbgrader autograde would. Raises bounded.Refused when a file
    changed under the packer (grew past its cap, became a link)."""
    from autograder import bounded
    from autograder.plugins import handins
    from autograder.grading_environment import value

    folder = course.path("submitted", student, assignment)
    found = handins.survey(folder, course.path("release", ".", assignment))
    beside_cap = int(value("COURSE_GRADING_HANDIN_MB") * 2**20)
    files = {}
    for name in found.taken:
        cap = handins.CAPS.get(name) or (bounded.notebook_limit() if name.endswith(".ipynb") else beside_cap)
        data = bounded.read_capped(folder / name, cap)
        files[name] = (data, os.lstat(folder / name).st_mode & 0o777)
    not_sent = {name: size for name, size in {**found.beside, **found.oversized}.items() if name not in files}
    if found.refused_timestamp is not None:
        not_sent[handins.REFUSED_TIMESTAMP] = found.refused_timestamp
    return files, not_sent


def write_folder(folder: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Write files read by read_folder under `folder` (a new folder), with their modes."""
    for name, (content, mode) in files.items():
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise ValueError(f"refusing to write {name!r} outside {folder}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
