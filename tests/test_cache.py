"""The lessons' execution cache (tools/cache.py): what invalidates a lesson's outputs, and what does not.

The key is checked on a scratch repository shaped like ours (a `gptcourse` package whose __init__
imports model.py, a gpt2_weights.py that imports model.py too, lessons in book/ that read a quiz
file), so that each edit below touches one thing. No kernel starts: these tests take well under a second.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest

from tools import cache
from tools.notebooks import REPO, lesson_notebooks, read_notebook

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


def test_a_hit_gives_the_current_prose_with_the_cached_outputs(repo):
    path = repo / "book" / "01-model.md"
    executed = read_notebook(path)
    for count, cell in enumerate(cache.code_cells(executed), start=1):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"output {count}\n")]
        cell.execution_count = count
    path.write_text(path.read_text().replace("Some prose before cell 0.", "Reworded prose."))
    merged = cache.with_outputs(read_notebook(path), copy.deepcopy(executed))
    assert "Reworded prose." in merged.cells[0].source + merged.cells[1].source
    assert [cell.outputs[0].text for cell in cache.code_cells(merged)] == ["output 1\n", "output 2\n"]
    # jupytext gives cells random ids; the cache fixes them so that equal lessons give equal files.
    again = cache.with_outputs(read_notebook(path), copy.deepcopy(executed))
    assert [cell.id for cell in merged.cells] == [cell.id for cell in again.cells]


def test_the_course_lessons_depend_on_the_modules_they_import():
    """On the real lessons: only lesson 9 loads GPT-2's weights, and every lesson importing the package
    depends on model.py (through gptcourse/__init__.py)."""
    for path in lesson_notebooks():
        key = cache.notebook_key(path)
        modules = {module.relative_to(REPO).as_posix() for module in key.modules}
        imports_weights = re.search(r"^\s*(from|import) gptcourse\.gpt2_weights\b", path.read_text(), re.M) is not None
        assert ("gptcourse/gpt2_weights.py" in modules) == imports_weights, path.name
        if modules:
            assert "gptcourse/model.py" in modules, path.name
