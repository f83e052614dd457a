"""The course's grading engine: autograde a whole class with nbgrader, on a Dask cluster of any size.

    python -m tools.grade_class 01-layernorm                 # every submission of one assignment
    python -m tools.grade_class 01-layernorm 02-mlp --workers 4
    python -m tools.grade_class all --force                  # every assignment, regrading everyone
    python -m tools.grade_class all --scheduler tcp://grader:8786    # on a running Dask cluster

An nbgrader-style application (`GradeClassApp`, traitlets configuration): its options can also be set in
`autograder/nbgrader_config.py`, e.g. `c.GradeClassApp.workers = 4`; `--help-all` lists them. The
instructors' command, the test suite, the mutation report and the benchmarks all grade through it.

Run it from the repository root; it grades the course this file belongs to (`--course ROOT` for another copy):
submissions in `autograder/submitted/<student>/<assignment>/`, results into the course's gradebook (any
`db_url` nbgrader accepts: the SQLite file, or a shared PostgreSQL server), `autograder/autograded/` and
(with `generate_feedback` afterwards) `autograder/feedback/`, exactly where `nbgrader autograde` puts them.

Each submission is one Dask task. Without `--scheduler` the command starts a local cluster sized to the
machine (one single-threaded worker process per core; each grading kernel gets `cores / workers` threads).
The client packs what workers need once (tools/grading_kit.py: the grading configuration, the masters and
releases, the assignments' definitions), sends each task the student's files, and a worker grades them
with nbgrader's own Autograde converter, exactly as `nbgrader autograde` does, in the bubblewrap sandbox
(tools/grading_worker.py). Workers share no file system with the client and write nothing of the course:
this process is the only writer of the gradebook and of `autograded/`, so nothing needs merging and a
SQLite gradebook never sees two writers.

Faults: a worker that dies mid-task (killed, out of memory, machine gone) loses nothing; the scheduler runs
its task again on another worker, and a result is written once however often its task ran. Dask gives up
on a task once `distributed.scheduler.allowed-failures` workers (3 by default) died while it was on them,
waiting or running: a classmate queued behind a submission that kills its worker dies with it. So such a
submission is graded again at the end of the run, alone on the cluster, where a worker that dies can only
have died of it: only a submission that kills its worker then too is reported failed, with the reason.
A submission that runs past its time limit has its kernel stopped and is reported failed with the reason.
A run never waits for a cluster with no worker: after `--worker-wait` seconds without one (all died, or a
remote scheduler lost them) it stops with a message and a non-zero exit, keeping what it graded.

Nothing is lost if a run is interrupted: a submission counts as graded once the gradebook records it and
its autograded notebook holds executed cells, so a rerun skips every student finished before the
interruption and grades the rest. A newer submission (the timestamp.txt in `submitted/`, later than the
time the gradebook recorded) is regraded, as nbgrader does; `--force` regrades everyone. The workers'
logs (of a local cluster) go to `grade_class.log` beside the gradebook.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from jupyter_core.application import JupyterApp
from nbgrader.apps.baseapp import NbGrader, nbgrader_flags
from traitlets import Bool, Float, Int, List, Unicode
from traitlets.config import Application

from tools.course import REPO, Course, kernel_threads, venv_on_path

LOG_NAME = "grade_class.log"          # beside the gradebook


def log_path(course: Course) -> Path:
    """The workers' log: beside a SQLite gradebook, else in the autograder folder."""
    folder = course.gradebook_file.parent if course.gradebook_file else course.autograder
    return folder / LOG_NAME


@dataclass
class Unit:
    assignment: str
    student: str


@dataclass
class Result:
    assignment: str
    student: str
    success: bool
    seconds: float
    worker: str                   # the Dask worker's address
    error: str = ""


# --- what needs grading --------------------------------------------------------------------------

def submitted_students(course: Course, assignment: str) -> list[str]:
    return sorted(path.parent.name for path in course.folder("submitted").glob(f"*/{assignment}") if path.is_dir())


def read_timestamp(folder: Path):
    """The submission time in `folder`'s timestamp.txt as a datetime; None if missing or unreadable."""
    from nbgrader.utils import parse_utc

    path = folder / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip()) if path.is_file() and not path.is_symlink() else None
    except (OSError, ValueError, TypeError, OverflowError):
        return None


