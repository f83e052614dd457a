"""Every lesson and every assignment master runs top to bottom in a fresh kernel."""

import pytest

from tools.notebooks import REPO, all_notebooks


@pytest.mark.parametrize("notebook", all_notebooks(), ids=lambda path: str(path.relative_to(REPO)))
def test_notebook_executes_without_error(notebook, executions):
    execution = executions[notebook]
    assert execution.error is None, f"{notebook.relative_to(REPO)}: {execution.error}"
