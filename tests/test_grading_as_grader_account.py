"""Grading as an ordinary Unix account, as on a JupyterHub, where the formgrader and `nbgrader autograde` run as
the course's grader account and never as root.

The test makes a real account and does what the instructors' page tells an admin to do once: make a control
group, give it to the account, and name it in COURSE_GRADING_CGROUP_PARENT. Then, as that account, the preflight
says every limit holds for the whole submission, and `nbgrader autograde` grades a class in which one hand-in
forks a memory hog across processes and one forks until it is refused: each is stopped by its submission's own
group and flagged, nothing says "per process only", and both keep the points of their correct answer. The same
account without the delegated group is told, by the preflight, that its limits hold per process only.

The account runs Debian's own Python 3.11 with this checkout's packages (the machine's default Python lives in
root's home, which no other account may enter), in a folder of its own outside pytest's (which only root may
enter). It needs root to make the account and the group, and cgroup v1's memory and pids hierarchies (this
machine's kind); a cgroup v2 machine delegates through systemd (`Delegate=`), which the instructors' page
describes and this test does not start.
"""

from __future__ import annotations

import os
import platform
import pwd
import shutil
import subprocess
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import cells, grading_environment
from autograder.sandbox import cgroups
from tests import attacks
from tools import grading
from tools.course import Course

pytestmark = pytest.mark.grading

A = "01-layernorm"
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]          # an alternative correct answer
FULL = grading.points_by_answer(A)["layernorm"]
POINTS = sum(grading.points_by_answer(A).values())
LIMITS = {"COURSE_GRADING_MEMORY_GB": "3", "COURSE_GRADING_PROCESSES": "64", "COURSE_GRADING_CELL_TIMEOUT": "20",
          "COURSE_GRADING_NOTEBOOK_TIMEOUT": "90"}

# Forks until the submission's process limit refuses a fork (a kernel is a few dozen threads already), then
# ends its children itself, so that the rest of the notebook grades as usual.
FORK_UNTIL_REFUSED = '''
import os, time
children = []
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print("forked", len(children))
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
'''
CLASS = {"honest": CORRECT, "memory-across-processes": CORRECT + attacks.FORK_MEMORY,
         "forks-until-refused": CORRECT + FORK_UNTIL_REFUSED}


@dataclass
class Account:
    name: str
    uid: int
    gid: int
    home: Path                  # its own folder: the course copy and its Python live here
    python: Path
    delegated: str              # the group the admin gave it, as COURSE_GRADING_CGROUP_PARENT names it

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
        """`argv` as this account: its own user and group ids, no supplementary groups, a clean environment."""
        clean = {"PATH": f"{self.python.parent}:/usr/bin:/bin", "HOME": str(self.home), "LANG": "C.UTF-8", **env}
        return subprocess.run(["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                               "env", "-i", *(f"{key}={value}" for key, value in clean.items()), *argv],
                              cwd=cwd, capture_output=True, text=True, timeout=timeout)


def v1_hierarchies() -> list[Path]:
    return [cgroups.ROOT / controller for controller in ("memory", "pids")
            if (cgroups.ROOT / controller / "cgroup.procs").exists()]


@pytest.fixture(scope="module")
def account():
    if os.geteuid() != 0:
        pytest.skip("making a Unix account and giving it a control group needs root")
    if len(v1_hierarchies()) != 2 or not DEBIAN_PYTHON.exists() or not shutil.which("setpriv"):
        pytest.skip("needs cgroup v1's memory and pids hierarchies, Debian's python3.11 and setpriv")
    name = f"course-grader-{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    entry = pwd.getpwnam(name)
    home = Path(tempfile.mkdtemp(prefix="grader-account-", dir="/tmp"))
    delegated = f"/{name}"
    groups = [hierarchy / name for hierarchy in v1_hierarchies()]
    try:
        home.chmod(0o755)
        # The account's Python: Debian's interpreter, with this checkout's packages on its path.
        subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(home / "venv")], check=True)
        packages = sysconfig.get_paths()["purelib"]
        (home / "venv" / "lib" / "python3.11" / "site-packages" / "course.pth").write_text(
            f"import site; site.addsitedir({packages!r})\n")
        # The admin's step, once (the instructors' page): a group in each hierarchy, given to the account.
        for group in groups:
            group.mkdir()
            os.chown(group, entry.pw_uid, entry.pw_gid)
        yield Account(name, entry.pw_uid, entry.pw_gid, home, home / "venv" / "bin" / "python", delegated)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        for group in groups:
            for inner in sorted(group.glob("**/"), key=lambda path: -len(path.parts)):
                try:
                    inner.rmdir()
                except OSError:
                    pass
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def chown_tree(root: Path, account: Account) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, account.uid, account.gid)


