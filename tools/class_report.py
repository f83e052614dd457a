"""After grading: what the class got wrong, and grades an LMS accepts. One command per assignment:

    python -m tools.class_report 01-layernorm                       # this checkout's course
    python -m tools.class_report 01-layernorm --roster roster.csv   # and a Canvas gradebook import
    python -m tools.class_report all --course /srv/course --out /srv/reports

writes into --out (by default the course's `_build/class-report/`, git-ignored), for each assignment:

- `NN-name-report.html`: one self-contained page (figures inline, nothing loaded from elsewhere): the score
  distribution; each graded cell's pass rate and item analysis (difficulty: the share who passed;
  discrimination: the point-biserial correlation of passing it with the rest of the score, flagged when near
  zero or negative); the mistakes the checks named, ranked by how many students made them, each with its
  students; the submissions the grader flagged and the students not graded; how long each notebook ran.
- `NN-name-checks.csv`: one row per graded student: the student id, one column per graded cell, the total.
- `NN-name-canvas.csv` (with --roster): a Canvas gradebook import: Canvas's columns Student, ID, SIS User
  ID, SIS Login ID and Section, then the assignment's column (--canvas-column; the assignment's name, which
  makes Canvas create the assignment, or "Name (canvas id)" of an existing one), with the "Points Possible"
  row second. The score is the gradebook's, less any late penalty.

Everything is read through nbgrader's API: the gradebook at the course's db_url (autograder/course_directory.py,
SQLite or PostgreSQL alike) for the scores, and the autograded notebooks for what each check said (the
error it raised, as the feedback shows it: autograder/feedback_summary.py), the grader's flags (their
metadata, autograder/cells.py) and the cells' execution times (nbclient's timestamps in each
cell's metadata; kernel start-up and saving are not in them). A student missing from the roster or from
the gradebook is named in the report and on stderr, never dropped silently. Every text cell of the CSV files
is written so that a spreadsheet reads it as text, never as a formula (autograder.export.spreadsheet_safe), and
everything a student wrote is escaped in the page.

The roster is a CSV file with the nbgrader id in a column `student_id` and Canvas's own columns (Student, ID,
SIS User ID, SIS Login ID, Section), as Canvas's gradebook export writes them: export the gradebook from
Canvas, add the `student_id` column, and pass the file.
"""

from __future__ import annotations

import argparse
import base64
import csv
import html
import io
import math
import re
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from autograder import bounded
from autograder.cells import notebook_flags
from autograder.notebook import grade_id, is_check, nbgrader_record
from autograder.export import spreadsheet_safe
from tools.course import COURSE, Course, venv_on_path

# Item analysis: a discrimination this close to zero says passing the check tells nothing about the rest.
NEAR_ZERO = 0.1
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
POINTS_POSSIBLE = "Points Possible"
ROSTER_ID = "student_id"


# --- what the gradebook and the autograded notebooks hold ----------------------------------------------------------

@dataclass
class GradedCell:
    notebook: str
    name: str                  # the grade id
    points: float
    autograded: bool           # a test cell (its message names the mistake), not an answer graded by hand
    column: str = ""           # its CSV column: the grade id, or notebook/grade id when there are several notebooks


@dataclass
class Result:
    """One student's submission of the assignment."""
    student: str
    scores: dict[str, float]                          # column -> score
    total: float
    max_score: float
    late_penalty: float
    errors: dict[str, list[tuple[str, str]]] = field(default_factory=dict)   # column -> the errors the check raised
    flags: list[str] = field(default_factory=list)
    seconds: dict[str, float | None] = field(default_factory=dict)            # notebook -> execution time
    unread: list[str] = field(default_factory=list)                           # notebooks with no autograded copy

    @property
    def final(self) -> float:
        return self.total - self.late_penalty


@dataclass
class ClassData:
    assignment: str
    course_id: str
    cells: list[GradedCell]
    results: list[Result]
    not_graded: list[tuple[str, str]]                 # (student, why) without a grade for this assignment
    max_score: float


