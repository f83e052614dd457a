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
The lessons start executing as soon as the tests are collected, in a background thread (one kernel at
a time, one thread each), and the site is built after them there too, while the grading tests run: those
leave a core idle much of the time (browsers, timeouts, tails of parallel batches). The tests that read
executed notebooks run last, then those that read the site, so they rarely wait. A test that reruns a
lesson another way (lessons 7 and 8 on two threads) names its run with
`pytest.mark.rerun.with_args(FUNCTION)` and reads it from the `rerun` fixture: the background thread makes that run after the site, while the grading
tests still run, instead of at the end of the session, where one kernel on its own leaves a core idle.
A job on the built site (the browser's tour of every page) is named the same way, by
`pytest.mark.after_site.with_args(FUNCTION)` on the tests that read it: the background thread runs
FUNCTION(html folder) as soon as the site is built, and `after_site_result` hands its result over.
The catalog's fast path starts in a background thread of its own once the tests are collected
(tests/grading_fixtures.py, `Mutants`). `--lessons-inline` turns all of this off.
Lessons execute through the build's execution cache (tools/cache.py, `_build/.jupyter_cache`: the only
thing a test writes outside its temporary folders, besides the review material in `_build/test-output`),
always afresh, and are cached when they ran cleanly, so `make book` after `make test` starts no kernel.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from tools.course import COURSE

pytest_plugins = ["tests.grading_fixtures", "tests.markers"]

NEEDED = pytest.StashKey[list]()
# Fixtures a quick test may not use: each executes notebooks, builds the site or grades.
EXPENSIVE = {"executions", "site", "course", "graded", "mutants", "stock"}
GRADING = {"course", "graded", "mutants", "stock"}        # the session fixtures that grade (tests/grading_fixtures.py)
# Fixtures that grade a batch of submissions on every core: the engine's sample, the catalog's fast path, the
# hostile class, the cluster's class.
BATCHES = {"graded", "mutants", "hostile", "cluster_class"}


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
    # The tests that read executed notebooks go last, and those that read the site after them, so the
    # background execution has the rest of the run to finish in and the site builds while lessons are
    # checked; the tests of the background's reruns go with them. Before those, the modules whose fixtures
    # grade a batch on every core (BATCHES) come after the other tests, which leave a core idle for long
    # stretches (one nbgrader command, one browser, a class of a few) that the background's kernel fills;
    # a module moves whole, so its module-scoped class is graded once.
    def names(item) -> set[str]:
        return set(getattr(item, "fixturenames", ()))

    batches = {item.nodeid.split("::")[0] for item in items if names(item) & BATCHES}
    items.sort(key=lambda item: (2 if "site" in names(item) else 1 if names(item) & {"executions", "rerun"} else 0,
                                 item.nodeid.split("::")[0] in batches))


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
    if needed and not session.config.getoption("lessons_inline") and not session.config.getoption("collectonly"):
        wants_site = any("site" in getattr(item, "fixturenames", ()) for item in session.items)
        # One kernel at a time beside grading, which takes both cores in bursts; both cores when nothing
        # else runs (one lesson's tests, or the site's).
        beside_grading = any(item.get_closest_marker(name) for item in session.items for name in ("grading", "lab"))
        def jobs(marker: str) -> list:
            return list(dict.fromkeys(mark.args[0] for item in session.items for mark in item.iter_markers(marker)))

        background = Background(session.config.stash[NEEDED], wants_site, workers=1 if beside_grading else None,
                                reruns=jobs("rerun"), site_jobs=jobs("after_site") if wants_site else [])
        session.config.stash[BACKGROUND] = background
        background.start()


def pytest_addoption(parser):
    parser.addoption("--lessons-inline", action="store_true",
                     help="do the session's background work (the lessons, the site, the catalog's fast path) "
                          "when a test first needs it")


def pytest_sessionfinish(session):
    background = session.config.stash.get(BACKGROUND, None)
    if background is not None:
        background.finish()


BACKGROUND = pytest.StashKey["Background"]()


