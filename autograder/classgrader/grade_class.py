"""The course's grading engine: autograde a whole class with nbgrader, on a Dask cluster of any size.

    python -m autograder.classgrader 01-layernorm                 # every submission of one assignment
    python -m autograder.classgrader 01-layernorm 02-mlp --workers 4
    python -m autograder.classgrader all --force                  # every assignment, regrading everyone
    python -m autograder.classgrader all --scheduler tcp://grader:8786    # on a running Dask cluster

An nbgrader-style application (`GradeClassApp`) over one configurable grader (`ClassGrader`, whose traits
are the only list of settings): they can also be set in `autograder/nbgrader_config.py`, e.g.
`c.ClassGrader.workers = 4`; `--help-all` lists them. The instructors' command, the test suite, the
mutation report and the benchmarks all grade through it (`grade_class(root, assignments, **settings)`).

Run it from the repository root; it grades the course of this checkout (`--course ROOT` for another copy):
submissions in `autograder/submitted/<student>/<assignment>/`, results into the course's gradebook (any
`db_url` nbgrader accepts: the SQLite file, or a shared PostgreSQL server), `autograder/autograded/` and
(with `generate_feedback` afterwards) `autograder/feedback/`, exactly where `nbgrader autograde` puts them.

Each submission is one Dask task. Without `--scheduler` the command starts a local cluster sized to the
machine (one single-threaded worker process per core; each grading kernel gets `cores / workers` threads).
Which submissions need grading: class_plan.py. The client packs what workers need once (grading_kit.py: the
course's nbgrader configuration, the masters and releases, the assignments' definitions), sends each task
the student's files, and a worker grades them with nbgrader's own Autograde converter, exactly as `nbgrader
autograde` does, in the bubblewrap sandbox (grading_worker.py). The workers' set-up (their environment,
their log, this package on a remote machine) is cluster.py's. Workers share no file system with the client
and write nothing of the course: this process is the only writer of the gradebook and of `autograded/`, so nothing needs merging and a
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
import os
import sys
import time
from pathlib import Path

from jupyter_core.application import JupyterApp
from nbgrader.apps.baseapp import NbGrader, nbgrader_flags
from traitlets import Bool, Dict, Float, Int, List, Unicode, default
from traitlets.config import Application, LoggingConfigurable

from autograder.classgrader.class_plan import Unit, plan, unit_timeout, unreadable_timestamp
from autograder.classgrader.cluster import NoWorkerLeft, as_finished, cluster_client, worker_count
from autograder.grading_environment import ORIGINAL_COURSE_VARIABLE, grading_variables
from autograder.classgrader.grading_kit import build_kit, handed_in_files, kit_contents
from autograder.classgrader.grading_worker import Outcome, grade_submission
from autograder.limits import Limits
from autograder.classgrader.record import prepare_gradebook, record
from autograder.course import REPO, Course, kernel_threads, tool_env, venv_on_path

LOG_NAME = "grade_class.log"          # beside the gradebook


def log_path(course: Course) -> Path:
    """The workers' log: beside a SQLite gradebook, else in the autograder folder."""
    folder = course.gradebook_file.parent if course.gradebook_file else course.autograder
    return folder / LOG_NAME


