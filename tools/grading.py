"""Grade submissions with the real nbgrader, in a scratch copy of the course.

The test suite and the mutation reports use this: make a scratch course (the masters, the
configuration, an empty gradebook), turn catalog entries into student notebooks, run
`nbgrader autograde` exactly as an instructor would, and read the scores back from the gradebook.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from tools.notebooks import REPO

CATALOG = REPO / "autograder" / "catalog"


def nbgrader_env(threads: int | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for nbgrader: it calls `alembic` from PATH, so the venv's bin comes first."""
    env = {**os.environ, **(extra or {})}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)     # inherited by the grading kernels
    return env


def nbgrader(course: Path, *args: str, check: bool = True, threads: int | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` from the course's autograder/ folder, as the instructors' page says."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("nbgrader")), *args],
        cwd=course / "autograder", env=nbgrader_env(threads, env), capture_output=True, text=True,
    )
    if check and result.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def make_course(root: Path) -> Path:
    """A scratch course with the masters and configuration, ready for `generate_assignment`."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "solutions", root / "solutions")
    (root / "autograder").mkdir()
    for script in (REPO / "autograder").glob("*.py"):        # the configuration and its plugins
        shutil.copy(script, root / "autograder")
    shutil.copytree(REPO / "autograder" / "sandbox_stubs", root / "autograder" / "sandbox_stubs")
    return root


def assignments() -> list[str]:
    return sorted(path.name for path in (REPO / "solutions").iterdir() if path.is_dir())


def master_notebook(assignment: str) -> Path:
    (notebook,) = (REPO / "solutions" / assignment).glob("*.ipynb")
    return notebook


def release_notebook(assignment: str) -> Path:
    return REPO / "exercises" / assignment / master_notebook(assignment).name


# --- the catalog: buggy and alternative correct submissions, kept as data -------------------------

@dataclass
class Variant:
    """One submission: the release with some answer cells replaced."""
    assignment: str
    name: str
    cells: dict[str, str]                     # grade_id of an answer cell -> the student's code
    correct: bool
    misconception: str = ""                   # what a buggy variant gets wrong, in one line
    fails: list[str] = field(default_factory=list)   # test cells that must lose all their points
    message: str = ""                         # text the failure message must contain

    @property
    def student(self) -> str:
        return f"{self.assignment}--{self.name}"


def load_catalog(assignment: str) -> list[Variant]:
    path = CATALOG / f"{assignment}.yml"
    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text())
    variants = [Variant(assignment, bug["name"], bug["cells"], False, bug["misconception"],
                        bug["fails"], bug.get("message", "")) for bug in data.get("bugs", [])]
    variants += [Variant(assignment, alt["name"], alt["cells"], True, alt.get("description", ""))
                 for alt in data.get("correct", [])]
    return variants


def submission_from_release(assignment: str, cells: dict[str, str],
                            release: Path | None = None) -> nbformat.NotebookNode:
    """The release notebook (this repository's, or `release`) with the given answer cells filled in,
    as a student would hand it in."""
    notebook = nbformat.read(release or release_notebook(assignment), as_version=4)
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in notebook.cells}
    for grade_id, source in cells.items():
        if grade_id not in by_id:
            raise KeyError(f"{assignment} has no cell {grade_id!r}")
        by_id[grade_id].source = source.rstrip("\n")
    return notebook


def submit(course: Path, student: str, assignment: str, notebook: nbformat.NotebookNode | bytes,
           filename: str | None = None) -> Path:
    """Place a notebook (or raw bytes, for malformed files) where `nbgrader collect` would put it."""
    path = course / "autograder" / "submitted" / student / assignment / (filename or master_notebook(assignment).name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(notebook, bytes):
        path.write_bytes(notebook)
    else:
        nbformat.write(notebook, path)
    return path


# --- grading a class across cores -----------------------------------------------------------------

@dataclass
class Submission:
    student: str
    assignment: str
    notebook: nbformat.NotebookNode | bytes
    filename: str | None = None               # another name than the master's: a renamed notebook
    extra_files: dict[str, bytes] = field(default_factory=dict)


def known_submissions(assignment: str) -> list[Submission]:
    """Every submission whose grade is known in advance: the master (full marks), the untouched
    release (zero) and each catalog variant, each handed in by its own student."""
    return [
        Submission(f"{assignment}--solution", assignment, nbformat.read(master_notebook(assignment), as_version=4)),
        Submission(f"{assignment}--release", assignment, nbformat.read(release_notebook(assignment), as_version=4)),
        *(Submission(variant.student, assignment, submission_from_release(assignment, variant.cells))
          for variant in load_catalog(assignment)),
    ]


def grade_class(course: Path, submissions: list[Submission], workers: int | None = None,
                env: dict[str, str] | None = None) -> dict[str, Path]:
    """Autograde every submission with real `nbgrader autograde`, `workers` shards at a time.

    `course` must already have every assignment generated (its gradebook knows them). Each shard is a
    copy of it with its own gradebook, because nbgrader's SQLite gradebook takes one writer at a time;
    students are dealt to shards round robin. Returns student -> the course folder that graded them.
    """
    workers = max(1, min(workers or os.cpu_count() or 1, len(submissions)))
    shards = []
    for index in range(workers):
        # A new folder per call: two classes graded from the same course (the test suite grades
        # several) must never share, or overwrite, a shard.
        shard = Path(tempfile.mkdtemp(prefix=f"{course.name}-shard{index}-", dir=course.parent)) / "course"
        # The masters, the configuration and the gradebook; none of the course's own submissions.
        shutil.copytree(course, shard, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback", "exchange"))
        shards.append(shard)
    placed: dict[str, Path] = {}
    for index, submission in enumerate(submissions):
        shard = shards[index % workers]
        path = submit(shard, submission.student, submission.assignment, submission.notebook, submission.filename)
        for name, content in submission.extra_files.items():
            (path.parent / name).write_bytes(content)
        placed[submission.student] = shard
    threads = max(1, (os.cpu_count() or 1) // workers)

    def grade_shard(shard: Path) -> None:
        for assignment in sorted({s.assignment for s in submissions if placed[s.student] == shard}):
            # Not checked: nbgrader exits non-zero when any one submission fails, and the others
            # in the shard still need grading. Tests read what was graded from the gradebook.
            nbgrader(shard, "autograde", assignment, threads=threads, check=False, env=env)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(grade_shard, shards))
    return placed


# --- reading results --------------------------------------------------------------------------------

def cell_scores(course: Path, assignment: str, student: str) -> dict[str, tuple[float, float]]:
    """grade_id -> (score, max_score) for every graded cell of one submission."""
    from nbgrader.api import Gradebook

    db = course / "autograder" / "gradebook" / "gradebook.db"
    notebook = master_notebook(assignment).stem
    with Gradebook(f"sqlite:///{db}") as gradebook:
        submitted = gradebook.find_submission_notebook(notebook, assignment, student)
        return {grade.name: (grade.score, grade.max_score) for grade in submitted.grades}


def autograded_notebook(course: Path, assignment: str, student: str) -> nbformat.NotebookNode:
    path = course / "autograder" / "autograded" / student / assignment / master_notebook(assignment).name
    return nbformat.read(path, as_version=4)


def cell_error(notebook: nbformat.NotebookNode, grade_id: str) -> str:
    """The error a graded cell showed, as the student sees it in their feedback ('' if none)."""
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return "\n".join(f"{out.ename}: {out.evalue}" for out in cell.get("outputs", [])
                             if out.output_type == "error")
    raise KeyError(grade_id)
