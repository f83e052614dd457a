"""Every page made from a hand-in is safe after rendering, whichever renderer reads it.

A student's notebook is shown to people other than its author: the instructor reads it in nbgrader's
formgrader (logged in, with the power to change grades and write files), the feedback page is made from it,
and anyone may open the autograded copy in JupyterLab or convert it with nbconvert. Markdown renderers
differ: nbconvert's markdown2html passes raw HTML and every link scheme through, nbgrader's formgrade and
feedback templates render markdown cells without nbconvert's sanitizer (`clean_html`) whatever
`sanitize_html` says, JupyterLab sanitizes on its own terms. So what a hand-in contributes to a page is made
safe twice, by construction rather than by a list of known attacks:

- **at autograde time** (`SafeMarkup`, an nbgrader preprocessor that nbgrader_config.py runs after the
  notebook has executed and been scored): each markdown cell is parsed (markdown-it, CommonMark with tables
  and `$` math). A cell that has no raw HTML, no `<` outside its code and formulas, and only safe link and
  image destinations stays exactly as written (the masters' and honest students' cells). Any other cell is
  replaced by its rendering, cleaned against an allow-list (`clean_html`), as one HTML block that every
  CommonMark renderer passes through unchanged; its formulas stay TeX between `$` signs, so they are still
  typeset. The kernel's rich outputs keep plain text and raster images; HTML is cleaned, markdown made safe
  as above, and active types (JavaScript, SVG, widgets, anything unknown) are reduced to a line of text;
  outputs' metadata keeps numeric image sizes only; raw cells are cleaned; attachments keep raster images.
- **at render time**, for a notebook graded before this module existed (or by stock nbgrader):
  nbgrader_config.py makes `SafeMarkup` a preprocessor of every HTML export (`HTMLExporter.preprocessors`),
  so the formgrader and `generate_feedback` apply it to the notebook before their templates see it; and
  (nbgrader_config.py sets `HTMLExporter.filters`) nbconvert's `markdown2html` and
  `clean_html` filters are replaced by `markdown2html` and `clean_html` below, which clean the rendered
  HTML against the same allow-list, and `get_metadata` by one that gives an image's size only as a number
  (nbconvert's templates write it into an unquoted attribute). Every template that nbgrader's formgrader and `generate_feedback` use
  calls these filters, so a notebook graded before this module existed (or by stock nbgrader) is still
  rendered safely in the formgrader, and the feedback page's links and images are checked after rendering.

The allow-list: ordinary text markup (paragraphs, headings, lists, emphasis, code, tables, quotes); links
only to http(s) hosts, mailto: or an anchor on the same page (`#...`); images only inline raster data
(`data:image/png|jpeg|gif|webp;base64`) or a cell attachment, so nothing on a page makes the browser fetch
another host; no ids, no styles, no event handlers, no forms, frames, scripts, objects or meta elements.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

from jinja2 import pass_context
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Int

from autograder.pages.allow_list import (MOST_REBUILT_PER_NOTEBOOK, RASTER, WRAPPER_CLASS, clean_html,
                                         rebuilt_allowance, safe_image, safe_link, tangled)

MARKER = "course_safe_markup"        # cell metadata: what SafeMarkup did to the cell ("html", "text")

# Rich outputs: kept as they are; cleaned; anything else is reduced to text.
KEPT_OUTPUTS = {"text/plain", "image/png", "image/jpeg", "image/gif", "application/json"}
CLEANED_OUTPUTS = {"text/html", "text/markdown", "text/latex"}

MAX_MARKDOWN_CHARS = 200_000     # a longer markdown cell is shown as text, unparsed
MAX_HTML_OUTPUT_CHARS = 500_000  # a longer HTML output is reduced to its plain text


# --- markdown ------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, double_inline=True)
    md.validateLink = lambda url: True         # every destination becomes a token, and is judged below

    def inline(self, tokens, index, options, env):
        return "$" + html.escape(tokens[index].content, quote=False) + "$"

    def inline_double(self, tokens, index, options, env):
        return "$$" + html.escape(tokens[index].content, quote=False) + "$$"

    def block(self, tokens, index, options, env):
        return "<div>$$" + html.escape(tokens[index].content, quote=False) + "$$</div>\n"

    md.add_render_rule("math_inline", inline)
    md.add_render_rule("math_inline_double", inline_double)
    md.add_render_rule("math_block", block)
    md.add_render_rule("math_block_label", block)
    return md


CODE_TOKENS = {"code_inline", "code_block", "fence", "math_inline", "math_inline_double", "math_block",
               "math_block_label"}


def tokens(source: str):
    for token in parser().parse(source):
        yield token
        yield from token.children or ()


def is_plain(source: str) -> bool:
    """True when the cell needs no change: markdown-it sees no raw HTML, every `<` of the source is inside
    code or a formula (so no other renderer can read a tag there either), every link is safe and every image
    is carried by the notebook."""
    angles = 0
    for token in tokens(source):
        if token.type in ("html_block", "html_inline"):
            return False
        if token.type in CODE_TOKENS:
            angles += token.content.count("<")
        elif token.type == "link_open" and not safe_link(str(token.attrs.get("href", ""))):
            return False
        elif token.type == "image" and not safe_image(str(token.attrs.get("src", ""))):
            return False
    return source.count("<") <= angles


def one_html_block(body: str) -> str:
    """`body` wrapped in a div with no blank line in it: CommonMark (markdown-it, mistune, marked) reads it
    as one HTML block and passes it through as it is, so no part of it is read as markdown again."""
    block = f'<div class="{WRAPPER_CLASS}">\n{body.strip(chr(10))}\n</div>'
    return re.sub(r"\n(?=[ \t]*\n)", "&#10;", block)


def as_text(source: str) -> str:
    return one_html_block("<pre>" + html.escape(source, quote=False).replace("\n", "&#10;") + "</pre>")


def shortened(source: str, max_chars: int) -> str:
    """A cell too long to be cleaned, cut to `max_chars` with a note: escaping it whole could make it five
    times larger (every & an &amp;), past what an autograded notebook may weigh."""
    return source[:max_chars] + f"\n[... {len(source) - max_chars:,} more characters not shown by the grader]"


def safe_markdown(source: str, max_chars: int = MAX_MARKDOWN_CHARS) -> tuple[str, str | None]:
    """(the cell's markdown, safe in any renderer; what was done: None, "html" or "text")."""
    if len(source) > max_chars:
        return as_text(shortened(source, max_chars)), "text"
    if tangled(source):
        return as_text(source), "text"
    if is_plain(source):
        return source, None
    return one_html_block(clean_html(parser().render(source), mathml=False)), "html"


# --- outputs -------------------------------------------------------------------------------------------

BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


def raster(data) -> bool:
    """Base64 and nothing else: nbconvert's templates write it into a quoted attribute (`src="data:..."`)."""
    text = "".join(data) if isinstance(data, list) else data
    return isinstance(text, str) and BASE64.match(text) is not None


def safe_output(output) -> int:
    """Clean one output in place; how many of its representations were changed or dropped."""
    if output.get("output_type") not in ("display_data", "execute_result", "update_display_data"):
        return 0
    data = output.get("data", {})
    changed, dropped = 0, []
    for mime in list(data):
        value = data[mime]
        text = "".join(value) if isinstance(value, list) else value
        if mime in KEPT_OUTPUTS and (not mime.startswith("image/") or raster(text)):
            continue
        if mime == "text/html" and isinstance(text, str) and len(text) <= MAX_HTML_OUTPUT_CHARS and not tangled(text):
            cleaned = clean_html(text, mathml=False)
            if cleaned != text:
                data[mime], changed = cleaned, changed + 1
            continue
        if mime == "text/markdown" and isinstance(text, str):
            markdown, done = safe_markdown(text)
            if done:
                data[mime], changed = markdown, changed + 1
            continue
        if mime == "text/latex" and isinstance(text, str):
            continue            # every renderer shows it as text or typesets it; it makes no markup
        dropped.append(mime)
        del data[mime]
    if dropped and "text/plain" not in data:
        data["text/plain"] = f"[not shown on graded pages: an output of type {', '.join(sorted(dropped))}]"
    metadata = output.get("metadata", {})
    kept = {}
    for mime in RASTER:
        sizes = metadata.get(mime) if isinstance(metadata, dict) else None
        if isinstance(sizes, dict):
            sizes = {key: value for key, value in sizes.items()
                     if key in ("width", "height") and isinstance(value, int) and not isinstance(value, bool)
                     and 0 < value < 10_000}
            if sizes:
                kept[mime] = sizes
    if metadata != kept:
        output["metadata"], changed = kept, changed + 1
    return changed + len(dropped)


def safe_attachments(attachments) -> dict:
    """Attachments that are raster images, as nbformat stores them ({name: {mime: base64}})."""
    kept = {}
    for name, bundle in (attachments or {}).items():
        if not isinstance(bundle, dict) or not re.match(r"^[^/\\?#\s]+$", str(name)):
            continue
        images = {mime: data for mime, data in bundle.items() if mime in RASTER and raster(data)}
        if images:
            kept[name] = images
    return kept


def safe_cell(cell, max_chars: int = MAX_MARKDOWN_CHARS) -> int:
    """Make one cell safe in place; how many things were changed."""
    changed = 0
    if cell.cell_type == "markdown":
        source, done = safe_markdown(cell.source, max_chars)
        if done:
            cell.source, changed = source, changed + 1
            cell.metadata[MARKER] = done
        if "attachments" in cell:
            kept = safe_attachments(cell.attachments)
            if kept != cell.attachments:
                cell.attachments, changed = kept, changed + 1
    elif cell.cell_type == "raw" and len(cell.source) > max_chars:
        # A long raw cell is shown as text, unparsed, as a long markdown cell is.
        cell.source, changed = html.escape(shortened(cell.source, max_chars), quote=False), changed + 1
        cell.metadata[MARKER] = "text"
    elif cell.cell_type == "raw":
        cleaned = clean_html(cell.source, mathml=False)
        if cleaned != cell.source:
            cell.source, changed = cleaned, changed + 1
            cell.metadata[MARKER] = "html"
        if "attachments" in cell:
            cell.attachments, changed = safe_attachments(cell.attachments), changed + 1
    elif cell.cell_type == "code":
        for output in cell.get("outputs", []):
            changed += safe_output(output)
    return changed


class SafeMarkup(NbGraderPreprocessor):
    """The autograded notebook's markdown, raw cells and rich outputs made safe for every renderer."""

    enabled = Bool(True, help="Make the autograded notebook's markup safe for every page made from it"
                   ).tag(config=True)
    max_markdown_chars = Int(MAX_MARKDOWN_CHARS, help="A longer markdown cell is shown as text").tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        allowance = rebuilt_allowance.set([MOST_REBUILT_PER_NOTEBOOK])
        try:
            changed = sum(safe_cell(cell, self.max_markdown_chars) for cell in nb.cells)
        finally:
            rebuilt_allowance.reset(allowance)
        if changed:
            self.log.warning("Made %d pieces of markup safe in the hand-in (raw HTML, links, images or "
                             "active outputs a page must not run)", changed)
        return nb, resources


# --- render time: nbconvert's filters, replaced ----------------------------------------------------------

@lru_cache(maxsize=None)
def kept_attachments_renderer():
    """nbconvert's renderer, but an image naming an attachment the cell does not keep (SafeMarkup dropped it, or
    the hand-in never had it) shows no picture: nbconvert raises InvalidNotebook there, and one student's cell
    would fail the formgrader's page and the class's generate_feedback."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    class KeptAttachmentsRenderer(IPythonRenderer):
        def _embed_image_or_attachment(self, src: str) -> str:
            name = src[len("attachment:"):] if src.startswith("attachment:") else None
            if name is not None and name not in self.attachments:
                return ""                                    # an image without a source; the cleaner drops it
            return super()._embed_image_or_attachment(src)

    return KeptAttachmentsRenderer


@pass_context
def markdown2html(context, source) -> str:
    """nbconvert's markdown2html, then the allow-list: what every template of the course's HTML exports
    (nbgrader's formgrade and feedback ones included) shows for a markdown cell or a markdown output."""
    from nbconvert.filters.markdown_mistune import MarkdownWithMath

    KeptAttachmentsRenderer = kept_attachments_renderer()
    cell = context.get("cell", {}) or {}
    resources = context.get("resources", {}) or {}
    renderer = KeptAttachmentsRenderer(escape=False, allow_harmful_protocols=False, attachments=safe_attachments(cell.get("attachments", {})),
                               embed_images=False, path=(resources.get("metadata") or {}).get("path", ""),
                               anchor_link_text="¶", exclude_anchor_links=True)
    return clean_html(MarkdownWithMath(renderer=renderer).render(str(source)), mathml=True)


def get_metadata(output, key, mimetype=None):
    """nbconvert's get_metadata filter, but an image's width or height only when it is a number: nbconvert's
    HTML templates write them into an unquoted attribute (`width={{ width | escape_html }}`), where a
    string with a space in it adds attributes of its own (an event handler)."""
    from nbconvert.filters.metadata import get_metadata as stock

    value = stock(output, key, mimetype)
    if key in ("width", "height"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return None
        return value if re.match(r"^\d{1,5}(\.\d{1,3})?$", str(value)) else None
    return value


__all__ = ["SafeMarkup", "clean_html", "markdown2html", "safe_markdown", "safe_link", "safe_image",
           "allowed_attribute", "allowed_attribute_mathml", "get_metadata"]
