"""`nbgrader export --exporter=autograder.plugins.export.PerCheckExport --to checks.csv`: one row per student and
notebook, one column per graded test cell plus the flags, so an instructor sees which misconception each
student has. Every text cell is written so that a spreadsheet reads it as text, never as a formula: the file
goes through the course's one CSV writer (autograder/report/csv_files.py), which the class report's files
share. It needs no settings: the course's folders come from the export command's CourseDirectory. One
student's files never stop the export: an autograded notebook is read within a cap (autograder/bounded.py),
and one that cannot be read is said so in that student's flags.
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.plugins import ExportPlugin

from autograder import bounded
from autograder.cells import course_directory, notebook_flags
from autograder.report.csv_files import write_csv

FIXED_COLUMNS = ["student_id", "assignment", "notebook", "score", "max_score"]


class PerCheckExport(ExportPlugin):
    """One row per student and notebook, one column per graded cell, plus the grading flags."""

    def export(self, gradebook):
        path = Path(self.to or "checks.csv")
        rows, columns = [], []
        for assignment in gradebook.assignments:
            for notebook in assignment.notebooks:
                for cell in notebook.grade_cells:
                    column = f"{assignment.name}/{notebook.name}/{cell.name}"
                    if column not in columns:
                        columns.append(column)
            for submission in assignment.submissions:
                for submitted in submission.notebooks:
                    row = {"student_id": submission.student.id, "assignment": assignment.name,
                           "notebook": submitted.name, "score": submitted.score, "max_score": submitted.max_score}
                    for grade in submitted.grades:
                        row[f"{assignment.name}/{submitted.name}/{grade.name}"] = grade.score
                    row["flags"] = "; ".join(self.flags(submission.student.id, assignment.name, submitted.name))
                    rows.append(row)
        header = [*FIXED_COLUMNS, *columns, "flags"]
        write_csv(path, header, ([row.get(column, "") for column in header] for row in rows))
        self.log.info("Wrote per-check grades of %d submissions to %s", len(rows), path)

    def flags(self, student: str, assignment: str, notebook: str) -> list[str]:
        """The autograded notebook's flags (the course's folders, from the export command's CourseDirectory)."""
        coursedir = course_directory(self)
        path = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / f"{notebook}.ipynb"
        if path.is_file() and not path.is_symlink():
            try:
                graded = bounded.autograded_notebook(path)
                return [str(flag) for flag in notebook_flags(graded)]
            except Exception as error:          # one student's file must not stop the class's export
                why = str(error) if isinstance(error, bounded.Refused) else type(error).__name__
                return [f"flags unknown: the autograded {notebook}.ipynb could not be read ({why})"]
        handed_in = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
        expected = handed_in / f"{notebook}.ipynb"
        others = sorted(p.name for p in handed_in.glob("*.ipynb") if p != expected)
        if not expected.exists():
            return [f"not autograded: no {notebook}.ipynb was submitted"
                    + (f" (found {', '.join(others)}: renamed?)" if others else "")]
        return [f"not autograded: {notebook}.ipynb is not a readable notebook (see the autograde log)"]
