"""The site builds (warnings as errors) from the notebooks the suite already executed."""

import re

import pytest

from tools.build_book import build_from_executed
from tools.notebooks import REPO


@pytest.fixture(scope="module")
def site(executions, tmp_path_factory):
    failed = [str(path) for path, run in executions.items() if run.error]
    if failed:
        pytest.fail(f"cannot build the site: notebooks failed: {failed}")
    lessons = {path: run for path, run in executions.items() if path.parent == REPO / "book"}
    return build_from_executed(lessons, tmp_path_factory.mktemp("site"))


def test_landing_page_and_lesson_are_built(site):
    assert (site / "index.html").exists()
    lesson = (site / "book" / "01-layernorm.html").read_text()
    assert "LayerNorm" in lesson
    assert "math notranslate" in lesson                 # display maths for MathJax
    assert re.search(r'<img [^>]*src="[^"]+\.png"', lesson)   # the figure
    assert "-1.2247, 0.0000, 1.2247" in lesson           # glued, computed numbers
    assert "Traceback" not in lesson


def test_site_contains_no_solutions_or_hidden_tests(site):
    for page in site.rglob("*"):
        if page.is_file() and page.suffix in {".html", ".js", ".txt", ".ipynb", ".json"}:
            text = page.read_text(errors="ignore")
            assert not re.search(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)", text), page
            assert "solutions/" not in text or page.name == "instructors.html", page