class Background(threading.Thread):
    """The notebooks this run needs, executed into the build's cache, then the site built from them, in a
    thread of this process while the other tests run. Each kernel gets one thread, as the session has
    always run them (a kernel's share of two cores)."""

    def __init__(self, needed: list[Path], wants_site: bool, workers: int | None, reruns: list = (),
                 site_jobs: list = ()):
        super().__init__(name="lessons-in-the-background", daemon=True)
        self.needed, self.wants_site, self.workers = needed, wants_site, workers
        self.folder = Path(tempfile.mkdtemp(prefix="course-lessons-"))
        self.executions: Executions | None = None
        self.site: Path | None = None
        self.site_error: str | None = None
        self.error: BaseException | None = None
        self.reruns = {job: None for job in reruns}        # job -> its result, or the exception it raised
        self.site_jobs = {job: None for job in site_jobs}  # the same, for the jobs on the built site
        # Each stage's readers wait for that stage only: the site's tests not for the reruns after it.
        self.lessons_done, self.site_done, self.site_jobs_done = threading.Event(), threading.Event(), threading.Event()

    def run(self):
        from tests import markers

        markers.BACKGROUND.active = True          # not charged to whichever test runs meanwhile
        try:
            self.executions = execute_needed(self.needed, self.folder / "executed", self.workers, threads=1)
            self.lessons_done.set()
            if self.wants_site:
                self.site, self.site_error = build_site(self.executions, self.folder / "site")
        except BaseException as error:            # re-raised in the test that needs the result
            self.error = error
        finally:
            self.lessons_done.set()
            self.site_done.set()
        # The site's jobs first: their tests run last, and a browser leaves a core idle the grading fills.
        for job in self.site_jobs if self.site is not None else ():
            try:
                self.site_jobs[job] = job(self.site)
            except BaseException as error:        # noqa: BLE001 (re-raised in the test that reads it)
                self.site_jobs[job] = error
        self.site_jobs_done.set()
        for index, job in enumerate(self.reruns):
            folder = self.folder / f"rerun-{index}"
            folder.mkdir()
            try:
                self.reruns[job] = job(folder)
            except BaseException as error:        # noqa: BLE001 (re-raised in the test that reads it)
                self.reruns[job] = error

    def result(self, stage: threading.Event | None = None) -> "Background":
        """This, once `stage` (default: the lessons) is done; the background's error if it failed."""
        (stage or self.lessons_done).wait()
        if self.error is not None:
            raise self.error
        return self

    def finish(self):
        if not self.is_alive():               # an interrupted run leaves it behind rather than wait
            shutil.rmtree(self.folder, ignore_errors=True)


def execute_needed(needed: list[Path], out_dir: Path, workers: int | None = None,
                   threads: int | None = None) -> Executions:
    from tools.cache import execute_lessons

    lessons = set(COURSE.lessons())
    report = execute_lessons([path for path in needed if path in lessons], out_dir, workers=workers, force=True,
                             extra=[path for path in needed if path not in lessons], threads=threads)
    return Executions(report.executions)


def build_site(executions: Executions, output: Path) -> tuple[Path | None, str | None]:
    """The site built by `make book`'s own command into `output`: (its html folder, None), or (None, why not)."""
    import json
    import subprocess

    from tools.build_book import build_command
    from tools.course import tool_env

    failed = [str(path) for path, run in executions.items() if run.error and path in COURSE.lessons()]
    if failed:
        return None, f"cannot build the site: notebooks failed: {failed}"
    output.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(build_command(output), cwd=COURSE.root, env=tool_env(), capture_output=True, text=True)
    if result.returncode:
        return None, f"the site build failed:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    report = json.loads((output / "_build" / "build-report.json").read_text())
    if report["executed"]:
        return None, f"the site build executed {report['executed']} again"
    return output / "_build" / "html", None


class Executions(dict):
    """Notebook -> tools.notebooks.Execution, for the notebooks this run executed."""

    def __missing__(self, path):
        pytest.fail(f"{path} was not executed in this run: the test reading it must be marked "
                    f"pytest.mark.notebooks({str(Path(path).relative_to(COURSE.root))!r})")


@pytest.fixture(scope="session")
def executions(request, tmp_path_factory) -> Executions:
    """The notebooks the selected tests need, executed once each in a fresh kernel (in the background
    since collection ended, or now with --lessons-inline, in one parallel batch); the lessons that ran
    cleanly go into the build's execution cache."""
    background = request.config.stash.get(BACKGROUND, None)
    if background is not None:
        return background.result().executions
    return execute_needed(request.config.stash.get(NEEDED, []), tmp_path_factory.mktemp("executed"))


@pytest.fixture()
def rerun(request, tmp_path):
    """The result of the test's `pytest.mark.rerun.with_args(FUNCTION)`: FUNCTION(folder), run by the background thread
    after the site when there is one, else now."""
    job = request.node.get_closest_marker("rerun").args[0]
    background = request.config.stash.get(BACKGROUND, None)
    if background is None or job not in background.reruns:
        return job(tmp_path)
    background.join()
    result = background.reruns[job]
    if isinstance(result, BaseException):
        raise result
    return result


def after_site_result(config: pytest.Config, job, site: Path):
    """The result of `job(site)`, the site job a test names with `pytest.mark.after_site.with_args(job)`: run by
    the background thread right after it built the site, else now."""
    background = config.stash.get(BACKGROUND, None)
    if background is None or job not in background.site_jobs:
        return job(site)
    background.site_jobs_done.wait()
    if background.site is None:               # no site was built there (its tests fail on the `site` fixture)
        return job(site)
    result = background.site_jobs[job]
    if isinstance(result, BaseException):
        raise result
    return result


@pytest.fixture(scope="session")
def site(executions, request, tmp_path_factory) -> Path:
    """The course site, built once per run by `make book`'s own command (`python -m tools.build_book`,
    with --output), from the lessons `executions` just cached: nothing executes again. The site tests
    and the browser tests (tests/browser/) all read this one build."""
    background = request.config.stash.get(BACKGROUND, None)
    if background is not None and background.wants_site:
        background.result(background.site_done)
        html, error = background.site, background.site_error
    else:
        html, error = build_site(executions, tmp_path_factory.mktemp("site"))
    if error:
        pytest.fail(error)
    return html
