"""Markers that say the truth: a test that grades, executes notebooks or starts a browser must carry the
marker of it (`grading`, `lessons`, `browser`), and a `quick` test does none of these.

While a test runs (its fixtures' set-up included), the course's entry points for each of those record
that they were used: the grading functions in tools/, the notebook executors, Playwright's browser launch,
and any subprocess whose command line runs nbgrader, the grading engine or Chromium. A session fixture is
charged to the first test that needs it; the others that use it are marked from their fixtures
(tests/conftest.py). A test that used something its markers do not declare fails, naming what it used.
"""

from __future__ import annotations

import functools
import importlib
import subprocess
import threading

import pytest

# marker -> the functions (module:attribute) whose use means a test needs that marker
ENTRY_POINTS = {
    "grading": ["autograder.classgrader.grade_class:grade_class", "tools.grading:nbgrader", "tools.grading:generate_assignments",
                "tools.mutation_grading:grade_known", "tools.stock_nbgrader:autograde",
                "tools.stock_nbgrader:autograde_in_shards"],
    "lessons": ["tools.notebooks:execute", "tools.notebooks:execute_all", "tools.notebooks:run_notebook",
                "tools.cache:execute_lessons"],
    "browser": ["playwright.sync_api._generated:BrowserType.launch"],
}
# marker -> words in a subprocess's command line that mean the same
COMMANDS = {
    "grading": ("nbgrader", "autograder.classgrader.grade_class", "tools.mutation_grading"),
    "browser": ("chromium", "sync_playwright"),
}
# What a marker may stand for besides itself: a lab test drives a browser.
IMPLIED = {"lab": {"browser"}}

USED: dict[str, set[str]] = {}          # marker -> what the running test used that needs it
RUNNING: list[str] = []                 # the test running now (nothing while no test runs)


# Set in a thread that does the session's own work while tests run (tests/conftest.py's background lessons):
# what it uses is charged to no test.
BACKGROUND = threading.local()


def record(marker: str, what: str) -> None:
    if RUNNING and not getattr(BACKGROUND, "active", False):
        USED.setdefault(marker, set()).add(what)


def recorded(function, marker: str, what: str):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        record(marker, what)
        return function(*args, **kwargs)

    wrapper.__recorded__ = marker
    return wrapper


def install() -> list[str]:
    """Wrap every entry point (those whose module cannot be imported here are skipped): what was wrapped."""
    wrapped = []
    for marker, points in ENTRY_POINTS.items():
        for point in points:
            module_name, _, attribute = point.partition(":")
            try:
                owner = importlib.import_module(module_name)
            except ImportError:
                continue
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            function = getattr(owner, name, None)
            if function is None or getattr(function, "__recorded__", None):
                continue
            setattr(owner, name, recorded(function, marker, point))
            wrapped.append(point)
    original = subprocess.Popen.__init__
    if not getattr(original, "__recorded__", None):
        @functools.wraps(original)
        def popen(self, args, *rest, **kwargs):
            line = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
            for marker, words in COMMANDS.items():
                if any(word in line for word in words):
                    record(marker, f"a subprocess running {next(w for w in words if w in line)}")
            return original(self, args, *rest, **kwargs)

        popen.__recorded__ = "subprocess"
        subprocess.Popen.__init__ = popen
    return wrapped


def missing_markers(declared: set[str], used: dict[str, set[str]]) -> list[str]:
    """What a test used without the marker that declares it, one line each; [] when its markers say it."""
    declared = declared | {implied for marker in declared for implied in IMPLIED.get(marker, ())}
    problems = [f"it used {', '.join(sorted(what))} without the marker `{marker}`"
                for marker, what in sorted(used.items()) if marker not in declared]
    if "quick" in declared and used:
        problems.append(f"it is marked quick but used {', '.join(sorted(set().union(*used.values())))}")
    return problems


def pytest_sessionstart(session):
    install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    USED.clear()
    RUNNING[:] = [item.nodeid]
    yield
    RUNNING.clear()
    USED.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    problems = missing_markers({mark.name for mark in item.iter_markers()}, USED)
    if problems:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid}: the test's markers do not say what it runs: {'; '.join(problems)}. "
                           "Mark it (pytest.mark.<marker>) so that `pytest -m` selects it truthfully.")
