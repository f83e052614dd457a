"""The built site, read file by file: nothing leaks, every link resolves, every page has what a reader
needs. (The browser tests in tests/browser/ then use the same build the way a student does.)"""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from bs4 import BeautifulSoup

from tests.sitecheck import (
    TEST_OUTPUT, assignment_pages, broken, built_pages, expected_pages, is_external, lesson_pages, links,
    readable_text, release_folders, secret_lines, site_files, soup,
)
from tools.course import COURSE

# Tests of the built site; those that read only the sources are also in the quick tier.
pytestmark = pytest.mark.site


def test_site_has_exactly_the_pages_of_the_table_of_contents(site):
    assert built_pages(site) == sorted(expected_pages())


def test_no_file_of_the_site_contains_solution_code_or_hidden_tests(site):
    """Over every file of the built site (pages, search index, sources, downloads, static files), not
    just the notebooks in the table of contents."""
    secrets = secret_lines()
    assert secrets, "found no solution lines in solutions/: the leak check would check nothing"
    markers = re.compile(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)")
    leaks = []
    for path in site_files(site):
        text = readable_text(path)
        if markers.search(text):
            leaks.append(f"{path.relative_to(site)}: an nbgrader marker")
        leaks += [f"{path.relative_to(site)}: {line!r}" for line in secrets if line in text]
    assert not leaks, "the site shows what only the masters in solutions/ hold:\n" + "\n".join(leaks[:20])


@pytest.mark.quick
def test_leak_check_finds_a_solution_line_hidden_in_highlighted_html_or_a_notebook(tmp_path):
    """The check above would see a leak: in a page, where highlighting splits a line into many spans,
    and in a notebook, where JSON escapes its quotes."""
    secret = sorted(secret_lines(), key=len)[-1]
    words = "".join(f'<span class="n">{word}</span> ' for word in secret.split(" "))
    (tmp_path / "page.html").write_text(f"<html><body><pre>{words}</pre></body></html>")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"def f():\n    {secret}\n")])
    nbformat.write(notebook, tmp_path / "copy.ipynb")
    for name in ("page.html", "copy.ipynb"):
        assert secret in readable_text(tmp_path / name), name


def test_downloadable_notebooks_are_lessons_or_releases(site):
    """Every .ipynb on the site is an executed lesson or a byte-identical student release."""
    releases = {path.read_bytes() for path in (COURSE.root / "exercises").glob("*/*.ipynb")}
    lessons = {f"{page.removesuffix('.html')}.ipynb" for page in lesson_pages()}
    for path in site.rglob("*.ipynb"):
        relative = path.relative_to(site).as_posix()
        if relative.startswith("_downloads/"):
            assert path.read_bytes() in releases, f"{relative} is not a release from exercises/"
        else:
            assert relative.removeprefix("_sources/") in lessons, f"unexpected notebook {relative}"
        nbformat.validate(nbformat.read(path, as_version=4))


def test_internal_links_and_anchors_resolve(site):
    problems, external = [], set()
    for page in built_pages(site):
        for link in links(site, page):
            if is_external(link.target):
                external.add(link.target)
            elif (why := broken(site, link)):
                problems.append(f"{page}: {link.target} ({why})")
    TEST_OUTPUT.mkdir(parents=True, exist_ok=True)
    # External links are listed for a person (or a networked job) to check, never fetched here.
    (TEST_OUTPUT / "external-links.txt").write_text("\n".join(sorted(external)) + "\n")
    assert not problems, "\n".join(problems)


def test_pages_load_no_script_or_style_from_another_site(site):
    """The site works offline: MathJax and everything else is served from the site itself."""
    for page in built_pages(site):
        document = soup(site / page)
        remote = [element.get("src") or element.get("href") for element in document.find_all(["script", "link"])
                  if is_external(element.get("src") or "") or
                  (element.name == "link" and element.get("rel") in (["stylesheet"], ["preload"])
                   and is_external(element.get("href") or ""))]
        assert not remote, f"{page} loads {remote}"


