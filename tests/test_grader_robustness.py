"""Broken, hostile and tampering submissions lose nothing and win nothing.

One class is graded once by the class-grading command (`autograder.classgrader.grade_class`, as instructors grade; tight
limits so hangs and hogs end fast): honest students next to students whose notebooks crash, hang, exhaust
memory, edit or delete the tests, patch what the tests rely on, attack the grading machine
(tests/attacks.py), are not valid notebooks at all, or whose timestamp.txt holds no time. Each test reads
one behaviour off that class; rerun, the command grades only what failed. Assignment 1 keeps it fast.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
import time

import nbformat
import pytest

from tests import attacks
from autograder import cells
from autograder.classgrader import grade_class
from tools import grading, stock_nbgrader
from tools.course import COURSE, Course

pytestmark = pytest.mark.grading

A = "01-layernorm"
ZEROS_STUDENT = "zeros"                  # the wrong answer of the attacks against the verdict, without their tricks
NOTEBOOK = COURSE.master_notebook(A).name
LIMITS = {"COURSE_GRADING_CELL_TIMEOUT": "8", "COURSE_GRADING_CPU_SECONDS": "12", "COURSE_GRADING_MEMORY_GB": "3",
          "COURSE_GRADING_NOTEBOOK_TIMEOUT": "60"}

CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]          # an alternative correct answer
SAMPLE_VARIANCE_BUG = grading.load_catalog(A)[0]
SAMPLE_VARIANCE = SAMPLE_VARIANCE_BUG.cells["layernorm"]
# The hostile class answers `layernorm` only (the backward pass stays the release's stub): an honest student
# earns FULL of the assignment's POINTS, and the sample variance loses the points of its own checks.
POINTS = sum(grading.points_by_answer(A).values())
FULL = grading.points_by_answer(A)["layernorm"]
SAMPLE_VARIANCE_SCORE = FULL - sum(grading.graded_cell_points(A)[cell][1] for cell in SAMPLE_VARIANCE_BUG.fails)


def answer(code: str) -> nbformat.NotebookNode:
    return grading.submission_from_release(A, {"layernorm": code})


def with_test_cells(notebook, change):
    notebook = copy.deepcopy(notebook)
    notebook.cells = [change(cell) if cell.metadata.get("nbgrader", {}).get("grade") else cell
                      for cell in notebook.cells]
    notebook.cells = [cell for cell in notebook.cells if cell is not None]
    return notebook


def emptied(cell):
    cell.source = "pass"
    return cell


def promoted(cell):
    cell.metadata["nbgrader"].update(points=100, solution=True, grade=True)
    return cell


def huge_markdown(notebook):
    notebook = copy.deepcopy(notebook)
    notebook.cells.append(nbformat.v4.new_markdown_cell("my notes " * 700_000))       # about 6 MB
    return notebook


def copied_test_cell(notebook):
    """A student copies a test cell, nbgrader metadata and all, to run it again further down."""
    notebook = copy.deepcopy(notebook)
    test = next(cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")
                and not cell.metadata["nbgrader"].get("solution"))
    notebook.cells.append(copy.deepcopy(test))
    return notebook


def empty_metadata(notebook):
    notebook = copy.deepcopy(notebook)
    notebook.cells.insert(1, nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {}}))
    return notebook


FORMULA = '=HYPERLINK("http://example.invalid","full marks")'


def forged_flags(notebook):
    notebook = copy.deepcopy(notebook)
    notebook.metadata[grading.flags_key()] = {"flags": [FORMULA]}
    return notebook


def with_markdown(notebook, text):
    notebook = copy.deepcopy(notebook)
    notebook.cells.append(nbformat.v4.new_markdown_cell(text))
    return notebook


MACHINE_ATTACKS = {
    "links-out": answer(CORRECT + attacks.LINK_GRADEBOOK),
    "reads-the-course": answer(CORRECT + attacks.READ_COURSE),
    "daemon": answer(CORRECT + attacks.DAEMON),
    "stops-the-grader": answer(CORRECT + attacks.STOP_GRADER),
    "fork-memory": answer(CORRECT + attacks.FORK_MEMORY),
    "fills-the-disk": answer(CORRECT + attacks.FILL_DISK),
    "print-flood": answer(CORRECT + attacks.PRINT_FLOOD),
}

CLASS = {
    # honest students, graded beside everyone else
    "honest": answer(CORRECT),
    "honest-twin": answer(CORRECT),
    "sample-variance": answer(SAMPLE_VARIANCE),
    "sample-variance-twin": answer(SAMPLE_VARIANCE),
    # 1. answer cells that raise
    "not-implemented": nbformat.read(COURSE.release_notebook(A), as_version=4),
    "syntax-error": answer("def layernorm(x, gamma, beta, eps=1e-5)\n    return x"),
    "name-error": answer("layernorm = undefined_helper"),
    # 2. hangs: a sleeping loop hits the cell timeout
    "hangs": answer(CORRECT + "\nimport time\nwhile True:\n    time.sleep(0.05)"),
    # 3. the kernel dies
    "os-exit": answer(CORRECT + "\nimport os\nos._exit(1)"),
    "segfault": answer(CORRECT + "\nimport ctypes\nctypes.string_at(0)"),
    "sys-exit": answer(CORRECT + "\nimport sys\nsys.exit(3)"),
    # 4. runaway memory and CPU
    "memory-hog": answer(CORRECT + "\nhog = torch.empty(40 * 2**30, dtype=torch.uint8)\nhog.fill_(1)"),
    "cpu-hog": answer(CORRECT + "\nwhile True:\n    pass"),
    # 5. the tests edited, deleted or re-labelled
    "tests-emptied": with_test_cells(answer(SAMPLE_VARIANCE), emptied),
    "tests-deleted": with_test_cells(answer(SAMPLE_VARIANCE), lambda cell: None),
    "tests-promoted": with_test_cells(answer(SAMPLE_VARIANCE), promoted),
    # 6. gaming the checks from inside the kernel
    "patch-allclose": answer(SAMPLE_VARIANCE + "\ntorch.allclose = lambda *args, **kwargs: True"
                             "\ntorch.Tensor.allclose = lambda *args, **kwargs: True"),
    "patch-equal-and-assert-close": answer(
        SAMPLE_VARIANCE + "\ntorch.equal = lambda *args: True\ntorch.testing.assert_close = lambda *a, **k: None"),
    "patch-isinstance": answer(SAMPLE_VARIANCE + "\nimport builtins\nbuiltins.isinstance = lambda *args: True"),
    "patch-numpy": answer(SAMPLE_VARIANCE + "\nimport numpy\nnumpy.allclose = lambda *args, **kwargs: True"),
    "redefine-assertion-error": answer(SAMPLE_VARIANCE + "\nclass AssertionError(Warning):\n    pass"),
    "always-equal": answer(
        "class Anything(torch.Tensor):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def tolist(self):\n        return [-1.2247448713915890, 0.0, 1.2247448713915890]\n"
        "torch.equal = lambda *args: True\n"
        "def layernorm(x, gamma, beta, eps=1e-5):\n"
        "    return torch.zeros_like(x).as_subclass(Anything)"),
    "rebind-F": answer(SAMPLE_VARIANCE + "\nclass _Fake:\n    def __getattr__(self, name):\n"
                       "        return lambda x, *a, **k: layernorm(x, 1, 0)\nF = _Fake()"),
    # 10. honest code that writes to stderr
    "warns": answer(CORRECT.replace("def layernorm(x, gamma, beta, eps=1e-5):",
                                    "import sys, warnings\ndef layernorm(x, gamma, beta, eps=1e-5):\n"
                                    "    warnings.warn('a harmless warning')\n"
                                    "    print('debugging output', file=sys.stderr)")),
    # 11. honest, but unusual: prints a lot, TorchScript, torch.compile, float64
    "prints-a-lot": answer(CORRECT + attacks.PRINTS_A_LOT),
    "torchscript": answer(attacks.TORCHSCRIPT),
    "compiled": answer(attacks.COMPILED),
    "float64": answer(attacks.FLOAT64),
    # 12. changing how the tests are read, run or scored
    "zeros": answer(attacks.ZEROS),                                    # the wrong answer, without tricks
    "input-transformer": answer(attacks.INPUT_TRANSFORMER),
    "ast-transformer": answer(attacks.AST_TRANSFORMER),
    "display-hook": answer(attacks.DISPLAY_HOOK),
    "function-mode": answer(attacks.FUNCTION_MODE),
    "settrace": answer(attacks.SETTRACE),
    "guard-off": answer(SAMPLE_VARIANCE + attacks.GUARD_OFF),
    "prints-the-tests": answer(attacks.PRINT_TESTS),
    # 12b. the verdict itself, from the kernel's side (issue 58's held-out round): the checks run in the checker
    "swallowed-errors": answer(attacks.SWALLOWED_ERRORS),
    "tensor-subclass": answer(attacks.TENSOR_SUBCLASS),
    "writes-its-arguments": answer(attacks.WRITES_ITS_ARGUMENTS),
    "prints-every-cell": answer(attacks.PRINTS_EVERY_CELL + CORRECT),
    "reads-the-caller": answer(attacks.READS_THE_CALLER),
    "reads-its-notebook": answer(CORRECT + attacks.READS_ITS_NOTEBOOK),
    "misshapen-replies": answer(CORRECT + attacks.MISSHAPEN_REPLIES),
    "forged-code": answer(attacks.FORGED_CODE.format(setup=next(
        cell.source for cell in nbformat.read(COURSE.release_notebook(A), as_version=4).cells
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup"))),
    # 13. breaking the assignment's rules
    "uses-layer-norm": answer(attacks.USES_LAYER_NORM),
    "uses-layer-norm-module": answer(attacks.USES_LAYER_NORM_MODULE),
    "imports-reference": answer(attacks.IMPORTS_REFERENCE),
    # 14. the grading machine: links out of the working folder, the course's files, processes, limits
    **MACHINE_ATTACKS,
    # 15. notebooks nbgrader itself would choke on, forged flags, scripts for the feedback page
    "huge-markdown": huge_markdown(answer(CORRECT)),
    "copied-test-cell": copied_test_cell(answer(CORRECT)),
    "empty-metadata": empty_metadata(answer(CORRECT)),
    "forged-flags": forged_flags(answer(SAMPLE_VARIANCE)),
    "scripts": with_markdown(answer(CORRECT + attacks.SCRIPTS), attacks.SCRIPT_MARKDOWN),
}
MALFORMED = {
    "invalid-json": b'{"cells": [',
    "empty-file": b"",
    "nbformat-3": json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}).encode(),
}


def hostile_class() -> list[grading.Submission]:
    """The class above, the malformed notebooks and the hand-ins with odd files; the bad timestamp last."""
    submissions = [grading.Submission(student, A, notebook) for student, notebook in CLASS.items()]
    submissions += [grading.Submission(student, A, content) for student, content in MALFORMED.items()]
    submissions.append(grading.Submission("renamed", A, answer(CORRECT), filename="layernorm (1).ipynb"))
    submissions.append(grading.Submission("extra-files", A, answer(CORRECT),
                                          extra_files={"notes.txt": b"my notes", "scratch.py": b"x = 1\n"}))
    # A name that is not UTF-8 (a Latin-1 file system, a zip from another machine, or on a hub on purpose): once it
    # failed that student's grading under both front doors, when the flag naming it was written into the notebook.
    submissions.append(grading.Submission("odd-file-name", A, answer(CORRECT),
                                          extra_files={os.fsdecode(ODD_NAME): b"my notes"}))
    submissions.append(grading.Submission(BAD_TIMESTAMP, A, answer(CORRECT),
                                          extra_files={"timestamp.txt": b"the day after tomorrow"}))
    return submissions


@pytest.fixture(scope="module")
def hostile(course, tmp_path_factory):
    """The class, graded by the engine with warm kernels (the default)."""
    submissions = hostile_class()
    root = grading.copy_course(course, tmp_path_factory.mktemp("hostile") / "course")
    started = time.monotonic()
    HOSTILE_SUMMARY.append(grading.grade_submissions(root, submissions, env=LIMITS))  # the engine
    HOSTILE_SECONDS.append(time.monotonic() - started)
    return {submission.student: root for submission in submissions if submission.student != BAD_TIMESTAMP}


def outcome(root, student) -> dict:
    """What grading gave one student: every check's score, what each check shows, the flags and conditions."""
    notebook = grading.autograded_notebook(root, A, student)
    scores = grading.cell_scores(root, A, student)
    return {"scores": scores, "shown": {cell: grading.cell_error(notebook, cell) for cell in scores},
            "flags": sorted(grading.grader_flags(notebook)), "conditions": cells.notebook_conditions(notebook)}


