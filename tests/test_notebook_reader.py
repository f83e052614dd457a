"""autograder/notebook.py, the one reader of nbgrader's cell records, its hidden-test delimiters and the course's
own conventions (a test cell's "N points:" and "Hidden checks:" lines, a master's `lessons`).

Its hidden parts are held equal to what nbgrader's own ClearHiddenTests removes, on every test cell of every
master; every check of every master reads a non-empty description (a test cell once lost its description on the
site and in feedback because its visible line used the word "hidden"); a hand-in's malformed metadata reads as
none, never as an error.
"""

from __future__ import annotations

import copy
from collections import Counter

import nbformat
import pytest
from nbgrader.preprocessors import ClearHiddenTests

from autograder import notebook
from tools.course import COURSE

pytestmark = pytest.mark.quick


def master_checks():
    for path in COURSE.master_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if notebook.is_check(cell):
                yield path.parent.name, cell


def test_hidden_parts_are_what_nbgraders_clear_hidden_tests_removes():
    seen = 0
    for _, cell in master_checks():
        cleared = copy.deepcopy(cell)
        ClearHiddenTests().preprocess_cell(cleared, {}, 0)
        kept = cleared.source.splitlines()
        removed = [line for part in notebook.hidden_parts(cell) for line in part.splitlines()]
        delimiters = [line for line in cell.source.splitlines()
                      if notebook.HIDDEN_BEGIN in line or notebook.HIDDEN_END in line]
        # nbgrader drops exactly the parts with their delimiter lines, and keeps every other line.
        dropped = Counter(cell.source.splitlines()) - Counter(kept)
        assert dropped == Counter(removed + delimiters), notebook.grade_id(cell)
        assert len(kept) == len(cell.source.splitlines()) - len(removed) - len(delimiters), notebook.grade_id(cell)
        seen += bool(removed)
    assert seen >= 50, "the masters' hidden parts were not found"


def test_every_check_says_what_it_checks_and_what_its_hidden_part_adds():
    for assignment, cell in master_checks():
        header = notebook.check_header(cell)
        where = f"{assignment}: {notebook.grade_id(cell)}"
        assert header.checks and not header.checks[0].isdigit(), where
        assert bool(header.hidden) == notebook.has_hidden_part(cell), where
        if header.hidden:
            assert header.hidden_sentence.lower().startswith("hidden check"), where


def test_a_visible_line_that_uses_the_word_hidden_stays_visible():
    cell = nbformat.v4.new_code_cell("# 2 points: widths width -> hidden -> width.\n"
                                     "# Hidden checks: other widths.\n"
                                     "### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS\n")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 2}
    header = notebook.check_header(cell)
    assert header.checks == "widths width -> hidden -> width."
    assert (header.hidden, header.hidden_sentence) == ("other widths.", "Hidden checks: other widths.")
    assert notebook.hidden_parts(cell) == ["assert True"]


@pytest.mark.parametrize("metadata", [{"nbgrader": "grade"}, {"nbgrader": ["grade_id"]}, {"nbgrader": None}, [], "x"])
def test_a_malformed_record_reads_as_none(metadata):
    cell = nbformat.v4.new_code_cell("x = 1")
    cell["metadata"] = metadata
    assert (notebook.nbgrader_record(cell), notebook.grade_id(cell)) == ({}, None)
    assert not notebook.is_test(cell) and not notebook.is_check(cell)


@pytest.mark.parametrize("lessons, read", [(["01-layernorm", 3, None, "02-mlp"], ["01-layernorm", "02-mlp"]),
                                           ("01-layernorm", []), ({"a": 1}, []), (None, [])])
def test_lessons_keeps_only_names(lessons, read):
    nb = nbformat.v4.new_notebook()
    nb.metadata["lessons"] = lessons
    assert notebook.lessons(nb) == read


def test_feedback_shows_a_placeholder_where_each_hidden_part_was_even_an_unclosed_one():
    cell = nbformat.v4.new_code_cell("def check():\n    assert ok()\n    ### BEGIN HIDDEN TESTS\n    assert secret()\n"
                                     "    ### END HIDDEN TESTS\n    print('passed')\n### BEGIN HIDDEN TESTS\nsecret2()")
    assert notebook.without_hidden_parts(cell, "# hidden") == (
        "def check():\n    assert ok()\n    # hidden\n    print('passed')\n# hidden")
    for _, master in master_checks():
        shown = notebook.without_hidden_parts(master, "# hidden")
        assert notebook.HIDDEN_BEGIN not in shown and not any(part.strip() and part in shown
                                                              for part in notebook.hidden_parts(master))


@pytest.mark.parametrize("change", [
    lambda record: None, lambda record: record.update(points="x"), lambda record: record.update(grade_id=3),
    lambda record: record.pop("locked"), lambda record: record.update(schema_version=2),
    lambda record: record.update(schema_version=9), lambda record: record.update(extra=1),
    lambda record: record.update(grade="yes"), lambda record: record.update(solution=True, grade=True, locked=True),
    lambda record: record.update(grade_id="a b"),
], ids=["intact", "points", "grade_id", "locked", "too old", "too new", "extra key", "grade", "locked solution",
        "grade_id spaces"])
def test_the_course_checks_cell_records_as_nbgrader_does(change):
    """CheckCellMetadata with its schema compiled once (the course's, in both passes of grading) passes and fails
    exactly as nbgrader's own, with the same error, on every master."""
    from nbgrader.nbgraderformat import MetadataValidator

    for assignment in COURSE.assignments():
        master = nbformat.read(COURSE.master_notebook(assignment), as_version=4)
        cell = next(cell for cell in master.cells if notebook.nbgrader_record(cell).get("grade"))
        change(cell.metadata["nbgrader"])
        said = []
        for validator in (MetadataValidator(), notebook.metadata_validator()):
            try:
                validator.validate_nb(copy.deepcopy(master))
                said.append("valid")
            except Exception as error:             # noqa: BLE001 (compared, type and message)
                said.append(f"{type(error).__name__}: {error}")
        assert said[0] == said[1], assignment
