"""Place a round-7 hand-in's floor and attack in autograder/submitted/ as students r7-NAME-floor, r7-NAME-attack:
python -m tests.handins_round7.submit NAME ASSIGNMENT"""
import importlib
import sys

from tools import grading
from tools.course import COURSE

name, assignment = sys.argv[1], sys.argv[2]
for kind, cells in importlib.import_module(f"tests.handins_round7.{name}").CELLS.items():
    student = f"r7-{name.replace('_', '-')}-{kind}"
    print(student, grading.submit(COURSE.root, student, assignment, grading.submission_from_release(assignment, cells)))