# Hand-ins whose grading is decided before or after their kernel runs (the notebook's shape, its metadata, its
# files, its test cells restored from the master; twins of others): the warm-and-cold comparison leaves them out.
KERNEL_INDEPENDENT = {"honest-twin", "sample-variance-twin", "tests-emptied", "tests-deleted", "tests-promoted",
                      "huge-markdown", "copied-test-cell", "empty-metadata", "forged-flags", "scripts",
                      "renamed", "extra-files", "odd-file-name", "bad-timestamp", *MALFORMED}


def test_warm_and_cold_kernels_grade_the_hostile_class_identically(hostile, course, tmp_path_factory):
    """The cold kernel is the reference (issue 41): the class graded again with COURSE_GRADING_KERNELS=cold (every
    hand-in whose kernel does something: all but KERNEL_INDEPENDENT) gets the same scores, messages, flags and
    conditions, student by student, and no warm kernel started cold."""
    root = grading.copy_course(course, tmp_path_factory.mktemp("hostile-cold") / "course")
    again = [submission for submission in hostile_class() if submission.student not in KERNEL_INDEPENDENT]
    summary = grading.grade_submissions(root, again, env={**LIMITS, "COURSE_GRADING_KERNELS": "cold"})
    assert sorted(r["student"] for r in summary["failed"]) == sorted(
        r["student"] for r in HOSTILE_SUMMARY[0]["failed"] if r["student"] not in KERNEL_INDEPENDENT)
    compared = 0
    for student, graded_in in hostile.items():
        if student in KERNEL_INDEPENDENT:
            continue
        if not Course(graded_in).path("autograded", student, A).exists():
            continue                            # not a notebook nbgrader could read: no kernel either way
        warm, cold = outcome(graded_in, student), outcome(root, student)
        assert not any("started cold" in flag for flag in warm["flags"]), (student, warm["flags"])
        if any(flag.startswith("output limit reached") for flag in warm["flags"] + cold["flags"]):
            # Past the output limit, what is kept depends on how the kernel's stream was cut into messages (by
            # time, in ipykernel), so which cells' kept output still quotes a hidden test varies from run to run,
            # warm or cold alike: the same flags but those, and a quote flagged in both.
            for side in (warm, cold):
                quoted = [flag for flag in side["flags"] if "quoted hidden test code" in flag]
                side["flags"] = [flag for flag in side["flags"] if flag not in quoted] + (["quoted"] if quoted else [])
        if any(flag.startswith("memory limit reached") for flag in warm["flags"] + cold["flags"]):
            # A cell that fills the submission's memory lasts as long as the system's reclaim and kills take at
            # that moment (fork-memory's cell: 1 to 5 s on an idle 2-core machine, past the 8-s timeout at a load
            # of 6, warm and cold alike), so whether it also ran past the timeout is the load's: the same flags
            # but that one.
            for side in (warm, cold):
                side["flags"] = [flag for flag in side["flags"] if not flag.startswith("timeout in ")]
        assert warm == cold, student
        compared += 1
    assert compared >= len(set(CLASS) - KERNEL_INDEPENDENT)


