"""Start a grading kernel inside a bubblewrap sandbox (the kernelspec declared in grading_environment.py).

    python sandboxed_kernel.py CONNECTION_FILE COURSES [IPYKERNEL ARGUMENTS...]

COURSES: the course folders to hide, joined by os.pathsep (guarded_execute.hidden_courses).

What the kernel gets, and why:

- **Its own processes.** A PID namespace: the kernel cannot see or signal any process outside it
  (nbgrader, the grading worker, other kernels), and when the kernel exits every process it started
  dies with it, daemons included. The sandbox ends if the grader goes away, at any moment: the launcher
  asks the kernel to kill it when the process that started it dies (PR_SET_PDEATHSIG, kept through exec
  into bwrap) and then checks that this process is still the grader (a grader killed before that, while the
  launcher started, leaves no sandbox behind); bwrap's `--die-with-parent` passes it on to the sandbox, and the
  drainer (below) kills the sandbox's init when the launcher ends, which a kernel that rewrote init cannot stop.
- **A scratch copy of its folder.** The kernel works in `/tmp/submission`, a copy of the regular files
  of the student's autograded folder (links and special files are not copied), on a private tmpfs of
  limited size. Nothing it writes reaches the autograded folder, which nbgrader writes afterwards.
- **An allow-list, not a deny-list.** bwrap's root starts empty; mounted into it, read-only, are only the
  system's programs and libraries and the few /etc files Python needs (grading_environment.SYSTEM_PATHS
  and SYSTEM_FILES), the Python environment's own folders wherever it lives (python_paths), the kernel's
  start-up file, grading_environment.py (the guard's watch list) and the connection file; /etc/passwd is
  written for the sandbox. Nothing else of the machine exists in it: not the course, wherever it lives,
  its checkout, the exchange, a home. The course, its checkout and the homes are emptied again should one
  lie inside an allowed folder (never_readable). The course's reference module `gptcourse` is replaced by
  a stub whose import fails with a message naming the rule.
- **Writes only inside the limits.** The root and /dev are remounted read-only once every mount point is
  made; the kernel writes only to its size-limited /tmp and /dev/shm, and its sockets live in a 64 KB
  tmpfs of their own at the path the connection file names. The grader reaches them through links in its
  own socket folder to /proc/PID/root of the sandbox (made by a short-lived child of this launcher, told
  the sandbox's first process by bwrap's --info-fd), so the grader's folder is never visible inside.
- **No network**, no capabilities, a new session (no terminal to inject keys into), and no keyring or tracing
  system call (seccomp_filter.py: bwrap loads the program).
- **No descriptor of the grader's.** bwrap passes on only descriptors 0-2, so the launcher replaces them
  first: stdin is /dev/null, stdout and stderr are one pipe. A child of the launcher, outside the sandbox
  (the drainer, in a session of its own), passes at most STDIO_BYTES of it on to the grader's stderr (its log, or the instructor's terminal),
  each line prefixed and with control characters escaped, and drops the rest. The kernel can neither read
  the grader's log nor write into it beyond that, nor change its mode, nor send a terminal escape sequence.
- **Limits for the whole submission** (grading_environment.py): a cgroup for memory and processes
  (cgroups.enter: required or optional, as COURSE_GRADING_CGROUPS says), size-limited tmpfs for files, and
  per-process rlimits as a backstop.

What is readable and which environment variables pass are declared in
grading_environment.py; this launcher applies them.

**Warm or cold.** Where the grader gives the launcher its warm parent's socket (COURSE_GRADING_KERNELS=warm,
the default; warm_kernels.py), the launcher builds the sandbox with exactly the options above but a placeholder
for its command, and the parent (kernel_zygote.py) forks the kernel into it: the kernel joins the sandbox's
namespaces, root and cgroup and drops every capability before any of its code runs (run_warm). The launcher stays
until the kernel ends, then removes the sandbox. If the parent does not answer or its child cannot enter the
sandbox, the launcher removes what it built and starts the kernel cold, in a sandbox built anew, and notes why
beside the kernel's sockets for the grader to flag (cold_start_note). Cold: the launcher becomes bubblewrap,
which starts a new Python inside.

`check()` starts a trivial sandbox with the same options; nbgrader_config.py calls it so that grading
refuses with a clear message where bubblewrap cannot start (for example in a container that blocks
user namespaces), instead of failing with a dead kernel for every student.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import resource
import socket
import stat
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__" and "autograder" not in sys.modules:
    # Run as a script (the kernelspec's argv): the package this file lies in (its sandbox/ folder's parent) is
    # loaded from there, so the launcher runs the same copy as the grader that chose it (on a cluster's worker,
    # the one cluster.CourseCode unpacked), whatever else is installed. Python put this file's folder first on
    # sys.path; it is taken off, so that every other import (gptcourse, found to be stubbed) resolves as
    # the kernel's will.
    _here = Path(__file__).resolve().parent
    _spec = importlib.util.spec_from_file_location("autograder", _here.parent / "__init__.py",
                                                   submodule_search_locations=[str(_here.parent)])
    sys.modules["autograder"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["autograder"])
    if sys.path and os.path.realpath(sys.path[0]) == str(_here):
        del sys.path[0]

from autograder import grading_environment  # noqa: E402
from autograder.sandbox import cgroups, kernel_zygote, seccomp_filter  # noqa: E402
from autograder.checker import line  # noqa: E402
from autograder.grading_environment import value  # noqa: E402

HERE = Path(__file__).resolve().parent

WORK = "/tmp/submission"              # the kernel's working folder inside the sandbox
STUB = HERE / "stubs" / "gptcourse"
NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--new-session", "--die-with-parent", "--cap-drop", "ALL"]


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
    files (guarded_execute.hand_in_key): what the kernel can read of the hand-in is what a resubmission changes."""
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


