"""Broken, hostile and tampering submissions lose nothing and win nothing.

One class is graded once with real `nbgrader autograde` (tight limits so hangs and hogs end fast):
honest students next to students whose notebooks crash, hang, exhaust memory, edit or delete the tests,
patch what the tests rely on, or are not valid notebooks at all. Each test reads one behaviour off that
class. Assignment 1 (one answer cell, eleven points) keeps it fast.
"""

from __future__ import annotations

import copy
import csv
import json

import nbformat
import pytest

from tools import grading

A = "01-layernorm"
NOTEBOOK = grading.master_notebook(A).name
LIMITS = {"COURSE_GRADING_CELL_TIMEOUT": "8", "COURSE_GRADING_CPU_SECONDS": "12", "COURSE_GRADING_MEMORY_GB": "3"}

CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]          # an alternative correct answer
SAMPLE_VARIANCE = grading.load_catalog(A)[0].cells["layernorm"]   # loses 3 of 11 points
SAMPLE_VARIANCE_SCORE = 8.0


def answer(code: str) -> nbformat.NotebookNode:
    return grading.submission_from_release(A, {"layernorm": code})


def with_test_cells(notebook, change):
    notebook = copy.deepcopy(notebook)
    notebook.cells = [change(cell) if cell.metadata.get("nbgrader", {}).get("grade") else cell
                      for cell in notebook.cells]
    notebook.cells = [cell for cell in notebook.cells if cell is not None]
    return notebook


def emptied(cell):
    cell.source = "pass"
    return cell


def promoted(cell):
    cell.metadata["nbgrader"].update(points=100, solution=True, grade=True)
    return cell


CLASS = {
    # honest students, graded beside everyone else
    "honest": answer(CORRECT),
    "honest-twin": answer(CORRECT),
    "sample-variance": answer(SAMPLE_VARIANCE),
    "sample-variance-twin": answer(SAMPLE_VARIANCE),
    # 1. answer cells that raise
    "not-implemented": nbformat.read(grading.release_notebook(A), as_version=4),
    "syntax-error": answer("def layernorm(x, gamma, beta, eps=1e-5)\n    return x"),
    "name-error": answer("layernorm = undefined_helper"),
    # 2. hangs: a sleeping loop hits the cell timeout
    "hangs": answer(CORRECT + "\nimport time\nwhile True:\n    time.sleep(0.05)"),
    # 3. the kernel dies
    "os-exit": answer(CORRECT + "\nimport os\nos._exit(1)"),
    "segfault": answer(CORRECT + "\nimport ctypes\nctypes.string_at(0)"),
    "sys-exit": answer(CORRECT + "\nimport sys\nsys.exit(3)"),
    # 4. runaway memory and CPU
    "memory-hog": answer(CORRECT + "\nhog = torch.empty(40 * 2**30, dtype=torch.uint8)\nhog.fill_(1)"),
    "cpu-hog": answer(CORRECT + "\nwhile True:\n    pass"),
    # 5. the tests edited, deleted or re-labelled
    "tests-emptied": with_test_cells(answer(SAMPLE_VARIANCE), emptied),
    "tests-deleted": with_test_cells(answer(SAMPLE_VARIANCE), lambda cell: None),
    "tests-promoted": with_test_cells(answer(SAMPLE_VARIANCE), promoted),
    # 6. gaming the checks from inside the kernel
    "patch-allclose": answer(SAMPLE_VARIANCE + "\ntorch.allclose = lambda *args, **kwargs: True"
                             "\ntorch.Tensor.allclose = lambda *args, **kwargs: True"),
    "patch-equal-and-assert-close": answer(
        SAMPLE_VARIANCE + "\ntorch.equal = lambda *args: True\ntorch.testing.assert_close = lambda *a, **k: None"),
    "patch-isinstance": answer(SAMPLE_VARIANCE + "\nimport builtins\nbuiltins.isinstance = lambda *args: True"),
    "patch-numpy": answer(SAMPLE_VARIANCE + "\nimport numpy\nnumpy.allclose = lambda *args, **kwargs: True"),
    "redefine-assertion-error": answer(SAMPLE_VARIANCE + "\nclass AssertionError(Warning):\n    pass"),
    "always-equal": answer(
        "class Anything(torch.Tensor):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def tolist(self):\n        return [-1.2247448713915890, 0.0, 1.2247448713915890]\n"
        "torch.equal = lambda *args: True\n"
        "def layernorm(x, gamma, beta, eps=1e-5):\n"
        "    return torch.zeros_like(x).as_subclass(Anything)"),
    "rebind-F": answer(SAMPLE_VARIANCE + "\nclass _Fake:\n    def __getattr__(self, name):\n"
                       "        return lambda x, *a, **k: layernorm(x, 1, 0)\nF = _Fake()"),
    # 10. honest code that writes to stderr
    "warns": answer(CORRECT.replace("def layernorm(x, gamma, beta, eps=1e-5):",
                                    "import sys, warnings\ndef layernorm(x, gamma, beta, eps=1e-5):\n"
                                    "    warnings.warn('a harmless warning')\n"
                                    "    print('debugging output', file=sys.stderr)")),
}
MALFORMED = {
    "invalid-json": b'{"cells": [',
    "empty-file": b"",
    "nbformat-3": json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}).encode(),
}


