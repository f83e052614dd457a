"""Reading a built site without a browser: its pages, its links, and what the solutions must not leak.

Shared by tests/test_site_content.py and the browser tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
from bs4 import BeautifulSoup

from tools.course import COURSE

# Review material the browser and lab tests write (screenshots, the accessibility report): git-ignored,
# documented in the README; everything else a test writes goes to its temporary folders.
TEST_OUTPUT = COURSE.root / "_build" / "test-output"
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".woff", ".woff2", ".ttf", ".eot", ".ico", ".pdf", ".inv",
          ".pickle", ".doctree", ".zip"}


def lesson_pages() -> list[str]:
    """The site path of every lesson page, in reading order ("book/01-layernorm.html", ...)."""
    return [path.relative_to(COURSE.root).with_suffix(".html").as_posix() for path in COURSE.lessons()]


def redirects() -> dict[str, str]:
    """Old page -> the page it forwards to, both site paths ("book/03-block.html": "book/04-block.html")."""
    import yaml

    config = yaml.safe_load((COURSE.root / "_config.yml").read_text())
    moved = config["sphinx"]["config"].get("course_redirects", {})
    return {f"{old}.html": f"{new}.html" for old, new in moved.items()}


def release_folders() -> list[Path]:
    return sorted(path for path in (COURSE.root / "exercises").glob("[0-9]*-*") if any(path.glob("*.ipynb")))


def assignment_pages() -> list[str]:
    return ["book/assignments/index.html"] + [f"book/assignments/{folder.name}.html" for folder in release_folders()]


def expected_pages() -> list[str]:
    """Every HTML page the site should have: the table of contents, the assignments, search, index."""
    toc_pages = [path.relative_to(COURSE.root).with_suffix(".html").as_posix() for path in COURSE.pages()]
    pages = toc_pages + [page for page in assignment_pages() if page not in toc_pages]
    return pages + ["search.html", "genindex.html"]


def built_pages(site: Path) -> list[str]:
    """Every HTML page of a built site, except the theme's static files and the redirects (the root
    index.html, and the old addresses of renumbered lessons)."""
    skip = {"index.html", *redirects()}
    return sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html")
                  if "_static" not in path.parts and path.relative_to(site).as_posix() not in skip)


@lru_cache(maxsize=None)
def soup(path: Path) -> BeautifulSoup:
    """A parsed page (cached: several tests read the same pages; do not modify the result)."""
    return BeautifulSoup(path.read_text(), "html.parser")


# --- Links -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    page: str          # the page the link is on, relative to the site
    target: str        # the href or src as written


def links(site: Path, page: str) -> list[Link]:
    found = []
    for tag, attribute in (("a", "href"), ("link", "href"), ("img", "src"), ("script", "src"), ("source", "src")):
        for element in soup(site / page).find_all(tag):
            value = element.get(attribute)
            if value and not value.startswith(("mailto:", "javascript:", "data:")):
                found.append(Link(page, value))
    return found


def is_external(target: str) -> bool:
    return bool(urlsplit(target).scheme or target.startswith("//"))


@lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    document = soup(path)
    return frozenset(element.get("id") or element.get("name")
                     for element in document.find_all(lambda tag: tag.has_attr("id") or tag.has_attr("name")))


def broken(site: Path, link: Link) -> str | None:
    """Why an internal link does not resolve, or None when its file (and anchor) exist."""
    parts = urlsplit(link.target)
    here = (site / link.page).parent
    target = (site / link.page) if not parts.path else (here / unquote(parts.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.is_relative_to(site.resolve()) and not target.is_relative_to(site):
        return "points outside the site"
    if not target.exists():
        return "missing file"
    fragment = unquote(parts.fragment)
    if fragment and target.suffix == ".html" and fragment not in anchors(target):
        return f"no anchor #{fragment}"
    return None


# --- Leaks ---------------------------------------------------------------------------------------------

REGION = re.compile(r"^[ \t]*#+[ \t]*BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)^[ \t]*#+[ \t]*END \1",
                    re.MULTILINE | re.DOTALL)


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def public_text() -> str:
    """Everything students may see anyway, whitespace collapsed: the lessons' sources and the releases."""
    texts = [path.read_text() for path in sorted((COURSE.root / "book").rglob("*.md"))]
    for release in sorted((COURSE.root / "exercises").glob("*/*.ipynb")):
        texts += [cell.source for cell in nbformat.read(release, as_version=4).cells]
    return "\n".join(normalize(text) for text in texts)


def secret_lines() -> set[str]:
    """Lines of the masters' solutions and hidden tests that appear nowhere students may look.

    A solution line that the lesson also shows (the lesson builds the same function in the open) is not
    a leak; a line that only the master holds is. Short lines (`return x`) say nothing on their own."""
    public = public_text()
    secrets: set[str] = set()
    for master in sorted((COURSE.root / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(master, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            regions = [match.group(2) for match in REGION.finditer(cell.source)]
            if not regions and meta.get("solution") and cell.cell_type == "code":
                regions = [cell.source]            # a solution cell without markers is all solution
            for region in regions:
                for line in region.splitlines():
                    line = normalize(line.split("  #")[0])       # a trailing comment is not the code
                    if len(line.replace(" ", "")) >= 16 and line not in public:
                        secrets.add(line)
    return secrets


def readable_text(path: Path) -> str:
    """What a reader or a downloader gets from a file, whitespace collapsed: the text of an HTML page,
    every string of a notebook or JSON file, the raw text of anything else."""
    raw = path.read_text(errors="ignore")
    if path.suffix == ".html":
        raw = raw + "\n" + BeautifulSoup(raw, "html.parser").get_text()
    elif path.suffix in {".ipynb", ".json"}:
        try:
            strings: list[str] = []

            def walk(node):
                if isinstance(node, str):
                    strings.append(node)
                elif isinstance(node, list):
                    if all(isinstance(item, str) for item in node):
                        strings.append("".join(node))       # a notebook cell's source, split in lines
                    else:
                        for item in node:
                            walk(item)
                elif isinstance(node, dict):
                    for item in node.values():
                        walk(item)

            walk(json.loads(raw))
            raw = raw + "\n" + "\n".join(strings)
        except json.JSONDecodeError:
            pass
    return normalize(raw)


def vendored(site: Path, path: Path) -> bool:
    """True for a byte-for-byte copy of the MathJax npm package (pinned by package-lock.json)."""
    relative = path.relative_to(site / "_static") if path.is_relative_to(site / "_static") else None
    original = COURSE.root / "node_modules" / "mathjax" / relative if relative else None
    return bool(original and original.is_file() and original.read_bytes() == path.read_bytes())


def site_files(site: Path) -> list[Path]:
    """Every text file of the site, less the vendored MathJax (24 MB of third-party JavaScript)."""
    return sorted(path for path in site.rglob("*") if path.is_file() and path.suffix.lower() not in BINARY
                  and not vendored(site, path))
