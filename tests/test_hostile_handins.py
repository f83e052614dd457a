"""Nothing a student sends is parsed before its size is known, and one student's data never fails a whole-class
command (issue 44).

A hand-in is a folder the student fills: besides the notebook, nbgrader's own timestamp.txt and
submission_secret.txt, and anything else, including a file named like the grader's own bookkeeping. The quick
tests hold the bounded readers (autograder/bounded.py) and each reader of a hand-in to that rule, without a
kernel; the grading tests hand a few hostile submissions to a class graded by both front doors,
`python -m autograder.classgrader` and stock `nbgrader autograde`, and check that classmates are graded, the
hostile student is flagged or failed with a message, and neither time nor memory follows the hostile files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import os
import time
from pathlib import Path

import nbformat
import pytest

from autograder import bounded
from autograder.classgrader import class_plan
from autograder.plugins import handins
from tools import grading
from tools.course import COURSE, Course, tool_env

A = "01-layernorm"
NOTEBOOK = COURSE.master_notebook(A).name
BIG = 40 * 2**20                       # a 40 MB notebook and a 40 MB secret: 5.5 GB in a worker before issue 44
DIGITS = b"1" * 2_000_000              # a 2 MB timestamp.txt: 150-215 s of dateutil before issue 44
OVERFLOW = b'[["x", 1e999]]'           # a number too large for a float in a JSON file the grader once read
DEEP = b"[" * 200_000 + b"]" * 200_000  # deeper than json's recursion
# Well within the byte cap, too many objects to hand nbformat: 1.7 M of these took a worker to 3.75 GB.
WIDE = b'{"cells": [], "metadata": {"x": [' + b"{}," * 50_000 + b'{}]}, "nbformat": 4, "nbformat_minor": 5}'


def scratch_course(root: Path) -> Course:
    """A course with its configuration and this repository's release of A (nothing generated, nothing graded)."""
    grading.make_course(root)
    course = Course(root)
    shutil.copytree(COURSE.folder("release") / A, course.path("release", ".", A))
    return course


