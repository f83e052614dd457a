"""Session fixtures for the grading tests: a scratch course, and a class graded once in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tools import grading


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course after `nbgrader generate_assignment` of every assignment."""
    course = grading.make_course(tmp_path_factory.mktemp("course"))
    for assignment in grading.assignments():
        grading.nbgrader(course, "generate_assignment", assignment, "--force")
    return course


@dataclass
class GradedClass:
    """Where each student of the test class was graded, and how to read their results."""

    graded_in: dict[str, Path]

    def scores(self, assignment: str, student: str) -> dict[str, tuple[float, float]]:
        return grading.cell_scores(self.graded_in[student], assignment, student)

    def feedback(self, assignment: str, student: str) -> nbformat.NotebookNode:
        return grading.autograded_notebook(self.graded_in[student], assignment, student)


@pytest.fixture(scope="session")
def graded(course):
    """A class autograded once with real nbgrader: per assignment the master, the untouched release and
    every catalog variant, each submitted as its own student."""
    submissions = [submission for assignment in grading.assignments()
                   for submission in grading.known_submissions(assignment)]
    return GradedClass(grading.grade_class(course, submissions))
