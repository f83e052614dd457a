"""nbgrader plugins that keep grading honest when a submission misbehaves. Loaded by nbgrader_config.py.

- RestoreFromRelease: before nbgrader's own sanitizing, every cell the release marks (answers, tests,
  locked text) gets its nbgrader metadata back from the release, so relabelled tests (points raised, a
  test turned into an answer) cannot confuse or crash nbgrader, and deleted test or locked cells are put
  back in place (nbgrader's own add_missing_cells fails when a deleted test follows a markdown cell).
  nbgrader's OverwriteCells then restores their source, hidden tests included, from the gradebook.
- GuardedExecute: a kernel that dies (os._exit, a segfault, the CPU-time limit) no longer throws the
  whole submission away. The cell that killed it shows an error, later cells are marked as not run,
  and everything before keeps its points. Deaths and timeouts become flags.
- RecordFlags: writes the flags (deaths, timeouts, tampering, restored tests) into the autograded
  notebook's metadata, where the per-check export and the instructor's summary read them.
- HideHiddenTests: the feedback a student receives shows which checks failed and their messages, but
  neither the hidden test code nor tracebacks that would quote it.
- PerCheckExport: `nbgrader export --exporter=course_grading.PerCheckExport` writes one column per
  graded test cell plus the flags, so an instructor sees which misconception each student has.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Unicode

FLAGS = "course_grading"          # key of our record in a notebook's metadata
HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def notebook_flags(nb: NotebookNode) -> list[str]:
    return list(nb.metadata.get(FLAGS, {}).get("flags", []))


def add_flag(resources: dict, flag: str) -> None:
    flags = resources.setdefault(FLAGS, [])
    if flag not in flags:
        flags.append(flag)


def grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class RestoreFromRelease(NbGraderPreprocessor):
    """Put the release's nbgrader cells back: their metadata always, deleted ones whole."""

    release_root = Unicode("", help="The course's release folder (exercises/); set in nbgrader_config.py").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        release_path = Path(self.release_root) / info["assignment"] / f"{info['notebook']}.ipynb"
        release = nbformat.read(release_path, as_version=4)
        released = {grade_id(cell): cell for cell in release.cells if grade_id(cell)}
        flags = notebook_flags(nb)

        kept = []
        for cell in nb.cells:
            cell_id = grade_id(cell)
            if cell_id in released:
                original = released[cell_id]
                if cell.cell_type != original.cell_type:
                    cell = nbformat.from_dict(dict(original))        # a test turned into markdown, say
                cell.metadata["nbgrader"] = dict(original.metadata["nbgrader"])
                for key in ("editable", "deletable"):
                    cell.metadata.pop(key, None)
                    if key in original.metadata:
                        cell.metadata[key] = original.metadata[key]
            elif cell_id is not None:
                cell.metadata.pop("nbgrader")                         # a label the release never gave
            kept.append(cell)

        present = {grade_id(cell) for cell in kept}
        previous = None
        for cell_id, original in released.items():
            if cell_id not in present:
                position = 0 if previous is None else [grade_id(c) for c in kept].index(previous) + 1
                kept.insert(position, nbformat.from_dict(dict(original)))
                present.add(cell_id)
                if original.metadata["nbgrader"].get("grade") and not original.metadata["nbgrader"].get("solution"):
                    flags.append(f"test cell {cell_id} was deleted and has been restored")
            previous = cell_id
        nb.cells = kept
        if flags:
            nb.metadata[FLAGS] = {"flags": flags}
        return nb, resources


