"""The class report, the grade exports and the feedback summary, against a class whose answers are known.

The class is made of graded work, not graded anew: the session's engine sample of assignment 1 (`graded`,
tests/grading_fixtures.py: the master, the release, three catalog bugs, two alternatives and a copy of the
lesson), each submission cloned under new student ids, a known number of times, into a course of its own
(its gradebook rows through nbgrader's API, its autograded notebook copied). So what every student got right
and wrong is known from the catalog alone (a bug fails exactly its `fails`; the master and the alternatives
fail nothing; the release fails everything; a copy fails the checks of the answers it leaves as the release's
stub), and every count, rate, correlation and flag of the report is checked against numbers computed here
from the catalog. Two clones get grader flags, one a known grading time, one an id written to break HTML and
spreadsheets; a student handed in without being graded and one is listed without a submission; the roster
misses a graded student and lists one the gradebook does not know.

The page and one student's feedback (nbgrader's GenerateFeedback with the course's configuration) are opened
in Chromium, offline; screenshots go to _build/test-output/class-report/.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from docutils.nodes import make_id
from sqlalchemy.exc import SAWarning

from tools import grading
from tools.course import COURSE, Course, venv_on_path

from autograder.pages import formulas
from autograder.report import analysis
from autograder.report.__main__ import main as report_main

A = "01-layernorm"
OUTPUT = COURSE.root / "_build" / "test-output" / "class-report"
HOSTILE = '=HYPERLINK("x")<img src=x onerror=alert(1)>'          # a student id, as an LMS could send one
FLAGS = {"tampering detected after test_gradients: builtins", "=cmd|' /C calc'!A0 <b>rule broken</b>"}
SLOW = 42.5                                                       # seconds given to one clone's notebook


# --- the known class -----------------------------------------------------------------------------------------

# Clones of each kind of sampled submission; the bugs get distinct counts, so that the class, not a tie,
# decides the ranking of the mistakes.
# With the engine's sample of assignment 1 (the master, the release, two bugs, an alternative, the copy):
# 6 + 3 + 8 + 6 + 5 + 2, a class of 30.
CLONES = {"solution": 6, "release": 3, "correct": 5, "copy": 2}
BUG_CLONES = [8, 6, 4, 3, 2, 2]


def copies_per_source(sample: list[grading.Submission], variants: list[grading.Variant]) -> dict[str, int]:
    """How many clones of each sampled submission."""
    kinds = {variant.student: variant.kind for variant in variants}
    bugs = iter(BUG_CLONES)
    return {submission.student: next(bugs) if kinds.get(submission.student) == "bug" else
            CLONES[kinds.get(submission.student) or submission.student.rsplit("--", 1)[1]]
            for submission in sample}


def expected_failures(source: str, variants: list[grading.Variant], answers: dict[str, str]) -> set[str]:
    """The checks a known submission fails, from the catalog (`answers`: each check's answer cell)."""
    if source.endswith("--solution"):
        return set()
    if source.endswith("--release"):
        return set(answers)
    variant = next(variant for variant in variants if variant.student == source)
    if variant.kind == "bug":
        return set(variant.fails)
    if variant.kind == "correct":
        return set()
    # A copy: the lessons' code in the cells it answers, the release's stub in the others.
    return {check for check, answer in answers.items() if answer not in variant.cells}


@dataclass
class KnownClass:
    course: Path
    out: Path
    variants: list[grading.Variant]                             # the catalog of assignment 1
    points: dict[str, float]                                    # each check's points, in the notebook's order
    source: dict[str, str] = field(default_factory=dict)        # student -> the sampled submission it copies
    fails: dict[str, set[str]] = field(default_factory=dict)    # student -> the checks it fails
    flags: dict[str, list[str]] = field(default_factory=dict)   # student -> the flags its notebook holds
    stderr: str = ""
    slow: str = ""
    not_in_roster: str = ""

    def clones(self, source: str) -> set[str]:
        return {student for student, of in self.source.items() if of == source}

    def total(self, student: str) -> float:
        return sum(points for check, points in self.points.items() if check not in self.fails[student])

    @property
    def bugs(self) -> list[grading.Variant]:
        return [variant for variant in self.variants if variant.kind == "bug"]


def clone(source_gradebook, target_gradebook, source: str, student: str) -> None:
    submitted = source_gradebook.find_submission(A, source)
    target_gradebook.update_or_create_student(student)
    copy = target_gradebook.add_submission(A, student)
    scores = {(nb.name, grade.name): grade.auto_score for nb in submitted.notebooks for grade in nb.grades}
    for notebook in copy.notebooks:
        for grade in notebook.grades:
            grade.auto_score = scores[notebook.name, grade.name]
    target_gradebook.db.commit()


def set_times(path: Path, seconds: float) -> None:
    """Rewrite an autograded notebook's cell timestamps so that it ran for exactly `seconds`."""
    notebook = nbformat.read(path, as_version=4)
    timed = [cell for cell in notebook.cells if cell.metadata.get("execution")]
    for index, cell in enumerate(timed):
        start = index * seconds / len(timed)
        end = (index + 1) * seconds / len(timed)
        cell.metadata["execution"] = {"iopub.status.busy": f"2026-12-01T10:00:{start:06.3f}Z",
                                      "iopub.status.idle": f"2026-12-01T10:00:{end:06.3f}Z"}
    path.chmod(0o644)
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def known(graded, tmp_path_factory) -> KnownClass:
    from nbgrader.api import Gradebook

    graded.grade(A)
    root = grading.copy_course(graded.course, tmp_path_factory.mktemp("class-report") / "course")
    (root / "book").mkdir(exist_ok=True)
    for lesson in nbformat.read(COURSE.release_notebook(A), as_version=4).metadata["lessons"]:
        shutil.copy(COURSE.root / "book" / f"{lesson}.md", root / "book")
    shutil.copy(COURSE.root / "_config.yml", root)
    course, source_course = Course(root), Course(graded.course)
    cells = grading.graded_cell_points(A)
    known = KnownClass(root, root / "reports", grading.all_variants(A),
                       {check: points for check, (_, points) in cells.items()})
    answers = {check: answer for check, (answer, _) in cells.items()}
    sample = grading.engine_sample(A)
    counts = copies_per_source(sample, known.variants)
    number = 0
    with venv_on_path(), Gradebook(source_course.db_url) as source_gradebook, Gradebook(course.db_url) as gradebook, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)          # nbgrader's add_submission, under SQLAlchemy 2
        for student in [student.id for student in gradebook.students]:
            gradebook.remove_student(student)
        for submission in sample:
            for _ in range(counts[submission.student]):
                number += 1
                student = HOSTILE if number == 9 else f"student-{number:02d}"
                clone(source_gradebook, gradebook, submission.student, student)
                shutil.copytree(source_course.path("autograded", submission.student, A),
                                course.path("autograded", student, A))
                known.source[student] = submission.student
                known.fails[student] = expected_failures(submission.student, known.variants, answers)
        gradebook.update_or_create_student("absent-student")            # listed, handed nothing in
    notebook_name = COURSE.master_notebook(A).name
    for student in known.source:
        notebook = nbformat.read(course.path("autograded", student, A) / notebook_name, as_version=4)
        known.flags[student] = grading.grader_flags(notebook)
    flagged = sorted(known.source)[:2]
    for student, flag in zip(flagged, sorted(FLAGS)):
        path = course.path("autograded", student, A) / notebook_name
        notebook = nbformat.read(path, as_version=4)
        notebook.metadata.setdefault(grading.flags_key(), {}).setdefault("flags", []).append(flag)
        path.chmod(0o644)
        nbformat.write(notebook, path)
        known.flags[student] = grading.grader_flags(notebook)
    known.slow = sorted(known.source)[-1]
    set_times(course.path("autograded", known.slow, A) / notebook_name, SLOW)
    late = course.path("submitted", "late-student", A)
    late.mkdir(parents=True)
    (late / notebook_name).write_text("{}")

    # The roster: every clone but one, under Canvas's columns; a student the gradebook does not know; the
    # listed student who handed nothing in.
    known.not_in_roster = sorted(known.source)[3]
    roster = root / "roster.csv"
    with roster.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "student_id"])
        writer.writerow(["    Points Possible", "", "", "", "", ""])          # as Canvas's own export has it
        for index, student in enumerate(sorted(known.source) + ["absent-student", "lms-only"]):
            if student != known.not_in_roster:
                writer.writerow([f'Doe, "{index}"', 1000 + index, f"S{index}", f"login{index}", "Section A", student])
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert report_main([A, "--course", str(course.autograder), "--out", str(known.out),
                            "--roster", str(roster)]) == 0
    known.stderr = stderr.getvalue()
    return known


