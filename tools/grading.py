"""Grade known submissions with the course's grading engine, in a scratch copy of the course.

The test suite, the mutation report and the benchmarks use this: make a scratch course (the masters, the
configuration, an empty gradebook), turn catalog entries into student notebooks, hand them in where
`nbgrader collect` would, grade them with the engine instructors use (`autograder.classgrader.grade_class`, nbgrader's own
Autograde converter in parallel workers), and read the scores back from the gradebook. Stock
`nbgrader autograde`, which the engine is compared with, is in tools/stock_nbgrader.py. The whole catalog
is graded by a fast path of trusted code (tools/mutation_grading.py); the engine grades each catalog's
`engine_sample` beside it, and the tests hold the two equal there.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from autograder.course import CATALOG_FILE, CONFIGURATION_FILES
from autograder import notebook as notebook_reader
from tools.course import COURSE, Course, tool_env



def nbgrader(course: Path, *args: str, check: bool = True, threads: int | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` from the course's autograder/ folder, as the instructors' page says."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("nbgrader")), *args],
        cwd=Course(course).autograder, env=tool_env(env, threads), capture_output=True, text=True,
    )
    if check and result.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


# A scratch course's grading secret: fixed, so that the hidden inputs a catalog submission meets, and so the
# messages the mutation report quotes, are the same in every run (a real course makes a random one).
SCRATCH_SECRET = hashlib.sha256(b"the course's scratch courses: tests, the mutation report, benchmarks").digest()


def make_course(root: Path) -> Path:
    """A scratch course with the masters and configuration, ready for `generate_assignment`."""
    from autograder.course import SECRET_FILE

    scratch = Course(root)
    scratch.autograder.mkdir(parents=True)
    for name in CONFIGURATION_FILES:          # the code they load is the grading package's, whichever course they describe
        shutil.copy(COURSE.autograder / name, scratch.autograder)
    (scratch.autograder / SECRET_FILE).write_bytes(SCRATCH_SECRET)
    (scratch.autograder / SECRET_FILE).chmod(0o600)
    shutil.copytree(COURSE.folder("source"), scratch.folder("source"))
    scratch.prepare()
    return root


GENERATE = r"""
import sys
from nbgrader.apps import NbGraderAPI
from nbgrader.apps.nbgraderapp import NbGraderApp

app = NbGraderApp.instance()
app.load_config_file()              # nbgrader_config.py in this folder, as the nbgrader command reads it
api = NbGraderAPI(config=app.config)
for assignment in sys.argv[1:]:
    result = api.generate_assignment(assignment, force=True)
    if not result["success"]:
        sys.exit(f"generate_assignment {assignment} failed:\n{result.get('log', '')}\n{result.get('error', '')}")
"""


def generate_assignments(course: Path, assignments: list[str]) -> None:
    """`nbgrader generate_assignment NAME --force` for each assignment, through nbgrader's Python API in one
    process: the configuration (and its check that a sandbox can start) is loaded once, not once per
    assignment."""
    result = subprocess.run([sys.executable, "-c", GENERATE, *assignments], cwd=Course(course).autograder,
                            env=tool_env(), capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"generating {assignments} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


def copy_course(course: Path, root: Path) -> Path:
    """A copy of a generated course (masters, release, gradebook with the assignments) at `root`, without
    anything handed in or graded: a class of its own."""
    layout = Course(course)
    skip = {layout.folder(step).name for step in ("submitted", "autograded", "feedback")}
    shutil.copytree(course, root, ignore=shutil.ignore_patterns(*skip))
    return root


# --- the catalog: buggy and alternative correct submissions, kept as data -------------------------

@dataclass
class Variant:
    """One submission: the release with some answer cells replaced."""
    assignment: str
    name: str
    cells: dict[str, str]                     # grade_id of an answer cell -> the student's code
    correct: bool
    misconception: str = ""                   # a buggy variant: what it gets wrong, in one line
    fails: list[str] = field(default_factory=list)   # test cells that must lose all their points
    message: str = ""                         # text the failure message must contain
    description: str = ""                     # a correct variant or a copy: how it differs from the master
    kind: str = ""                            # "bug", "correct" or "copy" (set from `correct` when not given)
    lessons: list[str] = field(default_factory=list)  # a copy: the lessons whose code it pastes

    def __post_init__(self):
        self.kind = self.kind or ("correct" if self.correct else "bug")

    @property
    def student(self) -> str:
        return f"{self.assignment}--{self.name}"


# The most a copy of the lessons' own code may score: the assignment's transfer parts are worth the rest.
COPY_CEILING = 0.4


def read_catalog(assignment: str) -> dict:
    path = COURSE.folder("source") / assignment / CATALOG_FILE
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def load_catalog(assignment: str) -> list[Variant]:
    """The catalog's bugs, then its alternative correct solutions (copies: load_copies)."""
    data = read_catalog(assignment)
    variants = [Variant(assignment, bug["name"], bug["cells"], False, bug["misconception"],
                        bug["fails"], bug.get("message", "")) for bug in data.get("bugs", [])]
    variants += [Variant(assignment, alt["name"], alt["cells"], True, description=alt.get("description", ""))
                 for alt in data.get("correct", [])]
    return variants


