"""The warm parent: a Python that has imported what every grading kernel imports, and forks each kernel into a
sandbox bubblewrap has already built for it (warm_kernels.py starts it; sandboxed_kernel.py asks it).

    python -c "...runpy.run_path(...)" kernel_zygote.py SOCKET WATCH_FD IMPORTS_JSON     (warm_kernels.START)

It runs as the grader's user, outside every sandbox, and it never runs a student's code or reads a course file:
started in an empty private folder with the kernel's environment (never the grader's), it imports the modules
named (PyTorch, NumPy, ipykernel) and then only waits, on a socket in a folder only the grader's user can enter.
It imports nothing of the grading package, so a kernel forked from it holds only those modules.

A request comes from a sandbox launcher (sandboxed_kernel.py), over that socket, as JSON and descriptors: the
kernel's stdout, a pipe the launcher waits on, and the namespaces and root of a sandbox bubblewrap built for this
kernel exactly as for a cold one (its first process, opened by the launcher). For each, a forked child:

1. closes every descriptor it was not given, joins the submission's cgroup and takes its per-process limits;
2. joins the sandbox's user namespaces (where there are: as an ordinary user), mount, network, IPC, UTS, cgroup and
   PID namespaces and its root (`enter`);
3. forks the kernel, which is inside the sandbox's PID namespace (the child is not: the kernel cannot see it),
   drops every capability (bounding and ambient sets too) with no new privileges, loads the seccomp program a cold
   kernel's bubblewrap loads (the request's), starts a new session, gets its
   stdio, the kernel's environment, working folder and import path as a cold kernel has them, fresh RNG state
   where a module would otherwise share the parent's, and runs ipykernel as `python -m ipykernel_launcher`;
4. waits for the kernel and tells the launcher (by closing the pipe) when it is gone.

The parent forks only while it is single-threaded (a fork after OpenMP or BLAS threads started can hang) and
answers with an error otherwise; the launcher then starts the kernel cold. It exits when the grader's end of the
watch pipe closes: whenever the grader exits, however it dies.
"""

import ctypes
import fcntl
import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import sys

NAMESPACES = ("user", "ipc", "uts", "net", "cgroup", "pid", "mnt")      # joined in this order (nsenter's)
DESCRIPTORS = ("stdout", "status", "root", *NAMESPACES)                   # what a request passes, in this order
HEAVIER = ("watch", "ready")             # what a request for a heavier parent passes: its watch pipe, its ready pipe
REQUEST_BYTES = 64 * 2**10

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 39, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
NS_GET_PARENT = 0xB702                                  # ioctl_ns(2): _IO(0xb7, 0x2)


