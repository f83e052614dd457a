"""Intake, the first of nbgrader's sanitizing passes (nbgrader_config.py: c.Autograde.sanitize_preprocessors).

It refuses an oversized notebook (graded as the unanswered release), drops flags a student wrote into the
notebook (flags are the grader's), and repairs nbgrader metadata that would make nbgrader's own
preprocessors raise (an empty or malformed record, a copied cell's duplicate id), so one student's notebook
can never stop the class. Of the files handed in beside the notebook it keeps only those handins.py takes
(within the limits, and shipped by the release), and notes the rest.

Two steps run before it, because nbgrader reads a hand-in before its first preprocessor, and nothing a
student sends is parsed before its size is known (autograder/bounded.py). Both are nbgrader's own
extension points, set in nbgrader_config.py, so `nbgrader autograde` and the class grader's workers apply them
alike:

- `bound_timestamp`, the Autograde converter's pre-convert hook, runs before nbgrader parses timestamp.txt
  (Autograde.init_assignment, with dateutil: minutes for a long string of digits). A timestamp.txt over
  bounded.TIMESTAMP_MAX_BYTES, or not a time, is moved aside unread (handins.REFUSED_TIMESTAMP), so nbgrader
  grades the submission without a time, and Intake flags it. (The class grader refuses such a submission
  before it is sent: class_plan.unreadable_timestamp.)
- `BoundedNotebookExporter`, the converter's exporter, reads a notebook only if its listing says it is within
  COURSE_GRADING_NOTEBOOK_MB, and no further than that; a larger one (or a link) is never opened, and Intake
  grades the unanswered release in its place, flagged.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import bounded
from autograder.plugins import handins
from autograder.cells import FLAGS, course_directory, grade_id, release_notebook

# Keys of resources["nbgrader"] for what Intake is told by the steps before it, never by the hand-in:
REFUSED_NOTEBOOK = "course_grading_refused_notebook"    # why the exporter did not read the notebook
NOT_SENT = "course_grading_not_sent"                    # a grading worker's task: the files the packer left out


def notebook_refusal(size: int) -> str:
    limit = bounded.notebook_limit()
    return (f"refused at intake: the notebook is {size / 2**20:.1f} MB, over the limit of {limit / 2**20:g} MB; "
            "graded as the unanswered release")


class BoundedNotebookExporter(NotebookExporter):
    """nbconvert's notebook exporter that reads a notebook file only within COURSE_GRADING_NOTEBOOK_MB: the size
    from the listing first (a link or a special file is refused unopened), then a read capped one character
    past the limit. A refused notebook is exported as an empty one, with the reason in the resources for
    Intake, which grades the release in its place (c.Autograde.exporter_class in nbgrader_config.py)."""

    def from_filename(self, filename, resources=None, **kw):
        try:
            size = bounded.size_of(Path(filename))
        except bounded.Refused as why:
            return self.refuse(f"refused at intake: {why}; graded as the unanswered release", resources, **kw)
        if size > bounded.notebook_limit():
            return self.refuse(notebook_refusal(size), resources, **kw)
        return super().from_filename(filename, resources=resources, **kw)

    def from_file(self, file_stream, resources=None, **kw):
        limit = bounded.notebook_limit()
        text = file_stream.read(limit + 1)
        if len(text) > limit:
            return self.refuse(notebook_refusal(len(text)), resources, **kw)
        try:
            bounded.check_structure(text)            # what a parse would hold, counted before it runs
        except bounded.Refused as why:
            return self.refuse(f"refused at intake: {why}; graded as the unanswered release", resources, **kw)
        return self.from_notebook_node(nbformat.reads(text, as_version=4), resources=resources, **kw)

    def refuse(self, why: str, resources, **kw):
        resources = resources if resources is not None else {}
        resources.setdefault("nbgrader", {})[REFUSED_NOTEBOOK] = why
        return self.from_notebook_node(nbformat.v4.new_notebook(), resources=resources, **kw)


def set_aside(stamp: Path, target: Path) -> None:
    """Move `stamp` to `target`, which this cannot fail on for anything the hand-in holds: nbgrader swallows a
    hook's exceptions and would then parse the file. Whatever the student put at `target` (a folder, say) is
    moved out of the way first, to a name nothing holds; if the grader cannot move the file at all, it is
    removed (the submitted folder is the instructor's copy of the hand-in, and the file held no time)."""
    try:
        if os.path.lexists(target):
            os.replace(target, target.with_name(f"{target.name}.handed-in-{secrets.token_hex(8)}"))
        os.replace(stamp, target)
    except OSError:
        os.unlink(stamp)


def bound_timestamp(assignment=None, student=None, notebooks=(), **_) -> None:
    """The Autograde converter's pre-convert hook (c.Autograde.pre_convert_hook): before nbgrader parses a
    hand-in's timestamp.txt, one that is not a bounded time is moved aside, unread past its cap."""
    for folder in sorted({Path(notebook).parent for notebook in notebooks}):
        stamp = folder / handins.TIMESTAMP
        try:
            bounded.read_timestamp(stamp)
        except bounded.Refused as why:
            set_aside(stamp, folder / handins.REFUSED_TIMESTAMP)
            logging.getLogger("traitlets").warning(
                "%s does not hold a time (%s): moved aside to %s; graded without a submission time", stamp, why,
                handins.REFUSED_TIMESTAMP)


class Intake(NbGraderPreprocessor):
    """First of all: size, forged flags, and nbgrader metadata that nbgrader itself would choke on."""

    def preprocess(self, nb, resources):
        flags = []
        info = resources.get("nbgrader", {})
        # Refused before it was read: by the exporter (nbgrader autograde), or by the packer (a worker's task).
        refusal = info.get(REFUSED_NOTEBOOK)
        not_sent = (info.get(NOT_SENT) or {}).get(f"{info.get('notebook')}.ipynb")
        if refusal is None and not_sent is not None and not_sent > bounded.notebook_limit():
            refusal = notebook_refusal(not_sent)
        if refusal is None:
            size = len(nbformat.writes(nb).encode())
            if size > bounded.notebook_limit():
                refusal = notebook_refusal(size)
        if refusal is not None:
            release = release_notebook(self, resources)
            nb.cells, nb.metadata = release.cells, release.metadata
            flags.append(refusal)
        # Flags are written by the grader only: whatever the student put there is dropped.
        nb.metadata.pop(FLAGS, None)
        nb.metadata.pop("widgets", None)
        seen_ids, seen_cell_ids = set(), set()
        for cell in nb.cells:
            cell.metadata.pop(FLAGS, None)
            # Tags steer the executor (nbclient skips a cell tagged skip-execution, which would score an unrun test
            # as passed); no release cell has one, so none of the student's is kept.
            cell.metadata.pop("tags", None)
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
                               Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])),
                               info.get(NOT_SENT))
        graded = Path(coursedir.format_path(coursedir.autograded_directory, info["student"], info["assignment"]))
        source = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
        beside = [name for name in found.oversized if not name.endswith(".ipynb")]
        for name in [*found.left_out, *beside, handins.MANIFEST, handins.REFUSED_TIMESTAMP]:
            path = graded / name
            # nbgrader copies the master's own files after the student's: those stay.
            if (path.is_file() or path.is_symlink()) and not (source / name).exists():
                path.unlink()
        remove_empty_folders(graded)
        return found.flags()


def remove_empty_folders(graded: Path) -> None:
    """Remove the folders of the kernel's folder that hold no file (emptied above, handed in empty, or a master's
    folder nbgrader copied nothing into): the class grader's worker is sent files, never folders, and nbgrader copies
    files, never folders, so the kernel sees the same folder by either front door, as it must, since its hidden
    inputs are drawn from what it can read (checker_link.hand_in_key: a folder left here gave a hand-in other inputs,
    and another score, under `nbgrader autograde`)."""
    for root, dirs, _ in os.walk(graded, topdown=False, followlinks=False):
        for name in dirs:
            folder = Path(root, name)
            if not folder.is_symlink():
                try:
                    folder.rmdir()
                except OSError:
                    pass                                   # it holds a file that is graded: it stays