@pytest.fixture(scope="module")
def hostile(course):
    submissions = [grading.Submission(student, A, notebook) for student, notebook in CLASS.items()]
    submissions += [grading.Submission(student, A, content) for student, content in MALFORMED.items()]
    submissions.append(grading.Submission("renamed", A, answer(CORRECT), filename="layernorm (1).ipynb"))
    submissions.append(grading.Submission("extra-files", A, answer(CORRECT),
                                          extra_files={"notes.txt": b"my notes", "scratch.py": b"x = 1\n"}))
    graded_in = grading.grade_class(course, submissions, env=LIMITS)
    return graded_in


def total(graded_in, student):
    scores = grading.cell_scores(graded_in[student], A, student)
    return sum(score for score, _ in scores.values()), sum(top for _, top in scores.values())


def flags(graded_in, student):
    notebook = grading.autograded_notebook(graded_in[student], A, student)
    return " ".join(notebook.metadata.get("course_grading", {}).get("flags", []))


def test_honest_students_are_graded_correctly_beside_hostile_ones(hostile):
    assert total(hostile, "honest") == (11.0, 11.0)
    assert total(hostile, "sample-variance") == (SAMPLE_VARIANCE_SCORE, 11.0)
    assert total(hostile, "extra-files") == (11.0, 11.0)


@pytest.mark.parametrize("student", ["not-implemented", "syntax-error", "name-error"])
def test_an_answer_that_raises_scores_zero_without_stopping_the_grader(hostile, student):
    assert total(hostile, student) == (0.0, 11.0)


def test_a_hanging_cell_times_out_is_flagged_and_grading_goes_on(hostile):
    assert total(hostile, "hangs") == (11.0, 11.0)          # the answer was defined before the loop
    assert "timeout in layernorm" in flags(hostile, "hangs")


@pytest.mark.parametrize("student", ["os-exit", "segfault"])
def test_a_dead_kernel_is_graded_as_far_as_it_got_and_flagged(hostile, student):
    assert total(hostile, student) == (0.0, 11.0)
    assert "kernel died in layernorm" in flags(hostile, student)
    feedback = grading.autograded_notebook(hostile[student], A, student)
    assert "KernelDied" in grading.cell_error(feedback, "test_worked_example")


def test_sys_exit_does_not_kill_the_kernel(hostile):
    assert total(hostile, "sys-exit") == (11.0, 11.0)


def test_runaway_memory_fails_only_its_own_cell(hostile):
    assert total(hostile, "memory-hog") == (11.0, 11.0)


def test_runaway_cpu_is_stopped_and_flagged(hostile):
    assert flags(hostile, "cpu-hog"), "a CPU hog must be flagged (CPU-time limit or timeout)"


@pytest.mark.parametrize("student", ["tests-emptied", "tests-deleted", "tests-promoted"])
def test_edited_deleted_or_relabelled_tests_are_restored_from_the_master(hostile, student):
    assert total(hostile, student) == (SAMPLE_VARIANCE_SCORE, 11.0)


def test_deleted_tests_are_flagged(hostile):
    assert "was deleted and has been restored" in flags(hostile, "tests-deleted")


@pytest.mark.parametrize("student", ["patch-allclose", "patch-equal-and-assert-close", "patch-isinstance",
                                     "patch-numpy", "redefine-assertion-error", "always-equal", "rebind-F"])
def test_gaming_the_checks_earns_nothing(hostile, student):
    score, top = total(hostile, student)
    honest_floor = 0.0 if student == "always-equal" else SAMPLE_VARIANCE_SCORE
    assert score <= honest_floor, f"{student} scored {score} of {top}"


@pytest.mark.parametrize("student", ["patch-allclose", "patch-equal-and-assert-close", "patch-numpy", "rebind-F",
                                     "always-equal"])
def test_tampering_is_detected_and_flagged(hostile, student):
    assert "tampering detected" in flags(hostile, student)


