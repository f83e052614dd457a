"""The allow-list every page made from a hand-in is cleaned against (safe_markup.py says where and why), and its
cleaner: nh3's (ammonia's parser, a browser's algorithm) with each attribute judged by its value, links only to
http(s) hosts, mailto: or an anchor, images only inline raster data or a cell's attachment. HTML whose parse could
build far more than it holds (formatting elements a browser opens again in every block) is not parsed at all."""

from __future__ import annotations

import contextvars
import html
import re
from functools import lru_cache

import nh3

from autograder.pages.formulas import MATHML_ATTRIBUTES, MATHML_TAGS

WRAPPER_CLASS = "course-safe-markup"      # the one HTML block a cleaned markdown cell becomes (safe_markup.py)

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