def hand_in(course: Course, student: str, files: dict[str, bytes]) -> Path:
    folder = course.path("submitted", student, A)
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return folder


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that costs no disk (what matters is that it is never read)."""
    with path.open("wb") as handle:
        handle.truncate(size)


def release_bytes() -> bytes:
    return COURSE.release_notebook(A).read_bytes()


# --- memory, measured where nothing else runs ------------------------------------------------------------------------

# tracemalloc counts every thread's allocations, and in a full run the session's background threads (the lessons,
# the catalog's fast path) allocate while a test runs (6.2 MB once, against a 1 MB bound). So each measured call
# runs in a fresh Python, with this module imported first, so that imports are not what is measured.
MEASURE = """
import json, sys, tracemalloc
import autograder.classgrader.grading_kit, autograder.plugins.intake      # loaded before, as in the grader
import tests.test_hostile_handins as here
function, arguments, warm_up = getattr(here, sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
if warm_up is not None:
    function(warm_up)
tracemalloc.start()
result = function(*arguments)
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps([peak, result]))
"""


def peak_allocation(function, *arguments, warm_up=None) -> tuple[int, list]:
    """(The peak of what `function(*arguments)` allocated, its result as JSON gives it back), in a fresh Python;
    `warm_up`: an argument it is called with once before, unmeasured. `function` is one of this module's."""
    run = subprocess.run([sys.executable, "-c", MEASURE, function.__name__, json.dumps(arguments),
                          json.dumps(warm_up)], cwd=COURSE.root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    peak, result = json.loads(run.stdout.splitlines()[-1])
    return peak, result


def pack(root: str) -> tuple[list[str], dict[str, int]]:
    """What the class grader's packer sends of the student's hand-in, and what it leaves out."""
    from autograder.classgrader.grading_kit import handed_in_files

    files, not_sent = handed_in_files(Course(Path(root)), A, "student")
    return sorted(files), not_sent


def export(path: str) -> tuple[str | None, float]:
    """Why the course's exporter refused the notebook at `path` (None: it did not), and the seconds it took."""
    from autograder.plugins.intake import REFUSED_NOTEBOOK, BoundedNotebookExporter

    started = time.monotonic()
    _, resources = BoundedNotebookExporter().from_filename(path, resources={"nbgrader": {}})
    return resources["nbgrader"].get(REFUSED_NOTEBOOK), time.monotonic() - started


# --- the bounded readers ------------------------------------------------------------------------------------

@pytest.mark.quick
def test_a_timestamp_is_checked_from_its_listing_and_bounded_before_dateutil(tmp_path):
    stamp = tmp_path / "timestamp.txt"
    stamp.write_bytes(DIGITS)
    started = time.perf_counter()
    with pytest.raises(bounded.Refused, match="over the limit of 100 bytes"):
        bounded.read_timestamp(stamp)
    assert class_plan.read_timestamp(tmp_path) is None
    assert "over the limit" in class_plan.timestamp_problem(tmp_path)
    for shaped in ("1" * 99, "2026-12-03 " + "9" * 80, "../../../dev/zero", "2026-12-03\n10:00"):
        stamp.write_text(shaped)
        with pytest.raises(bounded.Refused):
            bounded.read_timestamp(stamp)
    assert time.perf_counter() - started < 0.5            # milliseconds, not minutes
    stamp.unlink()
    stamp.symlink_to("/dev/zero")                          # never opened
    with pytest.raises(bounded.Refused, match="not a regular file"):
        bounded.read_timestamp(stamp)
    stamp.unlink()
    assert bounded.read_timestamp(stamp) is None            # none: not a problem
    # What nbgrader writes is read as nbgrader reads it (a naive UTC time).
    stamp.write_text("2026-12-03 10:15:42.123456 CET")
    assert str(bounded.read_timestamp(stamp)) == "2026-12-03 09:15:42.123456"


@pytest.mark.quick
@pytest.mark.parametrize("data, why", [(OVERFLOW, None), (DEEP, "nests deeper than 64"), (b"[]," * 2**19, "over the limit"),
                                       (b"\xff{", "JSONDecodeError|UnicodeDecodeError")])
def test_json_from_a_student_fails_only_as_refused(data, why):
    if why is None:
        assert bounded.parse_json(data) == [["x", float("inf")]]
    else:
        with pytest.raises(bounded.Refused, match=why):
            bounded.parse_json(data)


# --- attack 2: the grader's bookkeeping never comes from the hand-in ------------------------------------------------

@pytest.mark.quick
@pytest.mark.parametrize("manifest", [OVERFLOW, DEEP, b'[["big.bin", 5000000]]'], ids=["overflow", "deep", "forged"])
def test_a_students_own_manifest_is_dropped_unread(tmp_path, manifest):
    course = scratch_course(tmp_path / "course")
    folder = hand_in(course, "student", {NOTEBOOK: release_bytes(), handins.MANIFEST: manifest})
    release = course.path("release", ".", A)
    found = handins.survey(folder, release)
    assert found.taken == [NOTEBOOK] and found.beside == {} and found.flags() == []
    # The packer's list of files left out comes in the task's arguments, and counts as before.
    refused = handins.survey(folder, release, not_sent={"big.bin": 5_000_000, "notes.txt": 10})
    assert refused.taken == [NOTEBOOK] and refused.left_out == ["big.bin", "notes.txt"]
    # The packer sends no manifest file: what it left out travels beside the files.
    from autograder.classgrader.grading_kit import handed_in_files

    files, not_sent = handed_in_files(course, A, "student")
    assert sorted(files) == [NOTEBOOK] and not_sent == {}


# --- attacks 3 and 5: sizes before reads ---------------------------------------------------------------------------

@pytest.mark.quick
def test_the_packer_reads_nothing_over_its_cap(tmp_path):
    course = scratch_course(tmp_path / "course")
    folder = hand_in(course, "student", {"timestamp.txt": b"2026-12-03 10:15:42.123456 UTC"})
    sparse(folder / NOTEBOOK, BIG)
    sparse(folder / handins.SECRET, BIG)
    peak, (files, not_sent) = peak_allocation(pack, str(course.root))
    assert sorted(files) == ["timestamp.txt"] and not_sent == {NOTEBOOK: BIG, handins.SECRET: BIG}
    assert peak < 2**20, f"packing a hostile hand-in allocated {peak / 2**20:.1f} MB"
    found = handins.survey(folder, course.path("release", ".", A))
    assert found.flags() == [f"refused at intake: {handins.SECRET} is 40.0 MB, over the limit of 1.0 KB; it was not read"]
    # A file that grows past its cap between the listing and the read is refused, not read whole.
    (folder / NOTEBOOK).write_bytes(release_bytes())
    (folder / handins.SECRET).write_text("ab" * 64)
    files, not_sent = pack(str(course.root))
    assert files == sorted([NOTEBOOK, handins.SECRET, "timestamp.txt"]) and not_sent == {}
    path = folder / handins.SECRET
    listed = bounded.size_of(path)
    path.write_bytes(b"x" * 4096)                    # it grew after the listing the packer read
    with pytest.MonkeyPatch.context() as patch, pytest.raises(bounded.Refused, match="grew past"):
        patch.setattr(bounded, "size_of", lambda _path: listed)
        bounded.read_capped(path, bounded.SECRET_MAX_BYTES)


@pytest.mark.quick
@pytest.mark.parametrize("count", [1_700_000, 600_000])
def test_a_notebook_of_many_small_objects_is_refused_before_it_is_parsed(tmp_path, count):
    """Bytes do not bound what a parse holds: 4.9 MB of `{}` in one cell's metadata (1.7 M objects, under the
    5 MB limit) took a worker to 3.75 GB and 50 s in nbformat before intake refused it, and 1.75 MB of them
    (600 k) was graded, with 1.65 GB in the worker and 1.3 GB in generate_feedback. The objects are counted
    first, outside strings, and such a notebook is never parsed."""
    from autograder.plugins.intake import REFUSED_NOTEBOOK, BoundedNotebookExporter

    nb = json.loads(release_bytes())
    nb["cells"][0]["metadata"]["x"] = "PLACEHOLDER"
    text = json.dumps(nb).replace('"PLACEHOLDER"', "[" + "{}," * (count - 1) + "{}]")
    assert len(text) < bounded.notebook_limit()
    path = tmp_path / NOTEBOOK
    path.write_text(text)
    peak, (refused, seconds) = peak_allocation(export, str(path))
    assert "more than 20,000 objects and arrays" in refused
    assert peak < 64 * 2**20, f"refusing it allocated {peak / 2**20:.0f} MB"
    assert seconds < 10
    with pytest.raises(bounded.Refused, match="more than 20,000"):       # the class grader's reader too
        bounded.parse_json(text.encode(), bounded.notebook_limit())
    # Brackets inside strings are text, not structure; every honest notebook of the course is far below.
    assert bounded.parse_json(json.dumps({"source": "[{" * 100_000})) == {"source": "[{" * 100_000}
    for path in (*COURSE.master_notebooks(), *map(COURSE.release_notebook, COURSE.assignments())):
        bounded.check_structure(path.read_text(), most=1_000, deepest=8)


@pytest.mark.quick
def test_the_exporter_never_opens_an_oversized_notebook(tmp_path):
    from autograder.plugins.intake import REFUSED_NOTEBOOK, BoundedNotebookExporter

    path = tmp_path / NOTEBOOK
    path.write_bytes(release_bytes())
    exporter = BoundedNotebookExporter()
    output, resources = exporter.from_filename(str(path), resources={"nbgrader": {}})     # also warms it up
    assert REFUSED_NOTEBOOK not in resources["nbgrader"] and nbformat.reads(output, as_version=4).cells
    path.unlink()
    sparse(path, BIG)
    peak, (refused, _) = peak_allocation(export, str(path), warm_up=str(COURSE.release_notebook(A)))
    assert "the notebook is 40.0 MB, over the limit of 5 MB" in refused
    assert peak < 2**20, f"the exporter allocated {peak / 2**20:.1f} MB for a notebook it refused"
    path.unlink()
    path.symlink_to("/dev/zero")
    _, resources = exporter.from_filename(str(path), resources={"nbgrader": {}})
    assert "not a regular file" in resources["nbgrader"][REFUSED_NOTEBOOK]


@pytest.mark.quick
def test_nbgraders_pre_convert_hook_moves_a_hostile_timestamp_aside_unread(tmp_path):
    from autograder.plugins.intake import bound_timestamp

    folder = tmp_path / "submitted" / "student" / A
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes(b"{}")
    (folder / "timestamp.txt").write_bytes(DIGITS)
    started = time.perf_counter()
    bound_timestamp(assignment=A, student="*", notebooks=[str(folder / NOTEBOOK)])
    assert time.perf_counter() - started < 0.5
    assert not (folder / "timestamp.txt").exists() and (folder / handins.REFUSED_TIMESTAMP).stat().st_size == len(DIGITS)
    found = handins.survey(folder, folder)
    assert handins.REFUSED_TIMESTAMP not in found.beside and "graded without a submission time" in found.flags()[0]
    (folder / "timestamp.txt").write_text("2026-12-03 10:15:42.123456 UTC")     # a time stays where it is
    bound_timestamp(assignment=A, student="*", notebooks=[str(folder / NOTEBOOK)])
    assert (folder / "timestamp.txt").read_text().startswith("2026-12-03")


@pytest.mark.quick
@pytest.mark.parametrize("in_the_way", ["folder", "link", "file"])
def test_the_hook_cannot_be_made_to_fail_by_what_the_hand_in_holds_at_the_aside_name(tmp_path, in_the_way):
    """nbgrader swallows a hook's exceptions and then parses timestamp.txt itself: a folder handed in under the
    name the hook moves the timestamp to made the move fail, and 2 MB of digits cost minutes of dateutil."""
    from autograder.plugins.intake import bound_timestamp

    folder = tmp_path / "submitted" / "student" / A
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes(b"{}")
    (folder / "timestamp.txt").write_bytes(DIGITS)
    aside = folder / handins.REFUSED_TIMESTAMP
    if in_the_way == "folder":
        aside.mkdir()
        (aside / "keep").write_text("x")
    elif in_the_way == "link":
        aside.symlink_to("/etc")
    else:
        aside.write_text("2026-12-03 10:15:42 UTC")
    bound_timestamp(assignment=A, student="*", notebooks=[str(folder / NOTEBOOK)])
    assert not os.path.lexists(folder / "timestamp.txt")
    assert aside.is_file() and not aside.is_symlink() and aside.stat().st_size == len(DIGITS)
    assert len(list(folder.glob(f"{handins.REFUSED_TIMESTAMP}.handed-in-*"))) == 1   # the student's, kept aside


# --- attack 9 and the class commands: one notebook never stops the report or the export ----------------------------

def graded_notebook(cells_metadata: list[dict]) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    for metadata in cells_metadata:
        cell = nbformat.v4.new_code_cell("x = 1")
        cell.metadata.update(metadata)
        notebook.cells.append(cell)
    return notebook


@pytest.mark.quick
def test_execution_times_read_any_timestamps_a_notebook_holds():
    from autograder.report.data import execution_seconds

    naive = {"execution": {"iopub.status.busy": "2026-12-03T10:00:00.000000",
                           "iopub.status.idle": "2026-12-03T10:00:02.000000"}}
    aware = {"execution": {"iopub.status.busy": "2026-12-03T10:00:01.000000Z",
                           "iopub.status.idle": "2026-12-03T10:00:05.000000+00:00"}}
    assert execution_seconds(graded_notebook([naive, aware])) == 5.0
    odd = [{"execution": "yesterday"}, {"execution": {"iopub.status.busy": 1e999}},
           {"execution": {"iopub.status.busy": "9" * 10_000}}, {"execution": {"iopub.status.idle": ["x"]}}]
    assert execution_seconds(graded_notebook(odd)) is None
    assert execution_seconds(graded_notebook([*odd, naive])) == 2.0


@pytest.mark.quick
def test_a_notebook_the_report_cannot_read_costs_that_student_alone(tmp_path):
    from autograder.pages import summary as feedback_summary
    from autograder.report.data import GradedCell, Result, read_autograded

    course = scratch_course(tmp_path / "course")
    cells = [GradedCell(COURSE.master_notebook(A).stem, "test_x", 1.0, True, "test_x")]
    broken = {
        "naive-stamps": nbformat.writes(graded_notebook([{"execution": {"iopub.status.busy": "2026-12-03T10:00:00",
                                                                        "iopub.status.idle": "2026-12-03T10:00:01Z"}}])),
        "odd-nbgrader": nbformat.writes(graded_notebook([{"nbgrader": ["grade_id"]}, {"nbgrader": {"grade_id": []}}])),
        "deep": b'{"cells": ' + DEEP + b"}",
        "wide": WIDE,
        "huge": None,
    }
    results = {}
    for student, content in broken.items():
        folder = course.path("autograded", student, A)
        folder.mkdir(parents=True)
        if content is None:
            sparse(folder / NOTEBOOK, bounded.autograded_limit() + 1)
        else:
            (folder / NOTEBOOK).write_bytes(content if isinstance(content, bytes) else content.encode())
        result = Result(student, {}, 0.0, 1.0, 0.0)
        read_autograded(course, A, result, cells, feedback_summary, [COURSE.master_notebook(A).stem])
        results[student] = result
    assert results["naive-stamps"].seconds == {COURSE.master_notebook(A).stem: 1.0}
    assert results["odd-nbgrader"].unread == [] and not results["odd-nbgrader"].errors
    assert "could not be read" in " ".join(results["deep"].flags)
    assert "could not be read" in " ".join(results["wide"].flags) and "objects" in " ".join(results["wide"].flags)
    assert "over the limit" in " ".join(results["huge"].flags)


@pytest.mark.quick
def test_the_per_check_export_reads_flags_within_a_cap(tmp_path):
    from nbgrader.coursedir import CourseDirectory
    from traitlets import Instance
    from traitlets.config import LoggingConfigurable

    from autograder.plugins.export import PerCheckExport

    class Command(LoggingConfigurable):
        coursedir = Instance(CourseDirectory)

    command = Command(coursedir=CourseDirectory(root=str(tmp_path)))
    exporter = PerCheckExport(parent=command)
    folder = Path(command.coursedir.format_path(command.coursedir.autograded_directory, "deep", A))
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes(b'{"cells": ' + DEEP + b"}")
    assert "could not be read" in exporter.flags("deep", A, COURSE.master_notebook(A).stem)[0]
    (folder / NOTEBOOK).write_bytes(WIDE)
    assert "could not be read" in exporter.flags("deep", A, COURSE.master_notebook(A).stem)[0]
    sparse(folder / NOTEBOOK, bounded.autograded_limit() + 1)
    assert "over the limit" in exporter.flags("deep", A, COURSE.master_notebook(A).stem)[0]


# --- both front doors, end to end ----------------------------------------------------------------------------------

CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]          # an alternative correct answer
FULL = grading.points_by_answer(A)["layernorm"]


