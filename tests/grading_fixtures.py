"""Session fixtures for the grading tests: a scratch course, and a class graded once in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tools import grading, stock_nbgrader
from tools.course import COURSE


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course after `nbgrader generate_assignment` of every assignment."""
    course = grading.make_course(tmp_path_factory.mktemp("course"))
    for assignment in COURSE.assignments():
        grading.nbgrader(course, "generate_assignment", assignment, "--force")
    return course


@dataclass
class GradedClass:
    """The known submissions of each assignment (the master, the untouched release, every catalog
    variant, each handed in by its own student), graded by the course's grading engine (tools.grade_class,
    as instructors run it) in a course of their own. An assignment is graded the first time a test asks
    for it, so running one assignment's tests grades only that assignment."""

    course: Path
    summaries: dict[str, dict] = field(default_factory=dict)

    def grade(self, assignment: str) -> dict:
        """The engine's summary of grading `assignment`'s class (graded now if no test asked before)."""
        if assignment not in self.summaries:
            self.summaries[assignment] = grading.grade_submissions(self.course, grading.known_submissions(assignment))
        return self.summaries[assignment]

    def scores(self, assignment: str, student: str) -> dict[str, tuple[float, float]]:
        self.grade(assignment)
        return grading.cell_scores(self.course, assignment, student)

    def feedback(self, assignment: str, student: str) -> nbformat.NotebookNode:
        self.grade(assignment)
        return grading.autograded_notebook(self.course, assignment, student)


@pytest.fixture(scope="session")
def graded(course, tmp_path_factory):
    """The class of known submissions, graded assignment by assignment as the tests ask."""
    return GradedClass(grading.copy_course(course, tmp_path_factory.mktemp("graded") / "course"))


# --- stock nbgrader, the reference the engine is compared with ---------------------------------------------

STOCK_ASSIGNMENT = "01-layernorm"          # the cheapest to grade


def comparison_submissions() -> list[grading.Submission]:
    """A few known submissions of the cheapest assignment: the master, the release, a bug, an alternative."""
    variants = grading.load_catalog(STOCK_ASSIGNMENT)
    chosen = {f"{STOCK_ASSIGNMENT}--solution", f"{STOCK_ASSIGNMENT}--release",
              next(variant for variant in variants if not variant.correct).student,
              next(variant for variant in variants if variant.correct).student}
    return [submission for submission in grading.known_submissions(STOCK_ASSIGNMENT) if submission.student in chosen]


@pytest.fixture(scope="session")
def stock(course, tmp_path_factory) -> dict[str, Path]:
    """comparison_submissions() graded by stock `nbgrader autograde`, in two copies of the course at once:
    student -> the course that graded them."""
    root = grading.copy_course(course, tmp_path_factory.mktemp("stock") / "course")
    return stock_nbgrader.autograde_in_shards(root, comparison_submissions(), workers=2)


def shown_errors(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What each graded cell tells the student: its grade id -> the error it shows ('' when none)."""
    return {cell.metadata.nbgrader["grade_id"]: grading.cell_error(notebook, cell.metadata.nbgrader["grade_id"])
            for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")}
