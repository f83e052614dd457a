"""The gradebook's scores per test cell: python -m tests.handins_round7.scores ASSIGNMENT STUDENT..."""
import sys

from nbgrader.api import Gradebook

assignment, students = sys.argv[1], sys.argv[2:]
url = None
with Gradebook(url or "sqlite:///autograder/gradebook/gradebook.db") as gb:
    for student in students:
        sub = gb.find_submission(assignment, student)
        print(student, "total", sub.score, "/", sub.max_score)
        for nb in sub.notebooks:
            for grade in nb.grades:
                if grade.cell.name.startswith("test_"):
                    print(f"   {grade.cell.name:40s} {grade.score}/{grade.max_score}")