def answer() -> nbformat.NotebookNode:
    return grading.submission_from_release(A, {"layernorm": CORRECT})


def huge_notebook() -> bytes:
    notebook = answer()
    notebook.cells.append(nbformat.v4.new_markdown_cell("x" * BIG))
    return nbformat.writes(notebook).encode()


# A small class: an honest student, and one hostile student for each kind of file (each graded one costs a
# kernel, so the kinds share students where they can).
HOSTILE = {
    "hostile-bookkeeping": {handins.MANIFEST: OVERFLOW, handins.SECRET: b"s" * 2048},
    "hostile-huge": {handins.SECRET: b"s" * BIG},
    "hostile-stamp": {handins.TIMESTAMP: DIGITS},
}


def submissions() -> list[grading.Submission]:
    return [grading.Submission("honest", A, answer()),
            *(grading.Submission(student, A, huge_notebook() if student == "hostile-huge" else answer(),
                                 extra_files=files) for student, files in HOSTILE.items())]


class WorkerPeaks(threading.Thread):
    """Polls the peak memory (VmHWM, exact whenever read) of this process's Dask worker processes while a class
    is graded; the grading kernels (bubblewrap and what runs in it) are not the workers' memory."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()

    def run(self):
        from tests.worker_processes import local_workers, peak_kb

        while not self.done.is_set():
            for worker in local_workers():
                self.peaks[worker.pid] = max(self.peaks.get(worker.pid, 0), peak_kb(worker.pid))
            time.sleep(0.05)


@pytest.fixture(scope="module")
def class_graded(course, tmp_path_factory):
    """The class graded by `python -m autograder.classgrader` (its function): the summary, the course, the
    workers' peak memory in KB."""
    root = grading.copy_course(course, tmp_path_factory.mktemp("hostile-handins") / "course")
    watcher = WorkerPeaks()
    watcher.start()
    started = time.monotonic()
    try:
        summary = grading.grade_submissions(root, submissions())
    finally:
        watcher.done.set()
        watcher.join()
    return summary, root, watcher.peaks, time.monotonic() - started