HOSTILE_SECONDS: list[float] = []
HOSTILE_SUMMARY: list[dict] = []
BAD_TIMESTAMP = "bad-timestamp"          # graded with the class, kept out of the mapping the tests iterate
ODD_NAME = "notes-été.txt".encode("latin-1")            # a file name in Latin-1: not UTF-8


def total(graded_in, student):
    scores = grading.cell_scores(graded_in[student], A, student)
    return sum(score for score, _ in scores.values()), sum(top for _, top in scores.values())


def flags(graded_in, student):
    notebook = grading.autograded_notebook(graded_in[student], A, student)
    return " ".join(grading.grader_flags(notebook))


def test_honest_students_are_graded_correctly_beside_hostile_ones(hostile):
    assert total(hostile, "honest") == (FULL, POINTS)
    assert total(hostile, "sample-variance") == (SAMPLE_VARIANCE_SCORE, POINTS)
    assert total(hostile, "extra-files") == (FULL, POINTS)


def test_a_file_name_that_is_not_utf8_is_named_in_a_flag_and_the_notebook_graded(hostile):
    assert total(hostile, "odd-file-name") == (FULL, POINTS)
    assert r"not graded: files the release does not ship (notes-\xe9t\xe9.txt)" in flags(hostile, "odd-file-name")


