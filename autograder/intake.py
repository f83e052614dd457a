"""Intake, the first of nbgrader's sanitizing passes (nbgrader_config.py: c.Autograde.sanitize_preprocessors).

It refuses an oversized notebook (graded as the unanswered release), drops flags a student wrote into the
notebook (flags are the grader's), and repairs nbgrader metadata that would make nbgrader's own
preprocessors raise (an empty or malformed record, a copied cell's duplicate id), so one student's notebook
can never stop the class. Of the files handed in beside the notebook it keeps only those handins.py takes
(within the limits, and shipped by the release), and notes the rest.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import handins
from autograder.cells import FLAGS, course_directory, grade_id, release_notebook
from autograder.grading_environment import value


class Intake(NbGraderPreprocessor):
    """First of all: size, forged flags, and nbgrader metadata that nbgrader itself would choke on."""

    def preprocess(self, nb, resources):
        flags = []
        size = len(nbformat.writes(nb).encode())
        limit = value("COURSE_GRADING_NOTEBOOK_MB") * 2**20
        if size > limit:
            release = release_notebook(self, resources)
            nb.cells = release.cells
            flags.append(f"refused at intake: the notebook is {size / 2**20:.1f} MB, over the limit of "
                         f"{limit / 2**20:g} MB; graded as the unanswered release")
        # Flags are written by the grader only: whatever the student put there is dropped.
        nb.metadata.pop(FLAGS, None)
        nb.metadata.pop("widgets", None)
        seen_ids, seen_cell_ids = set(), set()
        for cell in nb.cells:
            cell.metadata.pop(FLAGS, None)
            if "nbgrader" in cell.metadata:
                record = cell.metadata["nbgrader"]
                cell_id = grade_id(cell)
                if cell_id is None or not isinstance(record, dict):
                    del cell.metadata["nbgrader"]          # empty or malformed: an ordinary cell
                elif cell_id in seen_ids:
                    del cell.metadata["nbgrader"]          # a copied cell: the first one keeps the id
                    flags.append(f"a copy of cell {cell_id} was graded as an ordinary cell")
                else:
                    seen_ids.add(cell_id)
            if cell.get("id") in seen_cell_ids:            # a copied cell's nbformat id
                cell["id"] = secrets.token_hex(4)
            seen_cell_ids.add(cell.get("id"))
        handed_in = self.take_handed_in_files(resources)
        if handed_in:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(handins.note(handed_in)))
        flags += handed_in
        if flags:
            nb.metadata[FLAGS] = {"flags": flags}          # read back by GuardedExecute
        return nb, resources

    def take_handed_in_files(self, resources) -> list[str]:
        """Apply handins.py's rule: remove from the autograded folder (the kernel's working folder, which nbgrader
        filled with every file handed in) what is not taken; returns the flags."""
        coursedir, info = course_directory(self), resources["nbgrader"]
        found = handins.survey(Path(coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])),
                               Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])))
        graded = Path(coursedir.format_path(coursedir.autograded_directory, info["student"], info["assignment"]))
        source = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
        for name in [*found.left_out, handins.MANIFEST]:
            path = graded / name
            # nbgrader copies the master's own files after the student's: those stay.
            if (path.is_file() or path.is_symlink()) and not (source / name).exists():
                path.unlink()
        return found.flags()
