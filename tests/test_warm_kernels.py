"""Warm kernels (issue 41): forked from a warm parent into a sandbox built for each, with the boundary of a cold one.

Each test grades small notebooks with the course's executor (GuardedExecute) in this process, as one grading
worker does, so every warm kernel here is forked from this process's one warm parent, one after another or side
by side. The hostile hand-ins are the new attacks a warm parent invites: probing the parent and a sibling
through /proc, signals, shared memory and sockets; leaving module state, files, threads or processes behind for
the classmate graded next; outliving the grading. The whole hostile class is graded warm and cold and held
equal in tests/test_grader_robustness.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder import grading_environment
from autograder.sandbox import sandboxed_kernel, warm_kernels
from autograder.cells import FLAGS

pytestmark = pytest.mark.grading


def grade(cells: list[str], folder: Path, timeout: int = 60) -> tuple[nbformat.NotebookNode, dict]:
    from autograder.plugins.guarded_execute import GuardedExecute

    folder.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    executor = GuardedExecute(extra_arguments=grading_environment.kernel_arguments(), timeout=timeout,
                              startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")))
    return executor.preprocess(notebook, {"metadata": {"path": str(folder)}})


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream")


def errors(notebook: nbformat.NotebookNode) -> list[str]:
    return [f"{output['ename']}: {output['evalue']}" for cell in notebook.cells for output in cell.get("outputs", [])
            if output.get("output_type") == "error"]


def reported(notebook: nbformat.NotebookNode) -> dict:
    """The JSON the notebook's last line printed, with the names made fresh for each kernel (its connection file
    and socket folder) made alike."""
    assert not errors(notebook), errors(notebook)
    text = printed(notebook).strip().splitlines()[-1]
    text = re.sub(r"course-grading-[A-Za-z0-9_]+", "course-grading-X", re.sub(r"tmp[A-Za-z0-9_]{8}", "tmpX", text))
    return json.loads(text)


def the_parent() -> warm_kernels.WarmParent:
    running = warm_kernels.running()
    assert len(running) == 1, f"one warm parent in this process, not {len(running)}"
    return running[0]


def host_processes_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


# What a kernel sees of itself and its sandbox: everything a cold kernel sees, but the processes (a warm sandbox
# holds its placeholder, so the kernel is the third process and its parent is outside).
PROBE = r'''
import grp, json, os, pwd, random, resource, socket, sys
import numpy, torch
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
seen = {
    "uid": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
    "user": pwd.getpwuid(os.getuid()).pw_name, "home": os.path.expanduser("~"), "cwd": os.getcwd(),
    "hostname": socket.gethostname(), "environment": {key: value for key, value in os.environ.items()},
    "path": sys.path, "executable": sys.executable, "root": sorted(os.listdir("/")),
    "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")), "work": sorted(os.listdir(".")),
    "capabilities": {field: status[field].strip() for field in ("CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs")},
    "limits": {name: resource.getrlimit(getattr(resource, name)) for name in
               ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")},
    "cgroup": open("/proc/self/cgroup").read(), "mounts": sorted(line.split()[1] for line in open("/proc/self/mounts")),
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "random": [random.random(), float(numpy.random.rand()), torch.rand(1).item()],
    "torch": [str(torch.get_default_dtype()), torch.are_deterministic_algorithms_enabled()],
    "namespaces": {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in ("mnt", "net", "ipc", "uts", "pid")},
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid(),
}
print(json.dumps(seen))
'''


def test_a_warm_kernel_sees_what_a_cold_kernel_sees(tmp_path, monkeypatch):
    """Everything the kernel can see of itself is the same warm and cold: user, folders, environment, import path,
    capabilities, limits, cgroup, mounts, network and the first random numbers. None of its namespaces is the
    grader's (two kernels side by side share none: test_a_kernel_cannot_reach_the_warm_parent_or_a_sibling); only
    the processes differ, by the placeholder."""
    warm = [reported(grade([PROBE], tmp_path / f"warm-{n}")[0]) for n in range(2)]
    monkeypatch.setenv(grading_environment.KERNELS_VARIABLE, "cold")
    cold = reported(grade([PROBE], tmp_path / "cold")[0])
    ours = {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in ("mnt", "net", "ipc", "uts", "pid")}
    for name, inode in ours.items():
        assert inode not in {warm[0]["namespaces"][name], warm[1]["namespaces"][name], cold["namespaces"][name]}
    for seen in (*warm, cold):
        # The cgroup line names the kernel's own group (its id): the same shape, a different group each time.
        seen["cgroup"] = sorted(line.split(":")[1] for line in seen["cgroup"].splitlines())
        del seen["namespaces"]
    assert cold["processes"] == [1, cold["me"]]                # bubblewrap's init and the kernel
    assert warm[0]["processes"] == [1, 2, warm[0]["me"]]       # ... and the placeholder that holds the sandbox
    for seen in (*warm, cold):
        del seen["processes"], seen["me"]
    assert warm[0] == cold
    assert warm[1] == cold


def test_each_kernel_starts_from_the_parents_clean_image_whatever_the_one_before_did(tmp_path):
    """A kernel changes module state, PyTorch's defaults, the environment, its files and shared memory, and leaves
    a thread and a process running; the classmate graded next on the same worker sees none of it, and nothing of
    the first outlives its grading."""
    mark = f"{os.getpid()}.{time.monotonic_ns() % 10**6}"
    leaves = grade([f'''
import colorsys, ctypes, os, subprocess, threading, time, torch
torch.set_default_dtype(torch.float64)
torch.manual_seed(1234)
colorsys.rgb_to_hsv = lambda *args: "patched"
torch.Tensor.__add__ = lambda self, other: "patched"
os.environ["LEFT_BEHIND"] = "1"
open("/tmp/left-behind", "w").write("x")
open("/dev/shm/left-behind", "w").write("x")
libc = ctypes.CDLL(None)
segment = libc.shmget(4242, 4096, 0o1666)
threading.Thread(target=time.sleep, args=(600,), daemon=False).start()
subprocess.Popen(["sleep", "{mark}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execvp("sleep", ["sleep", "{mark}1"])
print("left", segment)
'''], tmp_path / "first")[0]
    assert "left" in printed(leaves), (printed(leaves), errors(leaves))
    parent = the_parent()
    nxt = grade(['''
import colorsys, ctypes, json, os, threading, torch
libc = ctypes.CDLL(None)
print(json.dumps({
    "dtype": str(torch.get_default_dtype()), "module": colorsys.rgb_to_hsv(1, 0, 0),
    "add": str(torch.ones(1) + torch.ones(1)), "environment": "LEFT_BEHIND" in os.environ,
    "files": [os.path.exists(p) for p in ("/tmp/left-behind", "/dev/shm/left-behind")],
    "segment": libc.shmget(4242, 0, 0), "threads": [t.name for t in threading.enumerate() if "sleep" in t.name],
    "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid(),
    "first random": torch.rand(1).item(),
}))
'''], tmp_path / "next")[0]
    seen = reported(nxt)
    assert the_parent() is parent, "both kernels came from the same warm parent"
    assert seen["dtype"] == "torch.float32"
    assert seen["module"] == [0.0, 1.0, 1.0]
    assert seen["add"] == "tensor([2.])"
    assert not seen["environment"]
    assert seen["files"] == [False, False]
    assert seen["segment"] == -1, "a shared-memory segment of the kernel before is visible"
    assert seen["threads"] == [], "a thread of the kernel before runs in this one"
    assert seen["processes"] == [1, 2, seen["me"]]
    assert seen["first random"] == pytest.approx(0.49625658988952637)       # torch.manual_seed(0)'s first draw
    deadline = time.monotonic() + 10
    while host_processes_with(f"sleep {mark}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not host_processes_with(f"sleep {mark}"), "a process of the first kernel outlived its grading"


def sibling_host_pid(marker: str, deadline: float) -> int:
    """The host's id of the kernel that wrote `marker` into its working folder, found through /proc/PID/root."""
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if (entry / "root" / "tmp" / "submission" / marker).exists() and \
                            b"kernel_zygote" in (entry / "cmdline").read_bytes() and \
                            (entry / "ns" / "pid").stat().st_ino != Path("/proc/self/ns/pid").stat().st_ino:
                        return int(entry.name)
                except OSError:
                    pass
        time.sleep(0.1)
    raise AssertionError("the sibling kernel never started")