class GuardedExecute(Execute):
    """nbgrader's Execute, which survives a dead kernel and flags deaths and timeouts."""

    sandbox_kernel = Unicode("", help="Kernelspec that every submission runs in (the grading sandbox)").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        self._died_in = None
        self._tampered: list[str] = []
        for flag in notebook_flags(nb):          # recorded while sanitizing, before this stage
            add_flag(resources, flag)
        # The notebook's kernelspec decides the kernel (Execute.kernel_name does not survive nbconvert
        # re-initializing the client), so point it at the sandbox while executing and put it back after.
        kernelspec = nb.metadata.get("kernelspec")
        if self.sandbox_kernel:
            nb.metadata["kernelspec"] = {"name": self.sandbox_kernel, "display_name": self.sandbox_kernel,
                                         "language": "python"}
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception:
            if not self._died_in:
                raise
            # Shutting down a kernel that already died may fail; the notebook is complete regardless.
        finally:
            if kernelspec is not None:
                nb.metadata["kernelspec"] = kernelspec
        for cell in nb.cells:
            if any(out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", [])):
                add_flag(resources, f"timeout in {grade_id(cell) or 'an ungraded cell'}")
        if self._died_in:
            add_flag(resources, f"kernel died in {self._died_in}")
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._died_in:
            cell.outputs = [error_output("KernelDied", f"not run: the kernel died earlier, in {self._died_in}")]
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            if cell.metadata.get("nbgrader", {}).get("grade") and not self._tampered:
                self._tampered = self.replaced_by_student()
                if self._tampered:
                    add_flag(resources, f"tampering detected after {grade_id(cell)}: {', '.join(self._tampered)}")
            if self._tampered and cell.metadata.get("nbgrader", {}).get("grade"):
                cell.outputs.append(error_output(
                    "GradingIntegrityError", "code in this notebook replaced what the checks rely on "
                    f"({', '.join(self._tampered)}); checks from here on earn no points"))
            return cell, resources
        except (DeadKernelError, CellTimeoutError, TimeoutError) as error:
            # A dead kernel, or one too broken to answer (for example after patching builtins).
            self._died_in = grade_id(cell) or f"cell {index}"
            cause = "stopped responding" if isinstance(error, TimeoutError) else "died"
            cell.outputs.append(error_output(
                "KernelDied", f"the Python kernel {cause} while running this cell (for example os._exit, a "
                "crash in native code, or the grader's memory or CPU-time limit); later cells were not run"))
            return cell, resources


    def replaced_by_student(self) -> list[str]:
        """Ask the guard installed by kernel_startup.py what the notebook has replaced so far."""
        expression = "__import__('sys').modules['_course_guard'].tampered()"
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"guard": expression})
        reply = self.wait_for_reply(msg_id)
        result = reply["content"].get("user_expressions", {}).get("guard", {})
        if result.get("status") != "ok":
            return ["the grading guard itself"]
        import ast

        return list(ast.literal_eval(result["data"]["text/plain"]))


class RecordFlags(NbGraderPreprocessor):
    """Store the grading flags in the autograded notebook (after nbgrader has cleared its metadata)."""

    def preprocess(self, nb, resources):
        nb.metadata[FLAGS] = {"flags": resources.get(FLAGS, [])}
        return nb, resources


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden test code and tracebacks from feedback; keep each check's message."""

    enabled = Bool(True, help="Hide hidden tests in feedback (turn off to release them after the due date)").tag(config=True)
    placeholder = Unicode("# (hidden checks ran here; any message they raised is shown below)").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not self.enabled or cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        cell.source = HIDDEN_REGION.sub(self.placeholder, cell.source)
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class PerCheckExport(ExportPlugin):
    """One row per student and notebook, one column per graded cell, plus the grading flags."""

    autograded = Unicode("", help="The course's autograded folder (to read flags); set in nbgrader_config.py").tag(config=True)
    submitted = Unicode("", help="The course's submitted folder (to explain missing notebooks)").tag(config=True)

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
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, ["student_id", "assignment", "notebook", "score", "max_score",
                                             *columns, "flags"])
            writer.writeheader()
            writer.writerows(rows)
        self.log.info("Wrote per-check grades of %d submissions to %s", len(rows), path)

    def flags(self, student: str, assignment: str, notebook: str) -> list[str]:
        import nbformat

        path = Path(self.autograded) / student / assignment / f"{notebook}.ipynb"
        if path.exists():
            return notebook_flags(nbformat.read(path, as_version=4))
        handed_in = Path(self.submitted) / student / assignment
        expected = handed_in / f"{notebook}.ipynb"
        others = sorted(p.name for p in handed_in.glob("*.ipynb") if p != expected)
        if not expected.exists():
            return [f"not autograded: no {notebook}.ipynb was submitted"
                    + (f" (found {', '.join(others)}: renamed?)" if others else "")]
        return [f"not autograded: {notebook}.ipynb is not a readable notebook (see the autograde log)"]