def checked(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


# --- the kernel's side ------------------------------------------------------------------------------------


def drop_capabilities() -> None:
    """No capability left, none to gain, as bubblewrap's --cap-drop ALL leaves a cold kernel: joining a user
    namespace gave every capability in it. The bounding set is emptied where this process may (where it may not, as
    root in a container without CAP_SETPCAP, no new privileges keeps an exec from regaining any, as for bwrap's)."""
    checked(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    for capability in range(64):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break                  # EINVAL past the last capability this kernel knows; EPERM without CAP_SETPCAP
    header = struct.pack("Ii", 0x20080522, 0)            # _LINUX_CAPABILITY_VERSION_3, this process
    checked(libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))), "dropping capabilities")
    checked(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    # Read back with the system calls (this process may be outside the /proc it sees): effective, permitted and
    # inheritable all empty (the ambient set is within them), and no new privileges set.
    held = ctypes.create_string_buffer(24)
    checked(libc.capget(ctypes.c_char_p(header), held), "reading capabilities")
    if any(held.raw):
        raise OSError("capabilities left after dropping them")
    if libc.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1:
        raise OSError("no new privileges is not set")


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def refuse_system_calls(program: bytes) -> None:
    """Load the seccomp program bubblewrap loads for a cold kernel (seccomp_filter.py); no new privileges is set."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    checked(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "loading the seccomp filter")


def fresh_state() -> None:
    """What a module computed once in the parent and a cold kernel computes anew: otherwise shared by siblings."""
    multiprocessing = sys.modules.get("multiprocessing.process")
    if multiprocessing is not None:                     # the authentication key of this process's children
        multiprocessing.current_process().authkey = os.urandom(32)
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:                            # the temporary folder the parent found, outside the sandbox
        tempfile.tempdir = None
    importlib.invalidate_caches()
    sys.path_importer_cache.clear()                     # folder listings the parent read, outside the sandbox
    linecache = sys.modules.get("linecache")
    if linecache is not None:
        # PyTorch's import reads the source of the frames that import it (as in a cold kernel, where they are the
        # start-up file's); here one is importlib's, which a cold kernel's cache does not hold.
        for path in (importlib.__file__, __file__):
            linecache.cache.pop(path, None)


def become_kernel(request: dict, stdout: int) -> None:
    """In the sandbox: the kernel a cold launch would start (python -m ipykernel_launcher), from this image."""
    checked(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0), "parent-death signal")
    if os.getppid() != 0:          # the waiting child (outside this PID namespace, so 0) died before that
        os._exit(1)
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stdout, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    drop_capabilities()
    if request.get("seccomp"):
        refuse_system_calls(bytes.fromhex(request["seccomp"]))
    os.chdir(request["workdir"])
    os.environ.clear()
    os.environ.update({**request["env"], **SET_BY_IMPORTS})       # ipykernel's debugger sets one as it loads
    sys.path[:] = [request["workdir"], *[path for path in sys.path if path]]      # as `python -m` puts the cwd
    if not IMPORTED_RESOURCE:
        sys.modules.pop("resource", None)
    fresh_state()
    sys.argv = ["ipykernel_launcher", *request["argv"]]
    code = 0
    try:
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def top_user_namespace(user: int) -> int | None:
    """The user namespace, of `user` and its ancestors, whose parent is this process's: where this process's user
    owns everything the sandbox's namespaces hang from. None when `user` is this process's own (graded as root,
    bubblewrap makes none)."""
    own = os.stat("/proc/self/ns/user").st_ino
    if os.fstat(user).st_ino == own:
        return None
    current = os.dup(user)
    while True:
        parent = fcntl.ioctl(current, NS_GET_PARENT)
        if os.fstat(parent).st_ino == own:
            os.close(parent)
            return current
        os.close(current)
        current = parent


def enter(fds: dict[str, int]) -> None:
    """Join the sandbox. As an ordinary user, bubblewrap made a user namespace that owns the others, and one inside
    it for the sandbox's uid (where its first process and a cold kernel live): the outer one first, where this
    process has every capability over the others, then the others and the root, then the inner one."""
    top = top_user_namespace(fds["user"])
    if top is not None:
        checked(libc.setns(top, 0), "joining the sandbox's outer user namespace")
    for name in NAMESPACES:
        if name != "user":
            checked(libc.setns(fds[name], 0), f"joining the sandbox's {name} namespace")
    os.fchdir(fds["root"])
    os.chroot(".")
    if top is not None:
        if os.fstat(top).st_ino != os.fstat(fds["user"]).st_ino:
            checked(libc.setns(fds["user"], 0), "joining the sandbox's user namespace")
        os.close(top)


def serve(request: dict, fds: dict[str, int]) -> None:
    """In a forked child of the parent: enter the sandbox, fork the kernel, wait for it."""
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    null = os.open("/dev/null", os.O_RDONLY)           # nothing of the grader's, not even its stdio
    os.dup2(null, 0)
    os.dup2(fds["stdout"], 1)
    os.dup2(fds["stdout"], 2)
    keep = sorted(fds.values())
    previous = 3
    for fd in keep:                                     # everything of the parent's but what the launcher sent
        os.closerange(previous, fd)
        previous = fd + 1
    os.closerange(previous, os.sysconf("SC_OPEN_MAX"))
    for procs in request["cgroup_procs"]:               # the submission's group, before anything of it runs
        if not procs.startswith("/sys/fs/cgroup/") or not procs.endswith("/cgroup.procs") or ".." in procs:
            raise OSError(f"not a cgroup: {procs}")
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    import resource                                     # a module a cold kernel has not imported: dropped below

    for name, (soft, hard) in request["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    enter(fds)
    for name in ("root", *NAMESPACES):
        os.close(fds[name])
    kernel = os.fork()
    if kernel == 0:
        os.close(fds["status"])
        become_kernel(request, fds["stdout"])
    drop_capabilities()
    os.close(fds["stdout"])
    try:
        os.write(fds["status"], b"started\n")
    except OSError:
        pass
    _, status = os.waitpid(kernel, 0)
    try:
        os.write(fds["status"], f"{os.waitstatus_to_exitcode(status)}\n".encode())
    except OSError:
        pass                                            # the launcher is gone
    os._exit(0)


# --- the parent -------------------------------------------------------------------------------------------


def answer(connection: socket.socket) -> None:
    """One request: a child forked for it, or an error; the launcher falls back to a cold kernel on either. The
    grader's own request for a heavier parent (warm_kernels.py) gets a child that becomes one (become_heavier)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    if uid != os.getuid():
        return                                          # only the grader's own launchers
    message, passed, _, _ = socket.recv_fds(connection, REQUEST_BYTES, len(DESCRIPTORS))
    try:
        request = json.loads(message)
        heavier = isinstance(request, dict) and isinstance(request.get("parent"), dict)
        expected = HEAVIER if heavier else DESCRIPTORS
        if len(passed) != len(expected):
            raise ValueError(f"{len(passed)} descriptors instead of {len(expected)}")
        if threads() != 1:
            raise RuntimeError(f"the warm parent runs {threads()} threads; it forks only while it runs one")
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0 and heavier:
            become_heavier(request["parent"], dict(zip(HEAVIER, passed)))
        if child == 0:
            try:
                serve(request, dict(zip(DESCRIPTORS, passed)))
            except BaseException as error:              # noqa: BLE001 (told to the launcher's log, never raised)
                try:
                    os.write(1, f"warm parent's child: {error}\n".encode())      # the kernel's stdout by then
                finally:
                    os._exit(70)
        if heavier:
            HEAVIER_PARENTS.add(child)
        connection.send(json.dumps({"pid": child}).encode())
    except Exception as error:                          # noqa: BLE001
        connection.send(json.dumps({"error": f"{type(error).__name__}: {error}"}).encode())
    finally:
        for fd in passed:
            os.close(fd)


def reap(*_) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


SET_BY_IMPORTS: dict[str, str] = {}     # what the imports put into the environment (a cold kernel's do the same)
IMPORTED_RESOURCE = False               # whether the imports imported `resource` (else each child's own is dropped)
HEAVIER_PARENTS: set[int] = set()       # children that became heavier parents: waited for when this one ends


def load(imports: list[str]) -> None:
    """Import `imports` and leave this process able to fork: one thread, no course module."""
    started_with = dict(os.environ)
    for name in imports:
        importlib.import_module(name)
    SET_BY_IMPORTS.update({key: text for key, text in os.environ.items() if started_with.get(key) != text})
    global IMPORTED_RESOURCE
    IMPORTED_RESOURCE = "resource" in sys.modules
    if threads() != 1:
        # NumPy's OpenBLAS starts its thread pool as it loads, and stops it before a fork (its pthread_atfork
        # handler), to start it again when it is next used: one fork that does nothing leaves the pool stopped here
        # and never restarted, since this process computes nothing. Each kernel starts its own when it needs one.
        throwaway = os.fork()
        if throwaway == 0:
            os._exit(0)
        os.waitpid(throwaway, 0)
    if "gptcourse" in sys.modules:
        raise SystemExit("the warm parent imported the course's reference module")
    if threads() != 1:
        raise SystemExit(f"importing {imports} started {threads() - 1} threads: no kernel can be forked from here")


def become_heavier(spec: dict, fds: dict[str, int]) -> None:
    """In a forked child of a parent: a parent that has also imported `spec["imports"]` (transformers, say), serving
    on its own socket (`spec["socket"]`, in a folder the grader made for it, as for a parent it starts itself) until
    its own watch pipe closes, and saying "ready" (or why not) on its ready pipe. It pays for those imports only,
    not for PyTorch's again. Never returns."""
    try:
        keep = sorted(fds.values())
        previous = 3
        for fd in keep:                                 # this parent's socket, watch pipe and connections: not its
            os.closerange(previous, fd)
            previous = fd + 1
        os.closerange(previous, os.sysconf("SC_OPEN_MAX"))
        HEAVIER_PARENTS.clear()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)     # load() waits for its own child; serving reaps again
        socket_path = str(spec["socket"])
        os.chdir(os.path.join(os.path.dirname(socket_path), "empty"))
        load([str(name) for name in spec["imports"]])
        serve_requests(socket_path, fds["watch"], fds["ready"])
    except BaseException as error:                      # noqa: BLE001 (told to the grader, which starts one itself)
        try:
            os.write(fds["ready"], f"{type(error).__name__}: {error}\n".encode())
        finally:
            os._exit(70)


