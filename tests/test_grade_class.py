"""Parallel grading (tools/grade_class.py) and merging shard gradebooks (tools/merge_gradebooks.py).

The reference is the session's `graded` class, graded by stock `nbgrader autograde`: a few of its
students of the cheapest assignment are graded again here by our workers, two at a time into one
gradebook, and must get the same grades and show the same messages. Then the run is interrupted by
hand (one student's output removed, one left half-written) and resumed; and the stock class's shard
courses are merged into one gradebook.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import grade_class, grading, merge_gradebooks

ASSIGNMENT = "01-layernorm"          # the cheapest to grade: keeps this file to seconds


def students() -> list[str]:
    variants = grading.load_catalog(ASSIGNMENT)
    buggy = next(variant for variant in variants if not variant.correct)
    correct = next(variant for variant in variants if variant.correct)
    return [f"{ASSIGNMENT}--solution", f"{ASSIGNMENT}--release", buggy.student, correct.student]


def fresh_copy(course, tmp_path_factory, name: str):
    """The generated course (masters, release, gradebook with the assignments) without submissions."""
    root = tmp_path_factory.mktemp(name) / "course"
    shutil.copytree(course, root, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback"))
    return root


@pytest.fixture(scope="module")
def ours(course, tmp_path_factory):
    root = fresh_copy(course, tmp_path_factory, "grade-class")
    for submission in grading.known_submissions(ASSIGNMENT):
        if submission.student in students():
            grading.submit(root, submission.student, ASSIGNMENT, submission.notebook)
    summary = grade_class.grade_class(root, [ASSIGNMENT], workers=2, progress=False)
    return root, summary


def shown_errors(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What each graded cell tells the student: its grade id -> the error it shows ('' when none)."""
    return {cell.metadata.nbgrader["grade_id"]: grading.cell_error(notebook, cell.metadata.nbgrader["grade_id"])
            for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")}


def test_parallel_grading_gives_the_same_grades_and_messages_as_stock_nbgrader(ours, graded):
    root, summary = ours
    assert summary["graded"] == len(students()) and not summary["failed"]
    assert summary["workers"] == 2
    for student in students():
        assert grading.cell_scores(root, ASSIGNMENT, student) == graded.scores(ASSIGNMENT, student), student
        ours_feedback = grading.autograded_notebook(root, ASSIGNMENT, student)
        assert shown_errors(ours_feedback) == shown_errors(graded.feedback(ASSIGNMENT, student)), student


def test_an_interrupted_run_resumes_where_it_stopped(ours, graded):
    root, _ = ours
    _, release, buggy, _ = students()
    # Interrupted twice over: one student's results never written, one left as nbgrader's sanitized,
    # unexecuted copy (what it writes before running the kernel).
    shutil.rmtree(root / grade_class.AUTOGRADED / release / ASSIGNMENT)
    half_done = root / grade_class.AUTOGRADED / buggy / ASSIGNMENT / grading.master_notebook(ASSIGNMENT).name
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
    skipped = subprocess.run(command, capture_output=True, text=True, env=grading.nbgrader_env())
    assert skipped.returncode == 0, skipped.stderr
    assert "graded 0, skipped 1" in skipped.stdout

    forced = subprocess.run([*command, "--force", "--json", str(root / "summary.json")],
                            capture_output=True, text=True, env=grading.nbgrader_env())
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


def test_shard_gradebooks_merge_into_one_that_nbgrader_reads(course, graded, tmp_path_factory):
    """The stock class was graded in shard courses, one gradebook each: merged, they hold every grade."""
    target = fresh_copy(course, tmp_path_factory, "merged")
    shards = sorted(set(graded.graded_in.values()))
    summary = merge_gradebooks.merge(target, shards, grading.assignments())
    assert summary == {"merged": len(graded.graded_in), "unfinished_in_shards": []}
    for student, shard in graded.graded_in.items():
        assignment = student.split("--")[0]
        assert grading.cell_scores(target, assignment, student) == graded.scores(assignment, student), student
        assert grading.autograded_notebook(target, assignment, student) == graded.feedback(assignment, student)

    # Merging again changes nothing; and nbgrader's own export sees every student.
    assert merge_gradebooks.merge(target, shards, grading.assignments())["merged"] == len(graded.graded_in)
    grading.nbgrader(target, "export", "--to", str(target / "grades.csv"))
    exported = (target / "grades.csv").read_text()
    assert all(student in exported for student in graded.graded_in)
