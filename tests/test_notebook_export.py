"""The lessons exported as .ipynb for Colab (`make notebooks`): Jupyter shows no MyST directive, so the
code tabs arrive as the code itself, one language after another, and the code cells are the lesson's."""

import re
import sys

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


def course_site_module():
    """book/_ext/course_site.py, the site's extension, loaded as Sphinx loads it (from its folder)."""
    import importlib.util
    path = COURSE.root / "book" / "_ext" / "course_site.py"
    spec = importlib.util.spec_from_file_location("course_site_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lesson, distinctive", [
    ("01-layernorm", {"norms.py": "def rms_norm(x, gamma, eps=1e-5):",
                      "norms.hpp": "inline std::vector<float> layer_norm(const std::vector<float>& x,",
                      "norms.rs": "fn rms_norm(x: &[f32], gamma: &[f32], eps: f32) -> Vec<f32> {"}),
    ("02-mlp", {"gelu.py": "def gelu_tanh(", "gelu.rs": "fn gelu_tanh(x: &[f32]) -> Vec<f32> {",
                "gelu.hpp": "gelu_tanh("})])
def test_colab_button_opens_an_export_that_shows_every_tab(exported, lesson, distinctive):
    """Issue 53: the Colab button of a code-tab lesson showed the directives, not the code. Follow the
    button as the site writes it (sphinx-book-theme's URL to the .md, rewritten by course_site.py to the
    notebooks branch) into the folder `make notebooks` publishes as that branch: the notebook it names
    exists and its Markdown holds each tab's code and no directive."""
    from types import SimpleNamespace

    branch = "notebooks"
    theme_url = f"https://colab.research.google.com/github/gpt2-block-course/course/blob/main/book/{lesson}.md"
    context = {"header_buttons": [{"buttons": [{"text": "Colab", "url": theme_url}]}]}
    app = SimpleNamespace(config=SimpleNamespace(course_notebooks_branch=branch))
    course_site_module().fix_colab_links(app, f"book/{lesson}", "page.html", context, None)
    url = context["header_buttons"][0]["buttons"][0]["url"]
    assert f"/blob/{branch}/" in url and url.endswith(".ipynb"), url
    notebook_path = exported / url.split(f"/blob/{branch}/", 1)[1]
    assert notebook_path.is_file(), f"the Colab button names {notebook_path.relative_to(exported)}, not exported"

    markdown = "\n".join(cell.source for cell in nbformat.read(notebook_path, as_version=4).cells
                         if cell.cell_type == "markdown")
    for name, line in distinctive.items():
        assert line in (COURSE.root / "book" / "code" / name).read_text(), f"{name} no longer has {line!r}"
        assert line in markdown, f"{lesson}'s Colab notebook lacks {name}'s code"
    for directive in ("{literalinclude}", "{tab-set}", "{tab-item}", ":sync:", ":sync-group:"):
        assert directive not in markdown, f"{lesson}'s Colab notebook shows the raw {directive}"