def test_a_kernel_cannot_reach_the_warm_parent_or_a_sibling(tmp_path):
    """A kernel given the host's ids of the warm parent and of a sibling kernel running beside it, and the parent's
    socket, reaches neither: no such process in its /proc or to its signals, no socket at that path, no shared
    memory of the sibling's, no process id it can signal but its sandbox's own."""
    grade(["print(1)"], tmp_path / "warm-up")                       # the parent runs
    parent = the_parent()
    marker = f"sibling-{os.getpid()}"
    sibling_result = {}

    def sibling():
        sibling_result["notebook"] = grade([f'''
import ctypes, os, time
libc = ctypes.CDLL(None)
libc.shmget(4343, 4096, 0o1666)
open("/dev/shm/sibling", "w").write("x")
open("{marker}", "w").write("x")
deadline = time.monotonic() + 25
while not os.path.exists("{marker}-probed") and time.monotonic() < deadline:
    time.sleep(0.05)
print("sibling done")
'''], tmp_path / "sibling")[0]

    thread = threading.Thread(target=sibling)
    thread.start()
    try:
        kernel = sibling_host_pid(marker, time.monotonic() + 60)
        targets = {"the warm parent": parent.process.pid, "the sibling kernel": kernel}
        probe = grade([f'''
import ctypes, json, os, signal, socket
targets = {targets!r}
libc = ctypes.CDLL(None)
reached = {{}}
for who, pid in targets.items():
    try:
        os.kill(pid, 0)
        reached[who + " by a signal"] = True
    except ProcessLookupError:
        pass
    except PermissionError:
        reached[who + " by a signal (refused, but it exists)"] = True
    if os.path.exists(f"/proc/{{pid}}") and pid > 3:
        reached[who + " in /proc"] = True
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect({parent.socket!r})
    reached["the parent's socket"] = True
except OSError:
    pass
if libc.shmget(4343, 0, 0) != -1 or os.listdir("/dev/shm"):
    reached["the sibling's shared memory"] = True
visible = set()
for pid in range(1, min(int(open("/proc/sys/kernel/pid_max").read()), 1 << 22) + 1):
    try:
        os.kill(pid, 0)
        visible.add(pid)
    except ProcessLookupError:
        pass
    except PermissionError:
        visible.add(pid)
own = {{int(task) for p in os.listdir("/proc") if p.isdigit() for task in os.listdir(f"/proc/{{p}}/task")}}
if visible - own:
    reached["processes outside the sandbox"] = sorted(visible - own)[:5]
print(json.dumps(reached))
'''], tmp_path / "probe", timeout=120)[0]
        assert reported(probe) == {}
    finally:
        # The sibling runs until the probe is done (at most 25 s): told through its own folder, which the host
        # reaches as it found the sibling, through /proc/PID/root.
        with contextlib.suppress(NameError, OSError):
            (Path(f"/proc/{kernel}/root/tmp/submission") / f"{marker}-probed").write_text("done")
        thread.join()
    assert "sibling done" in printed(sibling_result["notebook"])


