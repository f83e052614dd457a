"""One control group per grading kernel: memory and process limits for the whole submission.

A per-process limit (setrlimit) lets a notebook multiply its share: three children of 1.5 GB each and
1.5 GB in /dev/shm each stay under a 4 GB address-space limit. A cgroup counts them all together, tmpfs
pages included, and its `pids` controller caps the processes and threads.

The launcher (sandboxed_kernel.py) creates the group `course-grading/<kernel id>` below its own cgroup
and moves itself in before it starts bubblewrap, so everything the kernel starts is counted. After the
notebook ran, the grader (course_grading.GuardedExecute) reads the group's events (a process killed for
memory, a fork refused), kills whatever is left and removes the group.

Works with cgroup v1 (separate `memory` and `pids` hierarchies) and v2 (one unified hierarchy with
both controllers delegated). Where neither can be written (an unprivileged user without delegation, a
locked-down container), `available()` is False and the launcher falls back to per-process limits;
the grader page says what that loses.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
GROUP = "course-grading"


def _own_paths() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _parents() -> dict[str, Path] | None:
    """Where our groups go: {'memory': dir, 'pids': dir} (v1) or {'unified': dir} (v2), or None."""
    own = _own_paths()
    v1 = {c: ROOT / c / own[c].lstrip("/") / GROUP for c in ("memory", "pids")
          if c in own and (ROOT / c / "cgroup.procs").exists()}
    if len(v1) == 2:
        return v1
    if (ROOT / "cgroup.controllers").exists() and "" in own:
        base = ROOT / own[""].lstrip("/")
        if {"memory", "pids"} <= set((base / "cgroup.controllers").read_text().split()):
            return {"unified": base / GROUP}
    return None


def _write(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


class Cgroup:
    def __init__(self, dirs: dict[str, Path]):
        self.dirs = dirs

    @property
    def v2(self) -> bool:
        return "unified" in self.dirs

    def add(self, pid: int) -> None:
        for directory in self.dirs.values():
            _write(directory / "cgroup.procs", str(pid))

    def pids(self) -> set[int]:
        found = set()
        for directory in self.dirs.values():
            try:
                found |= {int(p) for p in (directory / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def events(self) -> dict[str, int]:
        """How often a process was killed for memory, and how often a new process was refused."""
        counts = {"oom_kill": 0, "pids_max": 0}
        memory = self.dirs.get("unified", self.dirs.get("memory"))
        pids = self.dirs.get("unified", self.dirs.get("pids"))
        for path, key, name in ((memory / ("memory.events" if self.v2 else "memory.oom_control"), "oom_kill", "oom_kill"),
                                (pids / "pids.events", "max", "pids_max")):
            try:
                for line in path.read_text().splitlines():
                    field, _, number = line.partition(" ")
                    if field == key:
                        counts[name] = int(number)
            except OSError:
                pass
        return counts

    def kill_all(self) -> None:
        for _ in range(5):
            remaining = self.pids()
            if not remaining:
                return
            for pid in remaining:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        self.kill_all()
        for directory in self.dirs.values():
            try:
                directory.rmdir()
            except OSError:
                pass


def available() -> bool:
    parents = _parents()
    if parents is None:
        return False
    try:
        for parent in parents.values():
            parent.mkdir(exist_ok=True)
            probe = parent / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            probe.rmdir()
        return True
    except OSError:
        return False


def create(name: str, memory_bytes: int, processes: int) -> Cgroup | None:
    """A new group with the limits, or None where cgroups cannot be written."""
    parents = _parents()
    if parents is None:
        return None
    dirs = {}
    try:
        for controller, parent in parents.items():
            parent.mkdir(exist_ok=True)
            if controller == "unified":
                try:
                    _write(parent / "cgroup.subtree_control", "+memory +pids")
                except OSError:
                    pass
            directory = parent / name
            directory.mkdir(exist_ok=True)
            dirs[controller] = directory
        group = Cgroup(dirs)
        memory = dirs.get("unified", dirs.get("memory"))
        pids = dirs.get("unified", dirs.get("pids"))
        if group.v2:
            _write(memory / "memory.max", str(memory_bytes))
            try:
                _write(memory / "memory.swap.max", "0")
            except OSError:
                pass
        else:
            _write(memory / "memory.limit_in_bytes", str(memory_bytes))
            try:                                    # no swapping past the limit, where swap is accounted
                _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
            except OSError:
                pass
        _write(pids / "pids.max", str(processes))
        return group
    except OSError:
        Cgroup(dirs).remove()
        return None


def find(name: str) -> Cgroup | None:
    """The group a launcher created for kernel `name`, if it exists."""
    parents = _parents()
    if parents is None:
        return None
    dirs = {controller: parent / name for controller, parent in parents.items()}
    return Cgroup(dirs) if all(d.is_dir() for d in dirs.values()) else None


def sweep() -> None:
    """Remove groups left by kernels that were killed before the grader could clean up (empty ones only)."""
    parents = _parents() or {}
    for parent in parents.values():
        if parent.is_dir():
            for child in parent.iterdir():
                if child.is_dir():
                    try:
                        child.rmdir()       # fails, harmlessly, while processes are still inside
                    except OSError:
                        pass
