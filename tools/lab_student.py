"""A student's JupyterLab: clear messages where nbgrader 0.9 shows a Python traceback.

Stock nbgrader's Validate button and the Assignments tab's Submit button answer a damaged notebook with
the server's traceback (a file that is no longer valid JSON), or with nothing at all (Submit hands in a
notebook whose answer cell was deleted), and Validate runs every later cell into the timeout when an
answer loops forever (eight test cells, eight timeouts). nbgrader has no setting for any of this, so
this server extension, which tools/lab.py enables for students only, wraps the two handlers' methods:

- before validating or submitting, each notebook must read as a notebook and still hold every answer
  cell of the release (found in the exchange's copy), or the student gets one sentence saying what is
  wrong and how to recover, and nothing is submitted;
- before submitting, the folder must be within the hand-in limits the grader applies at collect (a
  notebook's size, the number and size of the files beside the notebooks), or the student is told which
  and nothing is submitted;
- Validate stops at the first cell that runs past the timeout (a hook nbclient calls on each failing cell,
  set on nbgrader's Execute in the student's nbgrader_config.py) and says which cell it was.

Everything else is nbgrader's own code path. The wrappers are kept small; if nbgrader renames the two
methods, loading this extension fails loudly (the browser tests in tests/lab catch it).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from nbgrader.exchange.default.submit import ExchangeSubmit

STOPPED = "course-validate-stopped:"


class ValidateStopped(Exception):
    """Raised inside Validate's executor when a cell runs past the timeout, to end Validate there."""


def stop_at_timeout(cell=None, cell_index=None, execute_reply=None, **_) -> None:
    """nbclient's on_cell_error hook: a timed-out (interrupted) cell ends validation."""
    content = (execute_reply or {}).get("content", {})
    if content.get("ename") in ("CellTimeoutError", "KeyboardInterrupt"):
        first_line = next((line for line in (cell.source if cell else "").splitlines() if line.strip()), "")
        raise ValidateStopped(f"{STOPPED} the cell that begins {first_line[:60]!r}")


def readable(*paragraphs: str) -> str:
    """nbgrader's dialogs show the message in a <pre>: break it into lines that fit the dialog."""
    return "\n\n".join(textwrap.fill(paragraph, 88) for paragraph in paragraphs)


def answer_ids(notebook: dict) -> list[str]:
    from autograder.notebook import grade_id, nbgrader_record

    return [grade_id(cell) for cell in notebook.get("cells", []) if nbgrader_record(cell).get("solution")]


