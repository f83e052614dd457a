"""Adding an assignment, as the instructors' page writes the recipe (*Adding an assignment*), done once on a
scratch course and thrown away: the template folder (tools/assignment_template: a master and the catalog beside
it) copied under solutions/, released by nbgrader, its master, release and catalog handed in, graded by the class
grader with no line of configuration added, and reported. One folder is the whole assignment."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import nbformat
import pytest
import yaml

from autograder.course import CATALOG_FILE, Course
from tools import grading
from tools.course import REPO, tool_env

pytestmark = [pytest.mark.grading, pytest.mark.cluster]

NEW = "99-tiny"
TEMPLATE = REPO / "tools" / "assignment_template"


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """A scratch course with the template added as a new assignment, released, handed in and graded."""
    root = grading.make_course(tmp_path_factory.mktemp("adding") / "course")
    course = Course(root)
    folder = course.folder("source") / NEW                       # recipe, step 1: the template, renamed
    shutil.copytree(TEMPLATE, folder)
    (folder / "assignment.ipynb").rename(folder / "tiny.ipynb")
    grading.generate_assignments(root, [NEW])                     # step 3: nbgrader generate_assignment
    catalog = yaml.safe_load((folder / CATALOG_FILE).read_text())
    release = course.release_notebook(NEW)
    known = {"master": (nbformat.read(folder / "tiny.ipynb", as_version=4), None),
             "release": (nbformat.read(release, as_version=4), None)}
    for entry in catalog["bugs"] + catalog["correct"]:
        known[entry["name"]] = (grading.submission_from_release(NEW, entry["cells"], release=release), entry)
    summary = grading.grade_submissions(root, [grading.Submission(name, NEW, notebook, filename="tiny.ipynb")
                                               for name, (notebook, _) in known.items()])
    return root, catalog, known, summary


def scores(root, student) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(Course(root).db_url) as gradebook:
        notebook = gradebook.find_submission_notebook("tiny", NEW, student)
        return {grade.name: grade.score for grade in notebook.grades}


def test_the_release_is_generated_without_the_catalog_or_a_solution(added):
    root, _, _, _ = added
    released = Course(root).path("release", ".", NEW)
    assert sorted(path.name for path in released.iterdir()) == ["tiny.ipynb"]
    text = (released / "tiny.ipynb").read_text()
    assert "weights.sum" not in text and "BEGIN HIDDEN TESTS" not in text and "raise NotImplementedError" in text


def test_the_new_assignment_grades_its_master_release_and_catalog_as_known(added):
    """Checked in the checker by the course's pattern, with no configuration added: the master earns every point,
    the release none, each correct alternative every point, and each bug loses exactly the checks it names, with a
    message that names its misconception."""
    root, catalog, known, summary = added
    assert not summary["failed"], summary["failed"]
    assert scores(root, "master") == {"test_last_dimension": 2.0, "test_large_inputs": 1.0}
    assert scores(root, "release") == {"test_last_dimension": 0.0, "test_large_inputs": 0.0}
    for entry in catalog["correct"]:
        assert scores(root, entry["name"]) == scores(root, "master"), entry["name"]
    for entry in catalog["bugs"]:
        got = scores(root, entry["name"])
        assert {name for name, score in got.items() if score == 0} == set(entry["fails"]), (entry["name"], got)
        notebook = nbformat.read(Course(root).path("autograded", entry["name"], NEW) / "tiny.ipynb", as_version=4)
        shown = " ".join(grading.cell_error(notebook, check) for check in entry["fails"])
        assert entry["message"] in shown, (entry["name"], shown)


def test_the_new_assignment_is_reported(added, tmp_path):
    root, _, known, _ = added
    result = subprocess.run([sys.executable, "-m", "autograder.report", NEW, "--course", str(root),
                             "--out", str(tmp_path)], env=tool_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / f"{NEW}-checks.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["student"] for row in rows) == sorted(known)
    assert {row["student"]: float(row["total"]) for row in rows}["master"] == 3
    assert NEW in (tmp_path / f"{NEW}-report.html").read_text()