def executed(notebook: Path) -> bool:
    """An autograded notebook nbgrader finished: some code cell ran (or was marked as not run)."""
    if notebook.is_symlink() or not notebook.is_file():
        return False
    try:
        cells = json.loads(notebook.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return any(cell.get("cell_type") == "code" and (cell.get("execution_count") is not None or cell.get("outputs"))
               for cell in cells if isinstance(cell, dict))


def graded_timestamps(course: Course, assignment: str) -> dict:
    """student -> the submission time the gradebook recorded when that student was last graded."""
    from nbgrader.api import Gradebook, MissingEntry

    if course.gradebook_file is not None and not course.gradebook_file.exists():
        return {}
    with Gradebook(course.db_url) as gradebook:
        try:
            return {s.student_id: s.timestamp for s in gradebook.assignment_submissions(assignment)}
        except MissingEntry:
            return {}


def is_graded(course: Course, assignment: str, student: str, recorded: dict | None = None) -> bool:
    """Decided from what the instructor's side holds: the submitted folder (nbgrader collect writes it)
    and the gradebook. Nothing the graded notebook's kernel could write takes part."""
    submitted = course.path("submitted", student, assignment)
    graded = course.path("autograded", student, assignment)
    if not graded.is_dir() or graded.is_symlink():
        return False
    recorded = graded_timestamps(course, assignment) if recorded is None else recorded
    if student not in recorded:
        return False                  # the gradebook never saw this submission graded
    masters = {path.name for path in course.path("source", ".", assignment).glob("*.ipynb")}
    for name in masters:
        if (submitted / name).exists() and not executed(graded / name):
            return False              # interrupted between the sanitized copy and the graded one
    new, old = read_timestamp(submitted), recorded[student]
    if new is not None and old is not None and new > old:
        return False                  # resubmitted since it was graded
    return True


def plan(course: Course, assignments: list[str], force: bool,
         students: list[str] | None = None) -> tuple[list[Unit], int]:
    """The (assignment, student) pairs to grade, and how many were skipped as already graded."""
    units, skipped = [], 0
    for assignment in assignments:
        recorded = {} if force else graded_timestamps(course, assignment)
        for student in submitted_students(course, assignment):
            if students and student not in students:
                continue
            if not force and is_graded(course, assignment, student, recorded):
                skipped += 1
            else:
                units.append(Unit(assignment, student))
    return units, skipped


def unit_timeout(course: Course) -> float:
    """How long one submission may take to grade: its notebooks' time limit, plus start-up and saving."""
    value = course.autograder_module("grading_environment").value
    source = course.folder("source")
    notebooks = max((len(list(p.glob("*.ipynb"))) for p in source.iterdir() if p.is_dir()), default=1)
    return max(1, notebooks) * value("COURSE_GRADING_NOTEBOOK_TIMEOUT") + 120


# --- the cluster ------------------------------------------------------------------------------------

@contextmanager
def cluster_client(scheduler: str | None, workers: int | None, threads: int, log: Path):
    """A Dask client: of the cluster at `scheduler`, or of a local cluster of `workers` processes."""
    from distributed import Client, LocalCluster

    if scheduler:
        from tools.grading_kit import code_archive

        with Client(scheduler) as client, tempfile.TemporaryDirectory() as scratch:
            # The machines of a cluster need only the pinned environment: the grading code goes with the run.
            client.upload_file(str(code_archive(Path(scratch))))
            yield client
        return
    from tools.grading_worker import WORKER_LOG

    # Dask's nannies set their `pre-spawn-environ` (OMP_NUM_THREADS=1, ...) in this process's environment,
    # where it would reach every kernel this process starts later: it is put back when the cluster closes.
    saved = dict(os.environ)
    # No dashboard; the scheduler's own HTTP endpoints (health, metrics) on a free port, not Dask's 8787.
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           worker_dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                           silence_logs=logging.ERROR,
                           env={WORKER_LOG: str(log), "OMP_NUM_THREADS": str(threads)})
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()
        for name in set(os.environ) - set(saved):
            del os.environ[name]
        os.environ.update(saved)


def worker_count(client) -> int:
    return len(client.scheduler_info()["workers"])


class NoWorkerLeft(RuntimeError):
    """The cluster had no worker for longer than the run waits for one."""


