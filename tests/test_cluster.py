"""Grading a class on a real Dask cluster: `dask scheduler` and three `dask worker` processes over TCP.

The workers run from an empty folder, as on a lab machine: the grading package reaches them through a worker
plugin (they could import the checkout's too, since they share this environment; a test checks they do not),
the kit and the task bring the rest. The class mixes known submissions of the cheapest assignment (those
stock nbgrader grades for comparison: the master, the release, a catalog bug and an alternative) with hostile
ones from the robustness suite. One worker is killed (the whole `dask worker` process group, nanny included)
once the first result is in; the two left still keep both cores of a CI machine busy (with one left, the
run took twice as long beside an idle core). The run still grades every submission exactly once, and the
grades, comments and feedback equal the engine's on a local cluster (the session's `graded` class) and stock
nbgrader's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tests import attacks
from tests.grading_fixtures import STOCK_ASSIGNMENT as A, comparison_submissions, shown_errors
from autograder.classgrader import grade_class
from tools import grading
from tools.course import COURSE, Course

pytestmark = [pytest.mark.grading, pytest.mark.cluster]

CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]          # an alternative correct answer
SAMPLE_VARIANCE_BUG = grading.load_catalog(A)[0]
SAMPLE_VARIANCE = SAMPLE_VARIANCE_BUG.cells["layernorm"]
# These students answer `layernorm` only: a correct one earns FULL of the assignment's POINTS.
POINTS = sum(grading.points_by_answer(A).values())
FULL = grading.points_by_answer(A)["layernorm"]
SAMPLE_VARIANCE_SCORE = FULL - sum(grading.graded_cell_points(A)[cell][1] for cell in SAMPLE_VARIANCE_BUG.fails)


def answer(code: str) -> nbformat.NotebookNode:
    return grading.submission_from_release(A, {"layernorm": code})


HOSTILE = {
    "links-out": answer(CORRECT + attacks.LINK_GRADEBOOK),           # links to the gradebook, masters, others
    "reads-the-course": answer(CORRECT + attacks.READ_COURSE),       # looks for the course, .git, gradebooks
    "stops-the-grader": answer(CORRECT + attacks.STOP_GRADER),       # signals its parents
    "patch-allclose": answer(SAMPLE_VARIANCE + "\ntorch.allclose = lambda *args, **kwargs: True"),
}


WORKERS = 3             # one of them is killed mid-run
# The run's limits travel to the workers with the run (cluster.GradingEnvironment). A kernel that stops itself
# (stops-the-grader) holds its worker until the cell times out: 60 s by default, 15 s here. This class's cells
# take under a second, 8 s at a load of 4; at a load of 7 the master's first check once ran past 8 s.
LIMITS = {"COURSE_GRADING_CELL_TIMEOUT": "15"}


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen]


def stop(process: subprocess.Popen) -> None:
    """Kill a process started in its own session, with everything it started (a nanny's worker, kernels)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    dask = str(Path(sys.executable).with_name("dask"))
    scheduler_file = folder / "scheduler.json"
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"

    def start(*args: str, log: str) -> subprocess.Popen:
        with open(folder / log, "w") as handle:
            return subprocess.Popen([dask, *args], cwd=folder, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    scheduler = start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                      "--scheduler-file", str(scheduler_file), log="scheduler.log")
    workers = []
    try:
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        workers = [start("worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                         "--host", "127.0.0.1", "--name", f"lab-machine-{index}", log=f"worker{index}.log")
                   for index in range(WORKERS)]
        from distributed import Client

        with Client(address) as client:
            client.wait_for_workers(WORKERS, timeout=120)
        yield Cluster(address, scheduler, workers)
    finally:
        for process in [*workers, scheduler]:
            stop(process)


def kill_worker_after_first_result(course: Course, worker: subprocess.Popen, students: list[str], killed: list):
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if any(course.path("autograded", student, A).is_dir() for student in students):
            stop(worker)
            killed.append(worker.pid)
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster_class(cluster, course, tmp_path_factory):
    root = grading.copy_course(course, tmp_path_factory.mktemp("cluster-class") / "course")
    known = comparison_submissions()        # graded by the session's engine and by stock nbgrader too
    hostile = [grading.Submission(student, A, notebook) for student, notebook in HOSTILE.items()]
    grading.hand_in(root, known + hostile)
    students = [submission.student for submission in known + hostile]
    killed: list[int] = []
    killer = threading.Thread(target=kill_worker_after_first_result,
                              args=(Course(root), cluster.workers[0], students, killed), daemon=True)
    killer.start()
    summary = grade_class.grade_class(root, [A], scheduler=cluster.address, progress=False, env=LIMITS)
    killer.join(5)
    return root, summary, killed, known


def test_the_cluster_grades_every_submission_exactly_once_though_a_worker_died(cluster, cluster_class):
    root, summary, killed, known = cluster_class
    assert killed, "no worker was killed: the fault was not tested"
    graded = sorted(result["student"] for result in summary["results"])
    assert graded == sorted({*graded}) and len(graded) == len(known) + len(HOSTILE)
    assert not summary["failed"], summary["failed"]
    assert summary["scheduler"] == cluster.address
    from nbgrader.api import Gradebook

    with Gradebook(Course(root).db_url) as gradebook:
        submissions = [s.student.id for s in gradebook.assignment_submissions(A)]
    assert sorted(submissions) == graded


def test_the_workers_grade_with_the_package_the_client_sent(cluster, cluster_class):
    """A running cluster's machines need only the pinned environment: each worker grades with the copy of the
    grading package that cluster.CourseCode unpacked into its own folder, not with one it had installed
    (here the workers could import the checkout's: they share the test's environment)."""
    from distributed import Client

    def code_location(dask_worker) -> tuple[str | None, str]:
        """Where the worker's grading package was imported from, and the worker's own folder (defined here, so
        that it travels by value: the workers cannot import the tests)."""
        import sys

        return getattr(sys.modules.get("autograder"), "__file__", None), str(dask_worker.local_directory)

    with Client(cluster.address) as client:
        places = client.run(code_location)
    assert places, "no worker left to ask"
    for imported, folder in places.values():
        assert imported is not None and imported.startswith(folder), (imported, folder)


def test_the_cluster_gives_the_grades_comments_and_feedback_of_the_local_engine(cluster_class, graded):
    root, _, _, known = cluster_class
    for submission in known:
        student = submission.student
        assert grading.cell_scores(root, A, student) == graded.scores(A, student), student
        ours = grading.autograded_notebook(root, A, student)
        assert shown_errors(ours) == shown_errors(graded.feedback(A, student)), student
        assert comments(root, student) == comments(graded.course, student), student


def test_the_cluster_gives_what_stock_nbgrader_gives(cluster_class, stock):
    root, _, _, _ = cluster_class
    for student, stock_course in stock.items():
        assert grading.cell_scores(root, A, student) == grading.cell_scores(stock_course, A, student), student
        assert comments(root, student) == comments(stock_course, student), student
        assert (shown_errors(grading.autograded_notebook(root, A, student))
                == shown_errors(grading.autograded_notebook(stock_course, A, student))), student


def comments(course: Path, student: str) -> dict[str, str | None]:
    from nbgrader.api import Gradebook

    notebook = COURSE.master_notebook(A).stem
    with Gradebook(Course(course).db_url) as gradebook:
        submitted = gradebook.find_submission_notebook(notebook, A, student)
        return {comment.name: comment.auto_comment for comment in submitted.comments}


def total(course: Path, student: str) -> tuple[float, float]:
    scores = grading.cell_scores(course, A, student)
    return sum(score for score, _ in scores.values()), sum(top for _, top in scores.values())


def test_the_sandbox_holds_on_the_workers(cluster_class):
    root, _, _, _ = cluster_class
    # Links a kernel made never reach the autograded folder, and the answer still earns its marks.
    folder = Course(root).path("autograded", "links-out", A)
    assert sorted(path.name for path in folder.iterdir()) == [COURSE.master_notebook(A).name]
    assert total(root, "links-out") == (FULL, POINTS)
    # A kernel on a worker sees nothing of the course, its checkout or other kernels.
    printed = "".join(out.get("text", "") for cell in grading.autograded_notebook(root, A, "reads-the-course").cells
                      for out in cell.get("outputs", []))
    assert "found 0 git 0" in printed, printed
    # Signalling its parents only stops the kernel itself (PID 1 of its own namespace): graded, the class goes on.
    assert "kernel died" in " ".join(notebook_flags(root, "stops-the-grader"))
    # Gaming the checks earns nothing beyond the honest answer's score, and is flagged.
    assert total(root, "patch-allclose")[0] <= SAMPLE_VARIANCE_SCORE
    assert "tampering detected" in " ".join(notebook_flags(root, "patch-allclose"))


def notebook_flags(course: Path, student: str) -> list[str]:
    return grading.grader_flags(grading.autograded_notebook(course, A, student))
