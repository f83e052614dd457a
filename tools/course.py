"""The course's layout, in one object: every tool, benchmark and test asks it where things are.

    from tools.course import COURSE            # this checkout
    Course(scratch_root)                       # a copy of the course (the tests grade in scratch copies)

What nbgrader owns (the course id, the folders of each step, the gradebook, the exchange) and how the
course starts processes live in the grading package, `autograder/course.py`, which grading needs without
the course's tools; this module adds the book: the lessons and their reading order come from `_toc.yml`,
parsed by sphinx-external-toc as Jupyter Book parses it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from autograder.course import (  # noqa: F401  (re-exported: the tools and tests import them from here)
    AUTOGRADER, LAYOUT_CONFIG, REPO, THREAD_VARIABLES, kernel_threads, tool_env, venv_on_path,
)
from autograder.course import Course as GradingCourse


class Course(GradingCourse):
    """One copy of the course on disk, with its book: this checkout, or a scratch course the tests build."""

    # --- the book -------------------------------------------------------------------------------------

    @cached_property
    def site_map(self):
        """_toc.yml as Jupyter Book reads it (sphinx-external-toc's SiteMap)."""
        from sphinx_external_toc.parsing import parse_toc_yaml

        return parse_toc_yaml(str(self.root / "_toc.yml"))

    def pages(self) -> list[Path]:
        """The source file of every page _toc.yml names, in reading order (glob entries excluded: those
        pages are generated at build time)."""
        pages = []
        for docname in self.site_map:
            matches = [self.root / f"{docname}{suffix}" for suffix in (".md", ".ipynb")]
            found = [path for path in matches if path.exists()]
            if not found:
                raise FileNotFoundError(f"_toc.yml lists {docname}, which has no .md or .ipynb file")
            pages.append(found[0])
        return pages

    def lessons(self) -> list[Path]:
        """The pages that are notebooks (the lessons), in reading order."""
        return [page for page in self.pages() if is_notebook(page)]

    def notebooks(self) -> list[Path]:
        """Everything the course executes: the lessons, then the assignment masters."""
        return self.lessons() + self.master_notebooks()


def is_notebook(path: Path) -> bool:
    """True for .ipynb files and for MyST Markdown files with jupytext front matter."""
    if path.suffix == ".ipynb":
        return True
    text = path.read_text()
    return text.startswith("---") and "format_name: myst" in text.split("\n---", 1)[0]


COURSE = Course()
