"""The checker's process (autograder/checker/process.py, session.py): one notebook's given cells and checks run in
a namespace of the checker's, the student's names looked up through the bridge, hidden inputs drawn from the
hand-in's key; a check that overruns its time is stopped with its child, and the next cell gets a fresh child
that replays the given cells."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

import autograder
from autograder.checker.bridge import Bridge
from autograder.checker.process import Checks, global_names, in_process
from autograder.checker.session import CheckerTimeout, Session

pytestmark = pytest.mark.quick

STUDENT = '''
import torch
def double(x):
    print("the student's print")
    return 2 * x
torch_is_mine = "a value"
'''


def student_bridge():
    namespace: dict = {}
    exec(STUDENT, namespace)
    return in_process(Bridge(namespace).serve)


def test_a_check_reads_given_names_from_the_checker_and_the_students_through_the_bridge():
    checks = Checks(student_bridge(), b"key")
    assert checks.run("given", "setup", "import torch\nSCALE = 3\n")["ok"]
    outcome = checks.run("check", "test_double", "got = double(torch.ones(2) * SCALE)\n"
                                                 "assert type(got) is torch.Tensor and got.tolist() == [6.0, 6.0]\n"
                                                 "print('passed', torch_is_mine)\n")
    assert outcome == {"ok": True, "stdout": "passed a value\n"}           # the student's own print stays there
    failed = checks.run("check", "test_fails", "assert double(torch.ones(1)).item() == 3, 'double is not triple'")
    assert failed["ok"] is False and (failed["ename"], failed["evalue"]) == ("AssertionError", "double is not triple")
    missing = checks.run("check", "test_missing", "not_defined_anywhere(1)")
    assert missing["ename"] == "NameError"


def test_each_check_holds_only_its_own_parameters_and_sees_what_the_cells_between_changed():
    """A check's holds end with it, on both sides (Bridge.new_check when its line opens, Connection.new_check): the
    next check reads the student's objects afresh, after the cells between changed them, and each request compares
    only what that check holds, not every parameter of the checks before."""
    namespace: dict = {}
    exec("import torch\nlayer = torch.nn.Linear(3, 2)\nlayers = [torch.nn.Linear(4, 4) for _ in range(8)]\n",
         namespace)
    bridge = Bridge(namespace)
    checks = Checks(in_process(bridge.serve), b"key")
    read_all = "total = sum(float(p.detach().sum()) for item in layers for p in item.parameters())\n"
    for _ in range(3):
        bridge.new_check()
        assert checks.run("check", "test_reads", read_all + "print(float(layer.weight.detach().sum()))")["ok"]
        assert len(bridge.stamps) == len(checks.student.mirrors) == 2 * 8 + 1
    exec("with torch.no_grad():\n    layer.weight.fill_(0.5)\nlayer.bias = torch.nn.Parameter(torch.ones(2))\n",
         namespace)                                         # a cell of the student's between two checks
    bridge.new_check()
    outcome = checks.run("check", "test_reads_again",
                         "print(float(layer.weight.detach().sum()), float(layer.bias.detach().sum()))")
    assert outcome == {"ok": True, "stdout": "3.0 2.0\n"}
    assert len(bridge.stamps) == len(checks.student.mirrors) == 2


def test_a_module_an_earlier_check_sent_comes_back_in_a_later_one_as_the_kernels_object_only():
    """A kernel that keeps a module a check sent it and hands it back in a later check (as what the student's class
    builds) hands back an object of its own: the checker never runs its own module, with that check's weights, as
    the student's answer."""
    namespace: dict = {}
    exec("CAUGHT = []\ndef look(module):\n    CAUGHT.append(module)\n    return 0\n"
         "class MyLayer:\n    def __new__(cls, *args):\n        return CAUGHT[0]\n", namespace)
    bridge = Bridge(namespace)
    checks = Checks(in_process(bridge.serve), b"key")
    bridge.new_check()
    assert checks.run("check", "test_sends", "import torch\nlook(torch.nn.LayerNorm(4))")["ok"]
    bridge.new_check()
    outcome = checks.run("check", "test_builds", "import torch\nlayer = MyLayer(4)\n"
                                                 "print(type(layer).__name__)")
    assert outcome == {"ok": True, "stdout": "StudentObject\n"}, outcome       # not the checker's LayerNorm


