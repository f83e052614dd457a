"""Expensive work happens once per run, in session fixtures: executing every notebook, grading a class."""

from __future__ import annotations

import nbformat
import pytest

from tools import grading
from tools.notebooks import all_notebooks, execute_all


@pytest.fixture(scope="session")
def executions(tmp_path_factory):
    """Every lesson and solution notebook, executed once by papermill (both cores in use)."""
    return execute_all(all_notebooks(), tmp_path_factory.mktemp("executed"))


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course after `nbgrader generate_assignment` of every assignment."""
    course = grading.make_course(tmp_path_factory.mktemp("course"))
    for assignment in grading.assignments():
        grading.nbgrader(course, "generate_assignment", assignment, "--force")
    return course


@pytest.fixture(scope="session")
def graded(course):
    """The scratch course after autograding a class: per assignment the master, the untouched release
    and every catalog variant, each submitted as its own student."""
    for assignment in grading.assignments():
        grading.submit(course, f"{assignment}--solution", assignment,
                       nbformat.read(grading.master_notebook(assignment), as_version=4))
        grading.submit(course, f"{assignment}--release", assignment,
                       nbformat.read(grading.release_notebook(assignment), as_version=4))
        for variant in grading.load_catalog(assignment):
            grading.submit(course, variant.student, assignment,
                           grading.submission_from_release(assignment, variant.cells))
        grading.nbgrader(course, "autograde", assignment)
    return course
