"""The grading workers of this test process's local cluster, for the tests that watch their memory."""

from __future__ import annotations

import psutil


def local_workers() -> list[psutil.Process]:
    """The Dask workers a local cluster started from this process runs now: the children of multiprocessing's fork
    server, where autograder/cluster.py forks them (not the server itself, not the resource tracker, not a kernel
    or sandbox under a worker)."""
    found = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.forkserver" in " ".join(child.cmdline()):
                found += child.children()
        except psutil.Error:
            pass
    return found