@pytest.mark.parametrize("student", ["not-implemented", "syntax-error", "name-error"])
def test_an_answer_that_raises_scores_zero_without_stopping_the_grader(hostile, student):
    assert total(hostile, student) == (0.0, POINTS)


def test_a_hanging_cell_times_out_is_flagged_and_grading_goes_on(hostile):
    assert total(hostile, "hangs") == (FULL, POINTS)          # the answer was defined before the loop
    assert "timeout in layernorm" in flags(hostile, "hangs")


@pytest.mark.parametrize("student", ["os-exit", "segfault"])
def test_a_dead_kernel_is_graded_as_far_as_it_got_and_flagged(hostile, student):
    assert total(hostile, student) == (0.0, POINTS)
    assert "kernel died in layernorm" in flags(hostile, student)
    feedback = grading.autograded_notebook(hostile[student], A, student)
    assert "KernelDied" in grading.cell_error(feedback, "test_worked_example")


def test_sys_exit_does_not_kill_the_kernel(hostile):
    assert total(hostile, "sys-exit") == (FULL, POINTS)


def test_runaway_memory_fails_only_its_own_cell(hostile):
    assert total(hostile, "memory-hog") == (FULL, POINTS)


def test_runaway_cpu_is_stopped_and_flagged(hostile):
    assert flags(hostile, "cpu-hog"), "a CPU hog must be flagged (CPU-time limit or timeout)"


@pytest.mark.parametrize("student", ["tests-emptied", "tests-deleted", "tests-promoted"])
def test_edited_deleted_or_relabelled_tests_are_restored_from_the_master(hostile, student):
    assert total(hostile, student) == (SAMPLE_VARIANCE_SCORE, POINTS)


def test_deleted_tests_are_flagged(hostile):
    assert "was deleted and has been restored" in flags(hostile, "tests-deleted")


@pytest.mark.parametrize("student", ["patch-allclose", "patch-equal-and-assert-close", "patch-isinstance",
                                     "patch-numpy", "redefine-assertion-error", "always-equal", "rebind-F",
                                     "writes-its-arguments"])
def test_gaming_the_checks_earns_nothing(hostile, student):
    score, top = total(hostile, student)
    zeros = student in ("always-equal", "writes-its-arguments")
    honest_floor = total(hostile, ZEROS_STUDENT)[0] if zeros else SAMPLE_VARIANCE_SCORE
    assert score <= honest_floor, f"{student} scored {score} of {top}"