def cell_order(course: Course, assignment: str, notebook: str) -> list[str]:
    """The grade ids of the release notebook in the order a student sees them ([] if there is no release)."""
    path = course.folder("release") / assignment / f"{notebook}.ipynb"
    if not path.is_file():
        return []
    cells = nbformat.read(path, as_version=4).cells
    return [grade_id(cell) for cell in cells if nbgrader_record(cell)]


STAMP_MAX_CHARS = 64            # an ISO timestamp nbclient writes is 27 characters; a longer one is not read


def stamp_time(value) -> datetime | None:
    """One of nbclient's execution timestamps as an aware datetime (a naive one is read as UTC); None when it is
    not one. The metadata is the student's to write, so nothing about it is assumed."""
    if not isinstance(value, str) or not value or len(value) > STAMP_MAX_CHARS:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, TypeError, OverflowError):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def execution_seconds(notebook: nbformat.NotebookNode) -> float | None:
    """From the first cell's start to the last cell's end, from the timestamps nbclient records in each cell
    (in the cell's metadata, which the student's notebook can hold anything in: a stamp that is not a time,
    naive or aware, is skipped or read as UTC, never an error)."""
    starts, ends = [], []
    for cell in notebook.get("cells", []):
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        stamps = metadata.get("execution") if isinstance(metadata, dict) else None
        if not isinstance(stamps, dict):
            continue
        start = stamp_time(stamps.get("iopub.status.busy")) or stamp_time(stamps.get("iopub.execute_input"))
        end = stamp_time(stamps.get("iopub.status.idle")) or stamp_time(stamps.get("shell.execute_reply"))
        if start:
            starts.append(start)
        if end:
            ends.append(end)
    if not starts or not ends:
        return None
    try:
        return max(0.0, (max(ends) - min(starts)).total_seconds())
    except (OverflowError, TypeError, ValueError):
        return None


