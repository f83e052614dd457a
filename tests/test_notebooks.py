"""Every lesson and every assignment master runs top to bottom in a fresh kernel."""

import pytest

from tools.course import COURSE
from tools.notebooks import all_notebooks, lesson_notebooks, read_notebook


def name(path):
    return str(path.relative_to(COURSE.root))


@pytest.mark.lessons
@pytest.mark.parametrize("notebook", [pytest.param(path, marks=pytest.mark.notebooks(name(path)), id=name(path))
                                      for path in all_notebooks()])
def test_notebook_executes_without_error(notebook, executions):
    execution = executions[notebook]
    assert execution.error is None, f"{name(notebook)}: {execution.error}"


@pytest.mark.quick
@pytest.mark.parametrize("notebook", lesson_notebooks(), ids=name)
def test_every_code_cell_is_parsed_as_code(notebook):
    """A code-cell directive swallowed by a markdown fence (for example after an admonition title with
    backticks) silently never runs and shows raw text on the page."""
    swallowed = [cell.source[:60] for cell in read_notebook(notebook).cells
                 if cell.cell_type == "markdown" and "{code-cell}" in cell.source]
    assert not swallowed, f"{notebook.name}: code cells parsed as markdown: {swallowed}"
