"""Find the course's notebooks and execute them with nbclient (what jupyter-cache and Jupyter Book use),
several at a time.

Lessons are MyST Markdown notebooks (book/*.md), read with myst-nb's own reader, the one Jupyter Book
reads them with, so that an executed lesson matches the notebook Jupyter Book looks up in the execution
cache (tools/cache.py). Assignment masters are plain .ipynb files under solutions/.

Each kernel gets its environment from `tools.course.tool_env` (the threads it may use, anything the
caller adds); the calling process's own environment is never changed.
"""

from __future__ import annotations

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


def lesson_notebooks() -> list[Path]:
    return COURSE.lessons()


def solution_notebooks() -> list[Path]:
    return COURSE.master_notebooks()


def all_notebooks() -> list[Path]:
    return COURSE.notebooks()


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


def run_notebook(notebook: nbformat.NotebookNode, cwd: Path, timeout: int | None = None,
                 allow_errors: bool = False, threads: int | None = None, env: dict[str, str] | None = None,
                 record_timing: bool = False) -> str | None:
    """Execute `notebook` in place in a fresh kernel started in `cwd`; the error, or None.

    The kernel's environment is `tool_env(env, threads)`: passed to the kernel only. Without
    `record_timing` nbclient adds no cell metadata, so the executed notebook still hashes like its
    source in jupyter-cache."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    client = NotebookClient(notebook, timeout=timeout, allow_errors=allow_errors, kernel_name=KERNEL,
                            record_timing=record_timing, resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute(env=tool_env(env, threads), cwd=str(cwd))
    except CellExecutionError as error:
        index = next((i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and any(
            output.get("output_type") == "error" for output in cell.get("outputs", []))), "?")
        return f"cell {index} raised {error.ename}: {error.evalue}"
    except CellTimeoutError as error:
        return f"a cell timed out: {error}"
    except DeadKernelError as error:
        return f"the kernel died: {error}"
    return None


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
                timeout: int | None = None, root: Path | None = None) -> dict[Path, Execution]:
    """Execute every notebook once, `workers` at a time (default: one per core), each kernel on its
    share of the cores (`kernel_threads`)."""
    if not sources:
        return {}
    workers = workers or os.cpu_count() or 1
    threads = kernel_threads(workers)           # as many threads as a full batch gets, however few run
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            source: pool.submit(execute, source, out_dir / executed_name(source, root), threads, None, timeout)
            for source in sources
        }
        return {source: future.result() for source, future in futures.items()}
