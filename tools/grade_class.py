"""The course's grading engine: autograde a whole class with nbgrader, across several worker processes.

    python -m tools.grade_class 01-layernorm                 # every submission of one assignment
    python -m tools.grade_class 01-layernorm 02-mlp --workers 4
    python -m tools.grade_class all --force                  # every assignment, regrading everyone
    python -m tools.grade_class all --shard 0/3              # machine 0 of 3: a third of the class

An nbgrader-style application (`GradeClassApp`, traitlets configuration): its options can also be set in
`autograder/nbgrader_config.py`, e.g. `c.GradeClassApp.workers = 4`; `--help-all` lists them. The
instructors' command, the test suite, the mutation report and the benchmarks all grade through it.

Runs from any folder; grades the course this file belongs to (`--course ROOT` for another copy):
submissions in `autograder/submitted/<student>/<assignment>/`, results into the course's gradebook,
`autograder/autograded/` and (with `generate_feedback` afterwards) `autograder/feedback/`, exactly
where `nbgrader autograde` puts them.

Each worker is a process that loads `autograder/nbgrader_config.py` once, as `nbgrader autograde`
does, and then runs nbgrader's own `Autograde` converter for one (assignment, student) at a time:
the same sanitizing, sandboxed execution, grading and gradebook writes as the command line, without
paying the command's start-up for every student. All workers share the one gradebook; SQLite's lock
timeout covers their short writes (tests/test_grade_class.py and the benchmark `bench/grading.py`
check the grades against sequential `nbgrader autograde`). Each grading kernel gets `cores / workers`
threads. The parent watches its workers: one that dies, or takes longer than the notebooks' time limit
allows, is replaced, and the submission it held is reported as failed with the reason; the class goes on.

Nothing is lost if a run is interrupted: a submission counts as graded once its autograded notebook
holds executed cells (nbgrader writes the sanitized, unexecuted copy first and the executed one only
after the grades are saved) and the gradebook records it, so a rerun skips every student finished
before the interruption and grades the rest. A newer submission (the timestamp.txt in `submitted/`,
later than the time the gradebook recorded) is regraded, as nbgrader does; `--force`
regrades everyone. Worker logs go to `autograder/gradebook/grade_class.log`.

With `--shard I/K` each of K machines grades its own part of the class in its own copy of the
course; `python -m tools.merge_gradebooks` then merges their gradebooks into one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jupyter_core.application import JupyterApp
from nbgrader.apps.baseapp import NbGrader, nbgrader_flags
from traitlets import Bool, Int, List, Unicode
from traitlets.config import Application

from tools.course import REPO, Course, kernel_threads, tool_env

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
    worker: int
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


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    """Shard I of K holds the students whose id hashes to I modulo K: every machine agrees on the split
    without a shared roster, and a student added later lands in the same shard on every machine."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % count == index


def plan(course: Course, assignments: list[str], force: bool, students: list[str] | None = None,
         shard: tuple[int, int] | None = None) -> tuple[list[Unit], int]:
    """The (assignment, student) pairs to grade, and how many were skipped as already graded."""
    units, skipped = [], 0
    for assignment in assignments:
        recorded = {} if force else graded_timestamps(course, assignment)
        for student in submitted_students(course, assignment):
            if (students and student not in students) or not in_shard(student, shard):
                continue
            if not force and is_graded(course, assignment, student, recorded):
                skipped += 1
            else:
                units.append(Unit(assignment, student))
    return units, skipped


# --- the workers -----------------------------------------------------------------------------------

_app = None
_worker = 0


