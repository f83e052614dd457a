"""The markers say what each test runs: tests/markers.py records the course's grading, notebook-executing
and browser entry points while a test runs and fails a test that used one without its marker."""

import importlib
import subprocess
import sys

import pytest

from tests import markers

pytestmark = pytest.mark.quick


def test_every_entry_point_records_its_use_in_this_session():
    for points in markers.ENTRY_POINTS.values():
        for point in points:
            module_name, _, attribute = point.partition(":")
            owner = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            assert getattr(getattr(owner, name), "__recorded__", None), f"{point} is not watched"
    assert getattr(subprocess.Popen.__init__, "__recorded__", None), "subprocesses are not watched"


def test_a_test_that_grades_executes_or_opens_a_browser_unmarked_is_caught():
    grading = {"grading": {"autograder.classgrader.grade_class:grade_class"}}
    assert markers.missing_markers(set(), grading)
    assert markers.missing_markers({"lessons"}, grading)
    assert not markers.missing_markers({"grading"}, grading)
    assert markers.missing_markers({"grading"}, {"browser": {"a subprocess running chromium"}})
    assert not markers.missing_markers({"lab", "grading"}, {"browser": {"x"}, "grading": {"y"}})
    assert markers.missing_markers({"quick", "grading"}, grading), "a quick test may grade nothing"
    assert not markers.missing_markers({"quick"}, {})


def test_this_quick_test_records_a_subprocess_that_grades():
    """The recorder reads a subprocess's command line (here one that only mentions nbgrader)."""
    markers.USED.clear()
    subprocess.run([sys.executable, "-c", "print('nbgrader')"], capture_output=True, check=True)
    used = dict(markers.USED)
    markers.USED.clear()          # the test itself stays quick: what it ran was a print
    assert "grading" in used
