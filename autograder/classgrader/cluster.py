"""The Dask side of the class grader: a cluster to grade on, and what each of its workers is given once.

Everything a worker needs besides its tasks is given when the worker starts or joins, never by a task: a
task (grading_worker.grade_submission) changes nothing of its process. A local cluster (one single-threaded
worker process per core) forks its workers from a fork server that has imported what grading imports
(`forking_workers`), gives them the grading environment (the limits' variables, the kernels' thread count,
this virtual environment first on PATH) on top of this process's own, as a new process would inherit it
(ProcessState), and sends their output to the course's log (WorkerLog). A running cluster (`--scheduler`)
gets the same through worker plugins registered for the run and removed after it: CourseCode puts this
grading package on machines that have only the pinned environment (its folder stays on the worker, off the
import path), GradingEnvironment sets the variables while the run lasts. Both have fixed names: grade one
run at a time on a cluster.
"""

from __future__ import annotations

import hashlib
import io
import logging
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import dask
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

from autograder.course import CONFIGURATION_FILES

PACKAGE = Path(__file__).resolve().parents[1]          # the grading package, autograder/
# Its code a worker grades with (the report and the course's data stay on the instructor's machine).
CODE_FOLDERS = ("checker", "classgrader", "pages", "plugins", "sandbox")


class NoWorkerLeft(RuntimeError):
    """The cluster had no worker for longer than the run waits for one."""


class WorkerLog(WorkerPlugin):
    """A local cluster's workers write into the course's log, not onto the instructor's progress bar."""

    name = "course-grading-log"

    def __init__(self, path: Path):
        self.path = str(path)

    def setup(self, worker) -> None:
        handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(handle, 1)
        os.dup2(handle, 2)
        os.close(handle)


class ProcessState(WorkerPlugin):
    """A local cluster's worker forked from the fork server (`forking_workers`) has that server's environment,
    working folder and umask, from when it started, not this process's now: it gets this process's, as a newly
    started process would inherit them, before any task. (What cannot be reset from inside, the limits and
    priority, is `inherited_state`'s: the server is started again when that changes.)"""

    name = "course-grading-process-state"

    def __init__(self, environment: dict[str, str]):
        self.environment = {**os.environ, **environment}
        self.folder = os.getcwd()
        self.umask = current_umask()

    def setup(self, worker) -> None:
        for name in set(os.environ) - set(self.environment):
            del os.environ[name]
        os.environ.update(self.environment)
        os.chdir(self.folder)
        os.umask(self.umask)


def current_umask() -> int:
    """This process's umask, read without setting it (os.umask would change it for every thread meanwhile)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))


def inherited_state() -> tuple:
    """What a process started from this thread inherits and a worker cannot take back or reset for itself: the
    resource limits (a hard limit is never raised again), the scheduling priority (never raised without
    privilege), the CPU affinity and the control groups."""
    limits = tuple((name, resource.getrlimit(getattr(resource, name)))
                   for name in sorted(dir(resource)) if name.startswith("RLIMIT_"))
    with open("/proc/self/cgroup") as groups:
        return limits, os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)), groups.read()


# What a worker imports to grade, imported once by the fork server its local cluster's workers start from.
WORKER_IMPORTS = ["distributed", "psutil", "nbformat", "nbgrader.apps.autogradeapp", "nbgrader.converters",
                  "nbgrader.preprocessors", "nbclient", "jupyter_client", "nbconvert"]
_server_state: tuple | None = None        # inherited_state() when this process's fork server was last set up


def forking_workers() -> None:
    """Start a local cluster's workers from multiprocessing's fork server, which has imported WORKER_IMPORTS,
    rather than as new Python processes (Dask's default) that import them again, about 2.8 CPU-s a worker: a
    process that grades many times (a hub's grading service, the test suite) or starts a worker per core pays
    the imports once. The server lives as long as this process; one started under other limits, priority,
    affinity or control groups is stopped first, so that the next worker starts a new one under this
    process's. Call inside Dask's configuration of the fork server ("forkserver" as the multiprocessing
    method), one run at a time in a process."""
    global _server_state
    from multiprocessing import forkserver

    from distributed.utils import get_mp_context

    get_mp_context()                        # Dask's own preload list, set once; this process's goes after it
    state = inherited_state()
    if _server_state is not None and state != _server_state:
        # multiprocessing has no public way to stop its fork server; `_stop` is the one its own tests use.
        forkserver._forkserver._stop()
    multiprocessing.get_context("forkserver").set_forkserver_preload(WORKER_IMPORTS)
    _server_state = state


class GradingEnvironment(WorkerPlugin):
    """The grading's variables (the limits an instructor set, PATH) in a running cluster's workers while the
    run lasts; put back as they were when the run unregisters the plugin."""

    name = "course-grading-environment"

    def __init__(self, variables: dict[str, str]):
        self.variables = dict(variables)
        self.saved: dict[str, str | None] = {}

    def setup(self, worker) -> None:
        # This machine's Python environment first on PATH (nbgrader runs `alembic` from PATH).
        variables = {**self.variables, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.saved = {name: os.environ.get(name) for name in variables}
        os.environ.update(variables)

    def teardown(self, worker) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def package_files() -> list[Path]:
    """The grading package's code, by an allow-list: its top-level modules and its code folders (the sandbox's
    stand-in for the reference module included). The package folder is also the course's autograder/ folder,
    where students' hand-ins, graded notebooks and the exchange live: none of that is code, and none of it may
    leave the instructor's machine."""
    modules = [path for path in PACKAGE.glob("*.py") if path.name not in CONFIGURATION_FILES]
    return sorted([*modules, *(path for folder in CODE_FOLDERS for path in (PACKAGE / folder).rglob("*.py"))])


class CourseCode(WorkerPlugin):
    """This grading package, unpacked on each worker of a running cluster into the worker's own folder and put
    first on its import path: the machines need only the pinned environment, and every worker grades with
    the client's code. A new version of the code replaces any the worker imported for an earlier run; the
    run's end takes the folder off the import path again."""

    name = "course-grading-code"

    def __init__(self):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zipped:
            for path in package_files():
                # A fixed date: the same code, the same bytes, the same digest (and folder) on the workers.
                entry = zipfile.ZipInfo(str(Path(PACKAGE.name) / path.relative_to(PACKAGE)), (1980, 1, 1, 0, 0, 0))
                zipped.writestr(entry, path.read_bytes())
        self.data = buffer.getvalue()
        self.digest = hashlib.sha256(self.data).hexdigest()[:16]

    def folder(self, worker) -> Path:
        return Path(worker.local_directory) / f"course-grading-code-{self.digest}"

    def setup(self, worker) -> None:
        folder = self.folder(worker)
        if not (folder / PACKAGE.name).is_dir():
            with zipfile.ZipFile(io.BytesIO(self.data)) as zipped:
                zipped.extractall(folder)
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        for name in [name for name in sys.modules if name == PACKAGE.name or name.startswith(PACKAGE.name + ".")]:
            if not str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(folder)):
                del sys.modules[name]

    def teardown(self, worker) -> None:
        folder = str(self.folder(worker))
        if folder in sys.path:
            sys.path.remove(folder)