@pytest.mark.parametrize("student, same_answer_without_the_trick", [
    ("swallowed-errors", ZEROS_STUDENT), ("tensor-subclass", ZEROS_STUDENT), ("always-equal", ZEROS_STUDENT),
    ("patch-allclose", "sample-variance"), ("settrace", "sample-variance"),
])
def test_a_wrong_answer_written_against_the_checks_earns_exactly_its_honest_floor(hostile, student,
                                                                                   same_answer_without_the_trick):
    """The checks run in the checker, a process that runs no line of the student's: errors silenced in the kernel,
    a tensor subclass that answers comparisons, patched comparisons and traced asserts change nothing of them.
    The wrong answer earns what it earns without the trick, check by check, and with the same messages."""
    tricked, honest = outcome(hostile[student], student), outcome(hostile[same_answer_without_the_trick],
                                                                 same_answer_without_the_trick)
    assert tricked["scores"] == honest["scores"], student
    assert tricked["shown"] == honest["shown"], student


@pytest.mark.parametrize("student", ["patch-allclose", "patch-equal-and-assert-close", "patch-numpy", "rebind-F",
                                     "always-equal"])
def test_tampering_is_detected_and_flagged(hostile, student):
    assert "tampering detected" in flags(hostile, student)


def test_patching_builtins_breaks_only_that_kernel_and_is_flagged(hostile):
    # ipykernel itself relies on isinstance: the kernel stops answering, which the grader records.
    assert "kernel died in layernorm" in flags(hostile, "patch-isinstance")


@pytest.fixture(scope="module")
def exported(hostile) -> dict[str, dict[str, str]]:
    """The class's grades exported once with the per-check exporter (one `nbgrader export`, 4 s): student ->
    row. The whole class shares one course."""
    course, = set(hostile.values())
    result = grading.nbgrader(course, "export", "--exporter=autograder.plugins.export.PerCheckExport",
                              "--to", str(course / "checks.csv"))
    assert result.returncode == 0, result.stderr[-3000:]
    return {row["student_id"]: row for row in csv.DictReader((course / "checks.csv").open())}


@pytest.mark.parametrize("student", ["invalid-json", "empty-file", "nbformat-3", "renamed"])
def test_malformed_submissions_get_a_clear_message_and_no_points(exported, student):
    if student in exported:      # nbgrader registered the student: no points, and a flag says why
        assert float(exported[student]["score"] or 0) == 0
        assert exported[student]["flags"], f"{student} scored 0 without a flag"


def test_grading_is_deterministic(hostile):
    for student in ("honest", "sample-variance"):
        first = grading.cell_scores(hostile[student], A, student)
        twin = grading.cell_scores(hostile[f"{student}-twin"], A, f"{student}-twin")
        assert first == twin
        notebooks = [grading.autograded_notebook(hostile[s], A, s) for s in (student, f"{student}-twin")]
        errors = [[grading.cell_error(nb, cell) for cell in first] for nb in notebooks]
        assert errors[0] == errors[1]


def test_warnings_on_stderr_keep_their_points(hostile):
    assert total(hostile, "warns") == (FULL, POINTS)


def test_per_check_export_has_a_column_per_check_and_the_flags(exported):
    row = exported["os-exit"]
    assert f"{A}/layernorm/test_population_variance" in row
    assert "kernel died" in row["flags"]
    assert row[f"{A}/layernorm/test_worked_example"] == "0.0"


def test_feedback_shows_messages_but_not_hidden_tests(hostile):
    course = hostile["sample-variance"]
    grading.nbgrader(course, "generate_feedback", A, "--student", "sample-variance", "--force")
    html = (course / "autograder" / "feedback" / "sample-variance" / A / "layernorm.html").read_text()
    assert "divides by D-1" in html                              # the check's message reaches the student
    assert "check_example([2.0, 4.0, 6.0, 8.0]" not in html       # the hidden test's code does not
    assert "BEGIN HIDDEN TESTS" not in html


SNOOPER = CORRECT + '''
import glob, os
here = os.getcwd()
course = here.split("/autograder/")[0]
found = glob.glob(course + "/autograder/gradebook/*") + glob.glob(course + "/solutions/*/*.ipynb")
others = [p for p in glob.glob(course + "/autograder/submitted/*/*/*.ipynb")]
for path in found + others:
    try:
        os.remove(path)
    except OSError:
        pass
print("found", len(found) + len(others))
try:
    import socket
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    print("network reachable")
except OSError:
    print("no network")
'''


@pytest.fixture(scope="module")
def snooped(course, tmp_path_factory):
    """A class in which one student tries to read and delete the gradebook, masters and others' work."""
    class_course = grading.copy_course(course, tmp_path_factory.mktemp("snoop") / "course")
    honest = grading.submit(class_course, "honest", A, answer(CORRECT))
    grading.submit(class_course, "snooper", A, answer(SNOOPER))
    gradebook = Course(class_course).gradebook_file
    protected = [gradebook, honest,
                 *sorted((class_course / "solutions").rglob("*.ipynb"))]
    before = {path: path.read_bytes() for path in protected}
    stock_nbgrader.autograde(class_course, A, env=LIMITS)      # as the formgrader grades: stock nbgrader
    return class_course, before