def as_finished(pending, client, wait: float, scheduler: str | None):
    """The futures of `pending` (a Dask `as_completed`) as they finish. A task waits for a worker forever in
    Dask (a remote scheduler with none, or a local cluster whose workers all died): after `wait` seconds
    without any worker, this stops with NoWorkerLeft instead."""
    alone_since, checked = None, 0.0
    while pending.count():
        if pending.has_ready():
            yield next(pending)
            continue
        now = time.monotonic()
        if now - checked >= 1:
            checked = now
            try:
                workers = len(client.nthreads())
            except (OSError, TimeoutError):          # the scheduler itself is gone: no worker either
                workers = 0
            alone_since = None if workers else (alone_since or now)
            if alone_since is not None and now - alone_since > wait:
                where = f"the scheduler at {scheduler}" if scheduler else "the local cluster"
                raise NoWorkerLeft(f"no grading worker left on {where} for {wait:g} s (they died or were "
                                   "stopped); the run stops here")
        time.sleep(0.1)


# --- grading --------------------------------------------------------------------------------------

def prepare_gradebook(course: Course, students: list[str]) -> None:
    """Create the course's gradebook if needed, and the rows nbgrader creates on first use (every student,
    and the course nbgrader's preprocessors open the gradebook as, "default_course"), so the gradebook
    ends up as `nbgrader autograde` leaves it."""
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url):
        pass
    with Gradebook(course.db_url, course.course_id) as gradebook:
        for student in students:
            gradebook.update_or_create_student(student)