def rlimits(memory: int, group: cgroups.Cgroup | None) -> dict[str, tuple[int, int]]:
    """Per-process backstops, inherited by bwrap and the kernel (a student cannot raise a hard limit)."""
    cpu = int(value("COURSE_GRADING_CPU_SECONDS"))
    disk = int(value("COURSE_GRADING_DISK_MB") * 2**20)
    # Address space: one runaway allocation fails inside the cell with a clean MemoryError.
    limits = {"RLIMIT_AS": memory, "RLIMIT_CPU": cpu, "RLIMIT_FSIZE": disk, "RLIMIT_CORE": 0}
    if group is None and os.getuid() != 0:
        # Without a pids cgroup, cap the processes of this user (RLIMIT_NPROC counts all of them).
        mine = sum(1 for entry in Path("/proc").iterdir() if entry.name.isdigit() and entry.stat().st_uid == os.getuid())
        limits["RLIMIT_NPROC"] = mine + int(value("COURSE_GRADING_PROCESSES"))
    return {name: (number, number) for name, number in limits.items()}


def set_rlimits(memory: int, group: cgroups.Cgroup | None) -> dict[str, tuple[int, int]]:
    """Apply rlimits() to this launcher (and so to bwrap and a cold kernel); returns them for a warm one."""
    limits = rlimits(memory, group)
    for name, pair in limits.items():
        resource.setrlimit(getattr(resource, name), pair)
    return limits


def check() -> str | None:
    """None if a sandbox starts here; otherwise what went wrong, for the instructor."""
    argv, fds = base_argv()
    try:
        result = subprocess.run([*argv, *closed_argv(), *NAMESPACES, "--", "true"], capture_output=True, text=True,
                                timeout=30, pass_fds=fds)
    except FileNotFoundError:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    except subprocess.TimeoutExpired:
        return "bubblewrap did not start within 30 s"
    finally:
        for fd in fds:
            os.close(fd)
    if result.returncode:
        return (f"bubblewrap cannot create its namespaces here ({result.stderr.strip() or result.returncode}). "
                "In a container, run it with user namespaces allowed (for example `docker run --privileged`, "
                "or `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`)")
    return None


