"""autograder/plugins/restore.py's RestoreFromRelease, on small hand-made notebooks: whatever a hand-in did to the
release's nbgrader cells (relabelled, retyped, deleted, labels invented), the notebook nbgrader goes on to grade
has the release's cells, in the release's order, with the release's records; a deleted test is flagged. (The
hostile classes grade the same tricks end to end: tests/test_grader_robustness.py.)"""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.plugins import restore
from autograder.cells import FLAGS, grade_id

pytestmark = pytest.mark.quick


def record(grade_id: str, **fields) -> dict:
    return {"nbgrader": {"grade_id": grade_id, "schema_version": 3, "locked": False, "grade": False,
                         "solution": False, **fields}}


def release() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_markdown_cell("# The task", metadata={**record("intro", locked=True), "editable": False}),
        new_code_cell("def answer():\n    raise NotImplementedError", metadata=record("answer", solution=True)),
        new_markdown_cell("Some words between the answer and its test."),
        new_code_cell("assert answer() == 1", metadata={**record("test_answer", grade=True, locked=True, points=2),
                                                         "editable": False, "deletable": False}),
        new_code_cell("assert answer() > 0", metadata=record("test_positive", grade=True, locked=True, points=1)),
    ])


def restored(notebook, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.setattr(restore, "release_notebook", lambda preprocessor, resources: release())
    result, _ = restore.RestoreFromRelease().preprocess(notebook, {"nbgrader": {}})
    return result


def ids(notebook) -> list:
    return [grade_id(cell) for cell in notebook.cells]


def flags(notebook) -> list[str]:
    return list(notebook.metadata.get(FLAGS, {}).get("flags", []))


def handed_in(change) -> nbformat.NotebookNode:
    notebook = release()
    notebook.cells[1].source = "def answer():\n    return 1"
    change(notebook)
    return notebook


def test_an_untouched_hand_in_is_kept_as_it_is(monkeypatch):
    notebook = handed_in(lambda nb: None)
    expected = nbformat.writes(notebook)
    assert nbformat.writes(restored(notebook, monkeypatch)) == expected


def test_a_relabelled_test_gets_the_releases_record_and_keeps_the_students_answer(monkeypatch):
    def relabel(notebook):
        notebook.cells[3].metadata["nbgrader"].update(points=100, solution=True)       # "my answer, worth 100"
        notebook.cells[3].metadata["editable"] = True
    notebook = restored(handed_in(relabel), monkeypatch)
    assert notebook.cells[3].metadata["nbgrader"] == release().cells[3].metadata["nbgrader"]
    assert notebook.cells[3].metadata["editable"] is False
    assert notebook.cells[1].source == "def answer():\n    return 1"           # answers are the student's


def test_a_test_turned_into_markdown_is_the_releases_cell_again(monkeypatch):
    def retype(notebook):
        notebook.cells[3] = new_markdown_cell("nothing to see", metadata=notebook.cells[3].metadata)
    notebook = restored(handed_in(retype), monkeypatch)
    assert notebook.cells[3].cell_type == "code" and notebook.cells[3].source == "assert answer() == 1"


def test_a_deleted_test_after_a_markdown_cell_is_put_back_in_place_and_flagged(monkeypatch):
    """nbgrader's own add_missing_cells fails on this layout; here the cell comes back right after the release's
    nbgrader cell before it (the answer it tests), ahead of the student's unlabelled cells."""
    notebook = restored(handed_in(lambda nb: nb.cells.pop(3)), monkeypatch)
    assert ids(notebook) == ["intro", "answer", "test_answer", None, "test_positive"]
    assert flags(notebook) == ["test cell test_answer was deleted and has been restored"]


def test_every_deleted_cell_comes_back_and_only_tests_are_flagged(monkeypatch):
    notebook = restored(handed_in(lambda nb: nb.cells.clear()), monkeypatch)
    assert ids(notebook) == ["intro", "answer", "test_answer", "test_positive"]
    assert flags(notebook) == ["test cell test_answer was deleted and has been restored",
                               "test cell test_positive was deleted and has been restored"]


def test_a_label_the_release_never_gave_is_removed_and_earlier_flags_are_kept(monkeypatch):
    def invent(notebook):
        notebook.cells.append(new_code_cell("print('extra credit')",
                                            metadata=record("test_bonus", grade=True, points=50)))
        notebook.cells.pop(4)
        notebook.metadata[FLAGS] = {"flags": ["an earlier pass's flag"]}
    notebook = restored(handed_in(invent), monkeypatch)
    assert "nbgrader" not in notebook.cells[-1].metadata and notebook.cells[-1].source == "print('extra credit')"
    assert ids(notebook) == ["intro", "answer", None, "test_answer", "test_positive", None]
    assert flags(notebook) == ["an earlier pass's flag", "test cell test_positive was deleted and has been restored"]
