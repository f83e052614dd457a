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

import contextvars
import html
import re
from functools import lru_cache

import nh3
from jinja2 import pass_context
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Int

from autograder.pages.formulas import MATHML_ATTRIBUTES, MATHML_TAGS

MARKER = "course_safe_markup"        # cell metadata: what SafeMarkup did to the cell ("html", "text")
WRAPPER_CLASS = "course-safe-markup"

TAGS = frozenset("""
p br hr h1 h2 h3 h4 h5 h6 em strong b i u s del ins sub sup small mark code pre kbd samp var q cite blockquote
ul ol li dl dt dd table thead tbody tfoot tr th td caption a img div span details summary abbr
""".split())
ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "abbr": {"title"},
    "ol": {"start"},
    "th": {"colspan", "rowspan"},
    "td": {"colspan", "rowspan"},
}
CLASSED = {"code", "pre", "span", "div"}          # code highlighting (pygments' short classes), math spans
CLASS_WORD = re.compile(r"^(highlight|hl-[\w+-]{1,30}|language-[\w+-]{1,30}|math|inline|block|anchor-link|"
                        rf"{WRAPPER_CLASS}|[a-z]{{1,3}}[0-9]?)$")
SIZE = re.compile(r"^\d{1,4}(px|%)?$")
PROTOCOLS = {"http", "https", "mailto", "data", "attachment"}    # nh3's own check; ours (allowed_attribute) is stricter
LINK_SCHEMES = {"http", "https", "mailto"}
RASTER = ("image/png", "image/jpeg", "image/gif", "image/webp")
RASTER_DATA = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)
SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]")       # what browsers drop from a URL before reading it

# Rich outputs: kept as they are; cleaned; anything else is reduced to text.
KEPT_OUTPUTS = {"text/plain", "image/png", "image/jpeg", "image/gif", "application/json"}
CLEANED_OUTPUTS = {"text/html", "text/markdown", "text/latex"}

MAX_MARKDOWN_CHARS = 200_000     # a longer markdown cell is shown as text, unparsed
MAX_HTML_OUTPUT_CHARS = 500_000  # a longer HTML output is reduced to its plain text
# A browser's parsing algorithm (html5ever's, in nh3) opens every formatting element still open again in each new
# block, a copy of its start tag, attributes and all. What a parse can build is estimated from the text, before it
# is parsed (`rebuilt_estimate`): the formatting start tags' characters (plus a node's cost for each) times the
# tags. Two reviews measured what the estimate bounds: 1,500 unclosed `<b>` then 3,000 `<p>` (22 KB) made a 32-MB
# notebook and 1.2 GB of the grader's memory; one `<a title>` of 90 KB before 24,000 `<p>x`, 500 MB; a 196-KB HTML
# output, 2.4 GB and a killed worker. HTML whose estimate exceeds MOST_REBUILT_CHARS is shown as text, unparsed,
# and the pieces of one notebook or page share MOST_REBUILT_PER_NOTEBOOK (many small pieces, each within its
# bound, add up). The masters' largest piece is estimated at 230,384, their largest notebook at 370,244.
MOST_REBUILT_CHARS = 2_000_000
MOST_REBUILT_PER_NOTEBOOK = 8_000_000
NODE_CHARS = 8                   # an element's own cost, beside its tag's characters: `<b></b>` at least
FORMATTING_TAG = re.compile(r"<(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)[\t\n\f\r />]", re.I)
# A start tag as HTML's tokenizer reads it (whitespace is HTML's five characters, a quote opens only a value),
# possessive throughout so that a tag with no end costs one pass: it then runs to the end of the text.
START_TAG = re.compile(r"""<[a-zA-Z][^\t\n\f\r />]*+(?:[\t\n\f\r /]*+[^\t\n\f\r />][^\t\n\f\r /=>]*+"""
                       r"""(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:"[^"]*+"|'[^']*+'|[^\t\n\f\r >]*+))?+)*+"""
                       r"""[\t\n\f\r /]*+>""")
ANY_TAG = re.compile(r"</?[a-zA-Z]")


# --- URLs ----------------------------------------------------------------------------------------------

def url_text(value: str) -> str:
    """The URL as a browser reads it from an attribute value its HTML parser has decoded (nh3, html5lib and
    markdown-it hand values over decoded): spaces and control characters gone, and never decoded again: a value
    decoded twice reads `http&colon;//..` as `http://..`, which the browser, reading `http&colon;` as a path,
    resolves to a page of the server that shows the hand-in (found by a review)."""
    return IGNORED_IN_URLS.sub("", str(value))