def test_a_warm_parent_that_failed_or_cannot_start_gives_a_cold_kernel_flagged(tmp_path, monkeypatch):
    """Never a weaker sandbox: a kernel whose warm parent does not answer starts cold, in the same sandbox, and the
    notebook is graded and flagged with why; a parent that cannot start at all makes every kernel cold, flagged; a
    parent that died is started again for the next kernel."""
    check = ["import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == [1, os.getpid()])"]
    monkeypatch.setattr(warm_kernels, "parent_socket", lambda *_: (str(tmp_path / "no-parent-here"), None))
    notebook, resources = grade(check, tmp_path / "no-answer")
    assert printed(notebook) == "True\n"                           # a cold kernel: bwrap's init and itself
    assert any(flag.startswith("kernel started cold: the warm parent did not start it") for flag in resources[FLAGS])
    monkeypatch.undo()

    monkeypatch.setattr(grading_environment, "WARM_IMPORTS", ("no_such_module_anywhere",))
    notebook, resources = grade(check, tmp_path / "cannot-start")
    assert printed(notebook) == "True\n"
    assert any("the warm parent could not start" in flag and "no_such_module_anywhere" in flag
               for flag in resources[FLAGS]), resources.get(FLAGS)
    monkeypatch.undo()

    grade(["print(1)"], tmp_path / "warm")
    parent = the_parent()
    parent.process.kill()
    parent.process.wait()
    notebook, resources = grade(["import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"],
                                tmp_path / "after-its-death")
    assert not resources.get(FLAGS), resources.get(FLAGS)
    assert len(json.loads(printed(notebook))) == 3                 # warm again: a new parent
    assert the_parent() is not parent


