"""The summary at the top of every feedback page: one line per graded check, and for a lost point the mistake
the check named and where the lessons explain it. An nbgrader preprocessor, loaded by nbgrader_config.py.

`nbgrader generate_feedback` runs it after HideHiddenTests (so a check's message is only what that plugin
keeps: the error's name and message, never hidden test code or a traceback) and after nbgrader's GetGrades
(so the points are the gradebook's, hand-graded changes included), and before SanitizeHTML, which cleans the
summary like every other markdown cell. Everything that came from the student's notebook (the messages) is
escaped here as well, so it reads as text, never as markdown or HTML.

Each line links to its check further down the page (the feedback template puts an anchor named after each
graded cell's grade id there). A lost point also links to the lesson section that teaches it when the course
names the notebook's lessons (the metadata key `"lessons"` of the master in solutions/, else of the release,
which the site's assignment pages read too; never the hand-in's, which the student can write): the
section of those lessons whose words are closest to the check's description and its message, when one is
close enough, else the lesson itself. The links point at the published course site: `FeedbackSummary.site_url`,
by default the GitHub Pages address of `_config.yml`'s `repository.url`; without one, the lesson and
section are named without a link.

The class report (autograder/report/) reads what a check said with the same functions (`check_errors`,
`readable_message`).
"""

from __future__ import annotations

import functools
import html
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_markdown_cell
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Int, Unicode

from autograder.cells import course_directory
from autograder.notebook import check_header, is_check, lessons as named_lessons, nbgrader_record

SUMMARY = "course_feedback_summary"      # metadata key that marks the summary cell
UNANSWERED = "NotImplementedError"       # what a release's stub raises: the answer was left as it was given


# --- what a check said -------------------------------------------------------------------------------------

def check_errors(cell) -> list[tuple[str, str]]:
    """(name, message) of each error a graded cell showed: what its feedback shows the student."""
    return [(str(out.get("ename", "")), str(out.get("evalue", ""))) for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def readable_message(errors: list[tuple[str, str]], limit: int = 400) -> str:
    """What to tell the student about a check that lost points: its message, on one line. An assertion's
    message names the mistake by itself; other errors keep their name; a stub's NotImplementedError means the
    answer is missing."""
    if not errors:
        return "no message (the check raised no error: graded by hand, or a score changed in the gradebook)"
    parts = []
    for name, message in errors:
        message = " ".join(message.split())
        if name == UNANSWERED:
            parts.append("not answered: the function still raises NotImplementedError")
        elif name == "AssertionError":
            parts.append(message or "a check failed without a message")
        else:
            parts.append(f"{name}: {message}" if message else name)
    text = "; ".join(dict.fromkeys(parts))
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~^\"'=:$])")


def markdown_text(text: str) -> str:
    """`text` as literal markdown: every markdown character escaped and HTML's characters as entities, so a
    student's message can neither format nor link nor inject markup."""
    return html.escape(MARKDOWN_PUNCTUATION.sub(r"\\\1", text), quote=False)


# --- the lessons and their sections ------------------------------------------------------------------------

STOPWORDS = frozenset("""
a an and are as at be been but by can do does for from has have if in into is it its of on or so that the their
then there these this those to was were which while with you your not no each every one two than also only more
most very what when where how why all any both other same here use used using should must got get instead
""".split())
WORD = re.compile(r"[a-z][a-z0-9]*")
LESSON_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")     # a file name in book/, never a path
# Sections that do not teach: exercises, quizzes, pointers onwards.
NOT_TEACHING = re.compile(r"check your understanding|self-check|quiz|stretch exercises|what's next|further reading",
                          re.I)


def words(text: str) -> list[str]:
    found = []
    for word in WORD.findall(text.lower().replace("_", " ")):
        if len(word) < 2 or word in STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]                        # plural to singular, roughly
        found.append(word)
    return found


def heading_text(title: str) -> str:
    """A MyST heading as Sphinx reads its text: markup characters and link targets gone (the heading's inline
    source, parsed as the lessons are: lesson_parser)."""
    (paragraph,) = [token for token in lesson_parser().parse(title) if token.type == "inline"] or [None]
    return plain_text(paragraph.children or []) if paragraph is not None else ""


def plain_text(children) -> str:
    """The text of inline tokens, as Sphinx makes a section's title of them: text, code and formulas by
    their content, links and emphasis by what they enclose."""
    return "".join(child.content for child in children
                   if child.type in ("text", "code_inline", "math_inline", "softbreak")).strip()


