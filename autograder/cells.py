"""What the grading plugins read of a notebook and of the course: the grader's flags, a cell's outputs as
text, and the course's folders as the running nbgrader command has them (nbgrader's cell records and the
hidden-test delimiters: notebook.py).

Flags are the grader's notes on a submission (a kernel that died, a timeout, tampering, a restored test). The
plugins collect them in the notebook's resources under FLAGS while it is graded; verdict.RecordFlags writes
them into the autograded notebook's metadata, where the per-check export, the class report and the
formgrader's summary read them.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory

# nbgrader's cell records are read by notebook.py alone; re-exported for the plugins that import them here.
from autograder.notebook import grade_id, is_test, nbgrader_record  # noqa: F401

FLAGS = "course_grading"          # key of the grader's record in an autograded notebook's metadata


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def notebook_flags(nb: NotebookNode) -> list[str]:
    return list(nb.metadata.get(FLAGS, {}).get("flags", []))


def add_flag(resources: dict, flag: str) -> None:
    flags = resources.setdefault(FLAGS, [])
    if flag not in flags:
        flags.append(flag)


# Conditions are the grader's notes on how a whole run was graded, not on what a submission did (limits held
# per process only, on an account without control groups): recorded beside the flags, never as one, so that
# they are said once for the class (the class report, the class grader's start), not on every notebook.
CONDITIONS = "course_grading_conditions"      # key of the resources while grading; "conditions" in the record


def add_condition(resources: dict, condition: str) -> None:
    conditions = resources.setdefault(CONDITIONS, [])
    if condition not in conditions:
        conditions.append(condition)


def notebook_conditions(nb: NotebookNode) -> list[str]:
    record = nb.metadata.get(FLAGS, {})
    return [str(text) for text in record.get("conditions", [])] if isinstance(record, dict) else []


def course_directory(preprocessor) -> CourseDirectory:
    """nbgrader's CourseDirectory of the converter running this preprocessor (nbconvert makes each
    preprocessor with its exporter as parent, nbgrader each exporter with its converter as parent), so
    the folders are the ones the command itself uses: course_directory.py's, and the command line's."""
    parent = preprocessor.parent
    while parent is not None:
        coursedir = getattr(parent, "coursedir", None)
        if isinstance(coursedir, CourseDirectory):
            return coursedir
        parent = parent.parent
    raise RuntimeError(f"{type(preprocessor).__name__} runs only inside an nbgrader converter (no CourseDirectory)")


def release_notebook(preprocessor, resources: dict) -> NotebookNode:
    """The released notebook this submission started from (the course's release folder, exercises/)."""
    coursedir, info = course_directory(preprocessor), resources["nbgrader"]
    folder = coursedir.format_path(coursedir.release_directory, ".", info["assignment"])
    return nbformat.read(Path(folder) / f"{info['notebook']}.ipynb", as_version=4)


def output_text(output: NotebookNode) -> str:
    """What an output shows a student. An error's traceback is left out: it quotes the failing test's
    code by design, and the feedback never shows it (HideHiddenTests)."""
    if output.output_type == "stream":
        return output.get("text", "")
    if output.output_type == "error":
        return f"{output.get('ename', '')}: {output.get('evalue', '')}"
    return "\n".join(str(data) if isinstance(data, str) else json.dumps(data)
                     for data in output.get("data", {}).values())
