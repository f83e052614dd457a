"""Hidden test code is never shown: outputs that quote it are withheld while grading (verdict.Verdict) and
again in feedback (HideHiddenTests), which also shows each check's message but neither its hidden code nor
tracebacks that would quote it. (nbconvert's SanitizeHTML, configured after it, removes scripts and event
handlers from outputs and markdown.)
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Unicode

from autograder.cells import output_text
from autograder.notebook import hidden_parts, is_test, without_hidden_parts

WITHHELD = "[output withheld by the grader: it quoted hidden test code]"
# Shortest hidden-test line (spaces removed) whose appearance in an output counts as a quotation.
QUOTE_MIN = 24
STRING_LINE = re.compile(r"""^\(*[rRbBfFuU]{0,2}["']""")


def hidden_lines(nb: NotebookNode) -> set[str]:
    """Every line of hidden test code long enough to recognise, with its spaces removed."""
    lines = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and is_test(cell):
            for region in hidden_parts(cell):
                for line in region.splitlines():
                    squeezed = re.sub(r"\s+", "", line)
                    # A line that is only a string (part of a check's message) is meant to be shown.
                    if len(squeezed) >= QUOTE_MIN and not squeezed.startswith("#") and not STRING_LINE.match(squeezed):
                        lines.add(squeezed)
    return lines


def quotes_hidden(text: str, hidden: set[str]) -> bool:
    """Whether `text` quotes a line of hidden test code (`hidden`, from hidden_lines), whatever its spacing."""
    squeezed = re.sub(r"\s+", "", text)
    return any(line in squeezed for line in hidden)


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden test code and tracebacks from feedback; keep each check's message."""

    enabled = Bool(True, help="Hide hidden tests in feedback (turn off to release them after the due date)").tag(config=True)
    placeholder = Unicode("# (hidden checks ran here; any message they raised is shown below)").tag(config=True)

    def preprocess(self, nb, resources):
        self._hidden = hidden_lines(nb) if self.enabled else set()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if not self.enabled or cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
            # A second line of defence: GuardedExecute already withheld such outputs while grading.
            if quotes_hidden(output_text(output), self._hidden):
                output.clear()
                output.update(output_type="stream", name="stdout", text=WITHHELD + "\n")
        if is_test(cell):
            cell.source = without_hidden_parts(cell, self.placeholder)
        return cell, resources