SOCKET_FOLDER_BYTES = 64 * 2**10     # sockets take no space; a tmpfs this small holds nothing else of size


def socket_argv(connection: dict) -> list[str]:
    """The kernel's sockets, in a tiny tmpfs of their own inside the sandbox at the path the connection file
    names (so the kernel's view of its connection is unchanged): nothing written there escapes the limits."""
    if connection.get("transport") != "ipc":
        return []
    return ["--size", str(SOCKET_FOLDER_BYTES), "--tmpfs", os.path.dirname(os.path.abspath(connection["ip"]))]


def sandbox_pid(info: int) -> int | None:
    """The sandbox's first process, as bwrap tells it on --info-fd; None if bwrap failed before it started one."""
    text = b""
    while b"}" not in text:
        chunk = os.read(info, 4096)
        if not chunk:
            return None
        text += chunk
    return json.loads(text[:text.index(b"}") + 1])["child-pid"]


def socket_paths(connection: dict) -> list[str]:
    """The kernel's sockets: its five Jupyter channels', and the checker's line to its bridge (checker/line.py)."""
    ip = os.path.abspath(connection["ip"])
    ports = [f"{ip}-{connection[key]}" for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    return [*ports, line.path(connection)]


def link_sockets(connection: dict, child: int) -> None:
    """Link each of the kernel's socket paths in the grader's folder to the socket inside the sandbox, through its
    first process's root (/proc/PID/root). The grader connects through the links; the sandbox never sees the
    grader's folder."""
    for path in socket_paths(connection):
        os.symlink(f"/proc/{child}/root{path}", path)


STDIO_BYTES = 16 * 2**10     # of the grader's stderr the kernel's own stdout and stderr may take, prefixes included


def printable(line: bytes, label: str) -> bytes:
    """One line of the kernel's output as the grader's log may hold it: prefixed, control characters escaped."""
    text = line.decode("utf-8", errors="replace")
    text = "".join(char if char.isprintable() or char == "\t" else f"\\x{ord(char):02x}" for char in text)
    return f"[grading kernel {label}] {text}\n".encode()


def tell(text: bytes) -> None:
    try:
        os.write(2, text)
    except OSError:
        pass                  # the grader's stderr is gone: keep draining, so the kernel never blocks


class PassOn:
    """The kernel's output as it comes, on to this process's stderr, line by line, prefixed and escaped, until
    what was written (prefixes and escapes counted: an empty line or a NUL byte would otherwise take the log many
    times what it costs the kernel) reaches STDIO_BYTES; the rest is dropped (the kernel never blocks on a full
    pipe) and counted in one last line."""

    def __init__(self, label: str):
        self.label, self.written, self.dropped, self.pending = label, 0, 0, b""

    def take(self, chunk: bytes) -> None:
        if self.written >= STDIO_BYTES:
            self.dropped += len(chunk)
            return
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            self.say(line, len(line) + 1)
        if len(self.pending) > STDIO_BYTES:             # a line longer than the whole budget: what fits of it
            self.say(self.pending, len(self.pending))
            self.pending = b""

    def say(self, line: bytes, size: int) -> None:
        if self.written >= STDIO_BYTES:
            self.dropped += size
            return
        text = printable(line, self.label)
        room = STDIO_BYTES - self.written
        if len(text) > room:                            # what fits of it, if more than its prefix fits; counted whole
            self.dropped += size
            if room <= len(printable(b"", self.label)):
                self.written = STDIO_BYTES
                return
            text = text[:room - 1] + b"\n"
        tell(text)
        self.written += len(text)

    def end(self) -> None:
        if self.pending:
            self.say(self.pending, len(self.pending))
        if self.dropped:
            tell(printable(f"... {self.dropped} more bytes of its stdout and stderr dropped".encode(), self.label))


# Each sandbox ends when its first process, bubblewrap's init, does: the kernel dies with it, and every process the
# kernel started (pid 1 of a PID namespace takes them all). bwrap asks init to die with the launcher
# (--die-with-parent), but that is a setting of init, which the kernel can change: it runs as the same user, so it can
# write init's code through /proc/1/mem (a file's write: seccomp cannot tell it apart) and clear it. Where no cgroup
# holds the submission, the sandbox would then outlive its grading. So the drainer, outside the sandbox, holds a
# pidfd of each sandbox's init (sent by the launcher, told the pid by bwrap's --info-fd) and kills init once the
# launcher has ended, however it ended (exited, killed by the grader, or as bwrap after exec).
_to_drainer: socket.socket | None = None       # the launcher's end: inits' pidfds go to the drainer


def drain(read: int, label: str, inits: socket.socket, launcher: int | None, ended: bool) -> None:
    """The drainer: pass the kernel's output on (PassOn) until every writer has gone, and kill each sandbox's init
    (pidfds received on `inits`) once the launcher (`launcher`, a pidfd, or None) has ended (`ended`: already)."""
    import select
    import signal

    output, pidfds = PassOn(label), []
    watched = {read, inits.fileno(), *([launcher] if launcher is not None else [])}

    def end_sandboxes() -> None:
        for pidfd in pidfds:
            with contextlib.suppress(OSError):               # already gone: ESRCH
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)

    while read in watched:
        ready = select.select(list(watched), [], [])[0]
        if inits.fileno() in ready:
            message, fds, _, _ = socket.recv_fds(inits, 16, 4)
            pidfds += fds
            if not message and not fds:
                watched.discard(inits.fileno())           # the launcher and its helpers have all closed it
            elif ended:
                end_sandboxes()
        if launcher in ready:
            ended = True
            watched.discard(launcher)
            end_sandboxes()
        if read in ready:
            chunk = os.read(read, 2**16)
            if chunk:
                output.take(chunk)
            else:
                watched.discard(read)
    end_sandboxes()
    output.end()