class Page(HTMLParser):
    """The report's elements that carry data- attributes, and the students listed under each mistake."""

    def __init__(self, text: str):
        super().__init__()
        self.rows: dict[str, list[dict]] = {}
        self.mistakes: list[dict] = []
        self.table = None
        self.in_students = self.in_message = False
        self.feed(text)

    def handle_starttag(self, tag, attributes):
        attributes = dict(attributes)
        if tag == "table":
            self.table = attributes.get("id")
        if tag == "tr" and self.table and any(key.startswith("data-") for key in attributes):
            self.rows.setdefault(self.table, []).append(attributes)
        if tag == "li" and "data-students" in attributes:
            self.mistakes.append({**attributes, "listed": []})
        if tag == "ul" and attributes.get("class") == "students":
            self.in_students = True
        self.in_message = tag == "span" and attributes.get("class") == "message"
        if tag == "p" and attributes.get("id") == "scores":
            self.scores = attributes

    def handle_endtag(self, tag):
        if tag == "ul":
            self.in_students = False

    def handle_data(self, data):
        if self.in_students and data.strip():
            self.mistakes[-1]["listed"].append(data)
        if self.in_message:
            self.mistakes[-1]["message"] = self.mistakes[-1].get("message", "") + data


@pytest.fixture(scope="module")
def page(known) -> Page:
    return Page((known.out / f"{A}-report.html").read_text())


