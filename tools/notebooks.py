"""Find the course's notebooks and execute them with papermill, several at a time.

papermill is the one executor, for the tests and for `make book`'s lessons alike: it takes the in-memory
notebook myst-nb's reader gives (no conversion files), fills a cell tagged `parameters` when a caller
passes parameters (the published values are the defaults), and reports a failure as the cell and the
exception. It runs nbclient, the client jupyter-cache and Jupyter Book use, through a papermill engine of
the course's own (`CourseEngine`, registered as papermill's documented extension point) only to hand the
kernel its environment and working folder.

Lessons are MyST Markdown notebooks (book/*.md), read with myst-nb's own reader, the one Jupyter Book
reads them with, so that an executed lesson matches the notebook Jupyter Book looks up in the execution
cache (tools/cache.py). Assignment masters are plain .ipynb files under solutions/.

Each kernel gets its environment from `tools.course.tool_env` (the threads it may use, anything the
caller adds); the calling process's own environment is never changed.

Each kernel is local (`LocalKernelManager`): it talks to its executor over IPC sockets in a private temporary
folder, removed afterwards, not over TCP on localhost (ipykernel warns that TCP is unencrypted), and once its
cells have run it is asked to shut down and waited for, not interrupted first (jupyter_client's shutdown
sends SIGINT before the request, which a kernel still finishing papermill's last kernel_info request logs
as "KeyboardInterrupt caught in kernel").
"""

from __future__ import annotations

import copy
import functools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.course import COURSE, kernel_threads, tool_env


KERNEL = "python3"           # every notebook of the course runs in this kernel
# For a kernel given more than one thread on a shared machine: threads that spin while they wait for
# each other can make a run ten times slower, and the wait policy does not change a single result.
PASSIVE_OPENMP = {"OMP_WAIT_POLICY": "passive"}


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """A notebook as Jupyter Book reads it: MyST Markdown through myst-nb's reader, .ipynb through nbformat."""
    if path.suffix == ".md":
        from myst_nb.core.read import myst_nb_reader_plugin

        return myst_nb_reader_plugin(str(path))
    return nbformat.read(path, as_version=4)


@dataclass
class Execution:
    source: Path
    output: Path
    error: str | None = None     # None when every cell ran
    seconds: float = 0.0         # wall time of the run, kernel start-up included


# zmq's ipc endpoints are unix sockets, whose path must fit in sockaddr_un.sun_path: 108 bytes on Linux, 104 on
# macOS, the terminating NUL included. jupyter_client names them `<ip>-<n>`, n from 1 up.
SOCKET_PATH_BYTES = 104


def socket_folder() -> str:
    """A new private folder (mode 0700) for a kernel's connection file and IPC sockets: in the temporary folder
    (TMPDIR), or in /tmp when a socket's path there would be too long."""
    import tempfile

    for parent in (None, "/tmp"):
        folder = tempfile.mkdtemp(prefix="kernel-", dir=parent)
        if len(os.fsencode(os.path.join(folder, "kernel-99999"))) < SOCKET_PATH_BYTES:
            return folder
        os.rmdir(folder)
    raise OSError(f"no temporary folder short enough for a unix socket's path ({SOCKET_PATH_BYTES} bytes)")


@functools.cache
def local_kernel_manager():
    """nbclient's default kernel manager (jupyter_client's AsyncKernelManager), for a kernel on this machine:

    - IPC transport, the one ipykernel recommends over unencrypted TCP: the sockets and the connection file
      live in a private folder of their own (`socket_folder`), removed with the kernel's resources;
    - a clean shutdown: the kernel is asked to shut down (a shutdown_request on its control channel, which
      ipykernel handles on its control thread) and waited for, up to half of `shutdown_wait_time`. A kernel
      still busy then (a cell that timed out) gets jupyter_client's own sequence: SIGINT, the request again,
      SIGTERM, SIGKILL. jupyter_client alone interrupts every kernel first, also an idle one, which logs
      "KeyboardInterrupt caught in kernel" when the signal finds it inside a request's handler."""
    import asyncio
    import shutil

    from jupyter_client import AsyncKernelManager

    class LocalKernelManager(AsyncKernelManager):
        folder: str | None = None

        async def start_kernel(self, **kwargs):
            if self.folder is None:
                self.folder = socket_folder()
                self.transport = "ipc"
                self.ip = os.path.join(self.folder, "kernel")       # the sockets: <folder>/kernel-1 ... -5
                self.connection_file = os.path.join(self.folder, "kernel.json")
            try:
                return await super().start_kernel(**kwargs)
            except BaseException:
                self._remove_folder()
                raise

        async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
            if not now and not restart and self.owns_kernel and self.has_kernel:
                await self.request_shutdown()
                loop = asyncio.get_running_loop()
                deadline = loop.time() + max(self.shutdown_wait_time, 0) / 2
                while await self.is_alive() and loop.time() < deadline:
                    await asyncio.sleep(0.02)
                if not await self.is_alive():
                    await self.finish_shutdown()          # reaps the process, which has exited
            # Finds the kernel gone (and only cleans up), or still busy (interrupts it, then shuts it down).
            await super().shutdown_kernel(now=now, restart=restart)

        async def cleanup_resources(self, restart: bool = False) -> None:
            await super().cleanup_resources(restart=restart)
            if not restart:
                self._remove_folder()

        def _remove_folder(self) -> None:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = None

    return LocalKernelManager