def detach_stdio(label: str) -> None:
    """Give the kernel no descriptor of the grader's: stdin becomes /dev/null, stdout and stderr a pipe that a
    child of this launcher drains (drain). The child is outside the sandbox, so the kernel cannot reach it."""
    global _to_drainer
    read, write = os.pipe()
    launcher = os.getpid()
    ours, drainers = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        try:
            # A session of its own: the grader ends a kernel that does not stop by killing the launcher's process
            # group (jupyter_client), which must not take the drainer, whose work starts then.
            os.setsid()
            os.close(write)
            ours.close()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            try:
                watched = os.pidfd_open(launcher)
            except OSError:                     # a kernel older than Linux 5.3: only bwrap's --die-with-parent
                watched = None
            ended = os.getppid() != launcher    # it ended before its pidfd was open: any sandbox of it must end
            if ended and watched is not None:
                os.close(watched)
                watched = None
            drain(read, label, drainers, watched, ended)
        finally:
            os._exit(0)
    drainers.close()
    _to_drainer = ours
    os.close(read)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(null)
    os.close(write)


def hand_to_drainer(child: int) -> None:
    """Give the drainer a pidfd of this sandbox's init (its pid as bwrap told it, at once), to kill it when the
    launcher ends."""
    if _to_drainer is None:
        return
    with contextlib.suppress(OSError):                     # gone already (bwrap failed): nothing to end
        pidfd = os.pidfd_open(child)
        try:
            socket.send_fds(_to_drainer, [b"init"], [pidfd])
        finally:
            os.close(pidfd)