# --- the report's numbers --------------------------------------------------------------------------------------

def test_score_distribution_is_the_class_built(known, page):
    totals = [known.total(student) for student in known.source]
    assert int(page.scores["data-students"]) == len(totals) == 30
    assert float(page.scores["data-mean"]) == pytest.approx(statistics.fmean(totals), abs=1e-3)
    assert float(page.scores["data-median"]) == statistics.median(totals)
    assert float(page.scores["data-min"]) == min(totals) and float(page.scores["data-max"]) == max(totals)


def test_every_check_pass_rate_and_item_analysis(known, page):
    students = sorted(known.source)
    checks = known.points
    rows = {row["data-check"]: row for row in page.rows["checks"]}
    assert list(rows) == list(checks), "one row per graded cell, in the notebook's order"
    for check, points in checks.items():
        passed = [0.0 if check in known.fails[student] else 1.0 for student in students]
        rest = [known.total(student) - points * ok for student, ok in zip(students, passed)]
        row = rows[check]
        assert float(row["data-points"]) == points
        assert int(row["data-passed"]) == sum(passed) and int(row["data-students"]) == len(students), check
        assert float(row["data-difficulty"]) == pytest.approx(sum(passed) / len(students), abs=1e-4), check
        try:
            r = statistics.correlation(passed, rest)
        except statistics.StatisticsError:
            r = None
        if r is None:
            assert row["data-discrimination"] == "" and row["data-flag"] == "no variation", check
            continue
        assert float(row["data-discrimination"]) == pytest.approx(r, abs=1e-4), check
        assert row["data-flag"] == ("negative" if r <= -0.1 else "near zero" if abs(r) < 0.1 else ""), check