class ClassGrader(LoggingConfigurable):
    """Grades every submission of a class that needs it. Its traits are the one list of the class grader's
    settings: the command's options (GradeClassApp), `c.ClassGrader.*` in nbgrader_config.py, and the
    keywords of grade_class()."""

    course_root = Unicode(str(REPO), help="the course's root folder (default: this repository)").tag(config=True)
    workers = Int(0, help="worker processes of the local cluster (0: one per core)").tag(config=True)
    force = Bool(False, help="regrade students that are already graded").tag(config=True)
    students = List(Unicode(), help="grade only these students (repeat --student)").tag(config=True)
    scheduler = Unicode("", help="a Dask scheduler's address, e.g. tcp://grader:8786 (default: a local "
                        "cluster)").tag(config=True)
    progress = Bool(True, help="show a progress bar").tag(config=True)
    worker_wait = Float(120, help="seconds to wait while the cluster has no worker before stopping with a "
                        "message (what was graded by then is kept)").tag(config=True)
    env = Dict(value_trait=Unicode(), default_value={}, help="environment variables the grading gets on top "
               "of the workers' own (a course's limits, say)").tag(config=True)

    def grade(self, assignments: list[str]) -> dict:
        """Grade `assignments` of the course and return the run's summary."""
        with venv_on_path():
            return self._grade(Course(Path(self.course_root)), list(assignments))

    def worker_environment(self, course: Course, threads: int) -> dict[str, str]:
        """What the workers' environment gets on top of their own: the grading's variables (the limits set in
        this shell, which a local cluster's workers inherit and a running cluster's do not, and `env`), the
        instructor's course, which the sandbox hides beside the copy a worker grades, and on a local cluster,
        whose cores this run shares out, the kernels' thread count, this virtual environment first on PATH and
        Dask's usual memory trimming."""
        # The limits as this run's configuration sets them (the course's file, this command's --Limits, the
        # shell's variables): a worker, which reads the kit's file alone, gets them as its overrides.
        limits = {name: repr(number) for name, number in Limits(parent=self).values().items()}
        variables = {**grading_variables(), **limits, **self.env, ORIGINAL_COURSE_VARIABLE: str(course.root)}
        if self.scheduler:
            return variables
        local = {name: text for name, text in tool_env(variables, threads).items() if os.environ.get(name) != text}
        return {"MALLOC_TRIM_THRESHOLD_": "65536", **local}

    def _grade(self, course: Course, assignments: list[str]) -> dict:
        from distributed import KilledWorker, as_completed
        from tqdm import tqdm

        started = time.perf_counter()
        units, skipped = plan(course, assignments, self.force, self.students or None)
        workers = max(1, min(self.workers or os.cpu_count() or 1, len(units) or 1))
        threads = kernel_threads(workers)
        scheduler = self.scheduler or None
        results: list[Outcome] = []
        course.prepare()
        conditions = run_conditions(bool(self.scheduler))
        for condition in conditions:                 # said once for the run, not on every notebook
            print(f"course grading: {condition}", file=sys.stderr, flush=True)
        refused = {(unit.assignment, unit.student): result for unit in units
                   if (result := refusal(course, unit))}
        results += refused.values()
        units = [unit for unit in units if (unit.assignment, unit.student) not in refused]
        if units:
            prepare_gradebook(course, sorted({unit.student for unit in units}))
            kit = build_kit(course, sorted({unit.assignment for unit in units}))
            timeout = unit_timeout(course)
            environment = self.worker_environment(course, threads)
            with cluster_client(scheduler, workers, environment, log_path(course)) as client:
                if scheduler:
                    workers, threads = worker_count(client), None        # each worker's machine decides
                # The kit as a task, not scattered data: if every worker holding it dies, the scheduler makes it
                # again from the graph (scattered data would be lost, and every task needing it cancelled).
                kit_data = client.submit(kit_contents, kit.data, key=f"course-kit-{kit.digest}")

                unit_of: dict[str, Unit] = {}
                suspects: list[Unit] = []    # failed with KilledWorker, perhaps only for waiting beside the killer

                def submit(unit: Unit):
                    """The unit's task, or None when its hand-in could not be packed (that student's failure,
                    recorded here, with the reason)."""
                    nonlocal kit_data
                    try:
                        files, not_sent = handed_in_files(course, unit.assignment, unit.student)
                    except Exception as exc:
                        results.append(Outcome(unit.assignment, unit.student, False, 0.0, "",
                                               f"its hand-in could not be packed: {describe_failure(exc)}"))
                        progressed()
                        return None
                    if kit_data.status == "error":     # the kit's own task was on workers that died: make it anew
                        kit_data = client.submit(kit_contents, kit.data,
                                                 key=f"course-kit-{kit.digest}-{time.time_ns()}")
                    future = client.submit(grade_submission, kit_data, kit.digest, unit.assignment, unit.student,
                                           files, timeout, not_sent, pure=False)
                    unit_of[future.key] = unit
                    return future

                def submit_next():
                    """The next unit's task (None when no unit is left to submit)."""
                    while queue:
                        future = submit(queue.pop())
                        if future is not None:
                            return future
                    return None

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
                        outcome = Outcome(unit.assignment, unit.student, False, 0.0, "", describe_failure(exc, alone))
                    except Exception as exc:            # the task failed on every worker it ran on
                        outcome = Outcome(unit.assignment, unit.student, False, 0.0, "", describe_failure(exc, alone))
                    else:
                        try:
                            record(course, outcome, self.config)
                        except Exception as exc:     # a result the gradebook's writers refused: that student's
                            outcome = Outcome(unit.assignment, unit.student, False, outcome.seconds, outcome.worker,
                                              f"its result could not be recorded: {describe_failure(exc)}")
                    future.release()
                    results.append(outcome)
                    return True

                queue = list(reversed(units))
                bar = tqdm(total=len(units), unit="notebook", desc="autograding", disable=not self.progress,
                           dynamic_ncols=True, file=sys.stderr)

                def progressed() -> None:
                    bar.update()
                    failed = sum(not r.success for r in results)
                    if failed:
                        bar.set_postfix(failed=failed)

                # A few tasks per worker in flight: files are read and sent as the class progresses.
                first = (submit_next() for _ in range(min(len(queue), 3 * max(1, workers))))
                pending = as_completed([future for future in first if future is not None])
                try:
                    for future in as_finished(pending, client, self.worker_wait, scheduler):
                        if collect(future, alone=False):
                            progressed()
                        if queue and (following := submit_next()) is not None:
                            pending.add(following)
                    # Each suspect alone on the cluster: a worker that dies now died of this submission.
                    for unit in suspects:
                        again = submit(unit)
                        if again is None:
                            continue
                        for future in as_finished(as_completed([again]), client, self.worker_wait, scheduler):
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
        summaries = [outcome.summary() for outcome in results]
        return {
            "course": str(course.root), "assignments": assignments, "scheduler": scheduler or "local",
            "workers": workers, "threads_per_kernel": threads,
            "graded": len(results), "skipped": skipped, "conditions": conditions,
            "failed": [summary for summary in summaries if not summary["success"]],
            "seconds": round(time.perf_counter() - started, 3),
            "results": summaries,
        }