def _course_engine():
    """papermill's nbclient engine, with the kernel's environment and working folder passed to nbclient
    (papermill's own engine starts the kernel in papermill's process environment), and a local kernel
    manager (`local_kernel_manager`)."""
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.utils import merge_kwargs, remove_args

    class CourseEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None,
                                     stderr_file=None, start_timeout=60, execution_timeout=None,
                                     kernel_env=None, kernel_cwd=None, ran=None, **kwargs):
            kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
            client = PapermillNotebookClient(nb_man, **merge_kwargs(
                kwargs, timeout=execution_timeout, startup_timeout=start_timeout, kernel_name=kernel_name,
                log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                kernel_manager_class=local_kernel_manager()))
            try:
                return client.execute(env=kernel_env, cwd=kernel_cwd)
            finally:
                if ran is not None:
                    ran.append(nb_man.nb)          # what ran, also when papermill then raises

    papermill_engines.register("course", CourseEngine)     # papermill's public registry; registering again replaces
    return "course"


def run_notebook(notebook: nbformat.NotebookNode, cwd: Path, timeout: int | None = None,
                 threads: int | None = None, env: dict[str, str] | None = None,
                 record_timing: bool = False, parameters: dict | None = None) -> str | None:
    """Execute `notebook` with papermill in a fresh kernel started in `cwd`, updating it in place; the
    error (the cell and the exception), or None.

    The kernel's environment is `tool_env(env, threads)`: passed to the kernel only. `parameters` fill
    the cell tagged `parameters` (papermill injects a cell after it). Without parameters and without
    `record_timing` the executed notebook keeps its cells' metadata, so it still hashes like its source in
    jupyter-cache (papermill's own per-cell records are dropped)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    ran: list[nbformat.NotebookNode] = []
    try:
        papermill.execute_notebook(
            notebook, None, parameters=parameters or None, engine_name=_course_engine(), kernel_name=KERNEL,
            progress_bar=False, log_output=False, execution_timeout=timeout, record_timing=record_timing,
            kernel_env=tool_env(env, threads), kernel_cwd=str(cwd), ran=ran)
        error = None
    except PapermillExecutionError as failure:
        # papermill marks the failing cell in the notebook and puts a note on the top (its failure report).
        error = f"cell {failure.cell_index} raised {failure.ename}: {failure.evalue}"
    except CellTimeoutError as failure:
        error = f"a cell timed out: {failure}"
    except DeadKernelError as failure:
        error = f"the kernel died: {failure}"
    if not ran:
        return error
    executed = ran[0]
    if not parameters and len(executed.cells) == len(notebook.cells):
        for source, cell in zip(notebook.cells, executed.cells):
            timing = cell.metadata.get("execution") if record_timing else None
            cell.metadata = copy.deepcopy(source.metadata)
            if timing:
                cell.metadata["execution"] = timing
    notebook.cells = executed.cells
    notebook.metadata = executed.metadata
    # papermill records its input there: here the notebook object itself, which would then contain itself.
    notebook.metadata.get("papermill", {}).pop("input_path", None)
    return error


def execute(source: Path, output: Path, threads: int | None = None, env: dict[str, str] | None = None,
            timeout: int | None = None, record_timing: bool = False) -> Execution:
    """Run one notebook top to bottom in a fresh kernel, in its own folder, and save the result."""
    import time

    started = time.perf_counter()
    notebook = read_notebook(source)
    error = run_notebook(notebook, source.parent, timeout=timeout, threads=threads, env=env,
                         record_timing=record_timing)
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, output)
    return Execution(source, output, error, round(time.perf_counter() - started, 3))


def executed_name(source: Path, root: Path | None = None) -> Path:
    """Where the executed copy of a notebook goes, relative to an output folder."""
    return source.relative_to(root or COURSE.root).with_suffix(".ipynb")


def execute_all(sources: list[Path], out_dir: Path, workers: int | None = None,
                timeout: int | None = None, root: Path | None = None,
                threads: int | None = None) -> dict[Path, Execution]:
    """Execute every notebook once, `workers` at a time (default: one per core), each kernel on its
    share of the cores (`kernel_threads`) unless `threads` says otherwise. The workers are spawned, not
    forked: a caller may run this in a thread while its other threads hold locks (the test session does)."""
    if not sources:
        return {}
    workers = workers or os.cpu_count() or 1
    threads = threads or kernel_threads(workers)       # as many threads as a full batch gets, however few run
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {
            source: pool.submit(execute, source, out_dir / executed_name(source, root), threads, None, timeout)
            for source in sources
        }
        return {source: future.result() for source, future in futures.items()}
