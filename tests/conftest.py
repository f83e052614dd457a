"""Expensive work happens once per run, in session fixtures: executing the notebooks the selected tests
need and building the site (here), grading a class (tests/grading_fixtures.py).

Tiers, as markers (registered in pyproject.toml; `pytest -m quick` is the developer's quick check):

- `quick`: needs no notebook execution, no grading, no site build (a guard below keeps it so);
- `lessons`: reads executed notebooks; `site`: reads the built site; `browser`: drives Chromium;
  `grading`: grades with nbgrader; `lab`: drives JupyterLab. A test using the `executions` fixture is
  marked `lessons`, one using `site` is marked `site`, and one using a grading fixture (`course`, `graded`,
  `mutants`, `stock`) is marked `grading`, whether or not its module says so. tests/markers.py fails any
  test that grades, executes notebooks or starts a browser without the marker that says so.

A test that reads an executed notebook names it: `pytest.mark.notebooks("book/01-layernorm.md")` (the
lesson modules put it in their `pytestmark`); a test of the site needs every lesson. The session fixture
`executions` executes exactly the notebooks the selected tests need, once, in one parallel batch, so
`pytest tests/test_lesson_01_layernorm.py` executes lesson 1 alone, and the whole suite each notebook once.
Lessons execute through the build's execution cache (tools/cache.py, `_build/.jupyter_cache`: the only
thing a test writes outside its temporary folders, besides the review material in `_build/test-output`),
always afresh, and are cached when they ran cleanly, so `make book` after `make test` starts no kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.course import COURSE

pytest_plugins = ["tests.grading_fixtures", "tests.markers"]

NEEDED = pytest.StashKey[list]()
# Fixtures a quick test may not use: each executes notebooks, builds the site or grades.
EXPENSIVE = {"executions", "site", "course", "graded", "mutants", "stock"}
GRADING = {"course", "graded", "mutants", "stock"}        # the session fixtures that grade (tests/grading_fixtures.py)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark tests by the expensive fixtures they use (before `-m` selects), and keep `quick` quick."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "executions" in names:
            item.add_marker(pytest.mark.lessons)
        if "site" in names:
            item.add_marker(pytest.mark.site)
        if names & GRADING:
            item.add_marker(pytest.mark.grading)
        if item.get_closest_marker("quick") and names & EXPENSIVE:
            raise pytest.UsageError(f"{item.nodeid} is marked quick but uses {sorted(names & EXPENSIVE)}")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The notebooks the selected tests need, in the course's order (after `-m` and `-k` selected)."""
    needed: set[Path] = set()
    for item in session.items:
        names = set(getattr(item, "fixturenames", ()))
        if "executions" not in names:
            continue
        for mark in item.iter_markers("notebooks"):
            needed.update((COURSE.root / name).resolve() for name in mark.args)
        if "site" in names:
            needed.update(COURSE.lessons())
    order = COURSE.notebooks()
    session.config.stash[NEEDED] = [path for path in order if path in needed] + sorted(needed - set(order))


class Executions(dict):
    """Notebook -> tools.notebooks.Execution, for the notebooks this run executed."""

    def __missing__(self, path):
        pytest.fail(f"{path} was not executed in this run: the test reading it must be marked "
                    f"pytest.mark.notebooks({str(Path(path).relative_to(COURSE.root))!r})")


@pytest.fixture(scope="session")
def executions(request, tmp_path_factory) -> Executions:
    """The notebooks the selected tests need, executed once each in a fresh kernel, in one parallel batch
    (both cores in use); the lessons that ran cleanly go into the build's execution cache."""
    from tools.cache import execute_lessons

    needed = request.config.stash.get(NEEDED, [])
    lessons = set(COURSE.lessons())
    report = execute_lessons([path for path in needed if path in lessons], tmp_path_factory.mktemp("executed"),
                             force=True, extra=[path for path in needed if path not in lessons])
    return Executions(report.executions)


@pytest.fixture(scope="session")
def site(executions, tmp_path_factory) -> Path:
    """The course site, built once per run into a temporary folder by `make book`'s own command
    (`python -m tools.build_book`, with --output), from the lessons `executions` just cached: nothing
    executes again. The site tests and the browser tests (tests/browser/) all read this one build."""
    import json
    import subprocess

    from tools.build_book import build_command
    from tools.course import tool_env

    failed = [str(path) for path, run in executions.items() if run.error and path in COURSE.lessons()]
    if failed:
        pytest.fail(f"cannot build the site: notebooks failed: {failed}")
    output = tmp_path_factory.mktemp("site")
    result = subprocess.run(build_command(output), cwd=COURSE.root, env=tool_env(), capture_output=True, text=True)
    if result.returncode:
        pytest.fail(f"the site build failed:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}")
    report = json.loads((output / "_build" / "build-report.json").read_text())
    assert report["executed"] == [], f"the site build executed {report['executed']} again"
    return output / "_build" / "html"
