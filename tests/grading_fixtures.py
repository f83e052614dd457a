"""Session fixtures for the grading tests: a scratch course, and a class graded once in it."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tools import grading, mutation_grading, stock_nbgrader
from tools.course import COURSE


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """A scratch course after `nbgrader generate_assignment` of every assignment."""
    course = grading.make_course(tmp_path_factory.mktemp("course"))
    grading.generate_assignments(course, COURSE.assignments())
    return course


@dataclass
class GradedClass:
    """Known submissions of each assignment graded by the course's grading engine (autograder.classgrader.grade_class, as
    instructors run it) in a course of their own: each assignment's engine sample (grading.engine_sample:
    the master, the untouched release, a few bugs, alternatives and copies). The first test that asks has
    the samples of every assignment this run's selected tests need graded in one run of the engine (one
    local cluster), so running one assignment's tests grades only that assignment. A test asking for
    another known submission has it graded then. The whole catalog is graded by the fast path
    (`mutants`), which a test holds equal to this class on the sample."""

    course: Path
    wanted: list[str] = field(default_factory=list)      # the assignments this run's tests need
    summaries: dict[str, dict] = field(default_factory=dict)
    students: set[str] = field(default_factory=set)
    cache: dict = field(default_factory=dict)

    def grade(self, assignment: str) -> dict:
        """The engine's summary of grading `assignment`'s sample (graded now if no test asked before)."""
        if assignment not in self.summaries:
            batch = [name for name in dict.fromkeys([assignment, *self.wanted]) if name not in self.summaries]
            sample = [submission for name in batch for submission in grading.engine_sample(name)]
            summary = grading.grade_submissions(self.course, sample)
            for name in batch:
                self.summaries[name] = {**summary, **{key: [r for r in summary[key] if r["assignment"] == name]
                                                      for key in ("results", "failed")}}
            self.students.update(submission.student for submission in sample)
        return self.summaries[assignment]

    def ensure(self, assignment: str, student: str) -> None:
        self.grade(assignment)
        if student not in self.students:
            known = [s for s in grading.known_submissions(assignment) if s.student == student]
            if not known:
                raise KeyError(f"{student} is not a known submission of {assignment}")
            grading.grade_submissions(self.course, known)
            self.students.add(student)

    def scores(self, assignment: str, student: str) -> dict[str, tuple[float, float]]:
        if ("scores", assignment, student) not in self.cache:
            self.ensure(assignment, student)
            self.cache["scores", assignment, student] = grading.cell_scores(self.course, assignment, student)
        return dict(self.cache["scores", assignment, student])

    def feedback(self, assignment: str, student: str) -> nbformat.NotebookNode:
        if ("feedback", assignment, student) not in self.cache:
            self.ensure(assignment, student)
            self.cache["feedback", assignment, student] = grading.autograded_notebook(self.course, assignment, student)
        return copy.deepcopy(self.cache["feedback", assignment, student])


GRADED_ASSIGNMENTS = pytest.StashKey[list]()
MUTANT_ASSIGNMENTS = pytest.StashKey[list]()
# What the fast path grades of each assignment: its catalog, where a selected test reads it, and the submissions
# tests name with `pytest.mark.fast_path({assignment: [Submission, ...]})` (tests/test_checked_references.py's
# pairs), in the same process as the catalog instead of one more process per assignment importing and preparing.
FAST_PATH_CATALOGS = pytest.StashKey[set]()
FAST_PATH_EXTRAS = pytest.StashKey[dict]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The assignments whose engine samples the selected tests read (their `assignment` parameter, or the
    assignment of their catalog variant; the stock comparison's for any other test of `graded`), and those
    whose catalogs they read through the fast path (every assignment for a test without such a parameter,
    the mutation report's)."""
    for fixture, key, otherwise in (("graded", GRADED_ASSIGNMENTS, [STOCK_ASSIGNMENT]),
                                    ("mutants", MUTANT_ASSIGNMENTS, COURSE.assignments())):
        wanted = []
        for item in session.items:
            if fixture not in getattr(item, "fixturenames", ()):
                continue
            params = getattr(getattr(item, "callspec", None), "params", {})
            found = [value if isinstance(value, str) else value.assignment for key_, value in params.items()
                     if key_ == "assignment" or isinstance(value, grading.Variant)]
            wanted += found or otherwise
            if fixture == "mutants":
                extras = [mark.args[0] for mark in item.iter_markers("fast_path")]
                for named in extras:
                    for assignment, known in named.items():
                        session.config.stash.setdefault(FAST_PATH_EXTRAS, {}).setdefault(assignment, {}).update(
                            {submission.student: submission for submission in known})
                if not extras:
                    session.config.stash.setdefault(FAST_PATH_CATALOGS, set()).update(found or otherwise)
        session.config.stash[key] = [a for a in COURSE.assignments() if a in wanted]
    start_the_catalog(session)


