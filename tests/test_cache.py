"""The lessons' execution cache (jupyter-cache, with tools/cache.py's dependency check on top): what
invalidates a lesson's outputs, and what does not.

The key is checked on a scratch repository shaped like ours (a `gptcourse` package whose __init__
imports model.py, a gpt2_weights.py that imports model.py too, lessons in book/ that read a quiz
file), so that each edit below touches one thing; the cache is a scratch jupyter-cache. No kernel
starts: these tests take a few seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools import cache
from tools.course import COURSE
from tools.notebooks import read_notebook

pytestmark = pytest.mark.quick

FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def lesson(title: str, *cells: str) -> str:
    """A MyST notebook: a heading, then each code cell after a line of prose."""
    body = "".join(f"Some prose before cell {index}.\n\n```{{code-cell}} ipython3\n{code}\n```\n\n"
                   for index, code in enumerate(cells))
    return f"{FRONT_MATTER}\n# {title}\n\n{body}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    package = tmp_path / "gptcourse"
    package.mkdir()
    (package / "__init__.py").write_text("from .model import GPT\n")
    (package / "model.py").write_text("class GPT:\n    width = 768\n")
    (package / "gpt2_weights.py").write_text("from gptcourse.model import GPT\n\ndef load():\n    return GPT()\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    book = tmp_path / "book"
    (book / "quizzes").mkdir(parents=True)
    (book / "quizzes" / "01-model.json").write_text('{"questions": []}\n')
    (book / "01-model.md").write_text(lesson(
        "The model", "from gptcourse import GPT\nprint(GPT.width)",
        'import json\nquiz = json.load(open("quizzes/01-model.json"))'))
    (book / "02-weights.md").write_text(lesson(
        "The weights", "from gptcourse.gpt2_weights import load\nload()"))
    (book / "03-arithmetic.md").write_text(lesson("Arithmetic", "%matplotlib inline\nimport math\nmath.sqrt(2)"))
    return tmp_path


def keys(repo: Path) -> dict[str, str]:
    return {path.stem: cache.notebook_key(path, root=repo).digest for path in sorted((repo / "book").glob("*.md"))}


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in before if before[name] != after[name]}


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_prose_only_edit_keeps_every_key(repo):
    before = keys(repo)
    path = repo / "book" / "01-model.md"
    path.write_text(path.read_text().replace("Some prose before cell 0.", "Reworded prose, with a $formula$."))
    append(path, "\nA new closing paragraph.\n")
    assert changed(before, keys(repo)) == set()


def test_editing_a_code_cell_changes_only_that_lessons_key(repo):
    before = keys(repo)
    path = repo / "book" / "03-arithmetic.md"
    path.write_text(path.read_text().replace("math.sqrt(2)", "math.sqrt(3)"))
    assert changed(before, keys(repo)) == {"03-arithmetic"}


def test_a_module_change_misses_exactly_for_the_lessons_that_import_it(repo):
    before = keys(repo)
    append(repo / "gptcourse" / "gpt2_weights.py", "\nSCALE = 2\n")
    after_weights = keys(repo)
    assert changed(before, after_weights) == {"02-weights"}

    # model.py is imported by the package's __init__, so every lesson importing gptcourse depends on it.
    append(repo / "gptcourse" / "model.py", "\nDEPTH = 12\n")
    assert changed(after_weights, keys(repo)) == {"01-model", "02-weights"}


def test_the_key_records_the_files_it_depends_on(repo):
    key = cache.notebook_key(repo / "book" / "02-weights.md", root=repo)
    assert {path.name for path in key.modules} == {"__init__.py", "model.py", "gpt2_weights.py"}
    assert cache.notebook_key(repo / "book" / "03-arithmetic.md", root=repo).modules == []
    assert [path.name for path in cache.notebook_key(repo / "book" / "01-model.md", root=repo).data] == ["01-model.json"]


def test_a_data_file_a_lesson_reads_is_part_of_its_key(repo):
    before = keys(repo)
    (repo / "book" / "quizzes" / "01-model.json").write_text('{"questions": ["new"]}\n')
    assert changed(before, keys(repo)) == {"01-model"}


def test_a_new_pinned_environment_misses_everywhere(repo):
    before = keys(repo)
    (repo / "requirements.txt").write_text("torch==2.14.1\n")
    assert changed(before, keys(repo)) == set(before)


def executed(path: Path) -> nbformat.NotebookNode:
    """The lesson as if it ran: each code cell prints its number (no kernel needed)."""
    notebook = read_notebook(path)
    for count, cell in enumerate(cache.code_cells(notebook), start=1):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"output {count}\n")]
        cell.execution_count = count
    return notebook


def cache_every_lesson(repo: Path):
    """A scratch jupyter-cache holding every lesson of `repo`, as tools.cache stores a clean run."""
    jupyter_cache = cache.open_cache(repo / "_build" / ".jupyter_cache")
    for path in sorted((repo / "book").glob("*.md")):
        cache.store(jupyter_cache, cache.notebook_key(path, root=repo), executed(path))
    return jupyter_cache


def invalidated(repo: Path, jupyter_cache) -> set[str]:
    lessons = sorted((repo / "book").glob("*.md"))
    keys = {path: cache.notebook_key(path, root=repo) for path in lessons}
    return {path.stem for path in cache.invalidate_stale(jupyter_cache, keys)}


def test_a_hit_gives_the_current_prose_with_the_cached_outputs(repo):
    """What Jupyter Book renders after a prose-only edit: the new prose, the cached outputs."""
    path = repo / "book" / "01-model.md"
    jupyter_cache = cache_every_lesson(repo)
    path.write_text(path.read_text().replace("Some prose before cell 0.", "Reworded prose."))
    assert cache.cached_record(jupyter_cache, read_notebook(path)) is not None
    merged = cache.executed_notebook(jupyter_cache, path)
    assert "Reworded prose." in merged.cells[0].source + merged.cells[1].source
    assert [cell.outputs[0].text for cell in cache.code_cells(merged)] == ["output 1\n", "output 2\n"]


def test_a_module_change_drops_exactly_the_cached_runs_of_the_lessons_that_import_it(repo):
    jupyter_cache = cache_every_lesson(repo)
    assert invalidated(repo, jupyter_cache) == set()            # nothing changed: every record stays
    append(repo / "book" / "01-model.md", "\nA prose-only edit.\n")
    assert invalidated(repo, jupyter_cache) == set()
    append(repo / "gptcourse" / "gpt2_weights.py", "\nSCALE = 2\n")
    assert invalidated(repo, jupyter_cache) == {"02-weights"}
    # Dropped means gone: Jupyter Book would now execute it, and it alone.
    missing = {path.stem for path in sorted((repo / "book").glob("*.md"))
               if cache.cached_record(jupyter_cache, read_notebook(path)) is None}
    assert missing == {"02-weights"}
    assert invalidated(repo, jupyter_cache) == set()            # a record is dropped once


def test_a_record_cached_without_its_dependencies_is_not_trusted(repo):
    """A run cached by something else (Jupyter Book executing a lesson itself) says nothing about the
    modules it imported: it is dropped, and the lesson executes again through tools.cache."""
    from jupyter_cache.base import CacheBundleIn

    path = repo / "book" / "03-arithmetic.md"
    jupyter_cache = cache.open_cache(repo / "_build" / ".jupyter_cache")
    jupyter_cache.cache_notebook_bundle(CacheBundleIn(executed(path), str(path)), check_validity=False)
    assert invalidated(repo, jupyter_cache) == {"03-arithmetic"}


def test_a_lesson_keeps_one_record_its_latest_run(repo):
    path = repo / "book" / "03-arithmetic.md"
    jupyter_cache = cache_every_lesson(repo)
    path.write_text(path.read_text().replace("math.sqrt(2)", "math.sqrt(3)"))
    cache.store(jupyter_cache, cache.notebook_key(path, root=repo), executed(path))
    records = [record for record in jupyter_cache.list_cache_records() if record.uri == str(path)]
    assert [record.hashkey for record in records] == [cache.notebook_key(path, root=repo).notebook]


def test_the_build_executes_through_jupyter_books_cache():
    """_config.yml's execution settings are the ones the build uses: jupyter-cache, in _build."""
    settings = cache.settings()
    assert settings.mode == "cache"
    assert settings.cache == COURSE.root / "_build" / ".jupyter_cache"
    assert settings.timeout and not settings.allow_errors


def test_the_course_lessons_depend_on_the_modules_they_import():
    """On the real lessons: only lesson 9 loads GPT-2's weights, and every lesson importing the package
    depends on model.py (through gptcourse/__init__.py)."""
    for path in COURSE.lessons():
        key = cache.notebook_key(path)
        modules = {module.relative_to(COURSE.root).as_posix() for module in key.modules}
        imports_weights = re.search(r"^\s*(from|import) gptcourse\.gpt2_weights\b", path.read_text(), re.M) is not None
        assert ("gptcourse/gpt2_weights.py" in modules) == imports_weights, path.name
        if modules:
            assert "gptcourse/model.py" in modules, path.name
