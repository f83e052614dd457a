"""The CSV files instructors open in a spreadsheet or import into their LMS: the report's per-check grades, the
Canvas gradebook import, and the roster that maps nbgrader ids to Canvas's students. `write_csv` is the one
writer of every such file, `nbgrader export`'s per-check file (autograder/plugins/export.py) included, so that no
file can skip `spreadsheet_safe`: a student id or flag that starts like a formula stays text."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autograder.report.data import ClassData, points

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "Points Possible"
ROSTER_ID = "student_id"


def spreadsheet_safe(value):
    """A spreadsheet treats a cell that starts with = + - @ (or a tab or carriage return) as a formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    """The header as given (the course's own column names), then each row with every text cell made
    spreadsheet-safe; numbers and None (an empty cell) are written as the csv module writes them."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([spreadsheet_safe(value) for value in row] for row in rows)


def write_checks_csv(data: ClassData, path: Path) -> None:
    """student, one column per graded cell, total: the gradebook's scores (the total before any late penalty,
    which has a column of its own when there is one)."""
    late = any(result.late_penalty for result in data.results)
    header = ["student", *(cell.column for cell in data.cells), "total"] + (["late_penalty"] if late else [])
    write_csv(path, header, ([result.student, *(points(result.scores.get(cell.column, 0.0)) for cell in data.cells),
                              points(result.total)] + ([points(result.late_penalty)] if late else [])
                             for result in data.results))


@dataclass
class RosterEntry:
    student: str                          # the nbgrader id ('' when the roster gives none)
    lms: dict[str, str]                   # Canvas's columns


def read_roster(path: Path) -> list[RosterEntry]:
    """The roster's students in its order; Canvas's "Points Possible" row skipped, a repeated id refused."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        fields = [name.strip() for name in reader.fieldnames or []]
        if ROSTER_ID not in fields:
            raise SystemExit(f"{path}: the roster needs a column {ROSTER_ID!r} (the nbgrader student id); "
                             f"it has {fields}")
        entries, seen = [], set()
        for row in reader:
            row = {key.strip(): (value or "").strip() for key, value in row.items() if isinstance(key, str)}
            if POINTS_POSSIBLE in row.get("Student", ""):
                continue                                       # Canvas's own export has this row
            student = row.get(ROSTER_ID, "")
            if student and student in seen:
                raise SystemExit(f"{path}: student {student!r} appears twice in the roster")
            seen.add(student)
            entries.append(RosterEntry(student, {column: row.get(column, "") for column in CANVAS_COLUMNS}))
    return entries


def write_canvas_csv(data: ClassData, roster: list[RosterEntry], path: Path, column: str) -> list[str]:
    """The Canvas gradebook import; returns a line for each student it could not place."""
    by_id = {result.student: result for result in data.results}
    problems = [f"{result.student}: graded, but not in the roster: not in the Canvas file"
                for result in data.results if result.student not in {entry.student for entry in roster}]
    rows = [[POINTS_POSSIBLE, "", "", "", "", points(data.max_score)]]
    for entry in roster:
        result = by_id.get(entry.student)
        if result is None:
            who = entry.student or entry.lms.get("Student") or entry.lms.get("ID") or "a roster row"
            problems.append(f"{who}: in the roster, but no graded submission: left blank in the Canvas file"
                            + ("" if entry.student else " (the roster gives no nbgrader student_id)"))
        score = points(max(0.0, result.final)) if result else ""
        rows.append([*(entry.lms[c] for c in CANVAS_COLUMNS), score])
    write_csv(path, [*CANVAS_COLUMNS, column], rows)
    return problems
