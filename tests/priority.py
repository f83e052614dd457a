"""The session's background work (the lessons, the catalog's fast path, the lessons' reruns) runs at a lower CPU
priority than the tests.

The suite keeps both cores busy: the tests in the foreground wait on servers, browsers, grading workers and
time limits, and the background fills what they leave. At equal priority the background also takes half of what
they could have used, and the tests' own chain of work, which decides when the run ends, waits for it; at a lower
priority the background takes only what the tests leave, and finishes in the idle time after. On Linux a
thread's niceness is its own (nice(2) changes the calling thread's), and the processes and threads it starts
inherit it: kernels, the fast path's processes, a process pool's workers. The site's build and its browser tour
are not lowered: a page load starved of CPU could outlast a browser's timeout.
"""

from __future__ import annotations

import os
import threading

NICENESS = 10


def lower_this_thread() -> None:
    """From now on this thread, and whatever it starts, yields the CPU to the tests."""
    os.nice(NICENESS)


def at_lower_priority(job, *args, **kwargs):
    """job(*args, **kwargs) in a thread of its own at lower priority (a thread cannot take its priority back
    without privilege): its result, or its exception raised here."""
    from tests import markers

    outcome: dict = {}

    def run() -> None:
        markers.BACKGROUND.active = True          # charged to no test, as the thread that asked
        try:
            lower_this_thread()
            outcome["result"] = job(*args, **kwargs)
        except BaseException as error:            # noqa: BLE001 (re-raised in the caller)
            outcome["error"] = error

    thread = threading.Thread(target=run, name=f"{threading.current_thread().name}-lowered", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