MEASURED = r"""
import atexit, sys
from pathlib import Path

def peak():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM:"))
    print("PEAK_KB", line.split()[1], file=sys.stderr)

atexit.register(peak)
from nbgrader.apps.nbgraderapp import main
sys.argv = ["nbgrader", *sys.argv[1:]]
main()
"""


def stock_autograde(root: Path, student: str) -> tuple[int, subprocess.CompletedProcess]:
    """Stock `nbgrader autograde A --student=STUDENT` from the course's autograder folder, as an instructor types
    it, with the peak memory of the nbgrader process itself (not its kernels') in KB."""
    result = subprocess.run([sys.executable, "-c", MEASURED, "autograde", A, f"--student={student}"],
                            cwd=Course(root).autograder, env=tool_env(), capture_output=True, text=True)
    peaks = [int(line.split()[1]) for line in result.stderr.splitlines() if line.startswith("PEAK_KB ")]
    assert peaks, result.stderr[-3000:]
    return peaks[-1], result


@pytest.fixture(scope="module")
def stock_graded(course, tmp_path_factory):
    """The same class graded by stock `nbgrader autograde`: the honest student alone, then the hostile ones in
    one run; the course and the two runs' peak memory in KB."""
    root = grading.copy_course(course, tmp_path_factory.mktemp("hostile-handins-stock") / "course")
    grading.hand_in(root, submissions())
    honest, _ = stock_autograde(root, "honest")
    started = time.monotonic()
    hostile, result = stock_autograde(root, "hostile-*")
    return root, honest, hostile, result, time.monotonic() - started


