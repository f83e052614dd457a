"""The one reader of what nbgrader and the course write into a notebook.

nbgrader keeps its record of a cell in the cell's metadata (`nbgrader`: grade_id, grade, solution, points,
...) and marks a test cell's hidden part with two delimiter lines (ClearHiddenTests: a line containing
`BEGIN HIDDEN TESTS`, one containing `END HIDDEN TESTS`). The course adds two conventions of its own: a
master's metadata names the lessons it draws on (`lessons`), and each test cell opens with comment lines
that say what it checks and what it is worth (`# 2 points: ...`) and, when it has a hidden part, what that
part checks, on a line of its own (`# Hidden checks: ...`). The grading plugins, the feedback, the mutation
report and the site all read these here, so a change of convention is one change.

Nothing here trusts a hand-in's metadata to be well formed: a record that is not a dictionary reads as
none, a list of lessons keeps only strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbgrader import preprocessors
from nbgrader.preprocessors import ClearHiddenTests

# nbgrader's own delimiters (ClearHiddenTests' defaults, which the course keeps), matched as nbgrader matches
# them: anywhere in a line.
HIDDEN_BEGIN = ClearHiddenTests.class_traits()["begin_test_delimeter"].default()
HIDDEN_END = ClearHiddenTests.class_traits()["end_test_delimeter"].default()
# The comment line that opens what a test cell's hidden part checks.
HIDDEN_LABEL = re.compile(r"^hidden checks?:\s*", re.I)
POINTS_LABEL = re.compile(r"^\d+(\.\d+)? points?:\s*")
LESSONS = "lessons"                # notebook metadata of a master (and its release): lesson file stems


def source(cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def nbgrader_record(cell) -> dict:
    """nbgrader's metadata of a cell ({} when it has none, or something that is not a record)."""
    metadata = cell.get("metadata", {})
    record = metadata.get("nbgrader", {}) if isinstance(metadata, dict) else {}
    return record if isinstance(record, dict) else {}


def grade_id(cell) -> str | None:
    cell_id = nbgrader_record(cell).get("grade_id")
    return cell_id if isinstance(cell_id, str) and cell_id else None


def is_test(cell) -> bool:
    """A graded cell that is not a student's answer: nbgrader's autograder tests (and a graded task)."""
    record = nbgrader_record(cell)
    return bool(record.get("grade")) and not record.get("solution")


def is_check(cell) -> bool:
    """An autograded test cell: a code cell that is graded and not a student's answer."""
    return cell.get("cell_type") == "code" and is_test(cell)


def hidden_parts(cell) -> list[str]:
    """The code between each pair of nbgrader's hidden-test delimiter lines of a cell (the lines themselves
    left out); an unclosed part runs to the end of the cell."""
    parts, inside = [], None
    for line in source(cell).splitlines():
        if inside is None and HIDDEN_BEGIN in line:
            inside = []
        elif inside is not None and HIDDEN_END in line:
            parts.append("\n".join(inside))
            inside = None
        elif inside is not None:
            inside.append(line)
    if inside is not None:
        parts.append("\n".join(inside))
    return parts


def without_hidden_parts(cell, placeholder: str) -> str:
    """The cell's source with each hidden part, its delimiter lines included, replaced by `placeholder` (one
    line, indented as the part's first delimiter); an unclosed part is replaced to the end of the cell."""
    lines, inside = [], False
    for line in source(cell).splitlines():
        if not inside and HIDDEN_BEGIN in line:
            inside = True
            lines.append(line[:len(line) - len(line.lstrip())] + placeholder)
        elif inside:
            inside = HIDDEN_END not in line
        else:
            lines.append(line)
    return "\n".join(lines) + ("\n" if source(cell).endswith("\n") else "")


def has_hidden_part(cell) -> bool:
    return any(HIDDEN_BEGIN in line for line in source(cell).splitlines())


