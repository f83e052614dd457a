"""Which submissions of a class need grading: the class grader's plan, decided from the instructor's side.

nbgrader autograde's own rule (a submission whose autograded folder exists is skipped, unless it was handed in
again since: its timestamp.txt later than the time the gradebook recorded) with two more facts, so that a run interrupted
at any moment resumes where it stopped: the gradebook records the submission graded, and its autograded
notebooks hold executed cells. Nothing the graded notebook's kernel could write takes part.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autograder import bounded
from autograder.classgrader.grading_worker import Outcome

if TYPE_CHECKING:
    from autograder.course import Course


@dataclass
class Unit:
    assignment: str
    student: str


def submitted_students(course: Course, assignment: str) -> list[str]:
    return sorted(path.parent.name for path in course.folder("submitted").glob(f"*/{assignment}") if path.is_dir())


def read_timestamp(folder: Path):
    """The submission time in `folder`'s timestamp.txt as a datetime; None if missing or unreadable (its size
    checked from the listing, its shape before dateutil sees it: autograder/bounded.py)."""
    try:
        return bounded.read_timestamp(folder / "timestamp.txt")
    except bounded.Refused:
        return None


def timestamp_problem(folder: Path) -> str | None:
    """Why `folder`'s timestamp.txt holds no time (None when it holds one, or there is none)."""
    try:
        bounded.read_timestamp(folder / "timestamp.txt")
    except bounded.Refused as why:
        return str(why)
    return None


def executed(notebook: Path) -> bool:
    """An autograded notebook nbgrader finished: some code cell ran (or was marked as not run). Read within a
    cap: the notebook is the grader's, but what the student wrote is in it."""
    try:
        limit = bounded.autograded_limit()
        cells = bounded.parse_json(bounded.read_capped(notebook, limit), limit)["cells"]
    except (bounded.Refused, KeyError, TypeError, IndexError):
        return False
    if not isinstance(cells, list):
        return False
    return any(cell.get("cell_type") == "code" and (cell.get("execution_count") is not None or cell.get("outputs"))
               for cell in cells if isinstance(cell, dict))


def graded_timestamps(course: Course, assignment: str) -> dict:
    """student -> the submission time the gradebook recorded when that student was last graded."""
    from nbgrader.api import Gradebook, MissingEntry

    if course.gradebook_file is not None and not course.gradebook_file.exists():
        return {}
    with Gradebook(course.db_url) as gradebook:
        try:
            return {s.student_id: s.timestamp for s in gradebook.assignment_submissions(assignment)}
        except MissingEntry:
            return {}


def is_graded(course: Course, assignment: str, student: str, recorded: dict | None = None) -> bool:
    """Decided from what the instructor's side holds: the submitted folder (nbgrader collect writes it)
    and the gradebook. Nothing the graded notebook's kernel could write takes part."""
    submitted = course.path("submitted", student, assignment)
    graded = course.path("autograded", student, assignment)
    if not graded.is_dir() or graded.is_symlink():
        return False
    recorded = graded_timestamps(course, assignment) if recorded is None else recorded
    if student not in recorded:
        return False                  # the gradebook never saw this submission graded
    masters = {path.name for path in course.path("source", ".", assignment).glob("*.ipynb")}
    for name in masters:
        if (submitted / name).exists() and not executed(graded / name):
            return False              # interrupted between the sanitized copy and the graded one
    new, old = read_timestamp(submitted), recorded[student]
    if new is not None and old is not None and new > old:
        return False                  # resubmitted since it was graded
    return True


def plan(course: Course, assignments: list[str], force: bool,
         students: list[str] | None = None) -> tuple[list[Unit], int]:
    """The (assignment, student) pairs to grade, and how many were skipped as already graded."""
    units, skipped = [], 0
    for assignment in assignments:
        recorded = {} if force else graded_timestamps(course, assignment)
        for student in submitted_students(course, assignment):
            if students and student not in students:
                continue
            try:
                graded = not force and is_graded(course, assignment, student, recorded)
            except Exception:       # one student's folder must not stop the plan: graded again, its failure reported
                graded = False
            if graded:
                skipped += 1
            else:
                units.append(Unit(assignment, student))
    return units, skipped


def unit_timeout(course: Course) -> float:
    """How long one submission may take to grade: its notebooks' time limit, plus start-up and saving."""
    from autograder.grading_environment import value

    source = course.folder("source")
    notebooks = max((len(list(p.glob("*.ipynb"))) for p in source.iterdir() if p.is_dir()), default=1)
    return max(1, notebooks) * value("COURSE_GRADING_NOTEBOOK_TIMEOUT") + 120


def unreadable_timestamp(course: Course, unit: Unit) -> Outcome | None:
    """A failed result for a submission whose timestamp.txt holds no time (nbgrader itself would fail with
    an AttributeError of its own): say what is wrong and how to fix it."""
    stamp = course.path("submitted", unit.student, unit.assignment) / "timestamp.txt"
    problem = timestamp_problem(stamp.parent)
    if problem:
        return Outcome(unit.assignment, unit.student, False, 0.0, "",
                       f"{stamp} does not hold a time ({problem}); correct it or remove it, then grade again")
    return None
