"""What of a grading kernel's own stdout and stderr reaches the grader, and the sandboxes that end with their launcher.

bwrap passes on only descriptors 0-2, so the launcher replaces them first (detach_stdio): stdin is /dev/null,
stdout and stderr one pipe, which a child of the launcher outside the sandbox (the drainer, in a session of its own)
passes on to the grader's stderr, at most STDIO_BYTES, each line prefixed and escaped (PassOn). The same drainer
holds a pidfd of each sandbox's init and kills it once the launcher has ended, however it ended."""

from __future__ import annotations

import contextlib
import os
import socket


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