@functools.cache
def lesson_parser():
    """markdown-it with the MyST syntax the lessons use (front matter, ::: fences, $ formulas, MyST blocks),
    so that a heading-like line inside a code block, a fence or front matter is never taken for one."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin
    from mdit_py_plugins.myst_blocks import myst_block_plugin

    return (MarkdownIt("commonmark").use(front_matter_plugin).use(colon_fence_plugin).use(dollarmath_plugin)
            .use(myst_block_plugin))


def anchor(title: str) -> str:
    """The id Sphinx gives a section with this heading (docutils' make_id of its text)."""
    return make_anchor(heading_text(title))


def make_anchor(text: str) -> str:
    """The id Sphinx gives a section whose title is `text` (docutils' make_id)."""
    from docutils.nodes import make_id

    return make_id(text)


@dataclass
class Section:
    lesson: str                   # the lesson's file stem, "01-layernorm"
    title: str
    anchor: str                   # '' for a second section of the same name (Sphinx numbers its id)
    text: str
    vector: dict[str, float] = field(default_factory=dict)


@dataclass
class Lesson:
    stem: str
    title: str
    sections: list[Section]


def read_lesson(path: Path) -> Lesson:
    """A MyST lesson's title (its # heading) and sections (## and deeper, each with the text up to the next
    heading), parsed by markdown-it as MyST reads them (lesson_parser)."""
    lines = path.read_text().splitlines()
    tokens = lesson_parser().parse("\n".join(lines))
    headings = [(token.map[0], token.tag, plain_text(tokens[index + 1].children or []))
                for index, token in enumerate(tokens) if token.type == "heading_open" and token.level == 0]
    title = next((text for _, tag, text in headings if tag == "h1"), path.stem)
    sections, taken = [], {make_anchor(title)}
    for (line, tag, name), following in zip(headings, [*headings[1:], (len(lines), "", "")]):
        if tag == "h1":
            continue
        # Sphinx gives a second section of the same name a numbered id: that one is linked as the page.
        sections.append(Section(path.stem, name, "" if make_anchor(name) in taken else make_anchor(name),
                                "\n".join(lines[line + 1:following[0]])))
        taken.add(make_anchor(name))
    return Lesson(path.stem, title, sections)


class SectionFinder:
    """The sections of some lessons, and the one closest in words to a check's description and message
    (tf-idf cosine; a section's heading counts three times)."""

    def __init__(self, lessons: list[Lesson]):
        self.sections = [s for lesson in lessons for s in lesson.sections if not NOT_TEACHING.search(s.title)]
        counts = [Counter(words(s.title) * 3 + words(s.text)) for s in self.sections]
        documents = Counter(word for count in counts for word in count)
        total = len(self.sections)
        self.idf = {word: math.log((1 + total) / (1 + n)) + 1 for word, n in documents.items()}
        for section, count in zip(self.sections, counts):
            section.vector = self.unit({w: (1 + math.log(n)) * self.idf[w] for w, n in count.items()})

    @staticmethod
    def unit(vector: dict[str, float]) -> dict[str, float]:
        norm = math.sqrt(sum(value * value for value in vector.values()))
        return {word: value / norm for word, value in vector.items()} if norm else {}

    def closest(self, text: str, minimum: float) -> Section | None:
        query = self.unit({w: (1 + math.log(n)) * self.idf.get(w, 0.0) for w, n in Counter(words(text)).items()})
        scored = [(sum(value * section.vector.get(word, 0.0) for word, value in query.items()), index)
                  for index, section in enumerate(self.sections)]
        if not scored:
            return None
        score, index = max(scored)
        return self.sections[index] if score >= minimum else None


def pages_url(config_file: Path) -> str:
    """The GitHub Pages address of the course site, from _config.yml's repository.url ('' if none)."""
    import yaml

    if not config_file.is_file():
        return ""
    url = ((yaml.safe_load(config_file.read_text()) or {}).get("repository") or {}).get("url", "")
    found = re.match(r"^https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$", str(url))
    return f"https://{found.group(1).lower()}.github.io/{found.group(2)}/" if found else ""


def check_description(cell) -> str:
    """A check's visible description: the comment lines that open it, up to what its hidden part adds."""
    return check_header(cell).visible


# --- the preprocessor ------------------------------------------------------------------------------------------

class FeedbackSummary(NbGraderPreprocessor):
    """Insert, at the top of the feedback, a markdown cell summarizing every graded check."""

    enabled = Bool(True, help="Put the summary at the top of each feedback page").tag(config=True)
    site_url = Unicode(None, allow_none=True, help="The published course site the lesson links point at "
                       "(ending in /); by default the GitHub Pages address of _config.yml's repository.url; "
                       "'' names lessons without links").tag(config=True)
    message_chars = Int(400, help="Longest message shown for one check").tag(config=True)
    section_match = Float(0.3, help="How close (cosine, 0 to 1) a lesson section's words must be to a check's "
                          "description and message to be linked; below it, the lesson is").tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        nb.cells = [cell for cell in nb.cells if SUMMARY not in cell.get("metadata", {})]   # regenerated
        try:
            cell = self.summary_cell(nb, resources)
        except Exception as error:        # the feedback itself matters more than its summary
            self.log.error("No summary at the top of the feedback: %s: %s", type(error).__name__, error)
            return nb, resources
        if cell is not None:
            nb.cells.insert(0, cell)
        return nb, resources

    def coursedir(self):
        """nbgrader's CourseDirectory (cells.course_directory), or None outside a converter or without a root."""
        try:
            coursedir = course_directory(self)
        except RuntimeError:
            return None
        return coursedir if getattr(coursedir, "root", None) else None

    def course_root(self) -> Path | None:
        coursedir = self.coursedir()
        return Path(coursedir.root) if coursedir is not None else None

    def course_lessons(self, resources) -> list[str]:
        """The lessons the course names for this notebook: the `lessons` metadata of its master (else of its
        release), never of the hand-in, whose metadata the student wrote. Each is a lesson's file stem."""
        coursedir = self.coursedir()
        graded = resources.get("nbgrader", {}) if isinstance(resources, dict) else {}
        assignment, notebook = graded.get("assignment"), graded.get("notebook")
        if coursedir is None or not assignment or not notebook:
            return []
        import nbformat

        for folder in (coursedir.source_directory, coursedir.release_directory):
            path = Path(coursedir.format_path(folder, ".", assignment)) / f"{notebook}.ipynb"
            if path.is_file():
                stems = named_lessons(nbformat.read(path, as_version=4))
                return [stem for stem in stems if LESSON_STEM.match(stem)]
        return []

    def lessons(self, nb, resources=None) -> tuple[list[Lesson], str]:
        """The lessons the course names for the notebook (read from the course's book/ where present) and the
        site's address. `nb` is the hand-in: nothing of it chooses a file to read."""
        root = self.course_root()
        found = []
        for stem in self.course_lessons(resources or {}):
            path = root / "book" / f"{stem}.md" if root else None
            inside = path is not None and path.is_file() and path.resolve().parent == (root / "book").resolve()
            found.append(read_lesson(path) if inside else Lesson(stem, stem, []))
        site = self.site_url if self.site_url is not None else (pages_url(root / "_config.yml") if root else "")
        return found, site

    def summary_cell(self, nb, resources) -> NotebookNode | None:
        checks = [cell for cell in nb.cells if is_check(cell)]
        if not checks:
            return None
        lessons, site = self.lessons(nb, resources)
        finder = SectionFinder(lessons)
        rows, score, top, passed = [], 0.0, 0.0, 0
        for cell in checks:
            record = nbgrader_record(cell)
            points = float(record.get("points") or 0)
            got = float(record.get("score") if record.get("score") is not None else 0)
            score, top = score + got, top + points
            name = str(record["grade_id"])
            link = f"[`{name}`](#{quote(name)})"
            if got >= points:
                passed += 1
                rows.append(f"- **passed** ({fmt(got)} of {fmt(points)}): {link}")
                continue
            errors = check_errors(cell)
            message = readable_message(errors, self.message_chars)
            message += "" if message.endswith((".", "!", "?", "…")) else "."
            line = (f"- **lost {fmt(points - got)} point{'s' if points - got != 1 else ''}** ({fmt(got)} of "
                    f"{fmt(points)}) in {link}: {markdown_text(message)}")
            where = self.where_taught(lessons, finder, site, " ".join(m for _, m in errors),
                                      check_description(cell) + " " + name.replace("_", " "))
            rows.append(line + (f" *Where the lessons explain it:* {where}" if where else ""))
        # The notebook's score as GetGrades read it from the gradebook (hand-graded cells and the late penalty
        # included), else the checks' own.
        graded = resources.get("nbgrader", {})
        late = float(graded.get("late_penalty") or 0)
        total = float(graded["score"]) if graded.get("score") is not None else score - late
        top = float(graded["max_score"]) if graded.get("max_score") is not None else top
        heading = (f"## Your result: {fmt(total)} of {fmt(top)} points\n\n{passed} of {len(checks)} checks passed"
                   + (f"; {fmt(late)} points were taken off for a late submission" if late else "")
                   + ". Each line links to its check below; a lost point says what the check found.\n\n")
        cell = new_markdown_cell(heading + "\n".join(rows))
        cell.metadata[SUMMARY] = True
        return cell

    def where_taught(self, lessons: list[Lesson], finder: SectionFinder, site: str, message: str,
                     description: str) -> str:
        """The lesson section closest to the mistake the message names, else to the check and its message
        together, else the lessons themselves."""
        if not lessons:
            return ""
        section = (finder.closest(message, self.section_match) if message.strip() else None) or \
            finder.closest(description + " " + message, self.section_match)
        if section is not None:
            lesson = next(lesson for lesson in lessons if lesson.stem == section.lesson)
            return f"{self.lesson_link(lesson, site)}, section {self.section_link(section, site)}."
        return " and ".join(self.lesson_link(lesson, site) for lesson in lessons) + "."

    @staticmethod
    def page(stem: str, site: str) -> str:
        return f"{site}book/{quote(stem)}.html"

    def lesson_link(self, lesson: Lesson, site: str) -> str:
        numbered = re.match(r"^(\d+)\.\s+(.+)$", lesson.title)
        name = markdown_text(f"Lesson {numbered.group(1)} ({numbered.group(2)})" if numbered else lesson.title)
        return f"[{name}]({self.page(lesson.stem, site)})" if site else name

    def section_link(self, section: Section, site: str) -> str:
        name = f"*{markdown_text(section.title)}*"
        if not site:
            return name
        target = self.page(section.lesson, site) + (f"#{section.anchor}" if section.anchor else "")
        return f"[{name}]({target})"


def fmt(value: float) -> str:
    return f"{value:g}"
