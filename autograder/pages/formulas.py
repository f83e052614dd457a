"""Formulas on the feedback pages, typeset when the page is made: TeX in the markdown cells becomes MathML.

A feedback page is read offline, often in JupyterLab's HTML viewer, which runs no script until the page is
trusted; nbconvert's template loads MathJax from a CDN. Either way a student saw raw `$$...$$`. Browsers
draw MathML themselves (MathML Core), so this nbgrader preprocessor converts every formula with the
course's own MathJax (the npm package the site serves, run once per page by Node.js: tex2mml, no output
jax) and the page needs no script at all. It runs before SanitizeHTML, which nbgrader_config.py allows to
keep MathML's elements (`MATHML_TAGS`, `MATHML_ATTRIBUTES`) and nothing else new.

Without Node.js or the npm package, or for a formula MathJax cannot read, the TeX stays as it was. The work
is bounded (TypesetMath's limits): a page typesets a few hundred formulas, the rest stay TeX with a note.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from nbformat.v4 import new_markdown_cell
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Int, Unicode

SAFE_MARKUP = "course_safe_markup"   # safe_markup.MARKER: the cell is HTML that safe_markup made, its TeX escaped
MATHJAX = Path(__file__).resolve().parents[2] / "node_modules" / "mathjax" / "es5" / "node-main.js"

# tex2mml with the TeX packages the assignments' prose uses; a formula MathJax cannot read gives null.
TEX_TO_MATHML = """
const inputs = JSON.parse(require('fs').readFileSync(0, 'utf8'));
require(process.argv[1]).init({
  loader: {load: ['input/tex-base', '[tex]/ams', '[tex]/newcommand', '[tex]/boldsymbol']},
  tex: {packages: ['base', 'ams', 'newcommand', 'boldsymbol'], formatError: (jax, error) => { throw error; }},
}).then((MathJax) => {
  process.stdout.write(JSON.stringify(inputs.map(([tex, display]) => {
    try { return MathJax.tex2mml(tex, {display}); } catch (error) { return null; }
  })));
}).catch((error) => { console.error(error.message); process.exit(1); });
"""

# Code (fenced blocks, then inline spans) is left alone; then display math, then inline math.
CODE = re.compile(r"(```.*?```|~~~.*?~~~|`[^`\n]*`)", re.S)
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE = re.compile(r"(?<![\\$])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?!\d)")

MATHML_TAGS = ["math", "semantics", "annotation", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msub",
               "msup", "msubsup", "mfrac", "msqrt", "mroot", "munder", "mover", "munderover", "mtable", "mtr",
               "mtd", "mstyle", "mpadded", "mphantom", "menclose", "merror", "mmultiscripts", "mprescripts"]
MATHML_ATTRIBUTES = ["display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "accent",
                     "accentunder", "linethickness", "displaystyle", "scriptlevel", "width", "height", "depth",
                     "columnalign", "rowspacing", "columnspacing", "minsize", "maxsize", "movablelimits",
                     "largeop", "symmetric", "form", "notation", "xmlns"]


def formulas(markdown: str) -> list[tuple[str, bool, str]]:
    """Each formula outside code: (its TeX, display or not, the text it replaces)."""
    found = []
    for index, part in enumerate(CODE.split(markdown)):
        if index % 2:
            continue
        for match in DISPLAY.finditer(part):
            found.append((match.group(1).strip(), True, match.group(0)))
        for match in INLINE.finditer(DISPLAY.sub("", part)):
            found.append((match.group(1).strip(), False, match.group(0)))
    return found


# What MathJax made of each (TeX, display) this process has typeset: `nbgrader generate_feedback` makes every
# student's page in one process, and the release's formulas, the same on every page, are typeset once. Bounded:
# the first CACHE_ENTRIES formulas (the release's come first) are kept, none with MathML over CACHE_MATHML_CHARS.
_typeset: dict[tuple[str, bool], str | None] = {}
CACHE_ENTRIES = 5_000
CACHE_MATHML_CHARS = 20_000


def to_mathml(formulas: list[tuple[str, bool]], node: str | None = None, timeout: float = 60) -> list[str | None]:
    """MathML for each (TeX, display), None for one MathJax cannot read; those this process has not typeset yet
    in one Node.js process (None for each of them when it cannot run: nothing is remembered then)."""
    keys = [(str(tex), bool(display)) for tex, display in formulas]
    new = [key for key in dict.fromkeys(keys) if key not in _typeset]
    made = dict(zip(new, run_mathjax(new, node, timeout)))
    for key, mathml in made.items():
        if len(_typeset) < CACHE_ENTRIES and len(mathml or "") <= CACHE_MATHML_CHARS:
            _typeset[key] = mathml
    return [made[key] if key in made else _typeset.get(key) for key in keys]


def run_mathjax(formulas: list[tuple[str, bool]], node: str | None, timeout: float) -> list[str | None]:
    """Each formula typeset by one Node.js process, or [] when none could be (nothing to remember)."""
    node = node or shutil.which("node")
    if not formulas or not node or not MATHJAX.exists():
        return []
    try:
        result = subprocess.run([node, "-e", TEX_TO_MATHML, str(MATHJAX)], input=json.dumps(formulas),
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return []
    if result.returncode:
        return []
    return [" ".join(mathml.split()) if mathml else None for mathml in json.loads(result.stdout)]


def replace_formulas(markdown: str, typeset: dict[str, str], budget: list[int] | None = None) -> str:
    """The markdown with each formula's text replaced by its MathML (code left as it is). With a budget
    ([formulas left, MathML characters left]), each replacement spends from it and none is made once it is
    spent: the rest stay TeX."""
    def replace(match):
        text = match.group(0)
        mathml = typeset.get(text)
        if mathml is None:
            return text
        if budget is not None:
            if budget[0] <= 0 or budget[1] < len(mathml):
                budget[0] = 0
                return text
            budget[0], budget[1] = budget[0] - 1, budget[1] - len(mathml)
        return mathml

    parts = CODE.split(markdown)
    for index in range(0, len(parts), 2):
        parts[index] = INLINE.sub(replace, DISPLAY.sub(replace, parts[index]))
    return "".join(parts)


NOTE = "course_typeset_math_note"        # metadata key of the note where typesetting stopped


class TypesetMath(NbGraderPreprocessor):
    """Every formula of the markdown cells as MathML: the feedback page needs no script to show it.

    Bounded, since the markdown is the student's: at most `max_formulas` formulas are typeset on a page (in
    page order), none longer than `max_tex_chars` characters of TeX, and at most `max_mathml_chars` of MathML
    in all; the rest are left as TeX, and a note says where typesetting stopped. Finding the formulas is one
    pass of regular expressions over each cell, MathJax runs once per page on the distinct formulas within
    the limits, and the page grows by at most `max_mathml_chars`: the cost is linear in the notebook's size
    (a hand-in of 110,000 `$a$` once made a 7 MB page that took minutes to sanitize)."""

    node = Unicode("", help="Node.js to run MathJax with (default: `node` on PATH)").tag(config=True)
    max_formulas = Int(500, help="Most formulas typeset on one page; the rest stay TeX").tag(config=True)
    max_tex_chars = Int(2000, help="Longest formula (characters of TeX) typeset").tag(config=True)
    max_mathml_chars = Int(400_000, help="Most characters of MathML put on one page").tag(config=True)
    timeout = Float(60, help="Seconds MathJax may take for one page; after that every formula stays TeX"
                    ).tag(config=True)

    def preprocess(self, nb, resources):
        cells = [cell for cell in nb.cells if cell.cell_type == "markdown" and NOTE not in cell.metadata]
        found: dict[str, tuple[str, bool]] = {}
        limited: set[str] = set()          # formulas left as TeX by the limits
        total = 0
        for cell in cells:
            escaped = cell.metadata.get(SAFE_MARKUP) == "html"      # TeX inside HTML: entities decoded
            for tex, display, text in formulas(cell.source):
                total += 1
                if text in found or text in limited:
                    continue
                if len(found) < self.max_formulas and len(tex) <= self.max_tex_chars:
                    found[text] = (html.unescape(tex) if escaped else tex, display)
                else:
                    limited.add(text)
        texts = list(found)
        mathml = to_mathml([found[text] for text in texts], self.node or None, self.timeout)
        typeset = {text: math for text, math in zip(texts, mathml) if math}
        budget = [self.max_formulas, self.max_mathml_chars]
        stopped = None
        for cell in cells:
            cell.source = replace_formulas(cell.source, typeset, budget)
            if stopped is None and any(text in limited or text in typeset for _, _, text in formulas(cell.source)):
                stopped = cell
        left = sum(len(formulas(cell.source)) for cell in cells)
        if left:
            self.log.warning("%d of %d formulas were left as TeX", left, total)
        if stopped is not None:
            note = new_markdown_cell(f"*This page typesets at most {self.max_formulas} formulas "
                                     f"({self.max_mathml_chars:,} characters of MathML): from here on, formulas "
                                     "are shown as TeX.*")
            note.metadata[NOTE] = True
            nb.cells.insert(nb.cells.index(stopped), note)
        return nb, resources
