"""One submission's faults stay its own under the class-grading command (autograder.classgrader.grade_class).

- A kernel that floods the grader with one signed message carrying a hundred large buffers: the message is
  dropped where it enters the grader (autograder/sandbox/kernel_relay.py), the flooder is flagged, the worker's
  memory stays bounded, and the classmates grading beside it are graded correctly.
- A submission whose grading kills its worker every time (simulated from outside, as the robustness tests
  kill workers: a kernel in the sandbox cannot reach its worker) is reported failed with the reason, and the
  classmates queued on the same worker, which Dask gives up on with it, are graded again and correctly.
- A worker process killed from outside while it grades (out of memory, an operator's kill) loses nothing:
  its nanny starts a new one and every submission is graded exactly once.
- A run whose cluster lost every worker stops with a message and a non-zero exit instead of waiting.

Assignment 1's small notebooks keep it cheap.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from tests.test_cluster import stop
from tests.worker_processes import local_workers, peak_kb
from autograder.classgrader import grade_class
from tools import grading
from tools.course import COURSE, Course, tool_env

A = "01-layernorm"
MASTER = nbformat.read(COURSE.master_notebook(A), as_version=4)      # full marks
RELEASE = nbformat.read(COURSE.release_notebook(A), as_version=4)    # no answer: zero

# One message as the kernel's own session signs it, followed by a hundred buffers of 8 MB (the same block,
# so the kernel itself holds only one): 1.25 GB the grader would have to hold at once, more than the bound
# on a worker's whole memory below, whatever the worker held before.
FLOOD = '''
kernel = get_ipython().kernel
block = b"x" * (8 * 2**20)
kernel.session.send(kernel.iopub_socket, "display_data", {"data": {"text/plain": "flood"}, "metadata": {}},
                    buffers=[block] * 160)
'''
FLOOD_BYTES = 160 * 8 * 2**20
# Messages within the byte limit whose JSON decodes to far more: `[], ` is 4 bytes on the wire and a list of
# 64 in the grader. Two of about 7 MB (under today's 8 MB limit: only the count of values stops them) and two
# of 30 MB (under the 32 MB the limit was), all answering the running cell, so the grader keeps their outputs:
# about 1.5 GB decoded if they got through.
JSON_BOMB = '''
kernel = get_ipython().kernel
for count in (1_800_000, 1_800_000, 7_800_000, 7_800_000):
    kernel.session.send(kernel.iopub_socket, "display_data",
                        {"data": {"text/plain": "bomb"}, "metadata": {"x": [[]] * count}},
                        parent=kernel.get_parent("shell"))
'''
WORKER_MEMORY_BOUND = 2**30          # a grading worker's peak, interpreter and libraries included

# The guard's reply is the kernel's text, parsed by the grader after every test cell: a reply of 8 MB of `0,`
# (within the message limits: one string) took the grader 4 GB and minutes per cell, outside every limit of
# the submission's. Put into the guard's own list of broken rules, so no watched function changes.
BIG_GUARD_REPLY = '''
import sys as _sys
_report = _sys.modules["_course_guard"].report
_free = dict(zip(_report.__code__.co_freevars, (cell.cell_contents for cell in _report.__closure__)))
class _Big:
    def __repr__(self):
        return "{" + "0," * 4_150_000 + "}"
_free["broken"].append(_Big())
'''

# An execution count is the kernel's to send: one of markup would be written unescaped as the cell's prompt in
# the formgrader's and feedback's templates (nbconvert's validation failed the whole notebook instead).
MARKUP_PROMPT = '''
kernel = get_ipython().kernel
_prompt = "<img src=x onerror=alert(1)>"
kernel.session.send(kernel.iopub_socket, "execute_input", {"code": "", "execution_count": _prompt},
                    parent=kernel.get_parent("shell"))
kernel.session.send(kernel.iopub_socket, "execute_result",
                    {"data": {"text/plain": "1"}, "metadata": {}, "execution_count": _prompt},
                    parent=kernel.get_parent("shell"))
'''


def master_with(code: str) -> nbformat.NotebookNode:
    """The master's answers, with `code` run at the end of the first answer cell."""
    notebook = copy.deepcopy(MASTER)
    cell = next(cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("solution"))
    cell.source += "\n" + code
    return notebook


def total(course: Path, student: str) -> tuple[float, float]:
    scores = grading.cell_scores(course, A, student)
    return sum(score for score, _ in scores.values()), sum(top for _, top in scores.values())


def flags(course: Path, student: str) -> str:
    return " ".join(grading.grader_flags(grading.autograded_notebook(course, A, student)))


def watch_workers(peaks: dict[int, int], done: threading.Event) -> None:
    """Record the peak memory of every Dask worker process this test process started (a local cluster's)."""
    while not done.is_set():
        for worker in local_workers():
            peaks[worker.pid] = max(peaks.get(worker.pid, 0), peak_kb(worker.pid) * 2**10)
        done.wait(0.2)


