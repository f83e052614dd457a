"""Start a grading kernel inside a bubblewrap sandbox (the kernelspec declared in grading_environment.py).

    python sandboxed_kernel.py CONNECTION_FILE [IPYKERNEL ARGUMENTS...]

What the kernel gets, and why:

- **Its own processes.** A PID namespace: the kernel cannot see or signal any process outside it
  (nbgrader, the grading worker, other kernels), and when the kernel exits every process it started
  dies with it, daemons included. `--die-with-parent` ends the sandbox if the grader goes away.
- **A scratch copy of its folder.** The kernel works in `/tmp/submission`, a copy of the regular files
  of the student's autograded folder (links and special files are not copied), on a private tmpfs of
  limited size. Nothing it writes reaches the autograded folder, which nbgrader writes afterwards.
- **Nothing of the course.** The course root, the code repository (its `.git` included), every home
  folder, `/run` and `/tmp` are replaced by empty folders; only the Python environment, the kernel's
  start-up file, grading_environment.py (the guard's watch list) and the connection file are mounted
  back, read-only, and the kernel's socket folder read-write. The course's reference module `gptcourse`
  is replaced by a stub whose import fails with a message naming the rule.
- **No network**, no capabilities, a new session (no terminal to inject keys into).
- **Limits for the whole submission** (grading_environment.py): a cgroup for memory and processes where the
  machine allows one (cgroups.py), size-limited tmpfs for files, and per-process rlimits as a backstop.

What is hidden, what is readable and which environment variables pass are declared in
grading_environment.py, for the course this file belongs to; this launcher applies them.

`check()` starts a trivial sandbox with the same options; nbgrader_config.py calls it so that grading
refuses with a clear message where bubblewrap cannot start (for example in a container that blocks
user namespaces), instead of failing with a dead kernel for every student.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cgroups  # noqa: E402
import grading_environment  # noqa: E402
from grading_environment import value  # noqa: E402

WORK = "/tmp/submission"              # the kernel's working folder inside the sandbox
STUB = HERE / "sandbox_stubs" / "gptcourse"
NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--new-session", "--die-with-parent", "--cap-drop", "ALL"]


def hidden_paths() -> list[str]:
    """The folders grading_environment.hidden_paths names that exist, resolved: the kernel sees them empty.
    /tmp is replaced by base_argv()."""
    existing = []
    for path in grading_environment.hidden_paths(HERE):
        real = os.path.realpath(path)
        if os.path.isdir(real) and real != "/" and real not in existing:
            existing.append(real)
    # Parents before children, so a folder hidden inside another hidden one is mounted over it.
    return sorted(existing, key=lambda p: p.count("/"))


def python_paths() -> list[str]:
    """The Python environment the kernel runs, wherever it lives (a venv in the repository, pyenv in a home)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    paths |= {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}
    return sorted(paths)


def inside(path: str, folders: list[str]) -> bool:
    return any(path == folder or path.startswith(folder + os.sep) for folder in folders)


def copy_in(folder: str, budget: int) -> tuple[list[str], list[int]]:
    """bwrap arguments that copy the folder's regular files into WORK, never following a link."""
    argv, fds = ["--dir", WORK], []
    for root, dirs, files in os.walk(folder, followlinks=False):
        relative = os.path.relpath(root, folder)
        target = WORK if relative == "." else os.path.join(WORK, relative)
        if relative != ".":
            argv += ["--dir", target]
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue                       # a link, or unreadable: not copied
            size = os.fstat(fd).st_size
            if not stat.S_ISREG(os.fstat(fd).st_mode) or size > budget:
                os.close(fd)
                continue
            budget -= size
            os.set_inheritable(fd, True)
            fds.append(fd)
            argv += ["--perms", "0644", "--file", str(fd), os.path.join(target, name)]
    return argv, fds