def safe_link(value: str) -> bool:
    """A link destination that takes the reader to an http(s) host, a mail program or a place on the page:
    never a script (javascript:, vbscript:, data:), never a path on the server that shows the page (a
    relative or scheme-relative URL)."""
    url = url_text(value)
    if url.startswith("#"):
        return True
    scheme = SCHEME.match(url)
    if not scheme or scheme.group(1).lower() not in LINK_SCHEMES:
        return False
    if scheme.group(1).lower() == "mailto":
        return True
    return re.match(r"^https?:[/\\]{2}[^/\\?#]", url, re.I) is not None


def safe_image(value: str, attachments: bool = True) -> bool:
    """An image the page carries itself: inline raster data or a cell attachment; nothing fetched."""
    url = url_text(value)
    if RASTER_DATA.match(url):
        return True
    return attachments and re.match(r"^attachment:[^/\\?#]+$", url) is not None


def allowed_attribute(tag: str, name: str, value: str, mathml: bool = False) -> bool:
    if name == "href":
        return tag == "a" and safe_link(value)
    if name == "src":
        return tag == "img" and safe_image(value)
    if name in ("width", "height") and tag == "img":
        return SIZE.match(value.strip()) is not None
    if name == "class":
        return tag in CLASSED and all(CLASS_WORD.match(word) for word in value.split())
    if name in ATTRIBUTES.get(tag, ()):
        return True
    return mathml and tag in MATHML_TAGS and name in MATHML_ATTRIBUTES


def allowed_attribute_mathml(tag: str, name: str, value: str) -> bool:
    """The same, with MathML's presentation elements (the feedback page's typeset formulas)."""
    return allowed_attribute(tag, name, value, mathml=True)


@lru_cache(maxsize=2)
def cleaner(mathml: bool) -> nh3.Cleaner:
    """nh3's sanitizer (ammonia's, parsing as html5ever, a browser's algorithm) with the allow-list: every
    attribute a tag may carry is offered to allowed_attribute, which keeps it or drops it by its value."""
    tags = set(TAGS) | (set(MATHML_TAGS) if mathml else set())
    attributes = {tag: set(ATTRIBUTES.get(tag, ())) | ({"class"} if tag in CLASSED else set())
                  | (set(MATHML_ATTRIBUTES) if mathml and tag in MATHML_TAGS else set()) for tag in tags}
    allowed = allowed_attribute_mathml if mathml else allowed_attribute
    return nh3.Cleaner(tags=tags, attributes={tag: names for tag, names in attributes.items() if names},
                       attribute_filter=lambda tag, name, value: value if allowed(tag, name, value) else None,
                       url_schemes=PROTOCOLS, strip_comments=True, link_rel=None)


def rebuilt_estimate(text: str, enough: int = MOST_REBUILT_CHARS) -> int:
    """At most how many characters parsing `text` can build by opening formatting elements again: their start
    tags' characters, plus NODE_CHARS each, times the text's tags (counted no further once past `enough`)."""
    formatting = FORMATTING_TAG.findall(text)
    if not formatting:
        return 0
    tags = len(ANY_TAG.findall(text))
    copied = NODE_CHARS * len(formatting)
    for found in FORMATTING_TAG.finditer(text):
        # Each candidate on its own (one inside another's quotes is counted too): an overcount, never an under.
        tag = START_TAG.match(text, found.start())
        copied += len(tag.group()) if tag else len(text) - found.start()
        if copied * tags > enough:
            break
    return copied * tags


def tangled(text: str) -> bool:
    """Whether parsing `text` could build far more than it holds (`rebuilt_estimate` past MOST_REBUILT_CHARS)."""
    return rebuilt_estimate(text) > MOST_REBUILT_CHARS


# What the pieces of the notebook or page being made may still rebuild together (SafeMarkup sets it per notebook).
rebuilt_allowance: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("rebuilt_allowance", default=None)


def within_allowance(text: str) -> bool:
    """Whether `text` may be parsed: within its own bound, and within what its notebook has left (then spent)."""
    estimate = rebuilt_estimate(text)
    left = rebuilt_allowance.get()
    if estimate > MOST_REBUILT_CHARS or (left is not None and estimate > left[0]):
        return False
    if left is not None:
        left[0] -= estimate
    return True


def clean_html(element, mathml: bool = True) -> str:
    """HTML reduced to the allow-list: disallowed elements dropped with their text kept as text, but for
    scripts, styles and SVG or MathML not allowed, dropped whole. The `clean_html` filter of the course's HTML
    exports (nbconvert's own lets relative and scheme-relative links through and escapes rather than drops).
    Tangled HTML (`within_allowance`) is shown as its text, unparsed."""
    text = element.decode() if isinstance(element, bytes) else str(element)
    if not within_allowance(text):
        return "<pre>" + html.escape(text, quote=False) + "</pre>"
    return cleaner(mathml).clean(text)


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
