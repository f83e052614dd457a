"""Canvas's "Download Submissions" zip, through `nbgrader zip_collect`, grading, the class report and Canvas's import.

The zip is laid out as Canvas lays it out (`<lastfirst>_[LATE_]<user id>_<submission id>_<file name>`, `-N` on a
file uploaded again): a correct hand-in, one with a known bug, one uploaded twice (the newest is the correct one),
one marked LATE and saved under Colab's name for a copy, one from a Canvas user not on the roster, a PDF beside a notebook; and what a student can put
into it: a notebook named to climb out of the folder, a zip of their own, a notebook over the course's limit,
a member whose declared size lies. The course's plugins (autograder/plugins/canvas_zip.py) take each student's notebook
and nothing else, the class is graded by the course's engine, and the Canvas file carries each roster student's
score, computed from the catalog.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.plugins.canvas_zip import CANVAS_NAME, CanvasCollector, CanvasExtractor
from autograder.classgrader.grade_class import grade_class
from autograder.report.__main__ import main as report_main
from tools import grading
from tools.course import Course

A = "01-layernorm"
NOTEBOOK = "layernorm.ipynb"
CORRECT = grading.load_catalog(A)[-1].cells["layernorm"]
BUG = next(variant for variant in grading.load_catalog(A) if variant.kind == "bug")
FULL = grading.points_by_answer(A)["layernorm"]
BUG_SCORE = FULL - sum(grading.graded_cell_points(A)[cell][1] for cell in BUG.fails)
# Canvas user id -> (nbgrader id, roster name); user 9999 hands in but is not on the roster.
ROSTER = {"1001": ("ana", "Ana Lopez"), "1002": ("ben", "Ben Ode"), "1003": ("cai", "Cai Wu"),
          "1004": ("dee", "Dee Park"), "1005": ("eli", "Eli Moss")}


def notebook_bytes(code: str) -> bytes:
    return nbformat.writes(grading.submission_from_release(A, {"layernorm": code})).encode()


def canvas_zip() -> bytes:
    members = {
        "mosseli_1005_5005_" + "b" * 240 + ".ipynb": notebook_bytes(CORRECT),                # too long to write
        "lopezana_1001_5001_layernorm.ipynb": notebook_bytes(CORRECT),
        "odeben_1002_5002_layernorm.ipynb": notebook_bytes(BUG.cells["layernorm"]),
        "wucai_1003_5003_layernorm.ipynb": notebook_bytes(BUG.cells["layernorm"]),         # the first upload
        "wucai_1003_5003_layernorm-1.ipynb": notebook_bytes(CORRECT),                      # uploaded again
        "parkdee_LATE_1004_5004_Copy of layernorm.ipynb": notebook_bytes(CORRECT),        # Colab's name
        "parkdee_LATE_1004_5004_report.pdf": b"%PDF-1.4 not graded",
        "stranger_9999_5009_layernorm.ipynb": notebook_bytes(CORRECT),
        "../../../escaped.ipynb": notebook_bytes(CORRECT),
        "mosseli_1005_5005_mine.zip": zip_of({"layernorm.ipynb": notebook_bytes(CORRECT)}),   # a zip of their own
        "mosseli_1005_5005_huge.ipynb": b" " * (6 * 2**20),                                  # over 5 MB
    }
    return zip_of(members)


def zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, content in members.items():
            bundle.writestr(name, content)
    return buffer.getvalue()


def write_roster(path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "student_id"])
        writer.writerow(["    Points Possible", "", "", "", "", ""])
        for canvas_id, (student, name) in ROSTER.items():
            writer.writerow([name, canvas_id, "", student, "Section A", student])


@pytest.mark.quick
def test_canvas_names_are_read_and_others_are_not():
    match = CANVAS_NAME.fullmatch("parkdee_LATE_1004_5004_layernorm-1.ipynb")
    assert (match["late"], match["user_id"], match["filename"]) == ("LATE_", "1004", "layernorm-1.ipynb")
    assert CANVAS_NAME.fullmatch("layernorm.ipynb") is None
    assert CANVAS_NAME.fullmatch("a_1_2_sub/layernorm.ipynb") is None
    # Canvas keeps word characters of the sortable name, an underscore among them (and removes `_<digits>_`).
    match = CANVAS_NAME.fullmatch("o_brienpat_LATE_1006_5006_layernorm.ipynb")
    assert (match["lastfirst"], match["late"], match["user_id"]) == ("o_brienpat", "LATE_", "1006")


@pytest.mark.quick
def test_of_two_uploads_under_one_name_the_later_attachment_is_kept(tmp_path):
    for name in ("lopezana_1001_99_layernorm.ipynb", "lopezana_1001_100_layernorm.ipynb"):
        (tmp_path / name).write_text("{}")
    assert CanvasCollector().newest_copies(str(tmp_path)) == {("1001", NOTEBOOK): "lopezana_1001_100_layernorm.ipynb"}


@pytest.mark.quick
def test_a_member_whose_declared_size_lies_is_not_extracted_and_the_others_are(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    data = zip_of({"a_1_1_layernorm.ipynb": b"x" * 1000, "b_2_2_layernorm.ipynb": b"{}"})
    # Make the first member's central-directory and local sizes claim 10 bytes: its CRC check fails on reading.
    data = data.replace((1000).to_bytes(4, "little"), (10).to_bytes(4, "little"))
    (archive / "submissions.zip").write_bytes(data)
    CanvasExtractor().extract(str(archive), str(tmp_path / "extracted"))
    assert sorted(path.name for path in (tmp_path / "extracted" / "submissions").iterdir()) == ["b_2_2_layernorm.ipynb"]


@pytest.mark.quick
def test_a_member_whose_compressed_data_is_damaged_is_not_extracted_and_the_others_are(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    data = bytearray(zip_of({"a_1_1_layernorm.ipynb": b"x" * 5000, "b_2_2_layernorm.ipynb": b"{}"}))
    start = data.index(b"a_1_1_layernorm.ipynb") + len("a_1_1_layernorm.ipynb")    # its deflate stream follows
    data[start:start + 8] = bytes(byte ^ 0xFF for byte in data[start:start + 8])
    (archive / "submissions.zip").write_bytes(bytes(data))
    CanvasExtractor().extract(str(archive), str(tmp_path / "extracted"))
    assert sorted(path.name for path in (tmp_path / "extracted" / "submissions").iterdir()) == ["b_2_2_layernorm.ipynb"]


@pytest.fixture(scope="module")
def collected(course, tmp_path_factory):
    root = grading.copy_course(course, tmp_path_factory.mktemp("canvas") / "course")
    layout = Course(root)
    archive = layout.autograder / "downloaded" / A / "archive"
    archive.mkdir(parents=True)
    (archive / "submissions.zip").write_bytes(canvas_zip())
    write_roster(layout.autograder / "roster.csv")
    result = grading.nbgrader(root, "zip_collect", A)
    return root, result.stdout + result.stderr


@pytest.mark.grading
def test_each_roster_student_gets_their_newest_notebook_and_nothing_else(collected):
    root, log = collected
    submitted = Course(root).folder("submitted")
    assert sorted(path.name for path in submitted.iterdir()) == ["ana", "ben", "cai", "dee"]
    for student in ("ana", "ben", "cai", "dee"):
        assert sorted(path.name for path in (submitted / student / A).iterdir()) == [NOTEBOOK]
    newest = nbformat.read(submitted / "cai" / A / NOTEBOOK, as_version=4)
    assert CORRECT.strip() in "".join(cell.source for cell in newest.cells)
    assert not list(root.rglob("escaped.ipynb")) and not list(root.parent.glob("escaped.ipynb"))
    for said in ("Canvas user 9999) is not on the roster", "wucai_1003_5003_layernorm.ipynb, an older copy",
                 "mosseli_1005_5005_mine.zip (not a notebook",
                 "mosseli_1005_5005_huge.ipynb is over the notebook limit",
                 "../../../escaped.ipynb (not a notebook at the zip's top level)", "marked dee's hand-in LATE",
                 "Collected parkdee_LATE_1004_5004_Copy of layernorm.ipynb as layernorm.ipynb",
                 "mosseli_1005_5005_bbbbbbbbbbbbbbbb"):
        assert said in log, said


@pytest.mark.grading
def test_graded_reported_and_imported_into_canvas(collected, tmp_path):
    root, _ = collected
    students = ["ana", "ben", "cai", "dee"]
    summary = grade_class(root, [A], force=True, students=students, progress=False)
    assert not summary["failed"], summary["failed"]
    roster = Course(root).autograder / "roster.csv"
    assert report_main([A, "--course", str(root), "--roster", str(roster), "--out", str(tmp_path)]) == 0
    with (tmp_path / f"{A}-canvas.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    column = next(name for name in rows[0] if A in name)
    scores = {row["ID"]: row[column] for row in rows if row["ID"]}
    # The late hand-in keeps its points here: Canvas applies its own late policy to what is imported.
    assert {key: float(value) for key, value in scores.items() if value} == {
        "1001": FULL, "1002": BUG_SCORE, "1003": FULL, "1004": FULL}
    assert scores["1005"] == ""                    # on the roster, nothing graded: left blank, Canvas keeps its value


@pytest.mark.quick
def test_a_member_named_with_terminal_escapes_is_not_extracted_and_its_warning_prints_none(tmp_path, caplog):
    """nbgrader's zip_collect logs each extracted file's name as it is: a name carrying escape sequences (a window
    title, the clipboard through OSC 52) or a bidirectional override would act on the instructor's terminal."""
    archive = tmp_path / "archive"
    archive.mkdir()
    hostile = ["a_1_1_\x1b]0;pwned\x07layernorm.ipynb", "b_2_2_\x1b]52;c;cHduZWQ=\x07layernorm.ipynb",
               "c_3_3_layer\u202enrom.ipynb", "d_4_4_lay\x9b31mernorm.ipynb"]
    (archive / "submissions.zip").write_bytes(zip_of({**{name: b"{}" for name in hostile}, "e_5_5_layernorm.ipynb": b"{}"}))
    CanvasExtractor().extract(str(archive), str(tmp_path / "extracted"))
    assert [path.name for path in (tmp_path / "extracted" / "submissions").iterdir()] == ["e_5_5_layernorm.ipynb"]
    assert len(caplog.records) == len(hostile)
    assert all(character.isprintable() for record in caplog.records for character in record.getMessage())
