"""The seccomp program every grading kernel loads (autograder/sandbox/seccomp_filter.py), run here by a small classic-BPF
interpreter for both architectures it is written for: the refused calls and any call of another ABI are refused,
everything else is allowed. (The grading tests load it for real on this machine: test_warm_kernels.py.)"""

from __future__ import annotations

import struct

import pytest

from autograder.sandbox import seccomp_filter

pytestmark = pytest.mark.quick


def run(program: bytes, architecture: int, number: int) -> int:
    """What the program returns for one system call (classic BPF: load word, jump if equal or at least, return)."""
    code = [struct.unpack("HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {seccomp_filter.NUMBER: number, seccomp_filter.ARCHITECTURE: architecture}
    accumulator, position = 0, 0
    while True:
        operation, jump_true, jump_false, k = code[position]
        position += 1
        if operation == seccomp_filter.LOAD_WORD:
            accumulator = data[k]
        elif operation == seccomp_filter.JUMP_EQUAL:
            position += jump_true if accumulator == k else jump_false
        elif operation == seccomp_filter.JUMP_AT_LEAST:
            position += jump_true if accumulator >= k else jump_false
        elif operation == seccomp_filter.RETURN:
            return k
        else:
            raise AssertionError(f"unexpected instruction {operation:#x}")


@pytest.mark.parametrize("machine, column", [("x86_64", 0), ("aarch64", 1)])
def test_the_refused_calls_and_other_abis_are_refused_and_nothing_else(machine, column):
    program = seccomp_filter.program(machine)
    native = seccomp_filter.AUDIT_ARCH[machine]
    refused = {numbers[column] for numbers in seccomp_filter.REFUSED.values()}
    for number in range(0, 600):
        expected = seccomp_filter.REFUSE if number in refused else seccomp_filter.ALLOW
        assert run(program, native, number) == expected, (machine, number)
    assert run(program, 0x40000003, 250) == seccomp_filter.REFUSE          # a 32-bit call (i386's ABI)
    if machine == "x86_64":
        assert run(program, native, seccomp_filter.X32_BIT | 1) == seccomp_filter.REFUSE      # x32's write


def test_another_architecture_gets_no_program():
    assert seccomp_filter.program("riscv64") is None
