"""The grading boundary is an allow-list, every place a kernel writes is inside its limits, launchers never
remove each other's cgroups, and a hand-in is bounded at intake.

The class is graded once, by the class-grading command (autograder.classgrader.grade_class), in a course placed outside every
temporary and home folder (under /srv or /var), where a sandbox that hid a list of folders showed the
course to every kernel.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.classgrader import grade_class
from tools import grading
from tools.course import COURSE, Course

pytestmark = pytest.mark.grading

A = "01-layernorm"
NOTEBOOK = COURSE.master_notebook(A).name
CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]
HANDIN_LIMITS = {"COURSE_GRADING_HANDIN_FILES": "3", "COURSE_GRADING_HANDIN_MB": "1"}
CLASS_LIMITS = {**HANDIN_LIMITS,
                # Walking the whole file system (a few hundred thousand entries under /usr) took over the
                # 60 s a cell gets when two walkers shared two busy cores (load 5): 4x that, for load 4+.
                "COURSE_GRADING_CELL_TIMEOUT": "240", "COURSE_GRADING_NOTEBOOK_TIMEOUT": "600"}

from autograder.sandbox import cgroups
from autograder import grading_environment
from autograder.plugins import handins

# Walks the whole file system (but the kernel's own /proc, /sys and /dev, and the Python environment, whose
# packages ship folders of these names) for anything of the course: its unique folder name, a gradebook, a
# .git, the masters' and classmates' folders.
WALKS_FOR_THE_COURSE = '''
import os, sys
found = []
python = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev") or os.path.realpath(root) in python:
        dirs[:] = []
        continue
    for name in dirs + files:
        path = os.path.join(root, name)
        if "{mark}" in path or name in ("gradebook.db", ".git", "solutions", "submitted", "autograded", "exchange"):
            found.append(path)
print("course files found:", len(found), found[:5])
'''

# Looks in every readable notebook for the master's solution and runs it: full marks with no answer, if found.
RUNS_THE_MASTERS_SOLUTION = '''
import json, os
solution, marker = None, "### BEGIN " + "SOLUTION"      # spelt apart, so this cell does not find itself
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for name in files:
        if name.endswith(".ipynb"):
            try:
                cells = json.load(open(os.path.join(root, name)))["cells"]
            except Exception:
                continue
            for cell in cells:
                text = "".join(cell.get("source", ""))
                if marker in text and "def layernorm" in text:
                    solution = text
print("solution found:", solution is not None)
if solution is not None:
    exec(solution)
'''

# Reaches for the grader's own descriptors through /proc/self/fd: reads what they hold (under the class
# grader, the workers' log with classmates' ids), writes a forged log line, a terminal title and clipboard
# escape sequence and 2 MB, and tries to change the log's mode.
FORGED = "grade_class: FORGED-LINE every submission graded"
GRABS_THE_GRADERS_DESCRIPTORS = r'''
import os
seen, read = {}, b""
for fd in (0, 1, 2):
    try:
        seen[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as error:
        seen[fd] = type(error).__name__
    try:
        handle = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
        read += os.read(handle, 4096)
        os.close(handle)
    except OSError:
        pass
    try:
        os.fchmod(fd, 0o666)
    except OSError:
        pass
# Printed first, in a message of its own: what is written below may come back as output too large to keep.
print("descriptors:", seen)
print("read from them:", len(read), read[:200], flush=True)
for fd in (1, 2):
    try:
        os.write(fd, b"\n\x1b]0;owned\x07\x1b]52;c;ZWNobyBvd25lZA==\x07{forged}\n")
        for _ in range(32):
            os.write(fd, b"z" * 65536)
    except OSError:
        pass
'''.replace("{forged}", FORGED)


def answer(code: str) -> nbformat.NotebookNode:
    return grading.submission_from_release(A, {"layernorm": code})


def outside_temporary_and_home_folders() -> Path:
    """A fresh folder under /srv or /var: neither a temporary folder nor a home."""
    for parent in (Path("/srv"), Path("/var")):
        if os.access(parent, os.W_OK):
            folder = parent / f"course-boundary-{secrets.token_hex(4)}"
            folder.mkdir()
            return folder
    pytest.skip("neither /srv nor /var is writable here: no place outside the temporary and home folders")


def total(root: Path, student: str) -> float:
    return sum(score for score, _ in grading.cell_scores(root, A, student).values())


def printed(root: Path, student: str) -> str:
    notebook = grading.autograded_notebook(root, A, student)
    return "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))


@pytest.fixture(scope="module")
def boundary_class(course):
    """Walkers, a solution hunter, an honest classmate and three hand-ins with extra files, graded by the class
    command in a course under /srv (or /var), removed afterwards."""
    folder = outside_temporary_and_home_folders()
    try:
        root = grading.copy_course(course, folder / "course")
        mark = folder.name
        grading.submit(root, "honest", A, answer(CORRECT))
        grading.submit(root, "walker", A, answer(CORRECT + WALKS_FOR_THE_COURSE.replace("{mark}", mark)))
        grading.submit(root, "hunter", A, answer(RUNS_THE_MASTERS_SOLUTION))
        grading.submit(root, "descriptors", A, answer(CORRECT + GRABS_THE_GRADERS_DESCRIPTORS))
        crowded = grading.submit(root, "crowded", A, answer(CORRECT)).parent
        for index in range(5):                                        # over the limit of 3 files
            (crowded / f"scratch{index}.txt").write_text("notes")
        oversized = grading.submit(root, "oversized", A, answer(CORRECT)).parent
        with open(oversized / "data.bin", "wb") as handle:            # 2 MB by its listing, none on disk
            handle.truncate(2 * 2**20)
        notes = grading.submit(root, "notes", A, answer(CORRECT)).parent
        (notes / "notes.txt").write_text("my notes")
        with pytest.MonkeyPatch.context() as patch:
            for key, limit in CLASS_LIMITS.items():
                patch.setenv(key, limit)
            summary = grade_class.grade_class(root, [A], workers=2, progress=False)
        yield root, summary, mark
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_kernel_that_walks_the_whole_file_system_finds_no_course_file(boundary_class):
    root, summary, mark = boundary_class
    assert not summary["failed"], summary["failed"]
    text = printed(root, "walker")
    assert "course files found: 0 []" in text, text[:2000]


def test_the_masters_solution_cannot_be_found_and_run(boundary_class):
    root, _, _ = boundary_class
    assert "solution found: False" in printed(root, "hunter")
    assert total(root, "hunter") == 0 < total(root, "honest")


def test_a_kernel_holds_no_descriptor_of_the_graders_and_its_output_reaches_the_log_bounded(boundary_class):
    root, summary, _ = boundary_class
    assert not summary["failed"], summary["failed"]
    text = printed(root, "descriptors")
    # stdin is /dev/null; stdout and stderr a pipe drained outside the sandbox, not the worker's log file.
    assert "descriptors: {0: '/dev/null', 1: 'pipe:" in text and ", 2: 'pipe:" in text, text[:2000]
    assert "read from them: 0 b''" in text, text[:2000]
    assert total(root, "descriptors") == total(root, "honest")
    log = grade_class.log_path(Course(root))
    content = log.read_bytes()
    assert oct(log.stat().st_mode & 0o777) == oct(0o644)
    assert b"\x1b" not in content and b"\x07" not in content            # no escape sequence reached it
    forged = [line for line in content.decode(errors="replace").splitlines() if FORGED in line]
    assert forged and all(line.startswith("[grading kernel ") for line in forged), forged
    # The kernel wrote 4 MB; the log keeps at most sandboxed_kernel.STDIO_BYTES of it, escaped (4 bytes a
    # byte at most) and prefixed, plus what the workers themselves logged.
    from autograder.sandbox.drainer import STDIO_BYTES
    assert content.count(b"z" * 1024) <= STDIO_BYTES // 1024 and len(content) < 8 * STDIO_BYTES + 2**20


@pytest.mark.parametrize("student, why", [("crowded", "5 files of 0.0 MB"), ("oversized", "1 files of 2.0 MB")])
def test_too_many_or_too_large_hand_ins_are_refused_with_a_message(boundary_class, student, why):
    root, _, _ = boundary_class
    notebook = grading.autograded_notebook(root, A, student)
    flags = " ".join(grading.grader_flags(notebook))
    assert f"refused at intake: {why}" in flags and "over the limit of 3 files and 1 MB" in flags
    assert "refused at intake" in notebook.cells[0].source.lower()  # the student's note, at the top
    assert total(root, student) == total(root, "honest")                # the notebook itself was graded
    graded = Course(root).path("autograded", student, A)
    assert [path.name for path in graded.iterdir()] == [NOTEBOOK]


def test_only_the_files_the_release_ships_reach_the_autograded_folder(boundary_class):
    root, _, _ = boundary_class
    notebook = grading.autograded_notebook(root, A, "notes")
    assert "not graded: files the release does not ship (notes.txt)" in grading.grader_flags(notebook)
    assert total(root, "notes") == total(root, "honest")
    graded = Course(root).path("autograded", "notes", A)
    assert [path.name for path in graded.iterdir()] == [NOTEBOOK]


def test_the_hand_in_rule_counts_from_the_listing_and_takes_only_what_the_release_ships(tmp_path, monkeypatch):
    """The rule both engines apply (autograder/plugins/handins.py), including the packer's list of what it left out, which
    travels in the task and can only add to a student's count; a file named like it in the hand-in counts for
    nothing."""
    for key, limit in HANDIN_LIMITS.items():
        monkeypatch.setenv(key, limit)
    release, submitted = tmp_path / "release", tmp_path / "submitted"
    release.mkdir()
    submitted.mkdir()
    (release / NOTEBOOK).write_text("{}")
    (release / "data.csv").write_text("1,2")
    (submitted / NOTEBOOK).write_text("{}")
    (submitted / "data.csv").write_text("3,4")
    (submitted / "helper.py").write_text("x = 1")
    (submitted / "link.csv").symlink_to("/etc/hostname")
    found = handins.survey(submitted, release)
    assert found.refusal is None
    assert found.taken == ["data.csv", NOTEBOOK] and found.left_out == ["helper.py", "link.csv"]
    refused = handins.survey(submitted, release, not_sent={"big.bin": 5000000})   # the packer's, in the task
    assert refused.taken == [NOTEBOOK] and "4 files of 4.8 MB" in refused.refusal
    (submitted / handins.MANIFEST).write_text('[["big.bin", 5000000]]')   # a student's own: dropped unread
    assert handins.survey(submitted, release).refusal is None



def test_nbgraders_own_files_are_always_taken_and_never_flagged(tmp_path):
    """nbgrader submit writes submission_secret.txt and collect timestamp.txt beside the notebook;
    release_feedback needs the secret again in the feedback folder, copied from autograded/."""
    release, submitted = tmp_path / "release", tmp_path / "submitted"
    release.mkdir()
    submitted.mkdir()
    (release / NOTEBOOK).write_text("{}")
    for name in (NOTEBOOK, "timestamp.txt", "submission_secret.txt"):
        (submitted / name).write_text("x")
    found = handins.survey(submitted, release)
    assert found.taken == sorted([NOTEBOOK, "submission_secret.txt", "timestamp.txt"])
    assert found.flags() == []

# --- every writable place is inside the limits ---------------------------------------------------------------

WRITES_THROUGH_THE_SOCKET_FOLDER = '''
import os
from ipykernel.kernelapp import IPKernelApp
folder = os.path.dirname(IPKernelApp.instance().ip)
written = 0
try:
    with open(os.path.join(folder, "filler"), "wb") as handle:
        for _ in range(48):
            handle.write(b"x" * 2**20)
            handle.flush()
            written += 2**20
except OSError as error:
    print("stopped:", error.strerror)
print("written MB:", written // 2**20)
for place in ("/", "/etc", "/dev", "/usr", "/work"):
    try:
        open(os.path.join(place, "filler"), "wb").close()
        print("wrote in", place)
    except OSError:
        pass
'''


def test_writing_through_the_socket_folder_stops_at_the_limit(tmp_path, monkeypatch):
    """The kernel's sockets are files in a folder: it is a tiny tmpfs inside the sandbox, not the grader's
    folder, so nothing written there escapes the disk limit (here 16 MB; the writer tries 48)."""
    monkeypatch.setenv("COURSE_GRADING_DISK_MB", "16")
    from autograder.plugins.guarded_execute import GuardedExecute
    (tmp_path / "work").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(WRITES_THROUGH_THE_SOCKET_FOLDER)])
    executor = GuardedExecute(extra_arguments=grading_environment.kernel_arguments(),
                              startup_timeout=int(grading_environment.value("COURSE_GRADING_KERNEL_STARTUP_TIMEOUT")))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path / "work")}})
    text = "".join(out.get("text", "") for out in nb.cells[0].outputs)
    assert "stopped: No space left on device" in text and "written MB: 0" in text, text
    assert "wrote in" not in text, text


# --- cgroups: launchers side by side ------------------------------------------------------------------------

def cgroups_writable() -> bool:
    return cgroups.available()


def gone_process() -> int:
    """The id of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.skipif(not cgroups_writable(), reason="this machine lets the grader create no cgroup "
                    "(no writable hierarchy with the memory and pids controllers)")
