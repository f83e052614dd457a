"""The command: `python -m autograder.report ASSIGNMENT... [--course ROOT] [--out DIR] [--roster CSV]
[--canvas-column NAME]`; the package's docstring is its help."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import autograder.report
from autograder.course import Course
from autograder.report.assignment_report import report
from autograder.report.page import COMMAND


def course_of(path: str | None) -> Course:
    """--course: the course's root folder, or its autograder/ folder (where nbgrader runs); by default the course
    of the folder the command runs in (as nbgrader's commands read theirs), else the checkout this package lies in
    (a hub's course is a copy of it, elsewhere)."""
    if not path:
        here = Path.cwd()
        if not any((folder / "autograder" / "course_directory.py").is_file() for folder in (here, here.parent)):
            return Course()
        path = str(here)
    folder = Path(path).resolve()
    if (folder / "course_directory.py").is_file() and not (folder / "autograder").is_dir():
        folder = folder.parent
    return Course(folder)


def main(argv: list[str] | None = None) -> int:
    """Write each assignment's report and exports; the exit status, 0 (a wrong argument exits with 2)."""
    doc = autograder.report.__doc__
    parser = argparse.ArgumentParser(prog=COMMAND, description=doc.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(doc.split("\n")[1:6]))
    parser.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help="assignment name(s), or `all`")
    parser.add_argument("--course", help="the course's root folder or its autograder/ folder (default: the one "
                        "this command runs in, else this checkout)")
    parser.add_argument("--out", help="folder for the report and the exports (default: the course's "
                        "_build/class-report)")
    parser.add_argument("--roster", type=Path, help="CSV mapping nbgrader student ids (column student_id) to "
                        "Canvas's columns: writes the Canvas gradebook import")
    parser.add_argument("--canvas-column", help="the Canvas file's assignment column (default: the assignment's "
                        "name; Canvas matches 'Name (id)' to an existing assignment)")
    args = parser.parse_args(argv)
    course = course_of(args.course)
    known = course.assignments()
    wanted = known if args.assignments == ["all"] else args.assignments
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        parser.error(f"no such assignment in {course.folder('source')}: {', '.join(unknown)}")
    out = Path(args.out) if args.out else course.root / "_build" / "class-report"
    for assignment in wanted:
        written = report(course, assignment, out, args.roster, args.canvas_column if len(wanted) == 1 else None)
        print(f"{assignment}: " + ", ".join(str(path) for path in written.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
