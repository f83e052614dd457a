"""Course-specific steps of the site build (a Sphinx extension, loaded through _config.yml).

- **Assignment pages.** Before Sphinx reads the sources, every student release `exercises/NN-name/*.ipynb`
  gets a page `book/assignments/NN-name.md`: the task as the release states it, the lessons it draws on
  (the release notebook's metadata key `"lessons"`), what each graded test checks and is worth, and a
  download link for the release notebook. The pages are generated (and
  git-ignored) so a new or regenerated release is on the site at the next build. Only `exercises/` is
  read: the masters in `solutions/` never reach the site.
- **The assignment list.** The `{assignment-list}` directive renders a table of every assignment.
- **The grading limits.** The `{grading-limits}` directive renders the grader's limits from their one
  definition, autograder/grading_environment.py (the page never holds a copy).
- **Re-reading re-executed lessons.** A lesson re-executed because a module it imports changed (see
  tools/cache.py) is re-read by Sphinx's incremental build although its source did not change.
- **Colab links.** Colab cannot open MyST Markdown, so a lesson's Colab button opens the `.ipynb`
  version of the lesson on the branch `course_notebooks_branch`, which the deploy workflow publishes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

# What a notebook's metadata and test cells say is read by the grading package's one reader.
from autograder.notebook import check_header, grade_id, lessons as named_lessons, nbgrader_record, source

GENERATED = "<!-- Generated from the student release by book/_ext/course_site.py. Do not edit. -->"
ASSIGNMENT_FOLDER = re.compile(r"^(\d+)-[a-z0-9-]+$")


@dataclass
class GradedTest:
    name: str
    points: float
    checks: str
    hidden: str


@dataclass
class Assignment:
    folder: str                      # "01-layernorm"
    number: int
    title: str
    statement: str                   # the release's instructions, after its title
    notebooks: list[Path]            # the release notebooks, relative to the book root
    tests: list[GradedTest] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)  # lesson file stems it draws on, from its metadata

    @property
    def points(self) -> float:
        return sum(test.points for test in self.tests)


def _graded_test(cell) -> GradedTest:
    header = check_header(cell)
    return GradedTest(grade_id(cell) or "", float(nbgrader_record(cell).get("points") or 0), header.checks,
                      header.hidden)


def read_assignment(book_root: Path, folder: Path) -> Assignment:
    """What the site shows about one release: read from exercises/, never from solutions/."""
    notebooks = sorted(folder.glob("*.ipynb"))
    number = int(ASSIGNMENT_FOLDER.match(folder.name).group(1))
    title, statement, tests, lessons = f"Assignment {number}", "", [], []
    for index, path in enumerate(notebooks):
        notebook = json.loads(path.read_text())
        cells = notebook["cells"]
        if index == 0:
            # The master names the lessons it draws on; nbgrader copies notebook metadata into the release.
            lessons = named_lessons(notebook)
            # The statement is the markdown before the first code cell: every master states its task first.
            intro = []
            for cell in cells:
                if cell["cell_type"] != "markdown":
                    break
                intro.append(source(cell).strip())
            text = "\n\n".join(intro)
            heading = re.match(r"^#\s+(.+)\n?", text)
            if heading:
                title, text = heading.group(1).strip(), text[heading.end():].strip()
            statement = text
        tests += [_graded_test(cell) for cell in cells
                  if cell["cell_type"] == "code" and nbgrader_record(cell).get("grade")]
    return Assignment(folder.name, number, title, statement,
                      [path.relative_to(book_root) for path in notebooks], tests, lessons)


def find_assignments(book_root: Path) -> list[Assignment]:
    exercises = book_root / "exercises"
    folders = sorted(path for path in exercises.glob("*") if path.is_dir() and ASSIGNMENT_FOLDER.match(path.name)
                     and any(path.glob("*.ipynb")))
    return [read_assignment(book_root, folder) for folder in folders]


def lesson_docs(app: Sphinx) -> list[str]:
    """The lessons' document names ("book/01-layernorm", ...) from _toc.yml as sphinx-external-toc parsed
    it for Jupyter Book (its site map, on the Sphinx configuration)."""
    return sorted(doc for doc in app.config.external_site_map if re.match(r"^book/\d+-", doc))


def lesson_for(assignment: Assignment, lessons: list[str]) -> str | None:
    """The lesson an assignment without a `"lessons"` list practises: the lesson with the same name after its number (assignment
    03-block practises lesson 04-block: lessons and assignments are numbered separately), else one
    whose name shares a word with it (06-gpt2-weights and 09-matching-gpt2), else the same number."""
    name = assignment.folder.split("-", 1)[1]
    for doc in lessons:
        if doc.split("-", 1)[1] == name:
            return doc
    words = set(name.split("-"))
    for doc in lessons:
        if words & set(doc.split("-", 1)[1].split("-")):
            return doc
    for doc in lessons:
        if int(re.match(r"^book/(\d+)-", doc).group(1)) == assignment.number:
            return doc
    return None


def lessons_for(assignment: Assignment, lessons: list[str]) -> list[str]:
    """Every lesson the assignment draws on: those its release names in the notebook metadata key
    `"lessons"` (lesson file stems such as "03-attention", in the order given), else the one lesson_for
    finds. A named lesson that is not in _toc.yml is an error, not a missing link."""
    if not assignment.lessons:
        lesson = lesson_for(assignment, lessons)
        return [lesson] if lesson else []
    by_stem = {doc.rsplit("/", 1)[-1]: doc for doc in lessons}
    unknown = [stem for stem in assignment.lessons if stem not in by_stem]
    if unknown:
        raise ValueError(f"exercises/{assignment.folder}: its metadata \"lessons\" names {unknown}, which are not "
                         f"lessons of _toc.yml ({sorted(by_stem)})")
    return [by_stem[stem] for stem in assignment.lessons]


def _lesson_links(docs: list[str]) -> str:
    """{doc} links to the lessons, "a", "a and b", "a, b and c"."""
    links = [f"{{doc}}`/{doc}`" for doc in docs]
    return links[0] if len(links) == 1 else ", ".join(links[:-1]) + " and " + links[-1]


def _cell(text: str) -> str:
    """Plain comment text as one Markdown table cell: `code spans` kept, `*`, `_` and `<` literal."""
    parts = re.split(r"(`[^`]*`)", text.replace("\n", " "))
    escaped = [part if part.startswith("`") else re.sub(r"([*_<\[\]])", r"\\\1", part) for part in parts]
    return "".join(escaped).replace("|", "\\|")


def _points(value: float) -> str:
    return f"{value:g}"


def assignment_page(assignment: Assignment, lessons: list[str]) -> str:
    downloads = ", ".join(f"{{download}}`{path.name} <../../{path.as_posix()}>`" for path in assignment.notebooks)
    drawn_on = lessons_for(assignment, lessons)
    lines = [
        GENERATED,
        "",
        f"# {assignment.title}",
        "",
        "```{admonition} At a glance",
        ":class: tip",
        "",
        f"**Download the notebook:** {downloads}. It holds the task, a stub for each function and the "
        "visible tests.",
        "",
        f"**Points:** {_points(assignment.points)}, over {len(assignment.tests)} graded tests.",
    ]
    if drawn_on:
        lines += ["", f"**Practises:** {_lesson_links(drawn_on)}; read {'it' if len(drawn_on) == 1 else 'them'} first."]
    lines += ["```", "", "## The task", "", assignment.statement, "",
              "## What is graded", "",
              "Each test cell is graded on its own, so one mistake costs only the points of the behaviour it "
              "breaks. The visible part of a test runs in your notebook; the hidden part runs when your "
              "instructor grades it, and the test's first comment says what it adds.", "",
              "| Test | Points | Checks | The hidden part also checks |",
              "| --- | --- | --- | --- |"]
    for test in assignment.tests:
        lines.append(f"| `{test.name}` | {_points(test.points)} | {_cell(test.checks)} | {_cell(test.hidden) or '—'} |")
    lines += ["", "## How to work on it", "",
              "1. Download the notebook above and open it in JupyterLab (`.venv/bin/jupyter lab` in a clone of "
              "the course), or upload it to your course's JupyterHub.",
              "2. Replace every `raise NotImplementedError()` with your code, and run the test cells below it "
              "as you go.",
              "3. Before you hand it in, restart the kernel and run all cells, so the notebook runs from top "
              "to bottom on its own. Then submit it the way your instructor asks.", ""]
    return "\n".join(lines)


def write_assignment_pages(book_root: Path, lessons: list[str]) -> list[Path]:
    """(Re)write book/assignments/NN-name.md for every release; remove pages whose release is gone."""
    pages_dir = book_root / "book" / "assignments"
    pages_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for assignment in find_assignments(book_root):
        page = pages_dir / f"{assignment.folder}.md"
        text = assignment_page(assignment, lessons)
        if not page.exists() or page.read_text() != text:      # unchanged pages keep Sphinx's cache
            page.write_text(text)
        written.append(page)
    for page in pages_dir.glob("*.md"):
        if page not in written and page.read_text().startswith(GENERATED):
            page.unlink()
    return written


class AssignmentList(SphinxDirective):
    """A table of every assignment: its page, the lesson it practises, its points and its download."""

    def run(self):
        book_root = Path(self.env.srcdir)
        here = Path(self.env.docname).parent
        rows = ["| Assignment | Practises | Points | Notebook |", "| --- | --- | --- | --- |"]
        for assignment in find_assignments(book_root):
            drawn_on = lessons_for(assignment, lesson_docs(self.env.app))
            downloads = ", ".join(
                f"{{download}}`{path.name} <{_relative(book_root / path, book_root / here)}>`"
                for path in assignment.notebooks)
            rows.append(f"| {{doc}}`{_cell(assignment.title)} </book/assignments/{assignment.folder}>` | "
                        f"{_lesson_links(drawn_on) if drawn_on else '—'} | {_points(assignment.points)} | {downloads} |")
        container = nodes.container(classes=["assignment-list"])
        self.state.nested_parse(StringList(rows), self.content_offset, container)
        return [container]


def _relative(target: Path, start: Path) -> str:
    import os
    return Path(os.path.relpath(target, start)).as_posix()


def generate_pages(app: Sphinx) -> None:
    write_assignment_pages(Path(app.srcdir), lesson_docs(app))


def fix_colab_links(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Point a Markdown lesson's Colab button at its .ipynb twin on the notebooks branch."""
    branch = app.config.course_notebooks_branch
    if not branch:
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Colab" and button.get("url", "").endswith(".md"):
                url = re.sub(r"/blob/[^/]+/", f"/blob/{branch}/", button["url"], count=1)
                button["url"] = url[: -len(".md")] + ".ipynb"


