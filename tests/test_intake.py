"""autograder/plugins/intake.py's Intake, on small hand-made notebooks and folders: what a hand-in wrote that is the
grader's (flags, tags) is dropped, nbgrader metadata nbgrader would choke on is repaired for that notebook alone,
a notebook refused or over its limit is graded as the release, and of the files beside it only what the release
ships is kept in the kernel's folder. (The hostile classes grade the same hand-ins end to end:
tests/test_grader_robustness.py and tests/test_hostile_handins.py.)"""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.cells import FLAGS, grade_id
from autograder.plugins import intake
from autograder.plugins.intake import NOT_SENT, REFUSED_NOTEBOOK, Intake
from tests.nbgrader_command import NbgraderCommand

pytestmark = pytest.mark.quick

A, STUDENT, NOTEBOOK = "01-task", "ada", "task"


def record(grade_id: str, **fields) -> dict:
    return {"nbgrader": {"grade_id": grade_id, "schema_version": 3, "locked": False, "grade": False,
                         "solution": False, **fields}}


def release() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_markdown_cell("# The task", metadata=record("intro", locked=True)),
        new_code_cell("def answer():\n    raise NotImplementedError", metadata=record("answer", solution=True)),
        new_code_cell("assert answer() == 1", metadata=record("test_answer", grade=True, locked=True, points=2)),
    ])


@pytest.fixture
def folders(tmp_path):
    """A course with the assignment's release (its notebook and a data file it ships), a hand-in and the folder
    nbgrader filled for the kernel: every file handed in, and the master's own files."""
    for step in ("release", "source"):
        (tmp_path / step / A).mkdir(parents=True)
    nbformat.write(release(), tmp_path / "release" / A / f"{NOTEBOOK}.ipynb")
    (tmp_path / "release" / A / "data.csv").write_text("x\n1\n")
    for step in ("submitted", "autograded"):
        folder = tmp_path / step / STUDENT / A
        folder.mkdir(parents=True)
        (folder / "data.csv").write_text("x\n2\n")
        (folder / "notes.txt").write_text("my notes")
    return tmp_path


def run(folders, notebook, **info) -> tuple[nbformat.NotebookNode, dict]:
    resources = {"nbgrader": {"assignment": A, "student": STUDENT, "notebook": NOTEBOOK, **info}}
    converter = NbgraderCommand(folders, source_directory="source", release_directory="release",
                                submitted_directory="submitted", autograded_directory="autograded")
    return Intake(parent=converter).preprocess(notebook, resources)


def flags(notebook) -> list[str]:
    return notebook.metadata.get(FLAGS, {}).get("flags", [])


def test_what_is_the_graders_is_dropped_from_a_hand_in(folders):
    notebook = release()
    notebook.metadata[FLAGS] = {"flags": ["graded by hand: full marks"]}
    notebook.metadata["widgets"] = {"state": "a widget's state"}
    notebook.cells[1].metadata[FLAGS] = "forged"
    notebook.cells[2].metadata["tags"] = ["skip-execution"]          # nbclient would skip the test: a pass
    result, _ = run(folders, notebook)
    assert "widgets" not in result.metadata
    assert all(FLAGS not in cell.metadata and "tags" not in cell.metadata for cell in result.cells)
    assert flags(result) == ["not graded: files the release does not ship (notes.txt)"]


@pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId")   # the hand-in's, which Intake repairs
def test_broken_nbgrader_records_make_ordinary_cells_and_a_copied_cell_is_flagged(folders):
    notebook = release()
    empty, malformed, copy = (new_code_cell("x = 1", metadata={"nbgrader": {}}),
                              new_code_cell("y = 2", metadata={"nbgrader": "not a record"}),
                              new_code_cell("assert answer() == 1", metadata=record("test_answer", grade=True)))
    copy["id"] = notebook.cells[2]["id"]                                  # nbformat's id copied too
    notebook.cells += [empty, malformed, copy]
    result, _ = run(folders, notebook)
    assert [grade_id(cell) for cell in result.cells[1:]] == ["intro", "answer", "test_answer", None, None, None]
    assert len({cell["id"] for cell in result.cells}) == len(result.cells)
    assert "a copy of cell test_answer was graded as an ordinary cell" in flags(result)
    assert result.cells[3].source == "assert answer() == 1" and "nbgrader" in result.cells[3].metadata