@pytest.fixture(scope="module")
def graded(account, course):
    """A class handed in and graded by `nbgrader autograde`, run as the account with its delegated group."""
    root = grading.copy_course(course, account.home / "course")
    grading.hand_in(root, [grading.Submission(student, A, grading.submission_from_release(A, {"layernorm": code}))
                           for student, code in CLASS.items()])
    chown_tree(root, account)
    env = {**LIMITS, grading_environment.CGROUP_PARENT_VARIABLE: account.delegated}
    result = account.run([str(account.python), "-m", "nbgrader", "autograde", A, "--force"],
                         cwd=Course(root).autograder, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return root, result


def notebook(graded, student):
    return grading.autograded_notebook(graded[0], A, student)


def total(graded, student):
    scores = grading.cell_scores(graded[0], A, student)
    return sum(score for score, _ in scores.values()), sum(top for _, top in scores.values())


def test_the_preflight_as_the_account_says_every_limit_holds_with_the_delegated_group(account):
    env = {grading_environment.CGROUP_PARENT_VARIABLE: account.delegated}
    result = account.run([str(account.python), "-m", "autograder.sandbox.preflight"], cwd=account.home, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"as user {account.uid}" in result.stdout
    assert "holds for the whole submission" in result.stdout and "per process only" not in result.stdout
    assert f"{account.delegated}/{cgroups.GROUP}" in result.stdout


def test_without_the_delegated_group_the_preflight_says_per_process_only_and_what_to_do(account):
    result = account.run([str(account.python), "-m", "autograder.sandbox.preflight"], cwd=account.home, env={})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "control groups: NOT AVAILABLE" in result.stdout and "per process only" in result.stdout
    assert grading_environment.CGROUP_PARENT_VARIABLE in result.stdout


def test_the_account_grades_and_owns_what_it_wrote(graded, account):
    for student in CLASS:
        path = Course(graded[0]).path("autograded", student, A)
        assert path.stat().st_uid == account.uid
    assert total(graded, "honest") == (FULL, POINTS)


def test_no_submission_is_graded_with_per_process_limits_only(graded):
    assert "per process only" not in graded[1].stdout + graded[1].stderr
    for student in CLASS:
        assert cells.notebook_conditions(notebook(graded, student)) == []
        assert not any("per process only" in flag for flag in cells.notebook_flags(notebook(graded, student)))


def test_every_kernel_is_forked_warm_by_the_account(graded):
    """The warm parent (issue 41) works for an ordinary account too, where bubblewrap makes a user namespace that
    its children join: no kernel fell back to a cold start."""
    for student in CLASS:
        flags = cells.notebook_flags(notebook(graded, student))
        said = [line for line in (graded[1].stdout + graded[1].stderr).splitlines() if "warm parent" in line][:3]
        assert not any("started cold" in flag for flag in flags), (student, flags, said)


def test_a_memory_hog_across_processes_is_stopped_by_the_submissions_group(graded):
    flags = " ".join(cells.notebook_flags(notebook(graded, "memory-across-processes")))
    assert "memory limit reached" in flags
    assert total(graded, "memory-across-processes") == (FULL, POINTS)      # only its children were killed


def test_forking_past_the_process_limit_is_refused_by_the_submissions_group(graded):
    flags = " ".join(cells.notebook_flags(notebook(graded, "forks-until-refused")))
    assert "process limit reached" in flags
    outputs = "".join(output.get("text", "") for cell in notebook(graded, "forks-until-refused").cells
                      if cell.cell_type == "code" for output in cell.get("outputs", []))
    forked = int(outputs.split("forked ", 1)[1].split()[0])
    assert 0 < forked < int(LIMITS["COURSE_GRADING_PROCESSES"])
    assert total(graded, "forks-until-refused") == (FULL, POINTS)


def test_nothing_the_class_started_outlives_its_grading(graded, account):
    listed = subprocess.run(["ps", "-u", account.name, "-o", "stat=,args="], capture_output=True, text=True).stdout
    running = [line for line in listed.splitlines() if not line.lstrip().startswith("Z")]   # not yet reaped: gone
    assert running == [], running
    for hierarchy in v1_hierarchies():
        assert list((hierarchy / account.name / cgroups.GROUP).glob("*@*")) == []


@pytest.mark.parametrize("kernels", ["warm", "cold"])
def test_a_kernel_that_rewrites_the_sandboxs_init_leaves_nothing_running_without_a_group(account, course, kernels):
    """Without a delegated group (limits per process only, as on a hub whose admin gave none), nothing kills the
    submission's processes but the end of its sandbox. A kernel that rewrites init's code (attacks.REWRITE_INIT) so
    that it no longer dies with the launcher, and starts a daemon, leaves nothing running once graded: the launcher's
    drainer kills init when the launcher ends. And nbgrader, its output captured, returns (the drainer holds the
    grader's stderr until the sandbox has gone)."""
    if platform.machine() != "x86_64":
        pytest.skip("the rewrite is x86_64 machine code")
    root = grading.copy_course(course, account.home / f"course-init-{kernels}")
    student = f"rewrites-init-{kernels}"
    grading.hand_in(root, [grading.Submission(student, A, grading.submission_from_release(
        A, {"layernorm": CORRECT + attacks.REWRITE_INIT}))])
    chown_tree(root, account)
    env = {**LIMITS, grading_environment.KERNELS_VARIABLE: kernels}          # and no COURSE_GRADING_CGROUP_PARENT
    result = account.run([str(account.python), "-m", "nbgrader", "autograde", A, "--force", "--student", student],
                         cwd=Course(root).autograder, env=env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    graded = grading.autograded_notebook(root, A, student)
    assert "init rewritten" in "".join(output.get("text", "") for cell in graded.cells for output in cell.get("outputs", []))
    said = cells.notebook_conditions(graded) + cells.notebook_flags(graded)
    assert any("per process only" in text for text in said), said          # graded with no group, as meant
    deadline = time.monotonic() + 10          # the drainer's kill is asynchronous to nbgrader's exit
    while True:
        listed = subprocess.run(["ps", "-u", account.name, "-o", "stat=,args="], capture_output=True, text=True).stdout
        running = [line for line in listed.splitlines() if not line.lstrip().startswith("Z")]
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert running == [], running
