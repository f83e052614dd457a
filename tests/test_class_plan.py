"""The class grader's plan (autograder/classgrader/class_plan.py): which submissions of a class are graded, decided from
the instructor's side alone, so that a run stopped at any moment resumes where it stopped.

Each test lays out a scratch course by hand (the course's own nbgrader layout, a master notebook, hand-ins
with their timestamp.txt, autograded folders and a SQLite gradebook written with nbgrader's API) and asks the
plan: nothing is graded or executed. Covered: a student never graded is planned, one graded is skipped,
`force` plans everyone, a half-written autograded notebook or a gradebook without the submission counts as
not graded (resumption), a hand-in newer than the gradebook's time is graded again, `students` restricts the
plan, and a timestamp.txt that holds no time becomes a failed outcome that says how to fix it.
"""

from __future__ import annotations

import json
import shutil
import warnings
from datetime import datetime
from pathlib import Path

import pytest

from autograder.classgrader import class_plan, grading_kit
from autograder.classgrader.class_plan import Unit, is_graded, plan, unreadable_timestamp
from autograder.course import LAYOUT_CONFIG, Course

pytestmark = pytest.mark.quick

ASSIGNMENT = "a1"
NOTEBOOK = "a1.ipynb"
GRADED_AT = datetime(2024, 3, 1, 12, 0, 0)        # the submission time the gradebook records (naive UTC)


@pytest.fixture(autouse=True)
def alembic_head_in_process(monkeypatch):
    """nbgrader stamps a new gradebook with its migrations' head, which it asks a subprocess running `alembic`
    for (about 2 CPU-s); the same head is read here in-process from nbgrader's own migration scripts."""
    import nbgrader.api

    head = grading_kit.alembic_head()
    monkeypatch.setattr(nbgrader.api, "get_alembic_version", lambda: head)


def notebook_json(executed: bool) -> str:
    """A notebook of one code cell, as the grader leaves it (executed) or as the sanitized copy is before
    the kernel ran (no count, no outputs)."""
    cell = {"cell_type": "code", "metadata": {}, "source": "x = 1",
            "execution_count": 1 if executed else None,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}] if executed else []}
    return json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# A1"}, cell],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


