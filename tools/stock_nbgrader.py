"""Stock `nbgrader autograde`, the reference the course's grading engine is compared with.

Instructors who grade from the formgrader, or type `nbgrader autograde` themselves, get this path; the
course's engine (autograder.classgrader.grade_class) runs nbgrader's own Autograde converter in parallel workers and must
give the same grades, comments and feedback. tests/test_grade_class.py and bench/grading.py compare the two.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.course import kernel_threads
from tools.grading import Submission, copy_course, hand_in, nbgrader


def autograde(course: Path, assignment: str, env: dict[str, str] | None = None, threads: int | None = None):
    """`nbgrader autograde ASSIGNMENT` from the course's autograder/ folder, exactly as an instructor types
    it. Not checked: nbgrader exits non-zero when any one submission fails, and the others still count."""
    return nbgrader(course, "autograde", assignment, check=False, env=env, threads=threads)


def autograde_in_shards(course: Path, submissions: list[Submission], workers: int | None = None,
                        env: dict[str, str] | None = None) -> dict[str, Path]:
    """Every submission graded by stock `nbgrader autograde`, `workers` copies of the course at a time.

    nbgrader's SQLite gradebook takes one writer at a time, so each worker grades in its own copy of
    `course` (which must have every assignment generated), with its own gradebook; students are dealt to
    the copies round robin. Returns student -> the course copy that graded them.
    """
    workers = max(1, min(workers or os.cpu_count() or 1, len(submissions)))
    shards = []
    for index in range(workers):
        # A new folder per call: two classes graded from the same course must never share a copy.
        folder = Path(tempfile.mkdtemp(prefix=f"{Path(course).name}-stock{index}-", dir=Path(course).parent))
        shards.append(copy_course(course, folder / "course"))
    placed: dict[str, Path] = {}
    for index, submission in enumerate(submissions):
        placed[submission.student] = shards[index % workers]
        hand_in(placed[submission.student], [submission])
    threads = kernel_threads(workers)

    def grade_shard(shard: Path) -> None:
        for assignment in sorted({s.assignment for s in submissions if placed[s.student] == shard}):
            autograde(shard, assignment, env, threads)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(grade_shard, shards))
    return placed