def die_with_grader() -> None:
    """Be killed when the grader that started this launcher dies (the kernel's parent-death signal, which
    exec into bwrap keeps), and stop at once if it died already: its process id, which it gives in the
    kernelspec's environment (guarded_execute.SandboxKernelSpecs), is no longer this process's parent."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "course grading: prctl(PR_SET_PDEATHSIG) failed")
    grader = os.environ.get(grading_environment.GRADER_PID_VARIABLE, "")
    if grader and os.getppid() != int(grader):
        sys.exit("course grading: the grader that started this kernel is gone; no sandbox is started")


def kernel_environment() -> dict[str, str]:
    """The kernel's whole environment: what grading_environment keeps of this process's, and its own folders.
    PyTorch's compiler, imported by a warm parent before any kernel exists and by a cold kernel at its first
    optimizer, sets its cache folder in the environment and makes it: named here as /tmp, which exists, so that
    the import changes neither, warm or cold."""
    kept = {key: os.environ[key] for key in grading_environment.KEPT_ENVIRONMENT if key in os.environ}
    return {**kept, "HOME": WORK, "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONNOUSERSITE": "1",
            "TORCHINDUCTOR_CACHE_DIR": "/tmp", "PWD": WORK}        # PWD: which bwrap's --chdir sets too


def sandbox_argv(connection_file: str, connection: dict, courses: list[str]) -> tuple[list[str], list[int]]:
    """bwrap's arguments for this kernel's sandbox, up to its namespaces and command (the same, cold or warm)."""
    argv, fds = base_argv(courses)
    files, copied = copy_in(os.getcwd(), copy_budget())
    argv += files
    fds += copied
    for path in [*grading_environment.readable_paths(), connection_file]:
        argv += ["--ro-bind", path, path]
    argv += rule_stubs()
    argv += socket_argv(connection)
    argv += closed_argv()
    argv += ["--clearenv"]
    for key, text in kernel_environment().items():
        argv += ["--setenv", key, text]
    argv += ["--chdir", WORK]
    refused = seccomp_filter.program()
    if refused is not None:                         # the system calls no kernel may make (seccomp_filter.py)
        fds.append(data(refused))
        argv += ["--seccomp", str(fds[-1])]
    return argv, fds


# --- a warm kernel: forked from the warm parent (kernel_zygote.py) into a sandbox built for it -----------------

WARM_REPLY_SECONDS = 60      # the warm parent answers at once; a parent that does not is treated as dead
PLACEHOLDER = ["/bin/cat"]   # the sandbox's first command: echoes the launcher's line once the sandbox is built,
                             # then holds the sandbox open until the launcher's end of its input closes


def cold_start_note(connection: dict, connection_file: str) -> str | None:
    """Where the launcher notes that this kernel started cold after all (guarded_execute flags it): beside the
    kernel's sockets, in the grader's own folder, which the sandbox never sees."""
    if connection.get("transport") != "ipc":
        return None
    return os.path.join(os.path.dirname(os.path.abspath(connection["ip"])), Path(connection_file).stem + ".started-cold")


def ask_warm_parent(parent: str, request: dict, fds: list[int]) -> None:
    """Send the request and its descriptors; raise unless the parent forked a child for it."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.settimeout(WARM_REPLY_SECONDS)
        connection.connect(parent)
        socket.send_fds(connection, [json.dumps(request).encode()], fds)
        reply = json.loads(connection.recv(4096) or b"{}")
    if "pid" not in reply:
        raise OSError(reply.get("error", "no answer"))


