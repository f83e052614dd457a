"""Grade a round-7 hand-in's floor and attack through the fast path: python -m tests.handins_round7.grade NAME ASSIGNMENT"""
import importlib
import sys

from tools import grading, mutation_grading

name, assignment = sys.argv[1], sys.argv[2]
cells = importlib.import_module(f"tests.handins_round7.{name}").CELLS
subs = [grading.Submission(f"{name}--{kind}", assignment, grading.submission_from_release(assignment, c))
        for kind, c in cells.items()]
result = mutation_grading.grade_known(assignment, subs, workers=1)
for student, (scores, notebook) in result.items():
    print(student)
    for cell, (score, most) in scores.items():
        print(f"   {cell:40s} {score}/{most}")
    if "-v" in sys.argv:
        for cell in notebook.cells:
            for out in cell.get("outputs", []):
                text = out.get("text") or "\n".join(out.get("traceback", []) or [])
                if "Error" in str(text) or "error" in str(out.get("ename", "")):
                    print("   >>", str(text)[-600:].replace("\n", "\n      "))