# A notebook that imports transformers, as assignment 4's check and assignment 6's setup cell do: what its kernel
# sees before the import and after it, and what the import computes.
TRANSFORMERS_BEFORE = r'''
import json, os, sys, tempfile
print(json.dumps({"preloaded": "transformers.models.gpt2.modeling_gpt2" in sys.modules,
                  "environment": dict(os.environ), "tmp": tempfile.gettempdir()}))
'''
TRANSFORMERS_AFTER = r'''
import json, os, sys, tempfile, torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging
import torch._dynamo.package as dynamo_package
hf_logging.set_verbosity_error()
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, n_positions=8, vocab_size=11)).eval()
with torch.no_grad():
    logits = model(torch.tensor([[1, 2, 3]])).logits
print(json.dumps({"environment": dict(os.environ), "tmp": tempfile.gettempdir(),
                  "modules": sorted(name for name in sys.modules if name.split(".")[0] == "transformers"),
                  "dynamo cache": dynamo_package.DynamoCache.path_prefix(),
                  "logits": logits.flatten().tolist(), "random": torch.rand(1).item()}))
'''


def test_a_notebook_importing_transformers_gets_a_parent_that_has_and_grades_as_cold(tmp_path, monkeypatch):
    """A notebook whose code imports transformers is forked from a second warm parent that has imported it too
    (grading_environment.WARM_PRELOADS): its import costs nothing, and what the kernel sees before and after it,
    and computes with it, is what a cold kernel sees and computes. Every other
    notebook keeps the lighter parent, whose kernels hold nothing of transformers."""
    plain = grade(["import json, sys\nprint(json.dumps(sorted(sys.modules)))"], tmp_path / "plain")[0]
    assert not [name for name in json.loads(printed(plain)) if name.startswith("transformers")]
    base = the_parent()
    try:
        warm = [grade([TRANSFORMERS_BEFORE, TRANSFORMERS_AFTER], tmp_path / f"warm-{n}")[0] for n in range(2)]
        heavy = [parent for parent in warm_kernels.running() if parent is not base]
        assert len(heavy) == 1 and set(heavy[0].imports) >= set(grading_environment.WARM_PRELOADS["transformers"])
        # Forked from the lighter parent (it imported transformers, not PyTorch again), as its child.
        assert heavy[0].process is None and parent_pid(heavy[0].pid) == base.process.pid
        monkeypatch.setenv(grading_environment.KERNELS_VARIABLE, "cold")
        cold = grade([TRANSFORMERS_BEFORE, TRANSFORMERS_AFTER], tmp_path / "cold")[0]
        seen = {}
        for name, notebook in (("warm", warm[0]), ("again", warm[1]), ("cold", cold)):
            assert not errors(notebook), errors(notebook)
            lines = [json.loads(re.sub(r"course-grading-[A-Za-z0-9_]+", "course-grading-X",
                                       re.sub(r"tmp[A-Za-z0-9_]{8}", "tmpX", "".join(output.get("text", "")
                                                                                       for output in cell.outputs))))
                     for cell in notebook.cells]
            seen[name] = lines
        assert seen["warm"][0].pop("preloaded") and seen["again"][0].pop("preloaded")
        assert not seen["cold"][0].pop("preloaded")
        # PyTorch's compiler (torch._dynamo), which every warm parent imports and transformers imports in a cold
        # kernel, names its cache folder in the environment as it loads: the kernel's environment names it first.
        assert {seen[name][line]["environment"]["TORCHINDUCTOR_CACHE_DIR"]
                for name in seen for line in (0, 1)} == {"/tmp"}
        assert seen["warm"] == seen["cold"]
        assert seen["again"] == seen["cold"]
    finally:
        with warm_kernels._lock:
            for key, parent in list(warm_kernels._parents.items()):
                if parent is not base:
                    parent.stop()
                    del warm_kernels._parents[key]
    assert the_parent() is base


