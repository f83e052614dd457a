"""The grading engine (tools/grade_class.py) against stock nbgrader, and merging shard gradebooks.

The session's `graded` class was graded by the engine. A few of its students of the cheapest assignment
are graded again here by stock `nbgrader autograde` (tools/stock_nbgrader.py), in two shard courses, and
must get the same grades and show the same messages; those shard courses are then merged into one
gradebook (tools/merge_gradebooks.py). And the engine grades them once more in a course of their own,
where the run is interrupted by hand (one student's output removed, one left half-written) and resumed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import grade_class, grading, merge_gradebooks, stock_nbgrader
from tools.course import COURSE, Course, tool_env

ASSIGNMENT = "01-layernorm"          # the cheapest to grade: keeps this file to seconds


def students() -> list[str]:
    variants = grading.load_catalog(ASSIGNMENT)
    buggy = next(variant for variant in variants if not variant.correct)
    correct = next(variant for variant in variants if variant.correct)
    return [f"{ASSIGNMENT}--solution", f"{ASSIGNMENT}--release", buggy.student, correct.student]


def fresh_copy(course, tmp_path_factory, name: str):
    """The generated course (masters, release, gradebook with the assignments) without submissions."""
    return grading.copy_course(course, tmp_path_factory.mktemp(name) / "course")


def submissions() -> list[grading.Submission]:
    return [submission for submission in grading.known_submissions(ASSIGNMENT) if submission.student in students()]


@pytest.fixture(scope="module")
def stock(course, tmp_path_factory):
    """The students graded by stock `nbgrader autograde`, in two shard courses: student -> its course."""
    return stock_nbgrader.autograde_in_shards(fresh_copy(course, tmp_path_factory, "stock"), submissions(), workers=2)


@pytest.fixture(scope="module")
def ours(course, tmp_path_factory):
    root = fresh_copy(course, tmp_path_factory, "grade-class")
    for submission in submissions():
        grading.submit(root, submission.student, ASSIGNMENT, submission.notebook)
    summary = grade_class.grade_class(root, [ASSIGNMENT], workers=2, progress=False)
    return root, summary


def shown_errors(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What each graded cell tells the student: its grade id -> the error it shows ('' when none)."""
    return {cell.metadata.nbgrader["grade_id"]: grading.cell_error(notebook, cell.metadata.nbgrader["grade_id"])
            for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")}


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


def test_a_student_lands_in_exactly_one_shard():
    names = [f"student-{index}" for index in range(200)]
    shards = [{name for name in names if grade_class.in_shard(name, (index, 3))} for index in range(3)]
    assert sorted(name for shard in shards for name in shard) == sorted(names)
    assert all(shards), "a shard was left empty: the split does not spread students"


def test_shard_gradebooks_merge_into_one_that_nbgrader_reads(course, stock, tmp_path_factory):
    """The stock students were graded in shard courses, one gradebook each: merged, they hold every grade."""
    target = fresh_copy(course, tmp_path_factory, "merged")
    shards = sorted(set(stock.values()))
    summary = merge_gradebooks.merge(target, shards, COURSE.assignments())
    assert summary == {"merged": len(stock), "unfinished_in_shards": []}
    for student, shard in stock.items():
        assert grading.cell_scores(target, ASSIGNMENT, student) == grading.cell_scores(shard, ASSIGNMENT, student), student
        assert grading.autograded_notebook(target, ASSIGNMENT, student) == grading.autograded_notebook(shard, ASSIGNMENT, student)

    # Merging again changes nothing; and nbgrader's own export sees every student.
    assert merge_gradebooks.merge(target, shards, COURSE.assignments())["merged"] == len(stock)
    grading.nbgrader(target, "export", "--to", str(target / "grades.csv"))
    exported = (target / "grades.csv").read_text()
    assert all(student in exported for student in stock)
