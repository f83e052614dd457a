"""Expensive work happens once per run, in session fixtures: executing every notebook (here), grading a
class (tests/grading_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import cache
from tools.notebooks import all_notebooks, execute_all, lesson_notebooks

pytest_plugins = ["tests.grading_fixtures"]


@pytest.fixture(scope="session")
def executions(tmp_path_factory):
    """Every lesson and solution notebook, executed once by papermill (both cores in use).

    The lessons that ran cleanly also go into `make book`'s execution cache (tools/cache.py), under
    the keys their sources had before they ran, so a `make book` after `make test` runs nothing again.
    """
    notebooks = all_notebooks()
    keys = {path: cache.notebook_key(path) for path in lesson_notebooks()}
    runs = execute_all(notebooks, tmp_path_factory.mktemp("executed"))
    for path, key in keys.items():
        if runs[path].error is None:
            cache.store(key, runs[path].output)
    return runs


@pytest.fixture(scope="session")
def site(executions, tmp_path_factory):
    """The course site, built once per run (warnings as errors) from the lessons `executions` already
    ran; the site tests and the browser tests (tests/browser/) all read this one build."""
    from tools.build_book import build_from_executed
    from tools.notebooks import REPO

    failed = [str(path) for path, run in executions.items() if run.error]
    if failed:
        pytest.fail(f"cannot build the site: notebooks failed: {failed}")
    lessons = {path: run for path, run in executions.items() if path.parent == REPO / "book"}
    return build_from_executed(lessons, tmp_path_factory.mktemp("site"))
