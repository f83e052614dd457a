"""Session fixtures for the grading tests: a scratch course, and a class graded once in it."""

from __future__ import annotations

import copy
import os
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
    """Known submissions of each assignment graded by the course's grading engine (autograder.grade_class, as
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
        session.config.stash[key] = [a for a in COURSE.assignments() if a in wanted]


@pytest.fixture(scope="session")
def graded(course, tmp_path_factory, request):
    """The engine's class of known submissions, graded in one run when a test first asks."""
    return GradedClass(grading.copy_course(course, tmp_path_factory.mktemp("graded") / "course"),
                       request.config.stash.get(GRADED_ASSIGNMENTS, []))


@dataclass
class Mutants:
    """Every known submission of each assignment (the whole catalog), graded by the fast path
    (tools.mutation_grading: one process per assignment, as autograde scores them). The first test that
    asks has every assignment this run's tests need graded, one process per core side by side, each
    grading one submission at a time (the largest catalogs first): a process spends its first 10 to 20 s
    importing and preparing on one core, which another assignment's process fills. The same interface as
    GradedClass."""

    course: Path                              # the scratch course whose masters and releases the engine uses
    wanted: list[str] = field(default_factory=list)      # the assignments this run's tests need
    results: dict[str, dict] = field(default_factory=dict)

    def grade(self, assignment: str) -> dict[str, tuple]:
        if assignment not in self.results:
            from concurrent.futures import ThreadPoolExecutor

            known = {name: grading.known_submissions(name) for name in dict.fromkeys([assignment, *self.wanted])
                     if name not in self.results}
            batch = sorted(known, key=lambda name: -len(known[name]))
            with ThreadPoolExecutor(max_workers=min(len(batch), os.cpu_count() or 1)) as pool:
                graded = pool.map(lambda name: mutation_grading.grade_known(
                    name, known[name], workers=1, course=self.course), batch)
                self.results.update(zip(batch, graded))
        return self.results[assignment]

    def scores(self, assignment: str, student: str) -> dict[str, tuple[float, float]]:
        return self.grade(assignment)[student][0]

    def feedback(self, assignment: str, student: str) -> nbformat.NotebookNode:
        return self.grade(assignment)[student][1]


@pytest.fixture(scope="session")
def mutants(course, request):
    """The catalog graded by the fast path (trusted code: no sandbox, no kernel per variant)."""
    return Mutants(course, request.config.stash.get(MUTANT_ASSIGNMENTS, []))


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
