"""What a graded notebook costs before and after its cells: warm kernels against cold ones (issue 41).

For each kind, a grading process (this file run as a script, with COURSE_GRADING_KERNELS set) grades one-cell
notebooks one after another with the course's executor (GuardedExecute), inside a cgroup of the cpuacct
controller made for it, which counts the CPU time of every process it and its descendants ever ran: the grader,
the launchers, bubblewrap, the warm parent and the children it forks, the kernels. Graded once and then
1 + N times, the difference divided by N is what one more notebook costs (the warm parent's start-up falls out:
it is paid once per grading process, and is reported on its own). The cell is `pass`, so the figure is the
kernel's start and shutdown, plus what the grader itself spends per notebook (reported apart as well).

    python -m bench.kernel_startup [--notebooks N]

Needs a writable cpuacct hierarchy (cgroup v1, as root: this machine); elsewhere it says so and measures
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, machine, save

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def grade(count: int) -> dict:
    """In the grading process: grade `count` one-cell notebooks; the grader's own CPU time, and the warm parent's
    start-up (the first notebook's wall time shows it)."""
    import nbformat

    from autograder import grading_environment
    from autograder.sandbox import warm_kernels
    from autograder.plugins.guarded_execute import GuardedExecute

    folder = Path(tempfile.mkdtemp(prefix="bench-kernel-"))
    walls = []
    for index in range(count):
        started = time.monotonic()
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass")])
        executor = GuardedExecute(extra_arguments=grading_environment.kernel_arguments(), startup_timeout=180)
        notebook, resources = executor.preprocess(notebook, {"metadata": {"path": str(folder)}})
        if resources.get("course_grading"):
            raise SystemExit(f"notebook {index} flagged: {resources['course_grading']}")
        walls.append(round(time.monotonic() - started, 3))
    warm_kernels.stop_all()               # the warm parent exits and is waited for: all its CPU time is counted
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {"walls": walls, "grader_cpu_s": own.ru_utime + own.ru_stime}


def measured(kind: str, count: int) -> dict:
    """Grade `count` notebooks with `kind` kernels in a new process inside a cpuacct group of its own."""
    group = CPUACCT / f"bench-kernel-startup-{os.getpid()}-{kind}-{count}"
    group.mkdir()
    try:
        def enter():
            (group / "cgroup.procs").write_text(str(os.getpid()))

        result = subprocess.run([sys.executable, "-m", "bench.kernel_startup", "--grade", str(count)], cwd=REPO,
                                env={**os.environ, "COURSE_GRADING_KERNELS": kind}, preexec_fn=enter,
                                capture_output=True, text=True, check=True)
        total = int((group / "cpuacct.usage").read_text()) / 1e9
        return {**json.loads(result.stdout.strip().splitlines()[-1]), "cpu_s": total}
    finally:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notebooks", type=int, default=8, help="notebooks beyond the first (default 8)")
    parser.add_argument("--grade", type=int, help=argparse.SUPPRESS)       # the grading process's own entry
    args = parser.parse_args(argv)
    if args.grade is not None:
        print(json.dumps(grade(args.grade)))
        return {}
    if not os.access(CPUACCT, os.W_OK):
        print("no writable cpuacct hierarchy here: nothing measured")
        return {"measured": False}
    result: dict = {"machine": machine(), "notebooks": args.notebooks, "measured": True}
    for kind in ("warm", "cold"):
        one, more = measured(kind, 1), measured(kind, 1 + args.notebooks)
        per_notebook = (more["cpu_s"] - one["cpu_s"]) / args.notebooks
        grader = (more["grader_cpu_s"] - one["grader_cpu_s"]) / args.notebooks
        result[kind] = {"cpu_s_per_notebook": round(per_notebook, 3),
                        "grader_cpu_s_per_notebook": round(grader, 3),
                        "sandbox_and_kernel_cpu_s_per_notebook": round(per_notebook - grader, 3),
                        "first_notebook_wall_s": one["walls"][0],
                        "wall_s_per_notebook": round(sum(more["walls"][1:]) / args.notebooks, 3),
                        "first_process_cpu_s": round(one["cpu_s"], 3)}
        print(f"{kind}: {result[kind]}", flush=True)
    # The warm parent's start, paid once per grading process: what the first warm notebook costs beyond a later one.
    result["warm_parent_start_cpu_s"] = round(
        result["warm"]["first_process_cpu_s"] - result["cold"]["first_process_cpu_s"]
        + result["cold"]["cpu_s_per_notebook"] - result["warm"]["cpu_s_per_notebook"], 3)
    result["budget_cpu_s_per_notebook"] = 0.3
    result["within_budget"] = result["warm"]["sandbox_and_kernel_cpu_s_per_notebook"] <= 0.3
    save("kernel_startup", result)
    return result


if __name__ == "__main__":
    main()