@contextmanager
def cluster_client(scheduler: str | None, workers: int, environment: dict[str, str], log: Path):
    """A Dask client: of the cluster at `scheduler`, or of a local cluster of `workers` processes. Either way
    the workers grade with this package's code and `environment` in theirs."""
    if scheduler:
        import cloudpickle

        # The plugins travel by value: a machine with only the pinned environment cannot import this package
        # before CourseCode has put it there.
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        with Client(scheduler) as client:
            plugins = [CourseCode(), GradingEnvironment(environment)]
            for plugin in plugins:
                client.register_plugin(plugin)
            try:
                yield client
            finally:
                for plugin in plugins:
                    try:
                        client.unregister_worker_plugin(plugin.name)
                    except Exception:          # the cluster went away: nothing to take back
                        pass
        return
    # Dask's nannies run in this process and write their `pre-spawn-environ` into its environment (OMP, MKL
    # and OpenBLAS threads 1), where it would reach every process started here later: the workers get their
    # variables through `env` instead, which only they see. (PYTHONHASHSEED, which Dask also sets there for
    # its own hashing, is left as this process has it.)
    quiet = {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "random")}
    # On a shared machine (a hub, where every student is a local account) a local cluster's ports are anyone's
    # to connect to, and a client of the scheduler runs code as the grader: the cluster speaks TLS with
    # certificates made for this run only (Dask's `security=True`), so only this process's client gets in. Its
    # scratch space is a folder of its own, not /tmp/dask-scratch-space, which any account may make first.
    scratch = tempfile.mkdtemp(prefix="course-grading-dask-")
    # Dask's HTTP server speaks no TLS, and on loopback any account reaches it: of its routes only the health
    # check is served. Its default routes (info, json, metrics, proxy) gave the worker list, the scratch folder,
    # the scheduler's and nannies' logs and the live call stack of the grading task to another local account.
    only_health = ["distributed.http.health"]
    with dask.config.set({"distributed.nanny.pre-spawn-environ": quiet, "temporary-directory": scratch,
                          "distributed.scheduler.http.routes": only_health,
                          "distributed.worker.http.routes": only_health,
                          "distributed.worker.multiprocessing-method": "forkserver"}):
        forking_workers()
        # No dashboard; the scheduler's health check on a free port of loopback, not Dask's 8787 on every
        # interface.
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               worker_dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                               silence_logs=logging.ERROR, env=environment, security=True, host="127.0.0.1",
                               local_directory=scratch)
        try:
            with Client(cluster) as client:
                client.register_plugin(ProcessState(environment))
                client.register_plugin(WorkerLog(log))
                yield client
        finally:
            cluster.close()
            shutil.rmtree(scratch, ignore_errors=True)


def worker_count(client) -> int:
    return len(client.scheduler_info()["workers"])


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
