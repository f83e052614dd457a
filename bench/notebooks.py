"""Benchmark 1: executing every lesson and solution notebook, as the test command does.

The same parallel execution as `tools.notebooks.execute_all` (one papermill run per notebook, one
worker per core, `cores / workers` threads per kernel), instrumented: per notebook its wall time in
the worker (start-up of the kernel, nbclient, writing the result), the time its cells took inside
the kernel (nbclient's per-cell timing) and the CPU time of the kernel process. The overhead
ratio is wall time / cell time, per notebook and for the whole run (whose wall time benefits from
running notebooks side by side).

    python -m bench.notebooks
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

from bench.common import REPO, machine, save, table, timed
from tools.course import COURSE, kernel_threads
from tools.notebooks import execute, executed_name

# The lessons that promise their reader a CPU budget, as each one's opening cell states it.
BUDGETED_LESSONS = {
    "book/10-tokens-and-evaluation.md": ("Lesson 10 (tokens and evaluation: two trainings)", 60),
    "book/11-training-recipe.md": ("Lesson 11 (the training recipe: twelve trainings)", 90),
    "book/12-looking-inside.md": ("Lesson 12 (looking inside: four trainings)", 90),
}


def cell_seconds(cell) -> float:
    """How long a code cell ran in the kernel: nbclient's timing, from its input to its reply."""
    from datetime import datetime

    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = lambda stamp: datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def instrumented(source: Path, output: Path, threads: int) -> dict:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    run = execute(source, output, threads, record_timing=True)
    wall = time.perf_counter() - started
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    cells = 0.0
    if output.exists():
        notebook = nbformat.read(output, as_version=4)
        cells = sum(cell_seconds(cell) for cell in notebook.cells if cell.cell_type == "code")
    return {
        "notebook": source.relative_to(REPO).as_posix(), "error": run.error,
        "wall_s": round(wall, 3), "cells_s": round(cells, 3),
        "ratio": round(wall / cells, 3) if cells else None,
        # The kernel is the worker's child: its CPU time (start-up, imports and cells) once it exited.
        "kernel_cpu_s": round(children_after.ru_utime + children_after.ru_stime
                              - children.ru_utime - children.ru_stime, 3),
        "executor_cpu_s": round(own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime, 3),
    }


def main() -> dict:
    sources = COURSE.notebooks()
    workers = os.cpu_count() or 1
    threads = kernel_threads(workers)
    record: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-notebooks-") as scratch:
        with timed(record, "total"), ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(instrumented, source, Path(scratch) / executed_name(source), threads)
                       for source in sources]
            rows = [future.result() for future in futures]
    cells = sum(row["cells_s"] for row in rows)
    total = record["total"]
    summary = {
        "notebooks": len(rows), "workers": workers, "threads_per_kernel": threads,
        "wall_s": total["wall_s"], "cells_s": round(cells, 3),
        "ratio_total": round(total["wall_s"] / cells, 3),
        # What running them one after another would cost against the same cells:
        "ratio_sum_of_notebooks": round(sum(row["wall_s"] for row in rows) / cells, 3),
        "kernel_cpu_s": round(sum(row["kernel_cpu_s"] for row in rows), 3),
        "cpu_s": total["cpu_s"], "budget_ratio": 1.3, "load_before": total["load_average_before"],
        "failed": [row["notebook"] for row in rows if row["error"]],
        # Lessons 10 and 11 promise their reader a CPU budget: each kernel's CPU time (imports and
        # start-up included).
        "budgeted_lessons": [
            {"notebook": notebook, "what": what, "budget_cpu_s": budget,
             "cpu_s": next((row["kernel_cpu_s"] for row in rows if row["notebook"] == notebook), None)}
            for notebook, (what, budget) in BUDGETED_LESSONS.items()],
    }
    print(table([[r["notebook"], r["wall_s"], r["cells_s"], r["ratio"], r["kernel_cpu_s"]] for r in rows]
                + [["TOTAL (parallel run)", summary["wall_s"], summary["cells_s"], summary["ratio_total"],
                    summary["kernel_cpu_s"]]],
                ["notebook", "wall s", "cells s", "ratio", "kernel CPU s"]))
    print(f"overhead ratio {summary['ratio_total']} for the run ({workers} workers; budget <= 1.3); "
          f"{summary['ratio_sum_of_notebooks']} notebook by notebook; load average {machine()['load_average']}")
    for lesson in summary["budgeted_lessons"]:
        print(f"{lesson['what']}: {lesson['cpu_s']} CPU-s (budget {lesson['budget_cpu_s']})")
    save("notebooks", {"summary": summary, "per_notebook": rows, "timing": record})
    if summary["failed"]:
        print(f"FAILED: {summary['failed']}", file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