def dedupe_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Drop repeated inline scripts: sphinx-thebe registers its `const` settings once per read, and a
    second `const THEBE_JS_URL` is a console error on every page."""
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


REDIRECT = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="canonical" href="{target}">
<meta http-equiv="refresh" content="0; url={target}">
<script>location.replace("{target}" + location.hash);</script>
</head>
<body><main><p>This page moved to <a href="{target}">{target}</a>.</p></main></body>
</html>
"""


def write_redirects(app: Sphinx, exception) -> None:
    """A small page at each old address (`course_redirects`, old document -> new document) that sends
    the reader on to the new one, keeping any #section: links and bookmarks made before lessons were
    renumbered keep working."""
    if exception is not None or app.builder.format != "html":
        return
    for old, new in app.config.course_redirects.items():
        page = Path(app.outdir) / f"{old}.html"
        # A document of its own (not the forwarding page a previous build wrote here) may not be replaced.
        if old in app.env.all_docs or (Path(app.srcdir) / f"{old}.md").exists():
            raise ValueError(f"course_redirects: {old} is still a page of the site")
        target = _relative(Path(app.outdir) / f"{new}.html", page.parent)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(REDIRECT.format(title=f"Moved to {target}", target=target))


def outdated_outputs(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Pages whose executed outputs changed in the execution cache since Sphinx last read them.

    Sphinx re-reads a page when its source changes; myst-nb takes a page's outputs from jupyter-cache
    when it reads the page. When tools/cache.py re-executes a lesson because a module it imports
    changed, the source is the same but the cache holds new outputs: this tells Sphinx to re-read it.
    myst-nb records, per page, when the cache record it used was created; a page whose lesson now has
    a record created at another time (or none) is out of date."""
    if app.config.nb_execution_mode != "cache" or not app.config.nb_execution_cache_path:
        return []
    location = Path(app.config.nb_execution_cache_path)
    if not location.exists():
        return []
    from jupyter_cache import get_cache
    from myst_nb.sphinx_ import NbMetadataCollector

    latest: dict[str, float] = {}
    for record in get_cache(str(location)).list_cache_records():
        uri = str(Path(record.uri).resolve())
        latest[uri] = max(latest.get(uri, 0.0), record.created.timestamp())
    outdated = []
    for docname in env.all_docs:
        if docname in changed or docname in added:
            continue
        executed = NbMetadataCollector.get_exec_data(env, docname)
        if executed and latest.get(str(Path(env.doc2path(docname)).resolve())) != executed.get("mtime"):
            outdated.append(docname)
    return outdated


class GradingLimits(SphinxDirective):
    """The grader's limits, their defaults, settings, variables and reasons: autograder/limits.py's traits,
    made from the limits autograder/grading_environment.py declares."""

    def run(self):
        from autograder import grading_environment, limits

        self.env.note_dependency(grading_environment.__file__)
        self.env.note_dependency(limits.__file__)
        container = nodes.container(classes=["grading-limits"])
        self.state.nested_parse(StringList(limits.markdown_table().splitlines()), self.content_offset, container)
        return [container]


def setup(app: Sphinx):
    app.add_config_value("course_notebooks_branch", "notebooks", "html")
    # Old document name -> new one, for pages that moved (_config.yml sets them).
    app.add_config_value("course_redirects", {}, "html")
    app.connect("build-finished", write_redirects)
    app.connect("builder-inited", generate_pages)
    app.connect("env-get-outdated", outdated_outputs)
    app.connect("html-page-context", fix_colab_links, priority=600)
    app.connect("html-page-context", dedupe_scripts, priority=600)
    app.add_directive("assignment-list", AssignmentList)
    app.add_directive("grading-limits", GradingLimits)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