def total(root: Path, student: str) -> float:
    return sum(score for score, _ in grading.cell_scores(root, A, student).values())


def flags(root: Path, student: str) -> str:
    return " ".join(grading.grader_flags(grading.autograded_notebook(root, A, student)))


@pytest.mark.grading
def test_the_class_grader_grades_classmates_and_refuses_each_hostile_file_with_a_message(class_graded):
    summary, root, peaks, seconds = class_graded
    failed = {failure["student"]: failure["error"] for failure in summary["failed"]}
    assert set(failed) == {"hostile-stamp"}, failed
    assert "does not hold a time" in failed["hostile-stamp"] and "over the limit of 100 bytes" in failed["hostile-stamp"]
    assert total(root, "honest") == FULL
    # A manifest of its own is dropped unread; an oversized secret is not read, and said so.
    assert total(root, "hostile-bookkeeping") == FULL
    assert "submission_secret.txt is 2.0 KB, over the limit of 1.0 KB" in flags(root, "hostile-bookkeeping")
    # An oversized notebook is never read: the release is graded in its place.
    assert total(root, "hostile-huge") == 0
    assert "the notebook is 40.0 MB, over the limit of 5 MB; graded as the unanswered release" in flags(root, "hostile-huge")
    for student in HOSTILE:
        graded = Course(root).path("autograded", student, A)
        assert not graded.exists() or sorted(path.name for path in graded.iterdir()) == [NOTEBOOK], student