def parent_pid(pid: int) -> int:
    return int(re.search(r"^PPid:\s*(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))


def test_a_heavier_parent_that_cannot_be_forked_is_started_as_any_other(monkeypatch):
    """A lighter parent that is gone (or refuses) leaves the heavier one to start as its own process."""
    plain = tuple(grading_environment.WARM_IMPORTS)
    gone = warm_kernels.WarmParent({}, plain)
    gone.stop()                                  # no process, no socket: connecting fails
    environment = sandboxed_kernel.kernel_environment()
    heavier = plain + ("json",)
    key = (sys.executable, tuple(sorted(environment.items())), heavier)
    with warm_kernels._lock:
        parent, why = warm_kernels._running(key, environment, heavier, 60, gone)
    try:
        assert why is None and parent.process is not None and parent.pid is None and parent.alive()
    finally:
        with warm_kernels._lock:
            warm_kernels._parents.pop(key, None)
        parent.stop()
    assert not parent.alive() and not Path(parent.socket).exists()


def test_a_plain_parent_and_the_heavier_one_forked_from_it_end_together_at_once(monkeypatch):
    """At a grading process's exit (stop_all) a plain parent waits for the heavier parents forked from it, which end
    when their own pipes close: every pipe closes first (a review found 5 s at every exit when they closed in
    turn), and neither is left running."""
    environment = sandboxed_kernel.kernel_environment()
    plain_imports = tuple(grading_environment.WARM_IMPORTS)
    plain = warm_kernels.WarmParent(environment, plain_imports)
    plain.start(60)
    heavier = warm_kernels.WarmParent(environment, plain_imports + ("json",))
    heavier.start(60, plain)
    assert heavier.process is None and heavier.alive() and parent_pid(heavier.pid) == plain.process.pid
    monkeypatch.setattr(warm_kernels, "_parents", {"plain": plain, "heavier": heavier})
    started = time.monotonic()
    warm_kernels.stop_all()
    assert time.monotonic() - started < 3
    assert not plain.alive() and not heavier.alive()
    assert not Path(plain.socket).parent.exists() and not Path(heavier.socket).parent.exists()


def test_warm_imports_follow_what_the_notebook_imports():
    imports = grading_environment.warm_imports
    assert imports(["import torch\nx = 1"]) == grading_environment.WARM_IMPORTS
    assert imports(["print('from transformers import nothing')"]) == grading_environment.WARM_IMPORTS
    for source in ("from transformers import GPT2Config", "def check():\n    from transformers import GPT2Config",
                   "import transformers.models.gpt2 as gpt2"):
        assert imports([source]) == grading_environment.WARM_IMPORTS + grading_environment.WARM_PRELOADS["transformers"]
    # An optimizer is named, not imported (torch.optim comes with torch): its first use imports PyTorch's compiler.
    compiler = grading_environment.WARM_IMPORTS + grading_environment.WARM_PRELOADS["torch.optim"]
    for source in ("def train_step(model, optimizer, x):\n    optimizer.step()", "opt = torch.optim.SGD(params)"):
        assert imports([source]) == compiler
    assert imports(["optimal = optimizers_seen = 1"]) == grading_environment.WARM_IMPORTS


def test_the_kernels_setting_is_declared_and_checked(monkeypatch):
    monkeypatch.delenv(grading_environment.KERNELS_VARIABLE, raising=False)
    assert grading_environment.warm_kernels()
    monkeypatch.setenv(grading_environment.KERNELS_VARIABLE, "cold")
    assert not grading_environment.warm_kernels()
    monkeypatch.setenv(grading_environment.KERNELS_VARIABLE, "tepid")
    with pytest.raises(ValueError, match="warm.*cold"):
        grading_environment.warm_kernels()


REFUSED_CALLS = r'''
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return ctypes.get_errno() if result == -1 else 0
session_keyring = ctypes.c_int(-3).value            # KEY_SPEC_SESSION_KEYRING
user_keyring = ctypes.c_int(-4).value               # KEY_SPEC_USER_KEYRING
print(json.dumps({
    "read the session keyring": errno_of(libc.syscall(250, 11, session_keyring, None, 0)),   # keyctl(KEYCTL_READ)
    "add to the user keyring": errno_of(libc.syscall(248, b"user", b"left-for-a-classmate", b"x", 1, user_keyring)),
    "request a key": errno_of(libc.syscall(249, b"user", b"grader-secret", None, 0)),
    "trace bubblewrap's init": errno_of(libc.syscall(101, 16, 1, None, None)),               # ptrace(PTRACE_ATTACH)
    "read another process's memory": errno_of(libc.syscall(310, 1, None, 0, None, 0, 0)),
}))
'''


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the hand-in calls x86_64's system call numbers")
@pytest.mark.parametrize("kind", ["warm", "cold"])
def test_no_kernel_reaches_a_keyring_or_traces_a_process(tmp_path, monkeypatch, kind):
    """A namespace does not separate the kernel keyrings (the grader's session keyring is inherited; graded as root,
    root's user keyring is every kernel's and outlives the grading), and the kernel runs as the user of the
    sandbox's init, which it could trace and keep alive where no cgroup holds the submission. Warm or cold, each of
    these system calls is refused (EPERM, 1) by the seccomp program (autograder/sandbox/seccomp_filter.py)."""
    monkeypatch.setenv(grading_environment.KERNELS_VARIABLE, kind)
    notebook, resources = grade([REFUSED_CALLS], tmp_path / kind)
    assert set(reported(notebook).values()) == {1}, reported(notebook)
    assert not resources.get(FLAGS), resources.get(FLAGS)
