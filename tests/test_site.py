"""The site builds (warnings as errors) from the notebooks the suite already executed."""

import re

import pytest

pytestmark = pytest.mark.site

# `site` (tests/conftest.py) is built once per run and shared with the browser tests.


def test_landing_page_and_lesson_are_built(site):
    assert (site / "index.html").exists()
    lesson = (site / "book" / "01-layernorm.html").read_text()
    assert "LayerNorm" in lesson
    assert "math notranslate" in lesson                 # display maths for MathJax
    assert re.search(r'<img [^>]*src="[^"]+\.png"', lesson)   # the figure
    assert "-1.2247, 0.0000, 1.2247" in lesson           # glued, computed numbers
    assert "Traceback" not in lesson


def test_the_grader_page_shows_the_limits_the_grader_applies(site):
    """The limits table is made from the Limits traits (autograder/limits.py) when the site is built: each
    limit's default, its setting and the variable that overrides it for one run."""
    from bs4 import BeautifulSoup

    from autograder.limits import Limits, trait_name
    from autograder.grading_environment import LIMITS

    page = BeautifulSoup((site / "book" / "grader.html").read_text(), "html.parser")
    rows = [[cell.get_text(" ", strip=True) for cell in row.find_all("td")]
            for row in page.select(".grading-limits table tbody tr")]
    assert [(row[1], row[2]) for row in rows] == [
        (f"{limit.default:g} {limit.unit}".strip(), f"c.Limits.{trait_name(limit)} ( {limit.variable} )")
        for limit in LIMITS]
    assert {trait_name(limit) for limit in LIMITS} == set(Limits.class_trait_names(config=True))


def test_site_contains_no_solutions_or_hidden_tests(site):
    for page in site.rglob("*"):
        if page.is_file() and page.suffix in {".html", ".js", ".txt", ".ipynb", ".json"}:
            text = page.read_text(errors="ignore")
            assert not re.search(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)", text), page