@dataclass(frozen=True)
class CheckHeader:
    """What a test cell's opening comment lines say: what it checks in the open (`visible`, with its points
    as written) and what its hidden part checks (`hidden`, the text after the "Hidden checks:" label)."""
    visible: str
    hidden: str
    hidden_label: str = ""         # "Hidden checks: " as written, when the cell has the line

    @property
    def checks(self) -> str:
        """What the cell checks in the open, without the "N points:" it opens with."""
        return POINTS_LABEL.sub("", self.visible)

    @property
    def hidden_sentence(self) -> str:
        """The hidden part's promise as the cell words it ("Hidden checks: ..."), or ""."""
        return self.hidden_label + self.hidden if self.hidden_label else ""


def check_header(cell) -> CheckHeader:
    """Read a test cell's opening comment lines: those before the "Hidden checks:" line say what it checks in
    the open, that line and the comment lines after it what its hidden part checks."""
    comments = []
    for line in source(cell).splitlines():
        if not line.startswith("#") or HIDDEN_BEGIN in line:
            break
        comments.append(line.lstrip("#").strip())
    at = next((i for i, line in enumerate(comments) if HIDDEN_LABEL.match(line)), len(comments))
    visible = " ".join(comments[:at]).strip()
    if at == len(comments):
        return CheckHeader(visible, "")
    hidden = " ".join(comments[at:]).strip()
    label = HIDDEN_LABEL.match(hidden).group(0)
    return CheckHeader(visible, hidden[len(label):], label)


def lessons(nb) -> list[str]:
    """The lesson file stems a notebook's metadata names (a master's, or its release's), strings only."""
    metadata = nb.get("metadata", {})
    stems = metadata.get(LESSONS, []) if isinstance(metadata, dict) else []
    return [stem for stem in stems if isinstance(stem, str)] if isinstance(stems, list) else []


# --- nbgrader's check of the cell records, with its schema compiled once ---------------------------------------

def _metadata_validator():
    """nbgrader's MetadataValidator (schema version 3), whose schema check is compiled once per process: nbgrader's
    own calls jsonschema.validate for every cell, which checks the schema itself again each time (0.08 s of every
    CheckCellMetadata pass over a notebook, two passes a graded notebook). The same checks in the same order, the
    same errors: jsonschema.validate is validator_for, check_schema, and the best match of iter_errors."""
    import jsonschema
    from nbgrader.nbgraderformat import MetadataValidator
    from nbgrader.nbgraderformat.common import BaseMetadataValidator, SchemaTooNewError, SchemaTooOldError

    class CompiledSchema(BaseMetadataValidator):
        def validate_cell(self, cell) -> None:          # BaseMetadataValidator.validate_cell, compiled
            if "nbgrader" not in cell.metadata:
                return
            schema = cell.metadata["nbgrader"].get("schema_version", 0)
            if schema < self.schema_version:
                raise SchemaTooOldError(
                    "Outdated schema version: {} (expected {})".format(schema, self.schema_version),
                    schema, self.schema_version)
            elif schema > self.schema_version:
                raise SchemaTooNewError(
                    "Schema version is too new: {} (expected {})".format(schema, self.schema_version),
                    schema, self.schema_version)
            if getattr(self, "_compiled", None) is None:
                kind = jsonschema.validators.validator_for(self.schema)
                kind.check_schema(self.schema)
                self._compiled = kind(self.schema)
            error = jsonschema.exceptions.best_match(self._compiled.iter_errors(cell.metadata["nbgrader"]))
            if error is not None:
                raise error

    # MetadataValidatorV3 calls its base's validate_cell through super(): this class comes between them.
    return type("CompiledMetadataValidator", (MetadataValidator, CompiledSchema), {})()


_validator = None


def metadata_validator():
    global _validator
    if _validator is None:
        _validator = _metadata_validator()
    return _validator


class CheckCellMetadata(preprocessors.CheckCellMetadata):
    """nbgrader's CheckCellMetadata (the same errors, the same log) with the validator made once per process."""

    def preprocess(self, nb, resources):
        import traceback

        from nbgrader.nbgraderformat import ValidationError

        try:
            metadata_validator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg)
        return nb, resources