def start_worker(course: str, threads: int, log: str, env: dict[str, str], number: int) -> None:
    """Runs once in each worker: quiet Ctrl-C (the parent decides), logs to a file, load the config."""
    global _app, _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker = number
    handle = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(handle, 1)                # kernels' and nbgrader's output would break the progress bar
    os.dup2(handle, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    # This process exists only to grade: its environment is the kernels' (threads) and nbgrader's (alembic).
    os.environ.update(tool_env(env, threads=threads))
    os.chdir(Course(course).autograder)                       # where nbgrader reads its config

    from nbgrader.apps.autogradeapp import AutogradeApp

    _app = AutogradeApp()
    _app.initialize([])               # nbgrader_config.py, loaded exactly as `nbgrader autograde` does
    # Once the last cell has run, every output is in the notebook: stop the kernel at once instead of
    # waiting seconds for a torch process to tear itself down (nbclient's default, "graceful").
    _app.config.Execute.shutdown_kernel = "immediate"
    _app.log.info("grade_class worker %d started (pid %d)", _worker, os.getpid())


def grade(unit: Unit, force: bool = True) -> Result:
    """`nbgrader autograde ASSIGNMENT --student STUDENT --force`, in this worker's process."""
    import traceback

    from nbgrader.converters import Autograde
    from nbgrader.utils import temp_attrs

    started = time.perf_counter()
    error = ""
    stamp = Path(_app.coursedir.format_path(_app.coursedir.submitted_directory, unit.student, unit.assignment)) / "timestamp.txt"
    if stamp.exists() and read_timestamp(stamp.parent) is None:
        # nbgrader would fail with an AttributeError of its own; say what is wrong and how to fix it.
        error = (f"{stamp} does not hold a time ({stamp.read_text(errors='replace')[:40]!r}); "
                 "correct it or remove it, then grade again")
        return Result(unit.assignment, unit.student, False, round(time.perf_counter() - started, 3), _worker, error)
    try:
        with temp_attrs(_app.coursedir, assignment_id=unit.assignment, student_id=unit.student):
            converter = Autograde(coursedir=_app.coursedir, parent=_app)
            converter.force = force
            converter.start()
    except BaseException as exc:      # nbgrader has already removed the failed output and logged why
        error = f"{type(exc).__name__}: {exc}"
        _app.log.error("grade_class: %s/%s failed:\n%s", unit.assignment, unit.student, traceback.format_exc())
    return Result(unit.assignment, unit.student, not error, round(time.perf_counter() - started, 3), _worker, error)


def worker_main(connection, course: str, threads: int, log: str, env: dict[str, str], number: int) -> None:
    """A worker process: load the configuration once, then grade what the parent sends until None."""
    start_worker(course, threads, log, env, number)
    while (unit := connection.recv()) is not None:
        # Every unit here needs grading: force removes a half-written output of an interrupted run.
        connection.send(grade(unit, force=True))


@dataclass
class Slot:
    """One worker process and the unit it is grading (None while idle)."""
    process: multiprocessing.process.BaseProcess
    connection: object
    unit: Unit | None = None
    started: float = 0.0


class Supervisor:
    """Grading workers watched from the parent: a worker that dies or overruns its time is replaced, and
    the submission it was grading is reported failed with the reason; the other workers go on. (A
    multiprocessing.Pool waits forever for the result of a worker that died.)"""

    def __init__(self, course: Path, workers: int, threads: int, log: Path, unit_timeout: float,
                 env: dict[str, str] | None = None):
        self.context = multiprocessing.get_context("spawn")
        self.args = (str(course), threads, str(log), dict(env or {}))
        self.unit_timeout = unit_timeout
        self.started = 0
        self.slots = [self.spawn() for _ in range(workers)]

    def spawn(self) -> Slot:
        self.started += 1
        parent, child = self.context.Pipe()
        process = self.context.Process(target=worker_main, args=(child, *self.args, self.started), daemon=True)
        process.start()
        child.close()
        return Slot(process, parent)

    def replace(self, slot: Slot) -> None:
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join(5)
        slot.connection.close()
        self.slots[self.slots.index(slot)] = self.spawn()

    def run(self, units: list[Unit]):
        """Yield a Result for every unit, in the order they finish."""
        from multiprocessing.connection import wait

        queue = list(reversed(units))
        while queue or any(slot.unit for slot in self.slots):
            for index, slot in enumerate(self.slots):
                if slot.unit is None and queue:
                    if not slot.process.is_alive():       # died while idle: nothing was lost
                        self.replace(slot)
                        slot = self.slots[index]
                    slot.unit, slot.started = queue.pop(), time.monotonic()
                    try:
                        slot.connection.send(slot.unit)
                    except OSError:
                        pass                              # the sentinel below reports the death
            busy = [slot for slot in self.slots if slot.unit]
            ready = wait([s.connection for s in busy] + [s.process.sentinel for s in busy], timeout=1.0)
            for slot in busy:
                unit, elapsed = slot.unit, time.monotonic() - slot.started
                if slot.connection in ready:
                    try:
                        result = slot.connection.recv()
                    except (EOFError, OSError):
                        result = None
                    if result is not None:
                        slot.unit = None
                        yield result
                        continue
                if slot.process.sentinel in ready or not slot.process.is_alive():
                    reason = f"the grading worker died (exit code {slot.process.exitcode}) while grading it"
                elif elapsed > self.unit_timeout:
                    reason = f"grading took longer than {self.unit_timeout:.0f} s; the worker was stopped"
                else:
                    continue
                slot.unit = None
                self.replace(slot)
                yield Result(unit.assignment, unit.student, False, round(elapsed, 3), 0, reason)

    def close(self) -> None:
        for slot in self.slots:
            try:
                slot.connection.send(None)
            except (OSError, ValueError):
                pass
        for slot in self.slots:
            slot.process.join(10)
            if slot.process.is_alive():
                slot.process.kill()

    def terminate(self) -> None:
        for slot in self.slots:
            slot.process.kill()
            slot.process.join(5)


def unit_timeout(course: Course) -> float:
    """How long one submission may take to grade: its notebooks' time limit, plus start-up and saving."""
    sys.path.insert(0, str(course.autograder))
    from grading_environment import value

    source = course.folder("source")
    notebooks = max((len(list(p.glob("*.ipynb"))) for p in source.iterdir() if p.is_dir()), default=1)
    return max(1, notebooks) * value("COURSE_GRADING_NOTEBOOK_TIMEOUT") + 120


# --- grading --------------------------------------------------------------------------------------

def prepare_gradebook(course: Course, students: list[str]) -> None:
    """Create, before the workers start, the rows that nbgrader creates on first use: every student,
    and the course nbgrader's preprocessors open the gradebook as ("default_course"). nbgrader checks
    for a row and then inserts it, so two workers grading the same new student (two assignments of a
    full submission) would both insert it, and one would fail. `nbgrader autograde` creates the very
    same rows (an id and nothing else), so the gradebook ends up the same."""
    from nbgrader.api import Gradebook

    course.prepare()
    with Gradebook(course.db_url):
        pass
    with Gradebook(course.db_url, course.course_id) as gradebook:
        for student in students:
            gradebook.update_or_create_student(student)


def grade_class(root: Path, assignments: list[str], workers: int | None = None, force: bool = False,
                students: list[str] | None = None, progress: bool = True,
                shard: tuple[int, int] | None = None, env: dict[str, str] | None = None) -> dict:
    """Grade every submission of `assignments` in the course at `root` that is not graded yet (`force`:
    every one; `students`: only these); returns a summary. `env`: environment variables the grading
    workers and their kernels get on top of this process's (a course's limits, say)."""
    from tqdm import tqdm

    course = Course(root)
    started = time.perf_counter()
    units, skipped = plan(course, assignments, force, students, shard)
    workers = max(1, min(workers or os.cpu_count() or 1, len(units) or 1))
    threads = kernel_threads(workers)
    results: list[Result] = []
    log = log_path(course)
    course.prepare()
    if units:
        prepare_gradebook(course, sorted({unit.student for unit in units}))
        supervisor = Supervisor(course.root, workers, threads, log, unit_timeout(course), env)
        bar = tqdm(total=len(units), unit="notebook", desc="autograding", disable=not progress,
                   dynamic_ncols=True, file=sys.stderr)
        try:
            for result in supervisor.run(units):
                results.append(result)
                bar.update()
                failed = sum(not r.success for r in results)
                if failed:
                    bar.set_postfix(failed=failed)
        except KeyboardInterrupt:
            bar.close()
            supervisor.terminate()    # kernels die with their worker (bwrap --die-with-parent)
            print(f"\nInterrupted: {len(results)} graded in this run are kept; rerun to grade the "
                  f"{len(units) - len(results)} left.", file=sys.stderr)
            raise SystemExit(130)
        bar.close()
        supervisor.close()
    return {
        "course": str(course.root), "assignments": assignments, "workers": workers, "threads_per_kernel": threads,
        "graded": len(results), "skipped": skipped,
        "failed": [asdict(r) for r in results if not r.success],
        "seconds": round(time.perf_counter() - started, 3),
        "results": [asdict(r) for r in results],
    }


# --- the command ---------------------------------------------------------------------------------

def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("a shard is I/K, for example 0/4") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError("a shard I/K needs 0 <= I < K")
    return index, count


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
        "shard": "GradeClassApp.shard",
    }
    flags = {
        **nbgrader_flags,
        "force": ({"GradeClassApp": {"force": True}}, "regrade students that are already graded"),
        "no-progress": ({"GradeClassApp": {"progress": False}}, "no progress bar"),
    }

    workers = Int(0, help="worker processes (0: one per core)").tag(config=True)
    force = Bool(False, help="regrade students that are already graded").tag(config=True)
    students = List(Unicode(), help="grade only these students (repeat --student)").tag(config=True)
    course_root = Unicode(str(REPO), help="the course's root folder (default: this repository)").tag(config=True)
    summary_file = Unicode("", help="also write the summary (timings per submission) to this JSON file").tag(config=True)
    shard = Unicode("", help="grade only shard I of K (students split by a hash of their id), e.g. 0/3").tag(config=True)
    progress = Bool(True, help="show a progress bar").tag(config=True)

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
            shard = parse_shard(self.shard) if self.shard else None
        except argparse.ArgumentTypeError as error:
            self.fail(str(error))
        summary = grade_class(self.course.root, assignments, self.workers or None, self.force, self.students or None,
                              self.progress, shard)
        if self.summary_file:
            path = Path(self.summary_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"graded {summary['graded']}, skipped {summary['skipped']} already graded, "
              f"{len(summary['failed'])} failed, in {summary['seconds']:.1f} s with {summary['workers']} workers")
        for failure in summary["failed"]:
            print(f"  FAILED {failure['assignment']}/{failure['student']}: {failure['error']} "
                  f"(see {log_path(self.course)})")
        self.exit(1 if summary["failed"] else 0)


main = launch_new_instance = GradeClassApp.launch_instance

if __name__ == "__main__":
    main()