def test_a_checker_started_afresh_after_a_timeout_never_gets_an_earlier_checks_module():
    """After a check times out, the next check's checker is a new process that numbers the modules it sends from
    the start again: the kernel must build what this check sent, not reuse an earlier check's module under the
    same number."""
    namespace: dict = {}
    exec("def shape_of(module):\n    return type(module).__name__ + str(tuple(module.weight.shape))\n", namespace)
    bridge = Bridge(namespace)
    bridge.new_check()
    before = Checks(in_process(bridge.serve), b"key")
    assert before.run("check", "test_one", "import torch\nprint(shape_of(torch.nn.LayerNorm(4)))")["stdout"] == \
        "LayerNorm(4,)\n"
    bridge.new_check()
    after = Checks(in_process(bridge.serve), b"key")       # the checker's next child, numbering from -1 again
    assert after.run("check", "test_two", "import torch\nprint(shape_of(torch.nn.Linear(3, 7)))")["stdout"] == \
        "Linear(7, 3)\n"


def test_hidden_inputs_depend_on_the_hand_in_and_repeat_for_the_same_one():
    seeds = "print([_course_seed(n) for n in (1, 2)])"
    first, again, other = (Checks(student_bridge(), key).run("check", "seeds", seeds)["stdout"]
                           for key in (b"hand-in 1", b"hand-in 1", b"hand-in 2"))
    assert first == again != other


def test_the_global_names_a_check_reads_include_those_of_its_functions():
    code = compile("def check():\n    return layernorm(x)\nvalue = helper\n", "<cell>", "exec")
    assert global_names(code) == {"layernorm", "x", "helper"}


def test_what_a_check_prints_is_bounded():
    outcome = Checks(student_bridge(), b"k").run("check", "prints", "print('x' * 10_000_000)")
    assert outcome["ok"] and len(outcome["stdout"]) < 300_000 and "not kept" in outcome["stdout"]


def test_a_check_that_overruns_is_stopped_and_the_next_one_starts_afresh():
    bridge = student_bridge()
    session = Session(b"key")
    try:
        assert session.run("given", "setup", "import torch\nGIVEN = 7\n", bridge, 30)["ok"]
        first_child = session.pid
        started = time.monotonic()
        with pytest.raises(CheckerTimeout):
            session.run("check", "loops", "while True:\n    pass\n", bridge, 2)
        assert time.monotonic() - started < 10
        with pytest.raises(ProcessLookupError):
            for _ in range(50):                    # killed, and reaped by the checker's parent
                os.kill(first_child, 0)
                time.sleep(0.1)
        outcome = session.run("check", "after", "assert GIVEN == 7 and double(torch.ones(1)).item() == 2", bridge, 30)
        assert outcome == {"ok": True, "stdout": ""} and session.pid != first_child
    finally:
        session.close()


def test_a_call_that_times_out_in_the_kernel_costs_only_its_own_check():
    """The grader gives up on a call the student's code never answers (the cell's time limit): the child that
    waits for that answer is stopped, and the next check runs in a fresh child instead of reading its request
    as the late answer."""
    served = student_bridge()
    calls = []

    def bridge(request: bytes) -> bytes:
        calls.append(request)
        if len(calls) == 2:                       # the first check's call into the student's code
            raise CheckerTimeout("the student's code ran past the cell's time limit")
        return served(request)

    session = Session(b"key")
    try:
        assert session.run("given", "setup", "import torch\n", bridge, 30)["ok"]
        with pytest.raises(CheckerTimeout):
            session.run("check", "slow", "double(torch.ones(1))", bridge, 30)
        assert session.run("check", "next", "assert double(torch.ones(1)).item() == 2", bridge, 30)["ok"]
    finally:
        session.close()