def test_patching_builtins_breaks_only_that_kernel_and_is_flagged(hostile):
    # ipykernel itself relies on isinstance: the kernel stops answering, which the grader records.
    assert "kernel died in layernorm" in flags(hostile, "patch-isinstance")


@pytest.mark.parametrize("student", ["invalid-json", "empty-file", "nbformat-3", "renamed"])
def test_malformed_submissions_get_a_clear_message_and_no_points(hostile, student):
    course = hostile[student]
    result = grading.nbgrader(course, "export", "--exporter=course_grading.PerCheckExport",
                              "--to", str(course / f"{student}.csv"))
    rows = {row["student_id"]: row for row in csv.DictReader((course / f"{student}.csv").open())}
    assert result.returncode == 0
    if student in rows:      # nbgrader registered the student: no points, and a flag says why
        assert float(rows[student]["score"] or 0) == 0
        assert rows[student]["flags"], f"{student} scored 0 without a flag"


def test_grading_is_deterministic(hostile):
    for student in ("honest", "sample-variance"):
        first = grading.cell_scores(hostile[student], A, student)
        twin = grading.cell_scores(hostile[f"{student}-twin"], A, f"{student}-twin")
        assert first == twin
        notebooks = [grading.autograded_notebook(hostile[s], A, s) for s in (student, f"{student}-twin")]
        errors = [[grading.cell_error(nb, cell) for cell in first] for nb in notebooks]
        assert errors[0] == errors[1]


def test_warnings_on_stderr_keep_their_points(hostile):
    assert total(hostile, "warns") == (11.0, 11.0)


def test_per_check_export_has_a_column_per_check_and_the_flags(hostile):
    course = hostile["os-exit"]
    grading.nbgrader(course, "export", "--exporter=course_grading.PerCheckExport", "--to", str(course / "checks.csv"))
    rows = {row["student_id"]: row for row in csv.DictReader((course / "checks.csv").open())}
    assert f"{A}/layernorm/test_population_variance" in rows["os-exit"]
    assert "kernel died" in rows["os-exit"]["flags"]
    assert rows["os-exit"][f"{A}/layernorm/test_worked_example"] == "0.0"


def test_feedback_shows_messages_but_not_hidden_tests(hostile):
    course = hostile["sample-variance"]
    grading.nbgrader(course, "generate_feedback", A, "--student", "sample-variance", "--force")
    html = (course / "autograder" / "feedback" / "sample-variance" / A / "layernorm.html").read_text()
    assert "divides by D-1" in html                              # the check's message reaches the student
    assert "check_example([2.0, 4.0, 6.0, 8.0]" not in html       # the hidden test's code does not
    assert "BEGIN HIDDEN TESTS" not in html


SNOOPER = CORRECT + '''
import glob, os
here = os.getcwd()
course = here.split("/autograder/")[0]
found = glob.glob(course + "/autograder/gradebook/*") + glob.glob(course + "/solutions/*/*.ipynb")
others = [p for p in glob.glob(course + "/autograder/submitted/*/*/*.ipynb")]
for path in found + others:
    try:
        os.remove(path)
    except OSError:
        pass
print("found", len(found) + len(others))
try:
    import socket
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    print("network reachable")
except OSError:
    print("no network")
'''


@pytest.fixture(scope="module")
def snooped(course, tmp_path_factory):
    """A class in which one student tries to read and delete the gradebook, masters and others' work."""
    class_course = tmp_path_factory.mktemp("snoop") / "course"
    import shutil
    shutil.copytree(course, class_course, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback"))
    honest = grading.submit(class_course, "honest", A, answer(CORRECT))
    grading.submit(class_course, "snooper", A, answer(SNOOPER))
    protected = [class_course / "autograder" / "gradebook" / "gradebook.db", honest,
                 *sorted((class_course / "solutions").rglob("*.ipynb"))]
    before = {path: path.read_bytes() for path in protected}
    grading.nbgrader(class_course, "autograde", A, env=LIMITS, check=False)
    return class_course, before


def test_grading_kernels_cannot_see_or_touch_the_gradebook_masters_or_other_submissions(snooped):
    class_course, before = snooped
    for path, content in before.items():
        if path.name != "gradebook.db":         # the grader itself writes the gradebook
            assert path.read_bytes() == content, f"{path} changed during grading"
    assert (class_course / "autograder" / "gradebook" / "gradebook.db").exists()
    feedback = grading.autograded_notebook(class_course, A, "snooper")
    printed = "".join(out.get("text", "") for cell in feedback.cells for out in cell.get("outputs", []))
    assert "found 0" in printed and "no network" in printed
    assert grading.cell_scores(class_course, A, "honest") == grading.cell_scores(class_course, A, "snooper")
