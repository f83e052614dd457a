"""The instructors' page, followed command by command: release through the exchange, fetch, submit,
collect, autograde, feedback and a grades CSV, all with the standard nbgrader CLI."""

import csv
import getpass
import subprocess
import sys
from pathlib import Path

import nbformat

from tools import grading
from tools.course import COURSE, tool_env

ASSIGNMENT = "01-layernorm"


def test_release_fetch_submit_collect_grade_and_export(course, tmp_path):
    # A copy of the session's course: the submission, the grades and the exchange stay out of the scratch
    # course other tests copy their classes from (a "root" submission once reached the cluster's gradebook).
    course = grading.copy_course(course, tmp_path / "course")
    exchange = course / "autograder" / "exchange"
    grading.nbgrader(course, "release_assignment", ASSIGNMENT, "--force")

    # The student's side: fetch into their own folder, answer, submit.
    home = tmp_path / "student"
    home.mkdir()
    student_args = [f"--Exchange.root={exchange}", f"--CourseDirectory.course_id={COURSE.course_id}"]
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    run = lambda *args: subprocess.run([nbgrader, *args, *student_args], cwd=home, env=tool_env(),
                                       check=True, capture_output=True, text=True)
    run("fetch_assignment", ASSIGNMENT)
    fetched = home / ASSIGNMENT / COURSE.master_notebook(ASSIGNMENT).name
    # A correct variant of the catalog, every answer cell of it: the full score below.
    answer = next(variant for variant in grading.load_catalog(ASSIGNMENT) if variant.correct).cells
    notebook = grading.submission_from_release(ASSIGNMENT, answer)
    nbformat.write(notebook, fetched)
    run("submit", ASSIGNMENT)

    # Back to the instructor.
    student = getpass.getuser()
    grading.nbgrader(course, "collect", ASSIGNMENT, "--update")
    assert (course / "autograder" / "submitted" / student / ASSIGNMENT / fetched.name).exists()
    grading.nbgrader(course, "autograde", ASSIGNMENT, "--student", student, "--force")
    grading.nbgrader(course, "generate_feedback", ASSIGNMENT, "--student", student, "--force")
    assert (course / "autograder" / "feedback" / student / ASSIGNMENT / "layernorm.html").exists()

    grades = course / "autograder" / "grades.csv"
    grading.nbgrader(course, "export", "--to", str(grades))
    rows = [row for row in csv.DictReader(grades.open())
            if row["student_id"] == student and row["assignment"] == ASSIGNMENT]
    assert len(rows) == 1
    assert float(rows[0]["score"]) == float(rows[0]["max_score"]) > 0
