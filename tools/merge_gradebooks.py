"""Merge the gradebooks of courses graded apart (one shard of the class per machine) into one course.

nbgrader has no merge command (jupyter/nbgrader#1424); its maintainer's suggestion there is a loop
over nbgrader's Gradebook API, which is what this is:

    python -m tools.merge_gradebooks all --from /shards/shard0 /shards/shard1      # into this course
    python -m tools.merge_gradebooks 01-layernorm --course /grading/main --from /shards/shard*

Every shard is a whole copy of the course (same masters, same `generate_assignment`) that graded its
students with `python -m tools.grade_class ... --shard I/K`. For each submission a shard finished,
the student, the submission, every grade, comment and flag are written into the target gradebook,
then the shard's `autograder/autograded/<student>/<assignment>/` is copied over. After merging,
`nbgrader generate_feedback` and `nbgrader export` in the target work as if it had graded everyone.

Merging again is harmless (rows are updated, folders replaced), so an interrupted merge is rerun.
The gradebook is written before the folder: the folder is what marks a submission graded.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import warnings
from pathlib import Path

from tools.course import REPO, Course
from tools.grade_class import is_graded

# Everything nbgrader's autograde and the instructor write per graded cell and per notebook.
GRADE_FIELDS = ("auto_score", "manual_score", "extra_credit", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment", "manual_comment")
NOTEBOOK_FIELDS = ("flagged", "late_submission_penalty")


def merge(course: Path, shards: list[Path], assignments: list[str]) -> dict:
    """Copy what each shard course graded into `course`; returns counts and what was left out."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import rmtree       # also removes the read-only files nbgrader writes

    course = Course(course)
    merged, unfinished = 0, []
    # nbgrader's own add_submission (which `nbgrader autograde` calls too) trips SQLAlchemy's
    # "not in session" autoflush warning while it builds a submission's rows; the rows are written
    # all the same (tests/test_grade_class.py compares every merged score), so the warning is noise.
    with warnings.catch_warnings(), Gradebook(course.db_url, course.course_id) as target:
        warnings.filterwarnings("ignore", message=r".*not in session, add operation along", module="nbgrader")
        for shard in (Course(path) for path in shards):
            with Gradebook(shard.db_url, shard.course_id) as source:
                for assignment in assignments:
                    for submission in source.assignment_submissions(assignment):
                        student = submission.student
                        if not is_graded(shard, assignment, student.id):
                            unfinished.append(f"{shard.root.name}:{assignment}/{student.id}")
                            continue
                        copy_submission(target, submission, assignment)
                        graded = course.path("autograded", student.id, assignment)
                        if graded.exists():
                            rmtree(str(graded))
                        shutil.copytree(shard.path("autograded", student.id, assignment), graded)
                        merged += 1
    return {"merged": merged, "unfinished_in_shards": unfinished}


def copy_submission(target, submission, assignment: str) -> None:
    """One submission's rows, from a shard's gradebook into the target's (committed at once)."""
    student = submission.student
    target.update_or_create_student(student.id, first_name=student.first_name, last_name=student.last_name,
                                    email=student.email, lms_user_id=student.lms_user_id)
    fields = {"extension": submission.extension}
    if submission.timestamp is not None:
        fields["timestamp"] = submission.timestamp
    target.update_or_create_submission(assignment, student.id, **fields)
    for notebook in submission.notebooks:
        row = target.find_submission_notebook(notebook.name, assignment, student.id)
        for name in NOTEBOOK_FIELDS:
            setattr(row, name, getattr(notebook, name))
        for grade in notebook.grades:
            cell = target.find_grade(grade.name, notebook.name, assignment, student.id)
            for name in GRADE_FIELDS:
                setattr(cell, name, getattr(grade, name))
        for comment in notebook.comments:
            cell = target.find_comment(comment.name, notebook.name, assignment, student.id)
            for name in COMMENT_FIELDS:
                setattr(cell, name, getattr(comment, name))
    target.db.commit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.merge_gradebooks", description=__doc__.split("\n")[0])
    parser.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help="assignment name(s), or `all`")
    parser.add_argument("--from", dest="shards", type=Path, nargs="+", required=True, metavar="SHARD_COURSE",
                        help="the shard courses to merge")
    parser.add_argument("--course", type=Path, default=REPO, help="the course merged into (default: this one)")
    args = parser.parse_args(argv)

    known = Course(args.course).assignments()
    assignments = known if args.assignments == ["all"] else args.assignments
    unknown = sorted(set(assignments) - set(known))
    if unknown:
        parser.error(f"no such assignment in {args.course}: {', '.join(unknown)}")
    summary = merge(args.course, args.shards, assignments)
    print(f"merged {summary['merged']} graded submissions into {args.course.resolve()}")
    for entry in summary["unfinished_in_shards"]:
        print(f"  not merged (not graded in its shard): {entry}")
    return 1 if summary["unfinished_in_shards"] else 0


if __name__ == "__main__":
    sys.exit(main())
