"""Every lesson and every assignment master runs top to bottom in a fresh kernel."""

import pytest

from tools.notebooks import REPO, all_notebooks, lesson_notebooks, read_notebook


@pytest.mark.parametrize("notebook", all_notebooks(), ids=lambda path: str(path.relative_to(REPO)))
def test_notebook_executes_without_error(notebook, executions):
    execution = executions[notebook]
    assert execution.error is None, f"{notebook.relative_to(REPO)}: {execution.error}"


@pytest.mark.parametrize("notebook", lesson_notebooks(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_code_cell_is_parsed_as_code(notebook):
    """A code-cell directive swallowed by a markdown fence (for example after an admonition title with
    backticks) silently never runs and shows raw text on the page."""
    swallowed = [cell.source[:60] for cell in read_notebook(notebook).cells
                 if cell.cell_type == "markdown" and "{code-cell}" in cell.source]
    assert not swallowed, f"{notebook.name}: code cells parsed as markdown: {swallowed}"