def test_grading_kernels_cannot_see_or_touch_the_gradebook_masters_or_other_submissions(snooped):
    class_course, before = snooped
    gradebook = Course(class_course).gradebook_file
    for path, content in before.items():
        if path != gradebook:                   # the grader itself writes the gradebook
            assert path.read_bytes() == content, f"{path} changed during grading"
    assert gradebook.exists()
    feedback = grading.autograded_notebook(class_course, A, "snooper")
    printed = "".join(out.get("text", "") for cell in feedback.cells for out in cell.get("outputs", []))
    assert "found 0" in printed and "no network" in printed
    assert grading.cell_scores(class_course, A, "honest") == grading.cell_scores(class_course, A, "snooper")


# --- the grading machine -------------------------------------------------------------------------------

def submitted_notebook(graded_in, student):
    return graded_in[student] / "autograder" / "submitted" / student / A / NOTEBOOK


def test_no_submission_changes_the_masters_the_gradebook_or_a_classmates_work(hostile, course):
    for shard in set(hostile.values()):      # each shard is a copy of `course`, graded
        for master in (shard / "solutions").rglob("*.ipynb"):
            relative = master.relative_to(shard / "solutions")
            assert master.read_bytes() == (course / "solutions" / relative).read_bytes(), master
        assert not any(p.is_symlink() for p in (shard / "autograder").rglob("*")), "a link was left behind"
    for student, notebook in CLASS.items():
        path = submitted_notebook(hostile, student)
        assert nbformat.read(path, as_version=4) == notebook, f"{student}'s submission changed"
    # Every student's grades are still in the gradebook (it was not overwritten), honest ones intact.
    for student in CLASS:
        assert grading.cell_scores(hostile[student], A, student)
    assert total(hostile, "honest") == total(hostile, "honest-twin") == (FULL, POINTS)


def test_links_made_by_a_kernel_never_leave_its_scratch_folder(hostile):
    folder = hostile["links-out"] / "autograder" / "autograded" / "links-out" / A
    assert sorted(p.name for p in folder.iterdir()) == [NOTEBOOK]        # no links, no timestamp.txt
    assert total(hostile, "links-out") == (FULL, POINTS)


def test_a_kernel_sees_nothing_of_the_course_git_or_other_kernels(hostile):
    printed = printed_text(hostile, "reads-the-course")
    assert "found 0 git 0" in printed, printed


def test_nothing_a_submission_starts_outlives_its_grading(hostile):
    alive = subprocess.run(["pgrep", "-f", f"sleep {attacks.DAEMON_MARK}"], capture_output=True, text=True)
    assert alive.stdout == "", f"a submission's process survived grading: {alive.stdout}"
    assert total(hostile, "daemon") == (FULL, POINTS)


def test_a_kernel_cannot_stop_the_grader_and_the_class_finishes(hostile):
    # A stopped grader would hang until a timeout of its own, far beyond this. The class takes about 150 s on
    # two idle cores; at a load of 4 (half of each core) about 300 s, so 900 s leaves three times that.
    assert HOSTILE_SECONDS and HOSTILE_SECONDS[0] < 900, "the hostile class took too long"
    scores = grading.cell_scores(hostile["stops-the-grader"], A, "stops-the-grader")
    assert scores, "the student who signalled the grader was not graded"


def cgroups_available() -> bool:
    from autograder.sandbox import cgroups

    return cgroups.available()


def test_memory_for_the_whole_submission_is_limited_and_flagged(hostile):
    if not cgroups_available():
        pytest.skip("this machine lets the grader create no cgroup: memory is limited per process only")
    assert "memory limit reached" in flags(hostile, "fork-memory")
    assert total(hostile, "fork-memory") == (FULL, POINTS)       # only its children were killed


def test_files_written_are_limited_and_flagged(hostile):
    assert "disk limit reached" in flags(hostile, "fills-the-disk")


def test_output_is_capped_with_a_visible_note(hostile):
    notebook = grading.autograded_notebook(hostile["print-flood"], A, "print-flood")
    assert len(json.dumps(notebook)) < 3 * 2**20
    assert "output truncated by the grader" in printed_text(hostile, "print-flood")
    assert "output limit reached" in flags(hostile, "print-flood")
    assert total(hostile, "print-flood") == (FULL, POINTS)


def test_an_oversized_notebook_is_refused_at_intake_with_a_flag(hostile):
    assert total(hostile, "huge-markdown") == (0.0, POINTS)
    assert "refused at intake" in flags(hostile, "huge-markdown")


@pytest.mark.parametrize("student", ["copied-test-cell", "empty-metadata"])
def test_malformed_nbgrader_metadata_is_repaired_for_that_student_only(hostile, student):
    assert total(hostile, student) == (FULL, POINTS)


def printed_text(graded_in, student) -> str:
    notebook = grading.autograded_notebook(graded_in[student], A, student)
    return "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))