def serve_requests(socket_path: str, watch: int, ready: int) -> None:
    """Say "ready" on `ready`, then answer requests on a socket at `socket_path` until `watch` closes."""
    # Each child is reaped as it ends (not ignored, so that its CPU time and its kernel's count as this process's
    # children's, and the grader's accounting sees them when it waits for this process).
    signal.signal(signal.SIGCHLD, reap)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(socket_path)
    server.listen(64)
    os.write(ready, b"ready\n")
    null = os.open(os.devnull, os.O_WRONLY)             # the grader reads nothing more from it
    for fd in {1, 2, ready}:
        os.dup2(null, fd)
    os.close(null)
    while True:
        ready, _, _ = select.select([server, watch], [], [])
        if watch in ready:
            # The grader has gone (or stopped it): its folder goes too, this working folder and the socket in it
            # (warm_kernels.WarmParent made them for this process alone; a Dask worker may exit without its atexit).
            for remove, path in ((os.unlink, socket_path), (os.rmdir, os.getcwd()),
                                 (os.rmdir, os.path.dirname(socket_path))):
                try:
                    remove(path)
                except OSError:
                    pass                                # removed by the grader already
            wait_for_heavier_parents()
            # Ended at once, without the interpreter's teardown: there is nothing to flush (its output goes to
            # /dev/null), and tearing down PyTorch took 0.7 s that every grading process waited for at its exit.
            os._exit(0)
        connection, _ = server.accept()
        with connection:
            try:
                answer(connection)
            except OSError:
                pass                                    # a launcher that went away mid-request


def wait_for_heavier_parents(seconds: float = 5.0) -> None:
    """The heavier parents forked from this one end with the grader too (their watch pipes close with it): waited
    for, a few seconds at most, so that their CPU time counts as this process's children's."""
    import time

    deadline = time.monotonic() + seconds
    while HEAVIER_PARENTS and time.monotonic() < deadline:
        for pid in list(HEAVIER_PARENTS):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid                              # reaped already (reap)
            if done:
                HEAVIER_PARENTS.discard(pid)
        if HEAVIER_PARENTS:
            time.sleep(0.01)


def main(socket_path: str, watch: int, imports: list[str]) -> None:
    load(imports)
    serve_requests(socket_path, watch, 1)


if __name__ == "__main__":
    main(sys.argv[-3], int(sys.argv[-2]), json.loads(sys.argv[-1]))