def test_mistakes_are_ranked_and_name_their_students(known, page):
    expected = {(student, check) for student in known.source for check in known.fails[student]}
    found = set()
    for mistake in page.mistakes:
        students = set(mistake["listed"])
        assert int(mistake["data-students"]) == len(students) == len(mistake["listed"])
        counts = dict(item.rsplit(":", 1) for item in mistake["data-checks"].split())
        for check, count in counts.items():
            failing = {student for student in students if check in known.fails[student]}
            assert int(count) == len(failing), (check, mistake)
            found |= {(student, check) for student in failing}
        # Clones of one submission say the same, so a mistake holds all of them or none.
        for source in set(known.source.values()):
            clones = known.clones(source)
            assert clones <= students or not clones & students, (source, mistake)
    assert found == expected, "every lost check of every student is counted under one mistake"
    assert sum(sum(int(item.rsplit(":", 1)[1]) for item in m["data-checks"].split()) for m in page.mistakes) \
        == len(expected)
    sizes = [int(mistake["data-students"]) for mistake in page.mistakes]
    assert sizes == sorted(sizes, reverse=True), "ranked by how many students"

    # Each bug's clones: under the messages that name its misconception, on exactly the checks it fails.
    for variant in known.bugs:
        clones = known.clones(variant.student)
        if not clones:
            continue
        holding = [m for m in page.mistakes if clones <= set(m["listed"])]
        assert {item.rsplit(":", 1)[0] for m in holding for item in m["data-checks"].split()} == set(variant.fails)
        for mistake in holding:
            assert variant.message in mistake["message"], (variant.name, mistake["message"])
            assert set(mistake["listed"]) == clones, f"{variant.name} shares a message with other students"
    # The release and the copies: one entry for every answer left as the release's stub.
    copies = {v.student for v in known.variants if v.kind == "copy"}
    stubs = {student for student, source in known.source.items() if source.endswith("--release") or source in copies}
    (unanswered,) = [m for m in page.mistakes if set(m["listed"]) & stubs]
    assert set(unanswered["listed"]) == stubs and "NotImplementedError" in unanswered["message"]


def page_text_content(page: str) -> str:
    """The text a browser shows of a page (markup dropped, entities decoded)."""
    texts: list[str] = []
    parser = HTMLParser(convert_charrefs=True)
    parser.handle_data = texts.append
    parser.feed(page)
    return "".join(texts)


def test_flags_students_not_graded_and_grading_time(known, page):
    flagged = {row["data-student"]: int(row["data-flags"]) for row in page.rows.get("flagged", [])}
    assert flagged == {student: len(flags) for student, flags in known.flags.items() if flags}
    page_text = (known.out / f"{A}-report.html").read_text()
    shown = page_text_content(page_text)
    for flag in FLAGS:
        assert flag in shown, "a flag is shown as the grader wrote it, as text"
    assert "<b>rule broken</b>" not in page_text, "a flag's markup is never the page's"
    not_graded = {row["data-student"] for row in page.rows["not-graded"]}
    assert not_graded == {"late-student", "absent-student"}
    (times,) = page.rows["times"]
    assert int(times["data-timed"]) == len(known.source)
    assert float(times["data-longest"]) == pytest.approx(SLOW) and times["data-longest-student"] == known.slow


def test_nothing_a_student_wrote_is_markup_in_the_page(known):
    page_text = (known.out / f"{A}-report.html").read_text()
    assert "<img src=x" not in page_text and "<b>rule broken" not in page_text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page_text
    assert "http://" not in page_text.replace("http://www.w3.org", "") and "https://" not in page_text


# --- the exports ---------------------------------------------------------------------------------------------------