def record(course: Course, outcome) -> None:
    """Write a worker's outcome into the course: the gradebook first, then the autograded folder (which is
    what marks the submission graded, so an interruption between the two leaves it to be graded again)."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import rmtree

    from tools.grading_kit import write_folder, write_rows

    if outcome.rows is not None:
        # nbgrader's add_submission trips SQLAlchemy's "not in session" autoflush warning while it builds a
        # submission's rows (stock autograde too); the rows are written all the same.
        with warnings.catch_warnings(), Gradebook(course.db_url, course.course_id) as gradebook:
            warnings.filterwarnings("ignore", message=r".*not in session, add operation along")
            write_rows(gradebook, outcome.assignment, outcome.student, outcome.rows)
    graded = course.path("autograded", outcome.student, outcome.assignment)
    if graded.exists():
        rmtree(str(graded))
    if outcome.success:
        write_folder(graded, outcome.autograded)


def unreadable_timestamp(course: Course, unit: Unit) -> Result | None:
    """A failed result for a submission whose timestamp.txt holds no time (nbgrader itself would fail with
    an AttributeError of its own): say what is wrong and how to fix it."""
    stamp = course.path("submitted", unit.student, unit.assignment) / "timestamp.txt"
    if stamp.is_file() and not stamp.is_symlink() and read_timestamp(stamp.parent) is None:
        return Result(unit.assignment, unit.student, False, 0.0, "",
                      f"{stamp} does not hold a time ({stamp.read_text(errors='replace')[:40]!r}); "
                      "correct it or remove it, then grade again")
    return None


def submitted_files(course: Course, unit: Unit) -> dict[str, tuple[bytes, int]]:
    from tools.grading_kit import handed_in_files

    return handed_in_files(course, unit.assignment, unit.student)


def grade_class(root: Path, assignments: list[str], workers: int | None = None, force: bool = False,
                students: list[str] | None = None, progress: bool = True, env: dict[str, str] | None = None,
                scheduler: str | None = None, worker_wait: float = 120) -> dict:
    """Grade every submission of `assignments` in the course at `root` that is not graded yet (`force`:
    every one; `students`: only these) and return a summary. `scheduler`: a Dask scheduler's address
    (default: a local cluster of `workers` processes, one per core). `env`: environment variables the
    grading gets on top of the workers' own (a course's limits, say). `worker_wait`: the seconds the run waits
    while the cluster has no worker before it raises NoWorkerLeft (what was graded by then is kept)."""
    with venv_on_path():
        return _grade_class(Course(root), assignments, workers, force, students, progress, env, scheduler,
                            worker_wait)


def _grade_class(course: Course, assignments, workers, force, students, progress, env, scheduler,
                 worker_wait) -> dict:
    from distributed import KilledWorker, as_completed
    from tqdm import tqdm

    from tools.grading_kit import build_kit, kit_contents
    from tools.grading_worker import grade_submission

    started = time.perf_counter()
    units, skipped = plan(course, assignments, force, students)
    workers = max(1, min(workers or os.cpu_count() or 1, len(units) or 1))
    threads = kernel_threads(workers)
    results: list[Result] = []
    log = log_path(course)
    course.prepare()
    refused = {(unit.assignment, unit.student): result for unit in units
               if (result := unreadable_timestamp(course, unit))}
    results += refused.values()
    units = [unit for unit in units if (unit.assignment, unit.student) not in refused]
    if units:
        prepare_gradebook(course, sorted({unit.student for unit in units}))
        kit = build_kit(course, sorted({unit.assignment for unit in units}))
        timeout = unit_timeout(course)
        with cluster_client(scheduler, workers, threads, log) as client:
            if scheduler:
                workers, threads = worker_count(client), None        # each worker's machine decides
            # The kit as a task, not scattered data: if every worker holding it dies, the scheduler makes it
            # again from the graph (scattered data would be lost, and every task needing it cancelled).
            kit_data = client.submit(kit_contents, kit.data, key=f"course-kit-{kit.digest}")

            unit_of: dict[str, Unit] = {}
            suspects: list[Unit] = []        # failed with KilledWorker, perhaps only for waiting beside the killer

            def submit(unit: Unit):
                nonlocal kit_data
                if kit_data.status == "error":     # the kit's own task was on workers that died: make it anew
                    kit_data = client.submit(kit_contents, kit.data, key=f"course-kit-{kit.digest}-{time.time_ns()}")
                future = client.submit(grade_submission, kit_data, kit.digest, unit.assignment, unit.student,
                                       submitted_files(course, unit), env, threads, timeout, pure=False)
                unit_of[future.key] = unit
                return future

            def collect(future, alone: bool) -> bool:
                """Record a finished task's outcome; False if it goes on the suspects' list instead."""
                unit = unit_of.pop(future.key)
                try:
                    outcome = future.result()
                except KilledWorker as exc:
                    if not alone:
                        suspects.append(unit)
                        future.release()
                        return False
                    result = Result(unit.assignment, unit.student, False, 0.0, "", describe_failure(exc, alone))
                except Exception as exc:            # the task failed on every worker it ran on
                    result = Result(unit.assignment, unit.student, False, 0.0, "", describe_failure(exc, alone))
                else:
                    record(course, outcome)
                    result = Result(unit.assignment, unit.student, outcome.success, outcome.seconds,
                                    outcome.worker, outcome.error)
                future.release()
                results.append(result)
                return True

            queue = list(reversed(units))
            # A few tasks per worker in flight: files are read and sent as the class progresses.
            pending = as_completed([submit(queue.pop()) for _ in range(min(len(queue), 3 * max(1, workers)))])
            bar = tqdm(total=len(units), unit="notebook", desc="autograding", disable=not progress,
                       dynamic_ncols=True, file=sys.stderr)
            def progressed() -> None:
                bar.update()
                failed = sum(not r.success for r in results)
                if failed:
                    bar.set_postfix(failed=failed)

            try:
                for future in as_finished(pending, client, worker_wait, scheduler):
                    if collect(future, alone=False):
                        progressed()
                    if queue:
                        pending.add(submit(queue.pop()))
                # Each suspect alone on the cluster: a worker that dies now died of this submission.
                for unit in suspects:
                    for future in as_finished(as_completed([submit(unit)]), client, worker_wait, scheduler):
                        collect(future, alone=True)
                        progressed()
            except NoWorkerLeft as exc:
                bar.close()
                raise NoWorkerLeft(f"{exc}: {len(results)} graded in this run are kept; rerun to grade the "
                                   f"{len(units) - len(results)} left.") from None
            except KeyboardInterrupt:
                bar.close()
                print(f"\nInterrupted: {len(results)} graded in this run are kept; rerun to grade the "
                      f"{len(units) - len(results)} left.", file=sys.stderr)
                raise SystemExit(130)
            bar.close()
    return {
        "course": str(course.root), "assignments": assignments, "scheduler": scheduler or "local",
        "workers": workers, "threads_per_kernel": threads,
        "graded": len(results), "skipped": skipped,
        "failed": [asdict(r) for r in results if not r.success],
        "seconds": round(time.perf_counter() - started, 3),
        "results": [asdict(r) for r in results],
    }


def describe_failure(exc: BaseException, alone: bool = False) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return (f"the grading worker died each time it graded this submission ({exc.allowed_failures + 1} times"
                f"{', with nothing else to grade' if alone else ''}; Dask's KilledWorker): the submission kills "
                "or overwhelms the process that grades it")
    return f"{type(exc).__name__}: {exc}"


# --- the command ---------------------------------------------------------------------------------

USAGE = __doc__


class GradeClassApp(NbGrader):
    """`nbgrader autograde` for a whole class at once, in parallel, resumable."""

    name = "grade-class"
    description = USAGE.split("\n")[0]
    examples = USAGE.split("\n\n")[1]

    aliases = {
        "log-level": "Application.log_level",
        "workers": "GradeClassApp.workers", "j": "GradeClassApp.workers",
        "student": "GradeClassApp.students",
        "course": "GradeClassApp.course_root",
        "json": "GradeClassApp.summary_file",
        "scheduler": "GradeClassApp.scheduler",
        "worker-wait": "GradeClassApp.worker_wait",
    }
    flags = {
        **nbgrader_flags,
        "force": ({"GradeClassApp": {"force": True}}, "regrade students that are already graded"),
        "no-progress": ({"GradeClassApp": {"progress": False}}, "no progress bar"),
    }

    workers = Int(0, help="worker processes of the local cluster (0: one per core)").tag(config=True)
    force = Bool(False, help="regrade students that are already graded").tag(config=True)
    students = List(Unicode(), help="grade only these students (repeat --student)").tag(config=True)
    course_root = Unicode(str(REPO), help="the course's root folder (default: this repository)").tag(config=True)
    summary_file = Unicode("", help="also write the summary (timings per submission) to this JSON file").tag(config=True)
    scheduler = Unicode("", help="a Dask scheduler's address, e.g. tcp://grader:8786 (default: a local cluster)").tag(config=True)
    progress = Bool(True, help="show a progress bar").tag(config=True)
    worker_wait = Float(120, help="seconds to wait while the cluster has no worker before stopping with a "
                        "message").tag(config=True)

    def initialize(self, argv: list[str] | None = None) -> None:
        super().initialize(argv)
        self.course = Course(Path(self.course_root))
        # The course's own configuration (the sandbox, and any GradeClassApp settings); the command line wins.
        Application.load_config_file(self, "nbgrader_config.py", path=str(self.course.autograder))

    def load_config_file(self, **kwargs) -> None:
        # nbgrader's version warns when the current folder has no nbgrader_config.py; this command reads the
        # course's own (above), wherever it is run from.
        JupyterApp.load_config_file(self, **kwargs)

    def start(self) -> None:
        known = self.course.assignments()
        assignments = known if self.extra_args == ["all"] else list(self.extra_args)
        if not assignments:
            self.fail("name the assignment(s) to grade, or `all`")
        unknown = sorted(set(assignments) - set(known))
        if unknown:
            self.fail(f"no such assignment in {self.course.folder('source')}: {', '.join(unknown)}")
        try:
            summary = grade_class(self.course.root, assignments, self.workers or None, self.force,
                                  self.students or None, self.progress, scheduler=self.scheduler or None,
                                  worker_wait=self.worker_wait)
        except NoWorkerLeft as exc:
            print(f"Stopped: {exc}", file=sys.stderr)
            self.exit(3)
        if self.summary_file:
            path = Path(self.summary_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"graded {summary['graded']}, skipped {summary['skipped']} already graded, "
              f"{len(summary['failed'])} failed, in {summary['seconds']:.1f} s with {summary['workers']} workers")
        for failure in summary["failed"]:
            where = f" on {failure['worker']}" if failure["worker"] else ""
            print(f"  FAILED {failure['assignment']}/{failure['student']}{where}: {failure['error']}")
        if summary["failed"]:
            print(f"  (the workers' logs: {log_path(self.course)} for a local cluster, else each worker's own)")
        self.exit(1 if summary["failed"] else 0)


main = launch_new_instance = GradeClassApp.launch_instance

if __name__ == "__main__":
    main()