def read_class(course: Course, assignment: str) -> ClassData:
    """Everything the report needs about one assignment, from the gradebook and the autograded notebooks."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder import feedback_summary as summary

    with venv_on_path(), Gradebook(course.db_url) as gradebook:
        try:
            record = gradebook.find_assignment(assignment)
        except MissingEntry:
            raise SystemExit(f"the gradebook at {course.db_url} has no assignment {assignment!r}") from None
        cells = []
        for notebook in record.notebooks:
            answers = {cell.name for cell in notebook.solution_cells}
            found = {cell.name: cell for cell in notebook.grade_cells}
            order = [name for name in cell_order(course, assignment, notebook.name) if name in found]
            for name in order + sorted(set(found) - set(order)):
                cell = found[name]
                cells.append(GradedCell(notebook.name, name, float(cell.max_score),
                                        cell.cell_type == "code" and name not in answers))
        several = len(record.notebooks) > 1
        for cell in cells:
            cell.column = f"{cell.notebook}/{cell.name}" if several else cell.name
        max_score = float(record.max_score)
        results, graded = [], set()
        for submission in gradebook.assignment_submissions(assignment):
            student = submission.student_id
            graded.add(student)
            scores, flags = {}, []
            for submitted in submission.notebooks:
                for grade in submitted.grades:
                    column = f"{submitted.name}/{grade.name}" if several else grade.name
                    scores[column] = float(grade.score or 0)
                if submitted.flagged:
                    flags.append(f"flagged in the formgrader ({submitted.name})")
            result = Result(student, scores, float(submission.score or 0), float(submission.max_score or max_score),
                            float(submission.late_submission_penalty or 0), flags=flags)
            try:
                read_autograded(course, assignment, result, cells, summary, [n.name for n in record.notebooks])
            except Exception as error:                 # never the whole class for one student's files
                result.flags.append(f"its autograded notebooks could not be read ({type(error).__name__})")
            results.append(result)
        handed_in = {path.parent.name for path in course.folder("submitted").glob(f"*/{assignment}") if path.is_dir()}
        not_graded = [(student, "handed in (in the submitted folder) but not in the gradebook: not graded yet, or "
                                "its grading failed (see the grading command's output)")
                      for student in sorted(handed_in - graded)]
        not_graded += [(student.id, "in the gradebook's students, with no submission of this assignment")
                       for student in gradebook.students if student.id not in graded | handed_in]
    results.sort(key=lambda result: result.student)
    return ClassData(assignment, course.course_id, cells, results, not_graded, max_score)


def read_autograded(course: Course, assignment: str, result: Result, cells: list[GradedCell], summary,
                    notebooks: list[str]) -> None:
    """The autograded notebooks' messages, flags and execution times, into `result`. Each notebook is read within
    a cap (autograder/bounded.py), and whatever in it cannot be read costs this student's report alone: it is
    named in their flags, and the class is reported."""
    folder = course.path("autograded", result.student, assignment)
    for notebook in notebooks:
        path = folder / f"{notebook}.ipynb"
        if not path.is_file() or path.is_symlink():
            result.unread.append(notebook)
            result.flags.append(f"no autograded {notebook}.ipynb: its checks' messages and times are not known")
            continue
        try:
            limit = bounded.autograded_limit()
            nb = nbformat.reads(bounded.read_capped(path, limit).decode("utf-8"), as_version=4)
        except Exception as error:                     # the grader wrote it; still, one file must not stop the report
            result.unread.append(notebook)
            why = str(error) if isinstance(error, bounded.Refused) else type(error).__name__
            result.flags.append(f"autograded {notebook}.ipynb could not be read ({why})")
            continue
        try:
            read_notebook(nb, notebook, result, cells, summary)
        except Exception as error:                     # a student's metadata or outputs of an unexpected shape
            result.flags.append(f"autograded {notebook}.ipynb could not be read in full ({type(error).__name__}): "
                                "its checks' messages or times are missing from this report")


def read_notebook(nb: nbformat.NotebookNode, notebook: str, result: Result, cells: list[GradedCell], summary) -> None:
    result.flags += [str(flag) for flag in notebook_flags(nb)]
    result.seconds[notebook] = execution_seconds(nb)
    columns = {cell.name: cell.column for cell in cells if cell.notebook == notebook}
    for cell in nb.cells:
        name = grade_id(cell)
        if name is not None and is_check(cell) and name in columns:
            result.errors[columns[name]] = summary.check_errors(cell)


# --- what the numbers say ------------------------------------------------------------------------------------------

def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's correlation (the point-biserial one when xs is 0/1); None when either does not vary."""
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy)


@dataclass
class Item:
    cell: GradedCell
    passed: int
    students: int
    discrimination: float | None
    flag: str                  # "", "near zero", "negative", "no variation"
    why: str = ""

    @property
    def difficulty(self) -> float:
        return self.passed / self.students if self.students else 0.0


def passed(result: Result, cell: GradedCell) -> bool:
    return result.scores.get(cell.column, 0.0) >= cell.points and cell.points > 0


def item_analysis(data: ClassData) -> list[Item]:
    """Each graded cell: how many passed it, and the point-biserial correlation of passing it with the rest of
    the score (the total without this cell's points), as item analysis of a test does."""
    items = []
    for cell in data.cells:
        xs = [1.0 if passed(result, cell) else 0.0 for result in data.results]
        rest = [result.total - result.scores.get(cell.column, 0.0) for result in data.results]
        r = pearson(xs, rest)
        got = int(sum(xs))
        if r is None:
            flag = "no variation"
            why = ("everyone passed it" if got == len(xs) else "no one passed it" if got == 0 else
                   "the rest of the score is the same for everyone")
            why += ": in this class it cannot separate the students who understood from those who did not"
        elif r <= -NEAR_ZERO:
            flag = "negative"
            why = ("students who did better on the rest failed it more often: look for a check that rejects a "
                   "correct alternative, or one that a wrong answer passes")
        elif abs(r) < NEAR_ZERO:
            flag = "near zero"
            why = ("passing it says nothing about the rest of the score: it may test something the rest does not, "
                   "or be passed or failed for reasons other than understanding")
        else:
            flag, why = "", ""
        items.append(Item(cell, got, len(xs), r, flag, why))
    return items


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def message_key(errors: list[tuple[str, str]], unanswered: str) -> tuple:
    """What a check said with the numbers taken out, so that the same mistake made on other numbers (another
    width, another value) groups together."""
    if not errors:
        return ("",)
    if all(name == unanswered for name, _ in errors):
        return (unanswered,)
    key = []
    for name, message in errors:
        text = NUMBER.sub("#", " ".join(message.split()))
        key.append((name, re.sub(r"#(?:\s*,\s*#)+", "#…", text)))
    return tuple(key)