def base_argv() -> list[str]:
    """The file system every sandbox gets: the machine read-only, private /tmp, /dev/shm and /proc."""
    disk = int(value("COURSE_GRADING_DISK_MB") * 2**20)
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    hidden = hidden_paths()
    for path in hidden:
        argv += ["--tmpfs", path]
    # Files written by the submission: one size-limited tmpfs for /tmp (the working folder lives there;
    # other kernels' files are not visible), a small one for /dev/shm. Both count as memory in the cgroup.
    argv += ["--size", str(disk), "--tmpfs", "/tmp", "--size", str(min(disk, 256 * 2**20)), "--tmpfs", "/dev/shm"]
    for path in python_paths():
        if inside(path, [*hidden, "/tmp"]):
            argv += ["--ro-bind", path, path]
    return argv


def rule_stubs() -> list[str]:
    """Mount the stub over the course's reference module, wherever it is installed."""
    spec = importlib.util.find_spec("gptcourse")
    if spec is None or not spec.submodule_search_locations:
        return []
    location = os.path.realpath(list(spec.submodule_search_locations)[0])
    return ["--ro-bind", str(STUB), location]


def set_rlimits(memory: int, group: cgroups.Cgroup | None) -> None:
    """Per-process backstops, inherited by bwrap and the kernel (a student cannot raise a hard limit)."""
    cpu = int(value("COURSE_GRADING_CPU_SECONDS"))
    disk = int(value("COURSE_GRADING_DISK_MB") * 2**20)
    # Address space: one runaway allocation fails inside the cell with a clean MemoryError.
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if group is None and os.getuid() != 0:
        # Without a pids cgroup, cap the processes of this user (RLIMIT_NPROC counts all of them).
        mine = sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit() and entry.stat().st_uid == os.getuid())
        processes = mine + int(value("COURSE_GRADING_PROCESSES"))
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def check() -> str | None:
    """None if a sandbox starts here; otherwise what went wrong, for the instructor."""
    try:
        result = subprocess.run([*base_argv(), *NAMESPACES, "--", "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    except subprocess.TimeoutExpired:
        return "bubblewrap did not start within 30 s"
    if result.returncode:
        return (f"bubblewrap cannot create its namespaces here ({result.stderr.strip() or result.returncode}). "
                "In a container, run it with user namespaces allowed (for example `docker run --privileged`, "
                "or `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`)")
    return None


def main(arguments: list[str]) -> None:
    connection_file = os.path.abspath(arguments[0])
    connection = json.load(open(connection_file))
    memory = int(value("COURSE_GRADING_MEMORY_GB") * 2**30)

    cgroups.sweep()
    name = Path(connection_file).stem                 # the grader finds the group by the kernel's id
    group = cgroups.create(name, memory, int(value("COURSE_GRADING_PROCESSES")))
    if group is not None:
        group.add(os.getpid())                        # bwrap and everything below it inherit the group
    set_rlimits(memory, group)

    argv = base_argv()
    files, fds = copy_in(os.getcwd(), int(value("COURSE_GRADING_DISK_MB") * 2**20) // 2)
    argv += files
    for path in [*grading_environment.readable_paths(HERE), connection_file]:
        argv += ["--ro-bind", path, path]
    argv += rule_stubs()
    if connection.get("transport") == "ipc":           # the kernel's sockets: a folder of their own
        sockets = os.path.dirname(os.path.abspath(connection["ip"]))
        argv += ["--bind", sockets, sockets]
    argv += ["--clearenv"]
    for key in grading_environment.KEPT_ENVIRONMENT:
        if key in os.environ:
            argv += ["--setenv", key, os.environ[key]]
    argv += ["--setenv", "HOME", WORK, "--setenv", "TMPDIR", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
             "--setenv", "PYTHONNOUSERSITE", "1", "--chdir", WORK]
    argv += [*NAMESPACES, "--", sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *arguments[1:]]
    os.execvp("bwrap", argv)


if __name__ == "__main__":
    main(sys.argv[1:])
