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
"""

from __future__ import annotations

import copy
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


def _course_engine():
    """papermill's nbclient engine, with the kernel's environment and working folder passed to nbclient
    (papermill's own engine starts the kernel in papermill's process environment)."""
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
                log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file))
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
