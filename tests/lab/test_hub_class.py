"""A class of 4 on the course's hub machine, set up and graded with the instructors' page's commands as written
(issue 56): no browser and no hub server, the accounts and shells as each person meets them.

- the admin's commands (`make hub-prerequisites`, `sudo .venv/bin/python -m tools.hub prepare --roster roster.csv
  --instructors ...`) make the class's accounts from a roster as an LMS exports it, with homes closed and their
  names in the gradebook;
- each student, in a login shell of their own, has the course's `nbgrader` on PATH, fetches, answers and submits
  (one then adds 25 files beside the notebook, over the hand-in limit: `nbgrader submit` refuses and says why,
  and nbgrader's own submit, which a student may configure, hands them in anyway), and cannot read a classmate's
  home;
- the grader account, in its login shell, runs the preflight as the page writes it (the control group seen) and
  the page's whole-class path: release, collect (the extra files left out), `python -m autograder.classgrader`,
  feedback generated and released, the class report with its Canvas file;
- the page's `teardown` removes what prepare made and gives the checkout back.

It uses the page's own root (/srv/gpt2-block) and grader account, so it skips where either is there already (a
`make hub` demo, a real class). It needs root, Debian's python3.11, su, and `sudo` (a stand-in that runs the
command as root is put on PATH where sudo is not installed).
"""

from __future__ import annotations

import concurrent.futures
import csv
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograder.course import Course
from tests.lab.test_roles import CORRECT, CORRECT_BACKWARD, SAMPLE_VARIANCE
from tools import grading
from tools import hub as hub_tools
from tools.course import REPO

pytestmark = [pytest.mark.lab, pytest.mark.grading, pytest.mark.cluster]

A, NOTEBOOK = "01-layernorm", "layernorm.ipynb"
ROOT = Path("/srv") / hub_tools.COURSE.course_id
GRADER = hub_tools.GRADER
TAG = str(os.getpid())[-4:]
STUDENTS = [f"s{TAG}x{number:02d}" for number in range(1, 5)]   # 4: the path is the same for 200, the suite's time is not
BUGGY = set(STUDENTS[::7])                            # the sample variance: bob's misconception
HOARDER = STUDENTS[1]                                 # 25 files beside the notebook
POINTS = sum(grading.points_by_answer(A).values())
BUGGY_POINTS = POINTS - sum(                          # the two tests the sample variance fails
    grading.graded_cell_points(A)[cell][1] for cell in ("test_worked_example", "test_population_variance"))


def page_section() -> str:
    text = (REPO / "book" / "instructors.md").read_text()
    start = text.index("### One class on one server")
    return text[start:text.index("\n### ", start + 1)]


def page_block(containing: str) -> list[str]:
    """The commands of the section's bash block that contains `containing`, comments removed."""
    blocks = re.findall(r"```bash\n(.*?)```", page_section(), re.DOTALL)
    block = next(block for block in blocks if containing in block)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def shell(line: str, path_first: Path) -> subprocess.CompletedProcess:
    """One of the admin's commands, from the checkout's root, as root."""
    return subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PATH": f"{path_first}:{os.environ['PATH']}"})


