"""One control group per grading kernel: memory and process limits for the whole submission.

A per-process limit (setrlimit) lets a notebook multiply its share: three children of 1.5 GB each and
1.5 GB in /dev/shm each stay under a 4 GB address-space limit. A cgroup counts them all together, tmpfs
pages included, and its `pids` controller caps the processes and threads.

The launcher (sandboxed_kernel.py) creates the group `course-grading/<kernel id>@<owner>` below the group an
admin delegated to the grading account (COURSE_GRADING_CGROUP_PARENT; on a hub the grader is never root), or
else below its own cgroup, and moves itself in before it starts bubblewrap, so everything the kernel starts
is counted. After
the notebook ran, the grader (guarded_execute.GuardedExecute) reads the group's events (a process killed for
memory, a fork refused), kills whatever is left and removes the group.

The owner is the grader that started the launcher (its process id, start time and PID namespace): a group
belongs to it until it removes it. Launchers run side by side (two grading workers, two courses on one machine), so a
launcher removes only groups whose owner has gone (`sweep`), never one another grader has just made and
not yet entered or not yet read.

Whether a submission may be graded without a group is declared in grading_environment.py
(COURSE_GRADING_CGROUPS): `required` stops the launcher with a message; `optional` falls back to the
per-process limits, says so on the launcher's standard error, and the grader flags the submission.

Works with cgroup v1 (separate `memory` and `pids` hierarchies) and v2 (one unified hierarchy with
both controllers delegated). Where neither can be written (an unprivileged user without delegation, a
locked-down container), `available()` is False and the launcher falls back to per-process limits;
the grader page says what that loses, the instructors' page how an admin delegates a group, and
`python -m autograder.sandbox.preflight` whether it worked. On v2 the kernel's launcher must start inside the
delegated group (the kernel moves between two of its groups, which needs write access to the group that
holds both): systemd's `Delegate=` and `DelegateSubgroup=` on the grader's unit do that.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from autograder import grading_environment

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
    """Where our groups go: {'memory': dir, 'pids': dir} (v1) or {'unified': dir} (v2), or None. Below the
    group an admin delegated to the grading account (grading_environment.cgroup_parent), else below this
    process's own group."""
    own = _own_paths()
    delegated = grading_environment.cgroup_parent()
    v1 = {c: ROOT / c / (delegated or own[c]).lstrip("/") / GROUP for c in ("memory", "pids")
          if c in own and (ROOT / c / "cgroup.procs").exists()}
    if len(v1) == 2:
        return v1
    if (ROOT / "cgroup.controllers").exists() and "" in own:
        base = ROOT / (delegated or own[""]).lstrip("/")
        try:
            offered = set((base / "cgroup.controllers").read_text().split())
        except OSError:                      # a delegated group that does not exist
            return None
        if {"memory", "pids"} <= offered:
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
        """Kill what is left and remove the group. A killed process leaves its group only once the kernel has
        torn it down, and a group with a process in it cannot be removed: on a busy machine that took longer than
        one try (a group was left behind until the next launcher's sweep), so the removal waits for it, briefly."""
        deadline = time.monotonic() + 5
        while True:
            self.kill_all()
            for directory in list(self.dirs.values()):
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    continue
            if not any(directory.exists() for directory in self.dirs.values()) or time.monotonic() > deadline:
                return
            time.sleep(0.05)


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
            if controller == "unified":
                # v2 hands a controller to a group only where its parent enables it for its children: the
                # delegated group (which holds no process of its own, systemd's DelegateSubgroup=) for
                # course-grading, course-grading for each kernel's group. Where this process's own group is the
                # parent, it holds processes and cannot: its controllers must already be enabled.
                if grading_environment.cgroup_parent():
                    try:
                        _write(parent.parent / "cgroup.subtree_control", "+memory +pids")
                    except OSError:
                        pass
                parent.mkdir(exist_ok=True)
                try:
                    _write(parent / "cgroup.subtree_control", "+memory +pids")
                except OSError:
                    pass
            else:
                parent.mkdir(exist_ok=True)
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


def started(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), or None if there is no such process: with its id,
    it names one process, even after the id is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def pid_namespace() -> str:
    """This process's PID namespace: process ids mean something only inside it (containers sharing one cgroup
    hierarchy each have their own)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def owner_tag(pid: int) -> str | None:
    start = started(pid)
    return None if start is None else f"{pid}.{start}.{pid_namespace()}"


def owner_alive(group_name: str) -> bool:
    """Whether the grader that owns the group `<kernel id>@<pid>.<start>.<pid namespace>` may still run. A group
    of another PID namespace is never judged from here (its owner's id means nothing in ours); a name without
    an owner, left by an older launcher, counts as owned by no one."""
    _, _, tag = group_name.rpartition("@")
    pid, _, rest = tag.partition(".")
    start, _, namespace = rest.partition(".")
    if namespace and namespace != pid_namespace():
        return True
    return bool(pid.isdigit() and start) and started(int(pid)) == start


def find(name: str) -> Cgroup | None:
    """The group a launcher created for kernel `name`, if it exists."""
    parents = _parents()
    if parents is None:
        return None
    dirs = {}
    for controller, parent in parents.items():
        found = sorted(parent.glob(f"{name}@*")) if parent.is_dir() else []
        if not found:
            return None
        dirs[controller] = found[0]
    return Cgroup(dirs)


def sweep() -> None:
    """Remove groups whose owner has gone (a grader killed before it could clean up); empty ones only."""
    parents = _parents() or {}
    for parent in parents.values():
        if parent.is_dir():
            for child in parent.iterdir():
                if child.is_dir() and not owner_alive(child.name):
                    try:
                        child.rmdir()       # fails, harmlessly, while processes are still inside
                    except OSError:
                        pass


class CgroupRequired(SystemExit):
    pass


def enter(name: str, memory_bytes: int, processes: int, required: bool | None = None,
          owner: int | None = None) -> Cgroup | None:
    """The launcher's step: clear groups left by graders that have gone, create the group of kernel `name` for
    the grader `owner` (default: this process's parent, the grader that started the launcher) and move this
    process into it. Where that fails: raise CgroupRequired with the reason if cgroups are required
    (`required`, default grading_environment's setting), else say so on standard error and return None."""
    if required is None:
        required = grading_environment.cgroups_required()
    tag = owner_tag(os.getppid() if owner is None else owner)
    sweep()
    problem = None
    group = create(f"{name}@{tag}", memory_bytes, processes) if tag else None
    if group is None:
        problem = "no control group can be created here (" + (
            "no writable cgroup hierarchy with the memory and pids controllers" if _parents() is None
            else "the course-grading group cannot be written") + ")"
    else:
        try:
            group.add(os.getpid())
        except OSError as error:
            group.remove()
            group, problem = None, f"this process cannot enter its control group ({error})"
    if group is None:
        if required:
            raise CgroupRequired(f"course grading: {problem}, and COURSE_GRADING_CGROUPS=required: this submission "
                                 "is not graded. Grade on a machine with cgroups, or set COURSE_GRADING_CGROUPS="
                                 "optional to grade with per-process limits only.")
        print(f"course grading: {problem}; COURSE_GRADING_CGROUPS=optional, so the limits are per process "
              "(a submission's children each get their own share)" + (
                  ", and as root its processes are not limited at all (RLIMIT_NPROC does not bind root)"
                  if os.getuid() == 0 else ""), file=sys.stderr, flush=True)
    return group
