"""The grading engine (tools/grade_class.py) against stock nbgrader, and resuming an interrupted run.

The session's `graded` class was graded by the engine on a local Dask cluster. A few of its students of
the cheapest assignment are graded again here by stock `nbgrader autograde` (tools/stock_nbgrader.py) and
must get the same grades and show the same messages. The engine grades them once more in a course of
their own, where the run is interrupted by hand (one student's output removed, one left half-written) and
resumed. Grading on a cluster of separate worker processes: tests/test_cluster.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import grade_class, grading
from tools.course import COURSE, Course, tool_env

from tests.grading_fixtures import STOCK_ASSIGNMENT as ASSIGNMENT, comparison_submissions, shown_errors

pytestmark = pytest.mark.grading


def students() -> list[str]:
    return [submission.student for submission in comparison_submissions()]


def submissions() -> list[grading.Submission]:
    return comparison_submissions()


def fresh_copy(course, tmp_path_factory, name: str):
    """The generated course (masters, release, gradebook with the assignments) without submissions."""
    return grading.copy_course(course, tmp_path_factory.mktemp(name) / "course")


@pytest.fixture(scope="module")
def ours(course, tmp_path_factory):
    root = fresh_copy(course, tmp_path_factory, "grade-class")
    for submission in submissions():
        grading.submit(root, submission.student, ASSIGNMENT, submission.notebook)
    summary = grade_class.grade_class(root, [ASSIGNMENT], workers=2, progress=False)
    return root, summary


def test_the_engine_gives_the_same_grades_and_messages_as_stock_nbgrader(stock, ours, graded):
    root, summary = ours
    assert summary["graded"] == len(students()) and not summary["failed"]
    assert summary["workers"] == 2
    assert not graded.grade(ASSIGNMENT)["failed"]
    for student in students():
        reference = grading.cell_scores(stock[student], ASSIGNMENT, student)
        assert reference == graded.scores(ASSIGNMENT, student) == grading.cell_scores(root, ASSIGNMENT, student), student
        stock_feedback = grading.autograded_notebook(stock[student], ASSIGNMENT, student)
        for engine_feedback in (graded.feedback(ASSIGNMENT, student), grading.autograded_notebook(root, ASSIGNMENT, student)):
            assert shown_errors(engine_feedback) == shown_errors(stock_feedback), student


def test_an_interrupted_run_resumes_where_it_stopped(ours, graded):
    root, _ = ours
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
    assert sorted((r["student"], r["success"]) for r in summary["results"]) == sorted([(buggy, True), (release, True)])
    assert summary["skipped"] == len(students()) - 2
    for student in (release, buggy):
        assert grading.cell_scores(root, ASSIGNMENT, student) == graded.scores(ASSIGNMENT, student)

    again = grade_class.grade_class(root, [ASSIGNMENT], progress=False)
    assert (again["graded"], again["skipped"]) == (0, len(students()))


def test_the_command_regrades_only_when_forced_and_shows_progress(ours, graded):
    root, _ = ours
    solution = students()[0]
    command = [sys.executable, "-m", "tools.grade_class", ASSIGNMENT, "--course", str(root), "--student", solution]
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
