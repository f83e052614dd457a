"""What GuardedExecute does for a checked assignment (autograder/plugins/checker_link.py), the parts that need no
kernel: which assignments are checked, which cells are given, the key the hidden inputs are drawn from, the reply
for a kernel that did not answer, and how a checker's outcome and a kernel's reply are read."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from autograder.checker import unpacking, values
from autograder.course import Course
from autograder.plugins.checker_link import (checker_text, dig, hand_in_key, is_given, no_answer,
                                             runs_in_checker)
from tools.course import COURSE

pytestmark = pytest.mark.quick


def test_every_assignment_and_one_added_later_runs_its_checks_in_the_checker():
    """The course's configuration names the checked assignments by a pattern: each of today's, and one added
    tomorrow with no line of configuration, runs its test cells in the checker, never in the student's kernel."""
    checked = Course(COURSE.root).grading_config().GuardedExecute.checked
    assert all(runs_in_checker(assignment, checked) for assignment in [*COURSE.assignments(), "99-added-later"])
    assert runs_in_checker("01-layernorm", ["01-*"]) and not runs_in_checker("02-mlp", ["01-*", "01-layernorm"])


def test_the_hand_ins_key_covers_every_file_its_kernel_can_read(tmp_path):
    """An answer can live in a file beside the notebook as well as in a cell: a hand-in whose cells are the same
    but whose file differs meets new hidden inputs; nbgrader's own records, which the kernel never gets, change
    nothing (a regrade, or a resubmission of the same hand-in, meets the same ones)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("table = open('notes.txt').read()")])
    (tmp_path / "notes.txt").write_text("a table of answers")
    (tmp_path / "timestamp.txt").write_text("2026-12-06 10:00:00")
    first = hand_in_key(nb, b"secret", str(tmp_path))
    (tmp_path / "timestamp.txt").write_text("2026-12-07 10:00:00")
    (tmp_path / "submission_secret.txt").write_text("another")
    assert hand_in_key(nb, b"secret", str(tmp_path)) == first
    (tmp_path / "notes.txt").write_text("another table")
    assert hand_in_key(nb, b"secret", str(tmp_path)) != first
    (tmp_path / "notes.txt").write_text("a table of answers")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "more.txt").write_text("more")
    assert hand_in_key(nb, b"secret", str(tmp_path)) != first


def test_the_graders_process_answers_for_a_silent_kernel_without_importing_pytorch():
    """The grader builds the reply for a kernel that did not answer in the checker's format by hand: packing it
    with values.pack would import PyTorch into every grading process (3 s and 300 MB each, measured)."""
    tree = {"raised": {"type": "RuntimeError", "bases": ["RuntimeError"], "message": "no answer (é)"}}
    assert no_answer("no answer (é)") == values.pack(tree)
    assert unpacking.unpack(no_answer("x"), 2**20)["raised"]["message"] == "x"
    loaded = subprocess.run([sys.executable, "-c", "import sys, autograder.plugins.guarded_execute; from "
                             "autograder.plugins.checker_link import no_answer; no_answer('x'); "
                             "print('torch' in sys.modules)"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def test_the_key_follows_the_students_cells_and_nothing_the_grader_restores():
    """An answer cell or a cell the student added changes the hidden inputs; a test cell or a locked cell, which the
    grader restores from the master whatever the hand-in holds, and the course's secret is what no one else has."""
    def cell(source, **record):
        made = nbformat.v4.new_code_cell(source)
        if record:
            made.metadata["nbgrader"] = {"grade_id": "c", "grade": False, "solution": False, "locked": False,
                                         **record}
        return made

    def key(*cells, secret=b"secret"):
        return hand_in_key(nbformat.v4.new_notebook(cells=list(cells)), secret)

    answer, test, given = cell("x = 1", solution=True), cell("assert x", grade=True, points=1), cell("import torch",
                                                                                                     locked=True)
    first = key(answer, test, given)
    assert key(answer, cell("assert x == 2", grade=True, points=1), cell("import numpy", locked=True)) == first
    assert key(cell("x = 2", solution=True), test, given) != first
    assert key(answer, test, given, cell("y = 3")) != first
    assert key(answer, test, given, secret=b"another") != first


def test_a_given_cell_is_locked_code_that_is_neither_a_test_nor_an_answer():
    def cell(kind="code", **record):
        made = nbformat.v4.new_code_cell("x") if kind == "code" else nbformat.v4.new_markdown_cell("x")
        made.metadata["nbgrader"] = {"grade_id": "c", "grade": False, "solution": False, "locked": False, **record}
        return made

    assert is_given(cell(locked=True))
    assert not is_given(cell(locked=True, grade=True, points=1))          # a test
    assert not is_given(cell(locked=True, solution=True))                 # an answer, however it is marked
    assert not is_given(cell(kind="markdown", locked=True))
    assert not is_given(cell()) and not is_given(nbformat.v4.new_code_cell("x"))


def test_a_checkers_text_is_cut_and_always_writable():
    assert checker_text("a" * 10, 4) == "aaaa"
    assert checker_text(None, 4) == "" and checker_text(12, 4) == "12"
    text = checker_text("bad \udc80 surrogate", 100)                     # a student's message crosses whole
    text.encode("utf-8")
    assert text.startswith("bad ") and text.endswith(" surrogate")


def test_a_kernels_reply_is_read_whatever_shape_it_has():
    assert dig({"a": {"b": 1}}, "a", "b") == 1
    assert dig({"a": [1]}, "a", "b") is None and dig([], "a") is None and dig({"a": {}}, "a", "b") is None