def is_launcher(process: psutil.Process) -> bool:
    """A sandbox launcher: sandboxed_kernel.py while it starts a warm kernel (bwrap is its child), or the bwrap it
    became by exec for a cold one (whose own bwrap child, inside the PID namespace, is not a launcher). Not the
    checker's bwrap, which its grading process (or this one, for the checker's own tests) started."""
    command = " ".join(process.cmdline())
    if "autograder.checker.process" in command:
        return False
    return process.name() == "bwrap" or "sandboxed_kernel.py" in command


def launchers(root: psutil.Process) -> list[psutil.Process]:
    """The sandbox launchers under `root`, warm or cold; a launcher's parent is the grading worker."""
    found = []
    for process in root.children(recursive=True):
        try:
            if is_launcher(process) and not is_launcher(process.parent()):
                found.append(process)
        except psutil.Error:
            pass
    return found


@pytest.mark.grading
def test_a_message_flood_is_dropped_flagged_and_costs_no_classmate(course, tmp_path_factory):
    root = grading.copy_course(course, tmp_path_factory.mktemp("flood") / "course")
    # The flooder first, so that a classmate waits behind it on the same worker.
    students = {"a-flooder": master_with(FLOOD), "a-json-bomb": master_with(JSON_BOMB),
                "a-big-guard-reply": master_with(BIG_GUARD_REPLY), "a-markup-prompt": master_with(MARKUP_PROMPT),
                "honest": MASTER, "honest-twin": MASTER, "no-answer": RELEASE}
    for student, notebook in students.items():
        grading.submit(root, student, A, notebook)
    peaks: dict[int, int] = {}
    done = threading.Event()
    watcher = threading.Thread(target=watch_workers, args=(peaks, done), daemon=True)
    watcher.start()
    try:
        summary = grade_class.grade_class(root, [A], workers=2, progress=False)
    finally:
        done.set()
        watcher.join(5)
    assert not summary["failed"], summary["failed"]
    assert sorted(result["student"] for result in summary["results"]) == sorted(students)
    for flooder in ("a-flooder", "a-json-bomb"):
        assert "message limit reached" in flags(root, flooder), flooder
        printed = json.dumps(grading.autograded_notebook(root, A, flooder).cells)
        assert "the grader dropped them" in printed            # the student sees why, in the cell
    # An oversized reply is not read: the guard gave no answer, which counts as tampering. On an assignment whose
    # checks run in the checker (this one), the flag is the instructor's information and the checks' scores stand.
    assert "tampering detected" in flags(root, "a-big-guard-reply")
    from autograder.course import Course as GradingCourse

    from autograder.plugins.checker_link import runs_in_checker

    checked = runs_in_checker(A, GradingCourse(root).grading_config().GuardedExecute.checked)
    assert (total(root, "a-big-guard-reply")[0] == total(root, "honest")[0]) if checked else (
        total(root, "a-big-guard-reply")[0] < total(root, "honest")[0])
    prompted = grading.autograded_notebook(root, A, "a-markup-prompt")
    counts = [cell.get("execution_count") for cell in prompted.cells if cell.cell_type == "code"]
    counts += [out.get("execution_count") for cell in prompted.cells for out in cell.get("outputs", [])
               if "execution_count" in out]
    assert all(count is None or isinstance(count, int) for count in counts), counts
    assert total(root, "a-markup-prompt") == total(root, "honest")
    full = total(root, "honest")[1]
    for student in ("honest", "honest-twin"):
        assert total(root, student) == (full, full), student
        assert "message limit" not in flags(root, student), student
    assert total(root, "no-answer") == (0.0, full)
    assert peaks, "no grading worker was watched"
    assert max(peaks.values()) < WORKER_MEMORY_BOUND < FLOOD_BYTES, peaks


def kill_the_killers_worker(offender: str, killed: list, done: threading.Event) -> None:
    """Each time the offender's grading kernel starts (its launcher works in the offender's folder), SIGKILL
    the worker process that started it, as if the submission had made it run out of memory."""
    while not done.is_set():
        for launcher in launchers(psutil.Process()):
            try:
                if f"/{offender}/" in launcher.cwd() + "/":
                    worker = launcher.parent()
                    worker.kill()
                    killed.append(worker.pid)
            except psutil.Error:
                pass
        done.wait(0.2)


@pytest.mark.grading
def test_a_submission_that_kills_its_worker_fails_alone_and_every_classmate_is_graded(course, tmp_path_factory):
    import dask

    root = grading.copy_course(course, tmp_path_factory.mktemp("killer") / "course")
    offender = "a-kills-its-worker"       # first in the queue, so a classmate waits behind it on its worker
    students = {offender: MASTER, "honest": MASTER, "honest-twin": MASTER, "no-answer": RELEASE}
    for student, notebook in students.items():
        grading.submit(root, student, A, notebook)
    killed: list[int] = []
    done = threading.Event()
    killer = threading.Thread(target=kill_the_killers_worker, args=(offender, killed, done), daemon=True)
    killer.start()
    try:
        # Dask gives up on a task after one worker death beyond allowed-failures: 1 keeps the test short.
        with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
            summary = grade_class.grade_class(root, [A], workers=2, progress=False)
    finally:
        done.set()
        killer.join(5)
    assert len(killed) >= 4, killed        # twice among the class, twice alone
    failed = {failure["student"]: failure["error"] for failure in summary["failed"]}
    assert list(failed) == [offender], failed
    assert "died each time" in failed[offender] and "nothing else to grade" in failed[offender]
    assert sorted(result["student"] for result in summary["results"]) == sorted(students)
    full = total(root, "honest")[1]
    for student in ("honest", "honest-twin"):
        assert total(root, student) == (full, full), student
    assert total(root, "no-answer") == (0.0, full)
    assert not Course(root).path("autograded", offender, A).exists()