def test_a_launchers_sweep_never_removes_another_graders_fresh_group():
    """Launcher A has created its group and not entered it yet; launcher B starts and sweeps. A's grader is
    alive, so its group stays; a group whose grader has gone is removed."""
    name = f"race-{secrets.token_hex(4)}"
    fresh = cgroups.create(f"{name}-a@{cgroups.owner_tag(os.getpid())}", 2**30, 64)
    orphan = cgroups.create(f"{name}-b@{gone_process()}.1.{cgroups.pid_namespace()}", 2**30, 64)
    # a container beside this one, sharing the hierarchy: its process ids mean nothing here
    neighbour = cgroups.create(f"{name}-c@{gone_process()}.1.4026531836999", 2**30, 64)
    try:
        assert None not in (fresh, orphan, neighbour)
        cgroups.sweep()                                  # what launcher B does first
        assert cgroups.find(f"{name}-a") is not None, "another launcher's fresh group was removed"
        assert cgroups.find(f"{name}-c") is not None, "another PID namespace's group was judged from this one"
        assert cgroups.find(f"{name}-b") is None, "a group whose grader has gone was kept"
    finally:
        for group in (fresh, orphan, neighbour):
            if group is not None:
                group.remove()


def test_where_cgroups_are_required_a_launcher_without_one_stops_with_a_message(monkeypatch, capsys):
    monkeypatch.setattr(cgroups, "_parents", lambda: None)
    with pytest.raises(cgroups.CgroupRequired, match="COURSE_GRADING_CGROUPS=required: this submission is not graded"):
        cgroups.enter("kernel-x", 2**30, 64, required=True)
    assert cgroups.enter("kernel-x", 2**30, 64, required=False) is None
    assert "limits are per process" in capsys.readouterr().err


def test_the_cgroup_setting_is_declared_and_checked(monkeypatch):
    monkeypatch.setenv(grading_environment.CGROUPS_VARIABLE, "required")
    assert grading_environment.cgroups_required()
    monkeypatch.setenv(grading_environment.CGROUPS_VARIABLE, "sometimes")
    with pytest.raises(ValueError, match="'required' or 'optional'"):
        grading_environment.cgroups_required()
