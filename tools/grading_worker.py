"""The task a grading worker runs: one student's submission, graded by nbgrader's own Autograde converter.

A Dask worker (`dask worker`, or a LocalCluster's) imports this module for its first task (a remote
worker gets it from the client with `Client.upload_file`). It unpacks the kit (tools/grading_kit.py) once,
loads the course's nbgrader_config.py from it once, as `nbgrader autograde` would, and then, for each task: writes the student's files where `nbgrader
collect` puts them, grades them into a fresh copy of the kit's gradebook (the same sanitizing, sandboxed
execution and scoring as the command line) and returns the rows and the autograded folder. It never
writes the course's gradebook: the client does.

Tasks run one at a time in a worker process (a lock makes sure of it even with `--nthreads` above 1): a
task sets the process's environment and working folder while it grades. A task that runs past its time
limit has its grading kernel stopped (the notebook's own deadline normally stops it first).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tools.course import Course, tool_env
from tools.grading_kit import KIT_GRADEBOOK, SubmissionRows, read_folder, read_rows, unpack_kit, write_folder

WORKER_LOG = "COURSE_GRADING_WORKER_LOG"     # set by the client for the workers of a local cluster
LOCAL_GRADEBOOK = "worker-gradebook.db"

_lock = threading.Lock()
_apps: dict[tuple, object] = {}              # (kit digest, environment) -> a configured AutogradeApp
_logging_to: str | None = None


@dataclass
class Outcome:
    """One graded submission, as the worker returns it to the client."""
    assignment: str
    student: str
    success: bool
    seconds: float
    worker: str
    error: str = ""
    rows: SubmissionRows | None = None
    autograded: dict[str, tuple[bytes, int]] = field(default_factory=dict)


def worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def log_to_file() -> None:
    """A local cluster's workers write into the course's log, not onto the instructor's progress bar."""
    global _logging_to
    path = os.environ.get(WORKER_LOG)
    if path and _logging_to != path:
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(handle, 1)
        os.dup2(handle, 2)
        _logging_to = path


def load_app(root: Path, key: tuple):
    """nbgrader's AutogradeApp with the kit's configuration, loaded once per kit and environment."""
    if key in _apps:
        return _apps[key]
    # The configuration's plugins are imported from the kit's autograder/ folder: forget any loaded from an
    # older kit, so a worker that outlives a run grades the next one with the next one's code.
    plugins = {path.stem for path in (root / "autograder").glob("*.py")}
    for name in plugins & set(sys.modules):
        del sys.modules[name]
    os.chdir(root / "autograder")                  # where nbgrader reads nbgrader_config.py

    from nbgrader.apps.autogradeapp import AutogradeApp

    app = AutogradeApp()
    app.initialize([])
    # Once the last cell has run, every output is in the notebook: stop the kernel at once.
    app.config.Execute.shutdown_kernel = "immediate"
    # Grades go to this worker's own gradebook; the client copies them into the course's.
    app.coursedir.db_url = f"sqlite:///{root / 'autograder' / LOCAL_GRADEBOOK}"
    _apps[key] = app
    return app


def stop_kernels() -> None:
    """Kill this process's grading kernels (the sandbox launcher and what runs inside it)."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass


def work_folder() -> Path:
    """This worker process's own folder for kits: two workers on one machine never share one. It is
    removed when the worker exits (a worker killed outright leaves it behind, in the temporary folder)."""
    folder = Path(tempfile.gettempdir()) / f"course-grading-{os.getuid()}-{os.getpid()}"
    if not folder.exists():
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def grade_submission(kit_data: bytes, digest: str, assignment: str, student: str,
                     files: dict[str, tuple[bytes, int]], env: dict[str, str] | None = None,
                     threads: int | None = None, timeout: float | None = None) -> Outcome:
    """Grade `student`'s `assignment` (its submitted folder's files) with the kit's configuration."""
    with _lock:
        log_to_file()
        saved_environ, saved_cwd = dict(os.environ), os.getcwd()
        os.environ.update(tool_env(env, threads))
        try:
            root = unpack_kit(kit_data, digest, work_folder())
            return _grade(root, assignment, student, files, env or {}, timeout)
        finally:
            os.environ.clear()
            os.environ.update(saved_environ)
            os.chdir(saved_cwd)


def _grade(root: Path, assignment, student, files, env, timeout) -> Outcome:
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde
    from nbgrader.utils import rmtree, temp_attrs

    started = time.perf_counter()
    course = Course(root)
    app = load_app(root, (str(root), tuple(sorted(env.items()))))
    for step in ("submitted", "autograded"):
        if course.folder(step).exists():
            rmtree(str(course.folder(step)))
    shutil.copyfile(root / "autograder" / KIT_GRADEBOOK, root / "autograder" / LOCAL_GRADEBOOK)
    write_folder(course.path("submitted", student, assignment), files)

    error = ""
    overran = threading.Event()

    def overrun() -> None:
        overran.set()
        stop_kernels()

    timer = threading.Timer(timeout, overrun) if timeout else None
    try:
        if timer:
            timer.start()
        with temp_attrs(app.coursedir, assignment_id=assignment, student_id=student):
            converter = Autograde(coursedir=app.coursedir, parent=app)
            # Always: a resubmission is graded afresh, like `nbgrader autograde --force`.
            converter.force = True
            converter.start()
    except BaseException as exc:     # nbgrader has already removed the failed output and logged why
        error = f"{type(exc).__name__}: {exc}"
        app.log.error("grade_class: %s/%s failed:\n%s", assignment, student, traceback.format_exc())
    finally:
        if timer:
            timer.cancel()
    seconds = round(time.perf_counter() - started, 3)
    if overran.is_set():
        error = f"grading took longer than {timeout:.0f} s; its kernel was stopped ({error or 'no error'})"
    with Gradebook(app.coursedir.db_url) as gradebook:
        rows = read_rows(gradebook, assignment, student)
    graded = course.path("autograded", student, assignment)
    autograded = read_folder(graded) if not error and graded.is_dir() else {}
    return Outcome(assignment, student, not error, seconds, worker_name(), error, rows, autograded)
