"""What a student does on the site, done in Chromium: read the maths and the figure, reveal an answer,
take the quiz, search, download a lesson and an assignment."""

import json
import re

import nbformat
import pytest

from tests.browser.conftest import chromium, new_context, open_page, served
from tests.conftest import after_site_result
from tests.sitecheck import normalize, release_folders, secret_lines
from tools.course import COURSE

pytestmark = pytest.mark.browser

LAYERNORM = "book/01-layernorm.html"


@pytest.fixture(scope="module")
def layernorm(browser, base_url):
    """The LayerNorm lesson, loaded once for the tests below (each touches a different part of it)."""
    context = new_context(browser, base_url)
    yield open_page(context, base_url, LAYERNORM)
    context.close()


def test_equations_are_typeset_by_mathjax_served_from_the_site(layernorm, base_url):
    page = layernorm
    assert page.locator("mjx-container").count() > 10
    assert page.locator("mjx-merror").count() == 0, "MathJax could not typeset some TeX"
    display = page.locator("mjx-container[display='true']").first
    assert display.bounding_box()["width"] > 100
    scripts = page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    mathjax = [url for url in scripts if url.split("?")[0].endswith("tex-mml-chtml.js")]
    assert mathjax and all(url.startswith(base_url) for url in mathjax), mathjax


def test_figure_image_loads_with_nonzero_size(layernorm):
    image = layernorm.locator("figure img").first
    image.scroll_into_view_if_needed()
    natural = image.evaluate("img => img.complete ? [img.naturalWidth, img.naturalHeight] : [0, 0]")
    assert natural[0] > 0 and natural[1] > 0
    box = image.bounding_box()
    assert box["width"] > 100 and box["height"] > 50
    assert len(image.get_attribute("alt")) > 20
    assert re.match(r"Fig\. \d+", layernorm.locator("figure figcaption .caption-number").first.inner_text())


def test_revealing_a_hidden_answer_shows_its_text(layernorm):
    answer = layernorm.locator("#check-your-understanding .dropdown").first
    body = answer.locator("> :not(.admonition-title)").first
    assert body.is_hidden(), "the answer is visible before it is revealed"
    answer.locator("button.toggle-button").click()
    body.wait_for(state="visible")
    assert len(body.inner_text().strip()) > 10


def test_code_cells_have_copy_buttons(layernorm):
    assert layernorm.locator("div.cell_input button.copybtn").count() >= 3


def test_previous_and_next_links_follow_the_reading_order(layernorm):
    assert layernorm.locator(".prev-next-area a.left-prev").get_attribute("href") == "index.html"
    assert layernorm.locator(".prev-next-area a.right-next").get_attribute("href").startswith("02-")


def test_self_check_quiz_answers_in_the_page(layernorm):
    """The jupyterquiz quiz runs in the browser alone: choosing an answer shows its feedback."""
    quiz = layernorm.locator(".Quiz").first
    quiz.scroll_into_view_if_needed()
    choice = quiz.locator(".MCButton").first
    choice.click()
    feedback = quiz.locator(".Feedback").first
    feedback.wait_for(state="visible")
    assert feedback.inner_text().strip()


def load_the_quiz_page_on_a_slow_machine(site) -> dict[str, list[str]]:
    """The quiz page loaded at a twentieth of the CPU's speed: its errors and outside requests. A site job
    (tests/conftest.py): the throttled renderer idles a core for half a minute, which the background thread
    overlaps with grading."""
    with served(site) as base_url, chromium() as browser:
        context = new_context(browser, base_url)
        try:
            page = context.new_page()
            context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": 20})
            errors = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            # A page load at a twentieth of the CPU's speed took over Playwright's default 30 s on a busy machine
            # (load 5): 120 s.
            page.goto(base_url + "book/08-ablations.html", wait_until="load", timeout=120_000)
            page.locator(".Quiz .MCButton").first.wait_for(state="attached", timeout=120_000)
            page.wait_for_timeout(2_000)                      # past jupyterquiz's 0.5 s MathJax check
            return {"errors": errors, "outside": list(context.outside_requests)}
        finally:
            # Always: a throttled page left open kept a renderer busy at half a core for the rest of the run.
            context.close()


@pytest.mark.after_site.with_args(load_the_quiz_page_on_a_slow_machine)
def test_quiz_page_loads_cleanly_on_a_slow_machine(site, request):
    """jupyterquiz reads MathJax.version half a second after its inline script runs and throws if
    MathJax has not loaded by then (and can fall back to fetching MathJax from a CDN). The site loads
    MathJax before the page body for this reason; a CPU slowed twentyfold is where the race showed."""
    visit = after_site_result(request.config, load_the_quiz_page_on_a_slow_machine, site)
    assert not visit["errors"], visit["errors"]
    assert not visit["outside"], visit["outside"]


def test_search_for_layernorm_returns_the_lesson(context, base_url):
    page = open_page(context, base_url, "search.html?q=LayerNorm")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=15_000)
    hrefs = results.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("book/01-layernorm.html" in href for href in hrefs), hrefs


def download(page, selector):
    """Click a link as a student would, and return the downloaded file's bytes. Links that open a new tab
    (the theme's download menu) download from that tab, so listen on every page of the context."""
    downloads = []
    page.context.on("page", lambda popup: popup.on("download", lambda item: downloads.append(item)))
    page.on("download", lambda item: downloads.append(item))
    page.locator(selector).first.click()
    for _ in range(100):
        if downloads:
            break
        page.wait_for_timeout(100)
    assert downloads, f"clicking {selector} downloaded nothing"
    return open(downloads[0].path(), "rb").read(), downloads[0].suggested_filename


def test_lesson_download_button_serves_a_valid_notebook(layernorm):
    layernorm.locator(".dropdown-download-buttons button.dropdown-toggle").click()
    data, name = download(layernorm, ".dropdown-download-buttons a.dropdown-item[href$='.ipynb']")
    assert name.endswith(".ipynb")
    notebook = nbformat.reads(data.decode(), as_version=4)
    nbformat.validate(notebook)
    assert any("layernorm" in cell.source for cell in notebook.cells if cell.cell_type == "code")


@pytest.mark.parametrize("folder", release_folders(), ids=lambda folder: folder.name)
def test_assignment_page_downloads_the_release_without_solutions(context, base_url, folder):
    page = open_page(context, base_url, f"book/assignments/{folder.name}.html")
    data, name = download(page, "a.download")
    release = folder / name
    assert release.exists() and data == release.read_bytes(), f"{name} is not the release in {folder}"
    notebook = nbformat.reads(data.decode(), as_version=4)
    nbformat.validate(notebook)
    text = json.dumps(notebook)
    assert not re.search(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)", text)
    sources = normalize("\n".join(cell.source for cell in notebook.cells))
    assert not [line for line in secret_lines() if line in sources]
    answers = [cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("solution")
               and cell.cell_type == "code"]
    assert answers and all("NotImplementedError" in cell.source for cell in answers)
    assert str(COURSE.root / "solutions") not in text
