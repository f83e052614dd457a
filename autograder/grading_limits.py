"""What one graded submission may take from the grading machine: every limit in one place.

nbgrader_config.py, the sandbox launcher (sandboxed_kernel.py) and the grading plugins
(course_grading.py) all read the limits from here, and the grader page (book/grader.md) prints the same
table (a test checks that they agree). Each limit can be changed with the environment variable of its
name, set in the shell that runs `nbgrader autograde` or `python -m tools.grade_class`.

The limits cover the whole submission, not one process: memory and processes are counted by a cgroup
that holds the kernel and everything it starts (where the machine lets the grader create cgroups; see
`cgroups.py`), and written files land in size-limited tmpfs folders that also count as memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    variable: str
    default: float
    unit: str
    what: str
    why: str

    @property
    def value(self) -> float:
        text = os.environ.get(self.variable)
        return float(text) if text not in (None, "") else self.default


LIMITS = [
    Limit("COURSE_GRADING_CELL_TIMEOUT", 60, "s", "wall time for one cell",
          "every solution cell runs in well under a second; a hanging cell costs a minute, not the class"),
    Limit("COURSE_GRADING_NOTEBOOK_TIMEOUT", 300, "s", "wall time for the whole notebook",
          "a full master grades in under 15 s; many slow cells in a row still end within five minutes"),
    Limit("COURSE_GRADING_CPU_SECONDS", 300, "s", "CPU time of each process of the submission",
          "stops a busy loop that outlives the cell timeout (for example in a child process)"),
    Limit("COURSE_GRADING_MEMORY_GB", 4, "GB", "memory of the whole submission (children, /dev/shm and files included)",
          "the masters peak under 1 GB; 4 GB lets two kernels grade side by side on an 8 GB laptop"),
    Limit("COURSE_GRADING_PROCESSES", 256, "", "processes and threads of the whole submission",
          "a kernel and PyTorch's threads use a few dozen; a fork bomb stops here"),
    Limit("COURSE_GRADING_DISK_MB", 512, "MB", "files written (working folder and /tmp together)",
          "no assignment writes files; a runaway writer fills a private tmpfs, never the grader's disk"),
    Limit("COURSE_GRADING_OUTPUT_CELL_KB", 256, "KB", "output kept from one cell",
          "a screenful of debugging prints is a few KB; the rest is dropped with a visible note"),
    Limit("COURSE_GRADING_OUTPUT_NOTEBOOK_MB", 2, "MB", "output kept from the whole notebook",
          "keeps the grader's memory and every feedback page small, whatever a notebook prints"),
    Limit("COURSE_GRADING_NOTEBOOK_MB", 5, "MB", "size of a submitted notebook at intake",
          "the released notebooks are under 100 KB; a larger file is refused (graded as the release)"),
]
BY_NAME = {limit.variable: limit for limit in LIMITS}


def value(variable: str) -> float:
    return BY_NAME[variable].value


def sandbox_enabled() -> bool:
    """COURSE_GRADING_SANDBOX=0 grades without bubblewrap (only for a machine you trust the code on)."""
    return os.environ.get("COURSE_GRADING_SANDBOX", "1") != "0"


def markdown_table() -> str:
    """The limits as the grader page shows them."""
    rows = ["| Limit | Default | Variable | Why this default |", "| --- | --- | --- | --- |"]
    for limit in LIMITS:
        default = f"{limit.default:g} {limit.unit}".strip()
        rows.append(f"| {limit.what} | {default} | `{limit.variable}` | {limit.why} |")
    return "\n".join(rows)