@dataclass
class Mistake:
    message: str                          # what the check said, to read (the most common wording)
    students: list[str]
    checks: dict[str, int]                # column -> students it cost that check
    wordings: int                         # distinct messages grouped here (numbers differ)


def mistakes(data: ClassData, summary) -> list[Mistake]:
    """The messages the checks raised, the same message with other numbers counted as one, ranked by how many
    students got it. A check that lost points without raising anything (changed by hand) is its own entry."""
    groups: dict[tuple, dict] = {}
    autograded = [cell for cell in data.cells if cell.autograded]
    for result in data.results:
        if result.unread:
            continue
        for cell in autograded:
            if passed(result, cell) or cell.points == 0:
                continue
            errors = result.errors.get(cell.column, [])
            key = message_key(errors, summary.UNANSWERED)
            group = groups.setdefault(key, {"students": set(), "checks": Counter(), "wordings": Counter()})
            group["students"].add(result.student)
            group["checks"][cell.column] += 1
            group["wordings"][summary.readable_message(errors, 600)] += 1
    order = {cell.column: index for index, cell in enumerate(data.cells)}
    found = [Mistake(group["wordings"].most_common(1)[0][0], sorted(group["students"]),
                     dict(sorted(group["checks"].items(), key=lambda item: order[item[0]])), len(group["wordings"]))
             for group in groups.values()]
    return sorted(found, key=lambda m: (-len(m.students), min(order[c] for c in m.checks), m.message))


# --- the exports ---------------------------------------------------------------------------------------------------

def safe(value):
    return spreadsheet_safe(value) if isinstance(value, str) else value


def points(value: float) -> str:
    return f"{value:g}"


def write_checks_csv(data: ClassData, path: Path) -> None:
    """student, one column per graded cell, total: the gradebook's scores (the total before any late penalty,
    which has a column of its own when there is one)."""
    late = any(result.late_penalty for result in data.results)
    header = ["student", *(cell.column for cell in data.cells), "total"] + (["late_penalty"] if late else [])
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for result in data.results:
            row = [result.student, *(points(result.scores.get(cell.column, 0.0)) for cell in data.cells),
                   points(result.total)] + ([points(result.late_penalty)] if late else [])
            writer.writerow([safe(value) for value in row])


@dataclass
class RosterEntry:
    student: str                          # the nbgrader id ('' when the roster gives none)
    lms: dict[str, str]                   # Canvas's columns


def read_roster(path: Path) -> list[RosterEntry]:
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
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_COLUMNS, column])
        writer.writerow([POINTS_POSSIBLE, "", "", "", "", points(data.max_score)])
        for entry in roster:
            result = by_id.get(entry.student)
            if result is None:
                who = entry.student or entry.lms.get("Student") or entry.lms.get("ID") or "a roster row"
                problems.append(f"{who}: in the roster, but no graded submission: left blank in the Canvas file"
                                + ("" if entry.student else " (the roster gives no nbgrader student_id)"))
            score = points(max(0.0, result.final)) if result else ""
            writer.writerow([safe(value) for value in [*(entry.lms[c] for c in CANVAS_COLUMNS), score]])
    return problems


# --- figures -------------------------------------------------------------------------------------------------------

def figure_uri(figure) -> str:
    """A matplotlib figure as an SVG data URI: vector, inline, its ids kept apart from the page's."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()


def figures(data: ClassData, items: list[Item]) -> dict[str, str]:
    """The figures, drawn on matplotlib Figures of their own (no pyplot: nothing global changes)."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 10, "svg.hashsalt": "class-report"}):
        return {"scores": score_figure(data), "checks": check_figure(items)}