def test_the_class_grading_command_survives_the_machine_attacks_and_a_rerun_grades_only_what_failed(hostile):
    summary = HOSTILE_SUMMARY[0]
    root = hostile["honest"]
    failed = {failure["student"]: failure["error"] for failure in summary["failed"]}
    # A timestamp.txt that is not a time fails that submission, with a message that says how to fix it.
    assert "does not hold a time" in failed.get(BAD_TIMESTAMP, ""), failed
    assert not set(failed) & {"honest", *MACHINE_ATTACKS}, failed
    for student in MACHINE_ATTACKS:
        assert grading.cell_scores(root, A, student), student
    with pytest.MonkeyPatch.context() as patch:       # the workers inherit the limits; restored after
        for key, limit in LIMITS.items():
            patch.setenv(key, limit)
        again = grade_class.grade_class(root, [A], workers=2, progress=False)
    assert (again["graded"], again["skipped"]) == (len(failed), len(summary["results"]) - len(failed))
    assert sorted(result["student"] for result in again["results"]) == sorted(failed)
    alive = subprocess.run(["pgrep", "-f", f"sleep {attacks.DAEMON_MARK}"], capture_output=True, text=True)
    assert alive.stdout == ""


# --- the verdict ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("student, same_answer_without_the_trick", [
    ("input-transformer", "not-implemented"), ("ast-transformer", ZEROS_STUDENT),
    ("function-mode", "sample-variance"), ("settrace", "sample-variance"), ("guard-off", "sample-variance"),
])
def test_changing_how_the_tests_are_read_or_run_earns_nothing_and_is_flagged(hostile, student,
                                                                              same_answer_without_the_trick):
    score, _ = total(hostile, student)
    assert score <= total(hostile, same_answer_without_the_trick)[0], f"{student} scored {score}"
    assert "tampering detected" in flags(hostile, student)


def test_a_displayed_value_buys_no_partial_credit(hostile):
    """nbgrader reads a number a test cell displays as partial credit. A check's outputs are the checker's: what
    the student's code displays while a check calls it never becomes one of them."""
    assert total(hostile, "display-hook") <= total(hostile, ZEROS_STUDENT)
    notebook = grading.autograded_notebook(hostile["display-hook"], A, "display-hook")
    assert not [output for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade")
                for output in cell.get("outputs", []) if output.get("output_type") == "execute_result"]


def feedback_html(graded_in, student) -> str:
    course = graded_in[student]
    grading.nbgrader(course, "generate_feedback", A, "--student", student, "--force")
    return (course / "autograder" / "feedback" / student / A / "layernorm.html").read_text()


def test_printing_the_running_test_leaks_no_hidden_code(hostile):
    import re

    from autograder.plugins.withhold import hidden_lines

    html = re.sub(r"\s+", "", feedback_html(hostile, "prints-the-tests"))
    import html as html_module
    html = html_module.unescape(html)
    hidden = hidden_lines(nbformat.read(COURSE.master_notebook(A), as_version=4))
    assert hidden and not [line for line in hidden if line in html]
    # The test cells never run in the student's kernel: not even their visible code is there to print.
    assert "def _test_test_worked_example" not in printed_text(hostile, "prints-the-tests")
    assert total(hostile, "prints-the-tests") == (FULL, POINTS)


def test_no_test_cell_ever_runs_in_the_kernel_so_none_reaches_feedback_in_any_encoding(hostile):
    """The held-out round's third hand-in printed every cell the kernel ran, compressed and encoded, and read all
    twelve test cells back off its own feedback page. Now the kernel runs the student's cells and the given ones:
    decoded, what it printed holds no line of any test cell."""
    import base64
    import zlib

    master = nbformat.read(COURSE.master_notebook(A), as_version=4)
    test_lines = {line.strip() for cell in master.cells if cell.metadata.get("nbgrader", {}).get("grade")
                  and not cell.metadata["nbgrader"].get("solution")
                  for line in cell.source.splitlines() if len(line.strip()) > 12}
    printed = printed_text(hostile, "prints-every-cell")
    cells = [zlib.decompress(base64.b64decode(chunk.split()[0])).decode()
             for chunk in printed.split(attacks.CELL_MARK)[1:]]
    assert cells, "the hand-in printed nothing: the attack did not run"
    assert not [line for cell in cells for line in test_lines if line in cell]
    from autograder.plugins.withhold import hidden_lines

    html = feedback_html(hostile, "prints-every-cell")          # the visible test code, never a hidden line
    assert not [line for line in hidden_lines(master) if line in html]
    assert total(hostile, "prints-every-cell") == (FULL, POINTS)


def test_the_kernels_working_folder_holds_no_notebook_and_so_no_hidden_test(hostile):
    """nbgrader writes the notebook it grades, hidden tests restored, into the folder the kernel's working folder
    is copied from: a hand-in once printed them all into its own feedback, 22 of 22 and unflagged."""
    from autograder.plugins.withhold import hidden_lines

    printed = printed_text(hostile, "reads-its-notebook")
    assert "notebooks in the working folder: 0" in printed, printed[:500]
    assert not [line for line in hidden_lines(nbformat.read(COURSE.master_notebook(A), as_version=4)) if line in printed]
    assert total(hostile, "reads-its-notebook") == (FULL, POINTS)