def problem_with(path: Path, release: Path | None) -> str | None:
    """What makes this notebook impossible to validate or grade, in words for the student; None if fine."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise ValueError("it has no list of cells")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return (f"{path.name} is no longer a valid notebook ({error}), so it cannot be run or graded. "
                "It was probably edited outside JupyterLab or cut short. Restore it from File > Revert "
                "Notebook to Checkpoint, or rename the assignment's folder, fetch the assignment again and copy "
                "your answers into the new notebook.")
    if release is not None and release.exists():
        try:
            expected = answer_ids(json.loads(release.read_text(encoding="utf-8")))
        except ValueError:
            expected = []
        missing = [grade_id for grade_id in expected if grade_id not in answer_ids(notebook)]
        if missing:
            return (f"{path.name} has lost its answer cell{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(repr(m) for m in missing)}: the grader looks for your answer there. Undo the "
                    "deletion (Edit > Undo Cell Operation), or rename the assignment's folder, fetch the "
                    "assignment again and copy your answer into the new notebook's answer cell.")
    return None


def too_much(folder: Path, ignore: list[str]) -> str | None:
    """What of the assignment's folder is over the hand-in limits the grader applies at collect and autograde
    (autograder/plugins/handins.py), in words for the student; None if it fits. Files nbgrader's submit leaves out
    (CourseDirectory.ignore: checkpoints, the feedback folder) are not counted; nothing is read."""
    import fnmatch

    from autograder.bounded import notebook_limit
    from autograder.grading_environment import value
    from autograder.plugins.handins import listing

    files = {name: size for name, size in listing(folder).items()
             if not any(fnmatch.fnmatch(part, pattern) for part in Path(name).parts for pattern in ignore)}
    most_notebook = notebook_limit()
    large = [name for name, size in files.items() if name.endswith(".ipynb") and size > most_notebook]
    beside = {name: size for name, size in files.items() if not name.endswith(".ipynb")}
    most_files, most_bytes = int(value("COURSE_GRADING_HANDIN_FILES")), value("COURSE_GRADING_HANDIN_MB") * 2**20
    problems = []
    if large:
        problems.append(f"{', '.join(sorted(large))} {'is' if len(large) == 1 else 'are'} over the grader's limit "
                        f"of {most_notebook / 2**20:g} MB for a notebook (large outputs are the usual cause: "
                        "Edit > Clear Outputs of All Cells, save, and submit again).")
    total = sum(beside.values())
    if len(beside) > most_files or total > most_bytes:
        problems.append(f"The folder holds {len(beside)} file{'s' * (len(beside) != 1)} of {total / 2**20:.1f} MB "
                        "beside the notebooks, over "
                        f"the grader's limit of {most_files} files and {most_bytes / 2**20:g} MB: the grader would "
                        "take none of them. Move out what the assignment does not need (data you downloaded, "
                        "models you saved) and submit again.")
    return " ".join(problems) or None


class BoundedSubmit(ExchangeSubmit):
    """nbgrader's submit, refusing (in too_much's words) a folder over the hand-in limits, for `nbgrader submit` in
    a terminal as for the Assignments tab: on a hub, the student role's ExchangeFactory.submit (tools/hub.py)."""

    def copy_files(self):
        problem = too_much(Path(self.src_path), self.coursedir.ignore)
        if problem:
            self.fail(f"Nothing was submitted. {problem}")
        super().copy_files()


def released_copy(notebook: Path, config) -> Path | None:
    """The release of this notebook in the exchange (outbound/ASSIGNMENT/NAME), if it can be found."""
    root, course = config.Exchange.get("root"), config.CourseDirectory.get("course_id")
    if not root or not course:
        return None
    return Path(root) / course / "outbound" / notebook.parent.name / notebook.name


def _load_jupyter_server_extension(server_app) -> None:
    from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
    from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler

    validate = ValidateAssignmentHandler.validate_notebook
    submit = AssignmentList.submit_assignment

    def validate_notebook(self, path):
        root = Path(self.root_dir).resolve()
        target = (root / path).resolve()
        if target.is_relative_to(root):
            problem = problem_with(target, released_copy(target, self.load_config()))
            if problem:
                return {"success": False, "value": readable(problem)}
        result = validate(self, path)
        value = str(result.get("value", ""))
        if not result.get("success") and (STOPPED in value or "CellTimeoutError" in value):
            where = value.split(STOPPED, 1)[1].splitlines()[0].strip() if STOPPED in value else "a cell"
            timeout = self.load_config().Execute.get("timeout", 30)
            return {"success": False, "value": readable(
                f"Validate stopped: {where} ran for more than {timeout} s.",
                "An answer that never returns (an infinite loop, a loop whose condition never changes) is the "
                "usual cause; fix it, restart the kernel and validate again. The grader stops such cells the "
                "same way and gives their tests no points.")}
        return result

    def submit_assignment(self, course_id, assignment_id):
        folder = Path(self._root_dir) / assignment_id
        config = self.load_config()
        problems = [problem for notebook in sorted(folder.glob("*.ipynb"))
                    if (problem := problem_with(notebook, released_copy(notebook, config)))]
        from nbgrader.coursedir import CourseDirectory

        over = too_much(folder, CourseDirectory(config=config).ignore) if folder.is_dir() else None
        if problems or over:
            return {"success": False, "value": readable("Nothing was submitted.", *problems, *filter(None, [over]))}
        return submit(self, course_id, assignment_id)

    ValidateAssignmentHandler.validate_notebook = validate_notebook
    AssignmentList.submit_assignment = submit_assignment
    server_app.log.info("course: clear messages for damaged notebooks in Validate and Submit (tools/lab_student.py)")


def _jupyter_server_extension_points():
    return [{"module": "tools.lab_student"}]


# Older loaders look for this name.
load_jupyter_server_extension = _load_jupyter_server_extension
