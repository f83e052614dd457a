"""The feedback page's exporter (autograder/pages/feedback_page.py) writes nbconvert's page without parsing it twice:
read back by BeautifulSoup, as HTMLExporter reads it, each page is exactly HTMLExporter's, images without alternative
text given nbconvert's sentence wherever html.parser finds them (and nowhere else)."""

from __future__ import annotations

import base64
import copy

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from autograder.pages.feedback_page import NO_DESCRIPTION, FeedbackPage, described

pytestmark = pytest.mark.quick

PNG = base64.b64encode(bytes.fromhex(             # a 1x1 PNG
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201e2a7a4f60000000049454e44ae426082")).decode()


def notebook() -> nbformat.NotebookNode:
    """Images of every kind a page can hold, and `<img` where no image is."""
    markdown = nbformat.v4.new_markdown_cell(
        f"![a plot](data:image/png;base64,{PNG}) and <img src=\"data:image/png;base64,{PNG}\"> and "
        "<IMG SRC='x.png'/> and <img alt=\"\" src=\"z.png\"> and "
        "<a title=\"x <img src=q.png> z\">a link</a>, a form feed \x0c and a return \r before "
        "<img src=\"after-the-breaks.png\">, and `<img src=code.png>` in code")
    code = nbformat.v4.new_code_cell("plot()", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
        nbformat.v4.new_output("stream", name="stdout", text="<img src=printed.png>\n"),
        nbformat.v4.new_output("display_data", data={
            "text/html": "<p><img src=\"html-output.png\"></p><img\nsrc=\"lines.png\"\n  width=\"4\"\n>"}),
    ])
    return nbformat.v4.new_notebook(cells=[markdown, code, nbformat.v4.new_markdown_cell("no image here")])


NOTEBOOK = notebook()                    # one notebook for both exporters: its cells' ids are drawn when it is made


def test_the_page_is_nbconverts_page_less_its_second_parse():
    """On the classic template, which nbgrader's feedback template extends (that one needs a graded notebook: the
    grading tests' feedback pages are made with this exporter)."""
    config = Config()
    config.HTMLExporter.template_name = "classic"
    theirs, _ = HTMLExporter(config=config).from_notebook_node(copy.deepcopy(NOTEBOOK))
    ours, _ = FeedbackPage(config=config).from_notebook_node(copy.deepcopy(NOTEBOOK))
    assert ours != theirs                                   # not re-serialized
    assert str(BeautifulSoup(ours, features="html.parser")) == theirs
    # The markdown's raw image, X.PNG, the image after the breaks, the displayed PNG and the two of the HTML output.
    assert ours.count(NO_DESCRIPTION) == theirs.count(NO_DESCRIPTION) == 6


def test_only_image_tags_get_the_sentence():
    page = '<p title="<img src=a.png>">x</p><img src="b.png"><img src="c.png" alt="mine"><pre>&lt;img src=d&gt;</pre>'
    described_page, missing = described(page)
    assert missing == 1
    assert described_page == page.replace('<img src="b.png">', f'<img src="b.png" alt="{NO_DESCRIPTION}">')
    assert described("<p>no image</p>") == ("<p>no image</p>", 0)


def test_another_template_goes_through_nbconverts_own_pass():
    config = Config()
    config.HTMLExporter.template_name = "lab"
    theirs, _ = HTMLExporter(config=config).from_notebook_node(copy.deepcopy(NOTEBOOK))
    ours, _ = FeedbackPage(config=config).from_notebook_node(copy.deepcopy(NOTEBOOK))
    assert ours == theirs
