"""What the report knows of one assignment: the gradebook's scores (through nbgrader's API, SQLite or
PostgreSQL alike) and, from each student's autograded notebooks, what each check said, the grader's flags and
how long the notebook ran. The notebooks are the student's to fill, so each is read within a cap and whatever
in it cannot be read costs that student's part of the report alone, never the class's."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

import nbformat

from autograder import bounded
from autograder.cells import notebook_conditions, notebook_flags
from autograder.course import Course, venv_on_path
from autograder.notebook import grade_id, is_check, nbgrader_record


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
    conditions: list[str] = field(default_factory=list)                       # how it was graded (cells.CONDITIONS)
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

    @property
    def conditions(self) -> dict[str, int]:
        """How the class was graded, said once for it: each condition -> how many submissions it held for."""
        counts: dict[str, int] = {}
        for result in self.results:
            for condition in result.conditions:
                counts[condition] = counts.get(condition, 0) + 1
        return counts


def points(value: float) -> str:
    """A score as the report writes it everywhere (page, CSV files, figures): 2 and 0.5, never 2.0."""
    return f"{value:g}"


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

    from autograder.pages import summary

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
            nb = bounded.autograded_notebook(path)
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
    """One autograded notebook's flags, running time and each check's errors (as the feedback reads them)."""
    result.flags += [str(flag) for flag in notebook_flags(nb)]
    result.conditions += [text for text in notebook_conditions(nb) if text not in result.conditions]
    result.seconds[notebook] = execution_seconds(nb)
    columns = {cell.name: cell.column for cell in cells if cell.notebook == notebook}
    for cell in nb.cells:
        name = grade_id(cell)
        if name is not None and is_check(cell) and name in columns:
            result.errors[columns[name]] = summary.check_errors(cell)