def test_a_notebook_refused_before_it_was_read_is_graded_as_the_release(folders):
    handed_in = new_notebook(cells=[new_code_cell("def answer():\n    return 1")])
    why = "refused at intake: a link, not a file; graded as the unanswered release"
    result, _ = run(folders, handed_in, **{REFUSED_NOTEBOOK: why})
    assert [cell.source for cell in result.cells[1:]] == [cell.source for cell in release().cells]
    assert why in flags(result) and result.cells[0].source.startswith("**Grader's note.**")


@pytest.mark.parametrize("told", [False, True], ids=["measured", "told by the packer"])
def test_a_notebook_over_the_limit_is_graded_as_the_release(folders, monkeypatch, told):
    monkeypatch.setattr(intake.bounded, "notebook_limit", lambda: 2_000)
    notebook = release()
    info = {}
    if told:                       # a worker's task: the packer left the notebook out and said its size
        info[NOT_SENT] = {f"{NOTEBOOK}.ipynb": 10 * 2**20}
    else:
        notebook.cells[1].source = "def answer():\n    return 1\n" + "# padding\n" * 400
    result, _ = run(folders, notebook, **info)
    assert "raise NotImplementedError" in result.cells[2].source
    assert any(flag.startswith("refused at intake: the notebook is") and "graded as the unanswered release" in flag
               for flag in flags(result))


def test_only_the_files_the_release_ships_stay_beside_the_notebook(folders):
    """The kernel's folder keeps a handed-in data.csv (the release ships one) and loses notes.txt; the student
    reads why at the top of the graded notebook."""
    result, _ = run(folders, release())
    graded = folders / "autograded" / STUDENT / A
    assert sorted(path.name for path in graded.iterdir()) == ["data.csv"]
    assert (graded / "data.csv").read_text() == "x\n2\n"
    assert rendered(result.cells[0].source) == (
        "<p><strong>Grader's note.</strong> Not graded: files the release does not ship (notes.txt).</p>")


def rendered(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown).strip()


def test_the_grader_s_note_names_each_file_as_text(folders):
    """A file named like markup (an image that runs a script, a link) reads as its name in the grader's note."""
    submitted = folders / "submitted" / STUDENT / A
    for name in ("<img src=x onerror=alert(1)>.txt", "[click](javascript:alert(1)).txt", "*bold*.txt"):
        (submitted / name).write_text("not shipped")
    result, _ = run(folders, release())
    page = rendered(result.cells[0].source)
    assert "<img" not in page and "<a " not in page and "<em>" not in page, page
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in page and "[click](javascript:alert(1)).txt" in page


def test_no_folder_is_left_that_the_class_graders_worker_would_not_have(folders):
    """A folder emptied of files the release does not ship, handed in empty, or a master's folder that nbgrader
    copied nothing into, is removed (the class grader's worker is sent files, never folders; nbgrader copies files
    only): by either front door the kernel reads the same folder, and so meets the same hidden inputs. A folder that
    holds a graded file, or one of the master's own files, stays."""
    graded = folders / "autograded" / STUDENT / A
    for folder in (graded, folders / "submitted" / STUDENT / A):
        (folder / "notes" / "deep").mkdir(parents=True)
        (folder / "notes" / "deep" / "a.txt").write_text("not shipped")
        (folder / "empty").mkdir()
    (folders / "release" / A / "data").mkdir()
    (folders / "release" / A / "data" / "table.csv").write_text("x\n")
    for folder in (graded, folders / "submitted" / STUDENT / A):
        (folder / "data").mkdir()
        (folder / "data" / "table.csv").write_text("x\n3\n")
    for folder in (folders / "source" / A, graded):          # nbgrader copies the master's own files
        (folder / "figures").mkdir()
        (folder / "figures" / "plot.png").write_bytes(b"png")
    (folders / "source" / A / "output").mkdir()                # a master's empty folder: nbgrader copies none
    (graded / "output").mkdir()                               # a student's folder of the same name, emptied
    (graded / "output" / "notes.txt").write_text("not shipped")
    (folders / "submitted" / STUDENT / A / "output").mkdir()
    (folders / "submitted" / STUDENT / A / "output" / "notes.txt").write_text("not shipped")
    run(folders, release())
    left = sorted(str(path.relative_to(graded)) for path in graded.rglob("*"))
    assert left == ["data", "data.csv", "data/table.csv", "figures", "figures/plot.png"]


def test_a_file_the_master_ships_is_never_removed(folders):
    """nbgrader copies the master's own files into the kernel's folder after the student's: those stay, whatever
    the hand-in held under that name."""
    (folders / "source" / A / "notes.txt").write_text("the master's notes")
    run(folders, release())
    assert (folders / "autograded" / STUDENT / A / "notes.txt").exists()
