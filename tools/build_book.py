"""Build the course site with Jupyter Book 1, in place, warnings as errors: the one build path of
`make book` and of the tests' `site` fixture.

1. The execution cache is brought up to date (tools/cache.py): the record of any lesson whose imported
   `gptcourse` modules, data files or pinned requirements changed since it ran is dropped, and the
   lessons without a record execute in one parallel batch (each kernel on its share of the cores) and
   are cached in jupyter-cache, `_build/.jupyter_cache`. A lesson that fails stops the build here.
2. `jupyter-book build` runs as configured in _config.yml (`execute_notebooks: cache`): myst-nb finds
   every lesson in that cache and starts no kernel, and Sphinx's incremental build re-reads only the
   pages whose source changed, or whose cached outputs changed since it last read them
   (book/_ext/course_site.py tells Sphinx about the latter).

A prose-only edit therefore re-reads one page and executes nothing; a changed module re-executes
exactly the lessons that import it. What ran is written to `_build/build-report.json`.

The npm packages (`npm ci`, which the Makefile runs) must be installed: MathJax is served from the site.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tools.course import COURSE

MATHJAX = COURSE.root / "node_modules" / "mathjax"


class BuildError(RuntimeError):
    """A lesson failed to execute, or Sphinx failed."""


def require_npm_packages() -> None:
    if not (MATHJAX / "es5" / "tex-mml-chtml.js").exists():
        raise SystemExit("node_modules/mathjax is missing: run `npm ci` (or `make book`, which runs it)")


def jupyter_book(output: Path, rebuild_all: bool = False) -> None:
    """`jupyter-book build` of this checkout into `output`/_build/html, warnings as errors, nitpicky
    references, in this process (it is `python -m tools.build_book`'s own: a second interpreter would
    import the whole Sphinx stack again). Run from the repository root, where _config.yml's relative
    cache path points."""
    from jupyter_book.cli.main import main as jupyter_book_cli

    arguments = ["build", str(COURSE.root), "--path-output", str(output), "--warningiserror", "--nitpick",
                 "--keep-going", *(["--all"] if rebuild_all else [])]
    here = Path.cwd()
    os.chdir(COURSE.root)
    try:
        jupyter_book_cli.main(arguments, prog_name="jupyter-book", standalone_mode=False)
    except (Exception, SystemExit) as error:
        raise BuildError(f"jupyter-book build failed: {error}") from error
    finally:
        os.chdir(here)


def build_command(output: Path | None = None) -> list[str]:
    """The command `make book` runs, building into `output` (the tests' site fixture runs it too)."""
    return [sys.executable, "-m", "tools.build_book", *(["--output", str(output)] if output else [])]


def build(output: Path | None = None, workers: int | None = None, force: bool = False) -> Path:
    """Build the site into `output`/_build/html (default: this checkout's _build/html); returns that folder.
    `force` executes every lesson again and re-reads every page."""
    from tools import cache

    require_npm_packages()
    output = Path(output or COURSE.root).resolve()
    config = cache.settings()
    if config.mode != "cache":
        raise BuildError(f"_config.yml: execute_notebooks is {config.mode!r}; this build relies on 'cache'")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="course-build-") as scratch:
        report = cache.execute_lessons(COURSE.lessons(), Path(scratch), workers, force=force)
    if report.failed:
        raise BuildError("lessons failed to execute (nothing was cached for them):\n" + "\n".join(
            f"  {lesson.relative_to(COURSE.root)}: {error}" for lesson, error in report.failed.items()))
    sphinx_started = time.perf_counter()
    jupyter_book(output, rebuild_all=force)
    summary = {**report.as_json(), "sphinx": "built", "seconds_sphinx": round(time.perf_counter() - sphinx_started, 3),
               "seconds_total": round(time.perf_counter() - started, 3)}
    (output / "_build" / "build-report.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"Lessons executed: {len(report.executed)}, from the cache: {len(report.from_cache)} "
          f"({len(report.invalidated)} invalidated by a dependency); Sphinx {summary['seconds_sphinx']} s")
    return output / "_build" / "html"


INCLUDE = re.compile(r"^```\{literalinclude\}\s+(?P<path>\S+)\n(?P<options>(?::[\w-]+:.*\n)*)```$", re.MULTILINE)
TAB_ITEM = re.compile(r"^:{3,}\{tab-item\}\s*(?P<title>.+)$", re.MULTILINE)
TAB_MARKUP = re.compile(r"^(?::{3,}(?:\{tab-set\})?|:sync(?:-group)?:.*)(?:\n|\Z)", re.MULTILINE)


def for_notebook(markdown: str, folder: Path) -> str:
    """A lesson's Markdown cell as Jupyter and Colab show it, which know no MyST directives: each file
    a `literalinclude` names is written out as a fenced block of its language, and each tab of a
    tab-set becomes a bold title over its content (every language, one after another)."""
    def included(match: re.Match) -> str:
        language = re.search(r"^:language:\s*(\S+)", match["options"], re.MULTILINE)
        code = (folder / match["path"]).read_text(encoding="utf-8").rstrip("\n")
        return f"```{language[1] if language else ''}\n{code}\n```"

    markdown = INCLUDE.sub(included, markdown)
    markdown = TAB_ITEM.sub(lambda match: f"**{match['title'].strip()}**\n", markdown)
    return TAB_MARKUP.sub("", markdown)


def export_notebooks(dest: Path) -> Path:
    """The lessons as unexecuted .ipynb files (what Colab can open), with what they need beside them:
    the quizzes they load and the reference package they import. The deploy workflow publishes this
    folder as the `notebooks` branch."""
    import jupytext

    root = COURSE.root
    shutil.rmtree(dest, ignore_errors=True)
    for lesson in COURSE.lessons():
        target = dest / lesson.relative_to(root).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = jupytext.read(lesson)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                cell.source = for_notebook(cell.source, lesson.parent)
        jupytext.write(notebook, target, fmt="ipynb")
    for folder in ("book/quizzes", "gptcourse"):
        if (root / folder).exists():
            shutil.copytree(root / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements.txt"):
        shutil.copy(root / name, dest / name)
    return dest


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notebooks", type=Path, help="export the lessons as .ipynb into this folder instead")
    parser.add_argument("--force", action="store_true",
                        help="execute every lesson again and re-read every page")
    parser.add_argument("--workers", type=int, help="lessons executed side by side (default: one per core)")
    parser.add_argument("--output", type=Path, help="build into OUTPUT/_build/html (default: this checkout's _build)")
    arguments = parser.parse_args()
    if arguments.notebooks:
        print(f"Lessons exported: {export_notebooks(arguments.notebooks.resolve())}")
    else:
        try:
            html = build(arguments.output, workers=arguments.workers, force=arguments.force)
        except BuildError as error:
            raise SystemExit(str(error))
        print(f"Site built: {html / 'index.html'}")
