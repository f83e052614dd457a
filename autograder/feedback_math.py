"""Formulas on the feedback pages, typeset when the page is made: TeX in the markdown cells becomes MathML.

A feedback page is read offline, often in JupyterLab's HTML viewer, which runs no script until the page is
trusted; nbconvert's template loads MathJax from a CDN. Either way a student saw raw `$$...$$`. Browsers
draw MathML themselves (MathML Core), so this nbgrader preprocessor converts every formula with the
course's own MathJax (the npm package the site serves, run once per page by Node.js: tex2mml, no output
jax) and the page needs no script at all. It runs before SanitizeHTML, which nbgrader_config.py allows to
keep MathML's elements (`MATHML_TAGS`, `MATHML_ATTRIBUTES`) and nothing else new.

Without Node.js or the npm package, or for a formula MathJax cannot read, the TeX stays as it was.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

MATHJAX = Path(__file__).resolve().parent.parent / "node_modules" / "mathjax" / "es5" / "node-main.js"

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


def to_mathml(formulas: list[tuple[str, bool]], node: str | None = None) -> list[str | None]:
    """MathML for each (TeX, display), in one Node.js process; None for each when it cannot run."""
    node = node or shutil.which("node")
    if not formulas or not node or not MATHJAX.exists():
        return [None] * len(formulas)
    result = subprocess.run([node, "-e", TEX_TO_MATHML, str(MATHJAX)], input=json.dumps(formulas),
                            capture_output=True, text=True, timeout=60)
    if result.returncode:
        return [None] * len(formulas)
    return [" ".join(mathml.split()) if mathml else None for mathml in json.loads(result.stdout)]


def replace_formulas(markdown: str, typeset: dict[str, str]) -> str:
    """The markdown with each formula's text replaced by its MathML (code left as it is)."""
    parts = CODE.split(markdown)
    for index in range(0, len(parts), 2):
        part = DISPLAY.sub(lambda match: typeset.get(match.group(0), match.group(0)), parts[index])
        parts[index] = INLINE.sub(lambda match: typeset.get(match.group(0), match.group(0)), part)
    return "".join(parts)


class TypesetMath(NbGraderPreprocessor):
    """Every formula of the markdown cells as MathML: the feedback page needs no script to show it."""

    node = Unicode("", help="Node.js to run MathJax with (default: `node` on PATH)").tag(config=True)

    def preprocess(self, nb, resources):
        cells = [cell for cell in nb.cells if cell.cell_type == "markdown"]
        found = {text: (tex, display) for cell in cells for tex, display, text in formulas(cell.source)}
        texts = list(found)
        mathml = to_mathml([found[text] for text in texts], self.node or None)
        typeset = {text: math for text, math in zip(texts, mathml) if math}
        if len(typeset) < len(texts):
            self.log.warning("%d of %d formulas were left as TeX", len(texts) - len(typeset), len(texts))
        for cell in cells:
            cell.source = replace_formulas(cell.source, typeset)
        return nb, resources