def score_figure(data: ClassData) -> str:
    from matplotlib.figure import Figure

    totals = [result.final for result in data.results]
    top = data.max_score
    width = 1.0 if top <= 40 else top / 20
    edges = [i * width for i in range(int(math.ceil(top / width)) + 2)]
    figure = Figure(figsize=(7, 2.8))
    axes = figure.subplots()
    axes.hist(totals, bins=edges, align="left", rwidth=0.85, color="#3b6ea8")
    axes.set_xlabel(f"points (of {points(top)})")
    axes.set_ylabel("students")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.spines[["top", "right"]].set_visible(False)
    return figure_uri(figure)


def check_figure(items: list[Item]) -> str:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 0.32 * len(items) + 0.8))
    axes = figure.subplots()
    names = [item.cell.column for item in items][::-1]
    rates = [100 * item.difficulty for item in items][::-1]
    colors = ["#b5651d" if item.flag else "#3b6ea8" for item in items][::-1]
    hatches = ["//" if item.flag else "" for item in items][::-1]
    bars = axes.barh(names, rates, color=colors)
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    for y, rate in enumerate(rates):
        axes.text(min(rate + 1, 101), y, f"{rate:.0f} %", va="center", fontsize=8)
    axes.set_xlim(0, 110)
    axes.set_xlabel("share of the class that passed (hatched: flagged by the item analysis)")
    axes.spines[["top", "right"]].set_visible(False)
    return figure_uri(figure)