def run_warm(parent: str, argv: list[str], fds: list[int], connection: dict, connection_file: str,
             kernel_arguments: list[str], group: cgroups.Cgroup | None, limits: dict) -> str:
    """Build this kernel's sandbox with bwrap as for a cold kernel, with a placeholder for its command, and have the
    warm parent fork the kernel into it; exit with the kernel when it ends. Returns only if the kernel could not be
    started warm (why), with nothing of the attempt left: the caller starts it cold."""
    info, told = os.pipe()
    status, status_written = os.pipe()
    sandbox = subprocess.Popen([*argv, "--info-fd", str(told), *NAMESPACES, "--", *PLACEHOLDER],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=[*fds, told])
    for fd in (told, *fds):
        os.close(fd)
    passed, linked, started = [], False, False
    try:
        child = sandbox_pid(info)
        if child is not None:
            hand_to_drainer(child)
        sandbox.stdin.write(b"built\n")
        sandbox.stdin.flush()
        if child is None or sandbox.stdout.readline() != b"built\n":
            return f"bubblewrap did not build the sandbox (exit {sandbox.poll()})"
        if connection.get("transport") == "ipc":
            link_sockets(connection, child)
            linked = True
        passed = [os.open(f"/proc/{child}/root", os.O_RDONLY | os.O_DIRECTORY)]
        passed += [os.open(f"/proc/{child}/ns/{name}", os.O_RDONLY) for name in kernel_zygote.NAMESPACES]
        refused = seccomp_filter.program()
        request = {"argv": ["-f", connection_file, *kernel_arguments], "env": kernel_environment(), "workdir": WORK,
                   "rlimits": limits, "seccomp": refused.hex() if refused is not None else None,
                   "cgroup_procs": [str(folder / "cgroup.procs") for folder in (group.dirs.values() if group else [])]}
        ask_warm_parent(parent, request, [1, status_written, *passed])      # kernel_zygote.DESCRIPTORS
        for fd in (status_written, *passed):
            os.close(fd)
        status_written, passed = None, []
        said = b""
        while chunk := os.read(status, 64):       # "started" once the kernel runs; its exit code when it ends
            said += chunk
        if not said.startswith(b"started\n"):
            return "the warm parent's child could not enter the sandbox"
        started = True
    except (OSError, ValueError) as error:
        return f"the warm parent did not start it ({error})"
    finally:
        for fd in (info, status, *passed, *([status_written] if status_written is not None else [])):
            os.close(fd)
        if not started:
            sandbox.kill()
            sandbox.wait()
            for path in socket_paths(connection) if linked else []:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    # The kernel has ended (the parent's child waited for it): the sandbox goes, and this launcher with its code.
    sandbox.kill()
    sandbox.wait()
    code = said.split(b"\n")[1]
    os._exit(int(code) & 0xFF if code.lstrip(b"-").isdigit() else 1)


def main(arguments: list[str]) -> None:
    die_with_grader()
    connection_file, kernel_arguments = os.path.abspath(arguments[0]), arguments[2:]
    courses = [folder for folder in arguments[1].split(os.pathsep) if folder]      # the courses to hide
    # First of all, so that the drainer holds nothing else of the launcher's and lies outside the cgroup.
    detach_stdio(Path(connection_file).stem)
    connection = json.load(open(connection_file))
    memory = int(value("COURSE_GRADING_MEMORY_GB") * 2**30)

    group = cgroups.enter(Path(connection_file).stem, memory, int(value("COURSE_GRADING_PROCESSES")))
    limits = set_rlimits(memory, group)

    parent = os.environ.get(grading_environment.WARM_PARENT_VARIABLE, "")
    if parent:
        argv, fds = sandbox_argv(connection_file, connection, courses)
        problem = run_warm(parent, argv, fds, connection, connection_file, kernel_arguments, group, limits)
        note = cold_start_note(connection, connection_file)
        print(f"course grading: started cold: {problem}", file=sys.stderr, flush=True)
        if note:
            with open(note, "w") as handle:
                handle.write(problem[:500])

    argv, fds = sandbox_argv(connection_file, connection, courses)
    info, told = os.pipe()
    if os.fork() == 0:          # told the sandbox's first process: hands it to the drainer, links the sockets, is gone
        os.close(told)
        try:
            child = sandbox_pid(info)
            if child is not None:
                hand_to_drainer(child)
                if connection.get("transport") == "ipc":
                    link_sockets(connection, child)
        finally:
            os._exit(0)
    os.close(info)
    os.set_inheritable(told, True)
    argv += ["--info-fd", str(told)]
    argv += [*NAMESPACES, "--", os.path.abspath(sys.executable), "-m", "ipykernel_launcher", "-f", connection_file, *kernel_arguments]
    os.execvp("bwrap", argv)


if __name__ == "__main__":
    main(sys.argv[1:])
