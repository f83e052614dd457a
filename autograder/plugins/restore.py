"""RestoreFromRelease, before nbgrader's own sanitizing: the release's cells back, as the release has them.

Every cell the release marks (answers, tests, locked text) gets its nbgrader metadata back from the release,
so relabelled tests (points raised, a test turned into an answer) cannot confuse or crash nbgrader, and
deleted test or locked cells are put back in place (nbgrader's own add_missing_cells fails when a deleted
test follows a markdown cell). nbgrader's OverwriteCells then restores their source, hidden tests included,
from the gradebook.
"""

from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.cells import FLAGS, grade_id, notebook_flags, release_notebook
from autograder.notebook import is_test


class RestoreFromRelease(NbGraderPreprocessor):
    """Put the release's nbgrader cells back: their metadata always, deleted ones whole."""

    def preprocess(self, nb, resources):
        release = release_notebook(self, resources)
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
            elif "nbgrader" in cell.metadata:
                cell.metadata.pop("nbgrader")                         # a label the release never gave
            kept.append(cell)

        present = {grade_id(cell) for cell in kept}
        previous = None
        for cell_id, original in released.items():
            if cell_id not in present:
                position = 0 if previous is None else [grade_id(c) for c in kept].index(previous) + 1
                kept.insert(position, nbformat.from_dict(dict(original)))
                present.add(cell_id)
                if is_test(original):
                    flags.append(f"test cell {cell_id} was deleted and has been restored")
            previous = cell_id
        nb.cells = kept
        if flags:
            nb.metadata[FLAGS] = {"flags": flags}
        return nb, resources
