"""Each assignment tells the student how it is graded, honestly: the intro's total, each test cell's
points in its first line, and a visible part that prints what passed and says what the hidden part
also checks. Static checks of the masters and releases; nothing is executed."""

import re

import nbformat
import pytest

from tools import grading
from tools.course import COURSE

ASSIGNMENTS = COURSE.assignments()


def graded_cells(notebook):
    return [cell for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution")]


def master(assignment):
    return nbformat.read(COURSE.master_notebook(assignment), as_version=4)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_test_cell_states_its_points_in_its_first_line(assignment):
    for cell in graded_cells(master(assignment)):
        first = cell.source.splitlines()[0]
        stated = re.match(r"# (\d+) points?: ", first)
        assert stated, f"{cell.metadata.nbgrader.grade_id} should start with '# N point(s): ...', not {first!r}"
        assert int(stated.group(1)) == cell.metadata.nbgrader.points, (
            f"{cell.metadata.nbgrader.grade_id} says {stated.group(1)} points, its metadata {cell.metadata.nbgrader.points}")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_intro_states_the_total_points_and_the_number_of_test_cells(assignment):
    notebook = master(assignment)
    cells = graded_cells(notebook)
    total = sum(cell.metadata.nbgrader.points for cell in cells)
    intro = notebook.cells[0].source
    expected = f"Grading: {total:g} points over {len(cells)} test cells"
    assert expected in intro, f"the intro should say '{expected}'"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_part_of_each_test_cell_prints_what_passed_and_names_its_hidden_checks(assignment):
    release = nbformat.read(COURSE.release_notebook(assignment), as_version=4)
    hidden = {cell.metadata.nbgrader.grade_id for cell in graded_cells(master(assignment))
              if "### BEGIN HIDDEN TESTS" in cell.source}
    for cell in graded_cells(release):
        name = cell.metadata.nbgrader.grade_id
        assert re.search(r"""print\(f?["']passed: """, cell.source), f"{name} should print 'passed: ...' when its visible checks pass"
        if name in hidden:
            assert "hidden checks" in cell.source.lower(), f"{name} should say what its hidden checks look at"