def kill_a_grading_worker_once(course: Course, students: list[str], killed: list, done: threading.Event) -> None:
    """Once one of `students` is graded (whichever the scheduler ran first), SIGKILL the worker process whose
    grading kernel runs next. Stops when `done` is set, so it never outlives its test."""
    def graded_any() -> bool:
        return any(course.path("autograded", student, A).is_dir() for student in students)

    while not done.is_set() and not graded_any():
        done.wait(0.2)
    while not done.is_set():
        try:
            running = launchers(psutil.Process())
            if running:
                worker = running[0].parent()
                worker.kill()
                killed.append(worker.pid)
                return
        except psutil.Error:        # a process ended while we looked: look again
            pass
        done.wait(0.2)


@pytest.mark.grading
def test_a_grading_worker_that_dies_loses_nothing(course, tmp_path_factory):
    """A worker process killed from outside (out of memory, an operator's kill) while it grades: Dask's
    nanny starts a new one, the scheduler runs its task again, and every submission is graded exactly once."""
    root = tmp_path_factory.mktemp("dying-worker") / "course"
    grading.copy_course(course, root)
    grading.submit(root, "first", A, MASTER)
    # a kernel that lives a few seconds longer, so the killer always finds one running
    grading.submit(root, "slow", A, master_with("import time\ntime.sleep(3)"))
    grading.submit(root, "third", A, MASTER)
    students = ["first", "slow", "third"]
    killed: list[int] = []
    done = threading.Event()
    killer = threading.Thread(target=kill_a_grading_worker_once, args=(Course(root), students, killed, done),
                              daemon=True)
    killer.start()
    try:
        summary = grade_class.grade_class(root, [A], workers=1, progress=False)
    finally:
        done.set()
        killer.join(5)
    assert killed, "no grading worker was killed: the test did not test anything"
    assert sorted(r["student"] for r in summary["results"]) == students
    assert not summary["failed"], [(failure["student"], failure["error"]) for failure in summary["failed"]]
    full = total(root, "first")[1]
    for student in students:
        assert total(root, student) == (full, full), student


@pytest.mark.grading
@pytest.mark.cluster
def test_a_run_whose_workers_are_all_gone_stops_with_a_message(course, tmp_path_factory):
    """A `dask scheduler` with one `dask worker`; the worker (its nanny included) is killed as soon as it
    starts grading. The command says so and exits non-zero within its --worker-wait, instead of waiting."""
    folder = tmp_path_factory.mktemp("no-worker")
    root = grading.copy_course(course, folder / "course")
    grading.submit(root, "honest", A, MASTER)
    dask = str(Path(sys.executable).with_name("dask"))
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}

    def start(*args: str, log: str) -> subprocess.Popen:
        with open(folder / log, "w") as handle:
            return subprocess.Popen([dask, *args], cwd=folder, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    scheduler_file = folder / "scheduler.json"
    scheduler = start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                      "--scheduler-file", str(scheduler_file), log="scheduler.log")
    worker = None
    done = threading.Event()
    try:
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        worker = start("worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                       "--host", "127.0.0.1", log="worker.log")
        from distributed import Client

        with Client(address) as client:
            client.wait_for_workers(1, timeout=120)

        def kill_once_grading() -> None:
            while not done.is_set():
                if launchers(psutil.Process(worker.pid)):
                    stop(worker)
                    return
                done.wait(0.2)

        killer = threading.Thread(target=kill_once_grading, daemon=True)
        killer.start()
        wait = 5
        started = time.monotonic()
        command = subprocess.run([sys.executable, "-m", "autograder.classgrader", A, "--course", str(root),
                                  "--scheduler", address, "--worker-wait", str(wait), "--no-progress"],
                                 capture_output=True, text=True, env=tool_env(), timeout=300)
        seconds = time.monotonic() - started
    finally:
        done.set()
        for process in [worker, scheduler]:
            if process is not None:
                stop(process)
    assert worker.returncode is not None
    assert command.returncode != 0, command.stdout + command.stderr
    assert "no grading worker left" in command.stderr, command.stderr
    assert "rerun to grade the 1 left" in command.stderr, command.stderr
    # The command waits 5 s for a worker to come back; the run takes about 20 s on two idle cores and about
    # twice that at a load of 4. 240 s is the bound a hang (no worker, waiting for ever) would break.
    assert seconds < 240, seconds
