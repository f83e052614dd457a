"""The lessons exported as .ipynb for Colab (`make notebooks`): Jupyter shows no MyST directive, so the
code tabs arrive as the code itself, one language after another, and the code cells are the lesson's."""

import re

import nbformat
import pytest

from tools.build_book import export_notebooks
from tools.course import COURSE
from tools.notebooks import read_notebook

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_notebooks(tmp_path_factory.mktemp("notebooks"))


@pytest.mark.parametrize("lesson, files", [("01-layernorm", ("norms.py", "norms.hpp", "norms.rs")),
                                           ("02-mlp", ("gelu.py", "gelu.hpp", "gelu.rs"))])
def test_code_tabs_arrive_as_the_code_itself(exported, lesson, files):
    notebook = nbformat.read(exported / "book" / f"{lesson}.ipynb", as_version=4)
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert not re.search(r"\{(literalinclude|tab-set|tab-item)\}|^:{3,}|^:sync", markdown, re.MULTILINE)
    for name, language in zip(files, ("python", "cpp", "rust")):
        code = (COURSE.root / "book" / "code" / name).read_text().rstrip("\n")
        assert f"```{language}\n{code}\n```" in markdown, name
    for title in ("**Python**", "**C++**", "**Rust**"):
        assert title in markdown


def test_code_cells_are_the_lessons(exported):
    for lesson in COURSE.lessons():
        source = [cell.source for cell in read_notebook(lesson).cells if cell.cell_type == "code"]
        notebook = nbformat.read(exported / lesson.relative_to(COURSE.root).with_suffix(".ipynb"), as_version=4)
        assert [cell.source for cell in notebook.cells if cell.cell_type == "code"] == source, lesson.name
