"""Running a lesson again on a chosen number of CPU threads, from a test."""

import os
from contextlib import contextmanager


@contextmanager
def passive_openmp():
    """Restore the OpenMP variables `tools.notebooks.execute(threads=...)` sets for its kernel. Two
    threads also get OMP_WAIT_POLICY=passive: on a busy machine, threads that spin while they wait for
    each other can make a run ten times slower, and the wait policy does not change a single result."""
    saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
