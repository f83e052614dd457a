"""Every lesson runs top to bottom in a fresh kernel. (Every assignment master runs top to bottom when the
course's engine grades it: tests/test_grading.py's test_master_scores_full_marks.)"""

import pytest

from tools.course import COURSE
from tools.notebooks import read_notebook


def name(path):
    return str(path.relative_to(COURSE.root))


@pytest.mark.lessons
@pytest.mark.parametrize("notebook", [pytest.param(path, marks=pytest.mark.notebooks(name(path)), id=name(path))
                                      for path in COURSE.lessons()])
def test_notebook_executes_without_error(notebook, executions):
    execution = executions[notebook]
    assert execution.error is None, f"{name(notebook)}: {execution.error}"


@pytest.mark.quick
@pytest.mark.parametrize("notebook", COURSE.lessons(), ids=name)
def test_every_code_cell_is_parsed_as_code(notebook):
    """A code-cell directive swallowed by a markdown fence (for example after an admonition title with
    backticks) silently never runs and shows raw text on the page."""
    swallowed = [cell.source[:60] for cell in read_notebook(notebook).cells
                 if cell.cell_type == "markdown" and "{code-cell}" in cell.source]
    assert not swallowed, f"{notebook.name}: code cells parsed as markdown: {swallowed}"


@pytest.mark.lessons
def test_an_erroring_or_slow_lesson_fails_with_the_configured_timeout_and_is_not_cached(tmp_path):
    """What stops the build (tools.build_book): a lesson whose cell raises, or runs past _config.yml's
    per-cell timeout, is reported failed, and nothing is cached for it (Jupyter Book would not render
    it: it has no cached run, and a run inside Sphinx raises, `nb_execution_raise_on_error`)."""
    from tools import cache

    (tmp_path / "_config.yml").write_text("execute:\n  execute_notebooks: cache\n  cache: _build/.jupyter_cache\n"
                                          "  timeout: 3\n  allow_errors: false\n")
    front = COURSE.lessons()[0].read_text().split("\n---\n", 1)[0] + "\n---\n"
    book = tmp_path / "book"
    book.mkdir()
    (book / "raises.md").write_text(front + "\n# Raises\n\n```{code-cell} ipython3\nraise ValueError('boom')\n```\n")
    (book / "slow.md").write_text(front + "\n# Slow\n\n```{code-cell} ipython3\nimport time\ntime.sleep(30)\n```\n")
    lessons = [book / "raises.md", book / "slow.md"]
    report = cache.execute_lessons(lessons, tmp_path / "out", cache_path=tmp_path / "cache", root=tmp_path)
    assert "raised ValueError: boom" in report.failed[book / "raises.md"]
    assert "timed out" in report.failed[book / "slow.md"]
    jupyter_cache = cache.open_cache(tmp_path / "cache")
    assert all(cache.cached_record(jupyter_cache, read_notebook(path)) is None for path in lessons)


SELECTION = """
import sys
import pytest

class Needed:
    def pytest_sessionfinish(self, session):
        needed = session.config.stash.get(sys.modules["tests.conftest"].NEEDED, [])
        print("NEEDED", " ".join(path.name for path in needed))

for selection in sys.argv[1:]:
    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *selection.split()], plugins=[Needed()])
"""


def test_a_run_executes_exactly_the_notebooks_its_selected_tests_need():
    """One lesson's tests execute that lesson alone; the site needs every lesson; the quick tier none.
    (Five collections in a subprocess, about 20 s on a busy machine: not in the quick tier.)"""
    import subprocess
    import sys

    selections = {
        "tests/test_lesson_01_layernorm.py": ["01-layernorm.md"],
        "tests/test_lesson_09_matching_gpt2.py tests/test_lesson_02_mlp.py": ["02-mlp.md", "09-matching-gpt2.md"],
        "tests/test_site.py": [path.name for path in COURSE.lessons()],
        "tests/test_notebooks.py -k 04-block": ["04-block.md"],
        "-m quick tests/test_notebooks.py tests/test_lesson_05_gpt.py": [],
    }
    result = subprocess.run([sys.executable, "-c", SELECTION, *selections], cwd=COURSE.root,
                            capture_output=True, text=True, timeout=300)
    found = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("NEEDED")]
    assert found == list(selections.values()), result.stdout[-3000:] + result.stderr[-3000:]
