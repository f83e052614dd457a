"""autograder/classgrader/record.py, the one writer of a graded submission: which steps of the course's pipeline the
class grader's workers leave to the client (nbgrader's gradebook writers), and the order that makes running
them afterwards the same as running them in place. The writer itself is held equal to `nbgrader autograde`
row for row in tests/test_grade_class.py, and a regrade keeps the formgrader's flag there too."""

from __future__ import annotations

import pytest
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.converters import Autograde
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, SaveAutoGrades

from autograder.classgrader import record
from autograder.pages.safe_markup import SafeMarkup
from tools.course import COURSE

pytestmark = pytest.mark.quick


def test_the_workers_pipeline_is_the_courses_without_its_gradebook_writers():
    pipeline = record.grading_pipeline(COURSE.grading_config())
    worker = record.without_writers(pipeline)
    assert SaveAutoGrades in pipeline and AssignLatePenalties in pipeline
    assert worker == [step for step in pipeline if step not in (SaveAutoGrades, AssignLatePenalties)]
    assert pipeline[len(worker):] == [SaveAutoGrades, AssignLatePenalties], "the writers come last"


def test_a_step_that_changes_the_notebook_after_the_writers_is_refused():
    with pytest.raises(ValueError, match="must come last"):
        record.without_writers([ClearMetadataPreprocessor, SaveAutoGrades, SafeMarkup, AssignLatePenalties])


def test_nbgraders_default_pipeline_is_accepted_with_its_check_after_the_writers():
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    assert default[-1] is CheckCellMetadata
    assert record.without_writers(default) == [step for step in default
                                               if step not in (SaveAutoGrades, AssignLatePenalties)]


def test_writers_are_recognised_by_class_or_import_string():
    assert record.writes_gradebook("nbgrader.preprocessors.SaveAutoGrades")
    assert record.writes_gradebook(type("CoursePenalties", (AssignLatePenalties,), {}))
    assert not record.writes_gradebook(SafeMarkup)