def test_a_reply_the_child_cannot_read_whole_ends_the_child_and_nothing_after_it_is_read_as_a_frame():
    """A reply over the frame limit, followed by bytes shaped as the grader's frames (a forged request and verdict):
    the child reads the header, and ends; nothing of the rest is read, the check fails, the next gets a fresh child."""
    from autograder.checker.process import HEADER, MOST_FRAME

    served = student_bridge()
    forged = b"".join(HEADER.pack(b"R", len(p)) + p for p in [b'{"kind": "check", "name": "x", "source": "pass"}'])

    def bridge(request: bytes) -> bytes:
        if b"double" in request and not bridge.done:
            bridge.done = True
            return b"\0" * (MOST_FRAME + 1) + forged
        return served(request)

    bridge.done = False
    session = Session(b"key")
    try:
        assert session.run("given", "setup", "import torch\n", bridge, 30)["ok"]
        failed = session.run("check", "first", "assert double(torch.ones(1)).item() == 2", bridge, 30)
        assert not failed["ok"] and failed["ename"] == "CheckerError"
        assert session.run("check", "next", "assert double(torch.ones(1)).item() == 2", bridge, 30)["ok"]
    finally:
        session.close()


def test_the_kernel_cannot_put_a_name_into_a_check_that_the_check_did_not_ask_for():
    """The lookup's reply is the kernel's: a reply carrying `enumerate`, `globals` or the seed's name as the
    student's would shadow the checker's own, emptying a hidden loop or choosing the hidden inputs."""
    namespace: dict = {"double": lambda x: 2 * x}
    exec("import torch", namespace)
    bridge = Bridge(namespace)
    plain = bridge.op_lookup

    def lookup(message):
        reply = plain(message)
        nothing = bridge.keep(lambda *args, **kwargs: [])
        for name in ("enumerate", "range", "zip", "globals", "_course_seed", "torch"):
            reply["names"][name] = ("value", nothing)
        return reply

    bridge.op_lookup = lookup
    checks = Checks(in_process(bridge.serve), b"key")
    checks.run("given", "setup", "import torch\n")
    outcome = checks.run("check", "loops", "seen = [n for n, _ in enumerate(range(3))]\n"
                                           "assert seen == [0, 1, 2] and double(torch.ones(1)).item() == 2\n"
                                           "assert globals()['_course_seed'](1) == _course_seed(1) > 1000\n")
    assert outcome["ok"], outcome
    checks_names = checks.student.names(["double"])
    assert set(checks_names) == {"double"}


def test_what_a_check_writes_below_python_never_fills_a_pipe_the_grader_does_not_read():
    """Output written to the process's own descriptors (PyTorch's C++ warnings, a C library) bypasses the check's
    capture: it goes nowhere, so that a grading process's checker never blocks on a full pipe."""
    bridge = student_bridge()
    session = Session(b"key")
    try:
        outcome = session.run("check", "floods", "import os\nfor _ in range(64):\n    os.write(2, b'x' * 65536)\n"
                                                 "    os.write(1, b'y' * 65536)\n", bridge, 30)
        assert outcome == {"ok": True, "stdout": ""}
    finally:
        session.close()


BLOCK = '''
import torch
from dataclasses import dataclass
from torch import nn
@dataclass
class Config:
    width: int
class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.proj = nn.Linear(cfg.width, cfg.width)
    def forward(self, x):
        return self.proj(x)
class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn = Attention(cfg)
    def forward(self, x):
        return x + self.attn(x)
def heads_of(module):
    return module.heads, module.proj.weight
'''
GIVEN = "import torch\nfrom dataclasses import dataclass\nfrom torch import nn\n@dataclass\nclass Config:\n    width: int\n"