@pytest.fixture(scope="session")
def graded(course, tmp_path_factory, request):
    """The engine's class of known submissions, graded in one run when a test first asks."""
    return GradedClass(grading.copy_course(course, tmp_path_factory.mktemp("graded") / "course"),
                       request.config.stash.get(GRADED_ASSIGNMENTS, []))


class Mutants:
    """Every known submission of each assignment (the whole catalog), graded by the fast path
    (tools.mutation_grading: one process per assignment, as autograde scores them), for the assignments this
    run's tests need. The same interface as GradedClass.

    The catalog is graded in the background from the start (`start`, called once the tests are collected,
    as the lessons are: tests/conftest.py; not with `--lessons-inline`), one assignment's process at a time
    beside whatever runs, in a scratch course of its own: in the whole suite it fills the core that
    single-threaded tests, timeouts and browsers leave idle, and its tests, which run late, find it graded.
    A test that asks for an assignment no process has started grades it itself, and grades others while it
    waits for one running in the background, so that a run of the catalog's tests alone keeps a process per
    core busy (each spends its first 10 to 20 s importing and preparing on one core)."""

    def __init__(self, wanted: list[str], course: Path | None = None, catalogs: set[str] | None = None,
                 extras: dict[str, dict] | None = None):
        """`catalogs`: the assignments whose whole catalog is graded (default every one wanted); `extras`:
        assignment -> {student: Submission} graded with them (FAST_PATH_EXTRAS)."""
        catalogs = set(wanted) if catalogs is None else catalogs
        extras = extras or {}
        known = {name: (grading.known_submissions(name) if name in catalogs else [])
                 + list(extras.get(name, {}).values()) for name in wanted}
        self.known = known
        self.pending = sorted(known, key=lambda name: -len(known[name]))     # the largest catalogs first
        self.course = course
        self.results: dict[str, dict] = {}
        self.errors: dict[str, BaseException] = {}
        self.finished = {name: threading.Event() for name in known}
        self.lock = threading.Lock()
        self.course_made = threading.Event()
        self.scratch: Path | None = None
        self.running: threading.Thread | None = None
        if course is not None:
            self.course_made.set()

    # --- the background -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Grade the catalog in a thread of this process, one assignment at a time, in a scratch course."""
        self.running = threading.Thread(target=self._background, name="catalog-in-the-background", daemon=True)
        self.running.start()

    def _background(self) -> None:
        from tests import markers

        markers.BACKGROUND.active = True          # not charged to whichever test runs meanwhile
        try:
            self.scratch = Path(tempfile.mkdtemp(prefix="course-catalog-"))
            course = grading.make_course(self.scratch / "course")
            grading.generate_assignments(course, COURSE.assignments())
            self.course = course
        except BaseException as error:            # noqa: BLE001 (re-raised in the test that asks)
            self.errors = {name: error for name in self.finished}
            for event in self.finished.values():
                event.set()
            return
        finally:
            self.course_made.set()
        while (name := self._take("")) is not None:
            self._grade(name)

    def finish(self) -> None:
        if self.scratch is not None and all(event.is_set() for event in self.finished.values()):
            shutil.rmtree(self.scratch, ignore_errors=True)

    # --- what the tests ask -------------------------------------------------------------------------------

    def _take(self, wanted: str) -> str | None:
        """An assignment no process has started (`wanted` if it is one of them), now taken by the caller."""
        with self.lock:
            if not self.pending:
                return None
            name = wanted if wanted in self.pending else self.pending[0]
            self.pending.remove(name)
            return name

    def _grade(self, name: str) -> None:
        try:
            self.results[name] = mutation_grading.grade_known(name, self.known[name], workers=1, course=self.course)
        except BaseException as error:            # noqa: BLE001 (re-raised in the test that asks)
            self.errors[name] = error
        finally:
            self.finished[name].set()

    def grade(self, assignment: str) -> dict[str, tuple]:
        if assignment not in self.finished:       # a test asks for one the run did not plan: graded now
            with self.lock:
                self.known.setdefault(assignment, grading.known_submissions(assignment))
                self.finished.setdefault(assignment, threading.Event())
                self.pending.insert(0, assignment)
        self.course_made.wait()
        if not self.finished[assignment].is_set():
            # Every core not taken by the background grades what no process has started, this one first.
            background = self.running is not None and self.running.is_alive()
            helpers = max(1, (os.cpu_count() or 1) - background)
            with ThreadPoolExecutor(max_workers=helpers) as pool:
                for _ in range(helpers):
                    pool.submit(self._help, assignment)
            self.finished[assignment].wait()
        if assignment in self.errors:
            raise self.errors[assignment]
        return self.results[assignment]

    def _help(self, first: str) -> None:
        while (name := self._take(first)) is not None:
            self._grade(name)

    def scores(self, assignment: str, student: str) -> dict[str, tuple[float, float]]:
        return self.grade(assignment)[student][0]

    def feedback(self, assignment: str, student: str) -> nbformat.NotebookNode:
        return self.grade(assignment)[student][1]