def load_copies(assignment: str) -> list[Variant]:
    """The catalog's `copies:`: the lessons' own code pasted under the assignment's names, which must score
    at most COPY_CEILING of the points (variants of a third kind, neither bug nor alternative)."""
    return [Variant(assignment, copy["name"], copy["cells"], False, description=copy.get("description", ""),
                    kind="copy", lessons=list(copy.get("lessons", [])))
            for copy in read_catalog(assignment).get("copies", None) or []]


def all_variants(assignment: str) -> list[Variant]:
    """Every catalog entry of `assignment`: its bugs, its alternatives and its copies."""
    return load_catalog(assignment) + load_copies(assignment)


def submission_from_release(assignment: str, cells: dict[str, str],
                            release: Path | None = None) -> nbformat.NotebookNode:
    """The release notebook (this repository's, or `release`) with the given answer cells filled in,
    as a student would hand it in."""
    notebook = nbformat.read(release or COURSE.release_notebook(assignment), as_version=4)
    by_id = {notebook_reader.grade_id(cell): cell for cell in notebook.cells}
    for grade_id, source in cells.items():
        if grade_id not in by_id:
            raise KeyError(f"{assignment} has no cell {grade_id!r}")
        by_id[grade_id].source = source.rstrip("\n")
    return notebook


def submit(course: Path, student: str, assignment: str, notebook: nbformat.NotebookNode | bytes,
           filename: str | None = None) -> Path:
    """Place a notebook (or raw bytes, for malformed files) where `nbgrader collect` would put it."""
    path = Course(course).path("submitted", student, assignment) / (filename or COURSE.master_notebook(assignment).name)
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
    release (zero) and each catalog variant (copies included), each handed in by its own student."""
    return [
        Submission(f"{assignment}--solution", assignment, nbformat.read(COURSE.master_notebook(assignment), as_version=4)),
        Submission(f"{assignment}--release", assignment, nbformat.read(COURSE.release_notebook(assignment), as_version=4)),
        *(Submission(variant.student, assignment, submission_from_release(assignment, variant.cells))
          for variant in all_variants(assignment)),
    ]


# Bugs of each assignment that the real engine grades in every run beside the fast path. Each engine-graded
# notebook costs 4 to 8 CPU-seconds (a sandboxed kernel, torch, nbgrader's passes, the tests); two bugs
# failing different checks, with the master, the release, an alternative and the copy, give every kind of
# verdict the fast path must reproduce (full marks, zero, lost points with messages, flags).
ENGINE_BUGS = 2


def engine_sample(assignment: str) -> list[Submission]:
    """The known submissions the course's engine grades in every test run, to hold the fast path
    (tools.mutation_grading) equal to it: the master, the release, the first bug and then each bug that
    fails a check none chosen before fails (ENGINE_BUGS in all), the alternative named `helper-names`
    (it redefines the old test helpers' names, the hardest case for an in-process grader; else the first
    alternative), and every copy."""
    variants = all_variants(assignment)
    chosen, covered = [], set()
    for bug in (variant for variant in variants if variant.kind == "bug"):
        if len(chosen) < ENGINE_BUGS and (not chosen or set(bug.fails) - covered):
            chosen.append(bug.student)
            covered |= set(bug.fails)
    alternatives = [variant for variant in variants if variant.kind == "correct"]
    named = [variant for variant in alternatives if variant.name == "helper-names"]
    chosen += [variant.student for variant in (named or alternatives)[:1]]
    chosen += [variant.student for variant in variants if variant.kind == "copy"]
    wanted = {f"{assignment}--solution", f"{assignment}--release", *chosen}
    return [submission for submission in known_submissions(assignment) if submission.student in wanted]


def hand_in(course: Path, submissions: list[Submission]) -> None:
    """Place every submission (and its extra files) where `nbgrader collect` would put it."""
    for submission in submissions:
        path = submit(course, submission.student, submission.assignment, submission.notebook, submission.filename)
        for name, content in submission.extra_files.items():
            (path.parent / name).write_bytes(content)


def grade_submissions(course: Path, submissions: list[Submission], workers: int | None = None,
                      env: dict[str, str] | None = None) -> dict:
    """Hand in and grade `submissions` with the course's grading engine (autograder.classgrader.grade_class), into `course`'s
    one gradebook, regrading any of these students graded before. `course` must have every assignment
    generated. `env`: extra environment variables for the grading (the robustness tests shrink limits
    with them). Returns the engine's summary."""
    from autograder.classgrader.grade_class import grade_class

    hand_in(course, submissions)
    assignments = sorted({submission.assignment for submission in submissions})
    students = sorted({submission.student for submission in submissions})
    return grade_class(course, assignments, workers=workers, force=True, students=students, progress=False, env=env)