def test_a_check_sends_its_visible_classes_modules_and_configs_and_keeps_its_hidden_ones():
    """A check's own stand-in class (visible part) is defined in the kernel from its source, so the student's
    block builds it; a module the check builds is rebuilt there with the check's own parameters (identity
    holds when they come back); a config crosses as its fields. A class of the hidden part never leaves."""
    namespace: dict = {}
    exec(BLOCK, namespace)
    checks = Checks(in_process(Bridge(namespace).serve), b"key")
    assert checks.run("given", "given", GIVEN)["ok"]
    visible = '''
class StandIn(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.proj = nn.Linear(cfg.width, cfg.width)
    def forward(self, x):
        return 0 * x
names = _course_namespace()
yours = names.get("Attention")
names["Attention"] = StandIn
block = Block(Config(width=3))
names["Attention"] = yours
assert isinstance(block.attn, StandIn) and isinstance(block.attn, nn.Module)
x = torch.randn(2, 3)
assert torch.equal(block(x), x)
made = nn.Module()
made.heads = 4
made.proj = nn.Linear(3, 3)
heads, weight = heads_of(made)
assert heads == 4 and weight is made.proj.weight
with torch.no_grad():
    made.proj.weight.zero_()
assert heads_of(made)[1].abs().sum() == 0
print("visible ok")
### BEGIN HIDDEN TESTS
class Secret(nn.Module):
    def forward(self, x):
        return x
names["Attention"] = Secret
### END HIDDEN TESTS
'''
    outcome = checks.run("check", "test_block", visible)
    assert outcome["stdout"] == "visible ok\n"
    assert (outcome["ename"], outcome["evalue"]) == (
        "TypeError", "the class Secret is defined in a hidden part: it stays in the checker")
    assert "Secret" not in namespace and "StandIn" not in namespace       # nothing bound in the notebook


def test_the_checkers_memory_is_limited_as_a_submissions_kernel_is():
    """A check holds values the student's side chose (a tensor's size, a shape it then fills): the checker's
    child has the address space a kernel has, so an outsized one fails that check, not the grader."""
    from autograder.grading_environment import value

    session = Session(b"key")
    try:
        most = value("COURSE_GRADING_MEMORY_GB")
        outcome = session.run("check", "huge", f"import torch\nx = torch.empty({int(most * 2**30 // 4) + 2**28})\n"
                                               "x.fill_(1.0)\n", student_bridge(), 60)
        assert outcome["ok"] is False and outcome["ename"] in ("MemoryError", "RuntimeError"), outcome
        assert session.run("check", "after", "assert 1 + 1 == 2", student_bridge(), 30)["ok"]
    finally:
        session.close()


def test_a_checker_parent_whose_grader_has_gone_ends_and_leaves_nothing_behind():
    """A grading process killed before its exit handlers ran (a Dask worker's end, a kill from the shell) closes
    its end of the parent's control socket: the parent ends. It has no socket or folder on disk to leave."""
    from autograder.checker.session import CheckerParent

    def checker_entries():
        return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("course-checker")}

    before = checker_entries()
    checker = CheckerParent(("torch",))
    checker._control.close()            # as the kernel closes a dead grader's descriptors
    checker.process.wait(timeout=30)
    assert checker_entries() == before


def test_the_checker_runs_in_a_sandbox_without_the_course_the_network_or_the_graders_environment(tmp_path,
                                                                                                monkeypatch):
    """The checker's parent runs in bubblewrap: of the grading package only what it imports, no course file, none
    of the grader's files, no network, none of the grader's environment but its limits and locale."""
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent"))         # the grader's, never the checker's
    (tmp_path / "graders-file").write_text("not for the checker")
    session = Session(b"key", ("torch", "numpy", "json"))                # a parent of its own, started now
    try:
        outcome = session.run("check", "look", f"""
import os, socket, pathlib, autograder
package = pathlib.Path(autograder.__file__).parent
print(sorted(str(path.relative_to(package)) for path in package.rglob("*")
             if path.suffix == ".py" or path.name == "checker"))
print(pathlib.Path(package.parent, "README.md").exists(), pathlib.Path(package.parent, "solutions").exists())
print(os.path.exists({str(tmp_path / "graders-file")!r}), os.environ.get("SSH_AUTH_SOCK"))
try:
    socket.create_connection(("127.0.0.1", 1), timeout=1)
    print("network")
except OSError as error:
    print("no network")
""", student_bridge(), 60)
    finally:
        session.close()
    assert outcome["ok"], outcome
    lines = outcome["stdout"].splitlines()
    checker = sorted(f"checker/{path.name}" for path in (Path(autograder.__file__).parent / "checker").glob("*.py"))
    assert lines[0] == str(sorted(["__init__.py", "bounded.py", "checker", *checker, "grading_environment.py",
                                   "sandbox/__init__.py", "sandbox/kernel_zygote.py"]))
    assert lines[1:] == ["False False", "False None", "no network"]