MUTANTS = pytest.StashKey[Mutants]()


def start_the_catalog(session) -> None:
    """Start grading the catalog in the background when the selected tests need it (`--lessons-inline` keeps
    all background work off)."""
    wanted = session.config.stash.get(MUTANT_ASSIGNMENTS, [])
    if not wanted or session.config.getoption("collectonly") or session.config.getoption("lessons_inline"):
        return
    mutants = Mutants(wanted, catalogs=session.config.stash.get(FAST_PATH_CATALOGS, set()),
                      extras=session.config.stash.get(FAST_PATH_EXTRAS, {}))
    session.config.stash[MUTANTS] = mutants
    mutants.start()


def pytest_sessionfinish(session):
    mutants = session.config.stash.get(MUTANTS, None)
    if mutants is not None:
        mutants.finish()


@pytest.fixture(scope="session")
def mutants(course, request):
    """The catalog graded by the fast path (trusted code: no sandbox, no kernel per variant): the background's,
    or graded here when a test first asks."""
    stash = request.config.stash
    return stash.get(MUTANTS, None) or Mutants(stash.get(MUTANT_ASSIGNMENTS, []), course,
                                               stash.get(FAST_PATH_CATALOGS, set()), stash.get(FAST_PATH_EXTRAS, {}))


# --- stock nbgrader, the reference the engine is compared with ---------------------------------------------

STOCK_ASSIGNMENT = "01-layernorm"          # the cheapest to grade


def comparison_submissions() -> list[grading.Submission]:
    """A few known submissions of the cheapest assignment, all in the engine's sample (so the session's `graded`
    class holds them already): the master, the release, the first bug, the sample's alternative."""
    variants = {variant.student: variant for variant in grading.all_variants(STOCK_ASSIGNMENT)}
    sample = grading.engine_sample(STOCK_ASSIGNMENT)
    bug = next(s.student for s in sample if s.student in variants and variants[s.student].kind == "bug")
    alternative = next(s.student for s in sample if s.student in variants and variants[s.student].kind == "correct")
    chosen = {f"{STOCK_ASSIGNMENT}--solution", f"{STOCK_ASSIGNMENT}--release", bug, alternative}
    return [submission for submission in sample if submission.student in chosen]


@pytest.fixture(scope="session")
def stock(course, tmp_path_factory) -> dict[str, Path]:
    """comparison_submissions() graded by stock `nbgrader autograde`, in two copies of the course at once:
    student -> the course that graded them."""
    root = grading.copy_course(course, tmp_path_factory.mktemp("stock") / "course")
    return stock_nbgrader.autograde_in_shards(root, comparison_submissions(), workers=2)


def shown_errors(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What each graded cell tells the student: its grade id -> the error it shows ('' when none)."""
    return {cell.metadata.nbgrader["grade_id"]: grading.cell_error(notebook, cell.metadata.nbgrader["grade_id"])
            for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")}
