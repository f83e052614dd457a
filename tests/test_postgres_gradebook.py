"""A gradebook several graders can share: the course's gradebook on a real PostgreSQL server.

nbgrader's gradebook takes any SQLAlchemy URL (`c.CourseDirectory.db_url` in
autograder/course_directory.py). Here a scratch course points it at a PostgreSQL server the tests start
in a temporary folder (tests/postgres.py), 01-layernorm is generated into it, and a small mixed class
(the assignment's engine sample: the master, the untouched release, catalog bugs, a correct alternative and
a copy of the lessons) is graded by the course's grading engine. Every grade and every error the students see must equal what the same students
got in the session's SQLite gradebook (the `graded` fixture), and nbgrader's own `export` and
`generate_feedback` must work on the PostgreSQL gradebook as they do on SQLite.
"""

from __future__ import annotations

import csv

import pytest

from tests.postgres import postgres  # noqa: F401 (the fixture)
from tools import grading
from tools.course import COURSE, Course

pytestmark = pytest.mark.grading

ASSIGNMENT = "01-layernorm"          # the cheapest to grade


def students() -> list[str]:
    """The engine's sample of the assignment, which the session's SQLite class (`graded`) holds already."""
    return [submission.student for submission in grading.engine_sample(ASSIGNMENT)]


def use_database(course, db_url: str) -> None:
    """Point a scratch course's gradebook at `db_url`, in its copy of nbgrader's layout configuration
    (the one line an instructor adds), so every nbgrader command and every course tool reads it."""
    layout = Course(course).autograder / "course_directory.py"
    layout.write_text(layout.read_text() + f"\nc.CourseDirectory.db_url = {db_url!r}\n")


@pytest.fixture(scope="module")
def pg_course(postgres, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """A scratch course whose gradebook is on PostgreSQL: 01-layernorm generated, the class graded."""
    course = grading.make_course(tmp_path_factory.mktemp("postgres") / "course")
    use_database(course, postgres.create_database("gradebook"))
    grading.nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    submissions = grading.engine_sample(ASSIGNMENT)
    assert len({s.student for s in submissions}) >= 5, "the sample lost its bugs or its alternative"
    summary = grading.grade_submissions(course, submissions)
    assert not summary["failed"], summary["failed"]
    return course, summary


def test_the_gradebook_is_on_the_server(pg_course, postgres):  # noqa: F811
    course, _ = pg_course
    layout = Course(course)
    assert layout.db_url.startswith("postgresql+psycopg2://") and str(postgres.socket_dir) in layout.db_url
    assert layout.gradebook_file is None
    assert not list(course.rglob("*.db")), "a SQLite gradebook was written beside the PostgreSQL one"

    import psycopg2

    with psycopg2.connect(host=str(postgres.socket_dir), user="grader", dbname="gradebook") as connection:
        with connection.cursor() as cursor:
            cursor.execute("SELECT student.id FROM submitted_assignment JOIN assignment"
                           " ON assignment.id = submitted_assignment.assignment_id"
                           " JOIN student ON student.id = submitted_assignment.student_id"
                           " WHERE assignment.name = %s", (ASSIGNMENT,))
            assert sorted(row[0] for row in cursor.fetchall()) == sorted(students())
    connection.close()


def test_same_grades_as_sqlite(pg_course, graded):
    course, _ = pg_course
    assert Course(graded.course).gradebook_file is not None, "the reference class must be graded into SQLite"
    for student in students():
        assert grading.cell_scores(course, ASSIGNMENT, student) == graded.scores(ASSIGNMENT, student), student


def test_same_feedback_errors_as_sqlite(pg_course, graded):
    course, _ = pg_course
    for student in students():
        ours, theirs = grading.autograded_notebook(course, ASSIGNMENT, student), graded.feedback(ASSIGNMENT, student)
        for grade_id in grading.cell_scores(course, ASSIGNMENT, student):
            assert grading.cell_error(ours, grade_id) == grading.cell_error(theirs, grade_id), (student, grade_id)


def test_nbgrader_export(pg_course, graded, tmp_path):
    course, _ = pg_course
    table = tmp_path / "grades.csv"
    grading.nbgrader(course, "export", "--to", str(table))
    rows = {row["student_id"]: row for row in csv.DictReader(table.open()) if row["assignment"] == ASSIGNMENT}
    assert sorted(rows) == sorted(students())
    for student in students():
        scores = graded.scores(ASSIGNMENT, student).values()
        assert float(rows[student]["score"]) == pytest.approx(sum(score for score, _ in scores)), student
        assert float(rows[student]["max_score"]) == pytest.approx(sum(top for _, top in scores)), student


def test_nbgrader_generate_feedback(pg_course):
    course, _ = pg_course
    grading.nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    name = COURSE.master_notebook(ASSIGNMENT).with_suffix(".html").name
    for student in students():
        scores = grading.cell_scores(course, ASSIGNMENT, student).values()
        html = (Course(course).path("feedback", student, ASSIGNMENT) / name).read_text()
        total, top = sum(score for score, _ in scores), sum(top for _, top in scores)
        stem = COURSE.master_notebook(ASSIGNMENT).stem      # the heading reads the totals from the gradebook
        assert f"{stem} (Score: {round(float(total), 2)} / {round(float(top), 2)})" in html, student