class PlanCourse:
    """A scratch course laid out as nbgrader lays this one out (its own course_directory.py)."""

    def __init__(self, root: Path):
        (root / "autograder").mkdir(parents=True)
        shutil.copy(Course().autograder / LAYOUT_CONFIG, root / "autograder" / LAYOUT_CONFIG)
        self.course = Course(root)
        self.course.prepare()
        master = self.course.path("source", ".", ASSIGNMENT)
        master.mkdir(parents=True)
        (master / NOTEBOOK).write_text(notebook_json(executed=False))

    def hand_in(self, student: str, timestamp: str | None = "2024-03-01 12:00:00") -> Path:
        folder = self.course.path("submitted", student, ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_text(notebook_json(executed=False))
        if timestamp is not None:
            (folder / "timestamp.txt").write_text(timestamp)
        return folder

    def autograde(self, student: str, executed: bool = True) -> None:
        """What the grader leaves: the autograded folder and its notebook."""
        folder = self.course.path("autograded", student, ASSIGNMENT)
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_text(notebook_json(executed))

    def record(self, student: str, timestamp: datetime | None = GRADED_AT) -> None:
        """The gradebook's row for the submission, as autograde writes it."""
        from nbgrader.api import Gradebook

        # nbgrader's add_submission trips SQLAlchemy's autoflush warning (as under autograde: autograder/classgrader/record.py);
        # the row is written all the same.
        with warnings.catch_warnings(), Gradebook(self.course.db_url, self.course.course_id) as gradebook:
            warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
            gradebook.update_or_create_assignment(ASSIGNMENT)
            gradebook.update_or_create_student(student)
            gradebook.update_or_create_submission(ASSIGNMENT, student, timestamp=timestamp)

    def graded(self, student: str, **hand_in) -> None:
        """A student handed in and graded, as a finished run leaves them."""
        self.hand_in(student, **hand_in)
        self.autograde(student)
        self.record(student)

    def plan(self, force: bool = False, students: list[str] | None = None) -> tuple[list[str], int]:
        units, skipped = plan(self.course, [ASSIGNMENT], force, students)
        assert all(unit.assignment == ASSIGNMENT for unit in units)
        return [unit.student for unit in units], skipped


@pytest.fixture
def plan_course(tmp_path) -> PlanCourse:
    return PlanCourse(tmp_path / "course")


def test_a_student_never_graded_is_planned_and_one_graded_is_skipped(plan_course):
    plan_course.hand_in("ungraded")
    plan_course.graded("graded")
    assert plan_course.plan() == (["ungraded"], 1)


def test_without_a_gradebook_every_hand_in_is_planned(plan_course):
    plan_course.hand_in("alice")
    plan_course.hand_in("bob")
    plan_course.autograde("bob")             # a folder alone is not enough: the gradebook never saw it graded
    assert not plan_course.course.gradebook_file.exists()
    assert plan_course.plan() == (["alice", "bob"], 0)


def test_an_autograded_folder_the_gradebook_never_recorded_is_graded_again(plan_course):
    """A run stopped after the worker's folder was written but before the gradebook's row: not graded."""
    plan_course.graded("alice")
    plan_course.hand_in("bob")
    plan_course.autograde("bob")
    assert plan_course.plan() == (["bob"], 1)


def test_force_plans_every_hand_in_graded_or_not(plan_course):
    plan_course.graded("alice")
    plan_course.graded("bob")
    plan_course.hand_in("carol")
    assert plan_course.plan() == (["carol"], 2)
    assert plan_course.plan(force=True) == (["alice", "bob", "carol"], 0)


def test_students_restricts_the_plan_and_its_skipped_count(plan_course):
    for student in ("alice", "bob"):
        plan_course.graded(student)
    for student in ("carol", "dave"):
        plan_course.hand_in(student)
    assert plan_course.plan(students=["bob", "dave", "nobody"]) == (["dave"], 1)
    assert plan_course.plan(force=True, students=["alice"]) == (["alice"], 0)


def test_a_half_written_autograded_notebook_is_graded_again(plan_course):
    """A run stopped after the sanitized copy was written and before the graded one replaced it: the folder
    and the gradebook's row are there, but no code cell ran."""
    plan_course.hand_in("interrupted")
    plan_course.autograde("interrupted", executed=False)
    plan_course.record("interrupted")
    plan_course.graded("finished")
    assert plan_course.plan() == (["interrupted"], 1)


@pytest.mark.parametrize("name, content", [
    ("missing", None),
    ("empty", b""),
    ("not JSON", b'{"cells": [ {"cell_type": "code", "outputs": ['),     # cut while it was written
    ("no cells", b'{"metadata": {}}'),
    ("cells not a list", b'{"cells": {"cell_type": "code", "execution_count": 1}}'),
    ("not an object", b"[1, 2, 3]"),
])
def test_an_autograded_notebook_the_grader_did_not_finish_is_graded_again(plan_course, name, content):
    plan_course.graded("student")
    notebook = plan_course.course.path("autograded", "student", ASSIGNMENT) / NOTEBOOK
    notebook.unlink()
    if content is not None:
        notebook.write_bytes(content)
    assert plan_course.plan() == (["student"], 0)


def test_a_cell_marked_as_not_run_counts_as_executed(plan_course):
    """nbgrader leaves a cell it did not run with outputs but no count (an error before it): finished."""
    plan_course.graded("student")
    notebook = plan_course.course.path("autograded", "student", ASSIGNMENT) / NOTEBOOK
    content = json.loads(notebook.read_text())
    content["cells"][1]["execution_count"] = None
    notebook.write_text(json.dumps(content))
    assert plan_course.plan() == ([], 1)


def test_a_notebook_not_in_the_hand_in_is_not_required_to_be_executed(plan_course):
    plan_course.graded("student")
    (plan_course.course.path("submitted", "student", ASSIGNMENT) / NOTEBOOK).unlink()
    (plan_course.course.path("autograded", "student", ASSIGNMENT) / NOTEBOOK).unlink()
    assert plan_course.plan() == ([], 1)


def test_a_hand_in_newer_than_the_gradebooks_time_is_graded_again(plan_course):
    plan_course.graded("resubmitted", timestamp="2024-03-02 09:30:00")      # a day after GRADED_AT
    plan_course.graded("same", timestamp="2024-03-01 12:00:00")
    plan_course.graded("older", timestamp="2024-02-28 08:00:00")
    assert plan_course.plan() == (["resubmitted"], 2)


def test_a_hand_in_without_a_time_on_either_side_stays_graded(plan_course):
    plan_course.graded("no stamp", timestamp=None)
    plan_course.hand_in("no recorded time")
    plan_course.autograde("no recorded time")
    plan_course.record("no recorded time", timestamp=None)
    assert plan_course.plan() == ([], 2)


def test_an_autograded_folder_that_is_a_link_is_not_graded(plan_course, tmp_path):
    """The folder must be the grader's own: a link (to a folder of executed notebooks elsewhere) is not."""
    plan_course.graded("student")
    graded = plan_course.course.path("autograded", "student", ASSIGNMENT)
    elsewhere = tmp_path / "elsewhere"
    graded.rename(elsewhere)
    graded.symlink_to(elsewhere, target_is_directory=True)
    assert plan_course.plan() == (["student"], 0)


def test_one_students_broken_folder_is_planned_without_stopping_the_plan(plan_course, monkeypatch):
    plan_course.graded("alice")
    plan_course.graded("bob")
    real = class_plan.executed

    def broken_for_alice(notebook: Path) -> bool:
        if "alice" in notebook.parts:
            raise PermissionError(notebook)
        return real(notebook)

    monkeypatch.setattr(class_plan, "executed", broken_for_alice)
    assert plan_course.plan() == (["alice"], 1)


def test_a_folder_that_is_not_a_hand_in_is_not_planned(plan_course):
    plan_course.hand_in("alice")
    (plan_course.course.folder("submitted") / "bob").mkdir()                       # no a1 in it
    (plan_course.course.folder("submitted") / "carol").mkdir()
    (plan_course.course.folder("submitted") / "carol" / ASSIGNMENT).write_text("a file, not a folder")
    assert plan_course.plan() == (["alice"], 0)


def test_is_graded_reads_the_gradebook_when_not_given_its_times(plan_course):
    plan_course.graded("alice")
    plan_course.hand_in("bob")
    assert is_graded(plan_course.course, ASSIGNMENT, "alice")
    assert not is_graded(plan_course.course, ASSIGNMENT, "bob")
    assert class_plan.graded_timestamps(plan_course.course, ASSIGNMENT) == {"alice": GRADED_AT}
    assert class_plan.graded_timestamps(plan_course.course, "never assigned") == {}


# --- a timestamp.txt that holds no time ----------------------------------------------------------------------

@pytest.mark.parametrize("name, content, why", [
    ("words", b"last tuesday!", "is not written as a time"),
    ("not a date", b"2024-13-45 99:99:99", "is not a time"),
    ("not text", b"\xff\xfe2024", "timestamp.txt is not text"),
    ("oversized", b"2024-03-01 12:00:00" + b" " * 200, "timestamp.txt is 219 bytes, over the limit of 100 bytes"),
])
def test_a_timestamp_that_holds_no_time_is_a_failed_outcome_that_says_how_to_fix_it(plan_course, name, content,
                                                                                    why):
    folder = plan_course.hand_in("student", timestamp=None)
    (folder / "timestamp.txt").write_bytes(content)
    outcome = unreadable_timestamp(plan_course.course, Unit(ASSIGNMENT, "student"))
    assert outcome is not None
    assert (outcome.assignment, outcome.student, outcome.success, outcome.seconds, outcome.worker) == \
        (ASSIGNMENT, "student", False, 0.0, "")
    assert outcome.error.startswith(f"{folder / 'timestamp.txt'} does not hold a time (")
    assert why in outcome.error
    assert outcome.error.endswith("correct it or remove it, then grade again")


def test_a_timestamp_that_is_a_link_is_refused_unread(plan_course, tmp_path):
    folder = plan_course.hand_in("student", timestamp=None)
    (tmp_path / "secret").write_text("2024-03-01 12:00:00")
    (folder / "timestamp.txt").symlink_to(tmp_path / "secret")
    outcome = unreadable_timestamp(plan_course.course, Unit(ASSIGNMENT, "student"))
    assert outcome is not None and "timestamp.txt is not a regular file" in outcome.error


def test_a_readable_or_missing_timestamp_is_no_failure(plan_course):
    plan_course.hand_in("stamped", timestamp="2024-03-01T12:00:00+01:00")
    plan_course.hand_in("unstamped", timestamp=None)
    plan_course.hand_in("blank", timestamp="  \n")        # nbgrader reads no time from it, and fails on nothing
    for student in ("stamped", "unstamped", "blank"):
        assert unreadable_timestamp(plan_course.course, Unit(ASSIGNMENT, student)) is None
    assert class_plan.read_timestamp(plan_course.course.path("submitted", "stamped", ASSIGNMENT)) == \
        datetime(2024, 3, 1, 11, 0, 0)                                     # naive UTC, as nbgrader reads it


def test_an_unreadable_timestamp_does_not_make_a_graded_hand_in_look_resubmitted(plan_course):
    """Its time cannot be compared, so the gradebook's word stands; the grader reports it when it grades."""
    folder = plan_course.hand_in("student", timestamp=None)
    plan_course.autograde("student")
    plan_course.record("student")
    (folder / "timestamp.txt").write_text("not a time!")
    assert plan_course.plan() == ([], 1)