# --- reading results --------------------------------------------------------------------------------

def cell_scores(course: Path, assignment: str, student: str) -> dict[str, tuple[float, float]]:
    """grade_id -> (score, max_score) for every graded cell of one submission."""
    from nbgrader.api import Gradebook

    notebook = COURSE.master_notebook(assignment).stem
    with Gradebook(Course(course).db_url) as gradebook:
        submitted = gradebook.find_submission_notebook(notebook, assignment, student)
        return {grade.name: (grade.score, grade.max_score) for grade in submitted.grades}


def graded_cell_points(assignment: str) -> dict[str, tuple[str, float]]:
    """Each graded test cell of the master -> (the answer cell it follows, its points)."""
    cells: dict[str, tuple[str, float]] = {}
    answer = ""
    for cell in nbformat.read(COURSE.master_notebook(assignment), as_version=4).cells:
        meta = notebook_reader.nbgrader_record(cell)
        if meta.get("solution") and cell.cell_type == "code":
            answer = meta["grade_id"]
        elif meta.get("grade"):
            cells[meta["grade_id"]] = (answer, float(meta.get("points", 0)))
    return cells


def master_answer(assignment: str, grade_id: str) -> str:
    """The master's solution for one answer cell, as a student would type it (nbgrader's solution markers
    removed)."""
    for cell in nbformat.read(COURSE.master_notebook(assignment), as_version=4).cells:
        if notebook_reader.grade_id(cell) == grade_id:
            return "\n".join(line for line in cell.source.splitlines()
                             if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    raise KeyError(grade_id)


def points_by_answer(assignment: str) -> dict[str, float]:
    """Answer cell's grade_id -> the points of the test cells that follow it in the master, up to the next
    answer: what a submission earns by answering that cell alone, correctly."""
    points: dict[str, float] = {}
    for answer, value in graded_cell_points(assignment).values():
        points[answer] = points.get(answer, 0.0) + value
    return points


def autograded_notebook(course: Path, assignment: str, student: str) -> nbformat.NotebookNode:
    path = Course(course).path("autograded", student, assignment) / COURSE.master_notebook(assignment).name
    return nbformat.read(path, as_version=4)


def cell_error(notebook: nbformat.NotebookNode, grade_id: str) -> str:
    """The error a graded cell showed, as the student sees it in their feedback ('' if none)."""
    for cell in notebook.cells:
        if notebook_reader.grade_id(cell) == grade_id:
            return "\n".join(f"{out.ename}: {out.evalue}" for out in cell.get("outputs", [])
                             if out.output_type == "error")
    raise KeyError(grade_id)


def grader_flags(notebook: nbformat.NotebookNode) -> list[str]:
    """What the grader flagged in an autograded notebook (its record under autograder.cells.FLAGS)."""
    return notebook.metadata.get(flags_key(), {}).get("flags", [])


def flags_key() -> str:
    """The metadata key of the grader's record, as autograder/cells.py defines it."""
    from autograder.cells import FLAGS

    return FLAGS