def test_lesson_pages_load_mathjax_from_the_site(site):
    page = site / "book" / "01-layernorm.html"
    sources = [script.get("src", "") for script in soup(page).find_all("script")]
    local = [src for src in sources if "tex-mml-chtml.js" in src]
    assert local and not is_external(local[0]), sources
    assert (page.parent / local[0].split("?")[0]).resolve().exists()


def test_every_figure_has_alt_text_and_a_numbered_caption(site):
    for page in built_pages(site):
        document = soup(site / page)
        for image in document.select("article img"):
            assert (image.get("alt") or "").strip(), f"{page}: an image without alt text: {image.get('src')}"
        for figure in document.select("article figure"):
            caption = figure.find("figcaption")
            assert caption and caption.get_text(strip=True), f"{page}: a figure without a caption"
            assert caption.select_one(".caption-number"), f"{page}: an unnumbered figure"


@pytest.mark.parametrize("page", lesson_pages())
def test_lesson_page_states_objectives_prerequisites_reading_time_and_whats_next(site, page):
    article = soup(site / page).select_one("article")
    text = article.get_text(" ", strip=True)
    top = text[: len(text) // 3]
    for needle in ("Prerequisites", "Reading time"):
        assert needle.lower() in top.lower(), f"{page}: no '{needle}' near the top"
    assert article.select_one(".admonition.tip"), f"{page}: no 'At a glance' box"
    headings = [heading.get_text(strip=True).rstrip("#").lower().replace("\u2019", "'")
                for heading in article.find_all(["h2", "h3"])]
    assert headings[-2:] == ["what's next", "further reading"], f"{page}: last sections {headings[-2:]}"
    assert any("check your understanding" in heading for heading in headings), f"{page}: no self-check section"
    assert article.select(".admonition.dropdown"), f"{page}: no answers hidden in dropdowns"
    assert article.select(".admonition.warning"), f"{page}: no 'Common mistake' callout"


@pytest.mark.parametrize("page", lesson_pages())
def test_lesson_page_has_download_and_launch_buttons(site, page):
    document = soup(site / page)
    hrefs = [a.get("href", "") for a in document.select(".article-header-buttons a")]
    assert any(href.endswith(".ipynb") and not is_external(href) for href in hrefs), f"{page}: no .ipynb download"
    for service in ("mybinder.org", "colab.research.google.com", "/hub/user-redirect/git-pull"):
        assert any(service in href for href in hrefs), f"{page}: no launch button for {service}"


def test_every_release_has_an_assignment_page_that_downloads_it(site):
    for folder, page in zip(release_folders(), assignment_pages()[1:]):
        downloads = [a["href"] for a in soup(site / page).select("a.download")]
        names = sorted(path.name for path in folder.glob("*.ipynb"))
        assert sorted(href.rsplit("/", 1)[-1] for href in downloads) == names, page
        for href in downloads:
            served = (site / page).parent / href
            assert served.read_bytes() == (folder / served.name).read_bytes(), f"{page} serves another {served.name}"


def test_search_index_covers_every_page(site):
    text = (site / "searchindex.js").read_text()
    index = json.loads(text[text.index("(") + 1: text.rindex(")")])
    documents = set(index["docnames"])
    for page in expected_pages():
        if page not in ("search.html", "genindex.html"):
            assert page.removesuffix(".html") in documents, page


OKABE_ITO = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
NEUTRAL_NAMES = {"black", "white", "grey", "gray", "lightgrey", "lightgray", "darkgrey", "darkgray", "none"}
SAFE_COLORMAPS = {"viridis", "cividis", "magma", "inferno", "plasma", "greys", "gray", "grey", "binary"}


@pytest.mark.quick
@pytest.mark.parametrize("lesson", lesson_pages())
def test_plot_colours_are_distinguishable_with_any_colour_vision(lesson):
    """Figures use the Okabe-Ito palette (or greys) and perceptually uniform colour maps."""
    source = (COURSE.root / lesson).with_suffix(".md")
    code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", source.read_text(), re.DOTALL))
    for colour in re.findall(r"#[0-9A-Fa-f]{6}\b", code):
        red, green, blue = colour[1:3], colour[3:5], colour[5:7]
        assert colour.upper() in OKABE_ITO or red == green == blue, f"{lesson}: colour {colour}"
    for name in re.findall(r"\bcolou?rs?\s*=\s*[\"']([a-zA-Z]+)[\"']", code):
        assert name.lower() in NEUTRAL_NAMES, f"{lesson}: named colour {name!r}; use the Okabe-Ito palette"
    for cmap in re.findall(r"\bcmap\s*=\s*[\"']([A-Za-z_]+)[\"']", code):
        assert cmap.lower().removesuffix("_r") in SAFE_COLORMAPS, f"{lesson}: colour map {cmap!r}"


@pytest.mark.parametrize("page", lesson_pages())
def test_lesson_page_has_a_self_check_quiz_that_runs_in_the_browser(site, page):
    """The quiz's questions and its JavaScript are inlined in the page: no server, no request."""
    scripts = " ".join(script.get_text() for script in soup(site / page).select("article script"))
    assert "var questions" in scripts and "Question.register" in scripts, f"{page}: no jupyterquiz quiz"


# --- What each lesson cites, hints, and figures that one page repeats from another or from configuration ---

def lesson_sources():
    return [(COURSE.root / page).with_suffix(".md") for page in lesson_pages()]


def section(source: str, heading: str) -> str:
    """The text of one `## heading` section of a lesson's Markdown source."""
    start = source.index(f"\n## {heading}\n")
    end = source.find("\n## ", start + 1)
    return source[start: end if end != -1 else len(source)]


@pytest.mark.quick
@pytest.mark.parametrize("lesson", lesson_sources(), ids=lambda path: path.stem)
def test_every_stretch_exercise_has_a_hint_hidden_until_revealed(lesson):
    exercises = section(lesson.read_text(), "Stretch exercises")
    numbered = re.findall(r"(?m)^\d+\. ", exercises)
    hints = re.findall(r"(?m)^   ```\{admonition\} Hint\n   :class: dropdown\n", exercises)
    assert numbered and len(hints) == len(numbered), f"{lesson.name}: {len(numbered)} exercises, {len(hints)} hints"


@pytest.mark.quick
@pytest.mark.parametrize("lesson", lesson_sources(), ids=lambda path: path.stem)
def test_every_lesson_ends_with_further_reading_from_the_bibliography(lesson):
    """Cited with sphinxcontrib-bibtex's {footcite} and listed by {footbibliography}, never typed by hand."""
    from pybtex.database import parse_file

    source = lesson.read_text()
    reading = section(source, "Further reading")
    assert source.rstrip().endswith("```{footbibliography}\n```"), f"{lesson.name}: no bibliography at the end"
    keys = {key for group in re.findall(r"\{footcite:[pt]\}`([^`]+)`", source) for key in group.split(",")}
    listed = {key for group in re.findall(r"\{footcite:[pt]\}`([^`]+)`", reading) for key in group.split(",")}
    assert len(listed) >= 3, f"{lesson.name}: only {sorted(listed)} under Further reading"
    known = set(parse_file(COURSE.root / "book" / "references.bib").entries)
    assert keys <= known, f"{lesson.name}: not in book/references.bib: {sorted(keys - known)}"


@pytest.mark.parametrize("page", lesson_pages())
def test_lesson_page_shows_its_reference_list(site, page):
    entries = soup(site / page).select("article aside.footnote-list aside.footnote")
    assert len(entries) >= 3, f"{page}: {len(entries)} references listed"
    assert all(entry.get_text(strip=True) for entry in entries)


@pytest.mark.quick
def test_stated_grading_timeout_is_the_configured_one(monkeypatch):
    """The per-cell timeout lives in autograder/nbgrader_config.py; every page that states it agrees."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.delenv("COURSE_GRADING_CELL_TIMEOUT", raising=False)
    configured = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE.root / "autograder")).load_config()
    timeout = int(configured.Execute.timeout)
    stated = {page.name: [int(n) for n in re.findall(r"per-cell (?:execution )?timeout of (\d+)\s*s\b",
                                                      " ".join(page.read_text().split()))]
              for page in (COURSE.root / "book").glob("*.md")}
    assert stated["instructors.md"], "the instructors' page no longer states the per-cell timeout"
    wrong = {name: figures for name, figures in stated.items() if any(n != timeout for n in figures)}
    assert not wrong, f"configured {timeout} s; pages state {wrong}"


@pytest.mark.quick
def test_landing_page_figures_agree_with_the_lessons():
    """Lesson 8's run time is stated on the landing page and on the lesson; the leakage test is lesson 5's."""
    index = " ".join((COURSE.root / "book" / "index.md").read_text().split())
    lesson8 = " ".join((COURSE.root / "book" / "08-ablations.md").read_text().split())
    run_time = re.search(r"which takes (about [a-z ]+?) on a laptop CPU", lesson8).group(1)
    assert f"(lesson 8, which trains five models) in {run_time}." in index
    rows = {re.search(r"<(\d\d)-", row).group(1): row
            for row in (COURSE.root / "book" / "index.md").read_text().splitlines() if row.startswith("| {doc}")}
    assert "## The leakage test" in (COURSE.root / "book" / "05-gpt.md").read_text()
    assert "no position reads the future" in rows["05"] and "no position reads the future" not in rows["04"]


DIAGRAMS = COURSE.root / "book" / "_static" / "diagrams"


@pytest.mark.quick
def test_diagrams_are_hand_written_svg_with_real_text_and_a_description():
    """Reviewable as text: no embedded raster image, every word a <text> element, and a <title> and
    <desc> for anything that reads the file on its own. The required ones exist."""
    sources = sorted(DIAGRAMS.glob("*.svg"))
    assert {path.stem for path in sources} >= {"layernorm", "mlp", "causal-mask", "head-split", "pre-ln-block",
                                               "pre-ln-vs-post-ln", "gpt-shapes"}
    for path in sources:
        svg = BeautifulSoup(path.read_text(), "html.parser").find("svg")     # lowercases attribute names
        assert svg.get("viewbox") and svg.get("width") and svg.get("height"), path.name
        assert svg.find("title") and svg.find("desc"), f"{path.name}: no <title> or <desc>"
        assert not svg.find("image"), f"{path.name}: embeds a raster image"
        assert len(svg.find_all("text")) >= 5, f"{path.name}: too little real text"


def test_every_diagram_in_a_lesson_has_alt_text_and_a_numbered_caption(site):
    shown = set()
    for page in lesson_pages():
        for image in soup(site / page).select("article img.diagram"):
            shown.add(image["src"].rsplit("/", 1)[-1])
            assert len(image.get("alt", "")) > 40, f"{page}: {image['src']} has little or no alt text"
            caption = image.find_parent("figure").find("figcaption")
            assert caption and caption.select_one(".caption-number"), f"{page}: {image['src']} has no caption"
    assert shown == {path.name for path in DIAGRAMS.glob("*.svg")}, "a diagram is drawn but never shown"


def test_old_lesson_addresses_forward_to_existing_pages(site):
    from tests.sitecheck import redirects

    for old, new in redirects().items():
        assert (site / new).exists(), new
        page = (site / old).read_text()
        target = new.rsplit("/", 1)[-1]
        assert f'url={target}"' in page and f'href="{target}"' in page, old


def test_every_section_the_feedback_links_to_is_a_section_of_the_built_lesson(site):
    """The feedback summary links a check to a lesson's section by the id it computes from the lesson's source
    (autograder/pages/summary.read_lesson); Sphinx's own ids on the built page are the truth."""
    from autograder.pages.summary import read_lesson

    for path in COURSE.lessons():
        page = BeautifulSoup((site / "book" / f"{path.stem}.html").read_text(), "html.parser")
        sections = {section["id"] for section in page.find_all("section") if section.get("id")}
        lesson = read_lesson(path)
        assert lesson.sections, path.name
        for section in lesson.sections:
            if section.anchor:
                assert section.anchor in sections, f"{path.name}: no section #{section.anchor} ({section.title})"
