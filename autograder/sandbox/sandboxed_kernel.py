"""Start a grading kernel inside a bubblewrap sandbox (the kernelspec declared in grading_environment.py).

    python sandboxed_kernel.py CONNECTION_FILE COURSES [IPYKERNEL ARGUMENTS...]

COURSES: the course folders to hide, joined by os.pathsep (plugins/sandbox_kernels.hidden_courses).

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
  and SYSTEM_FILES), the Python environment's own folders wherever it lives (mounts.py), the kernel's
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
  (the drainer, drainer.py, in a session of its own), passes at most STDIO_BYTES of it on to the grader's stderr (its log, or the instructor's terminal),
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
from autograder.sandbox import bridge_line as line  # noqa: E402
from autograder.sandbox.drainer import detach_stdio, hand_to_drainer  # noqa: E402
from autograder.sandbox.mounts import (WORK, base_argv, closed_argv, copy_budget, copy_in, data,  # noqa: E402
                                       rule_stubs, socket_argv)
from autograder.grading_environment import value  # noqa: E402

NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--new-session", "--die-with-parent", "--cap-drop", "ALL"]


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
    """The kernel's sockets: its five Jupyter channels', and the checker's line to its bridge (sandbox/bridge_line.py)."""
    ip = os.path.abspath(connection["ip"])
    ports = [f"{ip}-{connection[key]}" for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    return [*ports, line.path(connection)]


def link_sockets(connection: dict, child: int) -> None:
    """Link each of the kernel's socket paths in the grader's folder to the socket inside the sandbox, through its
    first process's root (/proc/PID/root). The grader connects through the links; the sandbox never sees the
    grader's folder."""
    for path in socket_paths(connection):
        os.symlink(f"/proc/{child}/root{path}", path)


def die_with_grader() -> None:
    """Be killed when the grader that started this launcher dies (the kernel's parent-death signal, which
    exec into bwrap keeps), and stop at once if it died already: its process id, which it gives in the
    kernelspec's environment (plugins/sandbox_kernels.SandboxKernelSpecs), is no longer this process's parent."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "course grading: prctl(PR_SET_PDEATHSIG) failed")
    grader = grading_environment.handed_over(grading_environment.GRADER_PID_VARIABLE)
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

    parent = grading_environment.handed_over(grading_environment.WARM_PARENT_VARIABLE)
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
