"""Find the course's notebooks and execute them with papermill, several at a time.

Lessons are MyST Markdown notebooks (book/*.md), which papermill cannot read, so they are converted
with jupytext first. Assignment masters are plain .ipynb files under solutions/.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import yaml

REPO = Path(__file__).resolve().parents[1]


def toc_files() -> list[Path]:
    """Every page _toc.yml lists, in reading order, as paths of existing source files."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    entries = [toc["root"]]
    for part in toc.get("parts", []):
        entries += [chapter["file"] for chapter in part.get("chapters", [])]
    pages = []
    for entry in entries:
        matches = [REPO / f"{entry}{suffix}" for suffix in (".md", ".ipynb") if (REPO / f"{entry}{suffix}").exists()]
        if not matches:
            raise FileNotFoundError(f"_toc.yml lists {entry}, which has no .md or .ipynb file")
        pages.append(matches[0])
    return pages


def is_notebook(path: Path) -> bool:
    """True for .ipynb files and for MyST Markdown files with jupytext front matter."""
    if path.suffix == ".ipynb":
        return True
    text = path.read_text()
    return text.startswith("---") and "format_name: myst" in text.split("\n---", 1)[0]


def lesson_notebooks() -> list[Path]:
    return [page for page in toc_files() if is_notebook(page)]


def solution_notebooks() -> list[Path]:
    return sorted((REPO / "solutions").glob("*/*.ipynb"))


def all_notebooks() -> list[Path]:
    return lesson_notebooks() + solution_notebooks()


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)


@dataclass
class Execution:
    source: Path
    output: Path
    error: str | None = None     # None when every cell ran


def execute(source: Path, output: Path, threads: int | None = None) -> Execution:
    """Run one notebook top to bottom in a fresh kernel, in its own folder, and save the result."""
    import papermill

    if threads:
        # Inherited by the kernel: two kernels sharing two cores should not each start two threads.
        os.environ["OMP_NUM_THREADS"] = str(threads)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            read_notebook(source), str(output), cwd=str(source.parent),
            kernel_name="python3", progress_bar=False, log_output=False,
        )
    except papermill.PapermillExecutionError as error:
        return Execution(source, output, f"cell {error.cell_index} raised {error.ename}: {error.evalue}")
    return Execution(source, output)


def executed_name(source: Path) -> Path:
    """Where the executed copy of a notebook goes, relative to an output folder."""
    return source.relative_to(REPO).with_suffix(".ipynb")


def execute_all(sources: list[Path], out_dir: Path, workers: int | None = None) -> dict[Path, Execution]:
    """Execute every notebook once, `workers` at a time (default: one per core)."""
    workers = workers or os.cpu_count() or 1
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            source: pool.submit(execute, source, out_dir / executed_name(source), threads)
            for source in sources
        }
        return {source: future.result() for source, future in futures.items()}
