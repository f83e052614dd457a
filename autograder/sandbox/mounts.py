"""The sandbox's file system, as bubblewrap's arguments: built from nothing (bwrap's root is an empty tmpfs), with
only the system's programs and libraries, the Python environment, private size-limited /tmp and /dev/shm, the
hand-in's files copied into the kernel's working folder, the stub over the course's reference module, and the
kernel's socket folder. What is readable is declared in grading_environment.py; this module spells it for bwrap.
The launcher (sandboxed_kernel.py) and the checker's parent (checker/session.py) both build on base_argv."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

from autograder import grading_environment
from autograder.grading_environment import value

HERE = Path(__file__).resolve().parent


WORK = "/tmp/submission"              # the kernel's working folder inside the sandbox


STUB = HERE / "stubs" / "gptcourse"


def masked_paths(courses: list[str]) -> list[str]:
    """The folders grading_environment.never_readable names that exist, resolved."""
    existing = []
    for path in grading_environment.never_readable(courses):
        real = os.path.realpath(path)
        if os.path.isdir(real) and real != "/" and real not in existing:
            existing.append(real)
    return existing


def python_paths() -> list[str]:
    """The Python environment the kernel runs, wherever it lives (a venv in the repository, pyenv in a home)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    paths |= {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and "site-packages" in p}
    return sorted(paths)


def inside(path: str, folders: list[str]) -> bool:
    return any(path == folder or path.startswith(folder + os.sep) for folder in folders)


NBGRADER_RECORDS = ("timestamp.txt", "submission_secret.txt")     # nbgrader's, beside the hand-in: not the kernel's


def handed_in(folder: str, budget: int):
    """(path in the kernel's WORK, open descriptor) for each file of the hand-in the kernel gets, never following a
    link, within `budget` bytes: every regular file but notebooks (nbgrader writes the notebook it grades into
    this folder before running it, its test cells restored from the gradebook, hidden parts included, and the
    kernel runs its cells, never reads it) and nbgrader's own records. The hidden inputs' key reads the same
    files (plugins/checker_link.hand_in_key): what the kernel can read of the hand-in is what a resubmission changes."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        relative = os.path.relpath(root, folder)
        target = WORK if relative == "." else os.path.join(WORK, relative)
        if relative != ".":
            yield target, None
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            if name.endswith(".ipynb") or (relative == "." and name in NBGRADER_RECORDS):
                continue
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue                       # a link, or unreadable: not copied
            size = os.fstat(fd).st_size
            if not stat.S_ISREG(os.fstat(fd).st_mode) or size > budget:
                os.close(fd)
                continue
            budget -= size
            yield os.path.join(target, name), fd


def copy_in(folder: str, budget: int) -> tuple[list[str], list[int]]:
    """bwrap arguments that copy the hand-in's files (handed_in) into WORK."""
    argv, fds = ["--dir", WORK], []
    for path, fd in handed_in(folder, budget):
        if fd is None:
            argv += ["--dir", path]
            continue
        os.set_inheritable(fd, True)
        fds.append(fd)
        argv += ["--perms", "0644", "--file", str(fd), path]
    return argv, fds


def copy_budget() -> int:
    """What the hand-in's files may take of the kernel's disk: half of it."""
    return int(value("COURSE_GRADING_DISK_MB") * 2**20) // 2


def data(text: str | bytes) -> int:
    """A file descriptor bwrap reads `text` from (--ro-bind-data, --seccomp); inherited across exec."""
    read, write = os.pipe()
    os.write(write, text if isinstance(text, bytes) else text.encode())     # far below a pipe's buffer
    os.close(write)
    os.set_inheritable(read, True)
    return read


def users() -> tuple[str, str]:
    """/etc/passwd and /etc/group of the sandbox: root (at its usual home, empty or absent here) and the grader's
    user, at home in the working folder (the machine's own list names its users and their homes)."""
    uid, gid = os.getuid(), os.getgid()
    passwd = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    group = ["root:x:0:"]
    if uid:
        passwd.append(f"student:x:{uid}:{gid}:student:{WORK}:/usr/sbin/nologin")
    if gid:
        group.append(f"student:x:{gid}:")
    return "\n".join(passwd) + "\n", "\n".join(group) + "\n"


def base_argv(courses: list[str] | None = None) -> tuple[list[str], list[int]]:
    """The file system every sandbox gets, built from nothing (bwrap's root is an empty tmpfs): the system's
    programs and libraries and the Python environment read-only, private size-limited /tmp and /dev/shm,
    /dev and /proc; no other path of the machine exists in it. Returns bwrap's arguments and the file
    descriptors they name."""
    disk = int(value("COURSE_GRADING_DISK_MB") * 2**20)
    argv, fds = ["bwrap"], []
    for path in [*grading_environment.SYSTEM_PATHS, *grading_environment.SYSTEM_FILES]:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]     # /bin -> usr/bin on a merged /usr
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    for path, text in zip(("/etc/passwd", "/etc/group"), users()):
        fds.append(data(text))
        argv += ["--ro-bind-data", str(fds[-1]), path]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    # Files written by the submission: one size-limited tmpfs for /tmp (the working folder lives there), a
    # small one for /dev/shm. Both count as memory in the cgroup.
    argv += ["--size", str(disk), "--tmpfs", "/tmp", "--size", str(min(disk, 256 * 2**20)), "--tmpfs", "/dev/shm"]
    # The Python environment wherever it lives, only its own folders (a venv inside the course's checkout
    # brings nothing else of the checkout); parents first, so a folder inside another is mounted over it.
    python = sorted(python_paths(), key=lambda p: p.count("/"))
    masked = masked_paths(courses or [])
    for path in python:
        if not inside(path, [*python[:python.index(path)], *grading_environment.SYSTEM_PATHS]):
            argv += ["--ro-bind", path, path]
    # Belt and braces: the course, its checkout and the homes stay empty even where one lies inside a
    # readable path (a tmpfs of one page: mount points can still be made in it, and nothing of size written);
    # the Python environment inside one of them is mounted back.
    for path in masked:
        if inside(path, [*grading_environment.SYSTEM_PATHS, *python]):
            argv += ["--size", "4096", "--tmpfs", path]
            argv += [arg for inner in python if inside(inner, [path]) for arg in ("--ro-bind", inner, inner)]
    return argv, fds


def closed_argv() -> list[str]:
    """The last options: nothing the submission can write outside its size-limited folders (the root and /dev
    are tmpfs without a size limit, read-only once every mount point is made)."""
    return ["--remount-ro", "/dev", "--remount-ro", "/"]


def rule_stubs() -> list[str]:
    """Mount the stub over the course's reference module, wherever it is installed."""
    spec = importlib.util.find_spec("gptcourse")
    if spec is None or not spec.submodule_search_locations:
        return []
    location = os.path.realpath(list(spec.submodule_search_locations)[0])
    return ["--ro-bind", str(STUB), location]


SOCKET_FOLDER_BYTES = 64 * 2**10     # sockets take no space; a tmpfs this small holds nothing else of size


def socket_argv(connection: dict) -> list[str]:
    """The kernel's sockets, in a tiny tmpfs of their own inside the sandbox at the path the connection file
    names (so the kernel's view of its connection is unchanged): nothing written there escapes the limits."""
    if connection.get("transport") != "ipc":
        return []
    return ["--size", str(SOCKET_FOLDER_BYTES), "--tmpfs", os.path.dirname(os.path.abspath(connection["ip"]))]