def grade_class(root: Path, assignments: list[str], **settings) -> dict:
    """Grade every submission of `assignments` in the course at `root` that is not graded yet and return a
    summary; `settings` are ClassGrader's traits (workers, force, students, scheduler, progress, worker_wait,
    env). A run that loses every worker for `worker_wait` seconds raises NoWorkerLeft (what was graded by
    then is kept). A setting given as None keeps what the course's nbgrader_config.py sets, which is read
    here as the command reads it (its `c.ClassGrader` settings, the late policy the gradebook's writers
    apply); a setting given here wins, as the command line does."""
    unknown = sorted(set(settings) - set(ClassGrader.class_trait_names(config=True)))
    if unknown:
        raise TypeError(f"grade_class() has no setting {', '.join(unknown)}; ClassGrader's are "
                        f"{', '.join(sorted(ClassGrader.class_trait_names(config=True)))}")
    settings = {name: value for name, value in settings.items() if value is not None}
    config = Course(Path(root)).grading_config()
    return ClassGrader(config=config, course_root=str(root), **settings).grade(assignments)


def run_conditions(remote: bool) -> list[str]:
    """How this run grades, where it differs from what the grader page promises: on a local cluster, an account
    that can create no control group limits memory and processes per process only (a remote cluster's machines
    say so in each notebook's record, which the class report gathers)."""
    from autograder.sandbox import cgroups
    from autograder.grading_environment import sandbox_enabled
    from autograder.plugins.sandbox_kernels import per_process_condition

    return [per_process_condition()] if not remote and sandbox_enabled() and not cgroups.available() else []


def refusal(course: Course, unit: Unit) -> Outcome | None:
    """A failed result for a submission refused before it is sent (its timestamp.txt holds no time), or for one
    whose folder could not even be looked at: never an exception that would stop the class."""
    try:
        return unreadable_timestamp(course, unit)
    except Exception as exc:
        return Outcome(unit.assignment, unit.student, False, 0.0, "",
                       f"its hand-in could not be read: {describe_failure(exc)}")


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
        "workers": "ClassGrader.workers", "j": "ClassGrader.workers",
        "student": "ClassGrader.students",
        "course": "ClassGrader.course_root",
        "json": "GradeClassApp.summary_file",
        "scheduler": "ClassGrader.scheduler",
        "worker-wait": "ClassGrader.worker_wait",
    }
    flags = {
        **nbgrader_flags,
        "force": ({"ClassGrader": {"force": True}}, ClassGrader.force.help),
        "no-progress": ({"ClassGrader": {"progress": False}}, "no progress bar"),
    }

    summary_file = Unicode("", help="also write the summary (timings per submission) to this JSON file").tag(config=True)

    @default("classes")
    def _classes_default(self):
        return [*super()._classes_default(), ClassGrader, Limits]      # --help-all lists the limits too

    def initialize(self, argv: list[str] | None = None) -> None:
        super().initialize(argv)
        self.course = Course(Path(self.config.ClassGrader.get("course_root", str(REPO))))
        # The course's own configuration (the sandbox, and any ClassGrader settings); the command line wins.
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
            summary = ClassGrader(parent=self, course_root=str(self.course.root)).grade(assignments)
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
