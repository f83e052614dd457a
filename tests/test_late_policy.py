"""The course's late-submission policy (autograder/plugins/late_policy.py), configured through nbgrader's own
late-submission plugin: its arithmetic, and what autograde records for a late and an on-time student."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tools import grading
from tools.course import COURSE, Course

from autograder.plugins import late_policy

A = "01-layernorm"
HOUR, DAY = 3_600, 86_400


@pytest.mark.quick
@pytest.mark.parametrize("seconds_late, percent", [
    (0, None), (10 * 60, None),                       # on time, and within the 15 minutes' grace
    (HOUR, 10), (DAY + 15 * 60, 10),                  # the first started day after the grace
    (DAY + 16 * 60, 20), (2 * DAY + HOUR, 30),
    (30 * DAY, 50),                                   # the cap
])
def test_the_penalty_is_a_share_of_the_points_per_started_day_after_the_grace(seconds_late, percent):
    policy = late_policy.CourseLatePolicy(grace_minutes=15, percent_per_day=10, max_percent=50)
    penalty = policy.late_submission_penalty("ada", 18.0, seconds_late)
    assert penalty == (None if percent is None else 18.0 * percent / 100)


@pytest.mark.quick
def test_nbgraders_stock_methods_stay_available():
    assert late_policy.CourseLatePolicy(penalty_method="zero").late_submission_penalty("ada", 18.0, HOUR) == 18.0
    assert late_policy.CourseLatePolicy(penalty_method="none").late_submission_penalty("ada", 18.0, HOUR) is None


@pytest.fixture(scope="module")
def late_class(course, tmp_path_factory):
    """Two correct hand-ins of assignment 1, one on time and one two days and an hour late, graded by the
    class command in a course whose assignment 1 is due tomorrow."""
    from nbgrader.api import Gradebook

    root = grading.copy_course(course, tmp_path_factory.mktemp("late") / "course")
    due = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=1)
    with Gradebook(Course(root).db_url) as gradebook:
        gradebook.update_or_create_assignment(A, duedate=due.replace(tzinfo=None))
    correct = next(variant for variant in grading.load_catalog(A) if variant.correct).cells
    stamp = lambda when: when.strftime("%Y-%m-%d %H:%M:%S.%f UTC").encode()  # noqa: E731  nbgrader's format
    grading.grade_submissions(root, [
        grading.Submission("on-time", A, grading.submission_from_release(A, correct),
                           extra_files={"timestamp.txt": stamp(due - timedelta(hours=2))}),
        grading.Submission("late", A, grading.submission_from_release(A, correct),
                           extra_files={"timestamp.txt": stamp(due + timedelta(days=2, hours=1))}),
    ])
    return root


@pytest.mark.grading
def test_autograde_records_the_policys_penalty_for_a_late_submission_only(late_class):
    from nbgrader.api import Gradebook

    notebook = COURSE.master_notebook(A).stem
    with Gradebook(Course(late_class).db_url) as gradebook:
        on_time = gradebook.find_submission_notebook(notebook, A, "on-time")
        late = gradebook.find_submission_notebook(notebook, A, "late")
        assert on_time.score == late.score > 0                 # the same answer earns the same points
        assert not on_time.late_submission_penalty
        assert late.late_submission_penalty == pytest.approx(0.3 * late.score)      # three started days
        assert gradebook.find_submission(A, "late").total_seconds_late == pytest.approx((2 * 24 + 1) * HOUR, abs=1)