def login_shell(name: str, commands: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Commands in `name`'s login shell (what a JupyterLab terminal or ssh gives them)."""
    return subprocess.run(["su", "-", name, "-c", commands], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("a class of real accounts needs root")
    if not hub_tools.DEBIAN_PYTHON.exists() or not shutil.which("su"):
        pytest.skip("needs Debian's python3.11 (a Python every account can run) and su")
    if ROOT.exists() or str(ROOT) in hub_tools.load_state()["roots"]:
        pytest.skip(f"{ROOT} is in use on this machine (a `make hub` demo or a class): the page's commands would share it")
    try:
        pwd.getpwnam(GRADER)
        pytest.skip(f"the account {GRADER} exists already on this machine")
    except KeyError:
        pass
    bin_dir = tmp_path_factory.mktemp("bin")
    if not shutil.which("sudo"):
        (bin_dir / "sudo").write_text('#!/bin/sh\n# root already: sudo stands for the command itself\nexec "$@"\n')
        (bin_dir / "sudo").chmod(0o755)
    instructors = re.search(r"--instructors (\S+)", " ".join(page_block("tools.hub prepare"))).group(1).split(",")
    roster = REPO / "roster.csv"
    modes_before = {name: stat.S_IMODE((REPO / name).stat().st_mode) for name in ("solutions", "gptcourse")}
    with roster.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Login", "First Name", "Last Name", "Email"])
        for number, login in enumerate(STUDENTS, 1):
            writer.writerow([login, f"First{number}", f"Last{number}", f"{login}@example.edu"])
    try:
        for line in page_block("tools.hub prepare"):
            if " serve" in line:
                assert line.startswith("sudo .venv/bin/python -m tools.hub serve"), line      # starts the hub: not here
                continue
            ran = shell(line, bin_dir)
            assert ran.returncode == 0, f"{line}\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
        yield {"bin": bin_dir, "instructors": instructors, "modes_before": modes_before}
    finally:
        roster.unlink(missing_ok=True)
        if str(ROOT) in hub_tools.load_state()["roots"]:           # the test stopped before the page's teardown
            for name in (*STUDENTS, GRADER):
                subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
            hub_tools.teardown(ROOT, remove_course=True)
        shutil.rmtree(ROOT, ignore_errors=True)


def test_the_roster_made_every_account_with_a_closed_home_and_its_name(prepared):
    from nbgrader.api import Gradebook

    for login in [*STUDENTS, *prepared["instructors"]]:
        home = Path(pwd.getpwnam(login).pw_dir)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700, login
    with Gradebook(Course(ROOT / "course").db_url, hub_tools.COURSE.course_id) as gradebook:
        assert {(s.id, s.first_name, s.last_name) for s in gradebook.students} == {
            (login, f"First{number}", f"Last{number}") for number, login in enumerate(STUDENTS, 1)}
    assert stat.S_IMODE((ROOT / "hub.env").stat().st_mode) == 0o600


def test_the_grader_accounts_shell_has_the_course_and_the_preflight_sees_its_group(prepared):
    lines = page_block("autograder.sandbox.preflight")
    assert lines[0] == f"sudo -iu {GRADER}"
    ran = login_shell(GRADER, " && ".join(lines[1:]))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"Grading preflight for {ROOT / 'course'}" in ran.stdout
    if "COURSE_GRADING_CGROUP_PARENT" in hub_tools.read_settings(ROOT):
        assert ran.stdout.count("holds for the whole submission") == 2, ran.stdout
        assert "per process only" not in ran.stdout


def grader_runs(lines: list[str]) -> subprocess.CompletedProcess:
    ran = login_shell(GRADER, "set -e\n" + "\n".join(lines))
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    return ran


def test_the_class_hands_in_and_is_graded_by_the_pages_whole_class_path(prepared):
    lines = page_block("autograder.classgrader")
    assert lines[0].startswith("cd ") and lines[1].startswith("nbgrader release_assignment")
    grader_runs(lines[:2])
    answers = Path(tempfile.mkdtemp(prefix="hub-answers-", dir="/tmp"))      # pytest's folders are root's alone
    answers.chmod(0o755)
    for login in STUDENTS:
        answer = {"layernorm": SAMPLE_VARIANCE if login in BUGGY else CORRECT, "layernorm_backward": CORRECT_BACKWARD}
        nbformat.write(grading.submission_from_release(A, answer), answers / f"{login}.ipynb")
        (answers / f"{login}.ipynb").chmod(0o644)
    extra = "; ".join(f"echo x > {A}/data{number}.txt" for number in range(25))

    def hand_in(login: str) -> subprocess.CompletedProcess:
        return login_shell(login, f"set -e; command -v nbgrader; nbgrader fetch_assignment {A}; "
                                  f"cp {answers / login}.ipynb {A}/{NOTEBOOK}; nbgrader submit {A}")

    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for login, ran in zip(STUDENTS, pool.map(hand_in, STUDENTS)):
                assert ran.returncode == 0, f"{login}: {ran.stdout[-2000:]}{ran.stderr[-2000:]}"
                assert ran.stdout.startswith(str(ROOT / "python" / "bin" / "nbgrader")), ran.stdout
    finally:
        shutil.rmtree(answers)
    # The hoarder adds 25 files: their `nbgrader submit` refuses and says why; they submit anyway with nbgrader's
    # own submit (a student's settings are theirs to change), and collect leaves the files out.
    refused = login_shell(HOARDER, f"{extra}; nbgrader submit {A}")
    assert refused.returncode != 0 and "Nothing was submitted. The folder holds 25 files" in refused.stderr, refused
    forced = login_shell(HOARDER, f"nbgrader submit {A} --ExchangeFactory.submit="
                                  "nbgrader.exchange.default.submit.ExchangeSubmit")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    # A classmate's notebook, as a student with a shell would try it.
    peek = login_shell(STUDENTS[0], f"head -c 100 ~{STUDENTS[2]}/{A}/{NOTEBOOK}")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek
    canvas = ROOT / "course" / "autograder" / "canvas-roster.csv"
    with canvas.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "student_id"])
        for number, login in enumerate(STUDENTS, 1):
            writer.writerow([f"Last{number}, First{number}", 1000 + number, "", login, "A", login])
    grader = pwd.getpwnam(GRADER)
    os.chown(canvas, grader.pw_uid, grader.pw_gid)
    ran = grader_runs([lines[0], *lines[2:]])
    course = Course(ROOT / "course")
    hoarded = course.path("submitted", HOARDER, A)
    assert sorted(path.name for path in hoarded.iterdir()) == sorted([NOTEBOOK, "timestamp.txt",
                                                                      "submission_secret.txt"]), ran.stderr
    assert "over the hand-in limit" in ran.stdout + ran.stderr
    from nbgrader.api import Gradebook

    with Gradebook(course.db_url, hub_tools.COURSE.course_id) as gradebook:
        scores = {login: gradebook.find_submission(A, login).score for login in STUDENTS}
    assert scores == {login: BUGGY_POINTS if login in BUGGY else POINTS for login in STUDENTS}
    released = ROOT / "exchange" / hub_tools.COURSE.course_id / "feedback"
    assert len(list(released.iterdir())) == len(STUDENTS)
    report = course.root / "_build" / "class-report"
    assert (report / f"{A}-report.html").exists()
    with (report / f"{A}-canvas.csv").open(newline="") as handle:
        rows = {row["SIS Login ID"]: row for row in csv.DictReader(handle) if row["SIS Login ID"]}
    column = next(name for name in next(iter(rows.values())) if A in name)
    assert {login: float(rows[login][column]) for login in STUDENTS} == pytest.approx(scores)


def test_the_pages_teardown_removes_what_prepare_made(prepared):
    teardown = re.search(r"`(sudo \.venv/bin/python -m tools\.hub teardown)`", page_section()).group(1)
    for name in (*STUDENTS, GRADER):
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)      # the class grader's leftovers
    ran = shell(teardown, prepared["bin"])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for login in [*STUDENTS, GRADER, *prepared["instructors"]]:
        with pytest.raises(KeyError):
            pwd.getpwnam(login)
    assert not hub_tools.profile_file(ROOT).exists()
    assert {name: stat.S_IMODE((REPO / name).stat().st_mode) for name in prepared["modes_before"]} == \
        prepared["modes_before"]
    assert (ROOT / "course").stat().st_uid == 0 and not (ROOT / "python").exists()       # the grades are kept