def test_a_kernel_that_answers_in_another_shape_loses_its_checks_and_crashes_nothing(hostile):
    """The kernel chooses the shape of its replies to the grader's expressions and what its bridge answers the
    checks' calls: a list where a dict belongs, a terabyte's length, get the checks no answer (the student's loss,
    with a message that says so), the notebook is graded, and it is flagged."""
    assert "misshapen-replies" not in {failure["student"] for failure in HOSTILE_SUMMARY[0]["failed"]}
    assert total(hostile, "misshapen-replies") == (0, POINTS)
    graded = outcome(hostile["misshapen-replies"], "misshapen-replies")
    assert all("did not answer the check" in message for message in graded["shown"].values()), graded["shown"]
    # What the bridge and the guard say is the kernel's word: replaced, they are flagged for the instructor (here
    # the guard's own reply has the wrong shape, so the flag names the guard).
    assert any(flag.startswith("tampering detected") for flag in graded["flags"]), graded["flags"]


def test_what_a_call_can_see_in_the_kernel_holds_nothing_of_the_checks(hostile):
    """The student's function, called by a check, reads its callers' frames, the cell cache, the history and
    every code object of the kernel, and raises it all as its message: none of it is a line of a test cell, and
    the answer earns nothing."""
    from autograder.plugins.withhold import hidden_lines

    master = nbformat.read(COURSE.master_notebook(A), as_version=4)
    shown = printed_text(hostile, "reads-the-caller") + " ".join(outcome(hostile["reads-the-caller"],
                                                                          "reads-the-caller")["shown"].values())
    assert "def _test_test_" not in shown and not [line for line in hidden_lines(master) if line in shown]
    assert total(hostile, "reads-the-caller") == (0.0, POINTS)


OPEN_PAGE = """
import sys
from playwright.sync_api import sync_playwright
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    page = browser.new_page()
    page.route("http*://**/*", lambda route: route.abort())      # no CDN: only the page itself
    page.goto(sys.argv[1], wait_until="load")
    page.wait_for_timeout(1000)
    print(page.title())
    browser.close()
"""


@pytest.mark.browser
def test_feedback_pages_run_no_student_script(hostile):
    html = feedback_html(hostile, "scripts")
    from html.parser import HTMLParser

    class Elements(HTMLParser):
        found: list = []
        in_script = False

        def handle_starttag(self, tag, attributes):
            self.found += [f"<{tag} {name}=...>" for name, _ in attributes if name.lower().startswith("on")]
            self.found += [f"<{tag}>"] if tag in ("iframe", "object", "embed") else []
            self.in_script = tag == "script"

        def handle_data(self, data):
            if self.in_script and "pwned" in data:
                self.found.append(f"<script>{data[:60]}")

    elements = Elements()
    elements.feed(html)
    assert elements.found == [], f"the feedback page keeps active content: {elements.found}"
    # Opened in a process of its own: the site's browser tests keep a Playwright session open in this one.
    page_file = hostile["scripts"] / "autograder" / "feedback" / "scripts" / A / "layernorm.html"
    opened = subprocess.run([sys.executable, "-c", OPEN_PAGE, page_file.as_uri()], capture_output=True, text=True,
                            timeout=120, cwd=COURSE.root)
    assert opened.returncode == 0, opened.stderr
    title = opened.stdout.strip()
    assert "pwned" not in title, f"a student's script ran in the feedback page: {title!r}"


def test_flags_are_the_graders_and_exports_are_safe_in_a_spreadsheet(hostile):
    assert FORMULA not in flags(hostile, "forged-flags")
    assert total(hostile, "forged-flags") == (SAMPLE_VARIANCE_SCORE, POINTS)
    course = hostile["forged-flags"]
    grading.nbgrader(course, "export", "--exporter=autograder.plugins.export.PerCheckExport", "--to", str(course / "safe.csv"))
    for row in csv.reader((course / "safe.csv").open()):
        for cell in row:
            assert not cell.startswith(("=", "+", "@")), f"a CSV cell a spreadsheet would run: {cell!r}"
            assert not (cell.startswith("-") and not cell.lstrip("-").replace(".", "").isdigit()), cell


@pytest.mark.parametrize("student", ["uses-layer-norm", "uses-layer-norm-module", "imports-reference", "forged-code"])
def test_breaking_an_assignment_rule_costs_the_part_it_replaces_and_is_named(hostile, student):
    assert total(hostile, student) == (0.0, POINTS)
    assert "rule broken" in flags(hostile, student)
    message = "gptcourse" if student == "imports-reference" else "write LayerNorm yourself"
    assert message in flags(hostile, student)


@pytest.mark.parametrize("student", ["prints-a-lot", "torchscript", "compiled", "float64", "scripts"])
def test_honest_but_unusual_answers_keep_full_marks(hostile, student):
    assert total(hostile, student) == (FULL, POINTS)
    assert "tampering" not in flags(hostile, student) and "rule broken" not in flags(hostile, student)