# --- the page ------------------------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #1d1d1f;
       line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; } th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem;
       text-align: left; vertical-align: top; } th { background: #f2f2f2; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
.flag { color: #8a3c00; font-weight: 600; } .note { color: #444; font-size: 0.95rem; }
code { font-size: 0.9em; } img.figure { max-width: 100%; height: auto; }
ol.mistakes > li { margin-bottom: 0.8rem; } .message { font-family: ui-monospace, monospace; font-size: 0.9rem;
       background: #f7f7f7; padding: 0.2rem 0.4rem; display: block; white-space: pre-wrap; }
details summary { cursor: pointer; }
"""


def e(value) -> str:
    return html.escape(str(value), quote=True)


def render(data: ClassData, items: list[Item], found: list[Mistake], charts: dict[str, str],
           roster_problems: list[str] | None, exports: dict[str, str]) -> str:
    totals = [result.final for result in data.results]
    n = len(totals)
    stats = ({"students": n, "mean": statistics.fmean(totals), "median": statistics.median(totals),
              "min": min(totals), "max": max(totals)} if totals else {"students": 0})
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>Class report: {e(data.assignment)}</title><style>{STYLE}</style></head><body><main>",
           f"<h1>Class report: {e(data.assignment)}</h1>",
           f'<p class="note">Course <code>{e(data.course_id)}</code>. Written '
           f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
           "from the gradebook and the autograded notebooks by <code>python -m tools.class_report</code>.</p>"]

    out += ["<h2 id=\"scores-heading\">Scores</h2>"]
    attributes = " ".join(f'data-{key}="{value:.10g}"' if isinstance(value, float) else f'data-{key}="{value}"'
                          for key, value in stats.items())
    if n:
        out += [f'<p id="scores" {attributes}>{n} students graded, out of {e(points(data.max_score))} points '
                f"(after late penalties): mean {stats['mean']:.1f}, median {stats['median']:g}, lowest "
                f"{stats['min']:g}, highest {stats['max']:g}.</p>",
                f'<img class="figure" src="{charts["scores"]}" alt="Histogram of the students\' total scores, '
                f'from {stats["min"]:g} to {stats["max"]:g} of {e(points(data.max_score))} points">']
    else:
        out += [f'<p id="scores" {attributes}>No student of this assignment is in the gradebook yet.</p>']

    out += ["<h2>Checks: pass rates and item analysis</h2>",
            "<p class=\"note\"><b>Difficulty</b> is the share of the class who passed the graded cell (all its "
            "points). <b>Discrimination</b> is the point-biserial correlation between passing it and the score on "
            f"the rest of the assignment. A check whose discrimination is near zero (|r| &lt; {NEAR_ZERO:g}) or "
            "negative does not separate the students who understood from those who did not: passing it does not go "
            "with doing well elsewhere. Look at what it tests before trusting its points. With a small class, or a "
            "check (nearly) everyone passes, the correlation is noisy or undefined.</p>"]
    if n:
        out.append(f'<img class="figure" src="{charts["checks"]}" alt="Bar chart: the share of the class that '
                   'passed each graded cell (the table below gives the same numbers)">')
    out += ['<table id="checks"><thead><tr><th scope="col">Graded cell</th><th scope="col">Points</th>'
            '<th scope="col">Passed</th><th scope="col">Difficulty</th><th scope="col">Discrimination</th>'
            '<th scope="col">Item analysis</th></tr></thead><tbody>']
    for item in items:
        r = "" if item.discrimination is None else f"{item.discrimination:.4f}"
        out.append(
            f'<tr data-check="{e(item.cell.column)}" data-points="{item.cell.points:g}" data-passed="{item.passed}" '
            f'data-students="{item.students}" data-difficulty="{item.difficulty:.4f}" data-discrimination="{r}" '
            f'data-flag="{e(item.flag)}"><th scope="row"><code>{e(item.cell.column)}</code>'
            f'{"" if item.cell.autograded else " (graded by hand)"}</th>'
            f'<td class="number">{item.cell.points:g}</td><td class="number">{item.passed} of {item.students}</td>'
            f'<td class="number">{100 * item.difficulty:.0f} %</td>'
            f'<td class="number">{"—" if item.discrimination is None else f"{item.discrimination:+.2f}"}</td>'
            f'<td>{f"<span class=flag>{e(item.flag)}</span>: {e(item.why)}" if item.flag else "no concern"}'
            "</td></tr>")
    out.append("</tbody></table>")

    out += ["<h2>What the class got wrong</h2>",
            "<p class=\"note\">Each entry is a message the checks raised, ranked by how many students got it. "
            "Messages that differ only in their numbers (a width, a measured value) count as one. A student "
            "appears once per entry, however many checks raised it.</p>"]
    if found:
        out.append('<ol class="mistakes" id="mistakes">')
        for mistake in found:
            checks = ", ".join(f"<code>{e(check)}</code> ({count})" for check, count in mistake.checks.items())
            students = "".join(f"<li>{e(student)}</li>" for student in mistake.students)
            share = 100 * len(mistake.students) / n if n else 0
            wordings = f"; {mistake.wordings} wordings, numbers differing" if mistake.wordings > 1 else ""
            out.append(
                f'<li data-students="{len(mistake.students)}" '
                f'data-checks="{e(" ".join(f"{check}:{count}" for check, count in mistake.checks.items()))}">'
                f"<b>{len(mistake.students)} student{'s' if len(mistake.students) != 1 else ''}</b> ({share:.0f} % "
                f"of the class){wordings}, in {checks}:"
                f'<span class="message">{e(mistake.message)}</span>'
                f'<details><summary>The students</summary><ul class="students">{students}</ul></details></li>')
        out.append("</ol>")
    else:
        out.append('<p id="mistakes">No check lost points in a graded notebook.</p>')

    flagged = [result for result in data.results if result.flags]
    out += ["<h2>Flagged submissions</h2>",
            "<p class=\"note\">What the grader recorded while grading (a kernel that died, a limit reached, "
            "tampering, a broken rule, files left out, tests restored) and submissions flagged in the "
            "formgrader. Look at each one before releasing its grade.</p>"]
    if flagged:
        out.append('<table id="flagged"><thead><tr><th scope="col">Student</th><th scope="col">Score</th>'
                   '<th scope="col">Why</th></tr></thead><tbody>')
        for result in flagged:
            reasons = "".join(f"<li>{e(flag)}</li>" for flag in result.flags)
            out.append(f'<tr data-student="{e(result.student)}" data-flags="{len(result.flags)}"><td>'
                       f'{e(result.student)}</td><td class="number">{result.final:g}</td>'
                       f"<td><ul>{reasons}</ul></td></tr>")
        out.append("</tbody></table>")
    else:
        out.append('<p id="flagged">No submission was flagged.</p>')

    out.append("<h2>Students not graded</h2>")
    if data.not_graded:
        out.append('<table id="not-graded"><thead><tr><th scope="col">Student</th><th scope="col">Why</th></tr>'
                   "</thead><tbody>")
        out += [f'<tr data-student="{e(student)}"><td>{e(student)}</td><td>{e(why)}</td></tr>'
                for student, why in data.not_graded]
        out.append("</tbody></table>")
    else:
        out.append('<p id="not-graded">Every student who handed in, or whom the gradebook lists, is graded.</p>')

    out += ["<h2>Grading time</h2>",
            "<p class=\"note\">How long each notebook ran in its grading kernel: from the first cell's start to "
            "the last cell's end, as the kernel's client recorded them in the autograded notebook. Starting the "
            "kernel and saving the results are not included.</p>"]
    notebooks = sorted({name for result in data.results for name in result.seconds})
    if notebooks:
        out.append('<table id="times"><thead><tr><th scope="col">Notebook</th><th scope="col">Notebooks timed</th>'
                   '<th scope="col">Median</th><th scope="col">Longest</th><th scope="col">Longest for</th></tr>'
                   "</thead><tbody>")
        for name in notebooks:
            timed = sorted(((result.seconds[name], result.student) for result in data.results
                            if result.seconds.get(name) is not None), reverse=True)
            if not timed:
                out.append(f'<tr data-notebook="{e(name)}" data-timed="0"><td>{e(name)}</td><td>0</td>'
                           "<td>—</td><td>—</td><td>—</td></tr>")
                continue
            median = statistics.median(seconds for seconds, _ in timed)
            slowest = ", ".join(e(student) for _, student in timed[:3])
            out.append(f'<tr data-notebook="{e(name)}" data-timed="{len(timed)}" data-median="{median:.3f}" '
                       f'data-longest="{timed[0][0]:.3f}" data-longest-student="{e(timed[0][1])}"><td>{e(name)}</td>'
                       f'<td class="number">{len(timed)}</td><td class="number">{median:.1f} s</td>'
                       f'<td class="number">{timed[0][0]:.1f} s</td><td>{slowest}</td></tr>')
        out.append("</tbody></table>")
    else:
        out.append('<p id="times">No autograded notebook recorded its cells\' times.</p>')

    out.append("<h2>Exports</h2><ul>")
    out += [f'<li><a href="{e(name)}">{e(name)}</a>: {e(what)}</li>' for name, what in exports.items()]
    out.append("</ul>")
    if roster_problems is None:
        out.append('<p class="note" id="roster">No roster was given, so no Canvas file was written '
                   "(<code>--roster roster.csv</code>).</p>")
    elif roster_problems:
        out.append('<p>Students the Canvas file could not place:</p><ul id="roster">')
        out += [f"<li>{e(problem)}</li>" for problem in roster_problems]
        out.append("</ul>")
    else:
        out.append('<p id="roster">Every graded student is in the roster, and every roster student is graded.</p>')
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


# --- the command ---------------------------------------------------------------------------------------------------

def report(course: Course, assignment: str, out: Path, roster: Path | None = None,
           canvas_column: str | None = None) -> dict[str, Path]:
    """Write the report and the exports of one assignment into `out`; returns what was written. Problems with
    the roster are printed on stderr too."""
    from autograder import feedback_summary as summary

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


def course_of(path: str | None) -> Course:
    """--course: the course's root folder, or its autograder/ folder (where nbgrader runs)."""
    if not path:
        return COURSE
    folder = Path(path).resolve()
    if (folder / "course_directory.py").is_file() and not (folder / "autograder").is_dir():
        folder = folder.parent
    return Course(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.class_report", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.split("\n")[1:6]))
    parser.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help="assignment name(s), or `all`")
    parser.add_argument("--course", help="the course's root folder or its autograder/ folder (default: this checkout)")
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
