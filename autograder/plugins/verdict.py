"""The verdict: what each test cell earns and what a submission is flagged for, decided on the grader's side.

A test cell earns all or nothing, on whether it raised (the kernel's reply, not a displayed value: nbgrader
would read a displayed number as partial credit). Before the first cell the grader takes the grading
guard's fingerprint (kernel_startup.py) and compares every later one with it, outside the kernel: from the
first change on, checks earn no points. Outputs that quote hidden test code are withheld; broken assignment
rules, the disk limit and truncated output are flagged.

GuardedExecute keeps one Verdict per notebook, asking the guard in the sandboxed kernel; the catalog's fast
path (tools/mutation_grading.py) uses the same class with the guard in its own process. RecordFlags then
writes the flags into the autograded notebook.
"""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.cells import CONDITIONS, FLAGS, add_flag, error_output, grade_id, output_text
from autograder.grading_environment import value
from autograder.plugins.withhold import WITHHELD, quotes_hidden


class Verdict:
    """The verdict of one notebook. `hidden`: its hidden test lines (withhold.hidden_lines); `ask_guard()`:
    the guard's report, None if it cannot answer. Set `baseline` to the guard's first report before the
    first cell runs."""

    def __init__(self, hidden: set[str], ask_guard):
        self.hidden = hidden
        self.ask_guard = ask_guard
        self.baseline = None
        self.tampered: list[str] = []

    def judge(self, cell, resources, checked: bool = False) -> None:
        """All or nothing: nbgrader reads a displayed number in a test cell as partial credit, so a
        displayed value becomes an ordinary display; and no check counts once the guard saw a change.
        A check run in the checker (`checked`) is decided there: what the kernel did to itself changes nothing
        of it, so its points stand; what the guard saw is still flagged, for the instructor to read."""
        for output in cell.outputs:
            if output.output_type == "execute_result":
                output.output_type = "display_data"
                output.pop("execution_count", None)
                add_flag(resources, "a test cell displayed a value, which nbgrader would have read as a partial "
                                    "score; test cells score all or nothing")
        if not self.tampered:
            report = self.ask_guard()
            self.tampered = self.changes(report)
            already = any(flag.startswith("rule broken") for flag in resources.get(FLAGS, []))
            for rule in report.get("rules_broken", []) if isinstance(report, dict) and not already else []:
                add_flag(resources, f"rule broken: your code called {rule}, which this assignment forbids")
            if self.tampered:
                add_flag(resources, f"tampering detected after {grade_id(cell)}: {', '.join(self.tampered)}" + (
                    " (the checks ran outside the notebook's kernel: their scores stand)" if checked else ""))
        if self.tampered and not checked:
            cell.outputs.append(error_output(
                "GradingIntegrityError", "code in this notebook changed what the checks rely on "
                f"({', '.join(self.tampered)}); checks from here on earn no points"))

    def changes(self, report) -> list[str]:
        baseline = self.baseline if isinstance(self.baseline, dict) else None
        current = report.get("fingerprint") if isinstance(report, dict) else None
        if baseline is None:
            return ["the grading guard (it did not answer before the first cell)"]
        if not isinstance(current, dict):
            return ["the grading guard itself"]
        return [label for label, token in baseline.items() if current.get(label) != token] or \
            [label for label in current if label not in baseline]

    def withhold_quotations(self, cell, resources) -> None:
        """Replace outputs that quote hidden test code (a stream may be split over several outputs,
        so the cell's printed text is also checked as a whole)."""
        if not self.hidden:
            return
        printed = "".join(output_text(o) for o in cell.outputs if o.output_type != "error")
        quoted = [o for o in cell.outputs if quotes_hidden(output_text(o), self.hidden)]
        if not quoted and not quotes_hidden(printed, self.hidden):
            return
        add_flag(resources, f"an output of {grade_id(cell) or 'an ungraded cell'} quoted hidden test code and was withheld")
        kept = [error_output(o.get("ename", "Error"), WITHHELD) if o in quoted else o
                for o in cell.outputs if o.output_type == "error"]
        cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=WITHHELD + "\n"), *kept]

    def flag_limits_and_rules(self, cell, resources) -> None:
        where = grade_id(cell) or "an ungraded cell"
        for output in cell.outputs:
            text = output_text(output)
            if output.get("ename") == "CourseRuleError":
                rule = str(output.get("evalue", "")).removeprefix("course rule: ")
                add_flag(resources, f"rule broken: {rule}"[:300])
            if "No space left on device" in text or "File too large" in text:
                add_flag(resources, f"disk limit reached in {where} ({value('COURSE_GRADING_DISK_MB'):g} MB of files)")
            if "output truncated by the grader" in text:
                add_flag(resources, "output limit reached: some output was not kept")


class RecordFlags(NbGraderPreprocessor):
    """Store the grading flags in the autograded notebook (after nbgrader has cleared its metadata)."""

    def preprocess(self, nb, resources):
        nb.metadata[FLAGS] = {"flags": resources.get(FLAGS, [])}
        if resources.get(CONDITIONS):
            nb.metadata[FLAGS]["conditions"] = list(resources[CONDITIONS])
        return nb, resources