@pytest.mark.grading
def test_the_class_graders_workers_hold_no_more_for_a_hostile_hand_in(class_graded, stock_graded):
    _, _, peaks, _ = class_graded
    _, honest, _, _, _ = stock_graded
    assert peaks, "no grading worker was seen"
    print(f"class grader: workers' peak {sorted(peaks.values())} KB; stock honest {honest} KB")
    # A worker is nbgrader's Autograde converter in a Dask process: within twice what an honest student costs the
    # nbgrader command (5.5 GB before issue 44).
    assert max(peaks.values()) < 2 * honest, (peaks, honest)


@pytest.mark.grading
def test_stock_nbgrader_autograde_is_bounded_too(stock_graded):
    root, honest, hostile, result, seconds = stock_graded
    assert total(root, "honest") == FULL
    assert total(root, "hostile-bookkeeping") == FULL
    assert "submission_secret.txt is 2.0 KB, over the limit of 1.0 KB" in flags(root, "hostile-bookkeeping")
    assert total(root, "hostile-huge") == 0
    assert "the notebook is 40.0 MB, over the limit of 5 MB" in flags(root, "hostile-huge")
    # The timestamp is moved aside before nbgrader parses it, unread: graded without a time, and flagged.
    assert total(root, "hostile-stamp") == FULL
    assert "graded without a submission time" in flags(root, "hostile-stamp")
    submitted = Course(root).path("submitted", "hostile-stamp", A)
    assert (submitted / handins.REFUSED_TIMESTAMP).stat().st_size == len(DIGITS)
    for student in HOSTILE:
        graded = Course(root).path("autograded", student, A)
        assert sorted(path.name for path in graded.iterdir()) == [NOTEBOOK], student
    print(f"stock nbgrader autograde: honest {honest} KB, hostile {hostile} KB, {seconds:.1f} s")
    assert hostile < 2 * honest, (hostile, honest)
    assert seconds < 120, seconds          # three kernels; 150-215 s of dateutil alone before issue 44
