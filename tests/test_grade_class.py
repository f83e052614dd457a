"""The grading engine (autograder/classgrader/grade_class.py) against stock nbgrader, and resuming an interrupted run.

The session's `graded` class was graded by the engine on a local Dask cluster. A few of its students of
the cheapest assignment are graded again here by stock `nbgrader autograde` (tools/stock_nbgrader.py) and
must get the same grades and show the same messages. A copy of that graded course is then interrupted by
hand (one student's output removed, one left half-written) and the engine resumes it. Grading on a
cluster of separate worker processes: tests/test_cluster.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder.classgrader import grade_class
from tools import grading
from tools.course import COURSE, Course, tool_env

from tests.grading_fixtures import STOCK_ASSIGNMENT as ASSIGNMENT, comparison_submissions, shown_errors

pytestmark = pytest.mark.grading


def students() -> list[str]:
    return [submission.student for submission in comparison_submissions()]


@pytest.fixture(scope="module")
def ours(graded, tmp_path_factory):
    """A copy of the session's graded course (its submissions, results and gradebook) to interrupt: the
    class is not graded again for it."""
    for student in students():
        graded.scores(ASSIGNMENT, student)
    root = tmp_path_factory.mktemp("grade-class") / "course"
    shutil.copytree(graded.course, root)
    return root


def handed_in(root) -> list[str]:
    return sorted(path.name for path in Course(root).folder("submitted").iterdir()
                  if (path / ASSIGNMENT).is_dir())


def gradebook_rows(root, student: str) -> dict:
    """Everything autograde writes of one submission: its time, and per notebook the late penalty, each
    grade's automatic score and review mark, each comment's automatic text."""
    from nbgrader.api import Gradebook

    with Gradebook(Course(root).db_url) as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return {"timestamp": submission.timestamp, "notebooks": {notebook.name: (
            notebook.late_submission_penalty,
            {grade.name: (grade.auto_score, grade.needs_manual_grade) for grade in notebook.grades},
            {comment.name: comment.auto_comment for comment in notebook.comments},
        ) for notebook in submission.notebooks}}


def test_the_engine_gives_the_same_grades_and_messages_as_stock_nbgrader(stock, graded):
    """The same scores, the same rows (written by nbgrader's own writers under both front doors, the
    untouched release's "No response." comments among them) and the same errors shown."""
    assert not graded.grade(ASSIGNMENT)["failed"]
    for student in students():
        reference = grading.cell_scores(stock[student], ASSIGNMENT, student)
        assert reference == graded.scores(ASSIGNMENT, student), student
        assert gradebook_rows(stock[student], student) == gradebook_rows(graded.course, student), student
        stock_feedback = grading.autograded_notebook(stock[student], ASSIGNMENT, student)
        assert shown_errors(graded.feedback(ASSIGNMENT, student)) == shown_errors(stock_feedback), student


def test_each_graded_notebook_says_where_its_time_went(graded):
    """Outcome.stages, which `make bench` takes the grader's own share from: the kernel's start, the checker's, the
    cells and the whole execution, each within the execution and the execution within the notebook's time."""
    for result in graded.grade(ASSIGNMENT)["results"]:
        stages = result["stages"]
        assert set(stages) == {"kernel_start_s", "checker_start_s", "cells_s", "execute_s"}, result["student"]
        assert min(stages.values()) >= 0 and result["seconds"] >= stages["execute_s"], result["student"]
        assert stages["kernel_start_s"] + stages["checker_start_s"] + stages["cells_s"] <= stages["execute_s"] + 0.01


def test_an_interrupted_run_resumes_where_it_stopped(ours, graded):
    root = ours
    everyone = handed_in(root)
    _, release, buggy, _ = students()
    # Interrupted twice over: one student's results never written, one left as nbgrader's sanitized,
    # unexecuted copy (what it writes before running the kernel).
    shutil.rmtree(Course(root).path("autograded", release, ASSIGNMENT))
    half_done = Course(root).path("autograded", buggy, ASSIGNMENT) / COURSE.master_notebook(ASSIGNMENT).name
    half_done.chmod(0o644)
    notebook = nbformat.read(half_done, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(notebook, half_done)

    summary = grade_class.grade_class(root, [ASSIGNMENT], workers=2, progress=False)
    assert summary["workers"] == 2
    assert sorted((r["student"], r["success"]) for r in summary["results"]) == sorted([(buggy, True), (release, True)])
    assert summary["skipped"] == len(everyone) - 2
    for student in (release, buggy):
        assert grading.cell_scores(root, ASSIGNMENT, student) == graded.scores(ASSIGNMENT, student)

    again = grade_class.grade_class(root, [ASSIGNMENT], progress=False)
    assert (again["graded"], again["skipped"]) == (0, len(everyone))


def test_the_command_regrades_only_when_forced_and_shows_progress(ours, graded):
    root = ours
    solution = students()[0]
    command = [sys.executable, "-m", "autograder.classgrader", ASSIGNMENT, "--course", str(root), "--student", solution]
    skipped = subprocess.run(command, capture_output=True, text=True, env=tool_env())
    assert skipped.returncode == 0, skipped.stderr
    assert "graded 0, skipped 1" in skipped.stdout

    forced = subprocess.run([*command, "--force", "--json", str(root / "summary.json")],
                            capture_output=True, text=True, env=tool_env())
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "graded 1, skipped 0" in forced.stdout
    assert "autograding: 100%" in forced.stderr and "1/1" in forced.stderr      # tqdm's progress bar
    assert json.loads((root / "summary.json").read_text())["graded"] == 1
    assert grading.cell_scores(root, ASSIGNMENT, solution) == graded.scores(ASSIGNMENT, solution)


def test_a_regrade_keeps_what_the_instructor_set_in_the_formgrader(ours, graded):
    """The flag, a manual score and a manual comment an instructor gave in the formgrader survive a forced
    regrade by either front door, the class grader and the course's `nbgrader autograde --force`, as stock
    nbgrader keeps them; the cell with a manual score is marked for review again, and the automatic scores
    are the grader's."""
    from nbgrader.api import Gradebook

    course, student = Course(ours), students()[2]
    notebook = COURSE.master_notebook(ASSIGNMENT).stem
    with Gradebook(course.db_url, course.course_id) as gradebook:
        row = gradebook.find_submission_notebook(notebook, ASSIGNMENT, student)
        row.flagged = True
        grade, comment = row.grades[0], row.comments[0]
        grade.manual_score, comment.manual_comment = 0.5, "See me about this cell."
        cells = grade.name, comment.name
        gradebook.db.commit()

    def kept(front_door: str) -> None:
        with Gradebook(course.db_url, course.course_id) as gradebook:
            row = gradebook.find_submission_notebook(notebook, ASSIGNMENT, student)
            grade = gradebook.find_grade(cells[0], notebook, ASSIGNMENT, student)
            comment = gradebook.find_comment(cells[1], notebook, ASSIGNMENT, student)
            assert row.flagged, f"{front_door} lowered the instructor's flag"
            assert grade.manual_score == 0.5 and grade.needs_manual_grade, front_door
            assert comment.manual_comment == "See me about this cell.", front_door
        assert grading.cell_scores(ours, ASSIGNMENT, student) == {
            **graded.scores(ASSIGNMENT, student), cells[0]: (0.5, graded.scores(ASSIGNMENT, student)[cells[0]][1])}

    summary = grade_class.grade_class(ours, [ASSIGNMENT], students=[student], force=True, progress=False)
    assert summary["graded"] == 1
    kept("grade_class")
    grading.nbgrader(ours, "autograde", ASSIGNMENT, "--student", student, "--force")
    kept("nbgrader autograde")
