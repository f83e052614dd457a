"""exercises/ is exactly what nbgrader generates from solutions/, and carries no solution."""

import json
import re

import nbformat
import pytest

from tools import grading
from tools.course import COURSE, REPO

ASSIGNMENTS = COURSE.assignments()


def files_under(folder):
    return sorted(path.relative_to(folder) for path in folder.rglob("*") if path.is_file())


def solution_lines(assignment):
    """Every substantive line inside a master's solution regions and hidden-test regions."""
    notebook = nbformat.read(COURSE.master_notebook(assignment), as_version=4)
    regions = []
    for cell in notebook.cells:
        regions += re.findall(r"### BEGIN (?:SOLUTION|HIDDEN TESTS)\n(.*?)### END", cell.source, re.S)
    lines = {line.strip() for region in regions for line in region.splitlines()}
    # Lines the master also shows outside those regions (shared helpers' calls) are no secret.
    public = "\n".join(re.sub(r"### BEGIN (SOLUTION|HIDDEN TESTS)\n.*?### END (SOLUTION|HIDDEN TESTS)", "", cell.source, flags=re.S)
                       for cell in notebook.cells)
    public_lines = {line.strip() for line in public.splitlines()}
    return {line for line in lines if len(line) > 12 and not line.startswith("#") and line not in public_lines}


def test_every_assignment_has_a_release():
    assert ASSIGNMENTS, "no assignments under solutions/"
    assert sorted(path.name for path in (REPO / "exercises").iterdir()) == ASSIGNMENTS


def test_the_catalog_beside_each_master_never_reaches_the_release():
    """Each assignment's catalog of known answers and bugs lies beside its master; nbgrader's CourseDirectory.ignore
    (course_directory.py) keeps it out of what generate_assignment copies."""
    from autograder.course import CATALOG_FILE

    assert all((REPO / "solutions" / assignment / CATALOG_FILE).is_file() for assignment in ASSIGNMENTS)
    assert not list((REPO / "exercises").rglob(CATALOG_FILE))
    assert CATALOG_FILE in COURSE.coursedir.ignore


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_exactly_what_nbgrader_generates(assignment, course):
    generated, committed = course / "exercises" / assignment, REPO / "exercises" / assignment
    assert files_under(generated) == files_under(committed), "run `nbgrader generate_assignment` (see instructors page)"
    for name in files_under(generated):
        fresh, ours = (folder / name for folder in (generated, committed))
        if name.suffix == ".ipynb":
            assert json.loads(fresh.read_text()) == json.loads(ours.read_text()), (
                f"exercises/{assignment}/{name} differs from a fresh `nbgrader generate_assignment`")
        else:
            assert fresh.read_bytes() == ours.read_bytes(), f"exercises/{assignment}/{name} is stale"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_contains_no_solution_and_no_hidden_test(assignment):
    text = "".join(path.read_text() for path in (REPO / "exercises" / assignment).rglob("*") if path.is_file())
    assert not re.search(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)", text)
    leaked = [line for line in solution_lines(assignment) if line in text]
    assert not leaked, f"solution or hidden-test lines in the release: {leaked[:3]}"
    release = nbformat.read(COURSE.release_notebook(assignment), as_version=4)
    answers = [cell for cell in release.cells if cell.metadata.get("nbgrader", {}).get("solution")]
    assert answers and all("raise NotImplementedError()" in cell.source for cell in answers)
