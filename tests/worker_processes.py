"""The grading workers of this test process's local cluster, for the tests that watch their memory."""

from __future__ import annotations

from pathlib import Path

import psutil


def local_workers() -> list[psutil.Process]:
    """The Dask workers a local cluster started from this process runs now: the children of multiprocessing's fork
    server, where autograder/classgrader/cluster.py forks them (not the server itself, not the resource tracker, not a kernel
    or sandbox under a worker)."""
    found = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.forkserver" in " ".join(child.cmdline()):
                found += child.children()
        except psutil.Error:
            pass
    return found


def peak_kb(pid: int) -> int:
    """A process's peak resident memory so far (VmHWM, exact whenever read), in KB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
