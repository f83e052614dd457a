"""autograder/plugins/export.py's PerCheckExport on a small hand-made gradebook and course folders: one row per
student and notebook, one column per graded cell, the flags of each autograded notebook, a student whose notebook
was renamed or cannot be read said so in their row alone, and every text cell safe in a spreadsheet. (The hostile
classes export after grading end to end: tests/test_grader_robustness.py.)"""

from __future__ import annotations

import csv

import nbformat
import pytest
from nbformat.v4 import new_notebook
from nbgrader.api import Gradebook

from autograder.cells import FLAGS
from autograder.plugins.export import PerCheckExport
from tests.nbgrader_command import NbgraderCommand

pytestmark = pytest.mark.quick

A, NOTEBOOK = "01-task", "task"
STUDENTS = {"ada": (2, 1), "bob": (0, 1), "=cmd|' /C calc'!A0": (2, 0), "dan": (1, 1)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A gradebook with one assignment of two checks and four graded students; ada's autograded notebook carries
    flags, bob's is not valid JSON, the third's id starts like a formula and was never autograded (a renamed
    notebook was handed in), dan's autograding failed (a notebook was handed in, none was autograded)."""
    import nbgrader.api

    from autograder.classgrader.grading_kit import alembic_head

    tmp_path, head = tmp_path_factory.mktemp("export"), alembic_head()   # nbgrader asks `alembic`; read here instead
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(nbgrader.api, "get_alembic_version", lambda: head)
        with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment(A)
            gradebook.add_notebook(NOTEBOOK, A)
            for check, points in (("test_one", 2), ("test_two", 1)):
                gradebook.add_grade_cell(check, NOTEBOOK, A, max_score=points, cell_type="code")
            for student, (one, two) in STUDENTS.items():
                gradebook.add_student(student)
                gradebook.add_submission(A, student)
                for check, score in (("test_one", one), ("test_two", two)):
                    grade = gradebook.find_grade(check, NOTEBOOK, A, student)
                    grade.auto_score = score
                gradebook.db.commit()
            graded = {student: tmp_path / "autograded" / student / A for student in STUDENTS}
            for folder in graded.values():
                folder.mkdir(parents=True)
            flagged = new_notebook(metadata={FLAGS: {"flags": ["timeout in test_two", "=HYPERLINK(\"http://x\")"]}})
            nbformat.write(flagged, graded["ada"] / f"{NOTEBOOK}.ipynb")
            (graded["bob"] / f"{NOTEBOOK}.ipynb").write_text("{not json")
            (tmp_path / "submitted" / "dan" / A).mkdir(parents=True)
            (tmp_path / "submitted" / "dan" / A / f"{NOTEBOOK}.ipynb").write_text("{}")
            renamed = tmp_path / "submitted" / "=cmd|' /C calc'!A0" / A
            renamed.mkdir(parents=True)
            (renamed / "task (1).ipynb").write_text("{}")
            path = tmp_path / "checks.csv"
            PerCheckExport(parent=NbgraderCommand(tmp_path, submitted_directory="submitted",
                                                 autograded_directory="autograded"), to=str(path)).export(gradebook)
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_one_row_per_student_one_column_per_check(exported):
    header, *rows = exported
    assert header == ["student_id", "assignment", "notebook", "score", "max_score", f"{A}/{NOTEBOOK}/test_one",
                      f"{A}/{NOTEBOOK}/test_two", "flags"]
    scores = {row[0]: [float(value) for value in row[3:7]] for row in rows}
    assert scores["ada"] == [3, 3, 2, 1] and scores["bob"] == [1, 3, 0, 1] and scores["dan"] == [2, 3, 1, 1]


def test_each_students_flags_and_what_could_not_be_read_stay_in_their_row(exported):
    flags = {row[0]: row[-1] for row in exported[1:]}
    assert flags["ada"].startswith("timeout in test_two; ")
    assert flags["bob"].startswith("flags unknown: the autograded task.ipynb could not be read")
    assert flags["dan"] == "not autograded: task.ipynb is not a readable notebook (see the autograde log)"


def test_no_text_cell_is_a_formula_in_a_spreadsheet(exported):
    """A student id and a flag that start like a formula are written as text; the renamed notebook is named."""
    formula = next(row for row in exported[1:] if "calc" in row[0])
    assert not formula[0].startswith("=")
    assert "not autograded: no task.ipynb was submitted (found task (1).ipynb: renamed?)" in formula[-1]
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in exported for cell in row
               if not cell.replace(".", "", 1).isdigit()), exported