def test_per_check_csv(known):
    checks = known.points
    with (known.out / f"{A}-checks.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["student", *checks, "total"]
    by_student = {row[0]: row for row in rows[1:]}
    assert len(by_student) == len(known.source)
    for student in known.source:
        row = by_student[("'" + student) if student == HOSTILE else student]   # neutralized, not dropped
        assert [float(value) for value in row[1:-1]] == [0.0 if check in known.fails[student] else points
                                                         for check, points in checks.items()]
        assert float(row[-1]) == known.total(student)


def test_canvas_import_round_trips_and_nobody_is_dropped_silently(known):
    with (known.out / f"{A}-canvas.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    points = sum(points for _, points in grading.graded_cell_points(A).values())
    assert rows[1] == ["Points Possible", "", "", "", "", f"{points:g}"]
    by_id = {row[1]: row for row in rows[2:]}                     # Canvas's ID column
    order = sorted(known.source) + ["absent-student", "lms-only"]
    assert len(by_id) == len(rows) - 2 == len(order) - 1
    for index, student in enumerate(order):
        if student == known.not_in_roster:
            assert str(1000 + index) not in by_id
            continue
        row = by_id[str(1000 + index)]
        assert row[:5] == [f'Doe, "{index}"', str(1000 + index), f"S{index}", f"login{index}", "Section A"]
        if student in known.source:
            assert float(row[5]) == known.total(student), student
        else:
            assert row[5] == "", f"{student} has no graded submission: Canvas must leave the grade as it is"
    for who in (known.not_in_roster, "absent-student", "lms-only", "late-student"):
        assert who in known.stderr, f"{who} is not reported on stderr"
    page_text = (known.out / f"{A}-report.html").read_text()
    assert known.not_in_roster in page_text and "lms-only" in page_text


# --- in Chromium, with the feedback page --------------------------------------------------------------------------

def generate_feedback(course: Course, student: str) -> Path:
    """`nbgrader generate_feedback A --student STUDENT --force`, in this process: nbgrader's GenerateFeedback
    converter with the course's own configuration (nbgrader_config.py, which loads the feedback plugins)."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.autograder)).load_config()
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = A, student
    converter = GenerateFeedback(coursedir=coursedir, config=config)
    converter.force = True
    converter.start()
    return course.path("feedback", student, A) / COURSE.master_notebook(A).with_suffix(".html").name


OPEN = r"""
import json, sys
from playwright.sync_api import sync_playwright
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
pages, shots = json.loads(sys.argv[1]), json.loads(sys.argv[2])
found = {}
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    for name, url in pages.items():
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        outside, dialogs = [], []
        page.route("http*://**/*", lambda route: (outside.append(route.request.url), route.abort()))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(url, wait_until="load")
        figures = page.evaluate("() => [...document.querySelectorAll('img.figure')].map(i => i.naturalWidth)")
        summary = page.evaluate("() => { const h = [...document.querySelectorAll('h2')].find(h => "
                                "h.textContent.startsWith('Your result')); return h ? "
                                "h.nextElementSibling.nextElementSibling.innerText : ''; }")
        formulas = page.evaluate("() => [...document.querySelectorAll('math')].map(m => m.getBoundingClientRect().width)")
        text = page.evaluate("() => document.body.innerText")
        page.screenshot(path=shots[name], full_page=name == "report")
        found[name] = {"outside": outside, "dialogs": dialogs, "figures": figures, "summary": summary,
                       "formulas": formulas, "tex_left": text.count("$$")}
    browser.close()
print(json.dumps(found))
"""


@pytest.mark.browser
def test_report_and_feedback_summary_in_chromium(known):
    sample_variance = sorted(known.clones(f"{A}--sample-variance"))[0]
    course = Course(known.course)
    feedback = generate_feedback(course, sample_variance)
    text = feedback.read_text()

    variant = next(v for v in known.bugs if v.name == "sample-variance")
    checks = known.points
    from autograder.plugins.withhold import hidden_lines

    hidden = hidden_lines(
        nbformat.read(COURSE.master_notebook(A), as_version=4))
    squeezed = "".join(html.unescape(text).split())
    assert hidden and not [line for line in hidden if line in squeezed], "the summary quotes hidden test code"
    assert "BEGIN HIDDEN TESTS" not in text
    lesson = nbformat.read(COURSE.release_notebook(A), as_version=4).metadata["lessons"][0]
    headings = {make_id(re.sub(r"[`$*]", "", line.lstrip("#"))) for line in
                (COURSE.root / "book" / f"{lesson}.md").read_text().splitlines() if re.match(r"^#{2,4} ", line)}
    summary = text[text.index("Your result"):]
    summary = summary[:summary.index("</ul>")]
    for check in checks:
        assert f'href="#{check}"' in summary and f'name="{check}"' in text, f"no link to {check}'s cell"
    for check in variant.fails:
        item = summary[summary.index(f'href="#{check}"'):]
        item = item[:item.index("</li>")]
        assert variant.message in item, f"the summary's line for {check} does not name the mistake"
        assert f"book/{lesson}.html" in item, f"the summary's line for {check} does not link the lesson"
        if f"book/{lesson}.html#" in item:
            anchor = item.split(f"book/{lesson}.html#", 1)[1].split('"', 1)[0]
            assert anchor in headings, f"{check} links a section the lesson does not have: #{anchor}"

    OUTPUT.mkdir(parents=True, exist_ok=True)
    pages = {"report": (known.out / f"{A}-report.html").as_uri(), "feedback": feedback.as_uri()}
    shots = {name: str(OUTPUT / f"{name}.png") for name in pages}
    opened = subprocess.run([sys.executable, "-c", OPEN, json.dumps(pages), json.dumps(shots)], capture_output=True,
                            text=True, cwd=COURSE.root, timeout=180)
    assert opened.returncode == 0, opened.stderr[-3000:]
    seen = json.loads(opened.stdout.strip().splitlines()[-1])
    assert seen["report"]["outside"] == [] and seen["report"]["dialogs"] == []
    assert len(seen["report"]["figures"]) == 2 and all(width > 0 for width in seen["report"]["figures"])
    assert seen["feedback"]["dialogs"] == []
    # The release's formulas are MathML, drawn by the browser itself: offline, with no script.
    release = nbformat.read(COURSE.release_notebook(A), as_version=4)
    written = sum(len(formulas.formulas(cell.source)) for cell in release.cells if cell.cell_type == "markdown")
    assert written and len(seen["feedback"]["formulas"]) >= written, seen["feedback"]["formulas"]
    assert all(width > 0 for width in seen["feedback"]["formulas"]) and seen["feedback"]["tex_left"] == 0
    lines = [line for line in seen["feedback"]["summary"].splitlines() if line.strip()]
    assert len(lines) == len(checks)
    assert sum(line.startswith("lost") for line in lines) == len(variant.fails)
    for path in shots.values():
        assert Path(path).stat().st_size > 10_000


# --- the parts, without a class --------------------------------------------------------------------------------------

@pytest.mark.quick
def test_point_biserial_is_pearsons_correlation():
    xs, ys = [1, 0, 1, 1, 0, 1], [5.0, 2.0, 4.0, 6.0, 3.0, 1.0]
    # The point-biserial formula: (mean of the passers' rest - the others') / the rest's population sd * sqrt(pq).
    passers, others = [y for x, y in zip(xs, ys) if x], [y for x, y in zip(xs, ys) if not x]
    p = len(passers) / len(xs)
    expected = (statistics.mean(passers) - statistics.mean(others)) / statistics.pstdev(ys) * (p * (1 - p)) ** 0.5
    assert analysis.pearson(xs, ys) == pytest.approx(expected)
    assert analysis.pearson([1, 1, 1], [1.0, 2.0, 3.0]) is None


@pytest.mark.quick
def test_messages_differing_in_numbers_are_one_mistake():
    key = analysis.message_key
    a = [("AssertionError", "an output vector has mean 0.87 along its last dimension instead of 0: use dim=-1")]
    b = [("AssertionError", "an output vector has mean 1 along its last dimension instead of 0: use dim=-1")]
    c = [("AssertionError", "gamma has no effect")]
    assert key(a, "NotImplementedError") == key(b, "NotImplementedError") != key(c, "NotImplementedError")
    assert key([("NotImplementedError", "")], "NotImplementedError") == ("NotImplementedError",)


@pytest.mark.quick
def test_a_message_in_the_summary_is_text_not_markup():
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    from autograder.pages import summary
    message = "[click](javascript:alert(1)) <script>alert(1)</script> *x* `y` $z$ & 3 < 4"
    rendered = markdown2html_mistune(summary.markdown_text(message))
    assert "<a" not in rendered and "<script" not in rendered and "<em>" not in rendered
    assert html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip() == message


@pytest.mark.quick
def test_section_anchors_are_sphinx_ids_and_the_site_is_github_pages():
    from autograder.pages import summary
    assert summary.anchor("Population variance, not sample variance") == "population-variance-not-sample-variance"
    assert summary.anchor(r"Why divide by $\sqrt{d_h}$: a measurement") == "why-divide-by-sqrt-d-h-a-measurement"
    assert summary.pages_url(COURSE.root / "_config.yml").endswith(".github.io/course/")
    lesson = summary.read_lesson(COURSE.root / "book" / "01-layernorm.md")
    assert lesson.title.startswith("1.") and lesson.sections
    assert all(not section.title.startswith("#") for section in lesson.sections)


@pytest.mark.quick
def test_formulas_become_mathml_and_code_and_prices_stay_as_written():
    from nbformat.v4 import new_markdown_cell, new_notebook

    source = r"The mean $$\mu = \frac{1}{D}\sum_i x_i$$ and $\sigma^2$; it costs $5 and $6; code `$x$`; broken $\frac{$"
    notebook, _ = formulas.TypesetMath().preprocess(new_notebook(cells=[new_markdown_cell(source)]), {})
    typeset = notebook.cells[0].source
    assert typeset.count("<math") == 2 and 'display="block"' in typeset and "<mfrac>" in typeset
    assert "$5 and $6" in typeset and "`$x$`" in typeset and r"$\frac{$" in typeset
