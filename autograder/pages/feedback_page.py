"""The feedback page (`nbgrader generate_feedback`): nbconvert's HTML exporter, without the pass that parses every
page it has rendered into a tree and writes the tree out again.

nbconvert's HTMLExporter renders the template, reads the whole page back into a BeautifulSoup tree (Python's
html.parser), gives each image without alternative text nbconvert's sentence, gives the lab template's cells a
tabindex, and writes the tree out again: 0.75 of the 1.3 CPU-seconds a feedback page took (bench/history.md). The
feedback template is the classic one, which has no lab cells, so of that pass only the alternative text is left,
and it is added here where the same parser finds the images (html.parser's tokenizer, without a tree), in the page
as rendered: a page without `<img` is not parsed at all. The page is nbconvert's page less its re-serialization:
read by BeautifulSoup it is exactly what HTMLExporter writes (tests/test_feedback_page.py). Any other template goes
through nbconvert's own pass.
"""

from __future__ import annotations

from html.parser import HTMLParser

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

NO_DESCRIPTION = "No description has been provided for this image"       # nbconvert's words for it
CLASSIC_TEMPLATES = {"feedback", "classic"}      # nbgrader's feedback template extends nbconvert's classic one


class ImagesWithoutAlt(HTMLParser):
    """Where html.parser (BeautifulSoup's parser in nbconvert) starts each `img` tag that has no alt attribute:
    (line, column, the tag's text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, int, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img" and not any(name == "alt" for name, _ in attrs):
            self.found.append((*self.getpos(), self.get_starttag_text()))

    handle_startendtag = handle_starttag


def described(page: str) -> tuple[str, int]:
    """The page with nbconvert's sentence as the alternative text of each image that has none, and how many: the
    attribute goes last in the tag, where BeautifulSoup puts it."""
    if "<img" not in page.lower():
        return page, 0
    parser = ImagesWithoutAlt()
    parser.feed(page)
    parser.close()
    line_starts = [0]                          # html.parser counts lines by "\n" alone
    while (newline := page.find("\n", line_starts[-1])) != -1:
        line_starts.append(newline + 1)
    pieces, done = [], 0                         # the page up to `done` is in pieces
    for line, column, text in parser.found:
        start = line_starts[line - 1] + column
        if start < done or page[start:start + len(text)] != text:
            raise ValueError("html.parser's position of an image tag is not where its text is")
        close = start + len(text) - (2 if text.endswith("/>") else 1)
        pieces += [page[done:close], f' alt="{NO_DESCRIPTION}"']
        done = close
    pieces.append(page[done:])
    return "".join(pieces), len(parser.found)


class FeedbackPage(HTMLExporter):
    """HTMLExporter for the feedback template: the same page, without parsing it again."""

    def from_notebook_node(self, nb, resources=None, **kw):
        if self.template_name not in CLASSIC_TEMPLATES:
            return super().from_notebook_node(nb, resources, **kw)
        # HTMLExporter.from_notebook_node up to its BeautifulSoup pass (nbconvert 7.17, pinned).
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        highlight_code = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self,
                                                 resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        page, missing = described(page)
        if missing:
            self.log.warning("Alternative text is missing on %s image(s).", missing)
        return page, resources
