"""Read the values a lesson glued (myst_nb.glue) out of its executed notebook."""

from __future__ import annotations

import ast

import nbformat

GLUE_MIME = "application/papermill.record/"


def glued(path) -> dict[str, dict]:
    """name -> {mime type: data} for every glued value in an executed notebook."""
    values = {}
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook")
            if record:
                values[record["name"]] = {mime.removeprefix(GLUE_MIME): data
                                          for mime, data in output.get("data", {}).items()}
    return values


def glued_text(path) -> dict[str, str]:
    """name -> the plain-text form of each glued value (what {glue:text} shows on the page)."""
    return {name: data.get("text/plain", "") for name, data in glued(path).items()}


def glued_value(text: str):
    """A glued repr turned back into a Python value: "'1.0'" -> '1.0', 'True' -> True."""
    return ast.literal_eval(text)


def glued_values(path) -> dict:
    """name -> Python value for every glued value that is plain data: figures (PNG) and rendered
    Markdown are left out, since their text form is not a Python literal."""
    return {name: glued_value(data.get("text/plain", "")) for name, data in glued(path).items()
            if "image/png" not in data and "text/markdown" not in data}
