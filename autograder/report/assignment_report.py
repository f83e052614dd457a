"""One assignment's report and exports, written into a folder: what the command does for each assignment it
is given, and what the tests call on a class whose answers they know."""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.course import Course
from autograder.report.analysis import item_analysis, mistakes
from autograder.report.csv_files import read_roster, write_canvas_csv, write_checks_csv
from autograder.report.data import read_class
from autograder.report.figures import figures
from autograder.report.page import render


def report(course: Course, assignment: str, out: Path, roster: Path | None = None,
           canvas_column: str | None = None) -> dict[str, Path]:
    """Write the report and the exports of one assignment into `out`; returns what was written. Problems with
    the roster are printed on stderr too."""
    from autograder.pages import summary

    data = read_class(course, assignment)
    items = item_analysis(data)
    found = mistakes(data, summary)
    out.mkdir(parents=True, exist_ok=True)
    written = {"checks": out / f"{assignment}-checks.csv"}
    write_checks_csv(data, written["checks"])
    exports = {written["checks"].name: "per-check grades: one row per graded student, one column per graded cell"}
    problems = None
    if roster is not None:
        written["canvas"] = out / f"{assignment}-canvas.csv"
        problems = write_canvas_csv(data, read_roster(roster), written["canvas"], canvas_column or assignment)
        exports[written["canvas"].name] = "Canvas gradebook import"
    for problem in problems or []:
        print(f"{assignment}: {problem}", file=sys.stderr)
    for student, why in data.not_graded:
        print(f"{assignment}: {student}: not graded: {why}", file=sys.stderr)
    charts = figures(data, items) if data.results else {}
    written["report"] = out / f"{assignment}-report.html"
    written["report"].write_text(render(data, items, found, charts, problems, exports))
    return written
