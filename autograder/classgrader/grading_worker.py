"""The task a grading worker runs: one student's submission, graded by nbgrader's own Autograde converter.

A Dask worker (`dask worker`, or a LocalCluster's) imports this module for its first task (a worker of a
running cluster gets the package from the client: cluster.CourseCode). It unpacks the kit
(autograder/classgrader/grading_kit.py) once, loads the course's nbgrader_config.py from it once, as `nbgrader
autograde` would, and then, for each task: writes the student's files where `nbgrader collect` puts them,
grades them with the course's pipeline but for its last steps, nbgrader's gradebook writers (the same
sanitizing, sandboxed execution and verdicts as the command line), and returns the autograded folder and
the submission's time as nbgrader read it. The client runs the writers on that folder (record.py): a
worker never writes the course's gradebook. (nbgrader's converter still needs a gradebook to read the
assignment's cells from and to note the submission in: a fresh copy of the kit's, thrown away.)

A task changes nothing of its process: the grading environment (limits, threads, PATH) is the worker's own
from its start (cluster.py), the configuration is read from the kit by its path. Tasks run one at a time in
a worker process (a lock makes sure of it even with `--nthreads` above 1), since they share the kit's
folders. A task that runs past its time limit has its grading kernel stopped (the notebook's own deadline
normally stops it first).
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.grading_environment import grading_variables, use_limits
from autograder.classgrader.grading_kit import CONFIGURATION, KIT_GRADEBOOK, read_folder, unpack_kit, write_folder
from autograder.limits import Limits
from autograder.classgrader.record import grading_pipeline, without_writers

LOCAL_GRADEBOOK = "worker-gradebook.db"

_lock = threading.Lock()
_apps: dict[tuple, object] = {}              # (kit folder, grading variables) -> a configured AutogradeApp


@dataclass
class Outcome:
    """One graded submission: what the worker returns, and the client's record of it in the run's summary."""
    assignment: str
    student: str
    success: bool
    seconds: float
    worker: str                   # the Dask worker's address ("" when no worker finished it)
    error: str = ""
    timestamp: object = None      # the submission's time (a datetime) as nbgrader read it, or None
    autograded: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)   # where `seconds` went (guarded_execute.LAST_TIMES)

    def summary(self) -> dict:
        """The outcome in the run's summary: everything but the time and files, which go to the course."""
        return {key: value for key, value in asdict(self).items() if key not in ("timestamp", "autograded")}


def worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def load_app(root: Path):
    """nbgrader's AutogradeApp with the kit's configuration, loaded once per kit and grading environment (the
    configuration reads the limits and the sandbox setting when it loads), from the kit's nbgrader_config.py by
    its path (not from the current folder, as the nbgrader command would)."""
    key = (str(root), tuple(sorted(grading_variables().items())))
    if key in _apps:
        return _apps[key]
    from nbgrader.apps.autogradeapp import AutogradeApp

    class KitAutograde(AutogradeApp):
        load_cwd_config = False          # the kit's configuration only, by its path

        def init_syspath(self) -> None:
            """nbgrader puts the current folder on sys.path for plugins kept beside the configuration; the
            kit's plugins are this package, so the worker's import path stays as it is."""

    app = KitAutograde(config_file=str(root / "autograder" / CONFIGURATION))
    app.initialize([])
    # Once the last cell has run, every output is in the notebook: stop the kernel at once.
    app.config.Execute.shutdown_kernel = "immediate"
    # The converter reads the assignment's cells from this worker's own gradebook and notes the submission
    # there; the gradebook's writers run on the client, over the autograded folder (record.py).
    app.coursedir.db_url = f"sqlite:///{root / 'autograder' / LOCAL_GRADEBOOK}"
    app.config.Autograde.autograde_preprocessors = without_writers(grading_pipeline(app.config))
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
    """This worker's own folder for kits: its Dask scratch folder, which two workers never share and Dask
    removes when the worker closes (one killed outright leaves it, as Dask leaves any worker's)."""
    from distributed import get_worker

    return Path(get_worker().local_directory) / "course-grading"


def grade_submission(kit_data: bytes, digest: str, assignment: str, student: str,
                     files: dict[str, tuple[bytes, int]], timeout: float | None = None,
                     not_sent: dict[str, int] | None = None) -> Outcome:
    """Grade `student`'s `assignment` (its submitted folder's files, and the names and sizes of those the
    packer left out) with the kit's configuration."""
    with _lock:
        return _grade(unpack_kit(kit_data, digest, work_folder()), assignment, student, files, timeout, not_sent)


@functools.cache
def converter_class():
    """nbgrader's Autograde converter, telling Intake (through each notebook's resources) which files the packer
    left out: a channel the student cannot write, unlike any file in the submitted folder."""
    from nbgrader.converters import Autograde

    from autograder.plugins.intake import NOT_SENT

    class WorkerAutograde(Autograde):
        not_sent: dict[str, int] = {}

        def init_single_notebook_resources(self, notebook_filename):
            resources = super().init_single_notebook_resources(notebook_filename)
            resources["nbgrader"][NOT_SENT] = dict(self.not_sent)
            return resources

    return WorkerAutograde


def _grade(root: Path, assignment, student, files, timeout, not_sent=None) -> Outcome:
    import nbformat
    from nbgrader.utils import rmtree, temp_attrs

    from autograder.bounded import autograded_limit, notebook_limit
    from autograder.plugins.guarded_execute import LAST_TIMES

    LAST_TIMES.clear()                     # a notebook refused at intake runs nothing
    started = time.perf_counter()
    app = load_app(root)
    # This kit's limits (a worker may have loaded another course's configuration since).
    use_limits(Limits(config=app.config).configured())
    coursedir = app.coursedir
    for step in (coursedir.submitted_directory, coursedir.autograded_directory):
        if (root / step).exists():
            rmtree(str(root / step))
    shutil.copyfile(root / "autograder" / KIT_GRADEBOOK, root / "autograder" / LOCAL_GRADEBOOK)
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
    write_folder(submitted, files)
    not_sent = {name: size for name, size in (not_sent or {}).items() if name not in files}
    # A notebook the packer did not send (over its limit) still has to be found by nbgrader, which grades it:
    # an empty one stands in, and Intake, told its size, grades the release in its place.
    empty = nbformat.writes(nbformat.v4.new_notebook()).encode()
    write_folder(submitted, {name: (empty, 0o644) for name, size in not_sent.items()
                             if name.endswith(".ipynb") and "/" not in name and size > notebook_limit()})

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
            converter = converter_class()(coursedir=app.coursedir, parent=app)
            converter.not_sent = not_sent
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
    # nbgrader's own reading of timestamp.txt (intake.bound_timestamp has set aside one that is not a time).
    timestamp = coursedir.get_existing_timestamp(str(submitted))
    graded = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
    oversized = sorted(path.name for path in graded.glob("*.ipynb")
                       if path.is_file() and path.stat().st_size > autograded_limit()) if graded.is_dir() else []
    if oversized and not error:
        # Refused here, before the client is sent it (the client refuses it too: record.write_grades).
        error = f"Refused: {', '.join(oversized)} came out larger than any grader writes"
    autograded = read_folder(graded) if not error and graded.is_dir() else {}
    stages = {name: round(time_s, 3) for name, time_s in LAST_TIMES.items()}
    return Outcome(assignment, student, not error, seconds, worker_name(), error, timestamp, autograded, stages)
