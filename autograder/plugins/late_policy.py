"""The course's late-submission policy, as an nbgrader late-submission plugin (nbgrader's own extension
point: `AssignLatePenalties.plugin_class`, which autograde runs after scoring each notebook).

A submission handed in after the assignment's due date (set with `nbgrader db assignment add NAME
--duedate=...`, or in the formgrader) loses a share of the points it earned for each day late, counted in
started days after a grace period, up to a cap; one handed in on time, or within the grace period, loses
nothing. The defaults (15 minutes' grace, 10 % a day, at most 50 %) are set in nbgrader_config.py, where an
instructor changes them; `penalty_method = "zero"` keeps nbgrader's stock rule instead (a late submission
scores zero). nbgrader records the penalty in the gradebook (`late_submission_penalty`), subtracts it from the
totals of `nbgrader export` and the class report and shows it on the feedback page; the formgrader's lists show
the score before it.
"""

from __future__ import annotations

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float


class CourseLatePolicy(LateSubmissionPlugin):
    """A share of the earned points off per started day late, after a grace period, up to a cap."""

    penalty_method = Enum(("per_day", "none", "zero"), default_value="per_day",
                          help="per_day: this policy; none or zero: nbgrader's stock methods").tag(config=True)
    grace_minutes = Float(15.0, help="minutes after the due date that still count as on time").tag(config=True)
    percent_per_day = Float(10.0, help="percent of the earned points taken off per started day late").tag(config=True)
    max_percent = Float(50.0, help="the most a late submission loses, in percent of its points").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        if self.penalty_method != "per_day":
            return super().late_submission_penalty(student_id, score, total_seconds_late)
        return self.penalty(score, total_seconds_late)

    def days_late(self, total_seconds_late: float) -> int:
        """Started days late, counted from the end of the grace period; 0 within it."""
        past_grace = total_seconds_late - 60 * self.grace_minutes
        return 0 if past_grace <= 0 else math.ceil(past_grace / 86_400)

    def penalty(self, score: float, total_seconds_late: float) -> float | None:
        days = self.days_late(total_seconds_late)
        if days == 0:
            return None
        percent = min(self.max_percent, self.percent_per_day * days)
        return round(score * percent / 100, 6)
