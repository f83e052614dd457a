"""The system calls a grading kernel is refused, as a seccomp program both kinds of kernel load before any of the
notebook's code runs: bubblewrap loads it for a cold kernel (--seccomp), a warm kernel loads it itself
(kernel_zygote.become_kernel, after dropping its capabilities, with no new privileges).

Refused, with EPERM, because a namespace does not separate what they reach:

- the kernel keyrings (`add_key`, `request_key`, `keyctl`): the session keyring is inherited from the grader,
  whatever its login put there (a Kerberos ticket, a pam_keyinit key), and graded as root, every kernel shares
  root's user keyring, a channel between students' kernels that outlives the grading;
- reaching into another process (`ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd`,
  `process_madvise`, `kcmp`): the kernel runs as the same user as bubblewrap's init inside its sandbox (and a warm
  kernel's placeholder). This does not make init safe from the kernel: a write to /proc/1/mem is a file's write,
  which no seccomp program can tell apart, so a kernel can still rewrite init's code (to clear its parent-death
  signal and outlive the grading, where no cgroup holds the submission). What ends the sandbox whatever init was
  made to do is the launcher's drainer, outside it, which kills init when the launcher ends
  (drainer.drain); bubblewrap loads this program into init too, so rewritten, it can call nothing the
  kernel cannot;
- every system call of another ABI (x32, or 32-bit calls from a 64-bit process), whose numbers differ.

A machine of another architecture than these two gets no program (None): the sandbox's other walls still hold,
and the grader page says so.
"""

from __future__ import annotations

import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
REFUSED = {        # name: (x86_64, aarch64) system call numbers
    "ptrace": (101, 117),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
}
X32_BIT = 0x40000000                    # x32 system calls are the x86_64 ABI's numbers with this bit set

LOAD_WORD, JUMP_EQUAL, JUMP_AT_LEAST, RETURN = 0x20, 0x15, 0x35, 0x06      # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | 1                                # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
NUMBER, ARCHITECTURE = 0, 4                                               # offsets in struct seccomp_data


def instruction(code: int, jump_true: int, jump_false: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine (struct sock_filter[], as bubblewrap's --seccomp and PR_SET_SECCOMP read it)."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        return None
    numbers = [pair[0 if machine == "x86_64" else 1] for pair in REFUSED.values()]
    # Each check jumps to the last instruction (refuse) when it matches; every instruction before it counts.
    body = [instruction(LOAD_WORD, 0, 0, NUMBER)]
    if machine == "x86_64":
        body.append(("x32", X32_BIT))
    body += [("number", number) for number in numbers]
    checks = len(body) - 1
    code = [instruction(LOAD_WORD, 0, 0, ARCHITECTURE)]
    # Another ABI: straight to refuse (past the number's load, the checks and allow).
    code.append(instruction(JUMP_EQUAL, 0, checks + 2, AUDIT_ARCH[machine]))
    code.append(body[0])
    for index, (kind, value) in enumerate(body[1:]):
        to_refuse = checks - index            # the instructions after this one before `refuse`, allow included
        code.append(instruction(JUMP_AT_LEAST if kind == "x32" else JUMP_EQUAL, to_refuse, 0, value))
    code.append(instruction(RETURN, 0, 0, ALLOW))
    code.append(instruction(RETURN, 0, 0, REFUSE))
    return b"".join(code)
